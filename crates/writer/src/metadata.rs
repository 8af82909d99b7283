//! Stage 6: the file-system metadata, built from the tree, the deduplicated
//! contents and the pieces the segmenter made of them, in the normalized
//! form [`hoard_format::metadata::Metadata`] that the format crate encodes.
//!
//! Inodes are numbered by kind, as the format requires: directories (in
//! breadth-first order, so each directory's entries follow the previous
//! one's), symlinks, regular files with content of their own, regular files
//! whose content other files share, devices, then fifos and sockets.

use crate::dedupe::Deduped;
use crate::segment::Piece;
use crate::tree::{Attrs, Kind, Time, Tree};
use hoard_format::metadata::{
    Chunk, DirEntry, Directory, FsOptions, InodeData, InodeSizeCache, Metadata,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Files with at least this many chunks get their size cached (DwarFS's
/// default).
const SIZE_CACHE_MIN_CHUNKS: u32 = 128;
/// Chunk offset marking a hole whose size is in `large_hole_size`.
const LARGE_HOLE_OFFSET: u32 = u32::MAX;

/// How owners, permissions and times are stored.
#[derive(Debug, Clone, Default)]
pub struct AttrOptions {
    /// Owner of every entry.
    pub set_owner: Option<u32>,
    /// Group of every entry.
    pub set_group: Option<u32>,
    /// Time of every entry (seconds).
    pub set_time: Option<i64>,
    /// Keep atime and ctime, not only mtime.
    pub keep_all_times: bool,
    /// Resolution of stored times in nanoseconds (1 s if `None`).
    pub time_resolution_ns: Option<u64>,
    /// Permission changes (`--chmod`).
    pub chmod: Option<crate::chmod::Chmod>,
    /// No time later than this is stored (`SOURCE_DATE_EPOCH`).
    pub clamp_time: Option<i64>,
    /// Creation time to record, if any.
    pub create_timestamp: Option<u64>,
}

/// What the metadata stage needs besides the tree.
pub struct Inputs<'a> {
    /// The scanned tree.
    pub tree: &'a Tree,
    /// Its distinct contents.
    pub deduped: &'a Deduped,
    /// Pieces of each content (indexed like `deduped.contents`).
    pub pieces: &'a [Vec<Piece>],
    /// Number of data blocks written.
    pub blocks: u32,
    /// Block size.
    pub block_size: u32,
}

/// Interns values into a sorted table of distinct values.
fn table<T: Ord + Copy>(values: impl Iterator<Item = T>) -> (Vec<T>, BTreeMap<T, u32>) {
    let set: BTreeSet<T> = values.collect();
    let list: Vec<T> = set.into_iter().collect();
    let index = list
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, i as u32))
        .collect();
    (list, index)
}

/// Inode classes in inode-number order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Symlink,
    UniqueFile,
    SharedFile,
    Device,
    Special,
}

/// Builds the metadata.
pub fn build(inputs: &Inputs<'_>, options: &AttrOptions) -> Metadata {
    let tree = inputs.tree;
    let unreadable: BTreeSet<usize> = inputs.deduped.unreadable.iter().map(|u| u.0).collect();
    let content_of: HashMap<usize, usize> = inputs
        .deduped
        .contents
        .iter()
        .enumerate()
        .flat_map(|(c, content)| content.files.iter().map(move |&f| (f, c)))
        .collect();
    let shared = |c: usize| inputs.deduped.contents[c].files.len() > 1;

    // Directory entries in breadth-first order; directories numbered so.
    let mut entries: Vec<usize> = vec![0];
    let mut dirs: Vec<usize> = Vec::new();
    let mut first_entry: Vec<u32> = Vec::new();
    let mut queue = VecDeque::from([0usize]);
    let mut entry_of: HashMap<usize, u32> = HashMap::from([(0, 0)]);
    while let Some(d) = queue.pop_front() {
        dirs.push(d);
        first_entry.push(entries.len() as u32);
        let Kind::Dir { children } = &tree.entries[d].kind else {
            continue;
        };
        for &c in children {
            if let Kind::File { file } = tree.entries[c].kind {
                if unreadable.contains(&file) {
                    continue;
                }
            }
            entry_of.insert(c, entries.len() as u32);
            entries.push(c);
            if matches!(tree.entries[c].kind, Kind::Dir { .. }) {
                queue.push_back(c);
            }
        }
    }

    // Non-directory inodes: one per entry, except that hard links share
    // one per file. Files are ordered by their content's place in the
    // chunk table: unique contents first, then shared ones.
    let mut chunk_order: Vec<usize> = Vec::new();
    let mut file_seen: HashMap<usize, ()> = HashMap::new();
    let mut others: Vec<(Class, usize, usize)> = Vec::new(); // (class, sort key, entry)
    for &e in &entries[1..] {
        let class = match tree.entries[e].kind {
            Kind::Dir { .. } => continue,
            Kind::Symlink { .. } => Class::Symlink,
            Kind::File { file } => {
                if file_seen.insert(file, ()).is_some() {
                    continue;
                }
                if shared(content_of[&file]) {
                    Class::SharedFile
                } else {
                    Class::UniqueFile
                }
            }
            Kind::Device { .. } => Class::Device,
            Kind::Special => Class::Special,
        };
        others.push((class, 0, e));
    }
    // Contents in data order define both chunk-table orders.
    let data_rank: HashMap<usize, usize> = {
        let mut first_block: Vec<(u32, usize)> = inputs
            .pieces
            .iter()
            .enumerate()
            .map(|(c, p)| {
                let b = p.iter().find_map(|x| match x {
                    Piece::Data { block, .. } => Some(*block),
                    Piece::Hole(_) => None,
                });
                (b.unwrap_or(u32::MAX), c)
            })
            .collect();
        first_block.sort();
        first_block
            .into_iter()
            .enumerate()
            .map(|(rank, (_, c))| (c, rank))
            .collect()
    };
    for o in others.iter_mut() {
        if let Kind::File { file } = tree.entries[o.2].kind {
            o.1 = data_rank[&content_of[&file]];
        }
    }
    others.sort_by_key(|&(class, key, _)| (class, key));
    let mut shared_index: HashMap<usize, u32> = HashMap::new();
    let mut shared_files = Vec::new();
    let mut shared_contents = Vec::new();
    for &(class, _, e) in &others {
        if let Kind::File { file } = tree.entries[e].kind {
            let c = content_of[&file];
            match class {
                Class::UniqueFile => chunk_order.push(c),
                Class::SharedFile => {
                    let next = shared_index.len() as u32;
                    let s = *shared_index.entry(c).or_insert_with(|| {
                        shared_contents.push(c);
                        next
                    });
                    shared_files.push(s);
                }
                _ => {}
            }
        }
    }
    chunk_order.extend(shared_contents);

    // Inode number of each entry.
    let mut inode_of_entry: HashMap<usize, u32> = HashMap::new();
    let mut inode_of_file: HashMap<usize, u32> = HashMap::new();
    for (i, &d) in dirs.iter().enumerate() {
        inode_of_entry.insert(d, i as u32);
    }
    let mut inode_entries: Vec<usize> = dirs.clone();
    for &(_, _, e) in &others {
        let ino = inode_entries.len() as u32;
        inode_of_entry.insert(e, ino);
        if let Kind::File { file } = tree.entries[e].kind {
            inode_of_file.insert(file, ino);
        }
        inode_entries.push(e);
    }
    for &e in &entries {
        if let Kind::File { file } = tree.entries[e].kind {
            inode_of_entry.insert(e, inode_of_file[&file]);
        }
    }

    let mut meta = Metadata {
        block_size: inputs.block_size,
        ..Metadata::default()
    };

    // Names and directory entries.
    let mut name_index: HashMap<&[u8], u32> = HashMap::new();
    for &e in &entries {
        let name = tree.entries[e].name.as_slice();
        let ni = if e == 0 {
            0
        } else {
            let next = meta.names.len() as u32;
            *name_index.entry(name).or_insert_with(|| {
                meta.names.push(name.to_vec());
                next
            })
        };
        meta.dir_entries.push(DirEntry {
            name_index: ni,
            inode_num: inode_of_entry[&e],
        });
    }
    for (i, &d) in dirs.iter().enumerate() {
        meta.directories.push(Directory {
            parent_entry: entry_of[&tree.entries[d].parent],
            first_entry: first_entry[i],
            self_entry: entry_of[&d],
        });
    }
    meta.directories.push(Directory {
        parent_entry: 0,
        first_entry: entries.len() as u32,
        self_entry: 0,
    });

    // Symlinks and devices.
    let mut target_index: HashMap<&[u8], u32> = HashMap::new();
    let mut devices = Vec::new();
    for &e in &inode_entries {
        match &tree.entries[e].kind {
            Kind::Symlink { target } => {
                let next = meta.symlinks.len() as u32;
                let t = *target_index.entry(target.as_slice()).or_insert_with(|| {
                    meta.symlinks.push(target.clone());
                    next
                });
                meta.symlink_table.push(t);
            }
            Kind::Device { rdev } => devices.push(*rdev),
            _ => {}
        }
    }
    if !devices.is_empty() {
        meta.devices = Some(devices);
    }

    // Chunks.
    let hole_block = inputs.blocks;
    let block_bits = inputs.block_size.trailing_zeros();
    let max_data_chunk = inputs
        .pieces
        .iter()
        .flatten()
        .filter_map(|p| match p {
            Piece::Data { size, .. } => Some(*size),
            Piece::Hole(_) => None,
        })
        .max()
        .unwrap_or(0);
    let size_bits = u32::BITS - max_data_chunk.leading_zeros();
    let inline_hole_limit = if size_bits + block_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << (size_bits + block_bits)) - 1
    };
    let mut large_holes: Vec<u64> = Vec::new();
    let mut any_hole = false;
    let mut size_lookup = BTreeMap::new();
    let mut allocated_lookup = BTreeMap::new();
    let mut content_sizes = HashMap::new();
    meta.chunk_table.push(0);
    for (table_index, &c) in chunk_order.iter().enumerate() {
        let (mut size, mut allocated, mut count) = (0u64, 0u64, 0u32);
        for p in &inputs.pieces[c] {
            count += 1;
            match *p {
                Piece::Data {
                    block,
                    offset,
                    size: s,
                } => {
                    size += u64::from(s);
                    allocated += u64::from(s);
                    meta.chunks.push(Chunk {
                        block,
                        offset,
                        size: s,
                    });
                }
                Piece::Hole(h) => {
                    any_hole = true;
                    size += h;
                    let offset = (h & ((1u64 << block_bits) - 1)) as u32;
                    let chunk = if h <= inline_hole_limit && offset != LARGE_HOLE_OFFSET {
                        Chunk {
                            block: hole_block,
                            offset,
                            size: (h >> block_bits) as u32,
                        }
                    } else {
                        let i = large_holes.iter().position(|&x| x == h).unwrap_or_else(|| {
                            large_holes.push(h);
                            large_holes.len() - 1
                        });
                        Chunk {
                            block: hole_block,
                            offset: LARGE_HOLE_OFFSET,
                            size: i as u32,
                        }
                    };
                    meta.chunks.push(chunk);
                }
            }
        }
        meta.chunk_table.push(meta.chunks.len() as u32);
        if count >= SIZE_CACHE_MIN_CHUNKS {
            size_lookup.insert(table_index as u32, size);
            if allocated != size {
                allocated_lookup.insert(table_index as u32, allocated);
            }
        }
        content_sizes.insert(c, (size, allocated));
    }
    meta.shared_files = shared_files;
    meta.reg_file_size_cache = Some(InodeSizeCache {
        size_lookup,
        min_chunk_count: u64::from(SIZE_CACHE_MIN_CHUNKS),
        allocated_size_lookup: allocated_lookup,
    });
    if any_hole {
        meta.hole_block_index = Some(hole_block);
        meta.features = Some(BTreeSet::from(["sparsefiles".to_string()]));
        if !large_holes.is_empty() {
            meta.large_hole_size = Some(large_holes);
        }
    }

    // Totals.
    let mut total = 0u64;
    let mut allocated_total = 0u64;
    let mut hardlinked = 0u64;
    for &e in &inode_entries {
        match &tree.entries[e].kind {
            Kind::Symlink { target } => {
                total += target.len() as u64;
                allocated_total += target.len() as u64;
            }
            Kind::File { file } => {
                let (size, allocated) = content_sizes[&content_of[file]];
                total += size;
                allocated_total += allocated;
                hardlinked += size * u64::from(tree.files[*file].links - 1);
            }
            _ => {}
        }
    }
    meta.total_fs_size = total;
    meta.total_hardlink_size = Some(hardlinked);
    if any_hole {
        meta.total_allocated_fs_size = Some(allocated_total);
    }

    // Inode attributes.
    let attrs: Vec<Attrs> = inode_entries
        .iter()
        .map(|&e| adjust(&tree.entries[e].attrs, options))
        .collect();
    let (uids, uid_index) = table(attrs.iter().map(|a| a.uid));
    let (gids, gid_index) = table(attrs.iter().map(|a| a.gid));
    let (modes, mode_index) = table(attrs.iter().map(|a| a.mode));
    meta.uids = uids;
    meta.gids = gids;
    meta.modes = modes;
    let times = Times::new(&attrs, options);
    for (a, &e) in attrs.iter().zip(&inode_entries) {
        let nlink = match tree.entries[e].kind {
            Kind::File { file } => tree.files[file].links,
            _ => 1,
        };
        let (mtime_offset, mtime_subsec) = times.encode(a.mtime);
        let (mut atime_offset, mut atime_subsec, mut ctime_offset, mut ctime_subsec) = (0, 0, 0, 0);
        if options.keep_all_times {
            (atime_offset, atime_subsec) = times.encode(a.atime);
            (ctime_offset, ctime_subsec) = times.encode(a.ctime);
        }
        meta.inodes.push(InodeData {
            mode_index: mode_index[&a.mode],
            owner_index: uid_index[&a.uid],
            group_index: gid_index[&a.gid],
            atime_offset,
            mtime_offset,
            ctime_offset,
            atime_subsec,
            mtime_subsec,
            ctime_subsec,
            nlink_minus_one: nlink - 1,
            ..InodeData::default()
        });
    }
    meta.timestamp_base = times.base;
    meta.options = Some(FsOptions {
        mtime_only: !options.keep_all_times,
        time_resolution_sec: times.resolution_sec,
        subsecond_resolution_nsec_multiplier: times.subsec_ns,
        inodes_have_nlink: true,
        ..FsOptions::default()
    });
    meta.create_timestamp = options.create_timestamp;
    meta.dwarfs_version = Some(format!("hoard {}", env!("CARGO_PKG_VERSION")));
    meta
}

/// Applies owner, group, time and permission overrides.
fn adjust(a: &Attrs, options: &AttrOptions) -> Attrs {
    let mut a = *a;
    if let Some(uid) = options.set_owner {
        a.uid = uid;
    }
    if let Some(gid) = options.set_group {
        a.gid = gid;
    }
    if let Some(t) = options.set_time {
        let t = Time { sec: t, nsec: 0 };
        (a.atime, a.mtime, a.ctime) = (t, t, t);
    }
    if let Some(limit) = options.clamp_time {
        for t in [&mut a.atime, &mut a.mtime, &mut a.ctime] {
            if t.sec >= limit {
                *t = Time {
                    sec: limit,
                    nsec: 0,
                };
            }
        }
    }
    if let Some(chmod) = &options.chmod {
        a.mode = chmod.apply(a.mode);
    }
    a
}

/// How times are stored, as DwarFS reads them: `(base + offset) *
/// resolution` seconds, plus optional sub-second units.
struct Times {
    /// The earliest time, in units of the resolution.
    base: u64,
    /// Seconds per unit, when not 1.
    resolution_sec: Option<u32>,
    /// Nanoseconds per sub-second unit, when sub-seconds are stored.
    subsec_ns: Option<u32>,
}

impl Times {
    fn new(attrs: &[Attrs], options: &AttrOptions) -> Self {
        let res = options.time_resolution_ns.unwrap_or(1_000_000_000).max(1);
        let (resolution_sec, subsec_ns) = if res >= 1_000_000_000 {
            let s = (res / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
            ((s > 1).then_some(s), None)
        } else {
            (None, Some(res as u32))
        };
        let step = u64::from(resolution_sec.unwrap_or(1));
        let times = attrs.iter().flat_map(|a| {
            let mut v = vec![a.mtime];
            if options.keep_all_times {
                v.extend([a.atime, a.ctime]);
            }
            v
        });
        let min = times.map(|t| t.sec.max(0) as u64).min().unwrap_or(0);
        Times {
            base: min / step,
            resolution_sec,
            subsec_ns,
        }
    }

    fn encode(&self, t: Time) -> (u64, u64) {
        let units = t.sec.max(0) as u64 / u64::from(self.resolution_sec.unwrap_or(1));
        let offset = units.saturating_sub(self.base);
        let subsec = self
            .subsec_ns
            .map_or(0, |ns| u64::from(t.nsec) / u64::from(ns));
        (offset, subsec)
    }
}
