//! The file type bits of a mode, as images store them (and as Linux, tar,
//! cpio and libarchive number them too).

/// File type bits of a mode.
pub const S_IFMT: u32 = 0o170000;
/// Socket.
pub const S_IFSOCK: u32 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Block device.
pub const S_IFBLK: u32 = 0o060000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// Named pipe.
pub const S_IFIFO: u32 = 0o010000;
