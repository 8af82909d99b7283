//! The manifest of a directory tree on disk (a source tree, a mount, an
//! extraction). Symlinks are listed, never followed.

use super::{Entry, Facts, XattrValue};
use anyhow::{Context, Result};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The manifest entries of the tree at `root`, file contents hashed in
/// parallel.
pub fn manifest(root: &Path) -> Result<Vec<Entry>> {
    let mut facts = Vec::new();
    let mut pending = vec![Vec::new()];
    while let Some(rel) = pending.pop() {
        let full = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(std::ffi::OsStr::from_bytes(&rel))
        };
        let meta = std::fs::symlink_metadata(&full)
            .with_context(|| format!("cannot stat '{}'", full.display()))?;
        let f = facts_of(&full, rel, &meta)?;
        if f.kind == 'd' {
            let dir = std::fs::read_dir(&full)
                .with_context(|| format!("cannot read directory '{}'", full.display()))?;
            for e in dir {
                let e = e.with_context(|| format!("cannot read directory '{}'", full.display()))?;
                pending.push(hoard_reader::walk::join(&f.path, e.file_name().as_bytes()));
            }
        }
        facts.push(f);
    }
    facts.par_iter_mut().try_for_each(|f| -> Result<()> {
        if f.kind == 'f' {
            let full = root.join(std::ffi::OsStr::from_bytes(&f.path));
            f.sha256 = Some(sha256_of(&full)?);
        }
        Ok(())
    })?;
    Ok(super::entries(facts))
}

/// The facts `lstat` gives about the entry at `full`.
fn facts_of(full: &Path, rel: Vec<u8>, meta: &std::fs::Metadata) -> Result<Facts> {
    let t = meta.file_type();
    let kind = if t.is_dir() {
        'd'
    } else if t.is_file() {
        'f'
    } else if t.is_symlink() {
        'l'
    } else if t.is_char_device() {
        'c'
    } else if t.is_block_device() {
        'b'
    } else if t.is_fifo() {
        'p'
    } else {
        's'
    };
    let target = if kind == 'l' {
        let t = std::fs::read_link(full)
            .with_context(|| format!("cannot read symlink '{}'", full.display()))?;
        Some(t.as_os_str().as_bytes().to_vec())
    } else {
        None
    };
    let rdev = matches!(kind, 'c' | 'b').then(|| {
        let dev = meta.rdev();
        [libc::major(dev), libc::minor(dev)]
    });
    Ok(Facts {
        path: rel,
        kind,
        mode: meta.mode(),
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec() as u32),
        nlink: meta.nlink(),
        inode: (meta.dev(), meta.ino()),
        target,
        rdev,
        sha256: None,
        xattrs: xattrs_of(full)?,
    })
}

/// The extended attributes of the entry at `full` (not following a
/// symlink), leaving out the `user.dwarfs.*` ones a mount of an image adds
/// of its own.
fn xattrs_of(full: &Path) -> Result<Option<BTreeMap<String, XattrValue>>> {
    let cannot = || format!("cannot read extended attributes of '{}'", full.display());
    let names = match xattr::list(full) {
        Ok(names) => names,
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(None),
        Err(e) => return Err(e).with_context(cannot),
    };
    let mut attrs = Vec::new();
    for name in names {
        if name.as_bytes().starts_with(b"user.dwarfs.") {
            continue;
        }
        if let Some(value) = xattr::get(full, &name).with_context(cannot)? {
            attrs.push((name.as_bytes().to_vec(), value));
        }
    }
    Ok(super::xattr_map(attrs))
}

/// SHA-256 of the file at `path`, in hex.
fn sha256_of(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open '{}'", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(super::hex(&hasher.finalize()))
}
