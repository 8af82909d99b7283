//! Stage 1 for an archive input: a tar or cpio (newc) stream, from a file
//! or standard input, plain or compressed with gzip, zstd or xz (told by
//! their magic numbers), becomes the same [`Tree`] a directory scan gives.
//! Owners, modes, times, devices, links and extended attributes come from
//! the archive.
//!
//! The stream is read once, in order. The later stages read each file's
//! contents more than once and in an order of their own, so file contents
//! (and only they) are spooled: each to a file of its own in a temporary
//! directory beside the image being written (on a disk, where a `$TMPDIR`
//! may be memory), which lives as long as the build; holes of sparse
//! entries stay holes there. Memory holds the tree, as for a directory.
//!
//! Names are made relative and confined to the image: a leading `/` and
//! `.` components are dropped and `..` goes up no further than the root.
//! A stream that ends early, or is corrupt, is an error.

mod cpio;
mod tar;

use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Entry, File, Kind, Time, Tree};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Whether `input` names an archive rather than a directory: `-` (standard
/// input) or anything but a directory.
pub fn is_archive(input: &Path) -> bool {
    input.as_os_str() == "-" || std::fs::metadata(input).is_ok_and(|m| !m.is_dir())
}

/// Reads the archive at `input` (`-`: standard input) into a tree.
pub fn scan_archive(
    input: &Path,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let name = if input.as_os_str() == "-" {
        PathBuf::from("standard input")
    } else {
        input.to_path_buf()
    };
    let raw: Box<dyn Read> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(input).map_err(|e| Error::io(input, e))?)
    };
    let spool = Spool::new(options.spool_dir.as_deref())?;
    let mut builder = Builder::new(options, filter, progress, spool);
    let stream =
        decompressed(BufReader::with_capacity(1 << 20, raw)).map_err(|e| Error::io(&name, e))?;
    let mut stream = BufReader::with_capacity(1 << 20, stream);
    let head = stream.fill_buf().map_err(|e| Error::io(&name, e))?;
    let read = if head.starts_with(b"070701") {
        cpio::read(&mut stream, &mut builder)
    } else {
        tar::read(&mut stream, &mut builder)
    };
    read.map_err(|e| match e {
        Error::Io { source, .. } => Error::io(&name, source),
        Error::Input(m) => Error::Input(format!("{}: {m}", name.display())),
        other => other,
    })?;
    Ok(builder.finish())
}

/// The stream behind its compression, told by the first bytes.
fn decompressed(mut input: BufReader<Box<dyn Read>>) -> std::io::Result<Box<dyn Read>> {
    let head = input.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(input))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(input)?)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input))
    } else {
        Box::new(input)
    })
}

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

/// The path of `name` inside the image: relative, `/`-separated, without
/// `.` components, `..` resolved but never above the root.
pub(crate) fn confined(name: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join(&b'/')
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
}

impl<'a> Builder<'a> {
    fn new(
        options: &'a ScanOptions,
        filter: Option<&'a Filter>,
        progress: &'a ScanProgress,
        spool: Spool,
    ) -> Self {
        let root = Entry {
            name: Vec::new(),
            parent: 0,
            kind: Kind::Dir {
                children: Vec::new(),
            },
            attrs: Attrs {
                mode: libc::S_IFDIR | 0o755,
                ..Attrs::default()
            },
            xattrs: Vec::new(),
        };
        Builder {
            options,
            filter,
            progress,
            spool,
            tree: Tree {
                entries: vec![root],
                files: Vec::new(),
            },
            index: HashMap::from([(Vec::new(), 0)]),
            excluded: HashMap::new(),
            left_out_files: HashMap::new(),
        }
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
                        children: Vec::new(),
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
            name: name.to_vec(),
            parent,
            kind,
            attrs,
            xattrs,
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
            Spool::empty(&self.tree.files[f].source);
            self.tree.files[f].source = source;
            self.tree.files[f].size = size;
        }
        Ok(())
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
                    source,
                    size,
                    path: path.clone(),
                    links: 0,
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
                    xattrs = first.xattrs.clone();
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
                children: Vec::new(),
            },
            MemberKind::File { source, size } => {
                self.progress.bytes.fetch_add(size, Ordering::Relaxed);
                self.tree.files.push(File {
                    source,
                    size,
                    path: path.clone(),
                    links: 1,
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
            MemberKind::Symlink(target) => Kind::Symlink { target },
            MemberKind::Device(rdev) => Kind::Device { rdev },
            MemberKind::Special => Kind::Special,
        };
        if let Some(&e) = self.index.get(&path) {
            let old = &mut self.tree.entries[e];
            match (&old.kind, &kind) {
                // A directory named again keeps what it holds.
                (Kind::Dir { .. }, Kind::Dir { .. }) => {}
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
            old.xattrs = xattrs;
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
    fn finish(self) -> Scanned {
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
                        let mut f = old.files[*file].clone();
                        f.path = Vec::new();
                        tree.files.push(f);
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
        for i in 0..tree.entries.len() {
            if let Kind::File { file } = tree.entries[i].kind {
                if tree.files[file].path.is_empty() {
                    tree.files[file].path = tree.path(i);
                }
            }
        }
        // Contents no entry names any more need no room in the spool.
        for (old_file, f) in old.files.iter().enumerate() {
            if !files.contains_key(&old_file) {
                Spool::empty(&f.source);
            }
        }
        if self.options.remove_empty_dirs {
            remove_empty_dirs(&mut tree);
        }
        Scanned {
            tree,
            warnings: Vec::new(),
            spool: Some(self.spool.dir),
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

/// Where file contents wait for the later stages: one file each in a
/// temporary directory.
pub(crate) struct Spool {
    dir: tempfile::TempDir,
    next: u64,
    buf: Vec<u8>,
}

impl Spool {
    /// A spool in a new directory inside `parent` (`$TMPDIR` if `None`).
    fn new(parent: Option<&Path>) -> Result<Self> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = tempfile::Builder::new()
            .prefix(".hoard-spool-")
            .tempdir_in(&parent)
            .map_err(|e| Error::io(&parent, e))?;
        Ok(Spool {
            dir,
            next: 0,
            buf: vec![0; 1 << 20],
        })
    }

    /// Copies exactly `size` bytes of `data` to a new spool file (zero
    /// pages as holes when `sparse`); returns its path. A stream that ends
    /// early is an error.
    pub(crate) fn store(
        &mut self,
        data: &mut dyn Read,
        size: u64,
        sparse: bool,
    ) -> Result<PathBuf> {
        let path = self.dir.path().join(self.next.to_string());
        self.next += 1;
        let io = |e| Error::io(&path, e);
        let mut out = std::fs::File::create(&path).map_err(io)?;
        let mut left = size;
        while left > 0 {
            let want = self
                .buf
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match data.read(&mut self.buf[..want]) {
                Ok(0) => {
                    return Err(Error::Input(format!(
                        "the archive ends inside a file ({} of {size} bytes read)",
                        size - left
                    )))
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::Input(format!("cannot read the archive: {e}"))),
            };
            let chunk = &self.buf[..n];
            if sparse && chunk.iter().all(|&b| b == 0) {
                out.seek(SeekFrom::Current(n as i64)).map_err(io)?;
            } else {
                out.write_all(chunk).map_err(io)?;
            }
            left -= n as u64;
        }
        out.set_len(size).map_err(io)?;
        Ok(path)
    }
}

impl Spool {
    /// Stores a sparse file given as its data `ranges` (offset, length),
    /// read from `data` back to back, and its size.
    pub(crate) fn store_ranges(
        &mut self,
        data: &mut dyn Read,
        ranges: &[(u64, u64)],
        size: u64,
    ) -> Result<PathBuf> {
        let path = self.dir.path().join(self.next.to_string());
        self.next += 1;
        let io = |e| Error::io(&path, e);
        let mut out = std::fs::File::create(&path).map_err(io)?;
        let mut end = 0u64;
        for &(offset, len) in ranges {
            if offset < end || offset.checked_add(len).is_none_or(|e| e > size) {
                return Err(Error::Input(
                    "sparse map out of order or out of range".into(),
                ));
            }
            out.seek(SeekFrom::Start(offset)).map_err(io)?;
            let copied = std::io::copy(&mut (&mut *data).take(len), &mut out).map_err(io)?;
            if copied != len {
                return Err(Error::Input(format!(
                    "the archive ends inside a file ({copied} of {len} bytes of a range read)"
                )));
            }
            end = offset + len;
        }
        out.set_len(size).map_err(io)?;
        Ok(path)
    }

    /// Empties the spool file at `path` (contents no entry names any more).
    fn empty(path: &Path) {
        // Only disk space is at stake: a failure changes nothing else.
        let _ = std::fs::File::create(path);
    }
}

/// A time from seconds and nanoseconds.
pub(crate) fn time(sec: i64, nsec: u32) -> Time {
    Time { sec, nsec }
}

#[cfg(test)]
mod tests {
    use super::confined;

    #[test]
    fn names_stay_inside_the_image() {
        assert_eq!(confined(b"/etc/passwd"), b"etc/passwd");
        assert_eq!(confined(b"./a/./b/"), b"a/b");
        assert_eq!(confined(b"../../x"), b"x");
        assert_eq!(confined(b"a/../../b"), b"b");
        assert_eq!(confined(b"a/b/../c"), b"a/c");
        assert_eq!(confined(b"./"), b"");
    }
}
