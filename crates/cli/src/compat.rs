//! The DwarFS personalities: the `mkdwarfs`, `dwarfs`, `dwarfsck` and
//! `dwarfsextract` option sets, translated into `hoard` commands.

use crate::args::{
    CheckArgs, ChecksumAlgo, Cli, Command, ExtractArgs, GenerateArgs, ImageArgs, InfoArgs, LsArgs,
    MountArgs, VERSION,
};
use crate::size::parse_size;
use clap::{CommandFactory, Parser, ValueEnum};
use hoard_reader::ImageOffset;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Parses the command line according to the name the program runs under;
/// returns the commands to run in order.
pub fn parse(argv: &[OsString]) -> Result<Vec<Command>, clap::Error> {
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("hoard");
    match name {
        "dwarfsck" => Ok(Dwarfsck::try_parse_from(argv)?.into_commands()),
        "dwarfsextract" => Ok(vec![Dwarfsextract::try_parse_from(argv)?.into_command()]),
        "mkdwarfs" => Ok(vec![Command::Create(Box::new(
            Mkdwarfs::try_parse_from(argv)?.args,
        ))]),
        "dwarfs" | "mount.dwarfs" | "mount.hoard" => Ok(vec![Command::Mount(
            DwarfsMount::try_parse_from(argv)?.args,
        )]),
        _ if is_mount_helper_call(argv) => Ok(vec![Command::Mount(
            DwarfsMount::try_parse_from(argv)?.args,
        )]),
        _ => hoard(Cli::try_parse_from(argv)?),
    }
}

/// The command line of `hoard` itself: a subcommand, or `--generate`.
fn hoard(cli: Cli) -> Result<Vec<Command>, clap::Error> {
    match (cli.command, cli.generate) {
        (Some(command), _) => Ok(vec![command]),
        (None, Some(what)) => Ok(vec![Command::Generate(GenerateArgs { what, out: cli.out })]),
        (None, None) => Err(Cli::command().error(
            clap::error::ErrorKind::MissingSubcommand,
            "a command is required",
        )),
    }
}

/// The command lines of the personalities, for their man pages.
pub fn personalities() -> Vec<clap::Command> {
    vec![
        Mkdwarfs::command(),
        DwarfsMount::command(),
        Dwarfsck::command(),
        Dwarfsextract::command(),
    ]
}

/// `mount.fuse3` runs a `type fuse.hoard` fstab entry as
/// `hoard IMAGE MOUNTPOINT -o OPTIONS`: an image path where a subcommand
/// would be.
fn is_mount_helper_call(argv: &[OsString]) -> bool {
    argv.len() >= 3
        && argv[1]
            .to_str()
            .is_none_or(|a| !a.starts_with('-') && Cli::command().find_subcommand(a).is_none())
        && Path::new(&argv[1]).is_file()
}

/// Pack a directory tree into a DwarFS image (hoard as mkdwarfs; `hoard
/// create` takes the same options).
#[derive(Debug, Parser)]
#[command(name = "mkdwarfs", version = VERSION)]
struct Mkdwarfs {
    #[command(flatten)]
    args: crate::args::create::CreateArgs,
}

/// Mount a DwarFS image with FUSE (hoard as the dwarfs driver, also as
/// mount.dwarfs and mount.hoard; `hoard mount` takes the same options).
#[derive(Debug, Parser)]
#[command(name = "dwarfs", version = VERSION)]
struct DwarfsMount {
    #[command(flatten)]
    args: MountArgs,
}

/// Show and check a DwarFS image (hoard as dwarfsck; see also `hoard info`,
/// `hoard check` and `hoard ls`).
#[derive(Debug, Parser)]
#[command(name = "dwarfsck", version = VERSION)]
struct Dwarfsck {
    /// The image file.
    #[arg(short = 'i', long = "input")]
    input: Option<PathBuf>,
    /// The image file, as a positional argument.
    #[arg(value_name = "IMAGE", conflicts_with = "input")]
    image: Option<PathBuf>,
    /// Level of detail of the information printed (0 prints none).
    #[arg(short = 'd', long = "detail", default_value = "2")]
    detail: String,
    /// Print nothing but errors.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Where the image starts: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    offset: ImageOffset,
    /// List all entries instead of checking.
    #[arg(short = 'l', long = "list")]
    list: bool,
    /// Print a checksum of every regular file instead of checking.
    #[arg(long, value_parser = parse_checksum)]
    checksum: Option<ChecksumAlgo>,
    /// Worker threads.
    #[arg(short = 'n', long = "num-workers")]
    workers: Option<usize>,
    /// Bytes of decompressed blocks to keep in memory.
    #[arg(short = 's', long = "cache-size", default_value = "512m", value_parser = parse_size)]
    cache_size: usize,
    /// Also check SHA-512/256 hashes and read all data.
    #[arg(long = "check-integrity")]
    check_integrity: bool,
    /// Only show information, do not check.
    #[arg(long = "no-check")]
    no_check: bool,
    /// Print as JSON.
    #[arg(short = 'j', long)]
    json: bool,
}

fn parse_checksum(s: &str) -> Result<ChecksumAlgo, String> {
    let lower = s.to_ascii_lowercase();
    let name = match lower.as_str() {
        "sha2-256" | "sha-256" => "sha256",
        "sha2-512" | "sha-512" => "sha512",
        "xxh3-128" | "xxh3_128" => "xxh3",
        other => other,
    };
    ChecksumAlgo::from_str(name, true)
        .map_err(|_| format!("unsupported checksum '{s}' (sha256, sha512, xxh3)"))
}

/// An image as DwarFS's tools open it: no key trusted, no identity, no
/// passphrase (they know of none).
fn plain_image(image: PathBuf, offset: ImageOffset, cache_size: usize) -> ImageArgs {
    ImageArgs {
        image,
        offset,
        cache_size,
        trust: Vec::new(),
        expect: Default::default(),
        identity: Vec::new(),
        passphrase_file: None,
    }
}

impl Dwarfsck {
    fn into_commands(self) -> Vec<Command> {
        let image = plain_image(
            self.input.or(self.image).unwrap_or_default(),
            self.offset,
            self.cache_size,
        );
        if self.list {
            return vec![Command::Ls(LsArgs {
                image,
                layers: Default::default(),
                path: None,
                long: false,
                recursive: true,
            })];
        }
        let check = Command::Check(CheckArgs {
            image: image.clone(),
            full: self.check_integrity,
            json: self.json,
            checksum: self.checksum,
            workers: self.workers,
        });
        if self.checksum.is_some() {
            return vec![check];
        }
        let mut commands = Vec::new();
        if !self.quiet && self.detail != "0" {
            commands.push(Command::Info(InfoArgs {
                image,
                json: self.json,
                verbose: false,
            }));
        }
        if !self.no_check {
            commands.push(check);
        }
        commands
    }
}

/// Extract a DwarFS image into a directory (hoard as dwarfsextract; see
/// also `hoard extract`).
#[derive(Debug, Parser)]
#[command(name = "dwarfsextract", version = VERSION)]
struct Dwarfsextract {
    /// The image file.
    #[arg(short = 'i', long = "input", required = true)]
    input: PathBuf,
    /// Directory to extract into (default: the current directory); with
    /// `--format`, the archive file (default: standard output).
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// Write an archive instead: tar (pax), gnutar, cpio (newc) or zip.
    #[arg(short = 'f', long, value_enum)]
    format: Option<crate::archive::Format>,
    /// Options of the archive format, as libarchive takes them (zip:
    /// compression=store|deflate, compression-level=0..9; tar:
    /// xattrheader=SCHILY); any other is an error.
    #[arg(long, value_name = "OPTIONS", requires = "format")]
    format_options: Option<String>,
    /// Only extract entries matching these globs.
    #[arg(long = "pattern")]
    patterns: Vec<String>,
    /// More patterns.
    #[arg(value_name = "PATTERN")]
    more_patterns: Vec<String>,
    /// Where the image starts: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    offset: ImageOffset,
    /// Worker threads.
    #[arg(short = 'n', long = "num-workers")]
    workers: Option<usize>,
    /// Threads writing files besides one (0: one writer), the workers
    /// only reading; by default each worker writes the files it reads.
    #[arg(long, value_name = "N", conflicts_with = "format")]
    num_disk_writers: Option<usize>,
    /// Bytes of decompressed blocks to keep in memory.
    #[arg(short = 's', long = "cache-size", default_value = "512m", value_parser = parse_size)]
    cache_size: usize,
    /// Do not create devices.
    #[arg(long)]
    skip_devices: bool,
    /// Do not create fifos and sockets.
    #[arg(long)]
    skip_specials: bool,
    /// Keep going after an entry fails.
    #[arg(long)]
    continue_on_error: bool,
}

impl Dwarfsextract {
    fn into_command(self) -> Command {
        Command::Extract(ExtractArgs {
            image: plain_image(self.input, self.offset, self.cache_size),
            layers: Default::default(),
            output: self
                .output
                .unwrap_or_else(|| PathBuf::from(if self.format.is_some() { "-" } else { "." })),
            format: self.format,
            format_options: self.format_options,
            patterns: self.patterns,
            more_patterns: self.more_patterns,
            owners: false,
            skip_devices: self.skip_devices,
            skip_specials: self.skip_specials,
            no_xattrs: false,
            workers: self.workers,
            num_disk_writers: self.num_disk_writers,
            continue_on_error: self.continue_on_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Generate;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn dwarfsck_maps_to_info_and_check() {
        let cmds = parse(&argv(&[
            "/usr/bin/dwarfsck",
            "-i",
            "x.dwarfs",
            "--check-integrity",
        ]))
        .unwrap();
        assert!(matches!(&cmds[..], [Command::Info(_), Command::Check(c)] if c.full));
        let cmds = parse(&argv(&["dwarfsck", "x.dwarfs", "--checksum=sha256"])).unwrap();
        assert!(
            matches!(&cmds[..], [Command::Check(c)] if c.checksum == Some(ChecksumAlgo::Sha256))
        );
        let cmds = parse(&argv(&["dwarfsck", "-l", "x.dwarfs", "-O", "auto"])).unwrap();
        assert!(matches!(&cmds[..], [Command::Ls(l)] if l.recursive));
    }

    #[test]
    fn dwarfsextract_maps_to_extract() {
        let cmds = parse(&argv(&[
            "dwarfsextract",
            "-i",
            "x",
            "-o",
            "out",
            "--pattern",
            "*.txt",
            "-O",
            "12",
        ]))
        .unwrap();
        match &cmds[..] {
            [Command::Extract(e)] => {
                assert_eq!(e.output, PathBuf::from("out"));
                assert_eq!(e.patterns, vec!["*.txt".to_string()]);
                assert_eq!(e.image.offset, ImageOffset::At(12));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dwarfs_and_mount_helper_map_to_mount() {
        let cmds = parse(&argv(&[
            "dwarfs",
            "img",
            "/mnt",
            "-o",
            "cachesize=1g",
            "-f",
        ]))
        .unwrap();
        assert!(
            matches!(&cmds[..], [Command::Mount(m)] if m.foreground && m.options == ["cachesize=1g"])
        );
        let this_file = file!();
        if Path::new(this_file).is_file() {
            let cmds = parse(&argv(&["hoard", this_file, "/mnt", "-o", "ro"])).unwrap();
            assert!(matches!(&cmds[..], [Command::Mount(_)]));
        }
    }

    #[test]
    fn mkdwarfs_maps_to_create() {
        let cmds = parse(&argv(&[
            "mkdwarfs",
            "-i",
            "src",
            "-o",
            "x.dwarfs",
            "-l",
            "9",
            "-S",
            "22",
            "--order=path",
            "-F",
            "- *.o",
            "--set-owner",
            "0",
            "--no-progress",
        ]))
        .unwrap();
        let [Command::Create(c)] = cmds.as_slice() else {
            panic!("{cmds:?}")
        };
        assert_eq!(c.level, 9);
        assert_eq!(c.block_size_bits, Some(22));
        assert_eq!(c.filters, vec!["- *.o".to_string()]);
        assert!(parse(&argv(&["mkdwarfs", "-i", "src", "-o", "x", "-l", "10"])).is_err());
    }

    #[test]
    fn hoard_parses_subcommands() {
        assert!(parse(&argv(&["hoard", "ls", "x", "-lR"])).is_ok());
        assert!(parse(&argv(&["hoard", "frobnicate"])).is_err());
    }

    #[test]
    fn generate_is_an_option_instead_of_a_command() {
        let cmds = parse(&argv(&["hoard", "--generate", "man", "--out", "d"])).unwrap();
        assert!(matches!(&cmds[..],
            [Command::Generate(g)] if g.what == Generate::Man && g.out == Some("d".into())));
        assert!(parse(&argv(&["hoard", "--generate", "complete-bash", "ls", "x"])).is_err());
        assert!(parse(&argv(&["hoard", "--out", "d"])).is_err());
        let cmds = parse(&argv(&["/sbin/mount.dwarfs", "img", "/mnt", "-o", "ro"])).unwrap();
        assert!(matches!(&cmds[..], [Command::Mount(_)]));
    }
}
