//! The FUSE driver: serves DwarFS images, read through `hoard-reader` as
//! one [`hoard_reader::View`] (an image, a stack of layers, a set of
//! images, opened by the reader's opener, `hoard_reader::open`), as a
//! read-only file system; it opens no image itself.
//!
//! * [`options`] — the `-o` mount options (DwarFS-compatible names).
//! * [`driver`] — the FUSE operations.
//! * [`perfmon`] — per-operation latency histograms (`-o perfmon=...`).
//! * [`analysis`] — the access profile (`-o analysis_file=FILE`).
//! * [`mounting`] — mounting a connection (mount(2) or `fusermount3`),
//!   and unmounting only the mount that is still this driver's.
//! * [`fusermount`] — the setuid helper `fusermount3`.
//! * [`preload`] — blocks decompressed as the image mounts
//!   (`-o preload_all`, `-o preload_category=NAME`).
//!
//! ```no_run
//! use hoard_fuse::{options::MountOptions, serve};
//! use hoard_reader::open::{open, Target};
//! let opts = MountOptions::parse("cachesize=256m,allow_other").unwrap();
//! let mut target = Target::new(vec!["image.dwarfs".into()]);
//! target.options = opts.fs_options();
//! let view = open(&target).and_then(|o| o.into_view()).unwrap();
//! serve(view, "image.dwarfs", "/mnt".as_ref(), &opts, |_| {}).unwrap();
//! ```

pub mod analysis;
pub mod driver;
pub mod fusermount;
pub mod mounting;
pub mod options;
pub mod perfmon;
pub mod preload;

pub use driver::{serve, serve_connection, Mounted};
