//! The options of `hoard create`, which are also those of `mkdwarfs`, and
//! of `hoard rewrite`; the groups of options both take are shared.

use clap::Args;
use hoard_format::history::HistoryEntry;
use hoard_writer::{history, CreateOptions};
use std::path::PathBuf;

/// `hoard create` / `mkdwarfs`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// Directory to pack, a tar or cpio archive (plain, gzip, zstd or
    /// xz; `-` for standard input), or a container image:
    /// `oci:LAYOUT[:TAG]`, `docker-archive:FILE[:REF]`,
    /// `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]`.
    #[arg(short = 'i', long = "input")]
    pub input: PathBuf,
    /// For a container image: the platform whose image an index names
    /// (`os/arch[/variant]`, as `linux/arm64`); default this machine's.
    #[arg(long, value_name = "PLATFORM")]
    pub platform: Option<String>,
    #[command(flatten)]
    pub registry: super::RegistryArgs,
    /// Image file to write.
    #[arg(short = 'o', long = "output", required_unless_present = "layers")]
    pub output: Option<PathBuf>,
    /// For a container image: write one layer per image layer into this
    /// directory instead, each over the ones below, named by the layer's
    /// chain of digests (layers already there are kept); `hoard mount`
    /// stacks them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "base"])]
    pub layers: Option<PathBuf>,
    /// Overwrite an existing image.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Flush the image to disk before renaming it into place (safe even
    /// from a power failure right after; off, as for mkdwarfs).
    #[arg(long)]
    pub fsync: bool,
    /// Preset 0 (fastest) to 9 (smallest); see `hoard create --help`.
    #[arg(short = 'l', long = "compress-level", default_value_t = hoard_writer::level::DEFAULT_LEVEL,
          value_parser = clap::value_parser!(u8).range(0..=9))]
    pub level: u8,
    /// Block size as a power of two (10 to 30).
    #[arg(short = 'S', long = "block-size-bits")]
    pub block_size_bits: Option<u32>,
    #[command(flatten)]
    pub codecs: CodecArgs,
    /// Segmenter window size as a power of two; 0 turns segmenting off
    /// (`CATEGORY::BITS` for one category).
    #[arg(short = 'W', long = "window-size")]
    pub window_size: Vec<String>,
    /// Segmenter window step, as a right shift of the window size
    /// (`CATEGORY::SHIFT` for one category).
    #[arg(short = 'w', long = "window-step")]
    pub window_step: Vec<String>,
    /// Finished blocks searched for repeated data, default 1
    /// (`CATEGORY::N` for one category).
    #[arg(short = 'B', long = "max-lookback-blocks")]
    pub lookback: Vec<String>,
    /// File order: none, path, revpath, similarity, name-nilsimsa, nilsimsa,
    /// or explicit:file=FILE (the files listed in FILE first, in its order,
    /// then the others) (`CATEGORY::ORDER` for one category).
    #[arg(long)]
    pub order: Vec<String>,
    /// Split files into categories, each with its own blocks and
    /// compression: fits, pcmaudio, binary, zip, incompressible (all, in
    /// that order, when given alone), hotness (with --hotness-list), or
    /// none. Levels 7 to 9 run zip unless told otherwise.
    #[arg(long, num_args = 0..=1, require_equals = true,
          default_missing_value = hoard_writer::categorize::ALL_NAMES)]
    pub categorize: Option<String>,
    /// The hot files, for `--categorize=hotness`: paths relative to the
    /// input, one a line (as `hoard mount -o analysis_file=FILE` writes
    /// them); laid out first, in this order, in blocks of their own.
    #[arg(long, value_name = "FILE")]
    pub hotness_list: Option<PathBuf>,
    /// Smallest file checked for incompressibility (suffixes k, m, g).
    #[arg(long, value_parser = crate::size::parse_size, default_value = "256")]
    pub incompressible_min_input_size: usize,
    /// Bytes compressed at a time to check for incompressibility.
    #[arg(long, value_parser = crate::size::parse_size, default_value = "1m")]
    pub incompressible_block_size: usize,
    /// Categorize incompressible parts of files, not only whole files.
    #[arg(long)]
    pub incompressible_fragments: bool,
    /// Compressed/original ratio from which data is incompressible.
    #[arg(long, default_value_t = 0.99)]
    pub incompressible_ratio: f64,
    /// zstd level of the incompressibility check.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub incompressible_zstd_level: i32,
    /// Do not store category names (nor category metadata).
    #[arg(long)]
    pub no_category_names: bool,
    /// Do not store category metadata (a later rewrite cannot use FLAC or
    /// RICEPP on those blocks then).
    #[arg(long)]
    pub no_category_metadata: bool,
    #[command(flatten)]
    pub resources: ResourceArgs,
    /// Include character and block devices.
    #[arg(long)]
    pub with_devices: bool,
    /// Include fifos and sockets.
    #[arg(long)]
    pub with_specials: bool,
    /// For an archive input: pack the members that can be read, list the
    /// others as warnings and exit 2, rather than fail at the first.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Leave out extended attributes (stored by default: every name the
    /// system lets hoard read, ACLs and capabilities included).
    #[arg(long)]
    pub no_xattrs: bool,
    /// Keep only the extended attributes whose names match this regular
    /// expression (e.g. `^user\.` or `^(security|system)\.`).
    #[arg(long, value_name = "REGEX")]
    pub xattr_filter: Option<String>,
    /// Store sparse files' holes as data.
    #[arg(long)]
    pub no_sparse_files: bool,
    /// Owner of every entry.
    #[arg(long)]
    pub set_owner: Option<u32>,
    /// Group of every entry.
    #[arg(long)]
    pub set_group: Option<u32>,
    /// Time of every entry: `now`, seconds since the epoch, or ISO 8601.
    #[arg(long)]
    pub set_time: Option<String>,
    /// Keep atime and ctime, not only mtime.
    #[arg(long)]
    pub keep_all_times: bool,
    /// Resolution of stored times: a number with a unit (ns, us, ms, s, min, h, d) or a unit.
    #[arg(long)]
    pub time_resolution: Option<String>,
    /// Change permissions, chmod style (`u+rwX,go-w`, `D0755,F0644`, `norm`).
    #[arg(long)]
    pub chmod: Option<String>,
    /// Pack only the paths listed in this file (`-` for standard input), one
    /// per line, relative to the input directory.
    #[arg(long)]
    pub input_list: Option<PathBuf>,
    /// Filter rule: `+ PATTERN`, `- PATTERN`, `. RULEFILE` (first match decides).
    #[arg(short = 'F', long = "filter", allow_hyphen_values = true)]
    pub filters: Vec<String>,
    /// Print which entries the filters include (+) and exclude (-), then stop.
    #[arg(long)]
    pub debug_filter: bool,
    /// Leave out directories that are empty (after filtering).
    #[arg(long)]
    pub remove_empty_dirs: bool,
    /// Metadata packing: auto, none, all, or a list of chunk_table, directories,
    /// shared_files, names, names_index, symlinks, symlinks_index, force, plain.
    #[arg(short = 'P', long = "pack-metadata", default_value = "auto")]
    pub pack_metadata: String,
    #[command(flatten)]
    pub history: HistoryArgs,
    /// Do not record the creation time in the metadata.
    #[arg(long)]
    pub no_create_timestamp: bool,
    /// Do not write a section index.
    #[arg(long)]
    pub no_section_index: bool,
    #[command(flatten)]
    pub protect: crate::trust::OutputArgs,
    /// Write a layer holding only what differs from this image (repeat
    /// for a stack, bottom first): new and changed entries, whiteouts
    /// for deleted ones; mount it on top with `hoard mount BASE LAYER`.
    #[arg(long = "base", value_name = "IMAGE")]
    pub base: Vec<PathBuf>,
    /// With --base: take files of the same size and modification time as
    /// unchanged without reading them.
    #[arg(long, requires = "base")]
    pub trust_mtime: bool,
    /// With --base: mark a directory whose base entries are all gone
    /// opaque (trusted.overlay.opaque=y, as OCI layers do) rather than
    /// whiting out each entry; DwarFS 0.15 does not see the mark.
    #[arg(long, requires = "base")]
    pub opaque_dirs: bool,
    /// With --base: store a file whose contents are unchanged but whose
    /// owner, mode, time or attributes changed as those alone
    /// (trusted.overlay.metacopy; overlayfs needs metacopy=on, DwarFS 0.15
    /// does not see the mark).
    #[arg(long, requires = "base")]
    pub metacopy: bool,
    /// With --base (several): use layers even on other images than they
    /// were made on.
    #[arg(long, requires = "base")]
    pub force_stack: bool,
    /// With --base: write a delta layer, whose new data may point into
    /// the bases' blocks (much smaller when files changed a little); it
    /// reads only on exactly these bases, and DwarFS does not read it.
    #[arg(long, requires = "base")]
    pub delta: bool,
    #[command(flatten)]
    pub keys: crate::trust::InputKeyArgs,
    /// No live progress display.
    #[arg(long)]
    pub no_progress: bool,
    /// Progress display (`mkdwarfs --progress`): none, or any other style.
    #[arg(long)]
    pub progress: Option<String>,
    /// Logging: error, warn, info, verbose, debug, trace (warn and above
    /// print warnings; error prints only errors).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Treat the input as an image and recompress it: all, block, metadata or none.
    #[arg(long, num_args = 0..=1, default_missing_value = "all")]
    pub recompress: Option<String>,
    /// With --recompress: re-apply owner, time, chmod and packing options.
    #[arg(long)]
    pub rebuild_metadata: bool,
}

/// `hoard rewrite` (also `mkdwarfs --recompress`).
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("compression", |a| a.help(
        "Block compression; `CATEGORY::SPEC` for the blocks of one category (repeatable)"
    )),
    mut_arg("memory_limit", |a| a.help("Memory for blocks in flight")),
    mut_arg("no_history", |a| a.help("Do not add this run to the history"))
)]
pub struct RewriteArgs {
    /// The image to read; several are layers (bottom first) merged into
    /// one image (flattened).
    #[arg(required = true, value_name = "IMAGE")]
    pub inputs: Vec<PathBuf>,
    /// With several images: stack layers even on other images than they
    /// were made on.
    #[arg(long)]
    pub force_stack: bool,
    /// The image to write.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Overwrite an existing output.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Flush the image to disk before renaming it into place.
    #[arg(long)]
    pub fsync: bool,
    /// Where the input image starts in its file: a byte offset or `auto`.
    #[arg(short = 'O', long = "image-offset", default_value = "auto")]
    pub offset: hoard_reader::ImageOffset,
    /// Preset whose codecs are used where -C and --metadata-compression are not given.
    #[arg(short = 'l', long = "compress-level", default_value_t = hoard_writer::level::DEFAULT_LEVEL,
          value_parser = clap::value_parser!(u8).range(0..=9))]
    pub level: u8,
    /// What to recompress: all, block, metadata or none. Flattening
    /// layers with metadata or none copies their compressed blocks as
    /// they are.
    #[arg(long, default_value = "all")]
    pub recompress: String,
    /// Lay the image out again with the files listed in FILE (one path a
    /// line, as `hoard mount -o analysis_file=FILE` writes them) first,
    /// in that order, in blocks of their own (category `hotness`).
    #[arg(long, value_name = "FILE")]
    pub hotness_list: Option<PathBuf>,
    #[command(flatten)]
    pub codecs: CodecArgs,
    /// Re-apply --set-owner, --set-group, --set-time, --chmod and -P to the metadata.
    #[arg(long)]
    pub rebuild_metadata: bool,
    /// Owner of every entry (with --rebuild-metadata).
    #[arg(long)]
    pub set_owner: Option<u32>,
    /// Group of every entry (with --rebuild-metadata).
    #[arg(long)]
    pub set_group: Option<u32>,
    /// Time of every entry (with --rebuild-metadata).
    #[arg(long)]
    pub set_time: Option<String>,
    /// Permission changes (with --rebuild-metadata).
    #[arg(long)]
    pub chmod: Option<String>,
    /// Metadata packing (with --rebuild-metadata or metadata recompression).
    #[arg(short = 'P', long = "pack-metadata", default_value = "auto")]
    pub pack_metadata: String,
    #[command(flatten)]
    pub resources: ResourceArgs,
    #[command(flatten)]
    pub history: HistoryArgs,
    /// Do not write a section index.
    #[arg(long)]
    pub no_section_index: bool,
    #[command(flatten)]
    pub protect: crate::trust::OutputArgs,
    #[command(flatten)]
    pub keys: crate::trust::InputKeyArgs,
    /// No live progress display.
    #[arg(long)]
    pub no_progress: bool,
}

/// Block, metadata and schema compression.
#[derive(Debug, Clone, Args)]
pub struct CodecArgs {
    /// Block compression, e.g. `zstd:level=19`, `lzma:level=9:extreme`, `lz4hc`, `null`;
    /// `CATEGORY::SPEC` for one category (repeatable).
    #[arg(short = 'C', long = "compression")]
    pub compression: Vec<String>,
    /// Metadata compression.
    #[arg(long = "metadata-compression")]
    pub metadata_compression: Option<String>,
    /// Schema and history compression.
    #[arg(long = "schema-compression")]
    pub schema_compression: Option<String>,
}

/// The threads and memory a build may take.
#[derive(Debug, Clone, Args)]
pub struct ResourceArgs {
    /// Compression threads (default: one per core).
    #[arg(short = 'N', long = "num-workers")]
    pub workers: Option<usize>,
    /// Memory for blocks in flight (suffixes k, m, g; default: a quarter of RAM).
    #[arg(short = 'L', long = "memory-limit", value_parser = crate::size::parse_size)]
    pub memory_limit: Option<usize>,
}

impl ResourceArgs {
    /// Sets the threads and memory of `options` that are given.
    pub fn apply(&self, options: &mut CreateOptions) {
        if let Some(n) = self.workers {
            options.workers = n.max(1);
        }
        if let Some(l) = self.memory_limit {
            options.memory_limit = l as u64;
        }
    }
}

/// What the image's history records of this run.
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// Do not record this run in the image's history.
    #[arg(long)]
    pub no_history: bool,
    /// Do not record the time of this run in the history.
    #[arg(long)]
    pub no_history_timestamps: bool,
}

impl HistoryArgs {
    /// The history entry of this run (at `now`, seconds since the epoch),
    /// unless none is to be recorded.
    pub fn entry(&self, now: i64) -> Option<HistoryEntry> {
        (!self.no_history).then(|| {
            history::this_run(
                std::env::args().collect(),
                (!self.no_history_timestamps).then_some(now.max(0) as u64),
            )
        })
    }
}

impl CreateArgs {
    /// The image to write (`-o`, which clap asks for unless `--layers`).
    pub fn image(&self) -> &std::path::Path {
        self.output.as_deref().unwrap_or(std::path::Path::new(""))
    }

    /// The rewrite that `mkdwarfs --recompress` stands for.
    pub fn as_rewrite(&self, what: &str) -> RewriteArgs {
        RewriteArgs {
            inputs: vec![self.input.clone()],
            force_stack: false,
            output: self.output.clone().unwrap_or_default(),
            force: self.force,
            fsync: self.fsync,
            offset: hoard_reader::ImageOffset::Auto,
            level: self.level,
            recompress: what.to_string(),
            hotness_list: None,
            codecs: self.codecs.clone(),
            rebuild_metadata: self.rebuild_metadata,
            set_owner: self.set_owner,
            set_group: self.set_group,
            set_time: self.set_time.clone(),
            chmod: self.chmod.clone(),
            pack_metadata: self.pack_metadata.clone(),
            resources: self.resources.clone(),
            history: self.history.clone(),
            no_section_index: self.no_section_index,
            protect: self.protect.clone(),
            keys: self.keys.clone(),
            no_progress: self.no_progress,
        }
    }
}
