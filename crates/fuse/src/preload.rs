//! Preloading (`preload_all`, `preload_category=NAME`): once the kernel
//! has accepted the mount, a background thread decompresses blocks into
//! the block cache, in block order, so the first reads find them there.
//!
//! Blocks that lie side by side in the file are read ahead in one piece
//! (as far as the cache has room for them, up to [`READ_AHEAD`] bytes)
//! before they are decompressed.
//! Preloading stops before a block that would not fit in the cache, so it
//! never evicts a block it (or a reader) brought in, and it stops at the
//! end of the mount.

use crate::options::Preload;
use hoard_reader::{Filesystem, View};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The most bytes of the file read ahead at once: large reads, while a
/// remote image's memory for fetched bytes (`remote_memory`, 128 MiB by
/// default) holds them until they are decompressed.
pub const READ_AHEAD: u64 = 16 << 20;

/// How a preload of one image ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every block asked for is in the cache (or failed to decode: reads
    /// of it report that).
    Done,
    /// The next block would not fit in the cache.
    CacheFull,
    /// The mount ended.
    Stopped,
}

/// The background thread preloading blocks. Dropping it stops the
/// preload (after the block being decompressed) and waits for it.
pub struct Preloader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Preloader {
    /// Starts preloading the blocks `what` names of every image of `view`;
    /// `None` when there is nothing to preload, or no thread could be
    /// started (a warning says so).
    pub fn start(view: &dyn View, what: &Preload) -> Option<Preloader> {
        if *what == Preload::None {
            return None;
        }
        let (images, what) = (view.images(), what.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("hoard-preload".into())
            .spawn(move || {
                for fs in images {
                    let blocks = blocks_to_preload(&fs, &what);
                    match preload(&fs, &blocks, &stopped) {
                        Ended::Done => {}
                        Ended::CacheFull => {
                            eprintln!(
                                "hoard: warning: preload: the cache is full \
                                 (a larger cachesize holds more blocks)"
                            );
                            return;
                        }
                        Ended::Stopped => return,
                    }
                }
            });
        match thread {
            Ok(thread) => Some(Preloader {
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                eprintln!("hoard: warning: no preload: {e}");
                None
            }
        }
    }
}

impl Drop for Preloader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A one-line warning when `what` names a category that no image of
/// `view` records (so nothing would be preloaded), listing the categories
/// they do record; `None` otherwise (and for a view whose images open on
/// demand, none of them open yet).
pub fn unknown_category(view: &dyn View, what: &Preload) -> Option<String> {
    let Preload::Category(name) = what else {
        return None;
    };
    let images = view.images();
    let mut known: Vec<&str> = images
        .iter()
        .flat_map(|fs| fs.category_names())
        .map(String::as_str)
        .collect();
    if images.is_empty() || known.contains(&name.as_str()) {
        return None;
    }
    known.sort_unstable();
    known.dedup();
    let recorded = if known.is_empty() {
        "the image records no block categories".to_string()
    } else {
        format!("it records {}", known.join(", "))
    };
    Some(format!(
        "preload_category={name}: no block has category '{name}' ({recorded}); nothing is preloaded"
    ))
}

/// The blocks of `fs` that `what` names, in block order.
pub fn blocks_to_preload(fs: &Filesystem, what: &Preload) -> Vec<u32> {
    let all = 0..fs.block_count() as u32;
    match what {
        Preload::None => Vec::new(),
        Preload::All => all.collect(),
        Preload::Category(name) => all
            .filter(|&b| fs.block_category(b) == Some(name.as_str()))
            .collect(),
    }
}

/// Decompresses `blocks` of `fs` whole into its cache, in order, until
/// the next would not fit in the cache or `stop` is set.
pub fn preload(fs: &Filesystem, blocks: &[u32], stop: &AtomicBool) -> Ended {
    let cache = fs.cache();
    let block_size = u64::from(fs.block_size()).max(1);
    let mut read_ahead_to = 0;
    for (i, &block) in blocks.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Ended::Stopped;
        }
        if cache.progress(block).is_some_and(|p| p.complete) {
            continue;
        }
        let room = cache.capacity().saturating_sub(cache.bytes()) as u64;
        if i >= read_ahead_to {
            let fits = usize::try_from(room / block_size).unwrap_or(usize::MAX);
            read_ahead_to = i + read_ahead(fs, &blocks[i..], fits.max(1));
        }
        if fs.decoded_size(block) > room {
            return Ended::CacheFull;
        }
        // A block that fails is reported by the reads that need it.
        let _ = fs.block(block);
    }
    Ended::Done
}

/// Asks for the first of `blocks` (not empty) and those following it
/// side by side in the file, at most `max` and [`READ_AHEAD`] bytes, to
/// be read ahead in one piece; returns how many that covers.
fn read_ahead(fs: &Filesystem, blocks: &[u32], max: usize) -> usize {
    let Some(mut span) = blocks.first().and_then(|&b| fs.block_span(b)) else {
        return 1;
    };
    let mut count = 1;
    while count < max.min(blocks.len()) {
        match fs.block_span(blocks[count]) {
            Some(next) if next.start == span.end && next.end - span.start <= READ_AHEAD => {
                span.end = next.end
            }
            _ => break,
        }
        count += 1;
    }
    fs.image().prefetch(&[span]);
    count
}
