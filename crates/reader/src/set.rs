//! Many images side by side: each is a directory of the root named after
//! it (`name.dwarfs` is `name`). Images are opened at the first access
//! to their directory and closed when unused for a while
//! ([`View::close_idle`]), so a set of thousands costs memory only for
//! the images in use; all share one bounded block cache. Images are read
//! with `pread`, not mapped, so that what the process holds is its cache
//! and each open image's tables, not the pages of the image files.
//!
//! A set made from a directory can follow it ([`View::refresh`]): images
//! added to it appear, removed (or replaced) ones vanish.
//!
//! Inode numbers: the root is 0; entry `ino` of the `i`-th image (in the
//! order the set first saw them) is `(i + 1) << 32 | ino`, the image's
//! own numbers, so they stay stable while the image is closed and
//! reopened.

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::inode::{Stat, Time};
use crate::stack::Stack;
use crate::view::{AddEntry, Located, View};
use crate::{FileKind, Filesystem, FsOptions, OpenOptions};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The extension of the images a directory's set takes.
const EXTENSION: &str = "dwarfs";

/// A set of images, each a directory of its root.
#[derive(Debug)]
pub struct Set {
    members: RwLock<Members>,
    cache: BlockCache,
    options: FsOptions,
    /// The directory followed by [`View::refresh`], if any.
    watched: Option<PathBuf>,
    /// The root's attributes.
    root: Stat,
    /// Images open now.
    open_count: AtomicUsize,
}

#[derive(Debug, Default)]
struct Members {
    /// Every image seen, in the order seen (the index gives the numbers).
    all: Vec<Arc<Member>>,
    /// The images present, by name.
    by_name: BTreeMap<Vec<u8>, usize>,
}

#[derive(Debug)]
struct Member {
    path: PathBuf,
    /// Size and modification time of the file when seen, to notice a
    /// replaced image.
    identity: (u64, i64, i64),
    slot: Mutex<Option<Opened>>,
}

#[derive(Debug)]
struct Opened {
    image: Arc<Stack>,
    used: Instant,
}

/// The name an image has in the set: its file name without `.dwarfs`.
fn member_name(path: &Path) -> Result<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let file = path
        .file_name()
        .ok_or_else(|| Error::NotFound(format!("{}: not an image file", path.display())))?;
    let name = match path.extension() {
        Some(e) if e == EXTENSION && path.file_stem().is_some() => path.file_stem().unwrap_or(file),
        _ => file,
    };
    Ok(name.as_bytes().to_vec())
}

fn identity(path: &Path) -> Result<(u64, i64, i64)> {
    let m = std::fs::metadata(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    if m.is_dir() {
        return Err(Error::Io(format!("{}: is a directory", path.display())));
    }
    Ok((m.len(), m.mtime(), m.mtime_nsec()))
}

/// The `*.dwarfs` files in `dir`.
fn images_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |e: std::io::Error| Error::Io(format!("{}: {e}", dir.display()));
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == EXTENSION) && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

fn encode(member: usize, ino: u64) -> u64 {
    (member as u64 + 1) << 32 | ino
}

impl Set {
    /// A set of the images at `paths`; none is opened yet. Two images
    /// with one name are an error.
    pub fn new(paths: &[&Path], options: &FsOptions) -> Result<Set> {
        let mut set = Set::empty(options, None)?;
        let members = set.members.get_mut().unwrap_or_else(|p| p.into_inner());
        for path in paths {
            let name = member_name(path)?;
            if members.by_name.contains_key(&name) {
                return Err(Error::Unsupported(format!(
                    "two images named '{}' (the second: {})",
                    String::from_utf8_lossy(&name),
                    path.display()
                )));
            }
            add(members, name, path)?;
        }
        Ok(set)
    }

    /// A set of the `*.dwarfs` images in `dir`; with `watch`,
    /// [`View::refresh`] follows the directory.
    pub fn of_dir(dir: &Path, options: &FsOptions, watch: bool) -> Result<Set> {
        let set = Set::empty(options, watch.then(|| dir.to_path_buf()))?;
        set.scan(dir)?;
        Ok(set)
    }

    fn empty(options: &FsOptions, watched: Option<PathBuf>) -> Result<Set> {
        let cache = Filesystem::check_options(options)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let time = Time {
            sec: now.as_secs() as i64,
            nsec: now.subsec_nanos(),
        };
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Set {
            members: RwLock::new(Members::default()),
            cache,
            options: options.clone(),
            watched,
            root: Stat {
                ino: 0,
                kind: FileKind::Directory,
                mode: libc::S_IFDIR | 0o555,
                nlink: 2,
                uid,
                gid,
                size: 0,
                allocated_size: 0,
                atime: time,
                mtime: time,
                ctime: time,
                rdev: 0,
            },
            open_count: AtomicUsize::new(0),
        })
    }

    /// Brings the members up to the images now in `dir`.
    fn scan(&self, dir: &Path) -> Result<()> {
        let paths = images_in(dir)?;
        let mut members = self.members.write().unwrap_or_else(|p| p.into_inner());
        let mut present = BTreeMap::new();
        for path in &paths {
            let name = member_name(path)?;
            let Ok(id) = identity(path) else { continue };
            let known = members
                .by_name
                .get(&name)
                .filter(|&&i| members.all[i].identity == id)
                .copied();
            let index = match known {
                Some(i) => i,
                None => {
                    members.all.push(Arc::new(Member {
                        path: path.clone(),
                        identity: id,
                        slot: Mutex::new(None),
                    }));
                    members.all.len() - 1
                }
            };
            present.insert(name, index);
        }
        for (name, &i) in &members.by_name {
            if present.get(name) != Some(&i) {
                let closed = lock(&members.all[i].slot).take();
                if closed.is_some() {
                    self.open_count.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        members.by_name = present;
        Ok(())
    }

    /// Number of images in the set now.
    pub fn len(&self) -> usize {
        self.read().by_name.len()
    }

    /// Whether the set has no image.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of images open now.
    pub fn open_count(&self) -> usize {
        self.open_count.load(Ordering::Relaxed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Members> {
        self.members.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The member numbered by `ino` and its inode in it, opened.
    fn member(&self, ino: u64) -> Result<(Arc<Stack>, u64)> {
        let index = ((ino >> 32) as usize)
            .checked_sub(1)
            .ok_or_else(|| Error::WrongType("the root of a set is no image's".into()))?;
        let member = self
            .read()
            .all
            .get(index)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let mut slot = lock(&member.slot);
        let opened = match slot.as_mut() {
            Some(o) => o,
            None => {
                let name = member.path.display().to_string();
                // Read, not mapped: the process's memory stays its cache
                // and tables, however many images are open.
                let open = OpenOptions {
                    no_mmap: true,
                    ..self.options.open.clone()
                };
                let image = Stack::open_in(&[&member.path], &open, &self.cache)
                    .map_err(|e| e.context(&name))?;
                self.open_count.fetch_add(1, Ordering::Relaxed);
                slot.insert(Opened {
                    image: Arc::new(image),
                    used: Instant::now(),
                })
            }
        };
        opened.used = Instant::now();
        Ok((opened.image.clone(), ino & u64::from(u32::MAX)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn add(members: &mut Members, name: Vec<u8>, path: &Path) -> Result<()> {
    members.all.push(Arc::new(Member {
        path: path.to_path_buf(),
        identity: identity(path)?,
        slot: Mutex::new(None),
    }));
    members.by_name.insert(name, members.all.len() - 1);
    Ok(())
}

impl View for Set {
    fn root(&self) -> u64 {
        0
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>> {
        if dir == 0 {
            return Ok(self.read().by_name.get(name).map(|&i| encode(i, 0)));
        }
        let (image, ino) = self.member(dir)?;
        Ok(image
            .lookup(ino, name)?
            .map(|i| encode((dir >> 32) as usize - 1, i)))
    }

    fn list(&self, dir: u64, skip: usize, add: &mut AddEntry<'_>) -> Result<()> {
        if dir == 0 {
            let members: Vec<(Vec<u8>, usize)> = self
                .read()
                .by_name
                .iter()
                .skip(skip)
                .map(|(n, &i)| (n.clone(), i))
                .collect();
            for (name, i) in members {
                if add(&name, encode(i, 0), FileKind::Directory)? {
                    break;
                }
            }
            return Ok(());
        }
        let member = (dir >> 32) as usize - 1;
        let (image, ino) = self.member(dir)?;
        image.list(ino, skip, &mut |name, ino, kind| {
            add(name, encode(member, ino), kind)
        })
    }

    fn parent(&self, dir: u64) -> Result<u64> {
        if dir == 0 || dir & u64::from(u32::MAX) == 0 {
            return Ok(0);
        }
        let (image, ino) = self.member(dir)?;
        Ok(encode((dir >> 32) as usize - 1, image.parent(ino)?))
    }

    fn locate(&self, ino: u64) -> Result<Located> {
        let (image, ino) = self.member(ino)?;
        image.locate(ino)
    }

    fn stat(&self, ino: u64) -> Result<Stat> {
        if ino == 0 {
            let mut root = self.root;
            root.size = self.len() as u64;
            return Ok(root);
        }
        let (image, ino) = self.member(ino)?;
        image.stat(ino)
    }

    fn xattrs(&self, ino: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if ino == 0 {
            return Ok(Vec::new());
        }
        let (image, ino) = self.member(ino)?;
        image.xattrs(ino)
    }

    fn images(&self) -> Vec<Arc<Filesystem>> {
        let members = self.read();
        members
            .all
            .iter()
            .filter_map(|m| {
                let slot = lock(&m.slot);
                slot.as_ref().map(|o| o.image.images())
            })
            .flatten()
            .collect()
    }

    fn totals(&self) -> (u64, u64) {
        let members = self.read();
        members
            .by_name
            .values()
            .filter_map(|&i| {
                let slot = lock(&members.all[i].slot);
                slot.as_ref().map(|o| o.image.totals())
            })
            .fold((0, 1), |(s, c), (size, count)| (s + size, c + count))
    }

    fn cache(&self) -> &BlockCache {
        &self.cache
    }

    fn opens_on_demand(&self) -> bool {
        true
    }

    fn close_idle(&self, idle: Duration) -> usize {
        let members = self.read();
        let mut closed = 0;
        for member in &members.all {
            let mut slot = lock(&member.slot);
            if slot.as_ref().is_some_and(|o| o.used.elapsed() >= idle) {
                *slot = None;
                closed += 1;
            }
        }
        self.open_count.fetch_sub(closed, Ordering::Relaxed);
        closed
    }

    fn is_volatile(&self, dir: u64) -> bool {
        dir == 0 && self.watched.is_some()
    }

    fn refresh(&self) -> Result<()> {
        match &self.watched {
            Some(dir) => self.scan(dir),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_named_after_their_files() {
        assert_eq!(member_name(Path::new("/a/b/base.dwarfs")).unwrap(), b"base");
        assert_eq!(member_name(Path::new("x.img")).unwrap(), b"x.img");
        assert_eq!(member_name(Path::new(".dwarfs")).unwrap(), b".dwarfs");
        assert_eq!(encode(0, 5), 1 << 32 | 5);
    }
}
