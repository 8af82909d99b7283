//! Where hoard's tests find DwarFS-made images.
//!
//! Two sets: the small one kept in the repository (`crates/testdata/images`,
//! enough to test every format generation on a fresh clone) and the full one
//! in `../shared/dwarfs-images` beside the checkout, used as well when it is
//! there. A test that needs `../shared` and cannot find it records that it
//! skipped, so that `scripts/test.sh` can say how much it left out.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// The image groups: `compat`, `misc`, `upstream` and `badfs`.
pub const GROUPS: [&str; 4] = ["compat", "misc", "upstream", "badfs"];

/// The checkout's root: found from the running test's crate folder (cargo
/// sets `CARGO_MANIFEST_DIR` when it runs tests, so a build shared between
/// checkouts looks in the right one), else from where this crate was built.
fn checkout() -> PathBuf {
    let krate = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    krate.join("../..")
}

/// The repository's own images.
pub fn repo_images() -> PathBuf {
    checkout().join("crates/testdata/images")
}

/// `../shared` beside the checkout, if present; when not, the calling test
/// is recorded as having skipped what needs it.
pub fn shared() -> Option<PathBuf> {
    let p = checkout().join("../shared");
    if p.join("dwarfs-images").is_dir() {
        Some(p.canonicalize().expect("canonical path of ../shared"))
    } else {
        skipped("../shared not found");
        None
    }
}

/// The `*.dwarfs` images of `group`: the repository's and, when present,
/// those of `../shared` (which has every one of the repository's under the
/// same name), sorted by name.
pub fn images(group: &str) -> Vec<PathBuf> {
    let mut by_name = BTreeMap::new();
    let mut dirs = vec![repo_images().join(group)];
    dirs.extend(shared().map(|s| s.join("dwarfs-images").join(group)));
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.map(|e| e.expect("read image folder").path()) {
            if path.extension().is_some_and(|e| e == "dwarfs") {
                by_name.insert(path.file_name().unwrap().to_owned(), path);
            }
        }
    }
    by_name.into_values().collect()
}

/// The images of `group` that have a manifest beside them, with it.
pub fn images_with_manifest(group: &str) -> Vec<(PathBuf, PathBuf)> {
    images(group)
        .into_iter()
        .filter_map(|p| {
            let m = p.with_extension("manifest");
            m.exists().then_some((p, m))
        })
        .collect()
}

/// One image by group and file name, from either set (`None`, recorded as
/// a skip, if it is only in `../shared` and that is absent).
pub fn image(group: &str, name: &str) -> Option<PathBuf> {
    let found = images(group)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == name));
    if found.is_none() {
        skipped(&format!("{group}/{name} is only in ../shared"));
    }
    found
}

/// Records that the running test left something out, and why: on stderr,
/// and as a line in the file named by `HOARD_SKIP_LOG` when that is set.
pub fn skipped(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    eprintln!("note: {test}: skipped: {why}");
    if let Some(log) = std::env::var_os("HOARD_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// Text-like bytes that a compressor shrinks but does not trivialise:
/// `phrase` over the first `text` bytes of every `period`, the rest
/// pseudo-random (xorshift32 from `seed`, which must not be 0) below
/// `spread`.
pub fn text_like(
    len: usize,
    seed: u32,
    phrase: &[u8],
    (text, period): (usize, usize),
    spread: u32,
) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % period < text {
                phrase[i % phrase.len()]
            } else {
                (x % spread) as u8
            }
        })
        .collect()
}

/// Pseudo-random bytes (xorshift64 from `seed`, which must not be 0),
/// the same for the same `seed`.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    std::iter::repeat_with(|| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s as u8
    })
    .take(n)
    .collect()
}

/// A directory `name` made in `dir`, holding `files` (names and contents).
pub fn tree_with(dir: &std::path::Path, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let tree = dir.join(name);
    std::fs::create_dir(&tree).unwrap();
    for (file, bytes) in files {
        std::fs::write(tree.join(file), bytes).unwrap();
    }
    tree
}

/// The problems `check` finds with each of `items` (it is also given the
/// item's index), in item order, the items shared out among as many threads
/// as the machine has.
pub fn problems_in_parallel<T: Sync>(
    items: &[T],
    check: impl Fn(usize, &T) -> Vec<String> + Sync,
) -> Vec<String> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = items.len().div_ceil(workers).max(1);
    let check = &check;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .enumerate()
            .map(|(c, chunk)| {
                s.spawn(move || {
                    (chunk.iter().enumerate())
                        .flat_map(|(i, item)| check(c * per + i, item))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Fails the test, listing `problems`, unless there are none; `what` says
/// what they are (`"flips not reported"`).
pub fn assert_no_problems(problems: &[String], what: &str) {
    assert!(
        problems.is_empty(),
        "{} {what}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A small deterministic generator (xorshift64*), so that tests that
/// draw at random reproduce.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    /// `count` positions drawn uniformly from the union of `ranges`.
    pub fn sample(&mut self, ranges: &[std::ops::Range<u64>], count: usize) -> Vec<u64> {
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        assert!(total > 0, "nothing to sample");
        (0..count)
            .map(|_| {
                let mut k = self.below(total);
                for r in ranges {
                    if k < r.end - r.start {
                        return r.start + k;
                    }
                    k -= r.end - r.start;
                }
                unreachable!("k < total")
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_set_covers_every_group() {
        for group in GROUPS {
            assert!(
                std::fs::read_dir(repo_images().join(group))
                    .unwrap()
                    .any(|e| e.unwrap().path().extension().is_some_and(|e| e == "dwarfs")),
                "{group}"
            );
        }
        assert!(image("compat", "compat-v0.2.0.dwarfs").is_some());
        assert!(image("upstream", "default.dwarfs").is_some());
    }

    #[test]
    fn images_are_listed_once_by_name() {
        let all = images("compat");
        let mut names: Vec<_> = all.iter().map(|p| p.file_name().unwrap()).collect();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(images_with_manifest("compat").len() >= 12);
    }
}
