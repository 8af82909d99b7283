//! The block cache: decompressed blocks kept in memory, bounded in bytes,
//! least recently used evicted first.
//!
//! A block requested by several threads at once is decompressed once: the
//! first caller fills the slot while the others wait on it.

use crate::error::Result;
use std::sync::{Arc, Mutex, OnceLock};

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
    bytes: usize,
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of decompressed blocks
    /// (always at least one block).
    pub fn new(capacity: usize) -> Self {
        BlockCache {
            capacity,
            inner: Mutex::new(Inner {
                slots: lru::LruCache::unbounded(),
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
        }
    }
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
    fn errors_are_returned_and_not_kept() {
        let cache = BlockCache::new(1000);
        assert!(cache
            .get(1, || Err(crate::Error::Corrupt("bad".into())))
            .is_err());
        assert!(cache.get(1, || Ok(vec![1])).is_ok());
    }
}
