//! Layers (`--base`): the scanned tree cut down to what differs from a
//! stack of base images, so that the image written stacks on them with
//! overlayfs rules (see `hoard_reader::stack`):
//!
//! * new and changed entries are kept, with the directories above them;
//! * an entry of the base that is gone becomes a whiteout (a character
//!   device 0:0);
//! * with `opaque_dirs`, a directory none of whose base entries remain
//!   (deleted and made again) is marked opaque (`trusted.overlay.opaque=y`)
//!   instead, as OCI tools do: one mark however many entries it hid. Only
//!   readers that show extended attributes see the mark (hoard, and the
//!   kernel's overlayfs over hoard mounts; not DwarFS 0.15), and the
//!   kernel's overlayfs shows whiteouts inside an opaque directory, so
//!   the two are never mixed; by default every deletion is a whiteout,
//!   which every reader honours.
//!
//! A regular file is unchanged when the base has one at the same path
//! with the same owner, mode, time, attributes and contents, and the same
//! hard links: contents are compared byte for byte, or with `trust_mtime`
//! taken as equal when size and time are. Hard links are all-or-nothing:
//! if one name of a file changes, every name of it goes into the layer
//! (a layer cannot link to a file of another).
//!
//! With `metacopy`, a file (of one name) whose contents are the base's
//! but whose owner, mode, time or attributes changed is stored as those
//! alone: a sparse file of its size marked `trusted.overlay.metacopy`,
//! read with its contents from below by hoard stacks and by overlayfs
//! with `metacopy=on` (not by DwarFS 0.15, which shows no attributes).
//!
//! The layer's root records the stack it was made on
//! ([`hoard_reader::stack::BASE_XATTR`]), so that stacking it on other
//! images is refused.

use crate::metadata::{adjust, AttrOptions};
use crate::scratch::ScratchDir;
use crate::tree::{Attrs, Entry, Kind, Name, Source, Time, Tree};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use hoard_reader::stack::{BASE_XATTR, METACOPY_XATTR};
use hoard_reader::{FileKind, Stack, Stat, View};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thin_vec::ThinVec;

/// The extended attribute marking an opaque directory, and its value.
pub const OPAQUE: (&[u8], &[u8]) = (b"trusted.overlay.opaque", b"y");

/// What a layer is made against.
#[derive(Debug, Clone, Default)]
pub struct DeltaOptions {
    /// The base images, bottom first.
    pub bases: Vec<PathBuf>,
    /// Take files of equal size and modification time as unchanged,
    /// without reading them.
    pub trust_mtime: bool,
    /// Mark directories whose base entries are all gone opaque instead of
    /// whiting each entry out.
    pub opaque_dirs: bool,
    /// Use bases that do not stack (a layer not on the images below it).
    pub force_stack: bool,
    /// Write a delta layer: new data may be chunks of the bases' blocks
    /// (see [`crate::reference`]); it reads only on exactly these bases.
    pub refer_to_base: bool,
    /// Store a file whose contents are unchanged but whose attributes
    /// changed as attributes only (`trusted.overlay.metacopy`), its
    /// contents left to the base.
    pub metacopy: bool,
}

/// How the layer's tree was cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeltaCounts {
    /// Entries kept (changed, new, or a directory above one).
    pub kept: usize,
    /// Entries left out as unchanged.
    pub unchanged: usize,
    /// Whiteouts added.
    pub whiteouts: usize,
    /// Directories marked opaque.
    pub opaque: usize,
    /// Files stored as attributes only (metacopy).
    pub metacopy: usize,
}

/// What is decided about a regular file (all its names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileDecision {
    Unchanged,
    Changed,
    /// Same contents, other attributes: stored as a metacopy file.
    AttributesOnly,
}

/// What is decided about each entry of the scanned tree.
struct Cut<'a> {
    tree: &'a Tree,
    base: &'a dyn View,
    attrs: &'a AttrOptions,
    trust_mtime: bool,
    opaque_dirs: bool,
    metacopy: bool,
    keep: Vec<bool>,
    /// The regular files stored as attributes only.
    attributes_only: BTreeSet<usize>,
    /// Bytes compared so far.
    compared: &'a AtomicU64,
    /// The base's entry at the path of each regular file entry.
    file_base: Vec<Option<u64>>,
    /// Names to white out, per directory entry.
    whiteouts: HashMap<usize, Vec<Vec<u8>>>,
    opaque: BTreeSet<usize>,
}

/// Cuts `tree` down to what differs from `base` (see the module doc),
/// counting the bytes of file contents compared in `compared`.
pub fn subtract(
    tree: Tree,
    base: &Stack,
    options: &DeltaOptions,
    attrs: &AttrOptions,
    compared: &AtomicU64,
) -> Result<Layer> {
    let mut cut = Cut {
        tree: &tree,
        base,
        attrs,
        trust_mtime: options.trust_mtime,
        opaque_dirs: options.opaque_dirs,
        metacopy: options.metacopy,
        attributes_only: BTreeSet::new(),
        compared,
        keep: vec![false; tree.entries.len()],
        file_base: vec![None; tree.entries.len()],
        whiteouts: HashMap::new(),
        opaque: BTreeSet::new(),
    };
    cut.dir(0, Some(base.root()))?;
    cut.files()?;
    cut.keep_parents();
    let holes = if cut.attributes_only.is_empty() {
        None
    } else {
        Some(ScratchDir::new_in(&std::env::temp_dir(), "metacopy")?)
    };
    let (mut tree, counts) = cut.build(holes.as_ref().map(ScratchDir::path))?;
    let root = &mut tree.entries[0].xattrs;
    root.retain(|(n, _)| n != BASE_XATTR);
    root.push((BASE_XATTR.to_vec(), base.chain_id().into_bytes()));
    Ok(Layer {
        tree,
        counts,
        holes,
    })
}

/// A layer's tree and what it needs while it is built.
pub struct Layer {
    /// The tree to write.
    pub tree: Tree,
    /// How it was cut.
    pub counts: DeltaCounts,
    /// Where the sparse files standing for metacopy files' contents are;
    /// it must live as long as the build reads them.
    pub holes: Option<ScratchDir>,
}

fn base_error(e: hoard_reader::Error) -> Error {
    Error::Input(format!("base image: {e}"))
}

fn same_time(new: Time, base: hoard_reader::Time) -> bool {
    new.sec == base.sec && (base.nsec == 0 || new.nsec == base.nsec)
}

impl Cut<'_> {
    fn children(&self, e: usize) -> &[usize] {
        match &self.tree.entries[e].kind {
            Kind::Dir { children } => children,
            _ => &[],
        }
    }

    /// Keeps `e` and everything below it.
    fn keep_all(&mut self, e: usize) {
        self.keep[e] = true;
        for c in self.children(e).to_vec() {
            self.keep_all(c);
        }
    }

    /// Whether owner, mode, time and extended attributes of `e` are those
    /// of the base's `b`.
    fn same_attrs(&self, e: usize, b: u64, st: &Stat) -> Result<bool> {
        let entry = &self.tree.entries[e];
        let a: Attrs = adjust(&entry.attrs, self.attrs);
        if a.mode != st.mode || a.uid != st.uid || a.gid != st.gid || !same_time(a.mtime, st.mtime)
        {
            return Ok(false);
        }
        let mut mine: Vec<Xattr> = entry.xattrs.to_vec();
        mine.sort();
        let theirs = self.base.xattrs(b).map_err(base_error)?;
        Ok(mine == theirs)
    }

    /// Decides about the entries below directory `e`, whose base
    /// directory is `base` (none where the base has no directory there).
    fn dir(&mut self, e: usize, base: Option<u64>) -> Result<()> {
        let children = self.children(e).to_vec();
        let mut names = BTreeSet::new();
        for &c in &children {
            let name = self.tree.entries[c].name.clone();
            let b = match base {
                Some(d) => self.base.lookup(d, &name).map_err(base_error)?,
                None => None,
            };
            names.insert(name);
            let st = match b {
                Some(b) => Some(self.base.stat(b).map_err(base_error)?),
                None => None,
            };
            match (&self.tree.entries[c].kind, b, st) {
                (Kind::Dir { .. }, Some(b), Some(st)) if st.kind == FileKind::Directory => {
                    self.dir(c, Some(b))?;
                    if !self.same_attrs(c, b, &st)? {
                        self.keep[c] = true;
                    }
                }
                (Kind::Dir { .. }, ..) => self.keep_all(c),
                (Kind::File { .. }, b, _) => self.file_base[c] = b,
                (_, Some(b), Some(st)) => self.keep[c] = !self.same_other(c, b, &st)?,
                _ => self.keep[c] = true,
            }
        }
        let Some(d) = base else { return Ok(()) };
        let mut gone = Vec::new();
        let mut base_names = 0;
        self.base
            .list(d, 0, &mut |name, _, _| {
                base_names += 1;
                if !names.contains(name) {
                    gone.push(name.to_vec());
                }
                Ok(false)
            })
            .map_err(base_error)?;
        if !gone.is_empty() {
            self.keep[e] = true;
            if self.opaque_dirs && gone.len() == base_names {
                self.opaque.insert(e);
            } else {
                self.whiteouts.insert(e, gone);
            }
        }
        Ok(())
    }

    /// Whether a symlink, device, fifo or socket is the base's `b`.
    fn same_other(&self, e: usize, b: u64, st: &Stat) -> Result<bool> {
        let same = match &self.tree.entries[e].kind {
            Kind::Symlink { target } => {
                st.kind == FileKind::Symlink
                    && self.base.readlink(b).map_err(base_error)? == target[..]
            }
            Kind::Device { rdev } => {
                matches!(st.kind, FileKind::CharDevice | FileKind::BlockDevice) && st.rdev == *rdev
            }
            Kind::Special => matches!(st.kind, FileKind::Fifo | FileKind::Socket),
            _ => false,
        };
        Ok(same && self.same_attrs(e, b, st)?)
    }

    /// Decides about regular files, a whole hard-link group at a time.
    fn files(&mut self) -> Result<()> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.tree.files.len()];
        for (i, entry) in self.tree.entries.iter().enumerate() {
            if let Kind::File { file } = entry.kind {
                groups[file].push(i);
            }
        }
        let this = &*self;
        let decisions: Vec<FileDecision> = groups
            .par_iter()
            .enumerate()
            .map(|(f, names)| this.decide(f, names))
            .collect::<Result<_>>()?;
        for (f, (names, decision)) in groups.iter().zip(decisions).enumerate() {
            for &e in names {
                self.keep[e] = decision != FileDecision::Unchanged;
            }
            if decision == FileDecision::AttributesOnly {
                self.attributes_only.insert(f);
            }
        }
        Ok(())
    }

    /// How file `f` (named by `names`) differs from the base.
    fn decide(&self, f: usize, names: &[usize]) -> Result<FileDecision> {
        use FileDecision::*;
        let Some(first) = names.first() else {
            return Ok(Unchanged);
        };
        let Some(b) = self.file_base[*first] else {
            return Ok(Changed);
        };
        if names.iter().any(|&e| self.file_base[e] != Some(b)) {
            return Ok(Changed);
        }
        let st = self.base.stat(b).map_err(base_error)?;
        let file = &self.tree.files[f];
        if st.kind != FileKind::Regular || st.nlink as usize != names.len() || st.size != file.size
        {
            return Ok(Changed);
        }
        let same_attrs = self.same_attrs(*first, b, &st)?;
        if same_attrs && self.trust_mtime {
            return Ok(Unchanged);
        }
        let may_copy_attributes = self.metacopy && names.len() == 1;
        if !same_attrs && !may_copy_attributes {
            return Ok(Changed);
        }
        Ok(match (self.same_contents(f, b)?, same_attrs) {
            (false, _) => Changed,
            (true, true) => Unchanged,
            (true, false) => AttributesOnly,
        })
    }

    /// Whether file `f` holds the bytes of the base's `b` (of equal size).
    fn same_contents(&self, f: usize, b: u64) -> Result<bool> {
        let at = self.base.locate(b).map_err(base_error)?;
        let source = self.tree.source(f);
        let mut src = std::fs::File::open(&source).map_err(|e| Error::io(&source, e))?;
        let (mut mine, mut theirs) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
        let mut offset = 0u64;
        loop {
            let n = read_full(&mut src, &mut mine).map_err(|e| Error::io(&source, e))?;
            let m = at
                .fs
                .read(at.ino, offset, &mut theirs[..n.max(1)])
                .map_err(base_error)?;
            if n == 0 {
                return Ok(m == 0);
            }
            if m != n || mine[..n] != theirs[..n] {
                return Ok(false);
            }
            offset += n as u64;
            self.compared.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Keeps every directory above a kept entry.
    fn keep_parents(&mut self) {
        self.keep[0] = true;
        for e in 1..self.keep.len() {
            if self.keep[e] {
                let mut p = self.tree.entries[e].parent;
                while !self.keep[p] {
                    self.keep[p] = true;
                    p = self.tree.entries[p].parent;
                }
            }
        }
    }

    /// The layer's tree: the kept entries, whiteouts, opaque and
    /// metacopy marks; metacopy files' contents are sparse files made in
    /// `holes`.
    fn build(self, holes: Option<&Path>) -> Result<(Tree, DeltaCounts)> {
        let tree = self.tree;
        let mut counts = DeltaCounts::default();
        let mut index = vec![usize::MAX; tree.entries.len()];
        for (i, kept) in self.keep.iter().enumerate() {
            if *kept {
                index[i] = counts.kept;
                counts.kept += 1;
            } else {
                counts.unchanged += 1;
            }
        }
        let mut out = Tree {
            root: tree.root.clone(),
            ..Tree::default()
        };
        let mut file_index: HashMap<usize, usize> = HashMap::new();
        for (i, entry) in tree.entries.iter().enumerate() {
            if !self.keep[i] {
                continue;
            }
            let kind = match &entry.kind {
                Kind::Dir { .. } => Kind::Dir {
                    children: ThinVec::new(),
                },
                Kind::File { file } => {
                    let next = out.files.len();
                    let f = *file_index.entry(*file).or_insert(next);
                    if f == next {
                        let mut copy = tree.files[*file].clone();
                        if let Source::Entry(_) = copy.source {
                            // Entry `i` names the same file, at the same
                            // path in the new tree.
                            copy.source = Source::Entry(index[i] as u32);
                        }
                        if let (true, Some(dir)) = (self.attributes_only.contains(file), holes) {
                            // Absolute: a relative source lies under the tree's root.
                            let hole = dir.join(file.to_string());
                            let hole =
                                std::path::absolute(&hole).map_err(|e| Error::io(&hole, e))?;
                            let io = |e| Error::io(&hole, e);
                            std::fs::File::create(&hole)
                                .and_then(|f| f.set_len(copy.size))
                                .map_err(io)?;
                            copy.source = Source::path(hole);
                        }
                        out.files.push(copy);
                    }
                    Kind::File { file: f }
                }
                other => other.clone(),
            };
            let mut xattrs = entry.xattrs.clone();
            if let Kind::File { file } = entry.kind {
                if self.attributes_only.contains(&file) {
                    xattrs.retain(|(n, _)| n != METACOPY_XATTR);
                    xattrs.push((METACOPY_XATTR.to_vec(), Vec::new()));
                    counts.metacopy += 1;
                }
            }
            if self.opaque.contains(&i) {
                xattrs.retain(|(n, _)| n != OPAQUE.0);
                xattrs.push((OPAQUE.0.to_vec(), OPAQUE.1.to_vec()));
                counts.opaque += 1;
            }
            out.entries.push(Entry {
                name: entry.name.clone(),
                parent: index[entry.parent],
                kind,
                attrs: entry.attrs,
                xattrs,
            });
        }
        for (&dir, names) in &self.whiteouts {
            let time = tree.entries[dir].attrs.mtime;
            for name in names {
                out.entries.push(Entry {
                    name: Name::from_slice(name),
                    parent: index[dir],
                    kind: Kind::Device { rdev: 0 },
                    attrs: Attrs {
                        mode: libc::S_IFCHR,
                        atime: time,
                        mtime: time,
                        ctime: time,
                        ..Attrs::default()
                    },
                    xattrs: ThinVec::new(),
                });
                counts.whiteouts += 1;
            }
        }
        for f in &mut out.files {
            f.links = 0;
        }
        let mut children: Vec<ThinVec<usize>> = vec![ThinVec::new(); out.entries.len()];
        for (i, e) in out.entries.iter().enumerate().skip(1) {
            children[e.parent].push(i);
            if let Kind::File { file } = e.kind {
                out.files[file].links += 1;
            }
        }
        let names: Vec<Name> = out.entries.iter().map(|e| e.name.clone()).collect();
        for (i, mut list) in children.into_iter().enumerate() {
            if let Kind::Dir { children } = &mut out.entries[i].kind {
                list.sort_by(|a, b| names[*a].cmp(&names[*b]));
                *children = list;
            }
        }
        Ok((out, counts))
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(src: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
