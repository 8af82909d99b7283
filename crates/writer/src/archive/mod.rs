//! Stage 1 for an archive input: any archive libarchive reads (tar, cpio,
//! zip, 7z, ISO 9660, RPM, ar, ... behind any of its filters; see
//! `hoard-archive`), from a file, standard input or a URL (which
//! [`crate::input`] opens), becomes the same
//! [`Tree`](crate::tree::Tree) a directory scan gives. Owners, modes,
//! times, devices, links and extended attributes come from the archive.
//!
//! The archive is read once, in order. The later stages read each file's
//! contents more than once and in an order of their own, so file contents
//! (and only they) are spooled: each to a file of its own in a temporary
//! directory beside the image being written (on a disk, where a `$TMPDIR`
//! may be memory), which lives as long as the build; holes of sparse
//! members stay holes there. Memory holds the tree, as for a directory.
//!
//! Names are made relative and confined to the image: a leading `/` and
//! `.` components are dropped and `..` goes up no further than the root.
//! An archive that ends early or is corrupt is an error naming the member;
//! with `continue_on_error` the members that could be read are kept and
//! the others listed as warnings.
mod builder;
pub mod cache;
mod spool;

use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
pub(crate) use builder::{Builder, Member, MemberKind};
use hoard_archive::{ArchiveReader, Kind};
pub(crate) use spool::Spool;

/// Reads the members of the archive `reader` reads into a tree.
pub fn scan_archive(
    mut reader: ArchiveReader,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let spool = Spool::new(options.spool_dir.as_deref())?;
    let mut builder = Builder::new(options, filter, progress, spool);
    loop {
        match read_member(&mut reader, &mut builder) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) if options.continue_on_error => {
                builder.warn(format!("left out: {e}"));
                if matches!(e, hoard_archive::Error::Fatal(_)) {
                    break;
                }
            }
            Err(e) => return Err(Error::Input(e.to_string())),
        }
    }
    Ok(builder.finish())
}

/// Reads the next member of `reader` into `b`; `false` at the end.
fn read_member(reader: &mut ArchiveReader, b: &mut Builder<'_>) -> hoard_archive::Result<bool> {
    let Some(m) = reader.next_member()? else {
        return Ok(false);
    };
    let name = String::from_utf8_lossy(&m.path).into_owned();
    for note in &m.notes {
        b.warn(format!("'{name}': {note}"));
    }
    let fail = |what: String| hoard_archive::Error::Member(format!("'{name}': {what}"));
    let attrs = attrs_of(&m).map_err(fail)?;
    let kind = match (m.kind, m.hardlink) {
        (Kind::File, Some(first)) => {
            if m.size > 0 {
                let source = b.spool.store_blocks(reader, m.size)?;
                b.replace_contents(&first, source, m.size)
                    .map_err(|e| fail(e.to_string()))?;
            }
            MemberKind::HardLink(first)
        }
        (Kind::File, None) => MemberKind::File {
            source: b.spool.store_blocks(reader, m.size)?,
            size: m.size,
        },
        (Kind::Dir, _) => MemberKind::Dir,
        (Kind::Symlink(target), _) => MemberKind::Symlink(target),
        (Kind::CharDevice(rdev) | Kind::BlockDevice(rdev), _) => MemberKind::Device(rdev),
        (Kind::Fifo | Kind::Socket, _) => MemberKind::Special,
    };
    b.add(Member {
        path: m.path,
        kind,
        attrs,
        xattrs: m.xattrs,
    })
    .map_err(|e| match e {
        Error::Input(what) => hoard_archive::Error::Member(what),
        other => hoard_archive::Error::Fatal(other.to_string()),
    })?;
    Ok(true)
}

/// The owner, mode and times of archive member `m`.
pub(crate) fn attrs_of(m: &hoard_archive::Member) -> std::result::Result<Attrs, String> {
    let id = |v: i64| u32::try_from(v).map_err(|_| format!("owner or group id {v} out of range"));
    let type_bits = match m.kind {
        Kind::File => libc::S_IFREG,
        Kind::Dir => libc::S_IFDIR,
        Kind::Symlink(_) => libc::S_IFLNK,
        Kind::CharDevice(_) => libc::S_IFCHR,
        Kind::BlockDevice(_) => libc::S_IFBLK,
        Kind::Fifo => libc::S_IFIFO,
        Kind::Socket => libc::S_IFSOCK,
    };
    // Linux shows every symlink as 0777, whatever the archive says.
    let perm = if type_bits == libc::S_IFLNK {
        0o777
    } else {
        m.perm
    };
    Ok(Attrs {
        mode: type_bits | perm,
        uid: id(m.uid)?,
        gid: id(m.gid)?,
        mtime: time(m.mtime),
        atime: time(m.atime),
        ctime: time(m.ctime),
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
/// An archive member's time as the tree's.
fn time(t: hoard_archive::Time) -> Time {
    Time {
        sec: t.sec,
        nsec: t.nsec,
    }
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
