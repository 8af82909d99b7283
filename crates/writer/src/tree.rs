//! The scanned input tree: every entry with its name, kind and attributes,
//! before any content is read.

use std::path::{Path, PathBuf};

/// A point in time, as `stat` gives it. Packed to 12 bytes (not 16):
/// every entry holds three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(C, packed(4))]
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

/// A file name: up to 16 bytes inline, longer ones on the heap (most
/// names are short, and each allocation cost 32 bytes besides the `Vec`).
pub type Name = smallvec::SmallVec<[u8; 16]>;

/// One name in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file name (empty for the root).
    pub name: Name,
    /// Index of the parent directory entry (the root is its own parent).
    pub parent: usize,
    /// What it is.
    pub kind: Kind,
    /// Owner, permissions and times.
    pub attrs: Attrs,
    /// Extended attributes (name, value), in any order.
    pub xattrs: thin_vec::ThinVec<hoard_format::xattrs::Xattr>,
}

/// One regular file (an inode: hard links share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Where to read its contents: relative to [`Tree::root`] (a scanned
    /// file, at its path in the tree) or absolute (a spooled archive
    /// member). [`Tree::source`] gives the whole path. Relative and boxed,
    /// it takes about 50 bytes less a file than the whole path did.
    pub source: Box<Path>,
    /// Its size when scanned.
    pub size: u64,
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
    /// The directory that relative [`File::source`]s lie in.
    pub root: PathBuf,
}

impl Tree {
    /// Appends the path of entry `index` inside the image to `out`,
    /// `/`-separated, without a leading slash (nothing for the root).
    pub fn write_path(&self, index: usize, out: &mut Vec<u8>) {
        let mut chain = Vec::new();
        let mut i = index;
        while i != 0 {
            chain.push(i);
            i = self.entries[i].parent;
        }
        for (n, &i) in chain.iter().rev().enumerate() {
            if n > 0 {
                out.push(b'/');
            }
            out.extend_from_slice(&self.entries[i].name);
        }
    }

    /// Where to read file `file`'s contents.
    pub fn source(&self, file: usize) -> PathBuf {
        self.root.join(&self.files[file].source)
    }

    /// The first entry (in entry order) that names each file, or
    /// `usize::MAX` for a file no entry names.
    pub fn first_entries(&self) -> Vec<usize> {
        let mut first = vec![usize::MAX; self.files.len()];
        for (i, e) in self.entries.iter().enumerate() {
            if let Kind::File { file } = e.kind {
                if first[file] == usize::MAX {
                    first[file] = i;
                }
            }
        }
        first
    }

    /// Frees every file's source: once the data is written, the metadata
    /// needs none, and on trees of many small files their memory is what
    /// the metadata tables then take.
    pub fn drop_paths(&mut self) {
        for file in &mut self.files {
            file.source = Box::from(Path::new(""));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_small() {
        // Every entry of the tree is held until the metadata is built: on
        // 10 million files each byte here is 10 MB.
        assert_eq!(std::mem::size_of::<Time>(), 12);
        assert_eq!(std::mem::size_of::<Attrs>(), 48);
        assert!(std::mem::size_of::<Entry>() <= 120);
        assert!(std::mem::size_of::<File>() <= 32);
    }
}
