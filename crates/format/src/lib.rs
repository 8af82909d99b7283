//! The DwarFS on-disk format, as pure data: no files, no I/O.
//!
//! * [`section`] — section headers (the old v2.0/v2.1 layout and the current
//!   one with SHA-512/256 and XXH3-64), section types, compression ids, the
//!   section index and image-offset detection over a byte slice.
//! * [`thrift`] — the thrift compact protocol (schema, history, block
//!   compression headers).
//! * [`frozen`] — the frozen2 bit-packed layout, driven by a stored schema.
//! * [`metadata`] — the decoded file-system metadata of format v2.0–v2.5,
//!   with packed tables already unpacked.
//! * [`history`] — the HISTORY section.
//! * [`mode`] — the file type bits of a mode.
//! * [`inode_table`], [`string_list`] — compact in-memory forms of the
//!   inode table and of the name and symlink lists.
//! * [`object_attrs`] — file attributes kept as S3 objects' user
//!   metadata by s3fs, rclone and goofys.
//! * [`xattrs`] — hoard's extended-attribute table, a metadata field
//!   DwarFS readers skip.
//! * [`write`](mod@write) — the encoders: thrift compact, frozen2, metadata with
//!   DwarFS's packing options, FSST string tables, history.
//!
//! Every length, offset and index read from input is checked; decoding never
//! panics and never allocates more than the input can justify.

pub mod error;
pub mod frozen;
pub mod fsst;
pub mod history;
pub mod inode_table;
pub mod metadata;
pub mod mode;
pub mod object_attrs;
pub mod section;
pub mod string_list;
pub mod thrift;
pub mod write;
pub mod xattrs;

pub use error::{Error, Result};
