//! The FUSE driver: serves a DwarFS image, read through `hoard-reader`, as
//! a read-only file system.
//!
//! * [`options`] — the `-o` mount options (DwarFS-compatible names).
//! * [`driver`] — the FUSE operations.
//! * [`perfmon`] — per-operation latency histograms (`-o perfmon=...`).
//!
//! ```no_run
//! use hoard_fuse::{options::MountOptions, serve};
//! let opts = MountOptions::parse("cachesize=256m,allow_other").unwrap();
//! serve("image.dwarfs".as_ref(), "/mnt".as_ref(), &opts, |_| {}).unwrap();
//! ```

pub mod driver;
pub mod options;
pub mod perfmon;

pub use driver::{serve, Mounted};
