//! Live counters of a build, read by a progress display while the
//! stages run.

use crate::blocks::BlockProgress;
use crate::dedupe::DedupeProgress;
use crate::scan::ScanProgress;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The stage a build is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Walking the input.
    Scanning = 0,
    /// Reading and hashing files.
    Hashing = 1,
    /// Running the categorizers.
    Categorizing = 2,
    /// Segmenting and compressing.
    Writing = 3,
    /// Building the metadata.
    Metadata = 4,
    /// Finished.
    Done = 5,
    /// Comparing the input with base images (`--base`).
    Comparing = 6,
}

/// Live counters of a build, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Scan counters.
    pub scan: ScanProgress,
    /// Bytes compared with base images so far (`--base`).
    pub compared: AtomicU64,
    /// Hashing counters.
    pub dedupe: DedupeProgress,
    /// Bytes of distinct contents categorized so far.
    pub categorized: AtomicU64,
    /// Bytes of distinct contents to segment.
    pub to_segment: AtomicU64,
    /// Bytes segmented so far.
    pub segmented: AtomicU64,
    /// Block counters.
    pub blocks: BlockProgress,
}

impl Progress {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Scanning,
            1 => Phase::Hashing,
            2 => Phase::Categorizing,
            3 => Phase::Writing,
            4 => Phase::Metadata,
            6 => Phase::Comparing,
            _ => Phase::Done,
        }
    }

    /// Enters `phase`.
    pub(crate) fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }
}
