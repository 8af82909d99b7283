//! Stage 1 for an archive input: a tar or cpio (newc) stream, from a file
//! or standard input, plain or compressed with gzip, zstd or xz (told by
//! their magic numbers), becomes the same [`Tree`] a directory scan gives.
//! Owners, modes, times, devices, links and extended attributes come from
//! the archive.
//!
//! The stream is read once, in order. The later stages read each file's
//! contents more than once and in an order of their own, so file contents
//! (and only they) are spooled: each to a file of its own in a temporary
//! directory beside the image being written (on a disk, where a `$TMPDIR`
//! may be memory), which lives as long as the build; holes of sparse
//! entries stay holes there. Memory holds the tree, as for a directory.
//!
//! Names are made relative and confined to the image: a leading `/` and
//! `.` components are dropped and `..` goes up no further than the root.
//! A stream that ends early, or is corrupt, is an error.
mod acl;
mod builder;
mod cpio;
mod pax;
mod spool;
mod tar;

use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::Time;
use crate::{Error, Result};
pub(crate) use builder::{Builder, Member, MemberKind};
pub(crate) use spool::Spool;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Whether `input` names an archive rather than a directory: `-` (standard
/// input) or anything but a directory.
pub fn is_archive(input: &Path) -> bool {
    input.as_os_str() == "-" || std::fs::metadata(input).is_ok_and(|m| !m.is_dir())
}

/// Reads the archive at `input` (`-`: standard input) into a tree.
pub fn scan_archive(
    input: &Path,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let name = if input.as_os_str() == "-" {
        PathBuf::from("standard input")
    } else {
        input.to_path_buf()
    };
    let raw: Box<dyn Read> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(input).map_err(|e| Error::io(input, e))?)
    };
    let spool = Spool::new(options.spool_dir.as_deref())?;
    let mut builder = Builder::new(options, filter, progress, spool);
    let stream =
        decompressed(BufReader::with_capacity(1 << 20, raw)).map_err(|e| Error::io(&name, e))?;
    let mut stream = BufReader::with_capacity(1 << 20, stream);
    let head = stream.fill_buf().map_err(|e| Error::io(&name, e))?;
    let read = if head.starts_with(b"070701") {
        cpio::read(&mut stream, &mut builder)
    } else {
        tar::read(&mut stream, &mut builder)
    };
    read.map_err(|e| match e {
        Error::Io { source, .. } => Error::io(&name, source),
        Error::Input(m) => Error::Input(format!("{}: {m}", name.display())),
        other => other,
    })?;
    Ok(builder.finish())
}

/// The stream behind its compression, told by the first bytes.
fn decompressed(mut input: BufReader<Box<dyn Read>>) -> std::io::Result<Box<dyn Read>> {
    let head = input.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(input))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(input)?)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input))
    } else {
        Box::new(input)
    })
}
/// The path of `name` inside the image: relative, `/`-separated, without
/// `.` components, `..` resolved but never above the root.
pub(crate) fn confined(name: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join(&b'/')
}
/// A time from seconds and nanoseconds.
pub(crate) fn time(sec: i64, nsec: u32) -> Time {
    Time { sec, nsec }
}
#[cfg(test)]
mod tests {
    use super::confined;

    #[test]
    fn names_stay_inside_the_image() {
        assert_eq!(confined(b"/etc/passwd"), b"etc/passwd");
        assert_eq!(confined(b"./a/./b/"), b"a/b");
        assert_eq!(confined(b"../../x"), b"x");
        assert_eq!(confined(b"a/../../b"), b"b");
        assert_eq!(confined(b"a/b/../c"), b"a/c");
        assert_eq!(confined(b"./"), b"");
    }
}
