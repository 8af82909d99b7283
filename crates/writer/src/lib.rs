//! Build DwarFS images from directory trees.
//!
//! [`create`] runs the stages in order, data flowing one way, each a
//! function of [`pipeline`] (named so in a profile):
//!
//! 1. `scan_input` — [`scan`] walks the input (in parallel), reads each
//!    entry's extended attributes and applies the [`filter`] rules; for a
//!    tar or cpio input, [`archive`] reads the stream instead, spooling
//!    file contents, for objects in S3 [`objects`] fetches them, and for a stack of images [`flatten`] reads their
//!    merged tree; with base images (`--base`), [`delta`] cuts the tree
//!    down to what differs from them (a layer);
//! 2. `hash_contents` — [`dedupe`] reads every file once and groups equal
//!    contents;
//! 3. `categorize_contents` — with `--categorize`, [`categorize`] splits
//!    contents into fragments of categories (audio, executables,
//!    incompressible data, ...);
//! 4. `streams::plan` — one stream per category, its codec and segmenter
//!    settings, and the [`order`] of its contents;
//! 5. `write_blocks` — the [`segment`]er appends contents to blocks,
//!    referencing repeated ranges, one stream after the other, while
//!    [`blocks`] compresses them in parallel and writes them in order;
//! 6. `build_metadata` — [`metadata`] builds the tables; the tree and
//!    contents are freed; `write_metadata` — the format crate encodes
//!    them;
//! 7. `write_history`, then [`output`] renames the image file into place
//!    when complete.
//!
//! [`merge`] joins images built apart (`hoard merge`), copying their
//! blocks as they are.
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
pub mod inputs;
pub mod level;
pub mod merge;
pub mod metadata;
pub mod objects;
pub mod order;
pub mod output;
pub mod parse;
pub mod pipeline;
pub mod reference;
pub mod rewrite;
pub mod scan;
pub mod scratch;
pub mod segment;
pub mod sign;
mod streams;
pub mod tree;

pub use hoard_codec::library_versions;
pub use pipeline::{create, CreateOptions, Progress, Summary};

use std::path::{Path, PathBuf};

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
