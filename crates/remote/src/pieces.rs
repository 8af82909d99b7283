//! Fetched bytes kept in memory: disjoint pieces of the image, bounded in
//! bytes, the least recently used dropped first.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug)]
struct Piece {
    data: Arc<[u8]>,
    used: u64,
}

/// Disjoint byte ranges of the image, by start offset.
#[derive(Debug, Default)]
pub struct Pieces {
    map: BTreeMap<u64, Piece>,
    bytes: u64,
    tick: u64,
}

impl Pieces {
    /// Bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The pieces overlapping `range`, in order, as (start, piece).
    fn overlapping(&self, range: &Range<u64>) -> impl Iterator<Item = (u64, &Piece)> {
        let first = self
            .map
            .range(..=range.start)
            .next_back()
            .filter(|(&s, p)| s + p.data.len() as u64 > range.start)
            .map(|(&s, _)| s)
            .unwrap_or(range.start);
        self.map.range(first..range.end).map(|(&s, p)| (s, p))
    }

    /// The parts of `range` not held, in order.
    pub fn gaps(&self, range: Range<u64>) -> Vec<Range<u64>> {
        let mut gaps = Vec::new();
        let mut pos = range.start;
        for (start, piece) in self.overlapping(&range) {
            if start > pos {
                gaps.push(pos..start.min(range.end));
            }
            pos = pos.max(start + piece.data.len() as u64);
            if pos >= range.end {
                break;
            }
        }
        if pos < range.end {
            gaps.push(pos..range.end);
        }
        gaps
    }

    /// The bytes of `range`, if all are held.
    pub fn get(&mut self, range: Range<u64>) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        let mut pos = range.start;
        let mut used = Vec::new();
        for (start, piece) in self.overlapping(&range) {
            if start > pos {
                return None;
            }
            let from = (pos - start) as usize;
            let to = ((range.end - start) as usize).min(piece.data.len());
            out.extend_from_slice(&piece.data[from..to]);
            pos = start + to as u64;
            used.push(start);
            if pos >= range.end {
                break;
            }
        }
        if pos < range.end {
            return None;
        }
        self.tick += 1;
        for start in used {
            if let Some(p) = self.map.get_mut(&start) {
                p.used = self.tick;
            }
        }
        Some(out)
    }

    /// Keeps `data`, found at `start`, except the parts already held; then
    /// drops the least recently used pieces beyond `capacity` bytes.
    pub fn insert(&mut self, start: u64, data: &[u8], capacity: u64) {
        let end = start + data.len() as u64;
        self.tick += 1;
        for gap in self.gaps(start..end) {
            let piece = &data[(gap.start - start) as usize..(gap.end - start) as usize];
            self.bytes += piece.len() as u64;
            self.map.insert(
                gap.start,
                Piece {
                    data: piece.into(),
                    used: self.tick,
                },
            );
        }
        while self.bytes > capacity && self.map.len() > 1 {
            let oldest = self
                .map
                .iter()
                .filter(|(_, p)| p.used != self.tick)
                .min_by_key(|(_, p)| p.used)
                .map(|(&s, _)| s);
            match oldest {
                Some(s) => self.remove(s),
                None => break,
            }
        }
    }

    fn remove(&mut self, start: u64) {
        if let Some(p) = self.map.remove(&start) {
            self.bytes -= p.data.len() as u64;
        }
    }

    /// Drops every piece overlapping `range`.
    pub fn forget(&mut self, range: Range<u64>) {
        let starts: Vec<u64> = self.overlapping(&range).map(|(s, _)| s).collect();
        for s in starts {
            self.remove(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_get_and_insert() {
        let mut p = Pieces::default();
        assert_eq!(p.gaps(10..20), vec![10..20]);
        p.insert(12, &[1, 2, 3], 1 << 20);
        p.insert(17, &[7, 8], 1 << 20);
        assert_eq!(p.gaps(10..20), vec![10..12, 15..17, 19..20]);
        assert_eq!(p.gaps(13..14), Vec::<Range<u64>>::new());
        assert_eq!(p.get(12..15), Some(vec![1, 2, 3]));
        assert_eq!(p.get(11..15), None);
        assert_eq!(p.get(14..18), None);
        // Overlapping insert keeps what was there and fills the rest.
        p.insert(10, &[9; 10], 1 << 20);
        assert_eq!(p.gaps(10..20), Vec::<Range<u64>>::new());
        assert_eq!(p.get(11..19), Some(vec![9, 1, 2, 3, 9, 9, 7, 8]));
        assert_eq!(p.bytes(), 10);
        p.forget(13..14);
        assert_eq!(p.gaps(10..20), vec![12..15]);
    }

    #[test]
    fn evicts_least_recently_used() {
        let mut p = Pieces::default();
        p.insert(0, &[0; 10], 25);
        p.insert(100, &[1; 10], 25);
        assert!(p.get(0..10).is_some());
        p.insert(200, &[2; 10], 25);
        assert_eq!(p.bytes(), 20);
        assert!(p.get(0..10).is_some(), "recently used stays");
        assert!(p.get(100..110).is_none(), "least recently used went");
        assert!(p.get(200..210).is_some(), "new stays");
    }
}
