//! Inode numbering: which range of inode numbers holds which kind of entry,
//! and the attributes (`stat`) of an inode.

use crate::error::{corrupt, Result};
use crate::tables::Tables;
use hoard_format::metadata::Metadata;
use hoard_format::mode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK};

/// The kind of a file-system entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A regular file.
    Regular,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
}

impl FileKind {
    /// The kind encoded in the type bits of `mode`, if any.
    pub fn from_mode(mode: u32) -> Option<Self> {
        Some(match mode & S_IFMT {
            S_IFDIR => FileKind::Directory,
            S_IFLNK => FileKind::Symlink,
            S_IFREG => FileKind::Regular,
            S_IFCHR => FileKind::CharDevice,
            S_IFBLK => FileKind::BlockDevice,
            S_IFIFO => FileKind::Fifo,
            S_IFSOCK => FileKind::Socket,
            _ => return None,
        })
    }

    /// The position of this kind in the inode order: directories, symlinks,
    /// regular files, devices, then fifos and sockets.
    pub(crate) fn rank(self) -> usize {
        match self {
            FileKind::Directory => 0,
            FileKind::Symlink => 1,
            FileKind::Regular => 2,
            FileKind::CharDevice | FileKind::BlockDevice => 3,
            FileKind::Fifo | FileKind::Socket => 4,
        }
    }

    /// The letter `ls -l` shows for this kind.
    pub fn letter(self) -> char {
        match self {
            FileKind::Directory => 'd',
            FileKind::Symlink => 'l',
            FileKind::Regular => '-',
            FileKind::CharDevice => 'c',
            FileKind::BlockDevice => 'b',
            FileKind::Fifo => 'p',
            FileKind::Socket => 's',
        }
    }
}

/// Where each kind of inode starts. Inodes are numbered by kind, so the
/// kind-specific tables are indexed by `inode - start_of_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeLayout {
    /// First symlink inode (= number of directories).
    pub symlinks: u32,
    /// First regular file inode.
    pub files: u32,
    /// Number of regular files with content of their own.
    pub unique_files: u32,
    /// First device inode.
    pub devices: u32,
    /// First fifo or socket inode.
    pub others: u32,
    /// Number of inodes.
    pub count: u32,
}

impl InodeLayout {
    /// Computes and checks the layout of `meta`: inodes must be ordered by
    /// kind and each kind's table must have one entry per inode of the kind.
    pub fn of(meta: &Metadata) -> Result<Self> {
        let count = u32::try_from(meta.inodes.len()).map_err(|_| corrupt!("too many inodes"))?;
        let mut per_rank = [0u32; 5];
        let mut prev_rank = 0;
        for (ino, inode) in meta.inodes.iter().enumerate() {
            let mode = *meta.modes.get(inode.mode_index as usize).ok_or_else(|| {
                corrupt!(
                    "inode {ino}: mode index {} out of range ({} modes)",
                    inode.mode_index,
                    meta.modes.len()
                )
            })?;
            let kind = FileKind::from_mode(mode)
                .ok_or_else(|| corrupt!("inode {ino}: invalid file type in mode {mode:o}"))?;
            let rank = kind.rank();
            if rank < prev_rank {
                return Err(corrupt!(
                    "inode table is not ordered by file type (inode {ino})"
                ));
            }
            if ino == 0 && kind != FileKind::Directory {
                return Err(corrupt!("the root inode is not a directory"));
            }
            per_rank[rank] += 1;
            prev_rank = rank;
        }
        if count == 0 {
            return Err(corrupt!("empty inode table"));
        }
        let symlinks = per_rank[0];
        let files = symlinks + per_rank[1];
        let devices = files + per_rank[2];
        let others = devices + per_rank[3];
        let dirs = symlinks;
        if meta.directories.len() != dirs as usize + 1 {
            return Err(corrupt!(
                "wrong number of directories: {} entries for {dirs} directory inodes",
                meta.directories.len().saturating_sub(1)
            ));
        }
        if meta.symlink_table.len() != (files - symlinks) as usize {
            return Err(corrupt!(
                "wrong number of symlinks: {} table entries for {} symlink inodes",
                meta.symlink_table.len(),
                files - symlinks
            ));
        }
        let num_files = devices - files;
        let shared = u32::try_from(meta.shared_files.len()).unwrap_or(u32::MAX);
        let unique_files = num_files
            .checked_sub(shared)
            .ok_or_else(|| corrupt!("more shared files ({shared}) than files ({num_files})"))?;
        if meta.shared_files.windows(2).any(|w| w[0] > w[1]) {
            return Err(corrupt!("shared files table is not sorted"));
        }
        let shared_contents = meta.shared_files.last().map_or(0, |&l| l as usize + 1);
        if meta.chunk_table.len() != unique_files as usize + shared_contents + 1 {
            return Err(corrupt!(
                "wrong number of files: chunk table has {} entries for {unique_files} unique files and {shared_contents} shared contents",
                meta.chunk_table.len().saturating_sub(1)
            ));
        }
        let num_devices = meta.devices.as_ref().map_or(0, Vec::len);
        if num_devices != (others - devices) as usize {
            return Err(corrupt!(
                "wrong number of devices: {num_devices} table entries for {} device inodes",
                others - devices
            ));
        }
        Ok(InodeLayout {
            symlinks,
            files,
            unique_files,
            devices,
            others,
            count,
        })
    }

    /// The layout given by the length of each kind's table (directories,
    /// symlinks, chunk table and shared files, devices), checked against
    /// the number of inodes. That each inode has the kind its number says
    /// is checked when it is read.
    pub(crate) fn from_tables(t: &Tables) -> Result<Self> {
        let count = u32::try_from(t.inode_count()).map_err(|_| corrupt!("too many inodes"))?;
        if count == 0 {
            return Err(corrupt!("empty inode table"));
        }
        let dirs = t
            .first_entry
            .len()
            .checked_sub(1)
            .filter(|&d| d > 0)
            .ok_or_else(|| corrupt!("the root inode is not a directory"))?;
        let unique = t
            .chunk_table
            .len()
            .checked_sub(t.shared_contents + 1)
            .ok_or_else(|| {
                corrupt!(
                    "wrong number of files: chunk table has {} entries for {} shared contents",
                    t.chunk_table.len().saturating_sub(1),
                    t.shared_contents
                )
            })?;
        let kinds = [
            dirs,
            t.symlink_table.len(),
            unique.saturating_add(t.shared_files.len()),
            t.devices.as_ref().map_or(0, |d| d.len()),
        ];
        let total = kinds.iter().fold(0usize, |a, &k| a.saturating_add(k));
        if total > count as usize {
            return Err(corrupt!(
                "the tables of each kind name {total} inodes, the inode table has {count}"
            ));
        }
        // Each is at most `count`, so the sums fit.
        let symlinks = dirs as u32;
        let files = symlinks + kinds[1] as u32;
        let devices = files + kinds[2] as u32;
        Ok(InodeLayout {
            symlinks,
            files,
            unique_files: unique as u32,
            devices,
            others: devices + kinds[3] as u32,
            count,
        })
    }

    /// The rank (see [`FileKind`]'s inode order) of the kinds inode `ino` may have.
    pub(crate) fn rank_of(&self, ino: u32) -> usize {
        [self.symlinks, self.files, self.devices, self.others]
            .iter()
            .position(|&start| ino < start)
            .unwrap_or(4)
    }

    /// Number of directory inodes.
    pub fn directories(&self) -> u32 {
        self.symlinks
    }
}

/// A point in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds.
    pub nsec: u32,
}

/// The attributes of an inode, as `stat` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u32,
    /// Kind of entry.
    pub kind: FileKind,
    /// Full mode: type and permission bits.
    pub mode: u32,
    /// Number of hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size: file length, symlink target length, or entry count.
    pub size: u64,
    /// Bytes not in holes (regular files), else `size`.
    pub allocated_size: u64,
    /// Access time.
    pub atime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Status change time.
    pub ctime: Time,
    /// Device number (character and block devices).
    pub rdev: u64,
}

impl Stat {
    /// Permission bits (including setuid, setgid, sticky).
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// Major number of a Linux device number.
pub fn dev_major(dev: u64) -> u32 {
    (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)) as u32
}

/// Minor number of a Linux device number.
pub fn dev_minor(dev: u64) -> u32 {
    (((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)) as u32
}
