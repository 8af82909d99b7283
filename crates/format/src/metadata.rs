//! The file-system metadata of a DwarFS image (thrift `struct metadata`),
//! decoded and normalized.
//!
//! [`Metadata::decode`] takes the METADATA_V2_SCHEMA and METADATA_V2 payloads
//! (already decompressed) and returns this struct with every optionally
//! packed table unpacked and every older layout converted to the current one:
//!
//! * `directories` has `parent_entry`, `first_entry` and `self_entry` filled
//!   in for every directory, plus the trailing sentinel;
//! * `chunk_table` holds absolute indices into `chunks`, plus the sentinel;
//! * `shared_files` is the unpacked `shared_files_table`;
//! * `names` and `symlinks` are plain byte strings, whether they were stored
//!   as lists or as (FSST-compressed, packed-index) string tables;
//! * images of format 2.2 and older (no `dir_entries`; names and inode
//!   numbers inside `inodes`, plus `entry_table_v2_2`) come out with
//!   `dir_entries` built and `inodes` indexed by inode number.
//!
//! How each table was stored is kept in [`Storage`] for `hoard info`.
//! Decoding checks the structure it needs (list bounds, table lengths);
//! cross-references between tables are checked by the reader.

use std::collections::{BTreeMap, BTreeSet};

/// A range of bytes in one block (or a hole, see `hole_block_index`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Block number.
    pub block: u32,
    /// Offset of the range in the uncompressed block.
    pub offset: u32,
    /// Length of the range.
    pub size: u32,
}

/// Links of one directory into `dir_entries`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Directory {
    /// Entry of the parent directory (the root is its own parent).
    pub parent_entry: u32,
    /// First entry of this directory; it ends where the next one starts.
    pub first_entry: u32,
    /// The entry naming this directory.
    pub self_entry: u32,
}

/// Per-inode data (thrift `inode_data`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InodeData {
    /// Index into `modes`.
    pub mode_index: u32,
    /// Index into `uids`.
    pub owner_index: u32,
    /// Index into `gids`.
    pub group_index: u32,
    /// Access time, relative to `timestamp_base`, in `time_resolution` units.
    pub atime_offset: u64,
    /// Modification time, likewise.
    pub mtime_offset: u64,
    /// Change time, likewise.
    pub ctime_offset: u64,
    /// Birth time, likewise (only with `has_btime`).
    pub btime_offset: u64,
    /// Sub-second part of atime, in `subsecond_resolution_nsec_multiplier` units.
    pub atime_subsec: u64,
    /// Sub-second part of mtime.
    pub mtime_subsec: u64,
    /// Sub-second part of ctime.
    pub ctime_subsec: u64,
    /// Sub-second part of btime.
    pub btime_subsec: u64,
    /// Hard link count minus one (valid with `inodes_have_nlink`).
    pub nlink_minus_one: u32,
}

/// One name in a directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirEntry {
    /// Index into `names` (unused for the root entry 0).
    pub name_index: u32,
    /// Inode number.
    pub inode_num: u32,
}

/// File-system options (thrift `fs_options`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsOptions {
    /// Only mtime is stored; atime and ctime equal it.
    pub mtime_only: bool,
    /// Seconds per time unit, when not 1.
    pub time_resolution_sec: Option<u32>,
    /// Whether `chunk_table` was stored delta-compressed.
    pub packed_chunk_table: bool,
    /// Whether `directories` was stored packed.
    pub packed_directories: bool,
    /// Whether `shared_files_table` was stored packed.
    pub packed_shared_files_table: bool,
    /// Nanoseconds per sub-second unit, when sub-second times are stored.
    pub subsecond_resolution_nsec_multiplier: Option<u32>,
    /// Whether birth times are stored.
    pub has_btime: bool,
    /// Whether `nlink_minus_one` is valid.
    pub inodes_have_nlink: bool,
}

/// Cache of regular file sizes for inodes with many chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InodeSizeCache {
    /// File size by index into `chunk_table`.
    pub size_lookup: BTreeMap<u32, u64>,
    /// Files with at least this many chunks are in the cache.
    pub min_chunk_count: u64,
    /// Allocated (non-hole) size by index into `chunk_table`.
    pub allocated_size_lookup: BTreeMap<u32, u64>,
}

/// A metadata rewrite recorded in the metadata itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataVersion {
    /// Format major version of the metadata before the rewrite.
    pub major: u8,
    /// Format minor version before the rewrite.
    pub minor: u8,
    /// Version of the tool that wrote it.
    pub dwarfs_version: Option<String>,
    /// Block size before the rewrite.
    pub block_size: u32,
    /// Options before the rewrite.
    pub options: Option<FsOptions>,
}

/// How a string table was stored, for reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StringStorage {
    /// A plain `list<string>`.
    #[default]
    Plain,
    /// A string table, optionally with a packed index and FSST compression.
    Compact {
        /// Whether the index was delta-compressed.
        packed_index: bool,
        /// Whether the strings were FSST-compressed.
        fsst: bool,
    },
}

/// How the tables were stored in the image, for reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Storage {
    /// Storage of `names`.
    pub names: StringStorage,
    /// Storage of `symlinks`.
    pub symlinks: StringStorage,
    /// Whether the image used the pre-2.3 layout (`entry_table_v2_2`).
    pub v2_2_layout: bool,
}

/// The decoded, normalized metadata of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// All chunks, grouped per file by `chunk_table`.
    pub chunks: Vec<Chunk>,
    /// One per directory inode, plus a sentinel.
    pub directories: Vec<Directory>,
    /// Indexed by inode number.
    pub inodes: Vec<InodeData>,
    /// Absolute indices into `chunks`, one per file content, plus a sentinel.
    pub chunk_table: Vec<u32>,
    /// Index into `symlinks`, per symlink inode.
    pub symlink_table: Vec<u32>,
    /// Distinct owner ids.
    pub uids: Vec<u32>,
    /// Distinct group ids.
    pub gids: Vec<u32>,
    /// Distinct modes (type and permission bits).
    pub modes: Vec<u32>,
    /// Entry names.
    pub names: Vec<Vec<u8>>,
    /// Symlink targets.
    pub symlinks: Vec<Vec<u8>>,
    /// Base of all stored times, in seconds.
    pub timestamp_base: u64,
    /// Block size in bytes.
    pub block_size: u32,
    /// Sum of all regular file sizes.
    pub total_fs_size: u64,
    /// Device numbers, per device inode.
    pub devices: Option<Vec<u64>>,
    /// File-system options.
    pub options: Option<FsOptions>,
    /// All directory entries; entry 0 is the root.
    pub dir_entries: Vec<DirEntry>,
    /// Unpacked shared files table: for each shared file inode, the index of
    /// its content among the shared contents.
    pub shared_files: Vec<u32>,
    /// Bytes saved by hard links.
    pub total_hardlink_size: Option<u64>,
    /// Version string of the writer.
    pub dwarfs_version: Option<String>,
    /// Creation time of the image, in seconds.
    pub create_timestamp: Option<u64>,
    /// Path separator of the writing system, if not `/`.
    pub preferred_path_separator: Option<u32>,
    /// Features the image needs a reader to implement.
    pub features: Option<BTreeSet<String>>,
    /// Names of block categories.
    pub category_names: Option<Vec<String>>,
    /// Category (index into `category_names`) of each block.
    pub block_categories: Option<Vec<u32>>,
    /// Sizes of files with many chunks.
    pub reg_file_size_cache: Option<InodeSizeCache>,
    /// JSON metadata of categories.
    pub category_metadata_json: Option<Vec<String>>,
    /// Index into `category_metadata_json`, by block.
    pub block_category_metadata: Option<BTreeMap<u32, u32>>,
    /// Earlier metadata versions of a rewritten image.
    pub metadata_version_history: Option<Vec<MetadataVersion>>,
    /// The block number marking hole chunks in sparse files.
    pub hole_block_index: Option<u32>,
    /// Sizes of holes too large to store in a chunk.
    pub large_hole_size: Option<Vec<u64>>,
    /// Sum of allocated (non-hole) sizes of all regular files.
    pub total_allocated_fs_size: Option<u64>,
    /// How the tables were stored.
    pub storage: Storage,
}
