//! Stage 4: segmenting. File contents are appended to blocks, except byte
//! ranges already present in the current block or the last `lookback`
//! finished blocks: those become chunks that point at the earlier copy.
//!
//! Every `step` bytes of block data, the hash of the `window` bytes starting
//! there is recorded (a rolling "buzhash", so indexing costs one update per
//! byte). New data is scanned with the same rolling hash at every byte; a
//! bloom filter in front of the per-block hash tables rejects most
//! positions with one bit test. A hit is verified byte by byte, then grown
//! backwards and forwards as far as the bytes agree, so matches are at least
//! `window` bytes long and usually much longer.

use crate::piece::{push, Piece, PieceList};
use crate::reference::References;
use crate::rolling::{Bloom, Roller, WindowIndex};
use std::collections::VecDeque;
use std::sync::Arc;

/// Settings of the segmenter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentConfig {
    /// Block size in bytes (a power of two).
    pub block_size: usize,
    /// Window size in bytes; 0 turns segmenting off.
    pub window: usize,
    /// Distance between indexed windows, in bytes.
    pub step: usize,
    /// How many finished blocks are searched besides the current one.
    pub lookback: usize,
    /// Into how many blocks a stream's only block is cut when it holds at
    /// least [`MIN_SPLIT_PART`] bytes a part, so that as many workers
    /// compress it side by side (1: never).
    pub split_lone_block: usize,
}

/// The least bytes of a part of a cut lone block (see
/// [`SegmentConfig::split_lone_block`]): smaller blocks compress worse
/// and save little time.
pub const MIN_SPLIT_PART: usize = 2 << 20;

/// A stream's only block, cut into consecutive blocks: block `first`
/// held what is now blocks `first`, `first + 1`, ..., cut at `cuts`
/// (offsets in the old block, ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The number of the block that was cut (and of its first part).
    pub first: u32,
    /// Where the parts after the first start, in the old block.
    pub cuts: Vec<u32>,
}

impl Split {
    /// Renumbers `pieces` that lay in the cut block into its parts,
    /// splitting a piece that crosses a cut in two.
    pub fn apply(&self, pieces: &mut PieceList) {
        if !pieces
            .iter()
            .any(|p| matches!(p, Piece::Data { block, .. } if *block == self.first))
        {
            return;
        }
        let old = std::mem::take(pieces);
        for piece in old {
            match piece {
                Piece::Data {
                    block,
                    mut offset,
                    mut size,
                } if block == self.first => {
                    let end = offset + size;
                    while size > 0 {
                        // The part holding `offset`, and where it starts and ends.
                        let part = self.cuts.partition_point(|&c| c <= offset);
                        let start = if part == 0 { 0 } else { self.cuts[part - 1] };
                        let part_end = self.cuts.get(part).copied().unwrap_or(u32::MAX);
                        let n = end.min(part_end) - offset;
                        push(
                            pieces,
                            Piece::Data {
                                block: block + part as u32,
                                offset: offset - start,
                                size: n,
                            },
                        );
                        offset += n;
                        size -= n;
                    }
                }
                other => pieces.push(other),
            }
        }
    }
}

/// Byte counts of a segmenter run, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Bytes appended to blocks.
    pub stored: u64,
    /// Bytes found in earlier data and referenced.
    pub matched: u64,
    /// Bytes in holes.
    pub holes: u64,
}

impl SegmentStats {
    /// Adds the counts of `other`.
    pub fn add(&mut self, other: &SegmentStats) {
        self.stored += other.stored;
        self.matched += other.matched;
        self.holes += other.holes;
    }
}

/// Receives each block when it is full (and the last one at the end).
pub trait BlockSink {
    /// Takes finished block `number`.
    fn finished(&mut self, number: u32, data: Arc<Vec<u8>>) -> crate::Result<()>;

    /// A buffer of an earlier block that is no longer needed, to fill with
    /// the next block instead of a new one, if the sink has one.
    fn spare_buffer(&mut self) -> Option<Vec<u8>> {
        None
    }
}

/// A finished block kept for matching.
struct Kept {
    number: u32,
    data: Arc<Vec<u8>>,
    index: WindowIndex,
}

/// Appends contents to blocks and finds repeated ranges.
pub struct Segmenter<'a, S: BlockSink> {
    config: SegmentConfig,
    roller: Roller,
    sink: &'a mut S,
    kept: VecDeque<Kept>,
    current: Vec<u8>,
    /// The number of the stream's first block.
    first_block: u32,
    current_number: u32,
    current_index: WindowIndex,
    /// Next window start in `current` to consider for indexing, and the
    /// rolling hash of the window there (when `current` holds it).
    index_pos: usize,
    index_hash: Option<u32>,
    bloom: Bloom,
    stats: SegmentStats,
    /// A delta layer's base data, also matched against.
    references: Option<&'a References>,
}

/// Pending literal bytes are flushed into the block (and indexed) once
/// they reach this length, so repeats inside one long file are found too.
const FLUSH_LITERAL: usize = 256 << 10;

impl<'a, S: BlockSink> Segmenter<'a, S> {
    /// A segmenter writing blocks to `sink`, numbering them from
    /// `first_block` on.
    pub fn new(config: SegmentConfig, first_block: u32, sink: &'a mut S) -> Self {
        let per_block = if config.window > 0 {
            config.block_size / config.step.max(1)
        } else {
            0
        };
        Segmenter {
            config,
            roller: Roller::new(config.window.max(1)),
            sink,
            kept: VecDeque::new(),
            current: Vec::with_capacity(config.block_size),
            first_block,
            current_number: first_block,
            current_index: WindowIndex::default(),
            index_pos: 0,
            index_hash: None,
            bloom: Bloom::new(per_block * (config.lookback + 1)),
            stats: SegmentStats::default(),
            references: None,
        }
    }

    /// Also matches new data against `references` (when they were indexed
    /// with this segmenter's window and step).
    pub fn with_references(mut self, references: &'a References) -> Self {
        if references.fits(self.config.window, self.config.step) {
            self.references = Some(references);
        }
        self
    }

    /// Whether a window of hash `h` may have been seen before.
    #[inline]
    fn maybe_seen(&self, h: u32) -> bool {
        self.bloom.maybe(h) || self.references.is_some_and(|r| r.maybe(h))
    }

    /// Adds the next piece of a file's data, appending its pieces to `out`.
    pub fn add(&mut self, data: &[u8], out: &mut PieceList) -> crate::Result<()> {
        let w = self.config.window;
        if w == 0 || data.len() < w {
            return self.append(data, out);
        }
        let mut lit = 0usize;
        let mut p = 0usize;
        let mut h = self.roller.hash(&data[..w]);
        while p + w <= data.len() {
            if self.maybe_seen(h) {
                if let Some((block, off)) = self.lookup(h, &data[p..p + w]) {
                    let (start, offset, end) = self.extend(block, off, data, lit, p);
                    self.append(&data[lit..start], out)?;
                    let size = end - start;
                    self.stats.matched += size as u64;
                    push(
                        out,
                        Piece::Data {
                            block,
                            offset: offset as u32,
                            size: size as u32,
                        },
                    );
                    p = end;
                    lit = end;
                    if p + w <= data.len() {
                        h = self.roller.hash(&data[p..p + w]);
                    }
                    continue;
                }
            }
            if p - lit >= FLUSH_LITERAL {
                self.append(&data[lit..p], out)?;
                lit = p;
            }
            if p + w < data.len() {
                h = self.roller.roll(h, data[p], data[p + w]);
            }
            p += 1;
        }
        self.append(&data[lit..], out)
    }

    /// Adds a hole of `size` zero bytes.
    pub fn hole(&mut self, size: u64, out: &mut PieceList) {
        self.stats.holes += size;
        match out.last_mut() {
            Some(Piece::Hole(s)) => *s += size,
            _ => out.push(Piece::Hole(size)),
        }
    }

    /// Finds an indexed window with hash `h` whose bytes equal `window`.
    fn lookup(&self, h: u32, window: &[u8]) -> Option<(u32, usize)> {
        let w = window.len();
        if let Some(&off) = self.current_index.get(&h) {
            let off = off as usize;
            if self.current.get(off..off + w) == Some(window) {
                return Some((self.current_number, off));
            }
        }
        let kept = self.kept.iter().rev().find_map(|k| {
            let off = *k.index.get(&h)? as usize;
            (k.data.get(off..off + w) == Some(window)).then_some((k.number, off))
        });
        kept.or_else(|| self.references?.lookup(h, window))
    }

    /// Grows a verified match at `data[p..]` = block `block` at `off`:
    /// backwards down to `lit`, forwards to the end of data or block.
    /// Returns (start in data, offset in block, end in data).
    fn extend(
        &self,
        block: u32,
        off: usize,
        data: &[u8],
        lit: usize,
        p: usize,
    ) -> (usize, usize, usize) {
        let bytes: &[u8] = if block == self.current_number {
            &self.current
        } else if let Some(r) = self.references.and_then(|r| r.data(block)) {
            r
        } else {
            self.kept
                .iter()
                .find(|k| k.number == block)
                .map(|k| k.data.as_slice())
                .unwrap_or(&[])
        };
        let back = data[lit..p]
            .iter()
            .rev()
            .zip(bytes[..off].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let w = self.config.window;
        let fwd = data[p + w..]
            .iter()
            .zip(&bytes[off + w..])
            .take_while(|(a, b)| a == b)
            .count();
        (p - back, off - back, p + w + fwd)
    }

    /// Appends literal bytes to blocks.
    fn append(&mut self, mut data: &[u8], out: &mut PieceList) -> crate::Result<()> {
        while !data.is_empty() {
            let room = self.config.block_size - self.current.len();
            let n = room.min(data.len());
            let offset = self.current.len();
            self.current.extend_from_slice(&data[..n]);
            self.stats.stored += n as u64;
            push(
                out,
                Piece::Data {
                    block: self.current_number,
                    offset: offset as u32,
                    size: n as u32,
                },
            );
            data = &data[n..];
            self.index_current();
            if self.current.len() == self.config.block_size {
                self.finish_block()?;
            }
        }
        Ok(())
    }

    /// Records the windows of the current block that are complete now.
    fn index_current(&mut self) {
        let (w, step) = (self.config.window, self.config.step.max(1));
        if w == 0 {
            return;
        }
        while self.index_pos + w <= self.current.len() {
            let pos = self.index_pos;
            let h = match self.index_hash {
                Some(h) => h,
                None => self.roller.hash(&self.current[pos..pos + w]),
            };
            if pos.is_multiple_of(step) {
                self.current_index.entry(h).or_insert(pos as u32);
                self.bloom.insert(h);
            }
            // Jump straight to the next indexed position when it is far.
            let next = (pos / step + 1) * step;
            if next - pos > w {
                self.index_pos = next;
                self.index_hash = None;
            } else if pos + w < self.current.len() {
                self.index_hash = Some(self.roller.roll(
                    h,
                    self.current[pos],
                    self.current[pos + w],
                ));
                self.index_pos = pos + 1;
            } else {
                self.index_hash = None;
                self.index_pos = pos + 1;
                // The window at pos + 1 is not complete yet: hash it later.
                break;
            }
        }
    }

    fn finish_block(&mut self) -> crate::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let next = match self.sink.spare_buffer() {
            Some(mut spare) => {
                spare.clear();
                spare.reserve(self.config.block_size);
                spare
            }
            None => Vec::with_capacity(self.config.block_size),
        };
        let data = Arc::new(std::mem::replace(&mut self.current, next));
        self.sink.finished(self.current_number, Arc::clone(&data))?;
        if self.config.window > 0 && self.config.lookback > 0 {
            self.kept.push_back(Kept {
                number: self.current_number,
                data,
                index: std::mem::take(&mut self.current_index),
            });
            if self.kept.len() > self.config.lookback {
                self.kept.pop_front();
            }
        }
        self.current_index.clear();
        self.bloom.clear();
        for k in &self.kept {
            for &h in k.index.keys() {
                self.bloom.insert(h);
            }
        }
        self.current_number += 1;
        self.index_pos = 0;
        self.index_hash = None;
        Ok(())
    }

    /// Hands over the last block; returns the number the next block would
    /// get, the stats, and, if the stream's only block was cut in parts,
    /// how (its pieces are to be renumbered with [`Split::apply`]).
    pub fn finish(mut self) -> crate::Result<(u32, SegmentStats, Option<Split>)> {
        let parts = self
            .config
            .split_lone_block
            .min(self.current.len() / MIN_SPLIT_PART);
        if self.current_number != self.first_block || parts < 2 {
            self.finish_block()?;
            return Ok((self.current_number, self.stats, None));
        }
        let len = self.current.len();
        let cuts: Vec<u32> = (1..parts).map(|k| (len * k / parts) as u32).collect();
        let data = std::mem::take(&mut self.current);
        let bounds = std::iter::once(0)
            .chain(cuts.iter().map(|&c| c as usize))
            .chain(std::iter::once(len));
        let bounds: Vec<usize> = bounds.collect();
        for (k, part) in bounds.windows(2).enumerate() {
            let number = self.first_block + k as u32;
            self.sink
                .finished(number, Arc::new(data[part[0]..part[1]].to_vec()))?;
        }
        let split = Split {
            first: self.first_block,
            cuts,
        };
        Ok((self.first_block + parts as u32, self.stats, Some(split)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoard_testdata::noise;

    #[derive(Default)]
    struct Collect(Vec<Vec<u8>>);

    impl BlockSink for Collect {
        fn finished(&mut self, number: u32, data: Arc<Vec<u8>>) -> crate::Result<()> {
            assert_eq!(number as usize, self.0.len());
            self.0.push(data.to_vec());
            Ok(())
        }
    }

    fn config(block_size: usize, window: usize) -> SegmentConfig {
        SegmentConfig {
            block_size,
            window,
            step: window / 8,
            lookback: 1,
            split_lone_block: 1,
        }
    }

    /// Segments `files`; returns the stored bytes and, per file, the bytes
    /// its pieces read back.
    fn run(config: SegmentConfig, files: &[Vec<u8>]) -> (SegmentStats, Vec<Vec<u8>>) {
        let mut sink = Collect::default();
        let mut pieces = Vec::new();
        let stats = {
            let mut seg = Segmenter::new(config, 0, &mut sink);
            for f in files {
                let mut out = PieceList::new();
                for part in f.chunks(10_000) {
                    seg.add(part, &mut out).unwrap();
                }
                pieces.push(out);
            }
            let (_, stats, split) = seg.finish().unwrap();
            if let Some(split) = split {
                pieces.iter_mut().for_each(|p| split.apply(p));
            }
            stats
        };
        let read = pieces
            .iter()
            .map(|ps| {
                ps.iter()
                    .flat_map(|p| match *p {
                        Piece::Data {
                            block,
                            offset,
                            size,
                        } => {
                            let b = &sink.0[block as usize];
                            assert!(size > 0);
                            b[offset as usize..(offset + size) as usize].to_vec()
                        }
                        Piece::Hole(n) => vec![0; n as usize],
                    })
                    .collect()
            })
            .collect();
        (stats, read)
    }

    #[test]
    fn contents_read_back_and_repeats_are_stored_once() {
        let a = noise(300_000, 1);
        let mut b = noise(5_000, 2);
        b.extend_from_slice(&a[1000..200_000]);
        b.extend_from_slice(&noise(7_000, 3));
        let files = vec![a.clone(), b, Vec::new(), a.clone()];
        let mut cfg = config(1 << 16, 1024);
        cfg.lookback = 16;
        let (stats, read) = run(cfg, &files);
        assert_eq!(read, files);
        assert!(stats.matched >= 199_000 + 300_000 - 2048, "{stats:?}");
        assert!(stats.stored < 300_000 + 15_000, "{stats:?}");
    }

    #[test]
    fn a_lone_block_is_cut_in_parts_that_read_back() {
        let a = noise(3 * MIN_SPLIT_PART, 11);
        let mut b = noise(MIN_SPLIT_PART / 2, 12);
        // Repeats of data on both sides of the cuts.
        b.extend_from_slice(&a[MIN_SPLIT_PART / 3..2 * MIN_SPLIT_PART]);
        let files = vec![a.clone(), b, a];
        let mut cfg = config(16 << 20, 1024);
        cfg.split_lone_block = 3;
        let mut sink = Collect::default();
        let mut seg = Segmenter::new(cfg, 0, &mut sink);
        let mut out = PieceList::new();
        seg.add(&files[0], &mut out).unwrap();
        let (next, _, split) = seg.finish().unwrap();
        assert_eq!(next, 3, "three blocks");
        assert_eq!(sink.0.len(), 3);
        let split = split.expect("the block was cut");
        assert_eq!(split.cuts.len(), 2);
        split.apply(&mut out);
        assert!(out.len() >= 3, "one piece per part: {out:?}");
        let (_, read) = run(cfg, &files);
        assert_eq!(read, files);
        // Too little for two parts of MIN_SPLIT_PART bytes: one block.
        let mut sink = Collect::default();
        let mut seg = Segmenter::new(cfg, 0, &mut sink);
        seg.add(&files[0][..2 * MIN_SPLIT_PART - 1], &mut PieceList::new())
            .unwrap();
        let (next, _, split) = seg.finish().unwrap();
        assert_eq!((next, split), (1, None));
    }

    #[test]
    fn without_a_window_everything_is_stored() {
        let a = noise(100_000, 5);
        let files = vec![a.clone(), a];
        let (stats, read) = run(config(1 << 15, 0), &files);
        assert_eq!(read, files);
        assert_eq!(stats.stored, 200_000);
        assert_eq!(stats.matched, 0);
    }

    #[test]
    fn repeats_inside_one_file_are_found() {
        let unit = noise(3_000, 9);
        let file: Vec<u8> = unit.iter().cycle().take(600_000).copied().collect();
        let (stats, read) = run(config(1 << 20, 256), std::slice::from_ref(&file));
        assert_eq!(read, vec![file]);
        assert!(stats.stored < 300_000, "{stats:?}");
    }

    #[test]
    fn repeats_older_than_the_lookback_are_stored_again() {
        let a = noise(40_000, 4);
        let filler = noise(200_000, 6);
        let files = vec![a.clone(), filler, a];
        let (stats, read) = run(config(1 << 16, 1024), &files);
        assert_eq!(read, files);
        assert_eq!(stats.matched, 0, "{stats:?}");
    }
}
