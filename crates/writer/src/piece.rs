//! Where the bytes of a content are stored: its pieces, each a range of a
//! block or a hole, as segmenting leaves them and the metadata records
//! them as chunks.

/// The pieces of one content (or fragment), in order: most small files
/// are one piece, kept inline (a `Vec` of one took 24 bytes and a
/// 64-byte allocation).
pub type PieceList = smallvec::SmallVec<[Piece; 1]>;

/// One piece of a file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// Bytes in a block.
    Data {
        /// Block number.
        block: u32,
        /// Offset in the block.
        offset: u32,
        /// Length.
        size: u32,
    },
    /// A hole of zeros (sparse files).
    Hole(u64),
}

/// Appends `piece` to `out`, merging it into the last piece when it
/// continues it in the same block.
pub(crate) fn push(out: &mut PieceList, piece: Piece) {
    if let (
        Some(Piece::Data {
            block: b0,
            offset: o0,
            size: s0,
        }),
        Piece::Data {
            block,
            offset,
            size,
        },
    ) = (out.last_mut(), piece)
    {
        if *b0 == block && *o0 + *s0 == offset {
            *s0 += size;
            return;
        }
    }
    out.push(piece);
}
