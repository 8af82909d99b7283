//! Stage 2: whole-file deduplication. Files are grouped by size, then by
//! an XXH3-128 hash of their contents, so each distinct content is stored
//! once and its duplicates share it. Only files whose size another file
//! shares are read (a file of a size of its own has no duplicate), unless
//! the ordering stage needs each content's nilsimsa digest (see
//! [`dedupe`] for how that is read once a content).

use crate::nilsimsa::{Nilsimsa, NilsimsaHasher, NILSIMSA_MIN_SIZE};
use crate::tree::{Source, Tree};
use rayon::prelude::*;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::Xxh3;

/// One distinct file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// Its size.
    pub size: u64,
    /// The files (indices into [`Tree::files`]) with this content, sorted
    /// (most contents have one file: it is kept inline, not allocated).
    pub files: SmallVec<[usize; 1]>,
    /// Nilsimsa digest of the content, if computed and the content has at
    /// least [`NILSIMSA_MIN_SIZE`] bytes (boxed: only `-l9` and the
    /// `nilsimsa` orders compute it, and inline it made every content 40
    /// bytes larger).
    pub nilsimsa: Option<Box<Nilsimsa>>,
}

/// What [`dedupe`] computes besides the hashes that find duplicates.
#[derive(Debug, Clone, Copy)]
pub struct DedupeOptions {
    /// Compute [`Content::nilsimsa`], which only the `nilsimsa` order uses
    /// (it costs a few nanoseconds per byte, and every file must be read).
    /// On by default.
    pub nilsimsa: bool,
}

impl Default for DedupeOptions {
    fn default() -> Self {
        DedupeOptions { nilsimsa: true }
    }
}

/// The distinct contents of a tree.
#[derive(Debug, Default)]
pub struct Deduped {
    /// Distinct contents, in order of their first file.
    pub contents: Vec<Content>,
    /// Files that could not be read (index into [`Tree::files`], error);
    /// they are left out of the image.
    pub unreadable: Vec<(usize, String)>,
}

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct DedupeProgress {
    /// Bytes hashed so far.
    pub bytes: AtomicU64,
    /// Files hashed so far.
    pub files: AtomicU64,
}

/// What reading one file found; `hash` is `None` for a file whose size
/// is its own (no other file can equal it).
struct Digest {
    hash: Option<u128>,
    size: u64,
    nilsimsa: Option<Box<Nilsimsa>>,
}

/// What to compute while reading a file.
#[derive(Clone, Copy)]
struct Wanted {
    hash: bool,
    nilsimsa: bool,
}

/// Reads one file through `buf` (a worker's reused buffer: allocating and
/// zeroing a fresh one per file would cost more than hashing small files).
fn digest(buf: &mut [u8], path: &std::path::Path, wanted: Wanted) -> std::io::Result<Digest> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = wanted.hash.then(Xxh3::new);
    let mut nilsimsa = wanted.nilsimsa.then(NilsimsaHasher::default);
    let mut size = 0u64;
    loop {
        let n = match file.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Some(h) = &mut hasher {
            h.update(&buf[..n]);
        }
        if let Some(h) = &mut nilsimsa {
            h.update(&buf[..n]);
        }
        size += n as u64;
    }
    Ok(Digest {
        hash: hasher.map(|h| h.digest128()),
        size,
        nilsimsa: nilsimsa
            .filter(|_| size >= NILSIMSA_MIN_SIZE)
            .map(|h| Box::new(h.finish())),
    })
}

/// Groups the equal contents of `tree`'s files, reading those that may
/// have a duplicate and computing the digests `options` ask for.
///
/// Nilsimsa digests are computed once a content, not once a file: a file
/// of a size of its own gets its digest in the one read it needs; of
/// files that share a size only the hash is computed, and once they are
/// grouped, the first file of each content is read again for its digest
/// (on 40 releases of a project, 0.6 of 1.4 GB of files; the digest costs
/// far more than reading a file the page cache holds).
pub fn dedupe(tree: &Tree, progress: &DedupeProgress, options: DedupeOptions) -> Deduped {
    let mut files_of_size: HashMap<u64, u32> = HashMap::new();
    for f in &tree.files {
        *files_of_size.entry(f.size).or_default() += 1;
    }
    let digests: Vec<std::io::Result<Digest>> = (0..tree.files.len())
        .into_par_iter()
        .map_init(
            || vec![0u8; 1 << 20],
            |buf, i| {
                let f = &tree.files[i];
                let shared = files_of_size[&f.size] > 1;
                let d = if shared || options.nilsimsa {
                    let wanted = Wanted {
                        hash: shared,
                        nilsimsa: options.nilsimsa && !shared,
                    };
                    digest(buf, &tree.source(i), wanted)
                } else {
                    // Its size is the scan's. A file of the scanned tree was
                    // found readable there; others are opened to find out.
                    let checked = match f.source {
                        Source::Entry(_) => Ok(()),
                        Source::Path(_) => std::fs::File::open(tree.source(i)).map(drop),
                    };
                    checked.map(|()| Digest {
                        hash: None,
                        size: f.size,
                        nilsimsa: None,
                    })
                };
                progress.bytes.fetch_add(f.size, Ordering::Relaxed);
                progress.files.fetch_add(1, Ordering::Relaxed);
                d
            },
        )
        .collect();
    drop(files_of_size);
    let mut deduped = group(digests);
    if options.nilsimsa {
        add_nilsimsa(tree, &mut deduped.contents);
    }
    deduped
}

/// Computes the nilsimsa digest of each content that has none yet, from
/// its first file. A file that cannot be read now is left without one:
/// the order only uses it as a hint, and the data stage reports the error.
fn add_nilsimsa(tree: &Tree, contents: &mut [Content]) {
    let wanted = Wanted {
        hash: false,
        nilsimsa: true,
    };
    contents
        .par_iter_mut()
        .filter(|c| c.nilsimsa.is_none() && c.size >= NILSIMSA_MIN_SIZE)
        .for_each_init(
            || vec![0u8; 1 << 20],
            |buf, c| {
                c.nilsimsa = digest(buf, &tree.source(c.files[0]), wanted)
                    .ok()
                    .and_then(|d| d.nilsimsa);
            },
        );
}

/// Turns each file's digest into the distinct contents, in order of their
/// first file. Equal digests are found by sorting file numbers by digest
/// (4 bytes a file), not with a hash map of digests (about 100 bytes a
/// file while it grows: on many small files, the largest part of the
/// build's peak memory).
fn group(digests: Vec<std::io::Result<Digest>>) -> Deduped {
    let key = |f: u32| match &digests[f as usize] {
        Ok(Digest {
            hash: Some(hash),
            size,
            ..
        }) => Some((*size, *hash)),
        _ => None,
    };
    let mut hashed: Vec<u32> = (0..digests.len() as u32)
        .filter(|&f| key(f).is_some())
        .collect();
    hashed.sort_unstable_by_key(|&f| (key(f), f));
    // The first file of each run of equal digests stands for the run.
    let mut first_of: Vec<u32> = (0..digests.len() as u32).collect();
    for run in hashed.chunk_by(|&a, &b| key(a) == key(b)) {
        for &f in &run[1..] {
            first_of[f as usize] = run[0];
        }
    }
    drop(hashed);
    let distinct = digests
        .iter()
        .enumerate()
        .filter(|&(f, d)| d.is_ok() && first_of[f] == f as u32)
        .count();
    let mut out = Deduped {
        contents: Vec::with_capacity(distinct),
        unreadable: Vec::new(),
    };
    // A first file's entry becomes its content's number.
    for (file, d) in digests.into_iter().enumerate() {
        match d {
            Ok(d) => {
                let first = first_of[file] as usize;
                if first == file {
                    first_of[file] = out.contents.len() as u32;
                    out.contents.push(Content {
                        size: d.size,
                        files: SmallVec::new(),
                        nilsimsa: d.nilsimsa,
                    });
                }
                out.contents[first_of[first] as usize].files.push(file);
            }
            Err(e) => out.unreadable.push((file, e.to_string())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::File;

    fn tree_of(dir: &std::path::Path, contents: &[&[u8]]) -> Tree {
        let files = contents
            .iter()
            .enumerate()
            .map(|(i, data)| {
                let source = dir.join(format!("f{i}"));
                std::fs::write(&source, data).unwrap();
                File {
                    source: crate::tree::Source::path(source),
                    size: data.len() as u64,
                    links: 1,
                    allocated: false,
                }
            })
            .collect();
        Tree {
            entries: Vec::new(),
            files,
            root: std::path::PathBuf::new(),
        }
    }

    #[test]
    fn digests_are_computed_only_when_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let data: &[u8] = b"some text long enough for every digest";
        let tree = tree_of(dir.path(), &[data, b"other", data]);
        let progress = DedupeProgress::default();
        let all = dedupe(&tree, &progress, DedupeOptions::default());
        assert_eq!(all.contents.len(), 2);
        assert_eq!(all.contents[0].files[..], [0, 2]);
        assert!(all.contents.iter().all(|c| c.nilsimsa.is_some()));
        let bare = dedupe(&tree, &progress, DedupeOptions { nilsimsa: false });
        assert_eq!(bare.contents.len(), 2);
        assert_eq!(bare.contents[0].files[..], [0, 2]);
        assert_eq!(bare.contents[0].nilsimsa, None);
    }

    #[test]
    fn contents_follow_their_first_file_with_duplicates_interleaved() {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_of(
            dir.path(),
            &[b"bbb", b"aaa", b"bbb", b"ccc", b"aaa", b"bbb"],
        );
        let progress = DedupeProgress::default();
        let d = dedupe(&tree, &progress, DedupeOptions { nilsimsa: false });
        let files: Vec<&[usize]> = d.contents.iter().map(|c| &c.files[..]).collect();
        assert_eq!(files, [&[0, 2, 5][..], &[1, 4], &[3]]);
        assert!(d.contents.iter().all(|c| c.size == 3));
        assert!(d.unreadable.is_empty());
    }

    #[test]
    fn files_of_a_size_of_their_own_are_opened_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_of(dir.path(), &[b"abc", b"abd", b"a size alone", b"gone!!"]);
        std::fs::remove_file(dir.path().join("f3")).unwrap();
        let progress = DedupeProgress::default();
        let d = dedupe(&tree, &progress, DedupeOptions { nilsimsa: false });
        let files: Vec<Vec<usize>> = d.contents.iter().map(|c| c.files.to_vec()).collect();
        assert_eq!(files, vec![vec![0], vec![1], vec![2]]);
        assert_eq!(d.contents[2].size, 12);
        assert_eq!(d.unreadable.len(), 1);
        assert_eq!(d.unreadable[0].0, 3);
    }
}
