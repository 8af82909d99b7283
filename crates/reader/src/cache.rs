//! The block cache: decompressed blocks kept in memory, bounded in bytes,
//! least recently used evicted first.
//!
//! Blocks are decompressed as far as readers need them (DwarFS's
//! `decratio`): a read of bytes `a..b` of a block decodes it up to `b`,
//! rounded up to [`STEP`], and keeps the decoder for later reads; a read
//! reaching past `decratio` of the block decodes all of it and drops the
//! decoder. The fraction is taken of the block's real size, which every
//! payload declares. Whole-block users ([`BlockCache::get`] with
//! `usize::MAX`) get complete blocks.
//!
//! Shared by all threads: a block requested by several threads at once is
//! opened once, and its bytes are decoded once: one thread at a time
//! extends a block, continuing where the last stopped, while others read
//! the part already decoded without waiting.
//!
//! The byte bound counts each block's decoded bytes plus an estimate of its
//! decoder's memory (compressed input, window), updated after each step.
//!
//! Besides eviction when full, the cache can be tidied: blocks unused for
//! some time, or partly swapped out by the kernel, are dropped (the FUSE
//! driver's `tidy_strategy`).
//!
//! One store can serve many images (the layers of a stack, the images of
//! a set): [`BlockCache::for_another_image`] gives each its own handle,
//! its blocks keyed apart, all within the one byte bound; dropping a
//! handle drops its image's blocks.

mod partial;

use crate::error::{Error, Result};
use hoard_codec::{CodecError, PartialDecoder};
use partial::PartialBlock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Partial decoding goes in steps of this many bytes.
pub const STEP: usize = 256 << 10;

/// The default `decratio`: blocks are decoded whole once a read reaches
/// past 80% of them.
pub const DEFAULT_DECRATIO: f64 = 0.8;

/// A decompressed block, or at least the part of it asked for; shared by
/// every reader of it. Dereferences to its bytes.
#[derive(Debug, Clone)]
pub struct Block {
    data: Arc<PartialBlock>,
    len: usize,
}

impl std::ops::Deref for Block {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.data.prefix(self.len)
    }
}

type Slot = Arc<OnceLock<Result<Arc<PartialBlock>>>>;

/// A cached block and the bytes counted for it.
#[derive(Debug)]
struct Entry {
    slot: Slot,
    charged: usize,
}

/// A byte-bounded LRU cache of (partially) decompressed blocks: one
/// image's handle onto a store that other images may share.
#[derive(Debug)]
pub struct BlockCache {
    store: Arc<Store>,
    /// This image's key prefix in the store.
    image: u64,
}

/// The blocks of every image sharing one bound.
#[derive(Debug)]
struct Store {
    capacity: usize,
    decratio: f64,
    inner: Mutex<Inner>,
    /// The number the next handle's image gets.
    next_image: AtomicU64,
}

/// A block's key in the store: its image in the high half, its number in
/// the low one.
type Key = u64;

#[derive(Debug)]
struct Inner {
    slots: lru::LruCache<Key, Entry>,
    /// When each cached block was last asked for.
    used: HashMap<Key, Instant>,
    bytes: usize,
}

impl Inner {
    /// Drops block `number`, keeping the byte count right.
    fn remove(&mut self, number: Key) {
        if let Some(entry) = self.slots.pop(&number) {
            self.bytes -= entry.charged;
        }
        self.used.remove(&number);
    }

    /// The entry of `number`, if it still holds `slot`.
    fn entry_of(&mut self, number: Key, slot: &Slot) -> Option<&mut Entry> {
        self.slots
            .peek_mut(&number)
            .filter(|e| Arc::ptr_eq(&e.slot, slot))
    }
}

/// How far one block is decoded, for [`BlockCache::progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes decoded.
    pub decoded: usize,
    /// The block's size.
    pub size: usize,
    /// Whether it is complete and its decoder dropped.
    pub complete: bool,
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes (always at least one
    /// block), decoding blocks whole once a read reaches past `decratio`
    /// of them (clamped to `0.0..=1.0`: 0 decodes every block whole at its
    /// first read, 1 only as far as reads go).
    pub fn new(capacity: usize, decratio: f64) -> Self {
        let store = Store {
            capacity,
            decratio: if decratio.is_nan() {
                DEFAULT_DECRATIO
            } else {
                decratio.clamp(0.0, 1.0)
            },
            inner: Mutex::new(Inner {
                slots: lru::LruCache::unbounded(),
                used: HashMap::new(),
                bytes: 0,
            }),
            next_image: AtomicU64::new(1),
        };
        BlockCache {
            store: Arc::new(store),
            image: 0,
        }
    }

    /// A handle for another image onto the same store: its blocks count
    /// against the same bound and are evicted with the others.
    pub fn for_another_image(&self) -> BlockCache {
        BlockCache {
            store: self.store.clone(),
            image: self.store.next_image.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn key(&self, number: u32) -> Key {
        self.image << 32 | u64::from(number)
    }

    /// The most bytes the store holds (for every image of it).
    pub fn capacity(&self) -> usize {
        self.store.capacity
    }

    /// Bytes currently counted, for every image of the store: decoded
    /// data plus decoder estimates.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// How far block `number` is decoded, if it is cached.
    pub fn progress(&self, number: u32) -> Option<Progress> {
        let inner = self.lock();
        let block = inner
            .slots
            .peek(&self.key(number))?
            .slot
            .get()?
            .as_ref()
            .ok()?;
        Some(Progress {
            decoded: block.filled(),
            size: block.size(),
            complete: block.is_complete(),
        })
    }

    /// Block `number`, if it is cached and decoded at least up to byte
    /// `end` (or whole): what [`BlockCache::get`] would return without
    /// decoding anything. Counts as a use of the block.
    pub fn get_decoded(&self, number: u32, end: usize) -> Option<Block> {
        let key = self.key(number);
        let block = {
            let mut inner = self.lock();
            let block = inner.slots.get(&key)?.slot.get()?.as_ref().ok()?.clone();
            inner.used.insert(key, Instant::now());
            block
        };
        let end = end.min(block.size());
        block.covers(end).then_some(Block {
            data: block,
            len: end,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.store.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns block `number` decoded at least up to byte `end` (all of it
    /// if `end` reaches its end, e.g. `usize::MAX`). If the block is not
    /// cached, `open` makes its decoder; `describe` turns a decoding error
    /// into the reader's. Concurrent callers for one block share one
    /// `open`, and never decode the same bytes twice.
    pub fn get(
        &self,
        number: u32,
        end: usize,
        open: impl FnOnce() -> Result<Box<dyn PartialDecoder>>,
        describe: impl Fn(CodecError) -> Error,
    ) -> Result<Block> {
        let number = self.key(number);
        let slot = {
            let mut inner = self.lock();
            inner.used.insert(number, Instant::now());
            inner
                .slots
                .get_or_insert(number, || Entry {
                    slot: Arc::new(OnceLock::new()),
                    charged: 0,
                })
                .slot
                .clone()
        };
        let mut opened_here = false;
        let opened = slot
            .get_or_init(|| {
                opened_here = true;
                open().map(|d| Arc::new(PartialBlock::new(d)))
            })
            .clone();
        let block = match opened {
            Ok(block) => block,
            Err(e) => {
                self.forget(number, &slot);
                return Err(e);
            }
        };
        let end = end.min(block.size());
        let mut changed = opened_here;
        if !block.covers(end) {
            match block.extend(end, self.store.decratio, STEP, describe) {
                Ok(c) => changed |= c,
                Err(e) => {
                    // Errors are not kept: a later read may retry.
                    self.forget(number, &slot);
                    return Err(e);
                }
            }
        }
        if changed {
            self.account(number, &slot, &block);
        }
        Ok(Block {
            data: block,
            len: end,
        })
    }

    /// Drops `slot` of block `number` if it is still cached.
    fn forget(&self, number: Key, slot: &Slot) {
        let mut inner = self.lock();
        if inner.entry_of(number, slot).is_some() {
            inner.remove(number);
        }
    }

    /// Brings the bytes counted for `block` up to date and evicts old
    /// blocks beyond the capacity (never `number` itself).
    fn account(&self, number: Key, slot: &Slot, block: &PartialBlock) {
        let mut inner = self.lock();
        let Some(entry) = inner.entry_of(number, slot) else {
            return;
        };
        let (old, new) = (entry.charged, block.charge());
        entry.charged = new;
        inner.bytes = inner.bytes - old + new;
        while inner.bytes > self.store.capacity && inner.slots.len() > 1 {
            let Some((n, entry)) = inner.slots.pop_lru() else {
                break;
            };
            if n == number {
                inner.slots.put(n, entry);
                break;
            }
            inner.bytes -= entry.charged;
            inner.used.remove(&n);
        }
    }

    /// Drops the opened blocks for which `drop_it(decoded bytes, last use)`
    /// says so; returns how many were dropped. Blocks being opened stay.
    fn tidy(&self, drop_it: impl Fn(&[u8], Instant) -> bool) -> usize {
        let mut inner = self.lock();
        let doomed: Vec<Key> = inner
            .slots
            .iter()
            .filter_map(|(&n, entry)| {
                let block = entry.slot.get()?.as_ref().ok()?;
                let used = *inner.used.get(&n)?;
                drop_it(block.prefix(block.size()), used).then_some(n)
            })
            .collect();
        for &n in &doomed {
            inner.remove(n);
        }
        doomed.len()
    }

    /// Drops blocks not asked for during the last `max_age` (of every
    /// image of the store).
    pub fn evict_unused(&self, max_age: Duration) -> usize {
        let now = Instant::now();
        self.tidy(|_, used| now.duration_since(used) > max_age)
    }

    /// Drops blocks of which the kernel has swapped out any page (of
    /// every image of the store).
    pub fn evict_swapped(&self) -> usize {
        self.tidy(|block, _| partly_swapped(block))
    }
}

impl Drop for BlockCache {
    /// Drops this image's blocks from a store other images still use.
    fn drop(&mut self) {
        if Arc::strong_count(&self.store) == 1 {
            return;
        }
        let mut inner = self.lock();
        let mine: Vec<Key> = inner
            .slots
            .iter()
            .map(|(&k, _)| k)
            .filter(|k| k >> 32 == self.image)
            .collect();
        for k in mine {
            inner.remove(k);
        }
    }
}

/// Whether any page of `data` is not resident in memory (`mincore`).
fn partly_swapped(data: &[u8]) -> bool {
    if data.is_empty() {
        return false;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = data.as_ptr() as usize / page * page;
    let end = data.as_ptr() as usize + data.len();
    let pages = (end - start).div_ceil(page);
    let mut resident = vec![0u8; pages];
    // SAFETY: the range covers pages of a live allocation; `resident` has
    // one byte per page.
    let r = unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            end - start,
            resident.as_mut_ptr().cast(),
        )
    };
    r == 0 && resident.iter().any(|&b| b & 1 == 0)
}

#[cfg(test)]
mod tests;
