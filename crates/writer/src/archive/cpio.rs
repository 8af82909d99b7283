//! cpio "new ASCII" members (`070701`, and `070702` whose checksums are
//! not checked): a header of thirteen 8-digit hex fields, the name and the
//! data, each padded to 4 bytes, up to `TRAILER!!!`. Hard links share
//! (device, inode); the data may come with any one of them (GNU cpio puts
//! it on the last).

use super::{time, Builder, Member, MemberKind};
use crate::tree::Attrs;
use crate::{Error, Result};
use std::collections::HashMap;
use std::io::Read;

fn bad(e: impl std::fmt::Display) -> Error {
    Error::Input(format!("not a valid cpio archive: {e}"))
}

/// Reads exactly `buf.len()` bytes; running out is a truncated archive.
fn fill(input: &mut dyn Read, buf: &mut [u8]) -> Result<()> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::Input("the archive ends early (no TRAILER!!! entry)".into())
        } else {
            Error::Input(format!("cannot read the archive: {e}"))
        }
    })
}

fn skip(input: &mut dyn Read, n: u64) -> Result<()> {
    let mut pad = [0u8; 4];
    fill(input, &mut pad[..n as usize])
}

fn padding(len: u64) -> u64 {
    (4 - len % 4) % 4
}

/// Reads every member of the cpio stream `input` into `b`.
pub(super) fn read(input: &mut dyn Read, b: &mut Builder<'_>) -> Result<()> {
    // Path of the first link of each (device major, minor, inode).
    let mut links: HashMap<(u32, u32, u32), Vec<u8>> = HashMap::new();
    loop {
        let mut header = [0u8; 110];
        fill(input, &mut header)?;
        if &header[..6] != b"070701" && &header[..6] != b"070702" {
            return Err(bad("bad magic (only the newc format is read)"));
        }
        let mut field = [0u32; 13];
        for (i, f) in field.iter_mut().enumerate() {
            let hex = std::str::from_utf8(&header[6 + 8 * i..14 + 8 * i]).map_err(bad)?;
            *f = u32::from_str_radix(hex, 16).map_err(|_| bad("header field is not hex"))?;
        }
        let [ino, mode, uid, gid, nlink, mtime, size, dev_major, dev_minor, rdev_major, rdev_minor, name_size, _] =
            field;
        if name_size == 0 || name_size > 1 << 16 {
            return Err(bad("bad name size"));
        }
        let mut name = vec![0u8; name_size as usize];
        fill(input, &mut name)?;
        skip(input, padding(110 + u64::from(name_size)))?;
        name.pop(); // the NUL
        if name == b"TRAILER!!!" {
            return Ok(());
        }
        let attrs = Attrs {
            mode,
            uid,
            gid,
            mtime: time(i64::from(mtime), 0),
            atime: time(i64::from(mtime), 0),
            ctime: time(i64::from(mtime), 0),
        };
        let size = u64::from(size);
        let kind = match mode & libc::S_IFMT {
            libc::S_IFDIR => MemberKind::Dir,
            libc::S_IFLNK => {
                if size > 1 << 16 {
                    return Err(bad("symlink target longer than 64 KiB"));
                }
                let mut target = vec![0u8; size as usize];
                fill(input, &mut target)?;
                MemberKind::Symlink(target)
            }
            libc::S_IFREG => {
                let key = (dev_major, dev_minor, ino);
                let first = (nlink > 1).then(|| links.get(&key).cloned()).flatten();
                match first {
                    Some(first) => {
                        if size > 0 {
                            let source = b.spool.store(input, size, false)?;
                            b.replace_contents(&first, source, size)?;
                        }
                        MemberKind::HardLink(first)
                    }
                    None => {
                        if nlink > 1 {
                            links.insert(key, name.clone());
                        }
                        let source = b.spool.store(input, size, false)?;
                        MemberKind::File { source, size }
                    }
                }
            }
            libc::S_IFCHR | libc::S_IFBLK => {
                let (major, minor) = (u64::from(rdev_major), u64::from(rdev_minor));
                MemberKind::Device(
                    ((major & 0xfff) << 8)
                        | ((major & !0xfff) << 32)
                        | (minor & 0xff)
                        | ((minor & !0xff) << 12),
                )
            }
            libc::S_IFIFO | libc::S_IFSOCK => MemberKind::Special,
            _ => {
                return Err(bad(format!(
                    "'{}' has an unknown type (mode {mode:o})",
                    String::from_utf8_lossy(&name)
                )))
            }
        };
        if !matches!(
            kind,
            MemberKind::File { .. } | MemberKind::HardLink(_) | MemberKind::Symlink(_)
        ) {
            // Other entries carry no data, but skip any they claim.
            let mut rest = (&mut *input).take(size);
            std::io::copy(&mut rest, &mut std::io::sink()).map_err(bad)?;
        }
        skip(input, padding(size))?;
        b.add(Member {
            path: name,
            kind,
            attrs,
            xattrs: Vec::new(),
        })?;
    }
}
