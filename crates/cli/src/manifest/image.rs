//! The manifest of an image, read directly (no mount): what a mount of it
//! shows.

use super::{Entry, Facts};
use anyhow::{Context, Result};
use hoard_reader::inode::{dev_major, dev_minor};
use hoard_reader::{ContentPiece, FileKind, Filesystem};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

/// The manifest entries of the whole tree of `fs`, file contents hashed in
/// parallel.
pub fn manifest(fs: &Filesystem) -> Result<Vec<Entry>> {
    let nodes = hoard_reader::walk::walk(fs, fs.root(), b"")?;
    let facts = nodes
        .par_iter()
        .map(|node| -> Result<Facts> {
            let st = fs.stat(node.ino)?;
            let show = || String::from_utf8_lossy(&node.path).into_owned();
            let target = match node.kind {
                FileKind::Symlink => Some(fs.readlink(node.ino)?.to_vec()),
                _ => None,
            };
            let sha256 = match node.kind {
                FileKind::Regular => Some(
                    sha256_of(fs, node.ino).with_context(|| format!("cannot read '{}'", show()))?,
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
                inode: (0, u64::from(node.ino)),
                target,
                rdev,
                sha256,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(super::entries(facts))
}

/// SHA-256 of the contents of regular file `ino`, in hex.
fn sha256_of(fs: &Filesystem, ino: u32) -> Result<String> {
    let mut hasher = Sha256::new();
    let zeros = [0u8; 1 << 16];
    fs.read_all(ino, |piece| {
        match piece {
            ContentPiece::Data(bytes) => hasher.update(bytes),
            ContentPiece::Hole(mut n) => {
                while n > 0 {
                    let k = n.min(zeros.len() as u64) as usize;
                    hasher.update(&zeros[..k]);
                    n -= k as u64;
                }
            }
        }
        Ok(())
    })?;
    Ok(super::hex(&hasher.finalize()))
}
