//! The manifest of an image, read directly (no mount): what a mount of it
//! shows.

use super::{Entry, Facts};
use crate::args::ChecksumAlgo;
use crate::checksum::file_checksum;
use anyhow::{Context, Result};
use hoard_reader::inode::{dev_major, dev_minor};
use hoard_reader::{FileKind, View, ViewExt};
use rayon::prelude::*;

/// The manifest entries of the whole tree of `fs` (an image or a stack
/// of them), file contents hashed in parallel.
pub fn manifest(fs: &dyn View) -> Result<Vec<Entry>> {
    let nodes = fs.walk(fs.root(), b"")?;
    let facts = nodes
        .par_iter()
        .map(|node| -> Result<Facts> {
            let st = fs.stat(node.ino)?;
            let show = || String::from_utf8_lossy(&node.path).into_owned();
            let target = match node.kind {
                FileKind::Symlink => Some(fs.readlink(node.ino)?),
                _ => None,
            };
            let sha256 = match node.kind {
                FileKind::Regular => Some(
                    fs.locate(node.ino)
                        .map_err(anyhow::Error::from)
                        .and_then(|at| file_checksum(&at.fs, at.ino, ChecksumAlgo::Sha256))
                        .with_context(|| format!("cannot read '{}'", show()))?,
                ),
                _ => None,
            };
            let rdev = matches!(node.kind, FileKind::CharDevice | FileKind::BlockDevice)
                .then(|| [dev_major(st.rdev), dev_minor(st.rdev)]);
            Ok(Facts {
                path: node.path.clone(),
                kind: match node.kind {
                    FileKind::Regular => 'f',
                    other => other.letter(),
                },
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
                size: st.size,
                mtime: (st.mtime.sec, st.mtime.nsec),
                nlink: u64::from(st.nlink),
                inode: (0, node.ino),
                target,
                rdev,
                sha256,
                xattrs: super::xattr_map(fs.xattrs(node.ino)?),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(super::entries(facts))
}
