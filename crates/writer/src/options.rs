//! Everything a build can be told: what to read ([`Input`]), where to
//! write, and how to compress, segment and order;
//! [`CreateOptions::at_level`] (in [`crate::level`]) fills them in for a
//! compression level.

use crate::categorize::CategorizeOptions;
use crate::delta::DeltaOptions;
use crate::filter::Filter;
use crate::metadata::AttrOptions;
use crate::order::Order;
use crate::output::OutputOptions;
use crate::path_list::PathList;
use crate::scan::ScanOptions;
use crate::{Error, Result};
use hoard_format::history::HistoryEntry;
use hoard_format::write::PackOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything `hoard create` can be told.
#[derive(Debug)]
pub struct CreateOptions {
    /// What to read.
    pub input: Input,
    /// The image to write, and what is added to it.
    pub output: OutputOptions,
    /// Block size, as a power of two.
    pub block_size_bits: u32,
    /// Block compression spec (`zstd:level=19`, ...).
    pub data_compression: String,
    /// Metadata compression spec.
    pub metadata_compression: String,
    /// Metadata compression spec for encoded metadata of at most
    /// [`crate::level::SMALL_METADATA`] bytes, where a slower codec's
    /// smaller output costs a mount milliseconds; None uses
    /// `metadata_compression` whatever the size.
    pub small_metadata_compression: Option<String>,
    /// Schema and history compression spec.
    pub schema_compression: String,
    /// Segmenter window, as a power of two; 0 turns segmenting off.
    pub window_bits: u32,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: u32,
    /// Finished blocks searched for repeats.
    pub lookback: usize,
    /// Content order.
    pub order: Order,
    /// Files laid out first, in the list's order, before the others in
    /// `order` (`--order=explicit:file=FILE`).
    pub explicit_order: Option<Arc<PathList>>,
    /// Compression threads.
    pub workers: usize,
    /// Memory for blocks in flight, in bytes.
    pub memory_limit: u64,
    /// What to include.
    pub scan: ScanOptions,
    /// Filter rules.
    pub filter: Option<Filter>,
    /// Owner, time and permission handling.
    pub attrs: AttrOptions,
    /// Store holes of sparse files as holes.
    pub sparse: bool,
    /// Metadata packing.
    pub pack: PackOptions,
    /// The history entry to record, if any.
    pub history: Option<HistoryEntry>,
    /// Write a section index.
    pub section_index: bool,
    /// Read images (bases, layers to flatten, parts to merge) only if
    /// signed by one of these keys, every section checked against the
    /// signature before use (see [`crate::input::images`]).
    pub trust: Option<hoard_trust::TrustedKeys>,
    /// Open encrypted images read (bases, layers to flatten, parts to
    /// merge) with these (see [`crate::input::images`]).
    pub identities: Option<Arc<hoard_trust::encrypt::Identities>>,
    /// Write a plain image though images read are encrypted.
    pub decrypt: bool,
    /// Categorizers to run (`--categorize`); None runs none.
    pub categorize: Option<CategorizeOptions>,
    /// Per-category settings (`-C cat::spec`, `--order cat::...`, ...).
    pub per_category: BTreeMap<String, CategorySettings>,
    /// Store category names (and so the categories of blocks).
    pub category_names: bool,
    /// Store category metadata (the sample layouts FLAC and RICEPP need
    /// to recompress blocks).
    pub category_metadata: bool,
    /// Write a layer: only what differs from these base images.
    pub delta: Option<DeltaOptions>,
    /// The platform whose image is read from a container image index
    /// (`--platform`); `None`: this machine's.
    pub platform: Option<hoard_oci::Platform>,
    /// For a container image: apply only its bottom N layers (one layer
    /// of `create --layers`, see [`crate::oci::LayerInput`]); `None`:
    /// all.
    pub container_layers: Option<usize>,
    /// How a container image in a registry (`docker://…`) is reached:
    /// TLS (`--tls-verify`), timeouts, retries, credentials.
    pub registry: hoard_oci::registry::Options,
}

/// Settings that one category overrides; None keeps the general setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CategorySettings {
    /// Block compression spec.
    pub compression: Option<String>,
    /// Content order.
    pub order: Option<Order>,
    /// Files laid out first, in the list's order. A category given an
    /// order or a list of its own does not take the general list.
    pub explicit_order: Option<Arc<PathList>>,
    /// Segmenter window, as a power of two; 0 turns segmenting off.
    pub window_bits: Option<u32>,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: Option<u32>,
    /// Finished blocks searched for repeats.
    pub lookback: Option<usize>,
}

impl CreateOptions {
    /// Compresses the metadata with `spec` whatever its size (an explicit
    /// `--metadata-compression`).
    pub fn set_metadata_compression(&mut self, spec: String) {
        self.metadata_compression = spec;
        self.small_metadata_compression = None;
    }
}

/// A quarter of the machine's memory, at least 1 GiB.
pub fn default_memory_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024);
    (total / 4).max(1 << 30)
}

/// What a build reads; [`crate::input`] tells the kinds apart and reads
/// each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A directory, an archive file, `-` (an archive on standard input),
    /// a URL: `http(s)://` or `s3://bucket/key` (an archive, streamed),
    /// `s3://bucket/prefix/` (the objects under the prefix), or a
    /// container image (`oci:LAYOUT[:TAG]`, `docker-archive:FILE[:REF]`,
    /// see [`hoard_oci::Source`]).
    Path(PathBuf),
    /// The merged tree of a stack of images, bottom first (`hoard rewrite
    /// LOWER... UPPER`).
    Stack(Vec<PathBuf>),
    /// Images built apart, joined (`hoard merge`).
    Parts(Parts),
}

impl From<PathBuf> for Input {
    fn from(path: PathBuf) -> Self {
        Input::Path(path)
    }
}

/// The images `hoard merge` joins, and where their trees go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// The images, in order.
    pub images: Vec<PathBuf>,
    /// The directory each image's tree goes under (one name each); `None`
    /// joins the trees at the root (`--union`), where a path in two parts
    /// is an error unless both are directories (they merge, the later
    /// part's attributes kept).
    pub names: Option<Vec<String>>,
    /// Store a content several parts hold once (found by size and hash).
    pub dedupe: bool,
}

impl Parts {
    /// `images`, each under a directory named after its file (the name
    /// without its last extension: `a.dwarfs` goes under `a/`).
    pub fn under_own_names(images: Vec<PathBuf>) -> Result<Self> {
        let names = images
            .iter()
            .map(|p| {
                p.file_stem()
                    .and_then(|s| s.to_str())
                    .map(String::from)
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "{}: no file name to name its directory by (use --as NAME)",
                            p.display()
                        ))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Parts {
            images,
            names: Some(names),
            dedupe: true,
        })
    }

    /// Checks that there are parts, and one valid, distinct name each.
    pub(crate) fn check(&self) -> Result<()> {
        if self.images.is_empty() {
            return Err(Error::Input("no images to merge".into()));
        }
        let Some(names) = &self.names else {
            return Ok(());
        };
        if names.len() != self.images.len() {
            return Err(Error::Input(format!(
                "{} directory names for {} images (one --as NAME each)",
                names.len(),
                self.images.len()
            )));
        }
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
                return Err(Error::Input(format!(
                    "'{name}' is not a directory name (one path component)"
                )));
            }
            if names[..i].contains(name) {
                return Err(Error::Input(format!(
                    "two images go under '{name}' (give each its own --as NAME)"
                )));
            }
        }
        Ok(())
    }
}
