//! Stage 1 for a stack of images (`hoard rewrite LOWER... UPPER -o
//! FLAT`): the merged tree of the layers (overlayfs rules, see
//! `hoard_reader::stack`) becomes the [`Tree`](crate::tree::Tree) a
//! directory scan gives, as an archive's does: file contents are read
//! from the images into a spool beside the output (each file once; the
//! later stages read them more than once, in an order of their own).
//! Devices, fifos and sockets are kept, and hard links stay links.

use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
use hoard_reader::{FileKind, Filesystem, Stack, View, ViewExt};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads the stack of the images at `layers` (bottom first) into a tree.
pub fn scan_stack(
    layers: &[PathBuf],
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let paths: Vec<&Path> = layers.iter().map(PathBuf::as_path).collect();
    let reading = hoard_reader::FsOptions {
        cache_size: 64 << 20,
        ..hoard_reader::FsOptions::default()
    };
    let stack = Stack::open(&paths, &reading)
        .map_err(|e| Error::Input(format!("cannot open image {e}")))?;
    let mut options = options.clone();
    options.with_devices = true;
    options.with_specials = true;
    let spool = Spool::new(options.spool_dir.as_deref())?;
    let mut builder = Builder::new(&options, filter, progress, spool);
    let image_error = |e: hoard_reader::Error| Error::Input(e.to_string());
    let nodes = stack.walk(stack.root(), b"").map_err(image_error)?;
    // The first path of each regular file, for its other names.
    let mut first_path: HashMap<u64, Vec<u8>> = HashMap::new();
    for node in nodes {
        let st = stack.stat(node.ino).map_err(image_error)?;
        let kind = match node.kind {
            FileKind::Directory => MemberKind::Dir,
            FileKind::Regular => match first_path.get(&node.ino) {
                Some(first) => MemberKind::HardLink(first.clone()),
                None => {
                    first_path.insert(node.ino, node.path.clone());
                    let at = stack.locate(node.ino).map_err(image_error)?;
                    let mut contents = Contents {
                        fs: at.fs,
                        ino: at.ino,
                        offset: 0,
                    };
                    let source = builder.spool.store(&mut contents, st.size, true)?;
                    MemberKind::File {
                        source,
                        size: st.size,
                    }
                }
            },
            FileKind::Symlink => {
                MemberKind::Symlink(stack.readlink(node.ino).map_err(image_error)?)
            }
            FileKind::CharDevice | FileKind::BlockDevice => MemberKind::Device(st.rdev),
            FileKind::Fifo | FileKind::Socket => MemberKind::Special,
        };
        let time = |t: hoard_reader::Time| Time {
            sec: t.sec,
            nsec: t.nsec,
        };
        builder.add(Member {
            path: node.path,
            kind,
            attrs: Attrs {
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
                atime: time(st.atime),
                mtime: time(st.mtime),
                ctime: time(st.ctime),
            },
            xattrs: stack.xattrs(node.ino).map_err(image_error)?,
        })?;
    }
    Ok(builder.finish())
}

/// A regular file of an image, read from the start.
struct Contents {
    fs: Arc<Filesystem>,
    ino: u32,
    offset: u64,
}

impl Read for Contents {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .fs
            .read(self.ino, self.offset, buf)
            .map_err(std::io::Error::other)?;
        self.offset += n as u64;
        Ok(n)
    }
}
