//! The FUSE driver: serves DwarFS images, read through `hoard-reader` as
//! one [`hoard_reader::View`] (an image, a stack of layers, a set of
//! images), as a read-only file system.
//!
//! * [`options`] — the `-o` mount options (DwarFS-compatible names).
//! * [`driver`] — the FUSE operations.
//! * [`perfmon`] — per-operation latency histograms (`-o perfmon=...`).
//!
//! ```no_run
//! use hoard_fuse::{options::MountOptions, serve};
//! use hoard_reader::Stack;
//! let opts = MountOptions::parse("cachesize=256m,allow_other").unwrap();
//! let image = Stack::open(&["image.dwarfs".as_ref()], &opts.fs_options()).unwrap();
//! serve(std::sync::Arc::new(image), "image.dwarfs", "/mnt".as_ref(), &opts, |_| {}).unwrap();
//! ```

pub mod driver;
pub mod options;
pub mod perfmon;

pub use driver::{serve, Mounted};
