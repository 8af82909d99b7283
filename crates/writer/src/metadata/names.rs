//! The directory, name, symlink and device tables.

use super::inodes::{DirWalk, Inodes};
use crate::tree::{Kind, Tree};
use hashbrown::HashTable;
use hoard_format::metadata::{DirEntry, Directory};
use hoard_format::string_list::StringList;
use xxhash_rust::xxh3::xxh3_64;

/// Distinct strings in order of first use, each found again by its hash:
/// a table slot holds a 4-byte index into the list.
#[derive(Default)]
struct Interner {
    list: StringList,
    table: HashTable<u32>,
}

impl Interner {
    /// The index of `s`, added if it is new.
    fn index(&mut self, s: &[u8]) -> u32 {
        let Interner { list, table } = self;
        let hash = xxh3_64(s);
        if let Some(&i) = table.find(hash, |&i| &list[i as usize] == s) {
            return i;
        }
        let i = list.push(s);
        table.insert_unique(hash, i, |&i| xxh3_64(&list[i as usize]));
        i
    }
}

/// The tables that describe the directory tree.
pub(super) struct DirTables {
    /// Distinct entry names, in order of first use.
    pub(super) names: StringList,
    /// Every entry: its name and inode.
    pub(super) dir_entries: Vec<DirEntry>,
    /// Every directory's entries, plus the end sentinel.
    pub(super) directories: Vec<Directory>,
}

impl DirTables {
    /// Builds the tables of the walked tree.
    pub(super) fn build(tree: &Tree, walk: &DirWalk, inodes: &Inodes) -> Self {
        let mut names = Interner::default();
        let mut dir_entries = Vec::with_capacity(walk.entries.len());
        for &e in &walk.entries {
            let name_index = match e {
                0 => 0,
                _ => names.index(&tree.entries[e].name),
            };
            dir_entries.push(DirEntry {
                name_index,
                inode_num: inodes.of_entry[e],
            });
        }
        let mut directories: Vec<Directory> = walk
            .dirs
            .iter()
            .zip(&walk.first_entry)
            .map(|(&d, &first_entry)| Directory {
                parent_entry: walk.entry_of[tree.entries[d].parent],
                first_entry,
                self_entry: walk.entry_of[d],
            })
            .collect();
        directories.push(Directory {
            parent_entry: 0,
            first_entry: walk.entries.len() as u32,
            self_entry: 0,
        });
        DirTables {
            names: names.list,
            dir_entries,
            directories,
        }
    }
}

/// The symlink and device tables.
pub(super) struct LinkTables {
    /// Distinct symlink targets, in order of first use.
    pub(super) symlinks: StringList,
    /// The target of each symlink inode.
    pub(super) symlink_table: Vec<u32>,
    /// The device number of each device inode.
    pub(super) devices: Vec<u64>,
}

impl LinkTables {
    /// Builds the tables of the symlink and device inodes.
    pub(super) fn build(tree: &Tree, inodes: &Inodes) -> Self {
        let mut targets = Interner::default();
        let mut symlink_table = Vec::new();
        let mut devices = Vec::new();
        for &e in &inodes.entries {
            match &tree.entries[e].kind {
                Kind::Symlink { target } => symlink_table.push(targets.index(target)),
                Kind::Device { rdev } => devices.push(*rdev),
                _ => {}
            }
        }
        LinkTables {
            symlinks: targets.list,
            symlink_table,
            devices,
        }
    }
}
