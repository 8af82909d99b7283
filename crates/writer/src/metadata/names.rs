//! The directory, name, symlink and device tables.

use super::inodes::{DirWalk, Inodes};
use crate::tree::{Kind, Tree};
use hoard_format::metadata::{DirEntry, Directory};
use std::collections::HashMap;

/// The tables that describe the directory tree.
pub(super) struct DirTables {
    /// Distinct entry names, in order of first use.
    pub(super) names: Vec<Vec<u8>>,
    /// Every entry: its name and inode.
    pub(super) dir_entries: Vec<DirEntry>,
    /// Every directory's entries, plus the end sentinel.
    pub(super) directories: Vec<Directory>,
}

impl DirTables {
    /// Builds the tables of the walked tree.
    pub(super) fn build(tree: &Tree, walk: &DirWalk, inodes: &Inodes) -> Self {
        let mut names = Vec::new();
        let mut interned: HashMap<&[u8], u32> = HashMap::new();
        let mut dir_entries = Vec::with_capacity(walk.entries.len());
        for &e in &walk.entries {
            let name = tree.entries[e].name.as_slice();
            let name_index = if e == 0 {
                0
            } else {
                let next = names.len() as u32;
                *interned.entry(name).or_insert_with(|| {
                    names.push(name.to_vec());
                    next
                })
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
            names,
            dir_entries,
            directories,
        }
    }
}

/// The symlink and device tables.
pub(super) struct LinkTables {
    /// Distinct symlink targets, in order of first use.
    pub(super) symlinks: Vec<Vec<u8>>,
    /// The target of each symlink inode.
    pub(super) symlink_table: Vec<u32>,
    /// The device number of each device inode.
    pub(super) devices: Vec<u64>,
}

impl LinkTables {
    /// Builds the tables of the symlink and device inodes.
    pub(super) fn build(tree: &Tree, inodes: &Inodes) -> Self {
        let mut links = LinkTables {
            symlinks: Vec::new(),
            symlink_table: Vec::new(),
            devices: Vec::new(),
        };
        let mut target_index: HashMap<&[u8], u32> = HashMap::new();
        for &e in &inodes.entries {
            match &tree.entries[e].kind {
                Kind::Symlink { target } => {
                    let next = links.symlinks.len() as u32;
                    let t = *target_index.entry(target.as_slice()).or_insert_with(|| {
                        links.symlinks.push(target.clone());
                        next
                    });
                    links.symlink_table.push(t);
                }
                Kind::Device { rdev } => links.devices.push(*rdev),
                _ => {}
            }
        }
        links
    }
}
