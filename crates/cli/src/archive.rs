//! `hoard extract --format`: the selected entries of an image written as
//! one archive stream (tar with pax records, GNU tar, cpio newc or zip)
//! through `hoard-archive`, straight from the image to a file or a pipe:
//! no temporary tree, file contents read block by block while they are
//! written.

use anyhow::Result;
use hoard_archive::{ArchiveWriter, Kind, Links, Member, Time};
use hoard_reader::{Extent, FileKind, Located, Stat, View, ViewNode as Node};
use std::collections::HashMap;
use std::io::{Read, Write};

/// An archive format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// POSIX tar with pax records: long names, nanosecond times, large
    /// sizes and ids, sparse files, extended attributes
    /// (`SCHILY.xattr.*`).
    #[value(alias = "pax", alias = "posix", alias = "ustar")]
    Tar,
    /// GNU tar: long names and link targets as GNU records; no extended
    /// attributes, whole-second times.
    Gnutar,
    /// cpio "new ASCII" (`newc`, SVR4 without CRC): whole-second times.
    #[value(alias = "newc")]
    Cpio,
    /// zip (deflate), with Unix modes and the extended timestamp field;
    /// no owners, devices, fifos, sockets or hard links (each link is a
    /// copy).
    Zip,
}

impl Format {
    fn to_archive(self) -> hoard_archive::Format {
        match self {
            Format::Tar => hoard_archive::Format::Pax,
            Format::Gnutar => hoard_archive::Format::Gnutar,
            Format::Cpio => hoard_archive::Format::Cpio,
            Format::Zip => hoard_archive::Format::Zip,
        }
    }
}

/// A regular file's contents in the image, read from `offset` on.
struct Contents<'a> {
    at: &'a Located,
    offset: u64,
}

impl Read for Contents<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .at
            .fs
            .read(self.at.ino, self.offset, buf)
            .map_err(std::io::Error::other)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Reads only the data ranges of a sparse file, back to back.
struct RangesOf<'a> {
    contents: Contents<'a>,
    ranges: std::vec::IntoIter<(u64, u64)>,
    left: u64,
}

impl Read for RangesOf<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.left == 0 {
            let Some((offset, len)) = self.ranges.next() else {
                return Ok(0);
            };
            self.contents.offset = offset;
            self.left = len;
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.contents.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// The ranges of a regular file that hold data, as (offset, length),
/// when the file has holes; `None` when it has none.
fn data_ranges(at: &Located) -> Result<Option<Vec<(u64, u64)>>> {
    let extents = at.fs.extents(at.ino)?;
    if !extents.iter().any(|e| matches!(e, Extent::Hole { .. })) {
        return Ok(None);
    }
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut pos = 0u64;
    for e in &extents {
        if let Extent::Data { size, .. } = e {
            match ranges.last_mut() {
                Some((start, len)) if *start + *len == pos => *len += u64::from(*size),
                _ => ranges.push((pos, u64::from(*size))),
            }
        }
        pos += e.len();
    }
    Ok(Some(ranges))
}

/// The archive member for an image entry.
fn member_of(path: &[u8], stat: &Stat, target: Option<Vec<u8>>, xattrs: Xattrs) -> Member {
    let time = |t: hoard_reader::Time| Time {
        sec: t.sec,
        nsec: t.nsec,
    };
    let kind = match stat.kind {
        FileKind::Directory => Kind::Dir,
        FileKind::Symlink => Kind::Symlink(target.unwrap_or_default()),
        FileKind::CharDevice => Kind::CharDevice(stat.rdev),
        FileKind::BlockDevice => Kind::BlockDevice(stat.rdev),
        FileKind::Fifo => Kind::Fifo,
        FileKind::Socket => Kind::Socket,
        FileKind::Regular => Kind::File,
    };
    Member {
        path: path.to_vec(),
        kind,
        hardlink: None,
        perm: stat.mode & 0o7777,
        uid: stat.uid.into(),
        gid: stat.gid.into(),
        mtime: time(stat.mtime),
        atime: time(stat.atime),
        ctime: time(stat.ctime),
        size: if stat.kind == FileKind::Regular {
            stat.size
        } else {
            0
        },
        xattrs,
        notes: Vec::new(),
    }
}

type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `nodes` of `fs` to `out` as a `format` archive, with libarchive's
/// format `options`; returns the notes on entries the format cannot hold
/// (left out).
pub fn write(
    fs: &dyn View,
    nodes: &[Node],
    format: Format,
    options: Option<&str>,
    with_xattrs: bool,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let format = format.to_archive();
    let mut links: HashMap<u64, (u32, &[u8])> = HashMap::new();
    for n in nodes.iter().filter(|n| n.kind == FileKind::Regular) {
        links.entry(n.ino).or_insert((0, &n.path)).0 += 1;
    }
    let mut seen: HashMap<u64, u32> = HashMap::new();
    // Inode numbers in the archive: in order of first appearance.
    let mut numbers: HashMap<u64, u64> = HashMap::new();
    let mut writer = ArchiveWriter::new(format, options, out)?;
    let mut notes = Vec::new();
    for node in nodes {
        let stat = fs.stat(node.ino)?;
        let target = (stat.kind == FileKind::Symlink)
            .then(|| fs.readlink(node.ino))
            .transpose()?;
        let xattrs = if with_xattrs {
            fs.xattrs(node.ino)?
        } else {
            Vec::new()
        };
        let member = member_of(&node.path, &stat, target, xattrs);
        if let Some(why) = format.cannot_hold(&member.kind) {
            notes.push(format!(
                "{}: {why}, left out",
                String::from_utf8_lossy(&node.path)
            ));
            continue;
        }
        if stat.kind != FileKind::Regular {
            writer.add(&member, None, None, None)?;
            continue;
        }
        let next = numbers.len() as u64;
        let ino = *numbers.entry(node.ino).or_insert(next);
        let (count, first) = links.get(&node.ino).copied().unwrap_or((1, &[]));
        let index = seen.entry(node.ino).or_insert(0);
        *index += 1;
        let link = Links {
            ino,
            count,
            first: (*index > 1).then_some(first),
            last: *index == count,
        };
        let at = fs.locate(node.ino)?;
        let ranges = data_ranges(&at)?;
        let contents = Contents { at: &at, offset: 0 };
        let mut reader: Box<dyn Read> = match &ranges {
            Some(r) => Box::new(RangesOf {
                contents,
                ranges: r.clone().into_iter(),
                left: 0,
            }),
            None => Box::new(contents),
        };
        writer.add(&member, Some(link), Some(&mut reader), ranges.as_deref())?;
    }
    writer.finish()?;
    Ok(notes)
}
