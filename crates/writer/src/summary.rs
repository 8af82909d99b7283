//! What a build did: entries, bytes, duplicates, blocks and sizes, and
//! the warnings of what was left out.

use crate::blocks::BlockProgress;
use crate::dedupe::Deduped;
use crate::delta::DeltaCounts;
use crate::path_list::ListReport;
use crate::segment::SegmentStats;
use crate::streams::Segmented;
use crate::tree::{Counts, Tree};
use std::sync::atomic::Ordering;

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Entries by kind.
    pub counts: Counts,
    /// Bytes in regular files (hard links counted once).
    pub original_bytes: u64,
    /// Files whose content another file already had.
    pub duplicate_files: u64,
    /// Bytes those duplicates would have taken.
    pub duplicate_bytes: u64,
    /// What segmenting stored, matched and left as holes.
    pub segments: SegmentStats,
    /// Data blocks written.
    pub blocks: u64,
    /// Compressed size of the data blocks.
    pub block_bytes: u64,
    /// Size of the metadata section.
    pub metadata_bytes: u64,
    /// Size of the image file.
    pub image_bytes: u64,
    /// Problems that left entries out (unreadable files, ...).
    pub warnings: Vec<String>,
    /// For a layer (`--base`): how the tree was cut.
    pub delta: Option<DeltaCounts>,
    /// What each list of files used (`--hotness-list`,
    /// `--order=explicit:file=FILE`) matched.
    pub lists: Vec<ListReport>,
}

impl Summary {
    /// Counts the bytes and duplicates of `deduped`'s contents and warns
    /// of the files that could not be read.
    pub(crate) fn count_contents(&mut self, tree: &Tree, deduped: &Deduped) {
        for (file, e) in &deduped.unreadable {
            self.warnings
                .push(format!("{}: {e}", tree.source(*file).display()));
        }
        for c in &deduped.contents {
            let dups = c.files.len() as u64 - 1;
            self.duplicate_files += dups;
            self.duplicate_bytes += dups * c.size;
            self.original_bytes += c.files.len() as u64 * c.size;
        }
    }

    /// Records what segmenting and compression did.
    pub(crate) fn count_blocks(&mut self, segmented: &Segmented, progress: &BlockProgress) {
        self.warnings.extend(segmented.warnings.iter().cloned());
        self.segments = segmented.stats;
        self.blocks = u64::from(segmented.blocks);
        self.block_bytes = progress.compressed_bytes.load(Ordering::Relaxed);
    }
}
