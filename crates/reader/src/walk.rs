//! Walking the directory tree of an image safely: every name is checked and
//! every directory is entered once, so a hostile image can neither name a
//! path outside the tree nor make the walk loop.

use crate::error::{corrupt, Result};
use crate::{FileKind, Filesystem};
use std::collections::HashSet;

/// One entry found by [`walk`].
#[derive(Debug, Clone)]
pub struct Node {
    /// Path relative to the root, `/`-separated; empty for the root itself.
    pub path: Vec<u8>,
    /// Inode number.
    pub ino: u32,
    /// Kind of entry.
    pub kind: FileKind,
}

/// Checks that `name` is a single, ordinary path component.
pub fn check_name(name: &[u8], dir: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(corrupt!(
            "directory '{}' has an entry named '{}', which is not a valid file name",
            String::from_utf8_lossy(dir),
            String::from_utf8_lossy(name).escape_debug()
        ));
    }
    Ok(())
}

/// Joins a relative directory path and a name.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// All entries below (and including) directory `start` at `start_path`, in
/// pre-order with each directory's entries in stored order.
pub fn walk(fs: &Filesystem, start: u32, start_path: &[u8]) -> Result<Vec<Node>> {
    let mut out = Vec::new();
    let mut seen_dirs = HashSet::new();
    let mut stack = vec![(start_path.to_vec(), start)];
    while let Some((path, ino)) = stack.pop() {
        let kind = fs.stat(ino)?.kind;
        out.push(Node {
            path: path.clone(),
            ino,
            kind,
        });
        if kind != FileKind::Directory {
            continue;
        }
        if !seen_dirs.insert(ino) {
            return Err(corrupt!(
                "directory inode {ino} appears more than once in the tree (at '{}')",
                String::from_utf8_lossy(&path)
            ));
        }
        let entries = fs.readdir(ino)?;
        for e in &entries {
            check_name(&e.name, &path)?;
        }
        for pair in entries.windows(2) {
            if pair[0].name >= pair[1].name {
                return Err(corrupt!(
                    "directory '{}' is not sorted or has duplicate entries ('{}')",
                    String::from_utf8_lossy(&path),
                    String::from_utf8_lossy(&pair[1].name)
                ));
            }
        }
        for e in entries.iter().rev() {
            stack.push((join(&path, &e.name), e.ino));
        }
    }
    Ok(out)
}
