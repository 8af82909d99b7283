//! One tree of files read from images, whatever their number: a single
//! image, a [`Stack`](crate::stack::Stack) of layers (overlayfs rules) or
//! a [`Set`](crate::set::Set) of images side by side. The FUSE driver and
//! the tools read through this trait, so one image and many take the same
//! code path.
//!
//! Inode numbers are `u64`, unique and stable for the life of the view;
//! a single image keeps its own numbers.

use crate::cache::BlockCache;
use crate::error::{corrupt, Error, Result};
use crate::fs::lookup_path_in;
use crate::walk::{check_name, join};
use crate::{FileKind, Filesystem, Stat};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// An entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewEntry {
    /// Name, without any `/`.
    pub name: Vec<u8>,
    /// Inode number in the view.
    pub ino: u64,
    /// Kind of entry.
    pub kind: FileKind,
}

/// What an entry of a view resolves to: the image holding it and its
/// inode number there.
#[derive(Debug, Clone)]
pub struct Located {
    /// The image.
    pub fs: Arc<Filesystem>,
    /// The inode in that image.
    pub ino: u32,
}

/// What [`View::list`] calls with each entry (name, inode, kind); it
/// returns true to stop.
pub type AddEntry<'a> = dyn FnMut(&[u8], u64, FileKind) -> Result<bool> + 'a;

/// A tree of files read from one or more images.
pub trait View: Send + Sync {
    /// The root directory's inode number.
    fn root(&self) -> u64;

    /// Finds `name` in directory `dir`.
    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>>;

    /// Calls `add(name, ino, kind)` with each entry of directory `dir`,
    /// sorted by name, from the `skip`-th on, until `add` returns true.
    fn list(&self, dir: u64, skip: usize, add: &mut AddEntry<'_>) -> Result<()>;

    /// The parent of directory `dir` (the root is its own parent).
    fn parent(&self, dir: u64) -> Result<u64>;

    /// The image and inode giving the attributes and contents of `ino`
    /// (for a directory of a stack, its topmost layer's).
    fn locate(&self, ino: u64) -> Result<Located>;

    /// The attributes of `ino`; their `ino` field is the image's, callers
    /// go by the view's number.
    fn stat(&self, ino: u64) -> Result<Stat> {
        let at = self.locate(ino)?;
        at.fs.stat(at.ino)
    }

    /// The extended attributes (name, value) of `ino`, sorted by name.
    fn xattrs(&self, ino: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let at = self.locate(ino)?;
        let stored = at.fs.xattrs(at.ino)?;
        Ok(stored
            .into_iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect())
    }

    /// The target of symlink `ino`.
    fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let at = self.locate(ino)?;
        Ok(at.fs.readlink(at.ino)?.to_vec())
    }

    /// Picks up changes to what the view reads (images added to or
    /// removed from a watched directory).
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    /// The images open now.
    fn images(&self) -> Vec<Arc<Filesystem>>;

    /// Number of regular file bytes and of inodes, for `statfs`.
    fn totals(&self) -> (u64, u64);

    /// The block cache (shared by all images of the view); tidying it
    /// tidies every image's blocks.
    fn cache(&self) -> &BlockCache;

    /// Whether the view opens its images on demand (and so may close
    /// idle ones, or follow a directory).
    fn opens_on_demand(&self) -> bool {
        false
    }

    /// Closes the images unused for `idle`, where the view opens them on
    /// demand; returns how many it closed.
    fn close_idle(&self, _idle: Duration) -> usize {
        0
    }

    /// Whether the entries of directory `dir` may change while mounted
    /// (images appearing in a watched directory): they must not be
    /// cached.
    fn is_volatile(&self, _dir: u64) -> bool {
        false
    }
}

/// Everything about a view that does not depend on which kind it is.
pub trait ViewExt: View {
    /// The entries of directory `dir`, sorted by name.
    fn entries(&self, dir: u64) -> Result<Vec<ViewEntry>> {
        let mut out = Vec::new();
        self.list(dir, 0, &mut |name, ino, kind| {
            out.push(ViewEntry {
                name: name.to_vec(),
                ino,
                kind,
            });
            Ok(false)
        })?;
        Ok(out)
    }

    /// Finds the inode of a `/`-separated path relative to the root
    /// (empty and `.` components skipped; symlinks are not followed).
    fn lookup_path(&self, path: &str) -> Result<u64> {
        self.lookup_path_bytes(path.as_bytes())
    }

    /// [`ViewExt::lookup_path`] for a path of any bytes (names need not
    /// be UTF-8), as the C binding passes them.
    fn lookup_path_bytes(&self, path: &[u8]) -> Result<u64> {
        lookup_path_in(
            path,
            self.root(),
            |ino| self.parent(ino),
            |ino| Ok(self.stat(ino)?.kind),
            |ino, name| self.lookup(ino, name),
        )
    }

    /// Finds the inode of a `/`-separated path relative to the root,
    /// following symlinks on the way (the last one only if
    /// `follow_last`; an absolute target restarts at the root). More than
    /// [`crate::fs::MAX_SYMLINKS`] links is an error.
    fn resolve_path(&self, path: &[u8], follow_last: bool) -> Result<u64> {
        let not_found = || Error::NotFound(String::from_utf8_lossy(path).into_owned());
        let mut todo: Vec<Vec<u8>> = path
            .split(|&b| b == b'/')
            .rev()
            .map(<[u8]>::to_vec)
            .collect();
        let mut ino = self.root();
        let mut links = 0;
        while let Some(part) = todo.pop() {
            if part.is_empty() || part == b"." {
                continue;
            }
            if part == b".." {
                ino = self.parent(ino)?;
                continue;
            }
            if self.stat(ino)?.kind != FileKind::Directory {
                return Err(not_found());
            }
            let child = self.lookup(ino, &part)?.ok_or_else(not_found)?;
            let is_last = todo.iter().all(|p| p.is_empty() || p == b".");
            if self.stat(child)?.kind != FileKind::Symlink || (is_last && !follow_last) {
                ino = child;
                continue;
            }
            links += 1;
            if links > crate::fs::MAX_SYMLINKS {
                return Err(Error::NotFound(format!(
                    "{}: too many levels of symbolic links",
                    String::from_utf8_lossy(path)
                )));
            }
            let target = self.readlink(child)?;
            if target.starts_with(b"/") {
                ino = self.root();
            }
            todo.extend(target.split(|&b| b == b'/').rev().map(<[u8]>::to_vec));
        }
        Ok(ino)
    }

    /// The regular files `files`, sorted by where their data starts (image
    /// by image), so that reading them in this order decompresses each
    /// block about once.
    fn files_in_data_order(&self, files: &[u64]) -> Result<Vec<u64>> {
        let mut keyed = Vec::with_capacity(files.len());
        for &ino in files {
            let at = self.locate(ino)?;
            let first = at.fs.chunk_range(at.ino)?.next();
            let key = match first.map(|i| at.fs.extent(i)).transpose()? {
                Some(crate::Extent::Data { block, offset, .. }) => (block, offset),
                _ => (0, 0),
            };
            keyed.push(((Arc::as_ptr(&at.fs) as usize, key), ino));
        }
        keyed.sort_unstable();
        Ok(keyed.into_iter().map(|(_, ino)| ino).collect())
    }

    /// All entries below (and including) directory `start` at
    /// `start_path`, in pre-order, each directory's entries sorted; names
    /// are checked and each directory is entered once (see
    /// [`crate::walk`]).
    fn walk(&self, start: u64, start_path: &[u8]) -> Result<Vec<ViewNode>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let kind = self.stat(start)?.kind;
        let mut stack = vec![(start_path.to_vec(), start, kind)];
        while let Some((path, ino, kind)) = stack.pop() {
            out.push(ViewNode {
                path: path.clone(),
                ino,
                kind,
            });
            if kind != FileKind::Directory {
                continue;
            }
            if !seen.insert(ino) {
                return Err(corrupt!(
                    "directory inode {ino} appears more than once in the tree (at '{}')",
                    String::from_utf8_lossy(&path)
                ));
            }
            let entries = self.entries(ino)?;
            for e in &entries {
                check_name(&e.name, &path)?;
            }
            if let Some(pair) = entries.windows(2).find(|p| p[0].name >= p[1].name) {
                return Err(corrupt!(
                    "directory '{}' is not sorted or has duplicate entries ('{}')",
                    String::from_utf8_lossy(&path),
                    String::from_utf8_lossy(&pair[1].name)
                ));
            }
            for e in entries.into_iter().rev() {
                stack.push((join(&path, &e.name), e.ino, e.kind));
            }
        }
        Ok(out)
    }
}

impl<V: View + ?Sized> ViewExt for V {}

/// One entry found by [`ViewExt::walk`].
#[derive(Debug, Clone)]
pub struct ViewNode {
    /// Path relative to the root, `/`-separated; empty for the root.
    pub path: Vec<u8>,
    /// Inode number in the view.
    pub ino: u64,
    /// Kind of entry.
    pub kind: FileKind,
}
