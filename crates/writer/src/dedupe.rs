//! Stage 2: whole-file deduplication. Every regular file is read once:
//! files are grouped by size, then by an XXH3-128 hash of their contents,
//! so each distinct content is stored once and its duplicates share it.
//! The same read computes each content's similarity fingerprint and its
//! nilsimsa digest where the ordering stage uses them.

use crate::order::{Fingerprint, Nilsimsa, NilsimsaHasher, NILSIMSA_MIN_SIZE};
use crate::tree::Tree;
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::Xxh3;

/// One distinct file content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// Its size.
    pub size: u64,
    /// The files (indices into [`Tree::files`]) with this content, sorted.
    pub files: Vec<usize>,
    /// Similarity fingerprint of the content, if computed (0 otherwise).
    pub fingerprint: Fingerprint,
    /// Nilsimsa digest of the content, if computed and the content has at
    /// least [`NILSIMSA_MIN_SIZE`] bytes.
    pub nilsimsa: Option<Nilsimsa>,
}

/// What [`dedupe`] computes besides the hashes that find duplicates.
#[derive(Debug, Clone, Copy)]
pub struct DedupeOptions {
    /// Compute [`Content::nilsimsa`], which only the `nilsimsa` order uses
    /// (it costs a few nanoseconds per byte). On by default.
    pub nilsimsa: bool,
    /// Compute [`Content::fingerprint`], which only the `similarity` order
    /// uses (it costs about as much as the hash that finds duplicates). On
    /// by default.
    pub fingerprint: bool,
}

impl Default for DedupeOptions {
    fn default() -> Self {
        DedupeOptions {
            nilsimsa: true,
            fingerprint: true,
        }
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

/// What reading one file found.
struct Digest {
    hash: u128,
    size: u64,
    fingerprint: Fingerprint,
    nilsimsa: Option<Nilsimsa>,
}

/// Reads one file through `buf` (a worker's reused buffer: allocating and
/// zeroing a fresh one per file would cost more than hashing small files).
fn digest(
    buf: &mut [u8],
    path: &std::path::Path,
    progress: &DedupeProgress,
    options: DedupeOptions,
) -> std::io::Result<Digest> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Xxh3::new();
    let mut fingerprint = options
        .fingerprint
        .then(crate::order::Fingerprinter::default);
    let mut nilsimsa = options.nilsimsa.then(NilsimsaHasher::default);
    let mut size = 0u64;
    loop {
        let n = match file.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        if let Some(f) = &mut fingerprint {
            f.update(&buf[..n]);
        }
        if let Some(h) = &mut nilsimsa {
            h.update(&buf[..n]);
        }
        size += n as u64;
        progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    progress.files.fetch_add(1, Ordering::Relaxed);
    Ok(Digest {
        hash: hasher.digest128(),
        size,
        fingerprint: fingerprint.map_or(0, |f| f.finish()),
        nilsimsa: nilsimsa
            .filter(|_| size >= NILSIMSA_MIN_SIZE)
            .map(|h| h.finish()),
    })
}

/// Reads every file of `tree` and groups equal contents, computing the
/// similarity digests `options` ask for.
pub fn dedupe(tree: &Tree, progress: &DedupeProgress, options: DedupeOptions) -> Deduped {
    let digests: Vec<std::io::Result<Digest>> = tree
        .files
        .par_iter()
        .map_init(
            || vec![0u8; 1 << 20],
            |buf, f| digest(buf, &f.source, progress, options),
        )
        .collect();
    let mut out = Deduped::default();
    let mut by_key: HashMap<(u64, u128), usize> = HashMap::new();
    for (file, d) in digests.into_iter().enumerate() {
        match d {
            Ok(d) => {
                let next = out.contents.len();
                let c = *by_key.entry((d.size, d.hash)).or_insert(next);
                if c == next {
                    out.contents.push(Content {
                        size: d.size,
                        files: Vec::new(),
                        fingerprint: d.fingerprint,
                        nilsimsa: d.nilsimsa,
                    });
                }
                out.contents[c].files.push(file);
            }
            Err(e) => out.unreadable.push((file, e.to_string())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Fingerprinter;
    use crate::tree::File;

    fn tree_of(dir: &std::path::Path, contents: &[&[u8]]) -> Tree {
        let files = contents
            .iter()
            .enumerate()
            .map(|(i, data)| {
                let source = dir.join(format!("f{i}"));
                std::fs::write(&source, data).unwrap();
                File {
                    source,
                    size: data.len() as u64,
                    path: format!("f{i}").into_bytes(),
                    links: 1,
                }
            })
            .collect();
        Tree {
            entries: Vec::new(),
            files,
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
        assert_eq!(all.contents[0].files, vec![0, 2]);
        let mut f = Fingerprinter::default();
        f.update(data);
        assert_eq!(all.contents[0].fingerprint, f.finish());
        assert!(all.contents[0].nilsimsa.is_some());
        let none = DedupeOptions {
            nilsimsa: false,
            fingerprint: false,
        };
        let bare = dedupe(&tree, &progress, none);
        assert_eq!(bare.contents.len(), 2);
        assert_eq!(bare.contents[0].files, vec![0, 2]);
        assert_eq!(bare.contents[0].fingerprint, 0);
        assert_eq!(bare.contents[0].nilsimsa, None);
    }
}
