//! Archives in and out, through the system's libarchive.
//!
//! [`ArchiveReader`] reads every format and filter libarchive reads, told
//! by content rather than by name: tar in all its dialects (v7, ustar,
//! GNU, pax, star, Solaris), cpio in all variants, RPM payloads, zip, 7z,
//! ISO 9660 (Rock Ridge, Joliet), ar/deb, xar, cab, lha and rar, behind
//! gzip, bzip2, xz, lzma, lzip, zstd, lz4, compress, lzop or uuencode.
//! Members come out one by one as [`Member`]s with their data as blocks at
//! offsets (so holes of sparse files stay holes).
//!
//! [`ArchiveWriter`] writes members as a pax or GNU tar, cpio (newc) or
//! zip stream to any [`std::io::Write`].
//!
//! The writer crate turns a read archive into an image; the CLI writes
//! an image's entries as an archive; the Python package does both through
//! them.
mod acl;
mod ffi;
pub mod fuzzing;
mod read;
mod write;

pub use read::ArchiveReader;
pub use write::{ArchiveWriter, Format, Links};

/// A time as seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Time {
    /// Seconds; before 1970 when negative.
    pub sec: i64,
    /// Nanoseconds, below 10^9.
    pub nsec: u32,
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file (or, with [`Member::hardlink`], another name of one).
    File,
    /// A directory.
    Dir,
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
    /// A character device and its number (Linux `dev_t` encoding).
    CharDevice(u64),
    /// A block device and its number (Linux `dev_t` encoding).
    BlockDevice(u64),
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
}

/// One archive member's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name as stored (not necessarily UTF-8; not made relative).
    pub path: Vec<u8>,
    /// What it is.
    pub kind: Kind,
    /// For another name of a regular file: the stored name of the file it
    /// names. When it comes with data (cpio keeps a file's data with one
    /// of its links), that data is the file's.
    pub hardlink: Option<Vec<u8>>,
    /// Permission bits, with setuid, setgid and sticky.
    pub perm: u32,
    /// Owner and group ids.
    pub uid: i64,
    /// See `uid`.
    pub gid: i64,
    /// Modification time.
    pub mtime: Time,
    /// Access time (the modification time when the archive has none).
    pub atime: Time,
    /// Change time (the modification time when the archive has none).
    pub ctime: Time,
    /// Size of a regular file's contents (holes included).
    pub size: u64,
    /// Extended attributes (name, value); POSIX ACLs as Linux's
    /// `system.posix_acl_*` attributes.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// What was read but could not be kept, one line each.
    pub notes: Vec<String>,
}

/// What went wrong reading or writing an archive, on one line that names
/// the archive and, where there is one, the member.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The archive can be read (or written) no further: not an archive,
    /// truncated, corrupt, or its input failed.
    #[error("{0}")]
    Fatal(String),
    /// This member cannot be read; the members after it may be.
    #[error("{0}")]
    Member(String),
}

/// A result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
