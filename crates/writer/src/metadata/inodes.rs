//! Directory order and inode numbers.
//!
//! Inodes are numbered by kind, as the format requires: directories (in
//! breadth-first order, so each directory's entries follow the previous
//! one's), symlinks, regular files with content of their own, regular files
//! whose content other files share, devices, then fifos and sockets.

use crate::dedupe::Deduped;
use crate::segment::Piece;
use crate::tree::{Kind, Tree};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// Which content each regular file has.
pub(super) struct ContentIndex<'a> {
    deduped: &'a Deduped,
    content_of: HashMap<usize, usize>,
    unreadable: BTreeSet<usize>,
}

impl<'a> ContentIndex<'a> {
    /// Indexes the files of `deduped`'s contents.
    pub(super) fn new(deduped: &'a Deduped) -> Self {
        let content_of = deduped
            .contents
            .iter()
            .enumerate()
            .flat_map(|(c, content)| content.files.iter().map(move |&f| (f, c)))
            .collect();
        ContentIndex {
            deduped,
            content_of,
            unreadable: deduped.unreadable.iter().map(|u| u.0).collect(),
        }
    }

    /// The content of readable file `file`.
    pub(super) fn of(&self, file: usize) -> usize {
        self.content_of[&file]
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
    pub(super) entry_of: HashMap<usize, u32>,
}

impl DirWalk {
    /// Walks `tree` breadth-first, leaving out unreadable files.
    pub(super) fn new(tree: &Tree, contents: &ContentIndex<'_>) -> Self {
        let mut walk = DirWalk {
            entries: vec![0],
            dirs: Vec::new(),
            first_entry: Vec::new(),
            entry_of: HashMap::from([(0, 0)]),
        };
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
                walk.entry_of.insert(c, walk.entries.len() as u32);
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
    pub(super) of_entry: HashMap<usize, u32>,
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
        pieces: &[Vec<Piece>],
    ) -> Self {
        let others = classify(tree, walk, contents, pieces);
        let (chunk_order, shared_files) = chunk_order(tree, &others, contents);
        let mut entries = walk.dirs.clone();
        entries.extend(others.iter().map(|&(_, _, e)| e));
        let mut of_entry: HashMap<usize, u32> = HashMap::new();
        let mut of_file: HashMap<usize, u32> = HashMap::new();
        for (ino, &e) in entries.iter().enumerate() {
            of_entry.insert(e, ino as u32);
            if let Kind::File { file } = tree.entries[e].kind {
                of_file.insert(file, ino as u32);
            }
        }
        for &e in &walk.entries {
            if let Kind::File { file } = tree.entries[e].kind {
                of_entry.insert(e, of_file[&file]);
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
    pieces: &[Vec<Piece>],
) -> Vec<Other> {
    let rank = data_rank(pieces);
    let mut seen: HashSet<usize> = HashSet::new();
    let mut others: Vec<Other> = Vec::new();
    for &e in &walk.entries[1..] {
        let (class, key) = match tree.entries[e].kind {
            Kind::Dir { .. } => continue,
            Kind::Symlink { .. } => (Class::Symlink, 0),
            Kind::File { file } => {
                if !seen.insert(file) {
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

/// The rank of each content (indexed like `pieces`) in data order: by its
/// first block, contents without data last.
fn data_rank(pieces: &[Vec<Piece>]) -> Vec<usize> {
    let mut first_block: Vec<(u32, usize)> = pieces
        .iter()
        .enumerate()
        .map(|(c, p)| {
            let b = p.iter().find_map(|x| match x {
                Piece::Data { block, .. } => Some(*block),
                Piece::Hole(_) => None,
            });
            (b.unwrap_or(u32::MAX), c)
        })
        .collect();
    first_block.sort();
    let mut rank = vec![0; pieces.len()];
    for (r, (_, c)) in first_block.into_iter().enumerate() {
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
    let mut shared_index: HashMap<usize, u32> = HashMap::new();
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
                let next = shared_index.len() as u32;
                let s = *shared_index.entry(c).or_insert_with(|| {
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
