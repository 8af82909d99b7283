//! cpio "new ASCII" (`newc`, the SVR4 format without CRC that GNU cpio,
//! bsdcpio and the Linux initramfs read), written here: a header of
//! thirteen 8-digit hex fields, the name, the data, each padded to 4
//! bytes, and a `TRAILER!!!` entry. Hard links share an inode number; as
//! GNU cpio writes them, only the last link carries the data.

use super::{ArchiveWriter, Entry};
use anyhow::{bail, Context, Result};
use hoard_reader::inode::{dev_major, dev_minor};
use hoard_reader::FileKind;
use std::io::Write;

/// Writes newc entries.
pub struct CpioWriter<'w> {
    out: &'w mut dyn Write,
}

impl<'w> CpioWriter<'w> {
    /// A writer of a cpio archive to `out`.
    pub fn new(out: &'w mut dyn Write) -> Self {
        CpioWriter { out }
    }
}

/// The fields of a newc header after the magic, in order.
struct Fields {
    ino: u32,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    mtime: u32,
    size: u32,
    rdev_major: u32,
    rdev_minor: u32,
}

fn padding(len: usize) -> &'static [u8] {
    &[0u8; 3][..(4 - len % 4) % 4]
}

impl CpioWriter<'_> {
    fn header(&mut self, f: &Fields, name: &[u8]) -> Result<()> {
        let mut h = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            f.ino,
            f.mode,
            f.uid,
            f.gid,
            f.nlink,
            f.mtime,
            f.size,
            0, // device of the file system: one for the whole archive
            0,
            f.rdev_major,
            f.rdev_minor,
            name.len() + 1,
            0, // checksum, unused by newc
        )
        .into_bytes();
        h.extend_from_slice(name);
        h.push(0);
        h.extend_from_slice(padding(h.len()));
        self.out.write_all(&h)?;
        Ok(())
    }
}

impl ArchiveWriter for CpioWriter<'_> {
    fn entry(&mut self, e: &Entry<'_>) -> Result<()> {
        let st = &e.stat;
        let name: &[u8] = if e.path.is_empty() { b"." } else { e.path };
        let what = || format!("cpio entry '{}'", String::from_utf8_lossy(e.path));
        let data_size = match st.kind {
            FileKind::Regular if e.last_link => st.size,
            FileKind::Symlink => e.target.map_or(0, |t| t.len() as u64),
            _ => 0,
        };
        let Ok(size) = u32::try_from(data_size) else {
            bail!(
                "{}: cpio newc cannot hold files of 4 GiB or more",
                String::from_utf8_lossy(e.path)
            );
        };
        let fields = Fields {
            // Inode 0 is left unused.
            ino: st.ino + 1,
            mode: st.mode,
            uid: st.uid,
            gid: st.gid,
            nlink: if st.kind == FileKind::Regular {
                e.links
            } else {
                st.nlink
            },
            mtime: st.mtime.sec.clamp(0, i64::from(u32::MAX)) as u32,
            size,
            rdev_major: dev_major(st.rdev),
            rdev_minor: dev_minor(st.rdev),
        };
        self.header(&fields, name).with_context(what)?;
        let written = match (st.kind, e.target) {
            (FileKind::Symlink, Some(t)) => {
                self.out.write_all(t)?;
                t.len() as u64
            }
            (FileKind::Regular, _) if size > 0 => {
                std::io::copy(&mut e.contents(), &mut self.out).with_context(what)?
            }
            _ => 0,
        };
        self.out.write_all(padding(written as usize))?;
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let trailer = Fields {
            ino: 0,
            mode: 0,
            uid: 0,
            gid: 0,
            nlink: 1,
            mtime: 0,
            size: 0,
            rdev_major: 0,
            rdev_minor: 0,
        };
        self.header(&trailer, b"TRAILER!!!")?;
        self.out.flush()?;
        Ok(())
    }
}
