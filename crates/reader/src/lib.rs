//! Read DwarFS images.
//!
//! ```no_run
//! use hoard_reader::{Filesystem, FsOptions};
//! let fs = Filesystem::open("image.dwarfs".as_ref(), &FsOptions::default())?;
//! let ino = fs.lookup_path("usr/bin/env")?;
//! let st = fs.stat(ino)?;
//! let mut buf = vec![0; st.size as usize];
//! fs.read(ino, 0, &mut buf)?;
//! # Ok::<(), hoard_reader::Error>(())
//! ```
//!
//! * [`image`] — finds the image in its file (an optional prefix is skipped),
//!   lists its sections and loads them, checking hashes.
//! * [`section`] — one listed section: its header and place.
//! * [`fs`] — the file system: lookup, readdir, stat, readlink, read. The
//!   metadata is read in place, as it lies in the image: opening decodes
//!   only small tables, so it takes milliseconds whatever the number of
//!   files; [`Filesystem::metadata`] decodes it all for tools that need it.
//! * [`cache`] — the block cache shared by all readers.
//! * [`inode`] — inode numbering and attributes.
//! * [`walk`] — a safe walk of the whole tree.
//! * [`view`] — one tree read from any number of images, the type the
//!   driver and the tools read through: a [`Stack`] of layers merged with
//!   overlayfs rules (one image is a stack of one), or a [`Set`] of
//!   images side by side, opened on demand.
//! * [`delta`] — delta layers, whose chunks point into the blocks of
//!   the images below them.
//! * [`check`] — verification of a whole image.
//! * [`signed`] — reads of a signed image checked against its signature
//!   (`OpenOptions::trust`).
//! * [`encrypted`] — reads of an encrypted image, each sealed section
//!   opened when loaded (`OpenOptions::identities`).
//! * [`extract`] — an image, or the entries matching patterns, written
//!   into a directory.
//! * [`damage`] — damage to an image with recovery data (see the
//!   hoard-recovery crate): which bytes and files, and whether it can be
//!   repaired. Opening such an image reads it through its recovery data,
//!   so damage it covers is repaired on the fly.
//!
//! Every offset, length and index taken from an image is checked before use:
//! a malformed image gives an [`Error`], never a panic.

pub mod cache;
pub mod check;
pub mod damage;
pub mod delta;
pub mod encrypted;
mod error;
pub mod extract;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
pub mod image;
pub mod inode;
mod offsets;
pub mod section;
pub mod set;
pub mod signed;
pub mod source;
pub mod stack;
mod tables;
pub mod view;
pub mod walk;

pub use error::{Error, Result};
pub use fs::{ContentPiece, DirEntry, Extent, Filesystem, FsOptions};
pub use image::{Image, ImageOffset, OpenOptions};
pub use inode::{FileKind, Stat, Time};
pub use section::Section;
pub use set::Set;
pub use stack::Stack;
pub use view::{Located, View, ViewEntry, ViewExt, ViewNode};
