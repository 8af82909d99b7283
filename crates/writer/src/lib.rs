//! Build DwarFS images from directory trees.
//!
//! [`create`] runs the stages in order, data flowing one way:
//!
//! 1. [`scan`] — walk the input (in parallel), apply [`filter`] rules;
//! 2. [`dedupe`] — read every file once, group equal contents;
//!    [`categorize`] (with `--categorize`) — split contents into fragments
//!    of categories (audio, executables, incompressible data, ...);
//! 3. [`order`] — decide where each content goes;
//! 4. [`segment`] — append contents to blocks, referencing repeated ranges,
//!    one segmenter per category, one category after the other;
//! 5. [`blocks`] — compress blocks in parallel (each with its category's
//!    codec), write them in order;
//! 6. [`metadata`] — build and encode the metadata;
//! 7. [`output`] — the image file, renamed into place when complete.

pub mod blocks;
pub mod categorize;
pub mod chmod;
pub mod dedupe;
pub mod filter;
pub mod level;
pub mod metadata;
pub mod order;
pub mod output;
pub mod pipeline;
pub mod rewrite;
pub mod scan;
pub mod segment;
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
