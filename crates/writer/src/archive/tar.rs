//! tar members (ustar, GNU with long names and sparse files, pax with
//! long names, sub-second times, large ids, extended attributes, text ACLs
//! and sparse files of GNU format 1.0) through the `tar` crate's reader.

use super::{acl, pax, time, Builder, Member, MemberKind};
use crate::tree::Attrs;
use crate::{Error, Result};
use hoard_format::xattrs::Xattr;
use std::io::Read;
use tar::EntryType;

fn bad(e: impl std::fmt::Display) -> Error {
    Error::Input(format!("not a valid tar archive: {e}"))
}

/// Remembers whether the last 512 bytes read were zeros: a tar archive
/// ends with zero blocks, a truncated one does not.
struct EndCheck<R> {
    inner: R,
    last: Vec<u8>,
    total: u64,
}

impl<R: Read> Read for EndCheck<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let got = &buf[..n];
        if n >= 512 {
            self.last.clear();
            self.last.extend_from_slice(&got[n - 512..]);
        } else {
            self.last.extend_from_slice(got);
            let extra = self.last.len().saturating_sub(512);
            self.last.drain(..extra);
        }
        self.total += n as u64;
        Ok(n)
    }
}

/// A pax time (`SECONDS[.FRACTION]`).
fn pax_time(v: &[u8]) -> Option<(i64, u32)> {
    let s = std::str::from_utf8(v).ok()?;
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let sec: i64 = sec.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    let nsec = if digits.is_empty() {
        0
    } else {
        digits.parse::<u32>().ok()? * 10u32.pow(9 - digits.len() as u32)
    };
    Some((sec, nsec))
}

/// What the pax records of a member say.
#[derive(Default)]
struct Pax {
    mtime: Option<(i64, u32)>,
    atime: Option<(i64, u32)>,
    ctime: Option<(i64, u32)>,
    uid: Option<u32>,
    gid: Option<u32>,
    /// Long names (the `tar` crate's own reading of them stops at a value
    /// holding a newline).
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    xattrs: Vec<Xattr>,
    /// Text ACLs (`SCHILY.acl.access`, `SCHILY.acl.default`).
    acl_access: Option<Vec<u8>>,
    acl_default: Option<Vec<u8>>,
    sparse_name: Option<Vec<u8>>,
    sparse_major: Option<Vec<u8>>,
    sparse_size: Option<u64>,
}

/// What the pax header `data` of a member says.
fn pax(data: Option<&[u8]>) -> Pax {
    let mut p = Pax::default();
    for (key, value) in data.map(pax::records).into_iter().flatten() {
        let number = || -> Option<u64> { std::str::from_utf8(value).ok()?.parse().ok() };
        let id = || number().and_then(|n| u32::try_from(n).ok());
        match key {
            b"mtime" => p.mtime = pax_time(value),
            b"atime" => p.atime = pax_time(value),
            b"ctime" => p.ctime = pax_time(value),
            b"uid" => p.uid = id(),
            b"gid" => p.gid = id(),
            b"path" => p.path = Some(value.to_vec()),
            b"linkpath" => p.linkpath = Some(value.to_vec()),
            b"SCHILY.acl.access" => p.acl_access = Some(value.to_vec()),
            b"SCHILY.acl.default" => p.acl_default = Some(value.to_vec()),
            b"GNU.sparse.name" => p.sparse_name = Some(value.to_vec()),
            b"GNU.sparse.major" => p.sparse_major = Some(value.to_vec()),
            b"GNU.sparse.realsize" => p.sparse_size = number(),
            _ => {
                if let Some(name) = key.strip_prefix(b"SCHILY.xattr.") {
                    p.xattrs.push((name.to_vec(), value.to_vec()));
                }
            }
        }
    }
    p
}

/// Reads the map of a pax sparse file (format 1.0): decimal lines, the
/// count then offset and length of each range, padded to 512 bytes.
fn sparse_map(data: &mut dyn Read) -> Result<(Vec<(u64, u64)>, u64)> {
    let mut consumed = 0u64;
    let mut number = || -> Result<u64> {
        let mut text = Vec::new();
        loop {
            let mut b = [0u8];
            data.read_exact(&mut b).map_err(bad)?;
            consumed += 1;
            if b[0] == b'\n' {
                break;
            }
            if text.len() > 20 {
                return Err(bad("sparse map number too long"));
            }
            text.push(b[0]);
        }
        std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("sparse map is not numbers"))
    };
    let count = number()?;
    let mut ranges = Vec::new();
    for _ in 0..count {
        ranges.push((number()?, number()?));
    }
    Ok((ranges, consumed))
}

/// Reads every member of the tar stream `input` into `b`.
pub(super) fn read(input: &mut dyn Read, b: &mut Builder<'_>) -> Result<()> {
    let mut check = EndCheck {
        inner: input,
        last: Vec::new(),
        total: 0,
    };
    {
        let last_pax = pax::LastPax::default();
        let mut archive = tar::Archive::new(pax::PaxTap::new(&mut check, last_pax.clone()));
        for entry in archive.entries().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            let p = pax(last_pax.borrow().as_deref());
            let h = entry.header().clone();
            let kind = h.entry_type();
            if matches!(kind, EntryType::XGlobalHeader) {
                continue;
            }
            let num = |r: std::io::Result<u64>| r.map_err(bad);
            let mtime = p.mtime.unwrap_or((num(h.mtime())? as i64, 0));
            let mode = h.mode().map_err(bad)? & 0o7777;
            let attrs = |type_bits: u32| Attrs {
                mode: type_bits | mode,
                uid: p.uid.unwrap_or(num(h.uid()).unwrap_or(0) as u32),
                gid: p.gid.unwrap_or(num(h.gid()).unwrap_or(0) as u32),
                mtime: time(mtime.0, mtime.1),
                atime: p.atime.map_or(time(mtime.0, mtime.1), |t| time(t.0, t.1)),
                ctime: p.ctime.map_or(time(mtime.0, mtime.1), |t| time(t.0, t.1)),
            };
            let rdev = || -> Result<u64> {
                let major = u64::from(h.device_major().map_err(bad)?.unwrap_or(0));
                let minor = u64::from(h.device_minor().map_err(bad)?.unwrap_or(0));
                Ok(((major & 0xfff) << 8)
                    | ((major & !0xfff) << 32)
                    | (minor & 0xff)
                    | ((minor & !0xff) << 12))
            };
            let link = || -> Result<Vec<u8>> {
                p.linkpath
                    .clone()
                    .or_else(|| entry.link_name_bytes().map(|l| l.into_owned()))
                    .ok_or_else(|| bad("link without a target"))
            };
            let (kind, type_bits) = match kind {
                EntryType::Directory => (MemberKind::Dir, libc::S_IFDIR),
                EntryType::Symlink => (MemberKind::Symlink(link()?), libc::S_IFLNK),
                EntryType::Link => (MemberKind::HardLink(link()?), libc::S_IFREG),
                EntryType::Char => (MemberKind::Device(rdev()?), libc::S_IFCHR),
                EntryType::Block => (MemberKind::Device(rdev()?), libc::S_IFBLK),
                EntryType::Fifo => (MemberKind::Special, libc::S_IFIFO),
                EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                    (MemberKind::Special, libc::S_IFREG)
                }
                other => {
                    return Err(bad(format!(
                        "entry '{}' has an unknown type {:?}",
                        String::from_utf8_lossy(&entry.path_bytes()),
                        other.as_byte() as char
                    )))
                }
            };
            let attrs = attrs(type_bits);
            let mut path = p
                .path
                .clone()
                .unwrap_or_else(|| entry.path_bytes().into_owned());
            let kind = if type_bits == libc::S_IFREG && !matches!(kind, MemberKind::HardLink(_)) {
                let gnu_sparse = h.entry_type() == EntryType::GNUSparse;
                match (&p.sparse_major, p.sparse_size) {
                    (Some(major), Some(size)) if major == b"1" => {
                        if let Some(name) = &p.sparse_name {
                            path = name.clone();
                        }
                        let (ranges, map_len) = sparse_map(&mut entry)?;
                        // The map is padded to a whole block.
                        let pad = map_len.div_ceil(512) * 512 - map_len;
                        std::io::copy(&mut (&mut entry).take(pad), &mut std::io::sink())
                            .map_err(bad)?;
                        let source = b.spool.store_ranges(&mut entry, &ranges, size)?;
                        MemberKind::File { source, size }
                    }
                    (Some(_), _) => {
                        return Err(bad("only GNU pax sparse format 1.0 is supported"));
                    }
                    _ => {
                        let size = entry.size();
                        let source = b.spool.store(&mut entry, size, gnu_sparse)?;
                        MemberKind::File { source, size }
                    }
                }
            } else {
                kind
            };
            let mut xattrs = p.xattrs;
            let acls = [
                (p.acl_access, &b"system.posix_acl_access"[..], false),
                (p.acl_default, b"system.posix_acl_default", true),
            ];
            for (text, name, default) in acls {
                let Some(text) = text else { continue };
                // An attribute stored as such (`--xattrs`) wins.
                if xattrs.iter().any(|(n, _)| n == name) {
                    continue;
                }
                match acl::to_xattr(&text, default) {
                    Ok(Some(value)) => xattrs.push((name.to_vec(), value)),
                    Ok(None) => {}
                    Err(why) => b.warn(format!(
                        "'{}': {} ACL left out: {why}",
                        String::from_utf8_lossy(&path),
                        if default { "default" } else { "access" }
                    )),
                }
            }
            b.add(Member {
                path,
                kind,
                attrs,
                xattrs,
            })?;
        }
    }
    if check.total == 0 {
        return Err(Error::Input("empty input: not an archive".into()));
    }
    if check.last.len() < 512 || check.last.iter().any(|&x| x != 0) {
        return Err(Error::Input(
            "the archive ends early (no end-of-archive blocks)".into(),
        ));
    }
    Ok(())
}
