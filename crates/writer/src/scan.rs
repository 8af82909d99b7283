//! Stage 1: walk the input directory (subdirectories in parallel) and build
//! the [`Tree`]. Nothing is read but directory listings, `lstat` and the
//! extended attributes (`llistxattr`, then `lgetxattr` for each name the
//! options select).
//!
//! Unreadable or vanishing entries are reported as warnings and left out;
//! the image stays valid. Hard links between regular files become one
//! [`File`] named by several entries.

use crate::filter::Filter;
use crate::tree::{Attrs, Entry, File, Kind, Name, Source, Time, Tree};
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use rayon::prelude::*;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{FileType, Metadata};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
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
    pub spool: Option<tempfile::TempDir>,
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
}

impl Stat {
    fn of(m: &Metadata) -> Self {
        Stat {
            file_type: m.file_type(),
            attrs: attrs(m),
            dev: m.dev(),
            ino: m.ino(),
            rdev: m.rdev(),
            nlink: m.nlink(),
            len: m.len(),
        }
    }
}

impl Node {
    /// The entries and regular files in this node and below it.
    fn count(&self) -> (usize, usize) {
        let own = (1, usize::from(self.meta.file_type.is_file()));
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

    /// Lists directory `path` (image path `rel`), recursing in parallel.
    fn list(&self, path: &Path, rel: &[u8]) -> Vec<Node> {
        let read = match std::fs::read_dir(path) {
            Ok(r) => r,
            Err(e) => {
                self.warn(path, e);
                return Vec::new();
            }
        };
        let mut found = Vec::new();
        for item in read {
            match item {
                Ok(d) => found.push(d.file_name()),
                Err(e) => self.warn(path, e),
            }
        }
        found.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        found
            .into_par_iter()
            .filter_map(|name| self.node(path, rel, name))
            .collect()
    }

    /// The extended attributes of `path` (not following a symlink) that
    /// the options select. A file system without them gives none; other
    /// errors are warnings.
    fn xattrs(&self, path: &Path) -> Vec<Xattr> {
        if self.options.no_xattrs {
            return Vec::new();
        }
        let unsupported = |e: &std::io::Error| e.raw_os_error() == Some(libc::EOPNOTSUPP);
        let names = match xattr::list(path) {
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
            match xattr::get(path, &name) {
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

    fn node(&self, dir: &Path, dir_rel: &[u8], name: OsString) -> Option<Node> {
        let path = dir.join(&name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                self.warn(&path, e);
                return None;
            }
        };
        let ft = meta.file_type();
        if (ft.is_char_device() || ft.is_block_device()) && !self.options.with_devices
            || (ft.is_fifo() || ft.is_socket()) && !self.options.with_specials
            || self.options.exclude.contains(&(meta.dev(), meta.ino()))
        {
            return None;
        }
        let mut rel = dir_rel.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.as_bytes());
        if let Some(only) = &self.options.only {
            if !only.contains(&rel) {
                return None;
            }
        }
        if let Some(f) = self.filter {
            if !f.includes(&rel, ft.is_dir()) {
                return None;
            }
        }
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        let xattrs = self.xattrs(&path);
        let mut node = Node {
            name,
            meta: Stat::of(&meta),
            children: None,
            target: None,
            xattrs,
        };
        if ft.is_dir() {
            let children = self.list(&path, &rel);
            if children.is_empty() && self.options.remove_empty_dirs {
                return None;
            }
            node.children = Some(children);
        } else if ft.is_symlink() {
            match std::fs::read_link(&path) {
                Ok(t) => node.target = Some(t.into_os_string().into_vec()),
                Err(e) => {
                    self.warn(&path, e);
                    return None;
                }
            }
        } else if ft.is_file() {
            self.progress.bytes.fetch_add(meta.len(), Ordering::Relaxed);
        }
        Some(node)
    }
}

fn time(sec: i64, nsec: i64) -> Time {
    Time {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

fn attrs(m: &Metadata) -> Attrs {
    Attrs {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
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
        let kind = if ft.is_dir() {
            Kind::Dir {
                children: ThinVec::new(),
            }
        } else if ft.is_symlink() {
            Kind::Symlink {
                target: node.target.map(ThinVec::from).unwrap_or_default(),
            }
        } else if ft.is_file() {
            Kind::File {
                file: self.file(&node, index),
            }
        } else if ft.is_char_device() || ft.is_block_device() {
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
    let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::Input(format!("{}: not a directory", root.display())));
    }
    let walker = Walker {
        options,
        filter,
        progress,
        warnings: Mutex::new(Vec::new()),
    };
    let children = walker.list(root, b"");
    let root_node = Node {
        name: OsString::new(),
        meta: Stat::of(&meta),
        children: Some(children),
        target: None,
        xattrs: walker.xattrs(root),
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
    })
}
