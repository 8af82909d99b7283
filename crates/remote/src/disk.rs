//! The on-disk cache: sections of remote images that passed their
//! checksum, one file each, in a directory per image identity.
//!
//! Files are named `START-END` (hexadecimal byte offsets) and written to
//! a temporary name, then renamed into place, so processes sharing the
//! directory never see half a file. The cache is bounded in bytes over
//! all its images: past the bound, the files used longest ago (by their
//! modification time, set at each use) are deleted. A file that vanishes
//! (another process evicted it) is a miss. The reader checks every
//! section it reads against its checksum, cached or not: bytes that fail
//! are deleted here and fetched again.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The cached sections of one image.
#[derive(Debug)]
pub struct DiskCache {
    root: PathBuf,
    dir: PathBuf,
    capacity: u64,
    known: Mutex<Known>,
}

#[derive(Debug)]
struct Known {
    /// Start to end of each cached range.
    entries: BTreeMap<u64, u64>,
    listed: Instant,
}

/// Listings older than this are read again at a miss, to see what other
/// processes added.
const RELIST_AFTER: Duration = Duration::from_secs(1);

fn name_of(range: &Range<u64>) -> String {
    format!("{:016x}-{:016x}", range.start, range.end)
}

fn range_of(name: &str) -> Option<Range<u64>> {
    let (a, b) = name.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    (start < end && a.len() == 16 && b.len() == 16).then_some(start..end)
}

fn list(dir: &Path) -> BTreeMap<u64, u64> {
    let mut entries = BTreeMap::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Some(r) = e.file_name().to_str().and_then(range_of) {
            entries.insert(r.start, r.end);
        }
    }
    entries
}

impl DiskCache {
    /// The cache of the image with identity `key` under `root`, holding at
    /// most `capacity` bytes over all images.
    pub fn open(root: &Path, key: &str, capacity: u64) -> Result<Self, String> {
        let dir = root.join(key);
        fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create cache directory '{}': {e}", dir.display()))?;
        Ok(DiskCache {
            root: root.to_path_buf(),
            known: Mutex::new(Known {
                entries: list(&dir),
                listed: Instant::now(),
            }),
            dir,
            capacity,
        })
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached ranges overlapping `range`.
    fn overlapping(entries: &BTreeMap<u64, u64>, range: &Range<u64>) -> Vec<Range<u64>> {
        entries
            .range(..range.end)
            .filter(|(_, &end)| end > range.start)
            .map(|(&s, &e)| s..e)
            .collect()
    }

    /// Cached ranges overlapping `range`, with their bytes (the ones still
    /// on disk).
    pub fn load(&self, range: &Range<u64>) -> Vec<(u64, Vec<u8>)> {
        let hits = {
            let mut known = self.known();
            let mut hits = Self::overlapping(&known.entries, range);
            if hits.is_empty() && known.listed.elapsed() > RELIST_AFTER {
                known.entries = list(&self.dir);
                known.listed = Instant::now();
                hits = Self::overlapping(&known.entries, range);
            }
            hits
        };
        let mut out = Vec::new();
        for r in hits {
            let path = self.dir.join(name_of(&r));
            match fs::read(&path) {
                Ok(bytes) if bytes.len() as u64 == r.end - r.start => {
                    if let Ok(f) = fs::File::options().write(true).open(&path) {
                        let _ = f.set_modified(SystemTime::now());
                    }
                    out.push((r.start, bytes));
                }
                _ => self.forget(&r),
            }
        }
        out
    }

    /// Whether one cached range holds all of `range`.
    pub fn contains(&self, range: &Range<u64>) -> bool {
        let known = self.known();
        known
            .entries
            .range(..=range.start)
            .next_back()
            .is_some_and(|(_, &end)| end >= range.end)
    }

    /// Keeps `bytes`, the contents of `range`; then trims the cache to its
    /// bound. Failures to write only lose the entry.
    pub fn store(&self, range: &Range<u64>, bytes: &[u8]) {
        let tmp = self.dir.join(format!(
            ".tmp-{}-{:?}-{}",
            std::process::id(),
            std::thread::current().id(),
            name_of(range)
        ));
        let written = fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| fs::rename(&tmp, self.dir.join(name_of(range))));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
            return;
        }
        self.known().entries.insert(range.start, range.end);
        self.trim();
    }

    /// Deletes every cached range overlapping `range`.
    pub fn forget(&self, range: &Range<u64>) {
        let mut known = self.known();
        for r in Self::overlapping(&known.entries, range) {
            let _ = fs::remove_file(self.dir.join(name_of(&r)));
            known.entries.remove(&r.start);
        }
    }

    /// Deletes the files used longest ago, over all images, until the
    /// cache holds at most its capacity.
    fn trim(&self) {
        let mut files: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for image in fs::read_dir(&self.root).into_iter().flatten().flatten() {
            for e in fs::read_dir(image.path()).into_iter().flatten().flatten() {
                if let Ok(meta) = e.metadata() {
                    let when = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    files.push((when, meta.len(), e.path()));
                }
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        if total <= self.capacity {
            return;
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.capacity {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
                if path.parent() == Some(self.dir.as_path()) {
                    if let Some(r) = path.file_name().and_then(|n| n.to_str()).and_then(range_of) {
                        self.known().entries.remove(&r.start);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hoard-remote-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn stores_loads_and_forgets() {
        let root = temp_dir("disk");
        let cache = DiskCache::open(&root, "img", 1 << 20).unwrap();
        cache.store(&(100..104), b"abcd");
        assert!(cache.contains(&(101..103)));
        assert!(!cache.contains(&(99..103)));
        // Another process sees it.
        let other = DiskCache::open(&root, "img", 1 << 20).unwrap();
        assert_eq!(other.load(&(102..200)), vec![(100, b"abcd".to_vec())]);
        other.forget(&(103..104));
        assert!(
            cache.load(&(100..104)).is_empty(),
            "vanished file is a miss"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn trims_to_capacity_oldest_first() {
        let root = temp_dir("trim");
        let cache = DiskCache::open(&root, "img", 10).unwrap();
        cache.store(&(0..6), b"aaaaaa");
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(root.join("img").join(name_of(&(0..6))))
            .unwrap()
            .set_modified(old)
            .unwrap();
        cache.store(&(10..16), b"bbbbbb");
        assert!(!cache.contains(&(0..6)), "older entry evicted");
        assert!(cache.contains(&(10..16)));
        fs::remove_dir_all(&root).unwrap();
    }
}
