//! The scanned input tree: every entry with its name, kind and attributes,
//! before any content is read.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use thin_vec::ThinVec;

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

/// What an entry is. Its lists are `ThinVec`s (one word, not a `Vec`'s
/// three), which keeps a kind at 16 bytes, and so every entry 16 bytes
/// smaller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory; `children` are entry indices, sorted by name.
    Dir {
        /// Entries inside, sorted by name bytes.
        children: ThinVec<usize>,
    },
    /// A regular file; hard links to one file share `file`.
    File {
        /// Index into [`Tree::files`].
        file: usize,
    },
    /// A symbolic link.
    Symlink {
        /// The link target.
        target: ThinVec<u8>,
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
    pub xattrs: ThinVec<hoard_format::xattrs::Xattr>,
}

/// One regular file (an inode: hard links share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Where to read its contents; [`Tree::source`] gives the whole path.
    pub source: Source,
    /// Its size when scanned.
    pub size: u64,
    /// Number of entries (hard links) naming it.
    pub links: u32,
    /// The scan found as many bytes allocated to it as its size: it has
    /// no holes to look for when its data is read.
    pub allocated: bool,
}

/// Where a file's contents are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The path of this entry below [`Tree::root`]: a scanned file is read
    /// where the tree has it, and keeps no path of its own (on many small
    /// files, a path took a 32-byte allocation a file). The scan found it
    /// readable.
    Entry(u32),
    /// A path relative to [`Tree::root`], or absolute (a spooled archive
    /// member, a hole file).
    Path(Box<Path>),
}

impl Source {
    /// A source at `path`.
    pub fn path(path: impl Into<PathBuf>) -> Self {
        Source::Path(path.into().into_boxed_path())
    }

    /// Its path, unless it is an entry's.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Source::Path(path) => Some(path),
            Source::Entry(_) => None,
        }
    }
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
        match &self.files[file].source {
            Source::Path(path) => self.root.join(path),
            Source::Entry(entry) => {
                let mut rel = Vec::new();
                self.write_path(*entry as usize, &mut rel);
                self.root.join(std::ffi::OsStr::from_bytes(&rel))
            }
        }
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

    /// Frees the paths of files read from a path of their own (archive
    /// members, hole files; a scanned file's source is its entry and holds
    /// none): once the data is written, the metadata needs none, and on
    /// trees of many small files their memory is what the metadata tables
    /// then take.
    pub fn drop_paths(&mut self) {
        for file in &mut self.files {
            if let Source::Path(path) = &mut file.source {
                *path = Box::from(Path::new(""));
            }
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
        assert_eq!(std::mem::size_of::<Kind>(), 16);
        assert!(std::mem::size_of::<Entry>() <= 104);
        assert_eq!(std::mem::size_of::<Source>(), 16);
        assert!(std::mem::size_of::<File>() <= 32);
    }
}
