//! The block cache: decompressed blocks kept in memory, bounded in bytes,
//! least recently used evicted first.
//!
//! A block requested by several threads at once is decompressed once: the
//! first caller fills the slot while the others wait on it.
//!
//! Besides eviction when full, the cache can be tidied: blocks unused for
//! some time, or partly swapped out by the kernel, are dropped (the FUSE
//! driver's `tidy_strategy`).

use crate::error::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A decompressed block, shared by every reader of it.
pub type Block = Arc<[u8]>;

type Slot = Arc<OnceLock<Result<Block>>>;

/// A byte-bounded LRU cache of decompressed blocks.
#[derive(Debug)]
pub struct BlockCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    slots: lru::LruCache<u32, Slot>,
    /// When each cached block was last asked for.
    used: HashMap<u32, Instant>,
    bytes: usize,
}

impl Inner {
    /// Drops block `number`, keeping the byte count right.
    fn remove(&mut self, number: u32) {
        if let Some(slot) = self.slots.pop(&number) {
            if let Some(Ok(b)) = slot.get() {
                self.bytes -= b.len();
            }
        }
        self.used.remove(&number);
    }
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of decompressed blocks
    /// (always at least one block).
    pub fn new(capacity: usize) -> Self {
        BlockCache {
            capacity,
            inner: Mutex::new(Inner {
                slots: lru::LruCache::unbounded(),
                used: HashMap::new(),
                bytes: 0,
            }),
        }
    }

    /// Bytes of decompressed data currently held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns block `number`, calling `load` to produce it if it is not
    /// cached. Concurrent callers for one block share one `load`.
    pub fn get(&self, number: u32, load: impl FnOnce() -> Result<Vec<u8>>) -> Result<Block> {
        let slot = {
            let mut inner = self.lock();
            inner.used.insert(number, Instant::now());
            inner
                .slots
                .get_or_insert(number, || Arc::new(OnceLock::new()))
                .clone()
        };
        let mut filled_here = false;
        let result = slot
            .get_or_init(|| {
                filled_here = true;
                load().map(Block::from)
            })
            .clone();
        if filled_here {
            self.account(number, &slot, &result);
        }
        result
    }

    /// Records the size of a freshly filled slot and evicts old blocks.
    fn account(&self, number: u32, slot: &Slot, result: &Result<Block>) {
        let mut inner = self.lock();
        let still_cached = inner
            .slots
            .peek(&number)
            .is_some_and(|s| Arc::ptr_eq(s, slot));
        if !still_cached {
            return;
        }
        match result {
            Ok(block) => inner.bytes += block.len(),
            // Errors are not kept: a later read may retry.
            Err(_) => {
                inner.slots.pop(&number);
                inner.used.remove(&number);
                return;
            }
        }
        while inner.bytes > self.capacity && inner.slots.len() > 1 {
            let Some((old, old_slot)) = inner.slots.pop_lru() else {
                break;
            };
            if old == number {
                inner.slots.put(old, old_slot);
                break;
            }
            if let Some(Ok(b)) = old_slot.get() {
                inner.bytes -= b.len();
            }
            inner.used.remove(&old);
        }
    }

    /// Drops the filled blocks for which `drop_it(block, last use)` says so;
    /// returns how many were dropped. Blocks being loaded stay.
    fn tidy(&self, drop_it: impl Fn(&[u8], Instant) -> bool) -> usize {
        let mut inner = self.lock();
        let doomed: Vec<u32> = inner
            .slots
            .iter()
            .filter_map(|(&n, slot)| {
                let block = slot.get()?.as_ref().ok()?;
                let used = *inner.used.get(&n)?;
                drop_it(block, used).then_some(n)
            })
            .collect();
        for &n in &doomed {
            inner.remove(n);
        }
        doomed.len()
    }

    /// Drops blocks not asked for during the last `max_age`.
    pub fn evict_unused(&self, max_age: Duration) -> usize {
        let now = Instant::now();
        self.tidy(|_, used| now.duration_since(used) > max_age)
    }

    /// Drops blocks of which the kernel has swapped out any page.
    pub fn evict_swapped(&self) -> usize {
        self.tidy(|block, _| partly_swapped(block))
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn evicts_least_recently_used_beyond_capacity() {
        let cache = BlockCache::new(250);
        for n in 0..3 {
            cache.get(n, || Ok(vec![n as u8; 100])).unwrap();
        }
        assert_eq!(cache.bytes(), 200);
        let loads = AtomicUsize::new(0);
        cache
            .get(2, || {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(vec![0; 100])
            })
            .unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 0, "block 2 stays cached");
        cache
            .get(0, || {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(vec![0; 100])
            })
            .unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 1, "block 0 was evicted");
    }

    #[test]
    fn concurrent_readers_share_one_load() {
        let cache = Arc::new(BlockCache::new(1 << 20));
        let loads = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                std::thread::spawn(move || {
                    cache
                        .get(7, || {
                            loads.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            Ok(vec![7; 1000])
                        })
                        .unwrap()
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap()[0], 7);
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn tidying_drops_blocks_unused_for_a_while() {
        let cache = BlockCache::new(1 << 20);
        cache.get(1, || Ok(vec![1; 100])).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        cache.get(2, || Ok(vec![2; 100])).unwrap();
        assert_eq!(cache.evict_unused(Duration::from_millis(30)), 1);
        assert_eq!(cache.bytes(), 100);
        // Resident blocks are not "swapped".
        assert_eq!(cache.evict_swapped(), 0);
        assert_eq!(cache.evict_unused(Duration::ZERO), 1);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn errors_are_returned_and_not_kept() {
        let cache = BlockCache::new(1000);
        assert!(cache
            .get(1, || Err(crate::Error::Corrupt("bad".into())))
            .is_err());
        assert!(cache.get(1, || Ok(vec![1])).is_ok());
    }
}
