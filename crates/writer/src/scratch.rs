//! The temporary files and directories of this process's builds: a
//! partial image, an archive's spool, a delta layer's stand-in contents.
//! Each is listed while it lives, so that a process about to exit on a
//! signal removes them all ([`remove_all`]) and leaves nothing behind,
//! whatever the build was doing when the signal came.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use tempfile::{NamedTempFile, TempDir};

/// Every temporary file and directory of this process still in use.
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

/// A temporary file, removed when dropped (unless persisted), or by
/// [`remove_all`].
pub struct ScratchFile {
    // Declared first, dropped first: removed, then unlisted.
    file: NamedTempFile,
    _listed: Listed,
}

impl ScratchFile {
    /// A new hidden temporary file in `dir`.
    pub fn new_in(dir: &Path) -> Result<Self> {
        // Made and listed at once, so that a signal cannot come between.
        let mut list = listed();
        let file = tempfile::Builder::new()
            .prefix(".hoard-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        let _listed = Listed::new(&mut list, file.path());
        Ok(ScratchFile { file, _listed })
    }

    /// The open file.
    pub fn as_file(&self) -> &std::fs::File {
        self.file.as_file()
    }

    /// The open file, to write.
    pub fn as_file_mut(&mut self) -> &mut std::fs::File {
        self.file.as_file_mut()
    }

    /// Renames it to `target`, replacing what is there if `replace`,
    /// else failing when `target` exists.
    pub fn persist(self, target: &Path, replace: bool) -> std::io::Result<()> {
        let ScratchFile { file, _listed } = self;
        let kept = if replace {
            file.persist(target)
        } else {
            file.persist_noclobber(target)
        };
        kept.map(drop).map_err(|e| e.error)
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

/// A temporary directory, removed with what it holds when dropped, or
/// by [`remove_all`].
#[derive(Debug)]
pub struct ScratchDir {
    // Declared first, dropped first: removed, then unlisted.
    dir: TempDir,
    _listed: Listed,
}

impl ScratchDir {
    /// A new hidden directory `.hoard-{what}-…` in `parent`.
    pub fn new_in(parent: &Path, what: &str) -> Result<Self> {
        let mut list = listed();
        let dir = tempfile::Builder::new()
            .prefix(&format!(".hoard-{what}-"))
            .tempdir_in(parent)
            .map_err(|e| Error::io(parent, e))?;
        let _listed = Listed::new(&mut list, dir.path());
        Ok(ScratchDir { dir, _listed })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
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
        let mut file = ScratchFile::new_in(parent.path()).unwrap();
        file.write_all(b"image").unwrap();
        let (dir_path, file_path) = (dir.path().to_path_buf(), file.file.path().to_path_buf());
        assert!(listed().contains(&dir_path) && listed().contains(&file_path));
        drop(dir);
        let target = parent.path().join("image");
        file.persist(&target, false).unwrap();
        assert!(!listed().contains(&dir_path) && !listed().contains(&file_path));
        assert!(!dir_path.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"image");
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
