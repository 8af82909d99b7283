//! tar, through the `tar` crate's headers: POSIX (ustar headers with pax
//! extended records where ustar falls short) or GNU (long names as GNU
//! records).

use super::{ArchiveWriter, Entry};
use anyhow::{Context, Result};
use hoard_reader::inode::{dev_major, dev_minor};
use hoard_reader::FileKind;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use tar::{Builder, EntryType, Header};

/// Which tar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// POSIX.1-2001 (pax).
    Pax,
    /// GNU.
    Gnu,
}

/// Largest size a ustar header holds (11 octal digits).
const USTAR_MAX_SIZE: u64 = 0o77777777777;
/// Largest id a ustar header holds (7 octal digits).
const USTAR_MAX_ID: u32 = 0o7777777;

/// Writes tar entries.
pub struct TarWriter<'w> {
    builder: Builder<&'w mut dyn Write>,
    flavor: Flavor,
}

impl<'w> TarWriter<'w> {
    /// A writer of `flavor` archives to `out`.
    pub fn new(out: &'w mut dyn Write, flavor: Flavor) -> Self {
        TarWriter {
            builder: Builder::new(out),
            flavor,
        }
    }
}

/// The entry's path as the archive names it (`./` for the root).
fn archive_path(e: &Entry<'_>) -> Vec<u8> {
    if e.path.is_empty() {
        b"./".to_vec()
    } else {
        e.path.to_vec()
    }
}

fn entry_type(e: &Entry<'_>) -> EntryType {
    if e.first_link.is_some() {
        return EntryType::Link;
    }
    match e.stat.kind {
        FileKind::Directory => EntryType::Directory,
        FileKind::Symlink => EntryType::Symlink,
        FileKind::CharDevice => EntryType::Char,
        FileKind::BlockDevice => EntryType::Block,
        FileKind::Fifo => EntryType::Fifo,
        FileKind::Regular | FileKind::Socket => EntryType::Regular,
    }
}

/// One pax record: `LEN KEY=VALUE\n`, LEN counting itself.
fn pax_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    out.extend_from_slice(len.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b'=');
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// A pax sparse file (GNU format 1.0): the map (entry count, then offset
/// and length of each data range, in decimal lines, padded to 512 bytes),
/// then the data ranges, back to back.
struct Sparse {
    map: Vec<u8>,
    ranges: Vec<(u64, u64)>,
}

impl Sparse {
    fn new(mut ranges: Vec<(u64, u64)>, real_size: u64) -> Self {
        // A file ending in a hole ends with an empty range at its size.
        if ranges.last().is_none_or(|&(o, l)| o + l < real_size) {
            ranges.push((real_size, 0));
        }
        let mut map = format!("{}\n", ranges.len());
        for (offset, len) in &ranges {
            map.push_str(&format!("{offset}\n{len}\n"));
        }
        let mut map = map.into_bytes();
        map.resize(map.len().div_ceil(512) * 512, 0);
        Sparse { map, ranges }
    }

    /// Bytes the entry holds: the map and the data.
    fn stored_size(&self) -> u64 {
        self.map.len() as u64 + self.ranges.iter().map(|r| r.1).sum::<u64>()
    }
}

/// The map, then each data range of the file.
struct SparseReader<'a> {
    map: std::io::Cursor<Vec<u8>>,
    ranges: std::vec::IntoIter<super::Contents<'a>>,
    current: Option<super::Contents<'a>>,
}

impl std::io::Read for SparseReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.map.read(buf)?;
        if n > 0 {
            return Ok(n);
        }
        loop {
            if let Some(c) = &mut self.current {
                let n = c.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
            }
            match self.ranges.next() {
                Some(next) => self.current = Some(next),
                None => return Ok(0),
            }
        }
    }
}

/// Puts as much of `name` as fits into a header name field.
fn truncated(field: &mut [u8], name: &[u8]) {
    let n = name.len().min(field.len());
    field.fill(0);
    field[..n].copy_from_slice(&name[..n]);
}

impl TarWriter<'_> {
    /// The header of `e` with everything but its path and link name.
    fn header(&self, e: &Entry<'_>) -> Result<Header> {
        let st = &e.stat;
        let mut h = match self.flavor {
            Flavor::Pax => Header::new_ustar(),
            Flavor::Gnu => Header::new_gnu(),
        };
        h.set_entry_type(entry_type(e));
        h.set_mode(st.mode & 0o7777);
        // pax records carry larger ids; GNU headers hold them in binary.
        let id = |v: u32| match self.flavor {
            Flavor::Pax => u64::from(v.min(USTAR_MAX_ID)),
            Flavor::Gnu => u64::from(v),
        };
        h.set_uid(id(st.uid));
        h.set_gid(id(st.gid));
        h.set_mtime(st.mtime.sec.max(0) as u64);
        let size = if st.kind == FileKind::Regular && e.first_link.is_none() {
            st.size
        } else {
            0
        };
        h.set_size(size);
        if matches!(st.kind, FileKind::CharDevice | FileKind::BlockDevice) {
            h.set_device_major(dev_major(st.rdev))?;
            h.set_device_minor(dev_minor(st.rdev))?;
        }
        Ok(h)
    }

    /// pax: the records ustar cannot hold, then the ustar entry (a sparse
    /// file's under a `GNUSparseFile.0/` name, its real name in a record).
    fn pax_entry(&mut self, e: &Entry<'_>, mut h: Header) -> Result<()> {
        let st = &e.stat;
        let mut path = archive_path(e);
        let mut records = Vec::new();
        let sparse = match h.entry_type() {
            EntryType::Regular => e.data_ranges()?.map(|r| Sparse::new(r, st.size)),
            _ => None,
        };
        if let Some(s) = &sparse {
            pax_record(&mut records, b"GNU.sparse.major", b"1");
            pax_record(&mut records, b"GNU.sparse.minor", b"0");
            pax_record(&mut records, b"GNU.sparse.name", &path);
            pax_record(
                &mut records,
                b"GNU.sparse.realsize",
                st.size.to_string().as_bytes(),
            );
            h.set_size(s.stored_size());
            let cut = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
            path.splice(cut..cut, b"GNUSparseFile.0/".iter().copied());
        }
        if h.set_path(OsStr::from_bytes(&path)).is_err() {
            // A sparse file's real name is in GNU.sparse.name, which a
            // later `path` record would override.
            if sparse.is_none() {
                pax_record(&mut records, b"path", &path);
            }
            if let Some(ustar) = h.as_ustar_mut() {
                ustar.prefix.fill(0);
            }
            truncated(&mut h.as_old_mut().name, &path);
        }
        let link = e.first_link.or(e.target);
        if let Some(link) = link {
            if h.set_link_name_literal(link).is_err() {
                pax_record(&mut records, b"linkpath", link);
                truncated(&mut h.as_old_mut().linkname, link);
            }
        }
        let time = |t: hoard_reader::Time| format!("{}.{:09}", t.sec, t.nsec);
        pax_record(&mut records, b"mtime", time(st.mtime).as_bytes());
        pax_record(&mut records, b"atime", time(st.atime).as_bytes());
        if st.uid > USTAR_MAX_ID {
            pax_record(&mut records, b"uid", st.uid.to_string().as_bytes());
        }
        if st.gid > USTAR_MAX_ID {
            pax_record(&mut records, b"gid", st.gid.to_string().as_bytes());
        }
        if h.size()? > USTAR_MAX_SIZE {
            pax_record(&mut records, b"size", h.size()?.to_string().as_bytes());
        }
        for (name, value) in &e.xattrs {
            let mut key = b"SCHILY.xattr.".to_vec();
            key.extend_from_slice(name);
            pax_record(&mut records, &key, value);
        }
        let mut x = Header::new_ustar();
        x.set_entry_type(EntryType::XHeader);
        let mut xname = b"PaxHeaders/".to_vec();
        let base = path.rsplit(|&b| b == b'/').find(|s| !s.is_empty());
        xname.extend_from_slice(base.unwrap_or(b"."));
        truncated(&mut x.as_old_mut().name, &xname);
        x.set_mode(0o644);
        x.set_size(records.len() as u64);
        x.set_mtime(st.mtime.sec.max(0) as u64);
        x.set_cksum();
        self.builder.append(&x, records.as_slice())?;
        h.set_cksum();
        if let Some(s) = sparse {
            let ranges: Vec<_> = s.ranges.iter().map(|&(o, l)| e.range(o, o + l)).collect();
            let reader = SparseReader {
                map: std::io::Cursor::new(s.map),
                ranges: ranges.into_iter(),
                current: None,
            };
            self.builder.append(&h, reader)?;
        } else if h.entry_type() == EntryType::Regular {
            self.builder.append(&h, e.contents())?;
        } else {
            self.builder.append(&h, std::io::empty())?;
        }
        Ok(())
    }

    /// GNU: the crate writes long names and link targets as GNU records.
    fn gnu_entry(&mut self, e: &Entry<'_>, mut h: Header) -> Result<()> {
        let path = archive_path(e);
        let path = OsStr::from_bytes(&path);
        match e.first_link.or(e.target) {
            Some(link) => self
                .builder
                .append_link(&mut h, path, OsStr::from_bytes(link))?,
            None if h.entry_type() == EntryType::Regular => {
                self.builder.append_data(&mut h, path, e.contents())?
            }
            None => self.builder.append_data(&mut h, path, std::io::empty())?,
        }
        Ok(())
    }
}

impl ArchiveWriter for TarWriter<'_> {
    fn entry(&mut self, e: &Entry<'_>) -> Result<()> {
        let h = self.header(e)?;
        let what = || format!("tar entry '{}'", String::from_utf8_lossy(e.path));
        match self.flavor {
            Flavor::Pax => self.pax_entry(e, h).with_context(what),
            Flavor::Gnu => self.gnu_entry(e, h).with_context(what),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.builder.finish()?;
        Ok(())
    }
}
