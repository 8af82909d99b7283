//! Where the chunks of files with many chunks start.
//!
//! The format gives each chunk its length only, so finding the chunk that
//! holds a file offset means adding up the lengths of the chunks before
//! it. A file of a few chunks is read that way; for a file of many (a zip
//! archive whose headers went to blocks of their own has two chunks a
//! member, a segmented file one per repeat found), every read would walk
//! thousands of chunks: on the quick `rootfs` corpus's 53 MB `src.zip`
//! (30,000 chunks) random 4 KiB reads ran at a sixth of their speed. For
//! those files the start of every [`CHECKPOINT`]-th chunk is kept, found
//! once per file, and a read starts its walk at the checkpoint before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Files with more chunks than this get checkpoints.
pub const MANY_CHUNKS: usize = 64;

/// Chunks between two checkpoints: at most this many are walked a read.
pub const CHECKPOINT: usize = 8;

/// The most files whose checkpoints are kept; past it all are dropped
/// (each takes 8 bytes per [`CHECKPOINT`] chunks).
const MAX_FILES: usize = 4096;

/// Checkpoints of the files read so far, by inode.
#[derive(Debug, Default)]
pub struct ChunkOffsets {
    files: Mutex<HashMap<u32, Arc<[u64]>>>,
}

impl ChunkOffsets {
    /// The checkpoints of `ino`: the file offset where each
    /// [`CHECKPOINT`]-th of its chunks starts, from its first one on;
    /// `starts` finds them (from the chunks' lengths) when they are not
    /// kept yet.
    pub fn of<E>(
        &self,
        ino: u32,
        starts: impl FnOnce() -> Result<Vec<u64>, E>,
    ) -> Result<Arc<[u64]>, E> {
        if let Some(kept) = self.lock().get(&ino) {
            return Ok(Arc::clone(kept));
        }
        let found: Arc<[u64]> = starts()?.into();
        let mut files = self.lock();
        if files.len() >= MAX_FILES {
            files.clear();
        }
        files.insert(ino, Arc::clone(&found));
        Ok(found)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<[u64]>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The checkpoint to start a walk for file offset `offset` at: its index
/// among `checkpoints` (and so the chunk `index * CHECKPOINT` after the
/// file's first) and where that chunk starts.
pub fn start_for(checkpoints: &[u64], offset: u64) -> (usize, u64) {
    let k = checkpoints
        .partition_point(|&start| start <= offset)
        .saturating_sub(1);
    (k, checkpoints.get(k).copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_starts_at_the_last_checkpoint_at_or_before_the_offset() {
        let checkpoints = [0, 100, 250, 250, 400];
        assert_eq!(start_for(&checkpoints, 0), (0, 0));
        assert_eq!(start_for(&checkpoints, 99), (0, 0));
        assert_eq!(start_for(&checkpoints, 100), (1, 100));
        assert_eq!(start_for(&checkpoints, 260), (3, 250));
        assert_eq!(start_for(&checkpoints, 10_000), (4, 400));
        assert_eq!(start_for(&[], 5), (0, 0));
    }

    #[test]
    fn checkpoints_are_found_once_and_kept_within_bounds() {
        let offsets = ChunkOffsets::default();
        let mut calls = 0;
        for _ in 0..3 {
            let got = offsets
                .of(7, || {
                    calls += 1;
                    Ok::<_, ()>(vec![0, 10])
                })
                .unwrap();
            assert_eq!(&got[..], [0, 10]);
        }
        assert_eq!(calls, 1);
        assert_eq!(offsets.of(8, || Err("bad")), Err("bad"));
        for ino in 0..2 * MAX_FILES as u32 {
            offsets.of(ino, || Ok::<_, ()>(vec![0])).unwrap();
        }
        assert!(offsets.lock().len() <= MAX_FILES);
    }
}
