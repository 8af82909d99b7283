//! The scanned input tree: every entry with its name, kind and attributes,
//! before any content is read.

use std::path::PathBuf;

/// A point in time, as `stat` gives it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds.
    pub nsec: u32,
}

/// Owner, permissions and times of an entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attrs {
    /// File type and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Access time.
    pub atime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Status change time.
    pub ctime: Time,
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory; `children` are entry indices, sorted by name.
    Dir {
        /// Entries inside, sorted by name bytes.
        children: Vec<usize>,
    },
    /// A regular file; hard links to one file share `file`.
    File {
        /// Index into [`Tree::files`].
        file: usize,
    },
    /// A symbolic link.
    Symlink {
        /// The link target.
        target: Vec<u8>,
    },
    /// A character or block device (the mode tells which).
    Device {
        /// The device number.
        rdev: u64,
    },
    /// A fifo or socket.
    Special,
}

/// One name in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file name (empty for the root).
    pub name: Vec<u8>,
    /// Index of the parent directory entry (the root is its own parent).
    pub parent: usize,
    /// What it is.
    pub kind: Kind,
    /// Owner, permissions and times.
    pub attrs: Attrs,
    /// Extended attributes (name, value), in any order.
    pub xattrs: Vec<hoard_format::xattrs::Xattr>,
}

/// One regular file (an inode: hard links share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Where to read its contents.
    pub source: PathBuf,
    /// Its size when scanned.
    pub size: u64,
    /// Its path inside the image, for ordering and messages.
    pub path: Vec<u8>,
    /// Number of entries (hard links) naming it.
    pub links: u32,
}

/// The whole input tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// All entries; entry 0 is the root directory.
    pub entries: Vec<Entry>,
    /// All regular files.
    pub files: Vec<File>,
}

impl Tree {
    /// The path of entry `index` inside the image, `/`-separated, without
    /// a leading slash (empty for the root).
    pub fn path(&self, index: usize) -> Vec<u8> {
        let mut parts = Vec::new();
        let mut i = index;
        while i != 0 {
            parts.push(self.entries[i].name.as_slice());
            i = self.entries[i].parent;
        }
        parts.reverse();
        parts.join(&b'/')
    }

    /// Frees every file's source and image path: once the data is
    /// written, the metadata needs neither, and on trees of many small
    /// files their memory (about 100 bytes a file) is what the metadata
    /// tables then take.
    pub fn drop_paths(&mut self) {
        for file in &mut self.files {
            file.source = PathBuf::new();
            file.path = Vec::new();
        }
    }

    /// Counts of directories, symlinks, regular file entries, devices and
    /// fifos/sockets.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in &self.entries {
            match e.kind {
                Kind::Dir { .. } => c.dirs += 1,
                Kind::File { .. } => c.file_entries += 1,
                Kind::Symlink { .. } => c.symlinks += 1,
                Kind::Device { .. } => c.devices += 1,
                Kind::Special => c.specials += 1,
            }
        }
        c.files = self.files.len();
        c
    }
}

/// How many entries of each kind a tree has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Directories, the root included.
    pub dirs: usize,
    /// Symbolic links.
    pub symlinks: usize,
    /// Names of regular files (hard links counted each).
    pub file_entries: usize,
    /// Regular files (hard links counted once).
    pub files: usize,
    /// Character and block devices.
    pub devices: usize,
    /// Fifos and sockets.
    pub specials: usize,
}
