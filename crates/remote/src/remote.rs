//! The remote source: the image's bytes fetched by range, kept in memory
//! and (verified) on disk, read ahead when read in order.

use crate::backend::{Backend, FetchError, Identity};
use crate::disk::DiskCache;
use crate::pieces::Pieces;
use crate::Options;
use hoard_reader::source::{FetchStats, RangeRead};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes fetched from the start of an image at open (its first header).
const HEAD_PROBE: u64 = 4 << 10;
/// Bytes fetched from the end of an image at open (its section index,
/// metadata and any recovery descriptor, in most images).
const TAIL_PROBE: u64 = 256 << 10;
/// Larger requests are split into parts of this size, fetched in parallel.
const MAX_REQUEST: u64 = 8 << 20;
/// A read starting at most this far after the last one's end continues a
/// sequential run (the gap is a section header).
const SEQUENTIAL_GAP: u64 = 64 << 10;
/// Reads shorter than this (section headers) do not count for readahead.
const SMALL_READ: u64 = 512;
/// Longest pause between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// An image on a server, read by byte ranges.
pub struct Remote {
    url: String,
    backend: Box<dyn Backend>,
    identity: Identity,
    options: Options,
    disk: Option<DiskCache>,
    state: Mutex<State>,
    flight_done: Condvar,
    slots: Slots,
    stats: Counters,
    changed: AtomicBool,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    pieces: Pieces,
    /// Ranges being fetched, so no two requests ask for the same bytes.
    flights: Vec<Range<u64>>,
    /// End of the last read, and the readahead window it earned.
    last_end: u64,
    window: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    cache_bytes: AtomicU64,
    latency_us: AtomicU64,
    max_latency_us: AtomicU64,
}

/// A bound on the requests in flight at once.
#[derive(Debug)]
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn take(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        SlotGuard(self)
    }
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// The cache directory name of an image: a hash of its size and ETag.
fn identity_key(id: &Identity) -> String {
    let text = format!("{}\n{}", id.size, id.etag.as_deref().unwrap_or(""));
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

impl Remote {
    /// Opens the image `url` served by `backend`: asks for its size and
    /// identity, then fetches its first and last bytes (unless the disk
    /// cache has them).
    pub fn open(url: &str, backend: Box<dyn Backend>, options: &Options) -> Result<Self, String> {
        let mut remote = Remote {
            url: url.to_string(),
            backend,
            identity: Identity {
                size: 0,
                etag: None,
            },
            options: options.clone(),
            disk: None,
            state: Mutex::new(State::default()),
            flight_done: Condvar::new(),
            slots: Slots {
                free: Mutex::new(options.connections),
                freed: Condvar::new(),
            },
            stats: Counters::default(),
            changed: AtomicBool::new(false),
        };
        let identity = remote.with_retries("", || remote.backend.identify())?;
        remote.identity = identity;
        if let Some(dir) = &options.cache_dir {
            let key = identity_key(&remote.identity);
            remote.disk = Some(DiskCache::open(dir, &key, options.cache_size)?);
        }
        let size = remote.identity.size;
        let tail = size.saturating_sub(8)..size;
        if size > 0 && !remote.disk.as_ref().is_some_and(|d| d.contains(&tail)) {
            remote.prefetch(&[
                0..HEAD_PROBE.min(size),
                size.saturating_sub(TAIL_PROBE)..size,
            ]);
        }
        Ok(remote)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs request `f` until it succeeds, fails for good, or has been
    /// retried `retries` times, pausing longer after each failure.
    fn with_retries<T>(
        &self,
        what: &str,
        mut f: impl FnMut() -> Result<T, FetchError>,
    ) -> Result<T, String> {
        let mut pause = self.options.backoff;
        let mut attempt = 0;
        loop {
            if self.changed.load(Ordering::Relaxed) {
                return Err(self.changed_message());
            }
            let started = Instant::now();
            let result = {
                let _slot = self.slots.take();
                f()
            };
            let us = started.elapsed().as_micros() as u64;
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            self.stats.latency_us.fetch_add(us, Ordering::Relaxed);
            self.stats.max_latency_us.fetch_max(us, Ordering::Relaxed);
            let e = match result {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            if e.changed {
                self.image_changed(&e.message);
                return Err(self.changed_message());
            }
            if !e.retry || attempt >= self.options.retries {
                let tries = if e.retry {
                    format!(" (after {} retries)", attempt)
                } else {
                    String::new()
                };
                return Err(format!("{}{what}: {}{tries}", self.url, e.message));
            }
            attempt += 1;
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    fn changed_message(&self) -> String {
        format!(
            "{}: the image changed on the server since it was opened",
            self.url
        )
    }

    /// Notes that the image changed, warning once.
    fn image_changed(&self, detail: &str) {
        if !self.changed.swap(true, Ordering::Relaxed) {
            eprintln!(
                "hoard: error: {}: the image changed on the server since it was opened ({detail}); reads of it fail from now on",
                self.url
            );
        }
    }

    /// Fetches `range` from the server, checking it is still the image
    /// that was opened.
    fn fetch(&self, range: Range<u64>) -> Result<Vec<u8>, String> {
        let what = format!(" (bytes {}-{})", range.start, range.end - 1);
        let etag = self.identity.etag.as_deref();
        let fetched = self.with_retries(&what, || self.backend.get(range.clone(), etag))?;
        if let (Some(was), Some(now)) = (etag, fetched.etag.as_deref()) {
            if was != now {
                self.image_changed(&format!("ETag {was}, now {now}"));
                return Err(self.changed_message());
            }
        }
        self.stats
            .bytes
            .fetch_add(fetched.bytes.len() as u64, Ordering::Relaxed);
        Ok(fetched.bytes)
    }

    /// Makes sure every byte of `ranges` is in memory: loads what the disk
    /// cache has, waits for what others are fetching, and fetches the rest
    /// in parallel. Returns the first failure.
    fn ensure(&self, ranges: &[Range<u64>]) -> Result<(), String> {
        for _round in 0..4 {
            let gaps: Vec<Range<u64>> = {
                let st = self.state();
                ranges
                    .iter()
                    .flat_map(|r| st.pieces.gaps(r.clone()))
                    .collect()
            };
            if gaps.is_empty() {
                return Ok(());
            }
            self.load_from_disk(&gaps);
            let (own, waiting) = self.claim(ranges);
            let result = self.fetch_all(&own);
            {
                let mut st = self.state();
                st.flights.retain(|f| !own.contains(f));
            }
            self.flight_done.notify_all();
            result?;
            if waiting {
                let mut st = self.state();
                while ranges.iter().any(|r| {
                    st.flights
                        .iter()
                        .any(|f| f.start < r.end && r.start < f.end)
                }) {
                    st = self.flight_done.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
        // Fetched, but evicted again by other readers' fetches.
        Err(format!(
            "{}: remote_memory is too small for the reads in progress",
            self.url
        ))
    }

    /// Puts what the disk cache has of `gaps` in memory.
    fn load_from_disk(&self, gaps: &[Range<u64>]) {
        let Some(disk) = &self.disk else { return };
        for gap in gaps {
            for (start, bytes) in disk.load(gap) {
                self.stats
                    .cache_bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                self.state()
                    .pieces
                    .insert(start, &bytes, self.options.memory);
            }
        }
    }

    /// The parts of `ranges` neither held nor being fetched, claimed for
    /// fetching here (split into parts of at most [`MAX_REQUEST`]); and
    /// whether other parts are being fetched by others.
    fn claim(&self, ranges: &[Range<u64>]) -> (Vec<Range<u64>>, bool) {
        let mut st = self.state();
        let mut own = Vec::new();
        let mut waiting = false;
        for r in ranges {
            for gap in st.pieces.gaps(r.clone()) {
                let mut free = vec![gap];
                for f in &st.flights {
                    free = free
                        .into_iter()
                        .flat_map(|g| {
                            if f.start < g.end && g.start < f.end {
                                waiting = true;
                                let mut rest = Vec::new();
                                if g.start < f.start {
                                    rest.push(g.start..f.start);
                                }
                                if f.end < g.end {
                                    rest.push(f.end..g.end);
                                }
                                rest
                            } else {
                                vec![g]
                            }
                        })
                        .collect();
                }
                for g in free {
                    let mut start = g.start;
                    while start < g.end {
                        let end = g.end.min(start + MAX_REQUEST);
                        own.push(start..end);
                        start = end;
                    }
                }
            }
        }
        own.sort_by_key(|r| r.start);
        own.dedup();
        st.flights.extend(own.iter().cloned());
        (own, waiting)
    }

    /// Fetches `parts` with up to `remote_connections` at once, keeping
    /// them in memory.
    fn fetch_all(&self, parts: &[Range<u64>]) -> Result<(), String> {
        let next = AtomicU64::new(0);
        let failure: Mutex<Option<String>> = Mutex::new(None);
        let work = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed) as usize;
            let Some(part) = parts.get(i) else { break };
            match self.fetch(part.clone()) {
                Ok(bytes) => self
                    .state()
                    .pieces
                    .insert(part.start, &bytes, self.options.memory),
                Err(e) => {
                    failure
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                }
            }
        };
        let threads = parts.len().min(self.options.connections);
        if threads <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(work);
                }
            });
        }
        match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The range to fetch for a read of `want`: with bytes ahead of it when
    /// it continues a sequential run (the run's window doubles, up to
    /// `remote_readahead`).
    fn with_readahead(&self, want: &Range<u64>) -> Range<u64> {
        let len = want.end - want.start;
        if len < SMALL_READ {
            return want.clone();
        }
        let mut st = self.state();
        let sequential = want.start >= st.last_end && want.start - st.last_end <= SEQUENTIAL_GAP;
        st.window = if sequential {
            (st.window * 2).max(len).min(self.options.readahead)
        } else {
            0
        };
        st.last_end = want.end;
        want.start..want.end.saturating_add(st.window).min(self.identity.size)
    }
}

impl RangeRead for Remote {
    fn size(&self) -> u64 {
        self.identity.size
    }

    fn read_at(&self, offset: u64, len: u64) -> Result<Vec<u8>, String> {
        let want = offset..offset + len;
        if len == 0 {
            return Ok(Vec::new());
        }
        let fetch = self.with_readahead(&want);
        for _ in 0..4 {
            if let Some(bytes) = self.state().pieces.get(want.clone()) {
                return Ok(bytes);
            }
            self.ensure(std::slice::from_ref(&fetch))?;
            if let Some(bytes) = self.state().pieces.get(want.clone()) {
                return Ok(bytes);
            }
        }
        Err(format!(
            "{}: remote_memory is too small for the reads in progress",
            self.url
        ))
    }

    fn prefetch(&self, ranges: &[Range<u64>]) {
        let mut sorted: Vec<Range<u64>> = ranges
            .iter()
            .filter(|r| r.start < r.end && r.end <= self.identity.size)
            .cloned()
            .collect();
        sorted.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        for r in sorted {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        // Failures show again at the reads that need the bytes.
        let _ = self.ensure(&merged);
    }

    fn checked(&self, range: Range<u64>, ok: bool) {
        if !ok {
            self.state().pieces.forget(range.clone());
            if let Some(disk) = &self.disk {
                disk.forget(&range);
            }
            return;
        }
        let Some(disk) = &self.disk else { return };
        if disk.contains(&range) {
            return;
        }
        let bytes = self.state().pieces.get(range.clone());
        if let Some(bytes) = bytes {
            disk.store(&range, &bytes);
        }
    }

    fn stats(&self) -> FetchStats {
        let s = &self.stats;
        FetchStats {
            requests: s.requests.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            failures: s.failures.load(Ordering::Relaxed),
            cache_bytes: s.cache_bytes.load(Ordering::Relaxed),
            latency_us: s.latency_us.load(Ordering::Relaxed),
            max_latency_us: s.max_latency_us.load(Ordering::Relaxed),
        }
    }
}

/// A shared remote source, as the reader takes it.
pub fn into_source(remote: Remote) -> hoard_reader::source::Source {
    hoard_reader::source::Source::Remote(Arc::new(remote))
}
