//! Read DwarFS images.
//!
//! Images are opened through [`open`], the one way in: a [`Target`]
//! says what to open (the images, bottom first, what they are opened
//! as, their offset, the keys trusted and the identities that open
//! encrypted ones, the cache, how archives become images) and
//! [`open::open`] opens it. Every front end opens through it, so a
//! trusted key reaches every image read.
//!
//! ```no_run
//! use hoard_reader::{open, Target, TrustedKeys, View, ViewExt};
//! let mut target = Target::new(vec!["image.dwarfs".into()]);
//! target.options.open.trust = Some(TrustedKeys::load(&["signer.pub".into()]).unwrap());
//! let stack = open::open(&target)?.into_stack()?;
//! let ino = stack.resolve_path(b"usr/bin/env", true)?;
//! let at = stack.locate(ino)?;
//! let mut buf = vec![0; at.fs.stat(at.ino)?.size as usize];
//! at.fs.read(at.ino, 0, &mut buf)?;
//! # Ok::<(), hoard_reader::Error>(())
//! ```
//!
//! * [`open`] — what to open ([`Target`]) and the function that opens
//!   it: stacks, sets, one image's sections; archives through
//!   [`open::ArchiveImages`], refused when keys are trusted.
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
pub mod open;
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
pub use hoard_trust::encrypt::Identities;
pub use hoard_trust::{Expectations, TrustedKeys};
pub use image::{Image, ImageOffset, OpenOptions};
pub use inode::{FileKind, Stat, Time};
pub use open::{Form, Opened, Target};
pub use section::Section;
pub use set::Set;
pub use stack::Stack;
pub use view::{Located, View, ViewEntry, ViewExt, ViewNode};
