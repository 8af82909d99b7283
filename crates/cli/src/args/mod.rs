//! Command-line arguments of `hoard`; those of `create` and `rewrite`
//! (shared with the `mkdwarfs` personality) are in [`create`].

pub mod create;

use crate::size::parse_size;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hoard_reader::ImageOffset;
use std::path::PathBuf;

/// The version and, when built from a git checkout, the commit:
/// `0.1.0 (84a5946)` (see build.rs).
pub const VERSION: &str = env!("HOARD_VERSION");

/// Pack directory trees into compressed read-only images, then mount,
/// inspect, verify and extract them; DwarFS-compatible.
///
/// Images are DwarFS images: hoard reads every one from DwarFS 0.2 to 0.15,
/// and DwarFS reads the ones hoard writes. Invoked through a symlink named
/// mkdwarfs, dwarfs, dwarfsck or dwarfsextract, hoard takes those tools'
/// options instead (see their man pages). `hoard COMMAND --help` describes
/// each command.
#[derive(Debug, Parser)]
#[command(
    name = "hoard",
    version = VERSION,
    override_usage = "hoard <COMMAND> [ARGS]\n       hoard --generate <WHAT> [--out <DIR>]",
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Instead of running a command, write man pages for hoard, its
    /// commands and its DwarFS personalities (into --out DIR), or a shell
    /// completion script (hoard's to standard output; with --out DIR, those
    /// of hoard, mkdwarfs, dwarfs, dwarfsck and dwarfsextract).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub generate: Option<Generate>,
    /// The directory `--generate` writes the pages or scripts into
    /// (created if missing).
    #[arg(long, value_name = "DIR", requires = "generate")]
    pub out: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// `--generate`: man pages or a completion script.
    #[command(skip)]
    Generate(GenerateArgs),
    /// Pack a directory into an image.
    Create(Box<create::CreateArgs>),
    /// Make a self-running bundle: one executable file, a runtime followed
    /// by an image, that runs a program packed in the image.
    ///
    /// Running the bundle mounts its image privately with FUSE (or, where
    /// FUSE is missing, extracts it to a temporary directory) and runs the
    /// entry with the bundle's arguments; `BUNDLE --bundle-help` says more.
    Bundle(Box<BundleArgs>),
    /// Recompress an image, or rebuild its metadata.
    Rewrite(create::RewriteArgs),
    /// Join images into one, copying their compressed blocks as they are.
    Merge(MergeArgs),
    /// Verify an image: section hashes and metadata consistency.
    ///
    /// Exit status: 0 when no problem is found; 1 when problems are found
    /// (each printed on its own line) or the image cannot be opened at all
    /// (one error line). With --checksum: 0, or 1 when a file cannot be read.
    Check(CheckArgs),
    /// Repair a damaged image from its recovery data (`create --recovery`).
    Repair(RepairArgs),
    /// List the entries of an image.
    Ls(LsArgs),
    /// Write the contents of files in an image to standard output.
    Cat(CatArgs),
    /// Show what an image holds and how it was made.
    Info(InfoArgs),
    /// Extract an image into a directory.
    Extract(ExtractArgs),
    /// Mount an image with FUSE (or a stack of layers; or many images,
    /// one directory each, with --each).
    Mount(MountArgs),
    /// Unmount a mounted image.
    Umount(UmountArgs),
    /// Print the manifest of a tree, an image or a manifest file: one JSON
    /// line per entry.
    Manifest(ManifestArgs),
    /// Compare two trees, images or manifest files entry by entry.
    ///
    /// Exit status, as diff(1): 0 when the two are the same, 1 when they
    /// differ (each difference printed on its own line), 2 on trouble (a
    /// path missing or unreadable, a bad manifest or image, a bad option).
    Diff(DiffArgs),
    /// Make an Ed25519 key pair for signing images: NAME.key, NAME.pub.
    Keygen(KeygenArgs),
    /// Sign an image (in place, or into another file).
    Sign(SignArgs),
    /// Check that an image is signed by a trusted key and that every byte
    /// is as signed.
    Verify(VerifyArgs),
    /// Store an image in an OCI registry (docker://HOST/REPO:TAG), for
    /// `mount`, `ls`, `cat`, `extract` and `info` to read by byte ranges.
    ///
    /// Credentials: HOARD_REGISTRY_USER and HOARD_REGISTRY_PASSWORD, or
    /// the docker/podman auth files (REGISTRY_AUTH_FILE,
    /// $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json).
    Push(PushArgs),
}

/// `hoard push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The image file to push.
    pub image: PathBuf,
    /// Where: `docker://HOST[:PORT]/REPO:TAG`.
    pub destination: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Print the result as JSON (the manifest's digest, the blob's digest
    /// and size, the signer).
    #[arg(long, short = 'j')]
    pub json: bool,
    /// No progress display.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// How registries (`docker://…`) are reached: by `push`, and by
/// `create -i docker://…`.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// Whether a registry must be reached over HTTPS (skopeo's option);
    /// `--tls-verify=false` allows plain HTTP, always allowed for
    /// loopback hosts. Also `remote_tls_verify` in HOARD_REMOTE, with its
    /// `remote_timeout` and `remote_retries`.
    #[arg(long = "tls-verify", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub tls_verify: bool,
}

impl RegistryArgs {
    /// The registry options these and HOARD_REMOTE give.
    pub fn options(&self) -> anyhow::Result<hoard_oci::registry::Options> {
        let remote = hoard_remote::Options::from_env().map_err(anyhow::Error::msg)?;
        Ok(self.options_over(&remote))
    }

    /// The registry options these give over the remote options `remote`:
    /// plain HTTP only when neither requires HTTPS.
    fn options_over(&self, remote: &hoard_remote::Options) -> hoard_oci::registry::Options {
        hoard_oci::registry::Options {
            tls_verify: self.tls_verify && remote.tls_verify,
            ..hoard_remote::registry::transfer_options(remote)
        }
    }
}

/// `hoard bundle`.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The program the bundle runs: a path inside the input (e.g.
    /// `bin/app`), an executable file or a symlink.
    #[arg(long, value_name = "REL_PATH")]
    pub entry: PathBuf,
    /// The runtime to put in front of the image (default: `hoard-runtime`
    /// beside this program).
    #[arg(long, value_name = "FILE")]
    pub runtime: Option<PathBuf>,
    /// The input (a directory, an archive, or an image, taken as it is)
    /// and the bundle to write (`-o`), with the options of `hoard create`.
    #[command(flatten)]
    pub create: create::CreateArgs,
}

/// `hoard merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The images to join, in order.
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// The image to write.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// The directory the next part goes under (one per part, in order;
    /// default: each part's file name without its extension).
    #[arg(long = "as", value_name = "NAME", conflicts_with = "union")]
    pub names: Vec<String>,
    /// Join the parts' trees at the root; a path in two parts is an error
    /// unless both are directories.
    #[arg(long)]
    pub union: bool,
    /// Store a file several parts hold once (the default).
    #[arg(long, overrides_with = "no_dedupe")]
    pub dedupe: bool,
    /// Keep each part's copy of files several parts hold.
    #[arg(long)]
    pub no_dedupe: bool,
    /// Compress the data again (as `create` does, at `-l`), instead of
    /// copying the parts' blocks; parts of different block sizes need it.
    #[arg(long)]
    pub recompress: bool,
    /// Compression level (0-9) of the metadata, and with --recompress of
    /// the data.
    #[arg(short = 'l', long = "compress-level", default_value_t = hoard_writer::level::DEFAULT_LEVEL,
          value_parser = clap::value_parser!(u8).range(0..=9))]
    pub level: u8,
    /// Block compression (with --recompress).
    #[arg(short = 'C', long = "compression", requires = "recompress")]
    pub compression: Option<String>,
    /// Block size as a power of two (with --recompress).
    #[arg(short = 'S', long = "block-size-bits", requires = "recompress")]
    pub block_size_bits: Option<u32>,
    /// Metadata compression.
    #[arg(long = "metadata-compression")]
    pub metadata_compression: Option<String>,
    /// Overwrite an existing output.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Compression threads (default: one per core).
    #[arg(short = 'N', long = "num-workers")]
    pub workers: Option<usize>,
    /// Do not add this run to the history.
    #[arg(long)]
    pub no_history: bool,
    /// Print no summary.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub protect: crate::trust::OutputArgs,
    #[command(flatten)]
    pub keys: crate::trust::InputKeyArgs,
}

/// `hoard keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Write NAME.key (the secret key, mode 0600) and NAME.pub.
    #[arg(short = 'o', long = "output", value_name = "NAME")]
    pub name: PathBuf,
    /// A comment for the public key (default: user@host).
    #[arg(short = 'C', long)]
    pub comment: Option<String>,
    /// Overwrite existing key files.
    #[arg(short = 'f', long)]
    pub force: bool,
}

/// `hoard sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The image to sign (replaced by the signed image unless -o).
    pub image: PathBuf,
    /// The secret key: `hoard keygen`'s NAME.key or an OpenSSH ed25519
    /// private key (unencrypted).
    #[arg(short = 'k', long, value_name = "KEY")]
    pub key: PathBuf,
    /// Write the signed image here instead of replacing IMAGE.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Overwrite an existing output file.
    #[arg(short = 'f', long)]
    pub force: bool,
    #[command(flatten)]
    pub claims: crate::trust::ClaimArgs,
}

/// `hoard verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The image (a file or a URL).
    pub image: PathBuf,
    /// A public key file whose keys are trusted (repeatable; also
    /// HOARD_TRUST, files separated by `:`).
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    #[command(flatten)]
    pub expect: crate::trust::ExpectArgs,
    /// Where the image starts in the file: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    pub offset: ImageOffset,
    /// Print the result as JSON.
    #[arg(long, short = 'j')]
    pub json: bool,
}

/// How `manifest` and `diff` open an image they are named: where it starts,
/// and the layers stacked on it (each command says on which).
#[derive(Debug, Args)]
pub struct ManifestImage {
    /// Where an image starts in its file: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    pub offset: ImageOffset,
    /// Images stacked as layers (repeatable, bottom first).
    #[arg(long = "layer", value_name = "LAYER")]
    pub layers: Vec<PathBuf>,
    /// Stack layers even on other images than they were made on.
    #[arg(long)]
    pub force_stack: bool,
}

/// `hoard manifest`.
#[derive(Debug, Args)]
#[command(mut_arg("layers", |a| a.help(
    "An image stacked on PATH (an image) as a layer (repeatable, bottom first): \
     the manifest of the merged tree"
)))]
pub struct ManifestArgs {
    /// A directory, an image or a manifest file.
    pub path: PathBuf,
    #[command(flatten)]
    pub image: ManifestImage,
}

/// `hoard diff`.
#[derive(Debug, Args)]
#[command(mut_arg("layers", |a| a.help(
    "An image stacked on FIRST (an image) as a layer (repeatable, bottom first): \
     the merged tree is compared"
)))]
pub struct DiffArgs {
    /// A directory, an image or a manifest file.
    pub first: PathBuf,
    /// Another one, to compare with the first.
    pub second: PathBuf,
    /// Fields to leave out of the comparison, comma-separated: type, mode,
    /// uid, gid, size, mtime, mtime_ns, nlink, link, target, rdev, sha256.
    #[arg(long, value_name = "FIELDS")]
    pub ignore: Vec<String>,
    /// Print only the differences, no summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    #[command(flatten)]
    pub image: ManifestImage,
}

/// `hoard mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// The image file, or several stacked as layers (the last on top,
    /// overlayfs rules), then where to mount them.
    #[arg(num_args = 2.., required = true, value_names = ["IMAGE", "MOUNTPOINT"])]
    pub paths: Vec<PathBuf>,
    /// Show each image as a directory named after it (a directory given
    /// stands for every *.dwarfs in it), opened at first use.
    #[arg(long)]
    pub each: bool,
    /// Stack layers even on other images than they were made on.
    #[arg(long, alias = "force-stack")]
    pub force: bool,
    /// Mount options, comma-separated (cachesize=512m, decratio=0.8, workers=2, offset=auto, allow_other, preload_all, preload_category=NAME, analysis_file=FILE, ...).
    #[arg(short = 'o')]
    pub options: Vec<String>,
    /// Stay in the foreground.
    #[arg(short = 'f', long)]
    pub foreground: bool,
}

impl MountArgs {
    /// The images, bottom layer first.
    pub fn images(&self) -> &[PathBuf] {
        &self.paths[..self.paths.len().saturating_sub(1)]
    }

    /// Where to mount them.
    pub fn mountpoint(&self) -> &std::path::Path {
        self.paths.last().map_or("".as_ref(), PathBuf::as_path)
    }
}

/// `hoard umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// The mount point.
    pub mountpoint: PathBuf,
}

/// Options naming and opening an image.
#[derive(Debug, Clone, Args)]
pub struct ImageArgs {
    /// The image file.
    pub image: PathBuf,
    /// Where the image starts in the file: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    pub offset: ImageOffset,
    /// Bytes of decompressed blocks to keep in memory (suffixes k, m, g).
    #[arg(short = 's', long = "cache-size", default_value = "512m", value_parser = parse_size)]
    pub cache_size: usize,
    /// Read the image only if signed by a key in this public key file
    /// (repeatable; also HOARD_TRUST, files separated by `:`), checking
    /// every block against the signature before use.
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    #[command(flatten)]
    pub expect: crate::trust::ExpectArgs,
    /// Open an encrypted image with this identity file: an age identity
    /// (`age-keygen`) or an OpenSSH private key (repeatable; also
    /// HOARD_IDENTITY, files separated by `:`).
    #[arg(long = "identity", value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// Open an image encrypted with a passphrase, read from the first line
    /// of FILE.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,
}

/// Images stacked on the one named, as layers.
#[derive(Debug, Clone, Default, Args)]
pub struct LayerArgs {
    /// An image stacked on top as a layer (repeatable, bottom first): the
    /// merged tree is read, with overlayfs rules (whiteouts and opaque
    /// directories hide what lies below).
    #[arg(long = "layer", value_name = "LAYER")]
    pub layers: Vec<PathBuf>,
    /// Stack layers even on other images than they were made on.
    #[arg(long)]
    pub force_stack: bool,
}

/// `hoard check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    /// Also check SHA-512/256 hashes and read every file's data.
    #[arg(long, alias = "check-integrity")]
    pub full: bool,
    /// Print the result as JSON.
    #[arg(long, short = 'j')]
    pub json: bool,
    /// Instead of checking, print a checksum of every regular file in the
    /// format `sha256sum --check` reads.
    #[arg(long, value_enum)]
    pub checksum: Option<ChecksumAlgo>,
    /// Worker threads (default: one per core).
    #[arg(short = 'n', long = "num-workers")]
    pub workers: Option<usize>,
}

/// `hoard repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The damaged image.
    pub image: PathBuf,
    /// Write the repaired image here instead of replacing IMAGE (which is
    /// replaced only after the repaired copy is written and verified).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long, short = 'j')]
    pub json: bool,
}

/// Hash functions for `--checksum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChecksumAlgo {
    /// SHA-256.
    Sha256,
    /// SHA-512.
    Sha512,
    /// XXH3, 128 bits.
    Xxh3,
}

/// `hoard ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    #[command(flatten)]
    pub layers: LayerArgs,
    /// The directory or file to list (default: the root).
    pub path: Option<String>,
    /// Long listing: mode, links, owner, group, size, time, name -> target.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// List subdirectories recursively.
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

/// `hoard cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    #[command(flatten)]
    pub layers: LayerArgs,
    /// Files to print, as paths inside the image.
    #[arg(required = true)]
    pub paths: Vec<String>,
}

/// `hoard info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    /// Print as JSON.
    #[arg(long, short = 'j')]
    pub json: bool,
    /// Also show what was fetched for a remote image (URL): requests,
    /// bytes, bytes from the on-disk cache, latency.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// `hoard extract`.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    #[command(flatten)]
    pub layers: LayerArgs,
    /// Directory to extract into (created if missing); with `--format`,
    /// the archive file to write, or `-` for standard output.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Write one archive instead of a tree: tar (pax), gnutar, cpio (newc)
    /// or zip.
    #[arg(short = 'f', long, value_enum)]
    pub format: Option<crate::archive::Format>,
    /// Options of the --format, comma-separated, as libarchive takes them
    /// (`[format:]option=value`, e.g. `zip:compression=store`,
    /// `compression-level=9`); one libarchive does not know is an error.
    #[arg(long, value_name = "OPTIONS", requires = "format")]
    pub format_options: Option<String>,
    /// Only extract entries matching these globs (`**` crosses directories;
    /// prefix `i:` for case-insensitive matching).
    #[arg(long = "pattern")]
    pub patterns: Vec<String>,
    /// More patterns, as positional arguments.
    #[arg(value_name = "PATTERN")]
    pub more_patterns: Vec<String>,
    /// Restore owners even when not running as root.
    #[arg(long)]
    pub owners: bool,
    /// Do not create character and block devices.
    #[arg(long)]
    pub skip_devices: bool,
    /// Do not create fifos and sockets.
    #[arg(long)]
    pub skip_specials: bool,
    /// Do not restore extended attributes (restored by default: all as
    /// root, `user.*` ones otherwise).
    #[arg(long)]
    pub no_xattrs: bool,
    /// Worker threads (default: one per core).
    #[arg(short = 'n', long = "num-workers")]
    pub workers: Option<usize>,
    /// Write files on N threads of their own besides one (0: one writer),
    /// the workers only reading and decompressing; by default each worker
    /// writes the files it reads. Not with --format.
    #[arg(long, value_name = "N", conflicts_with = "format")]
    pub num_disk_writers: Option<usize>,
    /// Keep going after an entry fails; exit 2 at the end.
    #[arg(long)]
    pub continue_on_error: bool,
}

/// What `--generate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// Man pages (hoard.1, hoard-create.1, ..., mkdwarfs.1, dwarfs.1,
    /// dwarfsck.1, dwarfsextract.1) into the --out directory.
    Man,
    /// A bash completion script: hoard's to standard output, or with --out
    /// one for each of hoard, mkdwarfs, dwarfs, dwarfsck and dwarfsextract.
    CompleteBash,
    /// A zsh completion script (as for complete-bash).
    CompleteZsh,
    /// A fish completion script (as for complete-bash).
    CompleteFish,
}

/// `--generate WHAT [--out DIR]`.
#[derive(Debug)]
pub struct GenerateArgs {
    /// What to write.
    pub what: Generate,
    /// Where man pages or completion scripts go.
    pub out: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The registry options `hoard ARGS` gives its registry client,
    /// over the default remote options.
    fn registry_options_of(args: &[&str]) -> hoard_oci::registry::Options {
        let cli = Cli::try_parse_from(std::iter::once("hoard").chain(args.iter().copied()))
            .expect("the arguments parse");
        let registry = match cli.command {
            Some(Command::Create(create)) => create.registry,
            Some(Command::Push(push)) => push.registry,
            other => panic!("not create or push: {other:?}"),
        };
        registry.options_over(&hoard_remote::Options::default())
    }

    #[test]
    fn tls_verify_reaches_the_registry_client() {
        let create = ["create", "-i", "docker://r.example/a:1", "-o", "a.dwarfs"];
        assert!(registry_options_of(&create).tls_verify);
        let off = [&create[..], &["--tls-verify=false"]].concat();
        assert!(!registry_options_of(&off).tls_verify);
        let push = [
            "push",
            "a.dwarfs",
            "docker://r.example/a:1",
            "--tls-verify",
            "false",
        ];
        assert!(!registry_options_of(&push).tls_verify);
        // HOARD_REMOTE's remote_tls_verify=false allows it too.
        let remote = hoard_remote::Options::parse("remote_tls_verify=false").unwrap();
        let args = RegistryArgs { tls_verify: true };
        assert!(!args.options_over(&remote).tls_verify);
        assert!(Cli::try_parse_from([
            "hoard",
            "push",
            "a",
            "docker://r/a:1",
            "--tls-verify=maybe"
        ])
        .is_err());
    }

    #[test]
    fn help_gives_every_command_a_line() {
        let mut cli = Cli::command();
        let help = cli.render_help().to_string();
        for sub in cli.get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no description", sub.get_name());
            assert!(
                help.lines()
                    .any(|l| l.trim_start().starts_with(sub.get_name()) && l.contains(&about)),
                "{} missing from:\n{help}",
                sub.get_name()
            );
        }
    }
}
