//! The base data a delta layer (`--base ... --delta`) is segmented
//! against: every block of the base images, decompressed and indexed
//! with the segmenter's rolling hash, so that a layer's new data becomes
//! chunks pointing into the bases' blocks wherever the bytes are already
//! there (see `hoard_reader::delta` for how they are numbered and read).
//!
//! The blocks are held in memory, decompressed: as many as half the
//! build's memory limit holds, the top image's first (the new data is
//! most like the newest base).
//!
//! On a chain of more than [`FLATTENED_VIEW_DEPTH`] images, only the
//! blocks the merged tree of the bases still reads (its flattened view)
//! are matched against, not every block of the chain: the layer then
//! never points at data of files deleted or replaced below it, so a
//! full read of the top of a long chain decodes about what a read of its
//! flattened image does, and the build holds only live data. Below the
//! limit every block is used (a file restored to an older version finds
//! it). `hoard rewrite BASE... LAYER -o NEW_BASE` folds a chain into one
//! image to start the next one on.
//!
//! While segmenting, reference block `k` (the bases' blocks counted one
//! after the other, bottom first) is numbered [`FIRST_REFERENCE`]` + k`;
//! [`renumber`] moves them past the layer's own blocks once their number
//! is known.

use crate::piece::{Piece, PieceList};
use crate::rolling::{Bloom, Roller, WideWindowIndex};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use hoard_reader::delta::{encode_dependencies, Dependency, DEPENDS_XATTR};
use hoard_reader::{Extent, FileKind, Stack, View, ViewExt};
use rayon::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;

/// The number of the first reference block while segmenting: past any
/// block a layer has of its own.
pub const FIRST_REFERENCE: u32 = 1 << 31;

/// The most images below a delta layer whose every block it is matched
/// against; on deeper chains, only the blocks of their flattened view.
pub const FLATTENED_VIEW_DEPTH: usize = 8;

/// The base images' blocks, indexed.
pub struct References {
    blocks: Vec<Vec<u8>>,
    window: usize,
    step: usize,
    /// Window hash -> reference block (high half) and offset (low half).
    index: WideWindowIndex,
    bloom: Bloom,
}

impl References {
    /// Reads and indexes the blocks of the images of `base` (see the
    /// module doc), the top image's first, as many as `budget` bytes
    /// hold, for segmenters of windows of `window` bytes every `step`
    /// bytes; `names` are the images' file names, bottom first.
    pub fn load(
        base: &Stack,
        names: &[String],
        window: usize,
        step: usize,
        budget: u64,
    ) -> Result<References> {
        let step = step.max(1);
        let total: u64 = base.layers().iter().map(|fs| fs.block_count() as u64).sum();
        if total >= u64::from(FIRST_REFERENCE) {
            return Err(Error::Input("the base images have too many blocks".into()));
        }
        let live = if base.layers().len() > FLATTENED_VIEW_DEPTH {
            Some(live_blocks(base).map_err(|e| Error::Input(format!("base images: {e}")))?)
        } else {
            None
        };
        let used = |layer: usize, b: u32| live.as_ref().is_none_or(|l| l.contains(&(layer, b)));
        // The blocks kept are those from `cut` on, in (image, block)
        // order: the top image's first, as many as the budget holds.
        let mut left = budget;
        let mut cut = (0, 0);
        'fill: for (layer, fs) in base.layers().iter().enumerate().rev() {
            for b in (0..fs.block_count() as u32).rev() {
                if !used(layer, b) {
                    continue;
                }
                let size = u64::from(fs.block_size());
                if size > left {
                    cut = (layer, b + 1);
                    break 'fill;
                }
                left -= size;
            }
        }
        let mut blocks = Vec::new();
        for (layer, (fs, name)) in base.layers().iter().zip(names).enumerate() {
            for b in 0..fs.block_count() as u32 {
                if (layer, b) < cut || !used(layer, b) {
                    // Keeps the numbering; nothing matches an empty block.
                    blocks.push(Vec::new());
                    continue;
                }
                let block = fs
                    .block(b)
                    .map_err(|e| Error::Input(format!("base image '{name}': {e}")))?;
                blocks.push(block.to_vec());
            }
        }
        let roller = Roller::new(window.max(1));
        let hashes: Vec<Vec<(u32, u32)>> = blocks
            .par_iter()
            .map(|data| {
                if window == 0 || data.len() < window {
                    return Vec::new();
                }
                (0..=data.len() - window)
                    .step_by(step)
                    .map(|off| (roller.hash(&data[off..off + window]), off as u32))
                    .collect()
            })
            .collect();
        let entries: usize = hashes.iter().map(Vec::len).sum();
        let mut index = WideWindowIndex::default();
        index.reserve(entries);
        let mut bloom = Bloom::new(entries);
        // The top image's blocks first: the first window of a hash wins,
        // and new data is most like the newest base.
        for (k, list) in hashes.iter().enumerate().rev() {
            for &(h, off) in list {
                index.entry(h).or_insert((k as u64) << 32 | u64::from(off));
                bloom.insert(h);
            }
        }
        Ok(References {
            blocks,
            window,
            step,
            index,
            bloom,
        })
    }

    /// How many reference blocks there are.
    pub fn len(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether a segmenter of windows of `window` bytes every `step`
    /// bytes may match against these.
    pub(crate) fn fits(&self, window: usize, step: usize) -> bool {
        window == self.window && step.max(1) == self.step && self.window > 0
    }

    /// Whether a window of hash `h` may be in the references.
    #[inline]
    pub(crate) fn maybe(&self, h: u32) -> bool {
        self.bloom.maybe(h)
    }

    /// The reference block and offset of a window of hash `h` whose bytes
    /// are `window`.
    pub(crate) fn lookup(&self, h: u32, window: &[u8]) -> Option<(u32, usize)> {
        let v = *self.index.get(&h)?;
        let (k, off) = ((v >> 32) as usize, (v as u32) as usize);
        let data = self.blocks.get(k)?;
        (data.get(off..off + window.len()) == Some(window))
            .then_some((FIRST_REFERENCE + k as u32, off))
    }

    /// The bytes of reference block `number` (numbered from
    /// [`FIRST_REFERENCE`]).
    pub(crate) fn data(&self, number: u32) -> Option<&[u8]> {
        let k = number.checked_sub(FIRST_REFERENCE)?;
        self.blocks.get(k as usize).map(Vec::as_slice)
    }
}

/// The blocks (layer, block) the regular files of `base`'s merged tree
/// read.
fn live_blocks(base: &Stack) -> hoard_reader::Result<HashSet<(usize, u32)>> {
    let layers = base.layers();
    let mut live = HashSet::new();
    for node in base.walk(base.root(), b"")? {
        if node.kind != FileKind::Regular {
            continue;
        }
        let at = base.locate(node.ino)?;
        let Some(layer) = layers.iter().position(|fs| Arc::ptr_eq(fs, &at.fs)) else {
            continue;
        };
        for e in at.fs.extents(at.ino)? {
            if let Extent::Data { block, .. } = e {
                live.insert(at.fs.lower_block(block).unwrap_or((layer, block)));
            }
        }
    }
    Ok(live)
}

/// The root attribute of a layer on `base` (images named `names`, bottom
/// first) listing the images it depends on ([`DEPENDS_XATTR`]).
pub fn depends_xattr(base: &Stack, names: &[String]) -> Xattr {
    let deps: Vec<Dependency> = base
        .layers()
        .iter()
        .zip(names)
        .map(|(fs, name)| Dependency {
            identity: fs
                .delta_identity()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            name: name.clone(),
        })
        .collect();
    (DEPENDS_XATTR.to_vec(), encode_dependencies(&deps))
}

/// Moves the pieces in reference blocks past the layer's `own` blocks.
pub fn renumber(pieces: &mut [PieceList], own: u32) {
    for list in pieces {
        for piece in list.iter_mut() {
            if let Piece::Data { block, .. } = piece {
                if *block >= FIRST_REFERENCE {
                    *block = own + (*block - FIRST_REFERENCE);
                }
            }
        }
    }
}
