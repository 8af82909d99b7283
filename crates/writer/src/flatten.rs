//! `hoard rewrite LOWER... UPPER -o FLAT` without the segmenter: the
//! merged tree of a stack of images (read by `input::stack`)
//! written with the blocks it uses copied from the layers as they are
//! (compressed, renumbered, their categories kept; blocks only hidden
//! files use are left out), and the metadata pointing each file at its
//! chunks there. [`crate::merge`] reuses its pieces.

use crate::archive::{Builder, Spool};
use crate::dedupe::{Content, Deduped};
use crate::input::stack::{add_stack, image_error, image_scan_options, open};
use crate::metadata::Inputs;
use crate::options::{CreateOptions, Input};
use crate::output::ImageFile;
use crate::piece::{Piece, PieceList};
use crate::rewrite::block_category;
use crate::scan::{ScanProgress, Scanned};
use crate::sections::{build_metadata, write_history, write_metadata};
use crate::summary::Summary;
use crate::tree::Tree;
use crate::{Error, Result};
use hoard_format::metadata::Metadata;
use hoard_format::section::SectionType;
use hoard_reader::{Extent, Filesystem, Located};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the regular files of a tree built with [`FileLocations::record`]
/// have their contents: the layer and inode of each, by the number its
/// (never written) spool path is given.
#[derive(Debug, Default)]
pub(crate) struct FileLocations {
    at: Vec<(usize, u32)>,
}

impl FileLocations {
    /// Notes where the file at `at` is among `layers`; returns the
    /// stand-in path [`FileLocations::of`] reads back.
    pub(crate) fn record(
        &mut self,
        layers: &[Arc<Filesystem>],
        spool: &mut Spool,
        at: &Located,
    ) -> Result<PathBuf> {
        let layer = layers
            .iter()
            .position(|fs| Arc::ptr_eq(fs, &at.fs))
            .ok_or_else(|| Error::Input("a file of no layer".into()))?;
        self.at.push((layer, at.ino));
        Ok(spool.dir()?.join((self.at.len() - 1).to_string()))
    }

    /// The layer and inode of the file whose stand-in path is `source`.
    fn of(&self, source: &crate::tree::Source) -> Result<(usize, u32)> {
        source
            .as_path()
            .and_then(Path::file_name)
            .and_then(|s| s.to_str()?.parse::<usize>().ok())
            .and_then(|n| self.at.get(n).copied())
            .ok_or_else(|| Error::Input("lost track of a file's contents".into()))
    }
}

/// The distinct contents of a tree whose blocks are reused, and where
/// each is stored (layer, inode of its first file).
#[derive(Debug, Default)]
pub(crate) struct StoredContents {
    /// The contents, each with its files.
    pub(crate) contents: Vec<Content>,
    /// Where each content is stored.
    pub(crate) at: Vec<(usize, u32)>,
}

/// Groups the files of `tree` by the content their layer stores them
/// with (the files of one content in one image share it).
pub(crate) fn stored_contents(
    tree: &Tree,
    located: &FileLocations,
    layers: &[Arc<Filesystem>],
) -> Result<StoredContents> {
    let mut by_content: HashMap<(usize, usize), usize> = HashMap::new();
    let mut stored = StoredContents::default();
    for (i, file) in tree.files.iter().enumerate() {
        let (layer, ino) = located.of(&file.source)?;
        let key = (
            layer,
            layers[layer].content_index(ino).map_err(image_error)?,
        );
        let c = *by_content.entry(key).or_insert_with(|| {
            stored.contents.push(Content {
                size: file.size,
                files: smallvec::SmallVec::new(),
                nilsimsa: None,
            });
            stored.at.push((layer, ino));
            stored.contents.len() - 1
        });
        stored.contents[c].files.push(i);
    }
    Ok(stored)
}

/// Writes the merged tree of the stack `options.input` names as one
/// image with the layers' blocks copied as they are (`options`'
/// compression applies to the metadata only).
pub fn flatten_reusing_blocks(options: &CreateOptions) -> Result<Summary> {
    let Input::Stack(paths) = &options.input else {
        return Err(Error::Input("no images to flatten".into()));
    };
    let stack = open(paths, options)?;
    let layers = stack.layers();
    let image = ImageFile::create(&options.output)?;
    let scan = image_scan_options(&options.scan);
    let spool = Spool::new(scan.spool_dir.as_deref())?;
    let progress = ScanProgress::default();
    let mut builder = Builder::new(&scan, options.filter.as_ref(), &progress, spool);
    let mut located = FileLocations::default();
    add_stack(&mut builder, &stack, b"", &mut |spool, at, _| {
        located.record(layers, spool, at)
    })?;
    let scanned = builder.finish();
    let stored = stored_contents(&scanned.tree, &located, layers)?;
    write_reusing_blocks(image, options, layers, scanned, stored)
}

/// Writes the tree `scanned` to `image` with the blocks its `stored`
/// contents use copied from `layers` as they are (compressed, renumbered,
/// their categories kept; blocks no content uses are left out), and the
/// metadata pointing each file at its chunks there.
pub(crate) fn write_reusing_blocks(
    mut image: ImageFile,
    options: &CreateOptions,
    layers: &[Arc<Filesystem>],
    scanned: Scanned,
    stored: StoredContents,
) -> Result<Summary> {
    let tree = scanned.tree;
    let block_size = layers
        .iter()
        .map(|fs| fs.block_size())
        .max()
        .unwrap_or(1 << 24);
    // The blocks used, in layer and block order, renumbered.
    let mut extents = Vec::with_capacity(stored.at.len());
    let mut used: BTreeMap<(usize, u32), u32> = BTreeMap::new();
    for &(layer, ino) in &stored.at {
        let e = layers[layer].extents(ino).map_err(image_error)?;
        let mut placed = Vec::with_capacity(e.len());
        for x in e {
            let at = match x {
                Extent::Data { block, .. } => {
                    // A delta layer's chunk may name a block of a layer below.
                    let at = layers[layer].lower_block(block).unwrap_or((layer, block));
                    used.insert(at, 0);
                    at
                }
                Extent::Hole { .. } => (layer, 0),
            };
            placed.push((at, x));
        }
        extents.push(placed);
    }
    let mut block_bytes = 0u64;
    for (n, ((layer, block), number)) in used.iter_mut().enumerate() {
        *number = n as u32;
        let fs = &layers[*layer];
        let section = fs.blocks().get(*block as usize).ok_or_else(|| {
            Error::Input(format!(
                "a chunk names block {block}, which the image lacks"
            ))
        })?;
        let payload = fs.image().plain_payload(section).map_err(image_error)?;
        block_bytes += payload.len() as u64;
        image.section(SectionType::BLOCK, section.header.compression, &payload)?;
    }
    let pieces: Vec<PieceList> = extents
        .iter()
        .map(|e| {
            e.iter()
                .map(|&(at, x)| match x {
                    Extent::Data { offset, size, .. } => Piece::Data {
                        block: used[&at],
                        offset,
                        size,
                    },
                    Extent::Hole { size } => Piece::Hole(size),
                })
                .collect()
        })
        .collect();
    let deduped = Deduped {
        contents: stored.contents,
        unreadable: Vec::new(),
    };
    let mut summary = Summary {
        counts: tree.counts(),
        blocks: used.len() as u64,
        block_bytes,
        warnings: scanned.warnings,
        ..Summary::default()
    };
    summary.count_contents(&tree, &deduped);
    let inputs = Inputs {
        tree: &tree,
        deduped,
        pieces,
        blocks: used.len() as u32,
        block_size,
    };
    let mut meta = build_metadata(options, inputs, None);
    drop(tree);
    copy_categories(&mut meta, layers, &used)?;
    summary.metadata_bytes = write_metadata(&mut image, options, &meta)?;
    write_history(&mut image, options)?;
    summary.image_bytes = image.finish(options.section_index)?;
    Ok(summary)
}

/// Gives the reused blocks (`used`: (layer, block) to its new number)
/// the categories, and category metadata, their layers record.
fn copy_categories(
    meta: &mut Metadata,
    layers: &[Arc<Filesystem>],
    used: &BTreeMap<(usize, u32), u32>,
) -> Result<()> {
    let metas = layers
        .iter()
        .map(|fs| fs.metadata().map_err(image_error))
        .collect::<Result<Vec<_>>>()?;
    let categories: Vec<(Option<&str>, Option<&str>)> = used
        .keys()
        .map(|&(layer, block)| block_category(metas[layer], block as usize))
        .collect();
    if categories.iter().all(|(name, _)| name.is_none()) {
        return Ok(());
    }
    let mut names: Vec<String> = Vec::new();
    let mut jsons: Vec<String> = Vec::new();
    let mut block_categories = Vec::with_capacity(categories.len());
    let mut block_metadata = BTreeMap::new();
    for (block, (name, json)) in categories.iter().enumerate() {
        let name = name.unwrap_or(crate::categorize::DEFAULT_CATEGORY);
        block_categories.push(index_of(&mut names, name));
        if let Some(json) = json {
            block_metadata.insert(block as u32, index_of(&mut jsons, json));
        }
    }
    meta.category_names = Some(names);
    meta.block_categories = Some(block_categories);
    if !jsons.is_empty() {
        meta.category_metadata_json = Some(jsons);
        meta.block_category_metadata = Some(block_metadata);
    }
    Ok(())
}

/// The index of `s` in `list`, added at the end when missing.
fn index_of(list: &mut Vec<String>, s: &str) -> u32 {
    let i = list.iter().position(|x| x == s).unwrap_or_else(|| {
        list.push(s.to_string());
        list.len() - 1
    });
    i as u32
}
