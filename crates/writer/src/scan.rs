//! Stage 1: walk the input directory (subdirectories in parallel) and build
//! the [`Tree`]. Nothing is read but directory listings, `lstat` and the
//! extended attributes (`llistxattr`, then `lgetxattr` for each name the
//! options select).
//!
//! Each directory is opened once, and its entries are looked up relative
//! to it (`statx` and `readlinkat` on the open directory): a path from the
//! root would be walked again, one name at a time, for every call.
//!
//! Unreadable or vanishing entries (and regular files the user may not
//! read) are reported as warnings and left out;
//! the image stays valid. Hard links between regular files become one
//! [`File`] named by several entries.

use crate::filter::Filter;
use crate::tree::{Attrs, Entry, File, Kind, Name, Source, Time, Tree};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use rayon::prelude::*;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use thin_vec::ThinVec;

/// What to include while scanning.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Include character and block devices.
    pub with_devices: bool,
    /// Include fifos and sockets.
    pub with_specials: bool,
    /// Leave out directories that end up empty (after filtering).
    pub remove_empty_dirs: bool,
    /// Files to leave out by identity (device, inode): the image being
    /// written, when it lies inside the input.
    pub exclude: Vec<(u64, u64)>,
    /// Only these paths (relative to the input, `/`-separated) and the
    /// directories leading to them (`--input-list`).
    pub only: Option<InputList>,
    /// Leave out extended attributes (`--no-xattrs`).
    pub no_xattrs: bool,
    /// Keep only the extended attributes whose names match
    /// (`--xattr-filter`).
    pub xattr_filter: Option<regex::Regex>,
    /// Where an archive input's file contents are spooled (`$TMPDIR` when
    /// `None`; `create` uses the image's directory).
    pub spool_dir: Option<PathBuf>,
    /// For an archive input: keep the members that can be read and warn
    /// about the others, rather than fail (`--continue-on-error`).
    pub continue_on_error: bool,
}

/// Parses a `--xattr-filter` pattern (a regular expression the names of
/// the attributes to keep must match).
pub fn xattr_filter(pattern: &str) -> Result<regex::Regex> {
    regex::Regex::new(pattern).map_err(|e| {
        // The library's message spans lines; its last one says what is wrong.
        let text = e.to_string();
        let why = text.lines().last().unwrap_or_default().trim();
        Error::Input(format!("--xattr-filter '{pattern}': {why}"))
    })
}

/// The paths named by `--input-list`, with every directory above them.
#[derive(Debug, Clone, Default)]
pub struct InputList {
    paths: std::collections::HashSet<Vec<u8>>,
}

impl InputList {
    /// Reads one path per line (relative to the input directory; a
    /// leading `./` or `/` is ignored, empty lines are skipped).
    pub fn parse(text: &[u8]) -> Self {
        let mut paths = std::collections::HashSet::new();
        for line in text.split(|&b| b == b'\n') {
            let mut p = line.strip_suffix(b"\r").unwrap_or(line);
            while let Some(rest) = p.strip_prefix(b"./").or_else(|| p.strip_prefix(b"/")) {
                p = rest;
            }
            let p = p.strip_suffix(b"/").unwrap_or(p);
            if p.is_empty() {
                continue;
            }
            for (i, &b) in p.iter().enumerate() {
                if b == b'/' {
                    paths.insert(p[..i].to_vec());
                }
            }
            paths.insert(p.to_vec());
        }
        InputList { paths }
    }

    pub(crate) fn contains(&self, path: &[u8]) -> bool {
        self.paths.contains(path)
    }
}

/// Live counters of a scan, for progress display.
#[derive(Debug, Default)]
pub struct ScanProgress {
    /// Entries seen so far.
    pub entries: AtomicU64,
    /// Bytes in regular files seen so far.
    pub bytes: AtomicU64,
}

/// The result of a scan: the tree and what could not be read.
#[derive(Debug)]
pub struct Scanned {
    /// The tree.
    pub tree: Tree,
    /// One line per entry that was left out because of an error.
    pub warnings: Vec<String>,
    /// Where an archive input's file contents were spooled; it must live
    /// as long as the build reads them.
    pub spool: Option<crate::scratch::ScratchDir>,
    /// The config of the container image read, kept in the image's
    /// metadata ([`hoard_format::metadata::Metadata::container_config`]).
    pub container_config: Option<Vec<u8>>,
}

/// A scanned directory entry, before it is numbered.
struct Node {
    name: OsString,
    meta: Stat,
    /// Contents, for directories.
    children: Option<Vec<Node>>,
    /// Target, for symlinks.
    target: Option<Vec<u8>>,
    /// Extended attributes.
    xattrs: Vec<Xattr>,
}

/// What the tree keeps of an entry's `lstat`: half the size of std's
/// `Metadata`, for every entry of the tree while it is scanned.
struct Stat {
    file_type: FileType,
    attrs: Attrs,
    dev: u64,
    ino: u64,
    rdev: u64,
    nlink: u64,
    len: u64,
    /// At least `len` bytes are allocated to it.
    allocated: bool,
}

/// The `statx` fields a [`Stat`] keeps.
const STATX_FIELDS: StatxFlags = StatxFlags::BASIC_STATS;

impl Stat {
    /// `name` in directory `dir`, not following a symlink; `dir` may be
    /// the current directory and `name` a whole path.
    fn at(dir: BorrowedFd<'_>, name: &Path, follow: bool) -> std::io::Result<Self> {
        let flags = if follow {
            AtFlags::empty()
        } else {
            AtFlags::SYMLINK_NOFOLLOW
        };
        let x = rustix::fs::statx(dir, name, flags, STATX_FIELDS)?;
        let stamp = |t: rustix::fs::StatxTimestamp| time(t.tv_sec, i64::from(t.tv_nsec));
        let mode = u32::from(x.stx_mode);
        Ok(Stat {
            file_type: FileType::from_raw_mode(mode),
            attrs: Attrs {
                mode,
                uid: x.stx_uid,
                gid: x.stx_gid,
                atime: stamp(x.stx_atime),
                mtime: stamp(x.stx_mtime),
                ctime: stamp(x.stx_ctime),
            },
            dev: rustix::fs::makedev(x.stx_dev_major, x.stx_dev_minor),
            ino: x.stx_ino,
            rdev: rustix::fs::makedev(x.stx_rdev_major, x.stx_rdev_minor),
            nlink: u64::from(x.stx_nlink),
            len: x.stx_size,
            allocated: x.stx_blocks.saturating_mul(512) >= x.stx_size,
        })
    }

    fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }

    fn is_file(&self) -> bool {
        self.file_type == FileType::RegularFile
    }

    fn is_device(&self) -> bool {
        matches!(
            self.file_type,
            FileType::CharacterDevice | FileType::BlockDevice
        )
    }
}

/// Opens directory `name` in `dir` (or the path `name`) for listing,
/// following a symlink in its last name only if `follow`.
fn open_dir(dir: BorrowedFd<'_>, name: &Path, follow: bool) -> std::io::Result<std::fs::File> {
    let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?.into())
}

/// Bytes of directory entries read at a time.
const READ_NAMES_BUFFER: usize = 32 << 10;

/// The names in the open directory `dir`, but `.` and `..`.
fn read_names(dir: &std::fs::File) -> std::io::Result<Vec<OsString>> {
    // Read on the directory's own descriptor: a stream of its own would
    // take another descriptor (a `dup` and a `close`) per directory. The
    // buffer is on the heap: the walk recurses once a directory level, and
    // 32 KiB of stack a level overflowed a thread's stack on a tree 100
    // levels deep.
    let mut buf = Vec::with_capacity(READ_NAMES_BUFFER);
    let mut entries = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
    let mut names = Vec::new();
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
    Ok(names)
}

impl Node {
    /// The entries and regular files in this node and below it.
    fn count(&self) -> (usize, usize) {
        let own = (1, usize::from(self.meta.is_file()));
        self.children.iter().flatten().fold(own, |(e, f), child| {
            let (ce, cf) = child.count();
            (e + ce, f + cf)
        })
    }
}

struct Walker<'a> {
    options: &'a ScanOptions,
    filter: Option<&'a Filter>,
    progress: &'a ScanProgress,
    warnings: Mutex<Vec<String>>,
}

impl Walker<'_> {
    fn warn(&self, path: &Path, e: impl std::fmt::Display) {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{}: {e}", path.display()));
    }

    /// Lists the open directory `dir` at `path` (image path `rel`),
    /// recursing in parallel.
    fn list(&self, dir: &std::fs::File, path: &Path, rel: &[u8]) -> Vec<Node> {
        let mut found = match read_names(dir) {
            Ok(names) => names,
            Err(e) => {
                self.warn(path, e);
                return Vec::new();
            }
        };
        found.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        found
            .into_par_iter()
            .filter_map(|name| self.node(dir, path, rel, name))
            .collect()
    }

    /// The extended attributes the options select of the open directory
    /// `dir`, or else of `path`, not following a symlink. A file system
    /// without them gives none; other errors are warnings.
    fn xattrs(&self, dir: Option<&std::fs::File>, path: &Path) -> Vec<Xattr> {
        use xattr::FileExt;
        if self.options.no_xattrs {
            return Vec::new();
        }
        let unsupported = |e: &std::io::Error| e.raw_os_error() == Some(libc::EOPNOTSUPP);
        let names = match dir.map_or_else(|| xattr::list(path), |d| d.list_xattr()) {
            Ok(n) => n,
            Err(e) if unsupported(&e) => return Vec::new(),
            Err(e) => {
                self.warn(path, format_args!("extended attributes: {e}"));
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for name in names {
            let selected = self
                .options
                .xattr_filter
                .as_ref()
                .is_none_or(|re| re.is_match(&name.to_string_lossy()));
            if !selected {
                continue;
            }
            let value = dir.map_or_else(|| xattr::get(path, &name), |d| d.get_xattr(&name));
            match value {
                Ok(Some(value)) => out.push((name.into_vec(), value)),
                // Removed since it was listed.
                Ok(None) => {}
                Err(e) => self.warn(
                    path,
                    format_args!("extended attribute {}: {e}", name.to_string_lossy()),
                ),
            }
        }
        out
    }

    /// Entry `name` of the open directory `dir` (at `dir_path`, image path
    /// `dir_rel`), unless it is left out.
    fn node(
        &self,
        dir: &std::fs::File,
        dir_path: &Path,
        dir_rel: &[u8],
        name: OsString,
    ) -> Option<Node> {
        let mut rel = dir_rel.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.as_bytes());
        // Before the stat: a shard's list names a small part of a tree
        // whose directories it all visits.
        if let Some(only) = &self.options.only {
            if !only.contains(&rel) {
                return None;
            }
        }
        let path = dir_path.join(&name);
        let meta = match Stat::at(dir.as_fd(), Path::new(&name), false) {
            Ok(m) => m,
            Err(e) => {
                self.warn(&path, e);
                return None;
            }
        };
        let ft = meta.file_type;
        let special = matches!(ft, FileType::Fifo | FileType::Socket);
        if meta.is_device() && !self.options.with_devices
            || special && !self.options.with_specials
            || self.options.exclude.contains(&(meta.dev, meta.ino))
        {
            return None;
        }
        if let Some(f) = self.filter {
            if !f.includes(&rel, meta.is_dir()) {
                return None;
            }
        }
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        let (mut children, mut target) = (None, None);
        let xattrs = if meta.is_dir() {
            let (xattrs, listed) = match open_dir(dir.as_fd(), Path::new(&name), false) {
                Ok(sub) => (self.xattrs(Some(&sub), &path), self.list(&sub, &path, &rel)),
                // Kept, with nothing in it, as a directory that cannot
                // be listed.
                Err(e) => {
                    self.warn(&path, e);
                    (self.xattrs(None, &path), Vec::new())
                }
            };
            if listed.is_empty() && self.options.remove_empty_dirs {
                return None;
            }
            children = Some(listed);
            xattrs
        } else {
            if ft == FileType::Symlink {
                match rustix::fs::readlinkat(dir.as_fd(), Path::new(&name), Vec::new()) {
                    Ok(t) => target = Some(t.into_bytes()),
                    Err(e) => {
                        self.warn(&path, e);
                        return None;
                    }
                }
            } else if meta.is_file() {
                // Found readable here, where the name is one step away,
                // the file is not opened again until its data is read.
                let readable = rustix::fs::Access::READ_OK;
                let checked = rustix::fs::accessat(dir, &name, readable, AtFlags::EACCESS);
                if let Err(e) = checked {
                    self.warn(&path, std::io::Error::from(e));
                    return None;
                }
                self.progress.bytes.fetch_add(meta.len, Ordering::Relaxed);
            }
            self.xattrs(None, &path)
        };
        Some(Node {
            name,
            meta,
            children,
            target,
            xattrs,
        })
    }
}

fn time(sec: i64, nsec: i64) -> Time {
    Time {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

/// Numbers the scanned nodes into a [`Tree`], joining hard links.
#[derive(Default)]
struct Builder {
    tree: Tree,
    links: HashMap<(u64, u64), usize>,
}

impl Builder {
    fn add(&mut self, node: Node, parent: usize) -> usize {
        let index = self.tree.entries.len();
        let ft = node.meta.file_type;
        let kind = if node.meta.is_dir() {
            Kind::Dir {
                children: ThinVec::new(),
            }
        } else if ft == FileType::Symlink {
            Kind::Symlink {
                target: node.target.map(ThinVec::from).unwrap_or_default(),
            }
        } else if node.meta.is_file() {
            Kind::File {
                file: self.file(&node, index),
            }
        } else if node.meta.is_device() {
            Kind::Device {
                rdev: node.meta.rdev,
            }
        } else {
            Kind::Special
        };
        self.tree.entries.push(Entry {
            name: Name::from_slice(node.name.as_bytes()),
            parent,
            kind,
            attrs: node.meta.attrs,
            xattrs: node.xattrs.into(),
        });
        if let Some(children) = node.children {
            // Not `collect`ed from `children`: that would keep the nodes'
            // allocation (some 300 bytes per entry) as the list of ids.
            let mut ids = ThinVec::with_capacity(children.len());
            for child in children {
                ids.push(self.add(child, index));
            }
            self.tree.entries[index].kind = Kind::Dir { children: ids };
        }
        index
    }

    /// The file index for regular file `node` (entry `entry`), shared by
    /// its hard links; it is read where the tree has its first entry.
    fn file(&mut self, node: &Node, entry: usize) -> usize {
        let key = (node.meta.dev, node.meta.ino);
        if node.meta.nlink > 1 {
            if let Some(&f) = self.links.get(&key) {
                self.tree.files[f].links += 1;
                return f;
            }
        }
        let f = self.tree.files.len();
        self.tree.files.push(File {
            source: Source::Entry(u32::try_from(entry).expect("under 4 billion entries")),
            size: node.meta.len,
            links: 1,
            allocated: node.meta.allocated,
        });
        if node.meta.nlink > 1 {
            self.links.insert(key, f);
        }
        f
    }
}

/// Scans the directory `root` into a tree.
pub fn scan(
    root: &Path,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let cwd = rustix::fs::CWD;
    let meta = Stat::at(cwd, root, true).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::Input(format!("{}: not a directory", root.display())));
    }
    let dir = open_dir(cwd, root, true).map_err(|e| Error::io(root, e))?;
    let walker = Walker {
        options,
        filter,
        progress,
        warnings: Mutex::new(Vec::new()),
    };
    let xattrs = walker.xattrs(Some(&dir), root);
    let children = walker.list(&dir, root, b"");
    drop(dir);
    let root_node = Node {
        name: OsString::new(),
        meta,
        children: Some(children),
        target: None,
        xattrs,
    };
    let mut builder = Builder::default();
    // Sized once: grown by doubling, the list of entries (160 bytes each)
    // took up to twice its size, and three times while it moved.
    let (entries, files) = root_node.count();
    builder.tree.entries.reserve_exact(entries);
    builder.tree.files.reserve_exact(files);
    builder.add(root_node, 0);
    let mut tree = builder.tree;
    tree.root = root.to_path_buf();
    Ok(Scanned {
        tree,
        warnings: walker
            .warnings
            .into_inner()
            .unwrap_or_else(|p| p.into_inner()),
        spool: None,
        container_config: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_named<'t>(tree: &'t Tree, name: &str) -> &'t File {
        let entry = tree.entries.iter().find(|e| &e.name[..] == name.as_bytes());
        match entry.map(|e| &e.kind) {
            Some(Kind::File { file }) => &tree.files[*file],
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn a_deep_tree_is_walked_without_running_out_of_stack() {
        // 32 KiB of stack a level overflowed at the full `small` bench
        // corpus's 100 levels; 300 levels stay far below what a level
        // takes now.
        let dir = tempfile::tempdir().unwrap();
        let mut deepest = dir.path().to_path_buf();
        for _ in 0..300 {
            deepest.push("d");
        }
        std::fs::create_dir_all(&deepest).unwrap();
        std::fs::write(deepest.join("bottom"), b"at the bottom").unwrap();
        let scanned = scan(
            dir.path(),
            &ScanOptions::default(),
            None,
            &ScanProgress::default(),
        )
        .unwrap();
        assert!(scanned.warnings.is_empty(), "{:?}", scanned.warnings);
        let tree = &scanned.tree;
        assert_eq!(tree.entries.len(), 302);
        let bottom = tree.entries.iter().position(|e| &e.name[..] == b"bottom");
        let mut path = Vec::new();
        tree.write_path(bottom.unwrap(), &mut path);
        assert_eq!(path.len(), 300 * 2 + b"bottom".len());
    }

    #[test]
    fn entries_are_looked_up_in_their_open_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/dense"), vec![7u8; 10_000]).unwrap();
        let sparse = std::fs::File::create(root.join("sparse")).unwrap();
        sparse.set_len(4 << 20).unwrap();
        std::os::unix::fs::symlink("sub/dense", root.join("link")).unwrap();
        let scanned = scan(
            root,
            &ScanOptions::default(),
            None,
            &ScanProgress::default(),
        )
        .unwrap();
        let tree = &scanned.tree;
        assert!(scanned.warnings.is_empty(), "{:?}", scanned.warnings);
        assert_eq!(tree.entries.len(), 5);
        let dense = file_named(tree, "dense");
        assert_eq!((dense.size, dense.allocated), (10_000, true));
        let sparse = file_named(tree, "sparse");
        assert_eq!((sparse.size, sparse.allocated), (4 << 20, false));
        let link = tree.entries.iter().find(|e| &e.name[..] == b"link");
        match link.map(|e| &e.kind) {
            Some(Kind::Symlink { target }) => assert_eq!(&target[..], b"sub/dense"),
            other => panic!("link: {other:?}"),
        }
        let sub = tree.entries.iter().position(|e| &e.name[..] == b"sub");
        let dense_entry = tree.entries.iter().position(|e| &e.name[..] == b"dense");
        assert_eq!(tree.entries[dense_entry.unwrap()].parent, sub.unwrap());
    }
}
