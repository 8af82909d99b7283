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

pub use crate::inode_table::InodeTable;
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
    pub inodes: InodeTable,
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
    pub names: StringList,
    /// Symlink targets.
    pub symlinks: StringList,
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
    /// Extended attributes (hoard's extension, see [`crate::xattrs`]).
    pub xattrs: Option<Xattrs>,
    /// The config (JSON, as stored) of the container image the tree was
    /// made from (hoard's extension, field [`CONTAINER_CONFIG_FIELD`]).
    pub container_config: Option<Vec<u8>>,
    /// How the tables were stored.
    pub storage: Storage,
}

/// Features (from the metadata `features` set) this build implements.
pub const SUPPORTED_FEATURES: &[&str] = &["sparsefiles"];

/// Id of the `container_config` field (binary) in the metadata struct:
/// like [`XATTRS_FIELD`], far above DwarFS's own ids, so DwarFS and the
/// `dwarfs` crate skip it.
pub const CONTAINER_CONFIG_FIELD: i16 = 1001;

/// Most items any one metadata list may have.
const MAX_ITEMS: u64 = 1 << 28;

use crate::frozen::{Schema, View};
use crate::fsst::SymbolTable;
use crate::string_list::StringList;
use crate::xattrs::{Xattrs, XATTRS_FIELD};
use crate::{corrupt, Result};

fn u32_list(v: View<'_>) -> Result<Vec<u32>> {
    v.list()?.map(MAX_ITEMS, |i| i.u32())
}

fn u64_list(v: View<'_>) -> Result<Vec<u64>> {
    v.list()?.map(MAX_ITEMS, |i| i.uint())
}

fn string_list(v: View<'_>) -> Result<StringList> {
    let items = v.list()?.bounded(MAX_ITEMS)?;
    let mut out = StringList::new();
    for i in 0..items.len() {
        push(&mut out, items.get(i).bytes()?)?;
    }
    Ok(out)
}

/// Appends a decoded string, refusing lists past 4 GiB.
fn push(list: &mut StringList, s: &[u8]) -> Result<()> {
    list.try_push(s)
        .map(drop)
        .ok_or_else(|| corrupt!("metadata: strings exceed 4 GiB"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn opt_u32(v: View<'_>) -> Result<Option<u32>> {
    v.optional()?.map(|x| x.u32()).transpose()
}

fn opt_u64(v: View<'_>) -> Result<Option<u64>> {
    v.optional()?.map(|x| x.uint()).transpose()
}

fn u32_map(v: View<'_>) -> Result<BTreeMap<u32, u64>> {
    Ok(v.list()?
        .map(MAX_ITEMS, |p| Ok((p.field(1).u32()?, p.field(2).uint()?)))?
        .into_iter()
        .collect())
}

fn fs_options(v: View<'_>) -> Result<FsOptions> {
    Ok(FsOptions {
        mtime_only: v.field(1).bool()?,
        time_resolution_sec: opt_u32(v.field(2))?,
        packed_chunk_table: v.field(3).bool()?,
        packed_directories: v.field(4).bool()?,
        packed_shared_files_table: v.field(5).bool()?,
        subsecond_resolution_nsec_multiplier: opt_u32(v.field(6))?,
        has_btime: v.field(7).bool()?,
        inodes_have_nlink: v.field(8).bool()?,
    })
}

/// Inode data with the pre-2.3 name and inode fields.
struct RawInode {
    data: InodeData,
    name_index_v2_2: u32,
    inode_v2_2: u32,
}

fn inode(v: View<'_>) -> Result<RawInode> {
    Ok(RawInode {
        data: InodeData {
            mode_index: v.field(2).u32()?,
            owner_index: v.field(4).u32()?,
            group_index: v.field(5).u32()?,
            atime_offset: v.field(6).uint()?,
            mtime_offset: v.field(7).uint()?,
            ctime_offset: v.field(8).uint()?,
            btime_offset: v.field(9).uint()?,
            atime_subsec: v.field(10).uint()?,
            mtime_subsec: v.field(11).uint()?,
            ctime_subsec: v.field(12).uint()?,
            btime_subsec: v.field(13).uint()?,
            nlink_minus_one: v.field(14).u32()?,
        },
        name_index_v2_2: v.field(1).u32()?,
        inode_v2_2: v.field(3).u32()?,
    })
}

/// Decodes a string table (thrift `string_table`) into its strings.
fn string_table(v: View<'_>, what: &str) -> Result<(StringList, StringStorage)> {
    let buffer = v.field(1).bytes()?;
    let symtab = v.field(2).optional()?.map(|s| s.bytes()).transpose()?;
    let packed_index = v.field(4).bool()?;
    let raw_index = u32_list(v.field(3))?;
    let offsets: Vec<u64> = if packed_index {
        let mut o = Vec::with_capacity(raw_index.len() + 1);
        o.push(0u64);
        for len in &raw_index {
            o.push(o.last().copied().unwrap_or(0) + u64::from(*len));
        }
        o
    } else {
        raw_index.iter().map(|&x| u64::from(x)).collect()
    };
    let table = symtab.map(SymbolTable::decode).transpose()?;
    let mut out = StringList::new();
    for (i, w) in offsets.windows(2).enumerate() {
        let piece = (w[0] <= w[1])
            .then(|| buffer.get(w[0] as usize..w[1] as usize))
            .flatten()
            .ok_or_else(|| {
                corrupt!(
                    "{what} string {i}: range {}..{} outside the {}-byte buffer",
                    w[0],
                    w[1],
                    buffer.len()
                )
            })?;
        match &table {
            Some(t) => push(&mut out, &t.decode_string(piece)?)?,
            None => push(&mut out, piece)?,
        }
    }
    let storage = StringStorage::Compact {
        packed_index,
        fsst: table.is_some(),
    };
    Ok((out, storage))
}

/// Names or symlink targets, from the plain list or the compact table.
fn strings(plain: View<'_>, compact: View<'_>, what: &str) -> Result<(StringList, StringStorage)> {
    match compact.optional()? {
        Some(table) => string_table(table, what),
        None => Ok((string_list(plain)?, StringStorage::Plain)),
    }
}

/// Inclusive prefix sums, refusing overflow.
fn prefix_sums(values: &mut [u32], what: &str) -> Result<()> {
    let mut sum = 0u32;
    for v in values.iter_mut() {
        sum = sum
            .checked_add(*v)
            .ok_or_else(|| corrupt!("packed {what} overflows"))?;
        *v = sum;
    }
    Ok(())
}

impl Metadata {
    /// Decodes the (decompressed) METADATA_V2_SCHEMA and METADATA_V2
    /// payloads into normalized metadata; see the module documentation.
    pub fn decode(schema: &[u8], data: &[u8]) -> Result<Metadata> {
        let schema = Schema::decode(schema)?;
        let root = schema.root(data);
        let f = |id| root.field(id);

        let options = f(18).optional()?.map(fs_options).transpose()?;
        let opts = options.unwrap_or_default();
        let raw_inodes = f(3).list()?.map(MAX_ITEMS, inode)?;
        let (names, names_storage) = strings(f(10), f(24), "names")?;
        let (mut symlinks, symlinks_storage) = strings(f(11), f(25), "symlink")?;
        let separator = opt_u32(f(26))?;
        if let Some(sep) = separator
            .and_then(|s| u8::try_from(s).ok())
            .filter(|&s| s != b'/' && s.is_ascii())
        {
            // Targets written on a system with another separator.
            symlinks.map_bytes(|b| if b == sep { b'/' } else { b });
        }

        let mut chunk_table = u32_list(f(4))?;
        if opts.packed_chunk_table {
            prefix_sums(&mut chunk_table, "chunk table")?;
        }
        let mut directories = f(2).list()?.map(MAX_ITEMS, |d| {
            Ok(Directory {
                parent_entry: d.field(1).u32()?,
                first_entry: d.field(2).u32()?,
                self_entry: d.field(3).u32()?,
            })
        })?;
        if opts.packed_directories {
            let mut first: Vec<u32> = directories.iter().map(|d| d.first_entry).collect();
            prefix_sums(&mut first, "directories")?;
            for (d, f) in directories.iter_mut().zip(first) {
                d.first_entry = f;
            }
        }

        let dir_entries_view = f(19).optional()?;
        let v2_2_layout = dir_entries_view.is_none();
        let (inodes, dir_entries) = match dir_entries_view {
            Some(list) => {
                let entries = list.list()?.map(MAX_ITEMS, |e| {
                    Ok(DirEntry {
                        name_index: e.field(1).u32()?,
                        inode_num: e.field(2).u32()?,
                    })
                })?;
                (raw_inodes.into_iter().map(|i| i.data).collect(), entries)
            }
            None => {
                // Before 2.3 the inode list doubles as the entry list, and
                // entry_table_v2_2 maps inode numbers to it.
                let entry_table = u32_list(f(5))?;
                let inodes = entry_table
                    .iter()
                    .map(|&e| {
                        raw_inodes
                            .get(e as usize)
                            .map(|i| i.data)
                            .ok_or_else(|| corrupt!("entry table value {e} out of range"))
                    })
                    .collect::<Result<InodeTable>>()?;
                let entries = raw_inodes
                    .iter()
                    .map(|i| DirEntry {
                        name_index: i.name_index_v2_2,
                        inode_num: i.inode_v2_2,
                    })
                    .collect();
                (inodes, entries)
            }
        };
        link_directories(&mut directories, &dir_entries)?;

        let mut shared_files = f(20)
            .optional()?
            .map(u32_list)
            .transpose()?
            .unwrap_or_default();
        if opts.packed_shared_files_table {
            shared_files = unpack_shared_files(&shared_files, inodes.len())?;
        }

        let features = f(27)
            .optional()?
            .map(|s| s.list()?.map(MAX_ITEMS, |x| Ok(text(x.bytes()?))))
            .transpose()?
            .map(|v| v.into_iter().collect());
        let history = f(33)
            .optional()?
            .map(|l| {
                l.list()?.map(MAX_ITEMS, |h| {
                    Ok(MetadataVersion {
                        major: h.field(1).uint()? as u8,
                        minor: h.field(2).uint()? as u8,
                        dwarfs_version: h
                            .field(3)
                            .optional()?
                            .map(|s| s.bytes().map(text))
                            .transpose()?,
                        block_size: h.field(4).u32()?,
                        options: h.field(5).optional()?.map(fs_options).transpose()?,
                    })
                })
            })
            .transpose()?;

        let xattrs = f(XATTRS_FIELD)
            .optional()?
            .map(crate::xattrs::decode)
            .transpose()?;
        if let Some(x) = &xattrs {
            if x.inode_sets.len() != inodes.len() {
                return Err(corrupt!(
                    "extended attributes name {} inodes, the image has {}",
                    x.inode_sets.len(),
                    inodes.len()
                ));
            }
        }

        let container_config = f(CONTAINER_CONFIG_FIELD)
            .optional()?
            .map(|v| v.bytes().map(<[u8]>::to_vec))
            .transpose()?;

        Ok(Metadata {
            container_config,
            chunks: f(1).list()?.map(MAX_ITEMS, |c| {
                Ok(Chunk {
                    block: c.field(1).u32()?,
                    offset: c.field(2).u32()?,
                    size: c.field(3).u32()?,
                })
            })?,
            directories,
            inodes,
            chunk_table,
            symlink_table: u32_list(f(6))?,
            uids: u32_list(f(7))?,
            gids: u32_list(f(8))?,
            modes: u32_list(f(9))?,
            names,
            symlinks,
            timestamp_base: f(12).uint()?,
            block_size: f(15).u32()?,
            total_fs_size: f(16).uint()?,
            devices: f(17).optional()?.map(u64_list).transpose()?,
            options,
            dir_entries,
            shared_files,
            total_hardlink_size: opt_u64(f(21))?,
            dwarfs_version: f(22).optional()?.map(|s| s.bytes().map(text)).transpose()?,
            create_timestamp: opt_u64(f(23))?,
            preferred_path_separator: separator,
            features,
            category_names: f(28)
                .optional()?
                .map(|l| l.list()?.map(MAX_ITEMS, |x| Ok(text(x.bytes()?))))
                .transpose()?,
            block_categories: f(29).optional()?.map(u32_list).transpose()?,
            reg_file_size_cache: f(30)
                .optional()?
                .map(|c| {
                    Ok(InodeSizeCache {
                        size_lookup: u32_map(c.field(1))?,
                        min_chunk_count: c.field(2).uint()?,
                        allocated_size_lookup: u32_map(c.field(3))?,
                    })
                })
                .transpose()?,
            category_metadata_json: f(31)
                .optional()?
                .map(|l| l.list()?.map(MAX_ITEMS, |x| Ok(text(x.bytes()?))))
                .transpose()?,
            block_category_metadata: f(32)
                .optional()?
                .map(|m| {
                    Ok(m.list()?
                        .map(MAX_ITEMS, |p| Ok((p.field(1).u32()?, p.field(2).u32()?)))?
                        .into_iter()
                        .collect())
                })
                .transpose()?,
            metadata_version_history: history,
            hole_block_index: opt_u32(f(34))?,
            large_hole_size: f(35).optional()?.map(u64_list).transpose()?,
            total_allocated_fs_size: opt_u64(f(36))?,
            xattrs,
            storage: Storage {
                names: names_storage,
                symlinks: symlinks_storage,
                v2_2_layout,
            },
        })
    }
}

/// Fills in `parent_entry` and `self_entry` of every directory by walking
/// the tree from the root (entry 0), whatever was stored: older images and
/// packed directories do not store them. Each directory is visited once.
fn link_directories(directories: &mut [Directory], entries: &[DirEntry]) -> Result<()> {
    let dirs = directories.len().saturating_sub(1);
    if dirs == 0 {
        return Ok(());
    }
    for d in directories.iter_mut() {
        d.parent_entry = 0;
        d.self_entry = 0;
    }
    let mut visited = vec![false; dirs];
    visited[0] = true;
    let mut queue = std::collections::VecDeque::from([0u32]);
    while let Some(entry) = queue.pop_front() {
        let ino = entries
            .get(entry as usize)
            .ok_or_else(|| corrupt!("directory entry {entry} out of range"))?
            .inode_num as usize;
        let (Some(start), Some(end)) = (directories.get(ino), directories.get(ino + 1)) else {
            return Err(corrupt!("directory inode {ino} out of range"));
        };
        let range = start.first_entry as usize..end.first_entry as usize;
        if range.start > range.end || range.end > entries.len() {
            return Err(corrupt!("directory {ino}: entries {range:?} out of range"));
        }
        for e in range {
            let child = entries[e].inode_num as usize;
            if child < dirs && !visited[child] {
                visited[child] = true;
                directories[child].self_entry = e as u32;
                directories[child].parent_entry = entry;
                queue.push_back(e as u32);
            }
        }
    }
    Ok(())
}

/// Expands a packed shared files table: entry `i` holds how many shared
/// files (minus 2) use shared content `i`. The total may not exceed the
/// number of inodes.
pub fn unpack_shared_files(packed: &[u32], inode_count: usize) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for (i, &n) in packed.iter().enumerate() {
        let n = n as usize + 2;
        if out.len() + n > inode_count {
            return Err(corrupt!(
                "packed shared files table names more files than there are inodes"
            ));
        }
        out.extend(std::iter::repeat_n(i as u32, n));
    }
    Ok(out)
}
