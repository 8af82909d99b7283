//! The file system view of an image: lookup, readdir, stat, readlink, read.

use crate::cache::{Block, BlockCache, DEFAULT_DECRATIO};
use crate::error::{corrupt, Error, Result};
use crate::image::{Image, OpenOptions, Section};
use crate::inode::{FileKind, InodeLayout, Stat, Time};
use hoard_format::metadata::{Metadata, SUPPORTED_FEATURES};
use hoard_format::section::SectionType;
use std::ops::Range;
use std::path::Path;

/// The most metadata (uncompressed) an image may carry: enough for tens of
/// millions of entries, while keeping a hostile image from making us
/// allocate without bound.
const MAX_METADATA_SIZE: usize = 512 << 20;
/// The largest block size accepted.
const MAX_BLOCK_SIZE: u32 = 1 << 30;
/// Chunk offset marking a hole whose size is in `large_hole_size`.
const LARGE_HOLE_OFFSET: u32 = u32::MAX;

/// Options for opening a file system.
#[derive(Debug, Clone)]
pub struct FsOptions {
    /// How to open the image file.
    pub open: OpenOptions,
    /// Bytes of decompressed blocks to keep in memory.
    pub cache_size: usize,
    /// The fraction of a block (`0.0..=1.0`) past which a read decodes
    /// all of it rather than only as far as it needs (DwarFS's
    /// `decratio`; 0 decodes blocks whole at their first read).
    pub decratio: f64,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            open: OpenOptions::default(),
            cache_size: 512 << 20,
            decratio: DEFAULT_DECRATIO,
        }
    }
}

/// One piece of a regular file: bytes from a block, or a hole of zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// `size` bytes at `offset` in block `block`.
    Data {
        /// Block number.
        block: u32,
        /// Offset in the decompressed block.
        offset: u32,
        /// Length.
        size: u32,
    },
    /// `size` zero bytes not stored anywhere.
    Hole {
        /// Length.
        size: u64,
    },
}

impl Extent {
    /// Length of the extent in bytes.
    pub fn len(&self) -> u64 {
        match *self {
            Extent::Data { size, .. } => u64::from(size),
            Extent::Hole { size } => size,
        }
    }

    /// Whether the extent is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Name, without any `/`.
    pub name: Vec<u8>,
    /// Inode number.
    pub ino: u32,
}

/// An open DwarFS image, ready to be read.
#[derive(Debug)]
pub struct Filesystem {
    image: Image,
    meta: Metadata,
    layout: InodeLayout,
    blocks: Vec<Section>,
    cache: BlockCache,
    /// Link counts per regular file inode, when the image does not store them.
    nlinks: Option<Vec<u32>>,
}

impl Filesystem {
    /// Opens the image at `path`. Errors do not name `path`: the caller
    /// does.
    pub fn open(path: &Path, options: &FsOptions) -> Result<Self> {
        if !(0.0..=1.0).contains(&options.decratio) {
            return Err(Error::Unsupported(format!(
                "decratio must be between 0.0 and 1.0, not {}",
                options.decratio
            )));
        }
        let image = Image::open(path, &options.open)?;
        Self::with_cache(image, BlockCache::new(options.cache_size, options.decratio))
    }

    /// Loads the metadata of an opened image, with a block cache of
    /// `cache_size` bytes and the default `decratio`.
    pub fn from_image(image: Image, cache_size: usize) -> Result<Self> {
        Self::with_cache(image, BlockCache::new(cache_size, DEFAULT_DECRATIO))
    }

    fn with_cache(image: Image, cache: BlockCache) -> Result<Self> {
        let schema_section = image
            .find(SectionType::METADATA_V2_SCHEMA)
            .ok_or_else(|| corrupt!("no metadata schema section"))?;
        let meta_section = image
            .find(SectionType::METADATA_V2)
            .ok_or_else(|| corrupt!("no metadata section"))?;
        let schema = image.load(schema_section, MAX_METADATA_SIZE)?;
        let data = image.load(meta_section, MAX_METADATA_SIZE)?;
        let meta = Metadata::decode(&schema, &data)?;
        if let Some(features) = &meta.features {
            let unknown: Vec<&str> = features
                .iter()
                .map(String::as_str)
                .filter(|f| !SUPPORTED_FEATURES.contains(f))
                .collect();
            if !unknown.is_empty() {
                return Err(Error::Unsupported(format!(
                    "file system uses the following features unsupported by this build: {}",
                    unknown.join(", ")
                )));
            }
        }
        if !meta.block_size.is_power_of_two() || meta.block_size > MAX_BLOCK_SIZE {
            return Err(corrupt!("invalid block size {}", meta.block_size));
        }
        let layout = InodeLayout::of(&meta)?;
        let blocks: Vec<Section> = image
            .sections()
            .iter()
            .filter(|s| s.header.kind == SectionType::BLOCK)
            .cloned()
            .collect();
        let mut fs = Filesystem {
            image,
            meta,
            layout,
            blocks,
            cache,
            nlinks: None,
        };
        fs.check_structure()?;
        if !fs.meta.options.is_some_and(|o| o.inodes_have_nlink) {
            fs.nlinks = Some(fs.count_links());
        }
        Ok(fs)
    }

    /// Checks what every accessor relies on: directory ranges, entry inode
    /// numbers and chunk table ranges.
    fn check_structure(&self) -> Result<()> {
        let entries = self.meta.dir_entries.len();
        if entries == 0 {
            return Err(corrupt!("no directory entries"));
        }
        let mut prev = 0u32;
        for (i, dir) in self.meta.directories.iter().enumerate() {
            if dir.first_entry < prev || dir.first_entry as usize > entries {
                return Err(corrupt!(
                    "directory {i}: first entry {} out of order or range",
                    dir.first_entry
                ));
            }
            prev = dir.first_entry;
        }
        if let Some(e) = self
            .meta
            .dir_entries
            .iter()
            .find(|e| e.inode_num >= self.layout.count)
        {
            return Err(corrupt!(
                "directory entry names inode {} of {}",
                e.inode_num,
                self.layout.count
            ));
        }
        let mut prev = 0u32;
        for (i, &c) in self.meta.chunk_table.iter().enumerate() {
            if c < prev || c as usize > self.meta.chunks.len() {
                return Err(corrupt!(
                    "chunk table entry {i} ({c}) out of order or range"
                ));
            }
            prev = c;
        }
        Ok(())
    }

    /// Counts the directory entries naming each regular file inode.
    fn count_links(&self) -> Vec<u32> {
        let files = self.layout.files;
        let mut counts = vec![0u32; (self.layout.devices - files) as usize];
        for e in &self.meta.dir_entries {
            if let Some(c) = e
                .inode_num
                .checked_sub(files)
                .and_then(|i| counts.get_mut(i as usize))
            {
                *c = c.saturating_add(1);
            }
        }
        counts
    }

    /// The section layer below this file system.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// The decoded metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// Inode numbering.
    pub fn layout(&self) -> &InodeLayout {
        &self.layout
    }

    /// The block sections, in block-number order.
    pub fn blocks(&self) -> &[Section] {
        &self.blocks
    }

    /// The block cache.
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The root directory's inode number.
    pub fn root(&self) -> u32 {
        0
    }

    fn kind_of(&self, ino: u32) -> Result<FileKind> {
        let inode = self.inode(ino)?;
        let mode = self.meta.modes[inode.mode_index as usize];
        Ok(FileKind::from_mode(mode).expect("checked by InodeLayout::of"))
    }

    fn inode(&self, ino: u32) -> Result<&hoard_format::metadata::InodeData> {
        self.meta
            .inodes
            .get(ino as usize)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    /// The range of `dir_entries` of directory `ino`.
    fn entry_range(&self, ino: u32) -> Result<Range<usize>> {
        if ino >= self.layout.directories() {
            return Err(Error::WrongType(format!("inode {ino} is not a directory")));
        }
        let dirs = &self.meta.directories;
        let start = dirs[ino as usize].first_entry as usize;
        let end = dirs[ino as usize + 1].first_entry as usize;
        Ok(start..end)
    }

    fn name(&self, index: u32) -> Result<&[u8]> {
        self.meta
            .names
            .get(index as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| corrupt!("name index {index} out of range"))
    }

    /// The entries of directory `ino`, in stored (sorted) order, without
    /// `.` and `..`.
    pub fn readdir(&self, ino: u32) -> Result<Vec<DirEntry>> {
        self.entry_range(ino)?
            .map(|i| {
                let e = self.meta.dir_entries[i];
                Ok(DirEntry {
                    name: self.name(e.name_index)?.to_vec(),
                    ino: e.inode_num,
                })
            })
            .collect()
    }

    /// Number of entries in directory `ino`.
    pub fn entry_count(&self, ino: u32) -> Result<usize> {
        Ok(self.entry_range(ino)?.len())
    }

    /// The inode of the parent of directory `ino` (the root is its own parent).
    pub fn parent(&self, ino: u32) -> Result<u32> {
        self.entry_range(ino)?;
        let entry = self.meta.directories[ino as usize].parent_entry;
        self.meta
            .dir_entries
            .get(entry as usize)
            .map(|e| e.inode_num)
            .ok_or_else(|| corrupt!("directory {ino}: parent entry {entry} out of range"))
    }

    /// Finds `name` in directory `dir`.
    pub fn lookup(&self, dir: u32, name: &[u8]) -> Result<Option<u32>> {
        let range = self.entry_range(dir)?;
        let entries = &self.meta.dir_entries[range];
        let mut lo = 0;
        let mut hi = entries.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.name(entries[mid].name_index)?.cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(entries[mid].inode_num)),
            }
        }
        Ok(None)
    }

    /// Finds the inode of a `/`-separated path relative to the root
    /// (empty, `/` and `.` components are skipped; symlinks are not followed).
    pub fn lookup_path(&self, path: &str) -> Result<u32> {
        let mut ino = self.root();
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            ino = if part == ".." {
                self.parent(ino)?
            } else {
                if self.kind_of(ino)? != FileKind::Directory {
                    return Err(Error::NotFound(path.to_string()));
                }
                self.lookup(ino, part.as_bytes())?
                    .ok_or_else(|| Error::NotFound(path.to_string()))?
            };
        }
        Ok(ino)
    }

    /// The attributes of inode `ino`.
    pub fn stat(&self, ino: u32) -> Result<Stat> {
        let inode = *self.inode(ino)?;
        let kind = self.kind_of(ino)?;
        let mode = self.meta.modes[inode.mode_index as usize];
        // Releases up to 0.7 stored the id itself in the index field, with
        // an empty table, when --set-owner/--set-group was used.
        let id = |table: &[u32], index: u32, what: &str| -> Result<u32> {
            if table.is_empty() {
                return Ok(index);
            }
            table
                .get(index as usize)
                .copied()
                .ok_or_else(|| corrupt!("inode {ino}: {what} index {index} out of range"))
        };
        let uid = id(&self.meta.uids, inode.owner_index, "owner")?;
        let gid = id(&self.meta.gids, inode.group_index, "group")?;
        let (size, allocated_size) = match kind {
            FileKind::Directory => {
                let n = self.entry_count(ino)? as u64;
                (n, n)
            }
            FileKind::Symlink => {
                let n = self.readlink(ino)?.len() as u64;
                (n, n)
            }
            FileKind::Regular => self.file_sizes(ino)?,
            _ => (0, 0),
        };
        let nlink = match kind {
            FileKind::Regular => match &self.nlinks {
                Some(counts) => counts[(ino - self.layout.files) as usize].max(1),
                None => inode.nlink_minus_one.saturating_add(1),
            },
            _ => 1,
        };
        let rdev = match kind {
            FileKind::CharDevice | FileKind::BlockDevice => self
                .meta
                .devices
                .as_ref()
                .and_then(|d| d.get((ino - self.layout.devices) as usize))
                .copied()
                .ok_or_else(|| corrupt!("inode {ino}: no device number"))?,
            _ => 0,
        };
        let options = self.meta.options.unwrap_or_default();
        let resolution = i64::from(options.time_resolution_sec.unwrap_or(1).max(1));
        let nsec_multiplier = u64::from(options.subsecond_resolution_nsec_multiplier.unwrap_or(0));
        let time = |offset: u64, subsec: u64| Time {
            sec: i64::try_from(self.meta.timestamp_base.saturating_add(offset))
                .unwrap_or(i64::MAX)
                .saturating_mul(resolution),
            nsec: u32::try_from(subsec.saturating_mul(nsec_multiplier))
                .unwrap_or(0)
                .min(999_999_999),
        };
        let mtime = time(inode.mtime_offset, inode.mtime_subsec);
        let (atime, ctime) = if options.mtime_only {
            (mtime, mtime)
        } else {
            (
                time(inode.atime_offset, inode.atime_subsec),
                time(inode.ctime_offset, inode.ctime_subsec),
            )
        };
        Ok(Stat {
            ino,
            kind,
            mode,
            nlink,
            uid,
            gid,
            size,
            allocated_size,
            atime,
            mtime,
            ctime,
            rdev,
        })
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u32) -> Result<&[u8]> {
        if ino < self.layout.symlinks || ino >= self.layout.files {
            return Err(Error::WrongType(format!("inode {ino} is not a symlink")));
        }
        let index = self.meta.symlink_table[(ino - self.layout.symlinks) as usize];
        self.meta
            .symlinks
            .get(index as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| corrupt!("symlink {ino}: target index {index} out of range"))
    }

    /// The index into `chunk_table` of regular file `ino`.
    pub fn content_index(&self, ino: u32) -> Result<usize> {
        if ino < self.layout.files || ino >= self.layout.devices {
            return Err(Error::WrongType(format!(
                "inode {ino} is not a regular file"
            )));
        }
        let index = ino - self.layout.files;
        if index < self.layout.unique_files {
            return Ok(index as usize);
        }
        let shared = self.meta.shared_files[(index - self.layout.unique_files) as usize];
        Ok(shared as usize + self.layout.unique_files as usize)
    }

    /// The range of `chunks` that makes up regular file `ino`.
    pub fn chunk_range(&self, ino: u32) -> Result<Range<usize>> {
        let i = self.content_index(ino)?;
        let table = &self.meta.chunk_table;
        // InodeLayout::of guarantees i + 1 < table.len(); check_structure
        // that entries increase and stay within `chunks`.
        Ok(table[i] as usize..table[i + 1] as usize)
    }

    /// Decodes chunk `index` into an extent.
    pub fn extent(&self, index: usize) -> Result<Extent> {
        let c = *self
            .meta
            .chunks
            .get(index)
            .ok_or_else(|| corrupt!("chunk {index} out of range"))?;
        if Some(c.block) == self.meta.hole_block_index {
            let size = if c.offset == LARGE_HOLE_OFFSET {
                *self
                    .meta
                    .large_hole_size
                    .as_ref()
                    .and_then(|l| l.get(c.size as usize))
                    .ok_or_else(|| {
                        corrupt!("chunk {index}: large hole index {} out of range", c.size)
                    })?
            } else {
                u64::from(c.size) * u64::from(self.meta.block_size) + u64::from(c.offset)
            };
            return Ok(Extent::Hole { size });
        }
        let end = u64::from(c.offset) + u64::from(c.size);
        if c.block as usize >= self.blocks.len() || end > u64::from(self.meta.block_size) {
            return Err(corrupt!(
                "chunk {index} (block {}, offset {}, size {}) is outside the {} blocks of {} bytes",
                c.block,
                c.offset,
                c.size,
                self.blocks.len(),
                self.meta.block_size
            ));
        }
        Ok(Extent::Data {
            block: c.block,
            offset: c.offset,
            size: c.size,
        })
    }

    /// The extents of regular file `ino`, in file order.
    pub fn extents(&self, ino: u32) -> Result<Vec<Extent>> {
        self.chunk_range(ino)?.map(|i| self.extent(i)).collect()
    }

    /// Size and allocated (non-hole) size of regular file `ino`.
    fn file_sizes(&self, ino: u32) -> Result<(u64, u64)> {
        let mut size = 0u64;
        let mut allocated = 0u64;
        for i in self.chunk_range(ino)? {
            let e = self.extent(i)?;
            size = size
                .checked_add(e.len())
                .ok_or_else(|| corrupt!("inode {ino}: file size overflows"))?;
            if let Extent::Data { size: s, .. } = e {
                allocated += u64::from(s);
            }
        }
        Ok((size, allocated))
    }

    /// Block `number`, decompressed whole, from the cache.
    pub fn block(&self, number: u32) -> Result<Block> {
        self.block_until(number, usize::MAX)
    }

    /// Block `number` from the cache, decompressed at least up to byte
    /// `end` (the whole block if `end` reaches past it); its length is
    /// `end` or, if less, the block's size.
    pub fn block_until(&self, number: u32, end: usize) -> Result<Block> {
        let section = self
            .blocks
            .get(number as usize)
            .ok_or_else(|| corrupt!("block {number} does not exist"))?;
        self.cache.get(
            number,
            end,
            || {
                self.image
                    .partial_decoder(section, self.meta.block_size as usize)
            },
            |e| section.decode_error(e),
        )
    }

    /// Reads up to `buf.len()` bytes of regular file `ino` at `offset`;
    /// returns how many were read (less only at the end of the file).
    pub fn read(&self, ino: u32, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut pos = 0u64; // file position of the current extent
        let mut done = 0usize;
        for i in self.chunk_range(ino)? {
            if done == buf.len() {
                break;
            }
            let extent = self.extent(i)?;
            let len = extent.len();
            let want = offset + done as u64;
            if want >= pos + len {
                pos += len;
                continue;
            }
            let skip = want - pos;
            let n = (len - skip).min((buf.len() - done) as u64) as usize;
            let out = &mut buf[done..done + n];
            match extent {
                Extent::Hole { .. } => out.fill(0),
                Extent::Data {
                    block,
                    offset: start,
                    ..
                } => {
                    let from = start as usize + skip as usize;
                    let data = self.block_until(block, from + n)?;
                    let src = data.get(from..from + n).ok_or_else(|| {
                        corrupt!(
                            "inode {ino}: chunk reaches past the end of block {block} ({} bytes)",
                            data.len()
                        )
                    })?;
                    out.copy_from_slice(src);
                }
            }
            done += n;
            pos += len;
        }
        Ok(done)
    }

    /// Calls `sink` with the contents of regular file `ino`, extent by extent.
    pub fn read_all(
        &self,
        ino: u32,
        mut sink: impl FnMut(ContentPiece<'_>) -> Result<()>,
    ) -> Result<()> {
        for i in self.chunk_range(ino)? {
            match self.extent(i)? {
                Extent::Hole { size } => sink(ContentPiece::Hole(size))?,
                Extent::Data {
                    block,
                    offset,
                    size,
                } => {
                    // Whole-file readers (extract, cat) go through whole
                    // blocks: decoding them in one go is fastest.
                    let data = self.block(block)?;
                    let range = offset as usize..offset as usize + size as usize;
                    let bytes = data.get(range).ok_or_else(|| {
                        corrupt!(
                            "inode {ino}: chunk reaches past the end of block {block} ({} bytes)",
                            data.len()
                        )
                    })?;
                    sink(ContentPiece::Data(bytes))?;
                }
            }
        }
        Ok(())
    }

    /// All regular file inodes, sorted by where their data starts in the
    /// image, so that reading them in this order decompresses each block
    /// about once.
    pub fn files_in_data_order(&self) -> Result<Vec<u32>> {
        let mut keyed = Vec::with_capacity((self.layout.devices - self.layout.files) as usize);
        for ino in self.layout.files..self.layout.devices {
            let range = self.chunk_range(ino)?;
            let key = match range.clone().next().map(|i| self.extent(i)).transpose()? {
                Some(Extent::Data { block, offset, .. }) => (block, offset),
                _ => (0, 0),
            };
            keyed.push((key, ino));
        }
        keyed.sort_unstable();
        Ok(keyed.into_iter().map(|(_, ino)| ino).collect())
    }
}

/// A piece of file content handed to [`Filesystem::read_all`].
#[derive(Debug, Clone, Copy)]
pub enum ContentPiece<'a> {
    /// Bytes of data.
    Data(&'a [u8]),
    /// This many zero bytes (a hole in a sparse file).
    Hole(u64),
}
