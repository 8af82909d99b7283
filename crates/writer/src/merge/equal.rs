//! Equal contents that different parts store apart, joined into one:
//! contents are grouped by size, and only those of a size more than one
//! part holds are read and hashed (XXH3-128, as [`crate::dedupe`] finds
//! duplicates), in parallel, in the order their data lies in each part.
//! A joined content is read from where its first file (in the merged
//! tree's order) is stored; the other copies are no longer pointed at.

use crate::flatten::StoredContents;
use crate::{Error, Result};
use hoard_reader::Filesystem;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use xxhash_rust::xxh3::Xxh3;

/// Joins the contents of `stored` equal in size and hash where their size
/// is found in more than one of `layers`; each joined content keeps the
/// place of the first, and the files of all, in order.
pub(crate) fn join_equal_contents(
    stored: StoredContents,
    layers: &[Arc<Filesystem>],
) -> Result<StoredContents> {
    let mut candidates = shared_sizes(&stored);
    // In the order of their data in each part (a content's index follows
    // where its data lies), so that the hashing threads walk each part's
    // blocks front to back and a block is decoded about once, not once per
    // read as in the merged tree's path order.
    let index_in_part = |c: usize| {
        let (layer, ino) = stored.at[c];
        (
            layer,
            layers[layer].content_index(ino).unwrap_or(usize::MAX),
        )
    };
    candidates.sort_by_cached_key(|&c| index_in_part(c));
    let mut hashes: Vec<(usize, u128)> = candidates
        .into_par_iter()
        .map(|c| {
            let (layer, ino) = stored.at[c];
            Ok((c, hash(&layers[layer], ino, stored.contents[c].size)?))
        })
        .collect::<Result<_>>()?;
    // Each joined to the first of its equals in the merged tree's order.
    hashes.sort_unstable_by_key(|&(c, _)| c);
    // The content each is joined to (itself if none before it is equal).
    let mut target: Vec<usize> = (0..stored.contents.len()).collect();
    let mut first: HashMap<(u64, u128), usize> = HashMap::new();
    for (c, h) in hashes {
        target[c] = *first.entry((stored.contents[c].size, h)).or_insert(c);
    }
    let mut joined = StoredContents::default();
    let mut new_index = vec![usize::MAX; stored.contents.len()];
    for (c, (content, at)) in stored.contents.into_iter().zip(stored.at).enumerate() {
        if target[c] == c {
            new_index[c] = joined.contents.len();
            joined.contents.push(content);
            joined.at.push(at);
        } else {
            let files = &mut joined.contents[new_index[target[c]]].files;
            files.extend(content.files);
            files.sort_unstable();
        }
    }
    Ok(joined)
}

/// The contents whose size contents of another layer have too.
fn shared_sizes(stored: &StoredContents) -> Vec<usize> {
    // Per size: the first layer seen, and whether another has it.
    let mut sizes: HashMap<u64, (usize, bool)> = HashMap::new();
    for (c, &(layer, _)) in stored.contents.iter().zip(&stored.at) {
        let seen = sizes.entry(c.size).or_insert((layer, false));
        seen.1 |= seen.0 != layer;
    }
    stored
        .contents
        .iter()
        .enumerate()
        .filter(|(_, c)| sizes[&c.size].1)
        .map(|(i, _)| i)
        .collect()
}

/// The XXH3-128 hash of the `size` bytes of file `ino` of `fs`.
fn hash(fs: &Filesystem, ino: u32, size: u64) -> Result<u128> {
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; (1 << 20).min(size as usize)];
    let mut offset = 0u64;
    while offset < size {
        let n = fs
            .read(ino, offset, &mut buf)
            .map_err(|e| Error::Input(e.to_string()))?;
        if n == 0 {
            return Err(Error::Input(format!(
                "inode {ino} ends at {offset} of its {size} bytes"
            )));
        }
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
    Ok(hasher.digest128())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedupe::Content;

    fn content(size: u64, file: usize) -> Content {
        Content {
            size,
            files: smallvec::smallvec![file],
            nilsimsa: None,
        }
    }

    #[test]
    fn only_sizes_in_two_layers_are_hashed() {
        let stored = StoredContents {
            contents: vec![content(5, 0), content(5, 1), content(7, 2), content(7, 3)],
            at: vec![(0, 1), (0, 2), (0, 3), (1, 1)],
        };
        assert_eq!(shared_sizes(&stored), vec![2, 3]);
    }
}
