//! A stack of images read as one tree (`hoard rewrite LOWER... UPPER -o
//! FLAT`): the merged tree of the layers (overlayfs rules, see
//! `hoard_reader::stack`) becomes the [`Tree`](crate::tree::Tree) a
//! directory scan gives, as an archive's does: file contents are read
//! from the images into a spool beside the output (each file once; the
//! later stages read them more than once, in an order of their own).
//! Devices, fifos and sockets are kept, and hard links stay links.
//!
//! [`crate::flatten`] and [`crate::merge`] build from such trees too,
//! copying the images' blocks instead of spooling contents.

use super::images::{block_cache, open_stack};
use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::options::CreateOptions;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
use hoard_reader::{FileKind, Filesystem, Located, Stack, Stat, View, ViewExt};
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// Opens the images at `paths` as a stack, bottom first, as they are:
/// the front end checked the layers lie on each other.
pub(crate) fn open(paths: &[PathBuf], options: &CreateOptions) -> Result<Stack> {
    open_stack(paths, options, &block_cache()?, true)
}

/// An error of the images read.
pub(crate) fn image_error(e: hoard_reader::Error) -> Error {
    Error::Input(e.to_string())
}

/// Reads the stack of the images at `paths` (bottom first) into a tree,
/// as `scan` says.
pub(crate) fn scan_stack(
    paths: &[PathBuf],
    options: &CreateOptions,
    scan: &ScanOptions,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let stack = open(paths, options)?;
    let scan = image_scan_options(scan);
    let spool = Spool::new(scan.spool_dir.as_deref())?;
    let mut builder = Builder::new(&scan, options.filter.as_ref(), progress, spool);
    add_stack(&mut builder, &stack, b"", &mut spool_contents)?;
    Ok(builder.finish())
}

/// Copies the contents of the file at `at` (`size` bytes) to `spool`.
pub(crate) fn spool_contents(spool: &mut Spool, at: &Located, size: u64) -> Result<PathBuf> {
    let mut contents = Contents {
        fs: at.fs.clone(),
        ino: at.ino,
        offset: 0,
    };
    spool.store(&mut contents, size, true)
}

/// `options` for reading images: devices, fifos and sockets are kept.
pub(crate) fn image_scan_options(options: &ScanOptions) -> ScanOptions {
    let mut options = options.clone();
    options.with_devices = true;
    options.with_specials = true;
    options
}

/// Adds the tree of `stack` to `builder`, its root at `prefix` (empty:
/// the root); `contents` gives each regular file (the first of its
/// names) the path its contents are read from.
pub(crate) fn add_stack(
    builder: &mut Builder<'_>,
    stack: &Stack,
    prefix: &[u8],
    contents: &mut dyn FnMut(&mut Spool, &Located, u64) -> Result<PathBuf>,
) -> Result<()> {
    let nodes = stack.walk(stack.root(), prefix).map_err(image_error)?;
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
                    let source = contents(&mut builder.spool, &at, st.size)?;
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
        builder.add(Member {
            path: node.path,
            kind,
            attrs: attrs_of(&st),
            xattrs: stack.xattrs(node.ino).map_err(image_error)?,
        })?;
    }
    Ok(())
}

/// The owner, mode and times of an entry of an image.
pub(crate) fn attrs_of(st: &Stat) -> Attrs {
    let time = |t: hoard_reader::Time| Time {
        sec: t.sec,
        nsec: t.nsec,
    };
    Attrs {
        mode: st.mode,
        uid: st.uid,
        gid: st.gid,
        atime: time(st.atime),
        mtime: time(st.mtime),
        ctime: time(st.ctime),
    }
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
