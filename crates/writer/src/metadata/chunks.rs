//! The chunk table: where each content's pieces lie in the blocks, holes
//! included; and the file-system size totals.

use super::inodes::{ContentIndex, Inodes};
use crate::piece::{Piece, PieceList};
use crate::tree::{Kind, Tree};
use hoard_format::metadata::{Chunk, InodeSizeCache};

/// Files with at least this many chunks get their size cached (DwarFS's
/// default).
const SIZE_CACHE_MIN_CHUNKS: u32 = 128;
/// Chunk offset marking a hole whose size is in `large_hole_size`.
const LARGE_HOLE_OFFSET: u32 = u32::MAX;

/// The chunk tables.
pub(super) struct ChunkTables {
    /// Every chunk, content after content.
    pub(super) chunks: Vec<Chunk>,
    /// Index of each content's first chunk, plus the end.
    pub(super) chunk_table: Vec<u32>,
    /// Sizes of contents with many chunks.
    pub(super) size_cache: InodeSizeCache,
    /// Sizes of holes too large for a chunk.
    pub(super) large_holes: Vec<u64>,
    /// Whether any content has a hole.
    pub(super) any_hole: bool,
    /// The block number that marks hole chunks.
    pub(super) hole_block: u32,
    /// Size and allocated (non-hole) size of each content.
    content_sizes: Vec<(u64, u64)>,
}

/// How holes are stored in chunks.
struct HoleCoding {
    block: u32,
    block_bits: u32,
    /// The largest hole a chunk holds itself.
    inline_limit: u64,
}

impl HoleCoding {
    /// Holes marked by block `block` (one past the last data block), in
    /// blocks of `block_size`, among data chunks of up to the largest in
    /// `pieces`.
    fn new(pieces: &[PieceList], block: u32, block_size: u32) -> Self {
        let block_bits = block_size.trailing_zeros();
        let max_data_chunk = pieces
            .iter()
            .flatten()
            .filter_map(|p| match p {
                Piece::Data { size, .. } => Some(*size),
                Piece::Hole(_) => None,
            })
            .max()
            .unwrap_or(0);
        let size_bits = u32::BITS - max_data_chunk.leading_zeros();
        let inline_limit = if size_bits + block_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << (size_bits + block_bits)) - 1
        };
        HoleCoding {
            block,
            block_bits,
            inline_limit,
        }
    }

    /// The chunk of a hole of `size` bytes; a large one is added to
    /// `large_holes` (once).
    fn chunk(&self, size: u64, large_holes: &mut Vec<u64>) -> Chunk {
        let offset = (size & ((1u64 << self.block_bits) - 1)) as u32;
        if size <= self.inline_limit && offset != LARGE_HOLE_OFFSET {
            return Chunk {
                block: self.block,
                offset,
                size: (size >> self.block_bits) as u32,
            };
        }
        let i = large_holes
            .iter()
            .position(|&x| x == size)
            .unwrap_or_else(|| {
                large_holes.push(size);
                large_holes.len() - 1
            });
        Chunk {
            block: self.block,
            offset: LARGE_HOLE_OFFSET,
            size: i as u32,
        }
    }
}

impl ChunkTables {
    /// The chunks of the contents in `order`, from their `pieces`, with
    /// `blocks` data blocks of `block_size`.
    pub(super) fn build(
        pieces: &[PieceList],
        order: &[usize],
        blocks: u32,
        block_size: u32,
    ) -> Self {
        let holes = HoleCoding::new(pieces, blocks, block_size);
        let mut t = ChunkTables {
            chunks: Vec::new(),
            chunk_table: vec![0],
            size_cache: InodeSizeCache {
                min_chunk_count: u64::from(SIZE_CACHE_MIN_CHUNKS),
                ..InodeSizeCache::default()
            },
            large_holes: Vec::new(),
            any_hole: false,
            hole_block: blocks,
            content_sizes: vec![(0, 0); pieces.len()],
        };
        for (table_index, &c) in order.iter().enumerate() {
            let (size, allocated) = t.add_content(&pieces[c], &holes);
            if pieces[c].len() >= SIZE_CACHE_MIN_CHUNKS as usize {
                let cache = &mut t.size_cache;
                cache.size_lookup.insert(table_index as u32, size);
                if allocated != size {
                    cache
                        .allocated_size_lookup
                        .insert(table_index as u32, allocated);
                }
            }
            t.content_sizes[c] = (size, allocated);
        }
        t
    }

    /// Appends the chunks of one content; returns its size and allocated
    /// size.
    fn add_content(&mut self, pieces: &[Piece], holes: &HoleCoding) -> (u64, u64) {
        let (mut size, mut allocated) = (0u64, 0u64);
        for p in pieces {
            match *p {
                Piece::Data {
                    block,
                    offset,
                    size: s,
                } => {
                    size += u64::from(s);
                    allocated += u64::from(s);
                    self.chunks.push(Chunk {
                        block,
                        offset,
                        size: s,
                    });
                }
                Piece::Hole(h) => {
                    self.any_hole = true;
                    size += h;
                    self.chunks.push(holes.chunk(h, &mut self.large_holes));
                }
            }
        }
        self.chunk_table.push(self.chunks.len() as u32);
        (size, allocated)
    }
}

/// The file-system size totals.
pub(super) struct Totals {
    /// Bytes of all regular files and symlink targets.
    pub(super) size: u64,
    /// The same without holes.
    pub(super) allocated: u64,
    /// Bytes of the extra hard links to files.
    pub(super) hardlinked: u64,
}

impl Totals {
    /// Sums the sizes of the inodes.
    pub(super) fn sum(
        tree: &Tree,
        inodes: &Inodes,
        contents: &ContentIndex<'_>,
        chunks: &ChunkTables,
    ) -> Self {
        let mut t = Totals {
            size: 0,
            allocated: 0,
            hardlinked: 0,
        };
        for &e in &inodes.entries {
            match &tree.entries[e].kind {
                Kind::Symlink { target } => {
                    t.size += target.len() as u64;
                    t.allocated += target.len() as u64;
                }
                Kind::File { file } => {
                    let (size, allocated) = chunks.content_sizes[contents.of(*file)];
                    t.size += size;
                    t.allocated += allocated;
                    t.hardlinked += size * u64::from(tree.files[*file].links - 1);
                }
                _ => {}
            }
        }
        t
    }
}
