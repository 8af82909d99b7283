//! `hoard extract --format`: the selected entries of an image written as
//! one archive stream (tar with pax records, GNU tar, cpio newc or zip),
//! straight from the image to a file or a pipe: no temporary tree, file
//! contents read block by block while they are written.
//!
//! [`write`] walks the entries and describes each as an [`Entry`]; one
//! module per format turns entries into that format's records.

mod cpio;
mod options;
mod tar;
mod zip;

pub use options::FormatOptions;

use anyhow::Result;
use hoard_reader::{Extent, FileKind, Located, Stat, View, ViewNode as Node};
use std::collections::HashMap;
use std::io::{Read, Write};

/// An archive format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// POSIX tar with pax records: long names, nanosecond times, large
    /// sizes and ids, sparse files (GNU pax format 1.0), extended
    /// attributes (`SCHILY.xattr.*`).
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

/// One entry, as the format writers see it.
pub struct Entry<'a> {
    /// Path inside the archive, `/`-separated, without a leading `/`;
    /// empty for the root.
    pub path: &'a [u8],
    /// Type, mode, owners, size, times, device; `ino` numbers the file
    /// in the archive (hard links share it).
    pub stat: Stat,
    /// Target of a symlink.
    pub target: Option<&'a [u8]>,
    /// For a regular file with several links in the archive: the path of
    /// its first link, when this is not it.
    pub first_link: Option<&'a [u8]>,
    /// Number of links of this file in the archive.
    pub links: u32,
    /// Whether this is the last of those links.
    pub last_link: bool,
    /// Extended attributes (name, value).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Where a regular file's contents are.
    contents: Option<Located>,
}

impl Entry<'_> {
    /// The file's contents (holes read as zeros).
    pub fn contents(&self) -> Contents<'_> {
        self.range(0, self.stat.size)
    }

    /// Bytes `start..end` of the file's contents.
    pub fn range(&self, start: u64, end: u64) -> Contents<'_> {
        Contents {
            at: self.contents.as_ref(),
            offset: start,
            size: end,
        }
    }

    /// The ranges of a regular file that hold data, as (offset, length),
    /// when the file has holes; `None` when it has none.
    pub fn data_ranges(&self) -> Result<Option<Vec<(u64, u64)>>> {
        let Some(at) = &self.contents else {
            return Ok(None);
        };
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
}

/// A range of a regular file's contents as a reader.
pub struct Contents<'a> {
    at: Option<&'a Located>,
    offset: u64,
    /// Where the range ends.
    size: u64,
}

impl Read for Contents<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.size - self.offset;
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let Some(at) = self.at else {
            return Err(std::io::Error::other("not a regular file"));
        };
        let n = at
            .fs
            .read(at.ino, self.offset, &mut buf[..want])
            .map_err(std::io::Error::other)?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "inode {}: contents end at {} of {} bytes",
                at.ino, self.offset, self.size
            )));
        }
        self.offset += n as u64;
        Ok(n)
    }
}

/// What a format writer does with the entries, in walk order (each
/// directory before what it holds).
trait ArchiveWriter {
    fn entry(&mut self, e: &Entry<'_>) -> Result<()>;
    /// Writes the end of the archive.
    fn finish(&mut self) -> Result<()>;
}

/// Writes `nodes` of `fs` to `out` as a `format` archive with `options`;
/// returns the notes on entries the format cannot hold (left out).
pub fn write(
    fs: &dyn View,
    nodes: &[Node],
    format: Format,
    options: &FormatOptions,
    with_xattrs: bool,
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let mut links: HashMap<u64, (u32, &[u8])> = HashMap::new();
    for n in nodes.iter().filter(|n| n.kind == FileKind::Regular) {
        links.entry(n.ino).or_insert((0, &n.path)).0 += 1;
    }
    let mut seen: HashMap<u64, u32> = HashMap::new();
    // Inode numbers in the archive: in order of first appearance.
    let mut numbers: HashMap<u64, u32> = HashMap::new();
    let mut writer: Box<dyn ArchiveWriter + '_> = match format {
        Format::Tar => Box::new(tar::TarWriter::new(out, tar::Flavor::Pax)),
        Format::Gnutar => Box::new(tar::TarWriter::new(out, tar::Flavor::Gnu)),
        Format::Cpio => Box::new(cpio::CpioWriter::new(out)),
        Format::Zip => Box::new(zip::ZipStream::new(out, options.zip)),
    };
    let mut notes = Vec::new();
    for node in nodes {
        let mut stat = fs.stat(node.ino)?;
        let next = numbers.len() as u32;
        stat.ino = *numbers.entry(node.ino).or_insert(next);
        let (count, first) = links.get(&node.ino).copied().unwrap_or((1, &[]));
        let index = seen.entry(node.ino).or_insert(0);
        *index += 1;
        let target = (stat.kind == FileKind::Symlink)
            .then(|| fs.readlink(node.ino))
            .transpose()?;
        let entry = Entry {
            path: &node.path,
            target: target.as_deref(),
            contents: (stat.kind == FileKind::Regular)
                .then(|| fs.locate(node.ino))
                .transpose()?,
            first_link: (stat.kind == FileKind::Regular && *index > 1).then_some(first),
            links: count,
            last_link: *index == count,
            xattrs: if with_xattrs {
                fs.xattrs(node.ino)?
            } else {
                Vec::new()
            },
            stat,
        };
        if let Some(why) = unsupported(format, &entry) {
            notes.push(format!(
                "{}: {why}, left out",
                String::from_utf8_lossy(&node.path)
            ));
            continue;
        }
        writer.entry(&entry)?;
    }
    writer.finish()?;
    Ok(notes)
}

/// Why `format` cannot hold `e`, if it cannot.
fn unsupported(format: Format, e: &Entry<'_>) -> Option<&'static str> {
    match (format, e.stat.kind) {
        (Format::Tar | Format::Gnutar, FileKind::Socket) => Some("tar has no sockets"),
        (
            Format::Zip,
            FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo | FileKind::Socket,
        ) => Some("zip holds only directories, files and symlinks"),
        _ => None,
    }
}
