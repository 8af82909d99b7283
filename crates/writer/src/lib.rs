//! Build DwarFS images from directory trees.
//!
//! A build is told everything in one value, [`CreateOptions`] (module
//! [`options`]; [`level`] fills it in for a compression level), reads one
//! [`Input`], and reports through [`progress`] and a [`summary`].
//! [`create`] runs the stages in order, data flowing one way, each a
//! function of [`pipeline`] (named so in a profile):
//!
//! 1. `scan_input` — [`input`] tells the kind of input apart and reads it
//!    into a [`tree`]: [`scan`] walks a directory (in parallel), reading
//!    each entry's extended attributes and applying the [`filter`] rules;
//!    [`archive`] reads a tar, cpio, zip, ... stream (a file, standard
//!    input or a URL), spooling file contents; [`objects`] fetches the
//!    objects under an S3 prefix; [`oci`] applies a container image's
//!    layers; a stack of images, or the parts of a
//!    merge, give their merged tree; with base images (`--base`),
//!    [`delta`] cuts the tree down to what differs from them (a layer);
//! 2. `hash_contents` — [`dedupe`] reads every file once and groups equal
//!    contents, taking [`nilsimsa`] digests where an order needs them;
//! 3. `categorize_contents` — with `--categorize`, [`categorize`] splits
//!    contents into fragments of categories (audio, executables,
//!    incompressible data, the hot files of a [`path_list`], ...);
//! 4. `streams::plan` — one stream per category, its codec and segmenter
//!    settings, and the [`order`] of its contents (a [`path_list`]'s files
//!    first, where one is given);
//! 5. `write_blocks` — the [`segment`]er appends contents to blocks,
//!    referencing repeated ranges (found by the `rolling` hashes; in a
//!    layer, also in the bases' blocks, [`mod@reference`]), one stream after
//!    the other, while [`blocks`] compresses them in parallel and writes
//!    them in order; each content becomes a list of [`piece`]s;
//! 6. `build_metadata` — [`metadata`] builds the tables; the tree and
//!    contents are freed; `write_metadata` — the format crate encodes
//!    them (the `sections` module writes them);
//! 7. `write_history`, then [`output`] renames the image file into place
//!    when complete.
//!
//! [`flatten`] and [`merge`] write the merged tree of a stack of images,
//! or of images built apart (`hoard merge`), copying their blocks as they
//! are; [`rewrite`] rewrites one image's metadata or recompresses its
//! blocks.
//!
//! [`parse`] and [`history`] serve the programs driving the writer (the
//! command line, the Python package): option values given as text, and
//! the history entry recording a run.

pub mod archive;
pub mod blocks;
pub mod categorize;
pub mod chmod;
pub mod dedupe;
pub mod delta;
mod feed;
pub mod filter;
pub mod flatten;
pub mod history;
pub mod input;
pub mod level;
pub mod merge;
pub mod metadata;
pub mod nilsimsa;
pub mod objects;
pub mod oci;
pub mod options;
pub mod order;
pub mod output;
pub mod parse;
pub mod path_list;
pub mod piece;
pub mod pipeline;
pub mod progress;
pub mod reference;
pub mod rewrite;
mod rolling;
pub mod scan;
pub mod scratch;
mod sections;
pub mod segment;
pub mod sign;
mod streams;
pub mod summary;
pub mod tree;

pub use hoard_codec::library_versions;
pub use options::{CreateOptions, Input};
pub use pipeline::create;
pub use progress::Progress;
pub use summary::Summary;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the input or writing the image failed.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The input or an option is not usable.
    #[error("{0}")]
    Input(String),
    /// The build was cancelled (Ctrl-C) or a stage stopped early.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Result of the writer's functions.
pub type Result<T> = std::result::Result<T, Error>;

/// Fails with [`Error::Interrupted`] once `cancel` is set.
pub(crate) fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// The compressor of `spec`; a spec that names none is an input error.
pub(crate) fn compressor(spec: &str) -> Result<Box<dyn hoard_codec::Compressor>> {
    hoard_codec::compressor_from_spec(spec).map_err(|e| Error::Input(e.to_string()))
}
