//! Directory order and inode numbers.
//!
//! Inodes are numbered by kind, as the format requires: directories (in
//! breadth-first order, so each directory's entries follow the previous
//! one's), symlinks, regular files with content of their own, regular files
//! whose content other files share, devices, then fifos and sockets.

use crate::dedupe::Deduped;
use crate::piece::{Piece, PieceList};
use crate::tree::{Kind, Tree};
use std::collections::{BTreeSet, VecDeque};

/// Numbers of dense indices (tree entries, files, contents), in a vector:
/// 4 bytes an index, where a hash map takes about 20 (for 10 million
/// files, the difference is hundreds of megabytes).
#[derive(Debug, Clone)]
pub(super) struct Numbers(Vec<u32>);

impl Numbers {
    const NONE: u32 = u32::MAX;

    /// No numbers yet, for indices below `len`.
    fn new(len: usize) -> Self {
        Numbers(vec![Self::NONE; len])
    }

    /// Gives index `i` number `n`.
    fn set(&mut self, i: usize, n: u32) {
        self.0[i] = n;
    }

    /// The number of index `i`, if it has one.
    fn get(&self, i: usize) -> Option<u32> {
        self.0.get(i).copied().filter(|&n| n != Self::NONE)
    }
}

impl std::ops::Index<usize> for Numbers {
    type Output = u32;

    /// The number of index `i`, which must have one.
    fn index(&self, i: usize) -> &u32 {
        let n = &self.0[i];
        assert!(*n != Self::NONE, "index {i} has no number");
        n
    }
}

/// Which content each regular file has.
pub(super) struct ContentIndex<'a> {
    deduped: &'a Deduped,
    content_of: Numbers,
    unreadable: BTreeSet<usize>,
}

impl<'a> ContentIndex<'a> {
    /// Indexes the files of `deduped`'s contents (`files` files in all).
    pub(super) fn new(deduped: &'a Deduped, files: usize) -> Self {
        let mut content_of = Numbers::new(files);
        for (c, content) in deduped.contents.iter().enumerate() {
            for &f in &content.files {
                content_of.set(f, c as u32);
            }
        }
        ContentIndex {
            deduped,
            content_of,
            unreadable: deduped.unreadable.iter().map(|u| u.0).collect(),
        }
    }

    /// The content of readable file `file`.
    pub(super) fn of(&self, file: usize) -> usize {
        self.content_of[file] as usize
    }

    /// Whether more than one file has content `content`.
    fn shared(&self, content: usize) -> bool {
        self.deduped.contents[content].files.len() > 1
    }

    /// Whether entry kind `kind` is a file that could not be read (and so
    /// is left out).
    fn unreadable(&self, kind: &Kind) -> bool {
        matches!(kind, Kind::File { file } if self.unreadable.contains(file))
    }
}

/// The directory entries in breadth-first order.
pub(super) struct DirWalk {
    /// Tree entries in directory-entry order; the root first.
    pub(super) entries: Vec<usize>,
    /// Directory tree entries in inode order.
    pub(super) dirs: Vec<usize>,
    /// Index in `entries` of each directory's first entry.
    pub(super) first_entry: Vec<u32>,
    /// Index in `entries` of each tree entry.
    pub(super) entry_of: Numbers,
}

impl DirWalk {
    /// Walks `tree` breadth-first, leaving out unreadable files.
    pub(super) fn new(tree: &Tree, contents: &ContentIndex<'_>) -> Self {
        let mut walk = DirWalk {
            entries: vec![0],
            dirs: Vec::new(),
            first_entry: Vec::new(),
            entry_of: Numbers::new(tree.entries.len()),
        };
        walk.entry_of.set(0, 0);
        let mut queue = VecDeque::from([0usize]);
        while let Some(d) = queue.pop_front() {
            walk.dirs.push(d);
            walk.first_entry.push(walk.entries.len() as u32);
            let Kind::Dir { children } = &tree.entries[d].kind else {
                continue;
            };
            for &c in children {
                let kind = &tree.entries[c].kind;
                if contents.unreadable(kind) {
                    continue;
                }
                walk.entry_of.set(c, walk.entries.len() as u32);
                walk.entries.push(c);
                if matches!(kind, Kind::Dir { .. }) {
                    queue.push_back(c);
                }
            }
        }
        walk
    }
}

/// Inode classes in inode-number order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Symlink,
    UniqueFile,
    SharedFile,
    Device,
    Special,
}

/// A non-directory inode: its class, its place within the class and its
/// (first) tree entry.
type Other = (Class, usize, usize);

/// The inode numbers and the order of the chunk table.
pub(super) struct Inodes {
    /// The tree entry of each inode, by inode number.
    pub(super) entries: Vec<usize>,
    /// The inode number of each tree entry.
    pub(super) of_entry: Numbers,
    /// Contents in chunk-table order: unique contents, then shared ones.
    pub(super) chunk_order: Vec<usize>,
    /// Index among the shared contents of each file inode that shares one.
    pub(super) shared_files: Vec<u32>,
}

impl Inodes {
    /// Numbers the inodes: directories in walk order, then one inode per
    /// other entry, except that hard links share one per file. Files are
    /// ordered by their content's place in the data (`pieces`).
    pub(super) fn number(
        tree: &Tree,
        walk: &DirWalk,
        contents: &ContentIndex<'_>,
        pieces: &[PieceList],
    ) -> Self {
        let others = classify(tree, walk, contents, pieces);
        let (chunk_order, shared_files) = chunk_order(tree, &others, contents);
        let mut entries = walk.dirs.clone();
        entries.extend(others.iter().map(|&(_, _, e)| e));
        let mut of_entry = Numbers::new(tree.entries.len());
        let mut of_file = Numbers::new(tree.files.len());
        for (ino, &e) in entries.iter().enumerate() {
            of_entry.set(e, ino as u32);
            if let Kind::File { file } = tree.entries[e].kind {
                of_file.set(file, ino as u32);
            }
        }
        for &e in &walk.entries {
            if let Kind::File { file } = tree.entries[e].kind {
                of_entry.set(e, of_file[file]);
            }
        }
        Inodes {
            entries,
            of_entry,
            chunk_order,
            shared_files,
        }
    }
}

/// The non-directory inodes in inode order.
fn classify(
    tree: &Tree,
    walk: &DirWalk,
    contents: &ContentIndex<'_>,
    pieces: &[PieceList],
) -> Vec<Other> {
    let rank = data_rank(pieces);
    let mut seen = vec![false; tree.files.len()];
    let mut others: Vec<Other> = Vec::new();
    for &e in &walk.entries[1..] {
        let (class, key) = match tree.entries[e].kind {
            Kind::Dir { .. } => continue,
            Kind::Symlink { .. } => (Class::Symlink, 0),
            Kind::File { file } => {
                if std::mem::replace(&mut seen[file], true) {
                    continue;
                }
                let c = contents.of(file);
                let class = if contents.shared(c) {
                    Class::SharedFile
                } else {
                    Class::UniqueFile
                };
                (class, rank[c])
            }
            Kind::Device { .. } => (Class::Device, 0),
            Kind::Special => (Class::Special, 0),
        };
        others.push((class, key, e));
    }
    others.sort_by_key(|&(class, key, _)| (class, key));
    others
}

/// The rank of each content (indexed like `pieces`) in data order: by
/// where its first piece of data lies (block, then offset), contents
/// without data last. Files that follow each other in the data then
/// follow each other in the chunk table, where their chunks' block and
/// the high bytes of their offsets repeat for the metadata's codec (2.7%
/// fewer bytes of zstd on `versions`' metadata than by block alone).
fn data_rank(pieces: &[PieceList]) -> Vec<usize> {
    let mut first: Vec<((u32, u32), usize)> = pieces
        .iter()
        .enumerate()
        .map(|(c, p)| {
            let at = p.iter().find_map(|x| match x {
                Piece::Data { block, offset, .. } => Some((*block, *offset)),
                Piece::Hole(_) => None,
            });
            (at.unwrap_or((u32::MAX, 0)), c)
        })
        .collect();
    first.sort_unstable();
    let mut rank = vec![0; pieces.len()];
    for (r, (_, c)) in first.into_iter().enumerate() {
        rank[c] = r;
    }
    rank
}

/// The chunk-table order of the contents of file inodes `others` (unique
/// contents, then shared ones in order of first use), and the shared
/// content index of each shared-file inode.
fn chunk_order(
    tree: &Tree,
    others: &[Other],
    contents: &ContentIndex<'_>,
) -> (Vec<usize>, Vec<u32>) {
    let mut order = Vec::new();
    let mut shared_index = Numbers::new(contents.deduped.contents.len());
    let mut shared_files = Vec::new();
    let mut shared_contents = Vec::new();
    for &(class, _, e) in others {
        let Kind::File { file } = tree.entries[e].kind else {
            continue;
        };
        let c = contents.of(file);
        match class {
            Class::UniqueFile => order.push(c),
            Class::SharedFile => {
                let s = shared_index.get(c).unwrap_or_else(|| {
                    let next = shared_contents.len() as u32;
                    shared_index.set(c, next);
                    shared_contents.push(c);
                    next
                });
                shared_files.push(s);
            }
            _ => {}
        }
    }
    order.extend(shared_contents);
    (order, shared_files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(block: u32, offset: u32) -> Piece {
        Piece::Data {
            block,
            offset,
            size: 10,
        }
    }

    #[test]
    fn contents_rank_by_where_their_data_starts() {
        let pieces: Vec<PieceList> = vec![
            [data(1, 500)].into_iter().collect(),
            [Piece::Hole(4)].into_iter().collect(),
            [data(1, 20), data(0, 900)].into_iter().collect(),
            [Piece::Hole(4), data(0, 700)].into_iter().collect(),
            PieceList::new(),
        ];
        assert_eq!(data_rank(&pieces), [2, 3, 1, 0, 4]);
    }
}
