//! Stage 6: the file-system metadata, built from the tree, the deduplicated
//! contents and the pieces the segmenter made of them, in the normalized
//! form [`hoard_format::metadata::Metadata`] that the format crate encodes.
//!
//! [`build`] runs one step per group of tables, each in a module of its
//! own: `inodes` numbers directories and inodes, `names` builds the
//! directory, name, symlink and device tables, `chunks` the chunk and
//! shared-file tables and the size totals, `attrs` the owner, mode and
//! time tables and the file-system options; `xattrs` interns the
//! extended attributes of every inode.

mod attrs;
mod chunks;
mod inodes;
mod names;

pub(crate) use attrs::adjust;
pub use attrs::AttrOptions;

use crate::dedupe::Deduped;
use crate::piece::PieceList;
use crate::tree::Tree;
use attrs::AttrTables;
use chunks::{ChunkTables, Totals};
use hoard_format::metadata::Metadata;
use hoard_format::xattrs::{Xattrs, XattrsBuilder};
use inodes::{ContentIndex, DirWalk, Inodes};
use names::{DirTables, LinkTables};
use std::collections::BTreeSet;

/// What the metadata stage needs: the tree, and what it takes over and
/// frees once the tables that need it are built.
pub struct Inputs<'a> {
    /// The scanned tree.
    pub tree: &'a Tree,
    /// Its distinct contents.
    pub deduped: Deduped,
    /// Pieces of each content (indexed like `deduped.contents`).
    pub pieces: Vec<PieceList>,
    /// Number of data blocks written.
    pub blocks: u32,
    /// Block size.
    pub block_size: u32,
}

/// The extended attributes of every inode (those of a hard-linked file's
/// first entry), or `None` when no inode has any.
fn xattrs(tree: &Tree, inodes: &Inodes) -> Option<Xattrs> {
    let mut builder = XattrsBuilder::default();
    for &e in &inodes.entries {
        builder.push(&tree.entries[e].xattrs);
    }
    builder.finish()
}

/// Builds the metadata. The contents and their pieces are freed as soon
/// as the chunk tables are built, before the larger name and inode
/// tables (on many small files, 64 bytes a file less at the peak).
#[inline(never)]
pub fn build(inputs: Inputs<'_>, options: &AttrOptions) -> Metadata {
    let tree = inputs.tree;
    let contents = ContentIndex::new(&inputs.deduped, tree.files.len());
    let walk = DirWalk::new(tree, &contents);
    let inodes = Inodes::number(tree, &walk, &contents, &inputs.pieces);
    let chunks = ChunkTables::build(
        &inputs.pieces,
        &inodes.chunk_order,
        inputs.blocks,
        inputs.block_size,
    );
    let totals = Totals::sum(tree, &inodes, &contents, &chunks);
    drop(contents);
    drop((inputs.deduped, inputs.pieces));
    let dirs = DirTables::build(tree, &walk, &inodes);
    drop(walk);
    let links = LinkTables::build(tree, &inodes);
    let attrs = AttrTables::build(tree, &inodes, options);
    let sparse = chunks.any_hole;
    let xattrs = xattrs(tree, &inodes);
    Metadata {
        block_size: inputs.block_size,
        names: dirs.names,
        dir_entries: dirs.dir_entries,
        directories: dirs.directories,
        symlinks: links.symlinks,
        symlink_table: links.symlink_table,
        devices: (!links.devices.is_empty()).then_some(links.devices),
        chunks: chunks.chunks,
        chunk_table: chunks.chunk_table,
        shared_files: inodes.shared_files,
        reg_file_size_cache: Some(chunks.size_cache),
        hole_block_index: sparse.then_some(chunks.hole_block),
        features: sparse.then(|| BTreeSet::from(["sparsefiles".to_string()])),
        large_hole_size: (sparse && !chunks.large_holes.is_empty()).then_some(chunks.large_holes),
        total_fs_size: totals.size,
        total_hardlink_size: Some(totals.hardlinked),
        total_allocated_fs_size: sparse.then_some(totals.allocated),
        uids: attrs.uids,
        gids: attrs.gids,
        modes: attrs.modes,
        inodes: attrs.inodes,
        timestamp_base: attrs.timestamp_base,
        options: Some(attrs.fs_options),
        create_timestamp: options.create_timestamp,
        dwarfs_version: Some(format!("hoard {}", env!("CARGO_PKG_VERSION"))),
        xattrs,
        ..Metadata::default()
    }
}
