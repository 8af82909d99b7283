//! The file system view of an image: lookup, readdir, stat, readlink, read.

use crate::cache::{Block, BlockCache, DEFAULT_DECRATIO};
use crate::delta::{decode_dependencies, Dependency, Lower, DELTA_FEATURE, DEPENDS_XATTR};
use crate::error::{corrupt, Error, Result};
use crate::image::{Image, OpenOptions};
use crate::inode::{FileKind, InodeLayout, Stat, Time};
use crate::offsets::{self, ChunkOffsets, CHECKPOINT, MANY_CHUNKS};
use crate::section::Section;
use crate::tables::{inode_field, Tables};
use hoard_format::metadata::{Metadata, SUPPORTED_FEATURES};
use hoard_format::section::SectionType;
use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The most metadata (uncompressed) an image may carry: enough for tens of
/// millions of entries, while keeping a hostile image from making us
/// allocate without bound.
const MAX_METADATA_SIZE: usize = 512 << 20;
/// The largest block size accepted.
const MAX_BLOCK_SIZE: u32 = 1 << 30;
/// The most symlinks [`crate::ViewExt::resolve_path`] follows (Linux's limit).
pub const MAX_SYMLINKS: usize = 40;
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
///
/// The metadata is read in place (see the `tables` module): opening checks
/// the table sizes, and each access checks the indices and offsets it
/// reads. [`Filesystem::validate`] checks everything at once.
#[derive(Debug)]
pub struct Filesystem {
    image: Image,
    tables: Tables,
    /// The schema payload, kept for [`Filesystem::metadata`].
    schema: Vec<u8>,
    layout: InodeLayout,
    /// As listed at open: blocks listed from the section index are pending (see
    /// [`Section::pending`]); reads resolve them.
    blocks: Vec<Section>,
    /// `blocks` with their headers, at the first [`Filesystem::blocks`].
    resolved_blocks: OnceLock<Vec<Section>>,
    cache: BlockCache,
    /// The whole metadata, decoded at the first [`Filesystem::metadata`].
    decoded: OnceLock<Result<Metadata>>,
    /// Link counts per regular file inode, when the image does not store
    /// them, counted at the first `stat` of a file.
    nlinks: OnceLock<Vec<u32>>,
    /// Parent entry of each directory, when the image does not store them,
    /// found at the first [`Filesystem::parent`].
    parents: OnceLock<Result<Vec<u32>>>,
    /// Symlink targets, decoded at the first [`Filesystem::readlink`].
    targets: OnceLock<Result<Vec<Vec<u8>>>>,
    /// Where the chunks of files with many chunks start, found at their
    /// first read.
    offsets: ChunkOffsets,
    /// For a delta layer read in a stack: the images below it.
    lower: OnceLock<Lower>,
}

impl Filesystem {
    /// Opens the image at `path`. Errors do not name `path`: the caller
    /// does.
    pub fn open(path: &Path, options: &FsOptions) -> Result<Self> {
        let cache = Self::check_options(options)?;
        let image = Image::open(path, &options.open)?;
        Self::with_cache(image, cache)
    }

    /// Checks `options` and makes the block cache they ask for.
    pub fn check_options(options: &FsOptions) -> Result<BlockCache> {
        if !(0.0..=1.0).contains(&options.decratio) {
            return Err(Error::Unsupported(format!(
                "decratio must be between 0.0 and 1.0, not {}",
                options.decratio
            )));
        }
        Ok(BlockCache::new(options.cache_size, options.decratio))
    }

    /// Opens the image at `path` with its blocks kept in the store of
    /// `cache`, beside those of other images (see
    /// [`BlockCache::for_another_image`]).
    pub(crate) fn open_sharing(
        path: &Path,
        open: &OpenOptions,
        cache: &BlockCache,
    ) -> Result<Self> {
        let image = Image::open(path, open)?;
        Self::with_cache(image, cache.for_another_image())
    }

    /// Loads the metadata of an opened image, with a block cache of
    /// `cache_size` bytes and the default `decratio`.
    pub fn from_image(image: Image, cache_size: usize) -> Result<Self> {
        Self::with_cache(image, BlockCache::new(cache_size, DEFAULT_DECRATIO))
    }

    /// Loads the metadata of an opened image, reading blocks through
    /// `cache` (from [`Filesystem::check_options`]).
    pub fn from_image_with_cache(image: Image, cache: BlockCache) -> Result<Self> {
        Self::with_cache(image, cache)
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
        let tables = Tables::open(&schema, data)?;
        let unknown: Vec<&str> = tables
            .features
            .iter()
            .map(String::as_str)
            .filter(|f| !SUPPORTED_FEATURES.contains(f) && *f != DELTA_FEATURE)
            .collect();
        if !unknown.is_empty() {
            return Err(Error::Unsupported(format!(
                "file system uses the following features unsupported by this build: {}",
                unknown.join(", ")
            )));
        }
        if !tables.block_size.is_power_of_two() || tables.block_size > MAX_BLOCK_SIZE {
            return Err(corrupt!("invalid block size {}", tables.block_size));
        }
        if tables.entries.len() == 0 {
            return Err(corrupt!("no directory entries"));
        }
        let layout = InodeLayout::from_tables(&tables)?;
        let blocks: Vec<Section> = image
            .listed_sections()
            .iter()
            .filter(|s| s.header.kind == SectionType::BLOCK)
            .cloned()
            .collect();
        let fs = Filesystem {
            image,
            tables,
            schema,
            layout,
            blocks,
            resolved_blocks: OnceLock::new(),
            cache,
            decoded: OnceLock::new(),
            nlinks: OnceLock::new(),
            parents: OnceLock::new(),
            targets: OnceLock::new(),
            offsets: ChunkOffsets::default(),
            lower: OnceLock::new(),
        };
        if fs.kind_of(fs.root())? != FileKind::Directory {
            return Err(corrupt!("the root inode is not a directory"));
        }
        Ok(fs)
    }

    /// Checks the whole metadata: it decodes in full, its inodes are
    /// ordered by kind with one table entry each, directory and chunk
    /// ranges are in order and in range, and every entry names an inode.
    /// Reading checks each of these where it looks; this finds them all.
    pub fn validate(&self) -> Result<()> {
        let meta = self.metadata()?;
        let layout = InodeLayout::of(meta)?;
        if layout != self.layout {
            return Err(corrupt!(
                "inode table does not match the tables of each kind ({layout:?} against {:?})",
                self.layout
            ));
        }
        let entries = meta.dir_entries.len();
        let mut prev = 0u32;
        for (i, dir) in meta.directories.iter().enumerate() {
            if dir.first_entry < prev || dir.first_entry as usize > entries {
                return Err(corrupt!(
                    "directory {i}: first entry {} out of order or range",
                    dir.first_entry
                ));
            }
            prev = dir.first_entry;
        }
        if let Some(e) = meta
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
        for (i, &c) in meta.chunk_table.iter().enumerate() {
            if c < prev || c as usize > meta.chunks.len() {
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
        for i in 0..self.tables.entries.len() {
            let (_, ino) = self.tables.entry(i);
            if let Some(c) = ino
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

    /// What identifies the image's tree: the SHA-256 of its metadata
    /// (schema and tables, decompressed), the same however its blocks are
    /// compressed.
    pub fn identity(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(&self.schema);
        h.update(&self.tables.data[..]);
        h.finalize().into()
    }

    /// The identity a delta layer records of the images it depends on:
    /// the SHA-256 of [`Filesystem::identity`] and of the place (from the
    /// image's start), size and contents of every block (the SHA-512/256
    /// its header records, its XXH3-64 in images older than v2.2), so
    /// that an image with the same metadata but other blocks is another
    /// image. Reads every block header (not the payloads).
    pub fn delta_identity(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(self.identity());
        for b in self.blocks() {
            // From the image's start: the same with a header before it.
            h.update(b.offset.saturating_sub(self.image.offset()).to_le_bytes());
            h.update(b.header.length.to_le_bytes());
            match (b.header.sha512_256, b.header.xxh3_64) {
                (Some(sha), _) => h.update(sha),
                (None, Some(xxh3)) => h.update(xxh3.to_le_bytes()),
                (None, None) => h.update([0u8; 32]),
            }
        }
        h.finalize().into()
    }

    /// Whether the image is a delta layer (see [`crate::delta`]).
    pub fn is_delta(&self) -> bool {
        self.tables.features.iter().any(|f| f == DELTA_FEATURE)
    }

    /// The images a delta layer depends on, bottom first (none for other
    /// images).
    pub fn dependencies(&self) -> Result<Vec<Dependency>> {
        if !self.is_delta() {
            return Ok(Vec::new());
        }
        let xattrs = self.xattrs(self.root())?;
        let (_, value) = xattrs
            .iter()
            .find(|(n, _)| *n == DEPENDS_XATTR)
            .ok_or_else(|| corrupt!("delta layer without its list of base images"))?;
        decode_dependencies(value)
    }

    /// Whether this is a delta layer not given its bases: its files do
    /// not read.
    pub fn needs_bases(&self) -> bool {
        self.is_delta() && self.lower.get().is_none()
    }

    /// Gives a delta layer the images below it, bottom first (their
    /// identities checked by the caller); a second call changes nothing.
    pub(crate) fn attach_lower(&self, images: Vec<Arc<Filesystem>>) {
        let _ = self.lower.set(Lower::new(images, self.blocks.len()));
    }

    /// For a block number of a delta layer's chunk that names a block of
    /// an image below it: that image (its index among the dependencies,
    /// bottom first, which is its layer in the stack) and its block.
    pub fn lower_block(&self, number: u32) -> Option<(usize, u32)> {
        if (number as usize) < self.blocks.len() {
            return None;
        }
        let (i, _, block) = self.lower.get()?.locate(number)?;
        Some((i, block))
    }

    /// The whole metadata, decoded (at the first call) and normalized.
    /// Reading the file system does not need it: it is for tools that
    /// report on or rewrite the metadata.
    pub fn metadata(&self) -> Result<&Metadata> {
        self.decoded
            .get_or_init(|| Ok(Metadata::decode(&self.schema, &self.tables.data)?))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Inode numbering.
    pub fn layout(&self) -> &InodeLayout {
        &self.layout
    }

    /// The block sections, in block-number order, each with its header
    /// (the first call reads the headers not read yet;
    /// [`Filesystem::block_count`] reads nothing).
    pub fn blocks(&self) -> &[Section] {
        if !self.blocks.iter().any(|s| s.pending) {
            return &self.blocks;
        }
        self.resolved_blocks.get_or_init(|| {
            self.image
                .sections()
                .iter()
                .filter(|s| s.header.kind == SectionType::BLOCK)
                .cloned()
                .collect()
        })
    }

    /// The number of blocks.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The block cache.
    pub fn cache(&self) -> &BlockCache {
        &self.cache
    }

    /// The root directory's inode number.
    pub fn root(&self) -> u32 {
        0
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.tables.block_size
    }

    /// Sum of all regular file sizes, as the image records it.
    pub fn total_fs_size(&self) -> u64 {
        self.tables.total_fs_size
    }

    /// Number of chunks (see [`Filesystem::extent`]).
    pub fn chunk_count(&self) -> usize {
        self.tables.chunks.len()
    }

    /// The names of the block categories the image records (none for an
    /// image written without categories).
    pub fn category_names(&self) -> &[String] {
        &self.tables.category_names
    }

    /// Where block `number` lies in the image file, header and payload,
    /// as listed at open (nothing is read); `None` past the last block.
    pub fn block_span(&self, number: u32) -> Option<Range<u64>> {
        let section = self.blocks.get(number as usize)?;
        Some(section.offset..section.end())
    }

    /// The size block `number` decompresses to, as its payload declares
    /// it (see [`Image::uncompressed_size`]), or else the image's block
    /// size; never more than the block size, which no block that decodes
    /// exceeds.
    pub fn decoded_size(&self, number: u32) -> u64 {
        let block_size = u64::from(self.tables.block_size);
        self.blocks
            .get(number as usize)
            .and_then(|section| self.image.uncompressed_size(section))
            .map_or(block_size, |size| size.min(block_size))
    }

    /// The name of the category of block `block`, if the image names it.
    pub fn block_category(&self, block: u32) -> Option<&str> {
        let c = *self.tables.block_categories.get(block as usize)?;
        self.tables
            .category_names
            .get(c as usize)
            .map(String::as_str)
    }

    /// The kind of inode `ino` (cheaper than [`Filesystem::stat`]).
    pub fn kind(&self, ino: u32) -> Result<FileKind> {
        self.kind_of(ino)
    }

    fn kind_of(&self, ino: u32) -> Result<FileKind> {
        let mode = self.mode(ino)?;
        let kind = FileKind::from_mode(mode)
            .ok_or_else(|| corrupt!("inode {ino}: invalid file type in mode {mode:o}"))?;
        if kind.rank() != self.layout.rank_of(ino) {
            return Err(corrupt!(
                "inode {ino}: a {kind:?} where the inode table has another kind"
            ));
        }
        Ok(kind)
    }

    fn mode(&self, ino: u32) -> Result<u32> {
        if ino >= self.layout.count {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        let index = self.tables.inode(ino, inode_field::MODE)?;
        self.tables
            .modes
            .get(index as usize)
            .copied()
            .ok_or_else(|| {
                corrupt!(
                    "inode {ino}: mode index {index} out of range ({} modes)",
                    self.tables.modes.len()
                )
            })
    }

    /// The range of directory entries of directory `ino`.
    fn entry_range(&self, ino: u32) -> Result<Range<usize>> {
        if ino >= self.layout.directories() {
            return Err(Error::WrongType(format!("inode {ino} is not a directory")));
        }
        let data = &self.tables.data;
        let first = &self.tables.first_entry;
        // InodeLayout::from_tables makes the table one longer than there are directories.
        let start = first.get(data, ino as usize).unwrap_or(0) as usize;
        let end = first.get(data, ino as usize + 1).unwrap_or(0) as usize;
        if start > end || end > self.tables.entries.len() {
            return Err(corrupt!(
                "directory {ino}: entries {start}..{end} out of order or range"
            ));
        }
        Ok(start..end)
    }

    /// Directory entry `i`, its inode number checked.
    fn dir_entry(&self, i: usize) -> Result<(u32, u32)> {
        let (name, ino) = self.tables.entry(i);
        if ino >= self.layout.count {
            return Err(corrupt!(
                "directory entry names inode {ino} of {}",
                self.layout.count
            ));
        }
        Ok((name, ino))
    }

    fn name(&self, index: u32) -> Result<Cow<'_, [u8]>> {
        self.tables
            .names
            .get(&self.tables.data, index as usize, "name")
    }

    /// The entries of directory `ino`, in stored (sorted) order, without
    /// `.` and `..`.
    pub fn readdir(&self, ino: u32) -> Result<Vec<DirEntry>> {
        self.readdir_from(ino, 0)?.collect()
    }

    /// The entries of directory `ino` from the `skip`-th on, one at a time.
    pub fn readdir_from(
        &self,
        ino: u32,
        skip: usize,
    ) -> Result<impl Iterator<Item = Result<DirEntry>> + '_> {
        Ok(self.entry_range(ino)?.skip(skip).map(|i| {
            let (name, ino) = self.dir_entry(i)?;
            Ok(DirEntry {
                name: self.name(name)?.into_owned(),
                ino,
            })
        }))
    }

    /// Number of entries in directory `ino`.
    pub fn entry_count(&self, ino: u32) -> Result<usize> {
        Ok(self.entry_range(ino)?.len())
    }

    /// The inode of the parent of directory `ino` (the root is its own parent).
    pub fn parent(&self, ino: u32) -> Result<u32> {
        self.entry_range(ino)?;
        let entry = match &self.tables.parent_entry {
            Some(stored) => stored.get(&self.tables.data, ino as usize),
            // Without stored parents, the root (listed first by every
            // mount) needs no walk of the tree.
            None if ino == self.root() => return Ok(ino),
            None => self
                .parents
                .get_or_init(|| self.find_parents())
                .as_ref()
                .map_err(Clone::clone)?
                .get(ino as usize)
                .copied(),
        };
        let entry = entry.unwrap_or(u32::MAX) as usize;
        if entry >= self.tables.entries.len() {
            return Err(corrupt!(
                "directory {ino}: parent entry {entry} out of range"
            ));
        }
        Ok(self.dir_entry(entry)?.1)
    }

    /// The parent entry of every directory, found by walking the tree from
    /// the root (entry 0), for images that do not store them. Each
    /// directory is visited once; unreachable ones get entry 0.
    fn find_parents(&self) -> Result<Vec<u32>> {
        let dirs = self.layout.directories() as usize;
        let mut parents = vec![0u32; dirs];
        let mut visited = vec![false; dirs];
        visited[0] = true;
        let mut queue = std::collections::VecDeque::from([0u32]);
        while let Some(entry) = queue.pop_front() {
            let (_, ino) = self.dir_entry(entry as usize)?;
            for e in self.entry_range(ino)? {
                let (_, child) = self.dir_entry(e)?;
                let child = child as usize;
                if child < dirs && !visited[child] {
                    visited[child] = true;
                    parents[child] = entry;
                    queue.push_back(e as u32);
                }
            }
        }
        Ok(parents)
    }

    /// Finds `name` in directory `dir`.
    pub fn lookup(&self, dir: u32, name: &[u8]) -> Result<Option<u32>> {
        let range = self.entry_range(dir)?;
        let mut lo = range.start;
        let mut hi = range.end;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (index, ino) = self.dir_entry(mid)?;
            match (*self.name(index)?).cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(ino)),
            }
        }
        Ok(None)
    }

    /// Finds the inode of a `/`-separated path relative to the root
    /// (empty, `/` and `.` components are skipped; symlinks are not followed).
    pub fn lookup_path(&self, path: &str) -> Result<u32> {
        self.lookup_path_bytes(path.as_bytes())
    }

    /// [`Filesystem::lookup_path`] for a path of any bytes (names need not
    /// be UTF-8), as the C and Python bindings pass them.
    pub fn lookup_path_bytes(&self, path: &[u8]) -> Result<u32> {
        lookup_path_in(
            path,
            self.root(),
            |ino| self.parent(ino),
            |ino| self.kind_of(ino),
            |ino, name| self.lookup(ino, name),
        )
    }

    /// The attributes of inode `ino`.
    pub fn stat(&self, ino: u32) -> Result<Stat> {
        let kind = self.kind_of(ino)?;
        let mode = self.mode(ino)?;
        let field = |f| self.tables.inode(ino, f);
        // Releases up to 0.7 stored the id itself in the index field, with
        // an empty table, when --set-owner/--set-group was used.
        let id = |table: &[u32], index: u64, what: &str| -> Result<u32> {
            if table.is_empty() {
                return Ok(index as u32);
            }
            table
                .get(index as usize)
                .copied()
                .ok_or_else(|| corrupt!("inode {ino}: {what} index {index} out of range"))
        };
        let uid = id(&self.tables.uids, field(inode_field::OWNER)?, "owner")?;
        let gid = id(&self.tables.gids, field(inode_field::GROUP)?, "group")?;
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
            FileKind::Regular if self.tables.options.inodes_have_nlink => {
                (field(inode_field::NLINK_MINUS_ONE)? as u32).saturating_add(1)
            }
            FileKind::Regular => self
                .nlinks
                .get_or_init(|| self.count_links())
                .get((ino - self.layout.files) as usize)
                .map_or(1, |&n| n.max(1)),
            _ => 1,
        };
        let rdev = match kind {
            FileKind::CharDevice | FileKind::BlockDevice => {
                let i = (ino - self.layout.devices) as usize;
                match &self.tables.devices {
                    Some(d) if i < d.len() => d.get(&self.tables.data, i, 0),
                    _ => return Err(corrupt!("inode {ino}: no device number")),
                }
            }
            _ => 0,
        };
        let options = &self.tables.options;
        let resolution = i64::from(options.time_resolution_sec.unwrap_or(1).max(1));
        let nsec_multiplier = u64::from(options.subsecond_resolution_nsec_multiplier.unwrap_or(0));
        let time = |offset: u64, subsec: u64| Time {
            // Wrapping: a base before 1970 is stored in two's complement.
            sec: (self.tables.timestamp_base.wrapping_add(offset) as i64)
                .saturating_mul(resolution),
            nsec: u32::try_from(subsec.saturating_mul(nsec_multiplier))
                .unwrap_or(0)
                .min(999_999_999),
        };
        let mtime = time(
            field(inode_field::MTIME)?,
            field(inode_field::MTIME_SUBSEC)?,
        );
        let (atime, ctime) = if options.mtime_only {
            (mtime, mtime)
        } else {
            (
                time(
                    field(inode_field::ATIME)?,
                    field(inode_field::ATIME_SUBSEC)?,
                ),
                time(
                    field(inode_field::CTIME)?,
                    field(inode_field::CTIME_SUBSEC)?,
                ),
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

    /// The extended attributes (name, value) of inode `ino`, sorted by
    /// name; none when the image stores none.
    pub fn xattrs(&self, ino: u32) -> Result<Vec<(&[u8], &[u8])>> {
        if ino >= self.layout.count {
            return Err(corrupt!("inode {ino} out of range"));
        }
        match &self.tables.xattrs {
            Some(x) => x.of(&self.tables.data, ino),
            None => Ok(Vec::new()),
        }
    }

    /// Whether the image stores extended attributes.
    pub fn has_xattrs(&self) -> bool {
        self.tables.xattrs.is_some()
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u32) -> Result<&[u8]> {
        if ino < self.layout.symlinks || ino >= self.layout.files {
            return Err(Error::WrongType(format!("inode {ino} is not a symlink")));
        }
        let index = self
            .tables
            .symlink_table
            .get(&self.tables.data, (ino - self.layout.symlinks) as usize)
            .unwrap_or(u32::MAX);
        let targets = self
            .targets
            .get_or_init(|| self.symlink_targets())
            .as_ref()
            .map_err(Clone::clone)?;
        targets
            .get(index as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| corrupt!("symlink {ino}: target index {index} out of range"))
    }

    /// Every symlink target, with the writer's path separator made `/`.
    fn symlink_targets(&self) -> Result<Vec<Vec<u8>>> {
        let strings = &self.tables.symlinks;
        (0..strings.len())
            .map(|i| {
                let mut t = strings.get(&self.tables.data, i, "symlink")?.into_owned();
                if let Some(sep) = self.tables.separator {
                    t.iter_mut().filter(|b| **b == sep).for_each(|b| *b = b'/');
                }
                Ok(t)
            })
            .collect()
    }

    /// The index into the chunk table of regular file `ino`.
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
        // InodeLayout::from_tables counts one shared file per entry.
        let shared = self.tables.shared_files[(index - self.layout.unique_files) as usize];
        Ok(shared as usize + self.layout.unique_files as usize)
    }

    /// The range of chunks (see [`Filesystem::extent`]) that makes up
    /// regular file `ino`.
    pub fn chunk_range(&self, ino: u32) -> Result<Range<usize>> {
        let i = self.content_index(ino)?;
        let (table, data) = (&self.tables.chunk_table, &self.tables.data);
        let (start, end) = (table.get(data, i), table.get(data, i + 1));
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e as usize <= self.tables.chunks.len() => {
                Ok(s as usize..e as usize)
            }
            _ => Err(corrupt!(
                "inode {ino}: chunk table entries {start:?}..{end:?} out of order or range"
            )),
        }
    }

    /// Decodes chunk `index` into an extent.
    pub fn extent(&self, index: usize) -> Result<Extent> {
        let chunks = &self.tables.chunks;
        if index >= chunks.len() {
            return Err(corrupt!("chunk {index} out of range"));
        }
        let data = &self.tables.data;
        let (block, offset, size) = (
            chunks.get(data, index, 0) as u32,
            chunks.get(data, index, 1) as u32,
            chunks.get(data, index, 2) as u32,
        );
        let block_size = self.tables.block_size;
        if Some(block) == self.tables.hole_block_index {
            let size = if offset == LARGE_HOLE_OFFSET {
                *self
                    .tables
                    .large_hole_size
                    .get(size as usize)
                    .ok_or_else(|| {
                        corrupt!("chunk {index}: large hole index {size} out of range")
                    })?
            } else {
                u64::from(size) * u64::from(block_size) + u64::from(offset)
            };
            return Ok(Extent::Hole { size });
        }
        let end = u64::from(offset) + u64::from(size);
        if block as usize >= self.blocks.len() && self.is_delta() {
            return self.lower_extent(index, block, offset, size);
        }
        if block as usize >= self.blocks.len() || end > u64::from(block_size) {
            return Err(corrupt!(
                "chunk {index} (block {block}, offset {offset}, size {size}) is outside the {} blocks of {block_size} bytes",
                self.blocks.len(),
            ));
        }
        Ok(Extent::Data {
            block,
            offset,
            size,
        })
    }

    /// Checks chunk `index` of a delta layer, which names block `block`
    /// of an image below it (only its size can be told of a layer alone:
    /// reading it fails, see [`Filesystem::block_until`]).
    fn lower_extent(&self, index: usize, block: u32, offset: u32, size: u32) -> Result<Extent> {
        let data = Extent::Data {
            block,
            offset,
            size,
        };
        let Some(lower) = self.lower.get() else {
            return Ok(data);
        };
        let (_, fs, _) = lower
            .locate(block)
            .ok_or_else(|| corrupt!("chunk {index}: block {block} is in no image below"))?;
        if u64::from(offset) + u64::from(size) > u64::from(fs.tables.block_size) {
            return Err(corrupt!(
                "chunk {index} (block {block}, offset {offset}, size {size}) is outside its block"
            ));
        }
        Ok(data)
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
        if let Some((_, fs, block)) = self.lower_of(number) {
            return fs.block_until(block, end);
        }
        if number as usize >= self.blocks.len() && self.needs_bases() {
            return Err(Error::Unsupported(
                "a delta layer reads only on its base images (stack it on them)".into(),
            ));
        }
        let section = self
            .blocks
            .get(number as usize)
            .ok_or_else(|| corrupt!("block {number} does not exist"))?;
        self.cache.get(
            number,
            end,
            || {
                self.image
                    .partial_decoder(section, self.tables.block_size as usize)
            },
            |e| section.decode_error(e),
        )
    }

    /// Reads up to `buf.len()` bytes of regular file `ino` at `offset`;
    /// returns how many were read (less only at the end of the file).
    pub fn read(&self, ino: u32, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_with(ino, offset, buf, |block, end| {
            self.block_until(block, end).map(Some)
        })
        .map(|n| n.unwrap_or_else(|| unreachable!("every block is fetched")))
    }

    /// Like [`Filesystem::read`], but only from blocks already decoded in
    /// the cache: `Ok(None)` when a block would have to be read or
    /// decoded first (a caller that must not wait long, such as the FUSE
    /// driver's request loop, then reads on another thread).
    pub fn read_cached(&self, ino: u32, offset: u64, buf: &mut [u8]) -> Result<Option<usize>> {
        self.read_with(ino, offset, buf, |block, end| {
            Ok(match self.lower_of(block) {
                Some((_, fs, block)) => fs.cache.get_decoded(block, end),
                None => self.cache.get_decoded(block, end),
            })
        })
    }

    /// The image below a delta layer holding block `number`, and its
    /// block there; `None` for the layer's own blocks.
    fn lower_of(&self, number: u32) -> Option<(usize, &Filesystem, u32)> {
        if (number as usize) < self.blocks.len() {
            return None;
        }
        self.lower.get()?.locate(number)
    }

    /// Reads as [`Filesystem::read`] does, taking blocks from `fetch`
    /// (block number, bytes needed); stops with `None` when it has none.
    fn read_with(
        &self,
        ino: u32,
        offset: u64,
        buf: &mut [u8],
        fetch: impl Fn(u32, usize) -> Result<Option<Block>>,
    ) -> Result<Option<usize>> {
        let chunks = self.chunk_range(ino)?;
        // The first chunk to look at, and its file position.
        let (mut first, mut pos) = (chunks.start, 0u64);
        if chunks.len() > MANY_CHUNKS {
            let checkpoints = self
                .offsets
                .of(ino, || self.checkpoints(ino, chunks.clone()))?;
            let (k, start) = offsets::start_for(&checkpoints, offset);
            (first, pos) = (chunks.start + k * CHECKPOINT, start);
        }
        let mut done = 0usize;
        for i in first..chunks.end {
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
                    let Some(data) = fetch(block, from + n)? else {
                        return Ok(None);
                    };
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
        Ok(Some(done))
    }

    /// Where every [`CHECKPOINT`]-th of the chunks `chunks` of file `ino`
    /// starts in it, from the first on.
    fn checkpoints(&self, ino: u32, chunks: Range<usize>) -> Result<Vec<u64>> {
        let mut starts = Vec::with_capacity(chunks.len() / CHECKPOINT + 1);
        let mut pos = 0u64;
        for (n, i) in chunks.enumerate() {
            if n % CHECKPOINT == 0 {
                starts.push(pos);
            }
            pos = pos
                .checked_add(self.extent(i)?.len())
                .ok_or_else(|| corrupt!("inode {ino}: file size overflows"))?;
        }
        Ok(starts)
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

/// Finds the inode of a `/`-separated `path` below `root` (empty and `.`
/// components skipped, `..` to the parent; symlinks are not followed), with
/// a tree's own `parent`, `kind` and `lookup`: one walk for an image and a
/// view.
pub(crate) fn lookup_path_in<I: Copy>(
    path: &[u8],
    root: I,
    parent: impl Fn(I) -> Result<I>,
    kind: impl Fn(I) -> Result<FileKind>,
    lookup: impl Fn(I, &[u8]) -> Result<Option<I>>,
) -> Result<I> {
    let not_found = || Error::NotFound(String::from_utf8_lossy(path).into_owned());
    let mut ino = root;
    for part in path
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
    {
        ino = if part == b".." {
            parent(ino)?
        } else {
            if kind(ino)? != FileKind::Directory {
                return Err(not_found());
            }
            lookup(ino, part)?.ok_or_else(not_found)?
        };
    }
    Ok(ino)
}
