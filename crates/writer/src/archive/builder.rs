//! The tree of an archive, built member by member in stream order.

use super::confined;
use super::spool::Spool;
use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Entry, File, Kind, Name, Source, Tree};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use thin_vec::ThinVec;

/// An entry as an archive describes it.
pub(crate) struct Member {
    /// Its name, as stored.
    pub(crate) path: Vec<u8>,
    /// What it is; files are spooled by the caller.
    pub(crate) kind: MemberKind,
    pub(crate) attrs: Attrs,
    pub(crate) xattrs: Vec<Xattr>,
}

/// What a member is.
pub(crate) enum MemberKind {
    Dir,
    /// A regular file: its spooled contents and size.
    File {
        source: PathBuf,
        size: u64,
    },
    /// Another name for the file at this (stored) path.
    HardLink(Vec<u8>),
    Symlink(Vec<u8>),
    Device(u64),
    Special,
}

/// Builds the tree from members in stream order.
pub(crate) struct Builder<'a> {
    options: &'a ScanOptions,
    filter: Option<&'a Filter>,
    progress: &'a ScanProgress,
    pub(crate) spool: Spool,
    tree: Tree,
    /// Entry of each path.
    index: HashMap<Vec<u8>, usize>,
    /// Whether each directory path is excluded by the filter.
    excluded: HashMap<Vec<u8>, bool>,
    /// The file of each regular file member the options left out.
    left_out_files: HashMap<Vec<u8>, usize>,
    /// What was read but could not be kept, one line each.
    warnings: Vec<String>,
    /// A member whose path is taken (but for a directory by a directory)
    /// is an error instead of a replacement.
    disjoint: bool,
}

impl<'a> Builder<'a> {
    pub(crate) fn new(
        options: &'a ScanOptions,
        filter: Option<&'a Filter>,
        progress: &'a ScanProgress,
        spool: Spool,
    ) -> Self {
        let root = Entry {
            name: Name::new(),
            parent: 0,
            kind: Kind::Dir {
                children: ThinVec::new(),
            },
            attrs: Attrs {
                mode: libc::S_IFDIR | 0o755,
                ..Attrs::default()
            },
            xattrs: ThinVec::new(),
        };
        Builder {
            options,
            filter,
            progress,
            spool,
            tree: Tree {
                entries: vec![root],
                files: Vec::new(),
                // Every source is a spooled file's absolute path.
                root: PathBuf::new(),
            },
            index: HashMap::from([(Vec::new(), 0)]),
            excluded: HashMap::new(),
            left_out_files: HashMap::new(),
            warnings: Vec::new(),
            disjoint: false,
        }
    }

    /// Makes a member whose path is taken an error (the trees added are
    /// to be disjoint), unless both are directories.
    pub(crate) fn refuse_replacing(&mut self) {
        self.disjoint = true;
    }

    /// Whether the options leave out `path` (a directory when `is_dir`)
    /// or one of the directories above it.
    fn left_out(&mut self, path: &[u8], is_dir: bool) -> bool {
        if let Some(only) = &self.options.only {
            if !only.contains(path) {
                return true;
            }
        }
        let Some(filter) = self.filter else {
            return false;
        };
        for (i, &b) in path.iter().enumerate() {
            if b == b'/' {
                let dir = &path[..i];
                let out = match self.excluded.get(dir) {
                    Some(&o) => o,
                    None => {
                        let o = !filter.includes(dir, true);
                        self.excluded.insert(dir.to_vec(), o);
                        o
                    }
                };
                if out {
                    return true;
                }
            }
        }
        !filter.includes(path, is_dir)
    }

    /// The directory entry at `path`, made (mode 0755, owner 0, time 0)
    /// with those above it when the archive has not named it yet.
    fn dir(&mut self, path: &[u8]) -> Result<usize> {
        let mut e = 0;
        let mut end = 0;
        while end < path.len() {
            let next = path[end..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(path.len(), |i| end + i);
            let prefix = &path[..next];
            e = match self.index.get(prefix) {
                Some(&d) if matches!(self.tree.entries[d].kind, Kind::Dir { .. }) => d,
                Some(_) => {
                    return Err(Error::Input(format!(
                        "'{}' is used as a directory but is not one",
                        String::from_utf8_lossy(prefix)
                    )))
                }
                None => {
                    let attrs = Attrs {
                        mode: libc::S_IFDIR | 0o755,
                        ..Attrs::default()
                    };
                    let name = &path[end..next];
                    let kind = Kind::Dir {
                        children: ThinVec::new(),
                    };
                    self.push(e, name, kind, attrs, Vec::new(), prefix)
                }
            };
            end = next + 1;
        }
        Ok(e)
    }

    fn push(
        &mut self,
        parent: usize,
        name: &[u8],
        kind: Kind,
        attrs: Attrs,
        xattrs: Vec<Xattr>,
        path: &[u8],
    ) -> usize {
        let e = self.tree.entries.len();
        self.tree.entries.push(Entry {
            name: Name::from_slice(name),
            parent,
            kind,
            attrs,
            xattrs: xattrs.into(),
        });
        if let Kind::Dir { children } = &mut self.tree.entries[parent].kind {
            children.push(e);
        }
        self.index.insert(path.to_vec(), e);
        e
    }

    /// Gives the regular file at (stored) path `first` the contents
    /// `source` of `size` bytes (cpio stores a linked file's data with one
    /// of its links, not always the first).
    pub(crate) fn replace_contents(
        &mut self,
        first: &[u8],
        source: PathBuf,
        size: u64,
    ) -> Result<()> {
        let path = confined(first);
        let file = self
            .index
            .get(&path)
            .and_then(|&e| match self.tree.entries[e].kind {
                Kind::File { file } => Some(file),
                _ => None,
            });
        if let Some(f) = file {
            self.progress.bytes.fetch_add(size, Ordering::Relaxed);
            if let Some(old) = self.tree.files[f].source.as_path() {
                Spool::empty(old);
            }
            self.tree.files[f].source = Source::path(source);
            self.tree.files[f].size = size;
        }
        Ok(())
    }

    /// Notes something the archive holds that the image will not.
    pub(crate) fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Adds one member (a later member of the same path replaces an
    /// earlier one, as when unpacking).
    pub(crate) fn add(&mut self, m: Member) -> Result<()> {
        let path = confined(&m.path);
        let is_dir = matches!(m.kind, MemberKind::Dir);
        if path.is_empty() && !is_dir {
            return Err(Error::Input(format!(
                "'{}' names the root, which must be a directory",
                String::from_utf8_lossy(&m.path)
            )));
        }
        let wanted = match m.kind {
            MemberKind::Device(_) => self.options.with_devices,
            MemberKind::Special => self.options.with_specials,
            _ => true,
        };
        if !path.is_empty() && (!wanted || self.left_out(&path, is_dir)) {
            if let MemberKind::File { source, size } = m.kind {
                // Kept aside: a hard link the options keep may name it.
                self.tree.files.push(File {
                    source: Source::path(source),
                    size,
                    links: 0,
                    allocated: false,
                });
                self.left_out_files.insert(path, self.tree.files.len() - 1);
            }
            return Ok(());
        }
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        let (mut attrs, mut xattrs) = (m.attrs, m.xattrs);
        if let MemberKind::HardLink(target) = &m.kind {
            // One inode: its attributes are the first link's, unless this
            // member says more (tar writes attributes with the first only).
            if let Some(&e) = self.index.get(&confined(target)) {
                let first = &self.tree.entries[e];
                attrs = first.attrs;
                if xattrs.is_empty() {
                    xattrs = first.xattrs.to_vec();
                }
            }
        }
        if self.options.no_xattrs {
            xattrs.clear();
        }
        if let Some(re) = &self.options.xattr_filter {
            xattrs.retain(|(n, _)| re.is_match(&String::from_utf8_lossy(n)));
        }
        let kind = match m.kind {
            MemberKind::Dir => Kind::Dir {
                children: ThinVec::new(),
            },
            MemberKind::File { source, size } => {
                self.progress.bytes.fetch_add(size, Ordering::Relaxed);
                self.tree.files.push(File {
                    source: Source::path(source),
                    size,
                    links: 1,
                    allocated: false,
                });
                Kind::File {
                    file: self.tree.files.len() - 1,
                }
            }
            MemberKind::HardLink(target) => {
                let target = confined(&target);
                let file = self
                    .index
                    .get(&target)
                    .and_then(|&e| match self.tree.entries[e].kind {
                        Kind::File { file } => Some(file),
                        _ => None,
                    })
                    .or_else(|| self.left_out_files.get(&target).copied())
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "'{}' is a hard link to '{}', which is not an earlier regular file",
                            String::from_utf8_lossy(&path),
                            String::from_utf8_lossy(&target)
                        ))
                    })?;
                self.tree.files[file].links += 1;
                Kind::File { file }
            }
            MemberKind::Symlink(target) => Kind::Symlink {
                target: target.into(),
            },
            MemberKind::Device(rdev) => Kind::Device { rdev },
            MemberKind::Special => Kind::Special,
        };
        if let Some(&e) = self.index.get(&path) {
            let old = &mut self.tree.entries[e];
            match (&old.kind, &kind) {
                // A directory named again keeps what it holds.
                (Kind::Dir { .. }, Kind::Dir { .. }) => {}
                _ if self.disjoint => {
                    return Err(Error::Input(format!(
                        "'{}' is in more than one of the trees",
                        String::from_utf8_lossy(&path)
                    )))
                }
                (Kind::Dir { children }, _) if !children.is_empty() => {
                    return Err(Error::Input(format!(
                        "'{}' replaces a directory that is not empty",
                        String::from_utf8_lossy(&path)
                    )))
                }
                _ => {
                    if let Kind::File { file } = old.kind {
                        self.tree.files[file].links -= 1;
                    }
                    old.kind = kind;
                }
            }
            old.attrs = attrs;
            old.xattrs = xattrs.into();
            return Ok(());
        }
        let (parent_path, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&path[..i], &path[i + 1..]),
            None => (&b""[..], &path[..]),
        };
        let parent = self.dir(parent_path)?;
        self.push(parent, name, kind, attrs, xattrs, &path);
        Ok(())
    }

    /// The tree, numbered as a directory scan numbers it (entries in
    /// depth-first order, each directory's sorted by name, files in the
    /// order of their first entry), so that an archive and the directory
    /// it was made from give the same image. Files no entry names any
    /// more (replaced by later members) are left out, and with
    /// `--remove-empty-dirs` directories that end up empty.
    pub(crate) fn finish(self) -> Scanned {
        let old = self.tree;
        let mut tree = Tree::default();
        let mut files: HashMap<usize, usize> = HashMap::new();
        // (old entry, new parent); children are pushed in reverse so that
        // they come off the stack in name order.
        let mut stack = vec![(0usize, 0usize)];
        while let Some((e, parent)) = stack.pop() {
            let index = tree.entries.len();
            let mut entry = old.entries[e].clone();
            entry.parent = parent;
            match &mut entry.kind {
                Kind::Dir { children } => {
                    let mut sorted = std::mem::take(children);
                    sorted.sort_by(|&a, &b| old.entries[a].name.cmp(&old.entries[b].name));
                    stack.extend(sorted.into_iter().rev().map(|c| (c, index)));
                }
                Kind::File { file } => {
                    *file = *files.entry(*file).or_insert_with(|| {
                        tree.files.push(old.files[*file].clone());
                        tree.files.len() - 1
                    });
                }
                _ => {}
            }
            tree.entries.push(entry);
            if index != 0 {
                if let Kind::Dir { children } = &mut tree.entries[parent].kind {
                    children.push(index);
                }
            }
        }
        // Contents no entry names any more need no room in the spool.
        for (old_file, f) in old.files.iter().enumerate() {
            if !files.contains_key(&old_file) {
                if let Some(spooled) = f.source.as_path() {
                    Spool::empty(spooled);
                }
            }
        }
        if self.options.remove_empty_dirs {
            remove_empty_dirs(&mut tree);
        }
        Scanned {
            tree,
            warnings: self.warnings,
            spool: self.spool.into_dir(),
            container_config: None,
        }
    }
}

/// Leaves out directories that hold nothing but empty directories,
/// deepest first (children always come after their parent).
fn remove_empty_dirs(tree: &mut Tree) {
    let mut empty = vec![false; tree.entries.len()];
    for e in (0..tree.entries.len()).rev() {
        if let Kind::Dir { children } = &mut tree.entries[e].kind {
            children.retain(|&c| !empty[c]);
            empty[e] = e != 0 && children.is_empty();
        }
    }
}
