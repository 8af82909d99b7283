//! The temporary files and directories of this process's builds: a
//! partial image, an archive's spool, a delta layer's stand-in contents.
//!
//! Every file that becomes an output (an image, a signed copy, an
//! archive packed into the cache) is first a [`ScratchFile`] in the
//! output's directory, put in place by [`ScratchFile::persist`] only when
//! complete. Where the file system can (`O_TMPFILE`: ext4, XFS, Btrfs,
//! tmpfs and most others), the file has no name until then, so nothing is
//! left behind whatever ends the process, `SIGKILL` and power failure
//! included. Elsewhere it, like every [`ScratchDir`], has a name with the
//! process's id, `.hoard-{pid}-{n}.tmp` or `.hoard-{what}-{pid}-{n}`,
//! and is held under a lock while in use: the next build in the same
//! directory removes those whose process is gone (`remove_stale`).
//!
//! Each named one is listed while it lives, so that a process about to
//! exit on a signal removes them all ([`remove_all`]) and leaves nothing
//! behind, whatever the build was doing when the signal came.

use crate::{Error, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Every named temporary file and directory of this process still in use.
static LISTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn listed() -> MutexGuard<'static, Vec<PathBuf>> {
    LISTED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes every listed file and directory, for a process about to
/// exit. Nothing can be listed afterwards (the list stays locked), so
/// no build can start a new one.
pub fn remove_all() {
    let listed = listed();
    for path in listed.iter() {
        remove(path);
    }
    std::mem::forget(listed);
}

/// Removes a file, or a directory and what it holds. A thread of the
/// build may still be adding files to the directory: a few tries let
/// the removal catch up with it.
fn remove(path: &Path) {
    for _ in 0..8 {
        let removed = match path.symlink_metadata() {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(_) => return,
        };
        if removed.is_ok() {
            return;
        }
    }
}

/// The directory `path` is in (`.` for a bare file name), where its
/// temporary files go.
pub(crate) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Removes from `dir` the temporary files and directories of hoard
/// processes that ended without removing them (killed by `SIGKILL`, or
/// on a crash): a name of the form this module gives, the process it
/// names gone, and no process holding its lock. Anything else is kept.
pub(crate) fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let is_ours = entry
            .file_name()
            .to_str()
            .and_then(owner)
            .is_some_and(|pid| !is_alive(pid));
        let plain = entry.file_type().is_ok_and(|t| t.is_file() || t.is_dir());
        if !is_ours || !plain {
            continue;
        }
        let path = entry.path();
        let unused = File::open(&path).is_ok_and(|f| try_lock(&f));
        if unused {
            remove(&path);
        }
    }
}

/// The process id in a temporary's name `.hoard-{pid}-{n}.tmp` or
/// `.hoard-{what}-{pid}-{n}`.
fn owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(".hoard-")?;
    let (rest, file) = match rest.strip_suffix(".tmp") {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let mut parts = rest.rsplit('-');
    let (n, pid, what) = (parts.next()?, parts.next()?, parts.next());
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase());
    let shaped = digits(n)
        && digits(pid)
        && parts.next().is_none()
        && match what {
            None => file,
            Some(what) => !file && word(what),
        };
    shaped.then(|| pid.parse().ok()).flatten()
}

/// Whether the process `pid` exists (one of another user's counts).
fn is_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Takes the exclusive lock on `file` without waiting; whether it was
/// free (a file system without locks counts as held: nothing is
/// removed on a guess).
fn try_lock(file: &File) -> bool {
    // SAFETY: a plain system call on a file descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// A path listed in [`LISTED`] until dropped.
#[derive(Debug)]
struct Listed(PathBuf);

impl Listed {
    /// Lists `path`, in the list given (held locked since it was made).
    fn new(list: &mut Vec<PathBuf>, path: &Path) -> Self {
        list.push(path.to_path_buf());
        Listed(path.to_path_buf())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let mut list = listed();
        if let Some(i) = list.iter().position(|p| *p == self.0) {
            list.swap_remove(i);
        }
    }
}

/// Makes a new temporary named `{before}{pid}-{n}{after}` in `dir` with
/// `make` (which fails if the name is taken), listed at once, so that a
/// signal cannot come between; returns what `make` made and its listing.
fn make_named<T>(
    dir: &Path,
    before: &str,
    after: &str,
    make: impl Fn(&Path) -> std::io::Result<T>,
) -> std::io::Result<(T, Listed)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut list = listed();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{before}{}-{n}{after}", std::process::id()));
        match make(&path) {
            Ok(made) => return Ok((made, Listed::new(&mut list, &path))),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A temporary file, removed when dropped (unless persisted), or by
/// [`remove_all`]. It has no name until persisted where the file system
/// can (see the module's doc).
pub struct ScratchFile {
    file: File,
    /// Its name, on a file system that cannot make a file without one.
    name: Option<Listed>,
}

impl ScratchFile {
    /// A new temporary file in `dir`, without a name where the file
    /// system can, else a hidden one (stale ones of killed builds in
    /// `dir` are removed first).
    pub fn new_in(dir: &Path) -> Result<Self> {
        remove_stale(dir);
        if let Some(file) = unnamed_in(dir) {
            return Ok(ScratchFile { file, name: None });
        }
        Self::named_in(dir)
    }

    /// A new temporary file in `dir` with a hidden name.
    fn named_in(dir: &Path) -> Result<Self> {
        let (file, name) = make_named(dir, ".hoard-", ".tmp", |path| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)?;
            try_lock(&file);
            Ok(file)
        })
        .map_err(|e| Error::io(dir, e))?;
        Ok(ScratchFile {
            file,
            name: Some(name),
        })
    }

    /// The open file.
    pub fn as_file(&self) -> &File {
        &self.file
    }

    /// The open file, to write.
    pub fn as_file_mut(&mut self) -> &mut File {
        &mut self.file
    }

    /// Puts it in place as `target`, replacing what is there if
    /// `replace`, else failing when `target` exists. Either `target` is
    /// the complete file afterwards or it is untouched.
    pub fn persist(mut self, target: &Path, replace: bool) -> std::io::Result<()> {
        let Some(name) = self.name.take() else {
            return self.link(target, replace);
        };
        let moved = if replace {
            std::fs::rename(&name.0, target)
        } else {
            rename_noreplace(&name.0, target)
        };
        if moved.is_err() {
            // Dropped still named: removed.
            self.name = Some(name);
        }
        moved
    }

    /// Gives the unnamed file the name `target`: a link made directly
    /// when nothing may be replaced (it fails if `target` exists), else
    /// made under a temporary name that is then renamed over `target`.
    fn link(&self, target: &Path, replace: bool) -> std::io::Result<()> {
        let from = format!("/proc/self/fd/{}", self.file.as_raw_fd());
        if !replace {
            return link_at(Path::new(&from), target);
        }
        let (_, between) = make_named(directory_of(target), ".hoard-", ".tmp", |path| {
            link_at(Path::new(&from), path)
        })?;
        std::fs::rename(&between.0, target).inspect_err(|_| {
            let _ = std::fs::remove_file(&between.0);
        })
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        if let Some(name) = &self.name {
            let _ = std::fs::remove_file(&name.0);
        }
    }
}

impl std::io::Write for ScratchFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A new file without a name in `dir` (`O_TMPFILE`), if the file system
/// can make one and `/proc` is there to give it a name later.
fn unnamed_in(dir: &Path) -> Option<File> {
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
        .ok()?;
    // Held by the name the link of a replacing persist briefly has.
    try_lock(&file);
    Some(file)
}

/// Calls `at` (a `*at` system call taking two paths relative to the
/// current directory) on `from` and `to`; its error if it fails.
fn two_paths(
    from: &Path,
    to: &Path,
    at: impl FnOnce(*const libc::c_char, *const libc::c_char) -> libc::c_int,
) -> std::io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(from)?, c(to)?);
    match at(from.as_ptr(), to.as_ptr()) {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Links `to` to the file `from` names, following `from` if it is a
/// symbolic link (as `/proc/self/fd/N` is); fails if `to` exists.
fn link_at(from: &Path, to: &Path) -> std::io::Result<()> {
    two_paths(from, to, |from, to| {
        // SAFETY: two NUL-terminated paths that outlive the call.
        unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from,
                libc::AT_FDCWD,
                to,
                libc::AT_SYMLINK_FOLLOW,
            )
        }
    })
}

/// Renames `from` to `to`, failing if `to` exists; on a file system
/// without `RENAME_NOREPLACE`, links `to` and removes `from`.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let renamed = two_paths(from, to, |from, to| {
        // SAFETY: two NUL-terminated paths that outlive the call.
        unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from,
                libc::AT_FDCWD,
                to,
                libc::RENAME_NOREPLACE,
            )
        }
    });
    let Err(e) = renamed else {
        return Ok(());
    };
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// A temporary directory, removed with what it holds when dropped, or
/// by [`remove_all`], or, left by a killed build, by the next one
/// (`remove_stale`).
#[derive(Debug)]
pub struct ScratchDir {
    /// Held open under a lock while in use.
    _lock: File,
    listed: Listed,
}

impl ScratchDir {
    /// A new hidden directory `.hoard-{what}-{pid}-{n}` in `parent`
    /// (stale ones of killed builds in `parent` are removed first).
    pub fn new_in(parent: &Path, what: &str) -> Result<Self> {
        remove_stale(parent);
        let (_lock, listed) = make_named(parent, &format!(".hoard-{what}-"), "", |path| {
            std::fs::DirBuilder::new().mode(0o700).create(path)?;
            let dir = File::open(path)?;
            try_lock(&dir);
            Ok(dir)
        })
        .map_err(|e| Error::io(parent, e))?;
        Ok(ScratchDir { _lock, listed })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.listed.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove(&self.listed.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn scratch_is_listed_while_it_lives_and_removed_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let dir = ScratchDir::new_in(parent.path(), "test").unwrap();
        std::fs::write(dir.path().join("a"), b"a").unwrap();
        let mut file = ScratchFile::named_in(parent.path()).unwrap();
        file.write_all(b"image").unwrap();
        let dir_path = dir.path().to_path_buf();
        let file_path = file.name.as_ref().unwrap().0.clone();
        assert!(listed().contains(&dir_path) && listed().contains(&file_path));
        drop(dir);
        let target = parent.path().join("image");
        file.persist(&target, false).unwrap();
        assert!(!listed().contains(&dir_path) && !listed().contains(&file_path));
        assert!(!dir_path.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"image");
        let dropped = ScratchFile::named_in(parent.path()).unwrap();
        drop(dropped);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
    }

    #[test]
    fn persisting_replaces_only_when_asked_and_leaves_no_other_name() {
        let parent = tempfile::tempdir().unwrap();
        let target = parent.path().join("image");
        std::fs::write(&target, b"old").unwrap();
        let named = |parent: &Path| ScratchFile::named_in(parent).unwrap();
        let unnamed = |parent: &Path| ScratchFile::new_in(parent).unwrap();
        for make in [named, unnamed] {
            let mut file = make(parent.path());
            file.write_all(b"new").unwrap();
            let refused = file.persist(&target, false).unwrap_err();
            assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
            assert_eq!(std::fs::read(&target).unwrap(), b"old");
            let mut file = make(parent.path());
            file.write_all(b"new").unwrap();
            file.persist(&target, true).unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), b"new");
            std::fs::write(&target, b"old").unwrap();
            let names: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
            assert_eq!(names.len(), 1, "{names:?}");
        }
    }

    #[test]
    fn an_unnamed_file_has_no_name_until_persisted() {
        let parent = tempfile::tempdir().unwrap();
        let file = ScratchFile::new_in(parent.path()).unwrap();
        // tmpfs and the usual disk file systems make unnamed files.
        assert!(file.name.is_none());
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
        file.persist(&parent.path().join("image"), false).unwrap();
        assert!(parent.path().join("image").is_file());
    }

    #[test]
    fn stale_temporaries_of_gone_processes_are_removed_and_no_others() {
        let parent = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let names = [
            format!(".hoard-{gone}-0.tmp"),
            format!(".hoard-spool-{gone}-3"),
            format!(".hoard-{me}-0.tmp"),
            format!(".hoard-spool-{me}-3"),
            format!(".hoard-{gone}-x.tmp"),
            format!(".hoard-{gone}-0"),
            format!(".hoard-spool-{gone}-0.tmp"),
            "image.dwarfs".to_string(),
        ];
        for name in &names {
            let path = parent.path().join(name);
            match name.contains("spool") {
                true => std::fs::create_dir_all(path.join("sub")).unwrap(),
                false => std::fs::write(path, b"x").unwrap(),
            }
        }
        remove_stale(parent.path());
        let mut left: Vec<_> = std::fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut kept = names[2..].to_vec();
        kept.sort();
        assert_eq!(left, kept);
    }

    #[test]
    fn a_locked_temporary_is_kept() {
        let parent = tempfile::tempdir().unwrap();
        // A process id of no process (above the kernel's limit).
        let path = parent.path().join(".hoard-99999999-0.tmp");
        std::fs::write(&path, b"x").unwrap();
        let held = File::open(&path).unwrap();
        assert!(try_lock(&held));
        remove_stale(parent.path());
        assert!(path.exists());
        drop(held);
        remove_stale(parent.path());
        assert!(!path.exists());
    }

    #[test]
    fn removal_takes_directories_with_their_files() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("d");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), b"f").unwrap();
        remove(&dir);
        let file = parent.path().join("f");
        std::fs::write(&file, b"f").unwrap();
        remove(&file);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_bare_file_name_is_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("x.dwarfs")), Path::new("."));
        assert_eq!(directory_of(Path::new("out/x.dwarfs")), Path::new("out"));
        assert_eq!(directory_of(Path::new("/x.dwarfs")), Path::new("/"));
    }
}
