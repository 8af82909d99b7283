//! Stage 1 for a stack of images (`hoard rewrite LOWER... UPPER -o
//! FLAT`): the merged tree of the layers (overlayfs rules, see
//! `hoard_reader::stack`) becomes the [`Tree`](crate::tree::Tree) a
//! directory scan gives, as an archive's does: file contents are read
//! from the images into a spool beside the output (each file once; the
//! later stages read them more than once, in an order of their own).
//! Devices, fifos and sockets are kept, and hard links stay links.
//!
//! [`flatten_reusing_blocks`] does without the segmenter: the blocks the
//! merged tree uses are copied from the layers as they are (compressed,
//! renumbered; blocks only hidden files use are left out), and the
//! metadata points each file at its chunks there.

use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::dedupe::{Content, Deduped};
use crate::filter::Filter;
use crate::metadata::Inputs;
use crate::output::ImageFile;
use crate::pipeline::{build_metadata, write_history, write_metadata, CreateOptions, Summary};
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::segment::{Piece, PieceList};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
use hoard_format::section::SectionType;
use hoard_reader::{Extent, FileKind, Filesystem, Located, Stack, View, ViewExt};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens the stack of the images at `layers` (bottom first).
fn open(layers: &[PathBuf]) -> Result<Stack> {
    let paths: Vec<&Path> = layers.iter().map(PathBuf::as_path).collect();
    let reading = hoard_reader::FsOptions {
        cache_size: 64 << 20,
        ..hoard_reader::FsOptions::default()
    };
    Stack::open(&paths, &reading).map_err(|e| Error::Input(format!("cannot open image {e}")))
}

fn image_error(e: hoard_reader::Error) -> Error {
    Error::Input(e.to_string())
}

/// Reads the stack of the images at `layers` (bottom first) into a tree.
pub fn scan_stack(
    layers: &[PathBuf],
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let stack = open(layers)?;
    walk(&stack, options, filter, progress, &mut |spool, at, size| {
        let mut contents = Contents {
            fs: at.fs.clone(),
            ino: at.ino,
            offset: 0,
        };
        spool.store(&mut contents, size, true)
    })
}

/// Makes the tree of `stack`; `contents` gives each regular file (the
/// first of its names) the path its contents are read from.
fn walk(
    stack: &Stack,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
    contents: &mut dyn FnMut(&mut Spool, &Located, u64) -> Result<PathBuf>,
) -> Result<Scanned> {
    let mut options = options.clone();
    options.with_devices = true;
    options.with_specials = true;
    let spool = Spool::new(options.spool_dir.as_deref())?;
    let mut builder = Builder::new(&options, filter, progress, spool);
    let nodes = stack.walk(stack.root(), b"").map_err(image_error)?;
    // The first path of each regular file, for its other names.
    let mut first_path: HashMap<u64, Vec<u8>> = HashMap::new();
    for node in nodes {
        let st = stack.stat(node.ino).map_err(image_error)?;
        let kind = match node.kind {
            FileKind::Directory => MemberKind::Dir,
            FileKind::Regular => match first_path.get(&node.ino) {
                Some(first) => MemberKind::HardLink(first.clone()),
                None => {
                    first_path.insert(node.ino, node.path.clone());
                    let at = stack.locate(node.ino).map_err(image_error)?;
                    let source = contents(&mut builder.spool, &at, st.size)?;
                    MemberKind::File {
                        source,
                        size: st.size,
                    }
                }
            },
            FileKind::Symlink => {
                MemberKind::Symlink(stack.readlink(node.ino).map_err(image_error)?)
            }
            FileKind::CharDevice | FileKind::BlockDevice => MemberKind::Device(st.rdev),
            FileKind::Fifo | FileKind::Socket => MemberKind::Special,
        };
        let time = |t: hoard_reader::Time| Time {
            sec: t.sec,
            nsec: t.nsec,
        };
        builder.add(Member {
            path: node.path,
            kind,
            attrs: Attrs {
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
                atime: time(st.atime),
                mtime: time(st.mtime),
                ctime: time(st.ctime),
            },
            xattrs: stack.xattrs(node.ino).map_err(image_error)?,
        })?;
    }
    Ok(builder.finish())
}

/// Writes the merged tree of the stack `options.flatten` as one image
/// with the layers' blocks copied as they are (`options`' compression
/// applies to the metadata only). Layers with categorized blocks are
/// refused: their blocks' categories would be lost.
pub fn flatten_reusing_blocks(options: &CreateOptions) -> Result<Summary> {
    let stack = open(&options.flatten)?;
    let layers = stack.layers();
    for (fs, path) in layers.iter().zip(&options.flatten) {
        if (0..fs.block_count() as u32).any(|b| fs.block_category(b).is_some()) {
            return Err(Error::Input(format!(
                "{}: its blocks have categories, which reused blocks would lose (recompress instead)",
                path.display()
            )));
        }
    }
    let block_size = layers
        .iter()
        .map(|fs| fs.block_size())
        .max()
        .unwrap_or(1 << 24);
    let mut image = ImageFile::create(&options.output, options.force, options.header.as_deref())?
        .with_fsync(options.fsync)
        .with_signing_key(options.sign.clone())
        .with_encryption(options.encrypt.as_deref())?;
    // Where each regular file's contents are: (layer, inode), by the
    // number its (never written) spool path is given.
    let mut located: Vec<(usize, u32)> = Vec::new();
    let scanned = walk(
        &stack,
        &options.scan,
        options.filter.as_ref(),
        &Default::default(),
        &mut |spool, at, _| {
            let layer = layers
                .iter()
                .position(|fs| Arc::ptr_eq(fs, &at.fs))
                .ok_or_else(|| Error::Input("a file of no layer".into()))?;
            located.push((layer, at.ino));
            Ok(spool.dir().join((located.len() - 1).to_string()))
        },
    )?;
    let tree = scanned.tree;
    // One content per distinct stored content of a layer.
    let mut by_content: HashMap<(usize, usize), usize> = HashMap::new();
    let mut contents: Vec<Content> = Vec::new();
    let mut content_at: Vec<(usize, u32)> = Vec::new();
    for (i, file) in tree.files.iter().enumerate() {
        let n: usize = file
            .source
            .as_path()
            .and_then(Path::file_name)
            .and_then(|s| s.to_str()?.parse().ok())
            .ok_or_else(|| Error::Input("lost track of a file's contents".into()))?;
        let (layer, ino) = located[n];
        let key = (
            layer,
            layers[layer].content_index(ino).map_err(image_error)?,
        );
        let c = *by_content.entry(key).or_insert_with(|| {
            contents.push(Content {
                size: file.size,
                files: smallvec::SmallVec::new(),
                nilsimsa: None,
            });
            content_at.push((layer, ino));
            contents.len() - 1
        });
        contents[c].files.push(i);
    }
    // The blocks used, in layer and block order, renumbered.
    let mut extents = Vec::with_capacity(content_at.len());
    let mut used: BTreeMap<(usize, u32), u32> = BTreeMap::new();
    for &(layer, ino) in &content_at {
        let e = layers[layer].extents(ino).map_err(image_error)?;
        for x in &e {
            if let Extent::Data { block, .. } = x {
                used.insert((layer, *block), 0);
            }
        }
        extents.push((layer, e));
    }
    let mut block_bytes = 0u64;
    for (n, ((layer, block), number)) in used.iter_mut().enumerate() {
        *number = n as u32;
        let fs = &layers[*layer];
        let section = &fs.blocks()[*block as usize];
        let payload = fs.image().plain_payload(section).map_err(image_error)?;
        block_bytes += payload.len() as u64;
        image.section(SectionType::BLOCK, section.header.compression, &payload)?;
    }
    let pieces: Vec<PieceList> = extents
        .iter()
        .map(|(layer, e)| {
            e.iter()
                .map(|x| match *x {
                    Extent::Data {
                        block,
                        offset,
                        size,
                    } => Piece::Data {
                        block: used[&(*layer, block)],
                        offset,
                        size,
                    },
                    Extent::Hole { size } => Piece::Hole(size),
                })
                .collect()
        })
        .collect();
    let deduped = Deduped {
        contents,
        unreadable: Vec::new(),
    };
    let counts = tree.counts();
    let original_bytes = deduped.contents.iter().map(|c| c.size).sum();
    let inputs = Inputs {
        tree: &tree,
        deduped,
        pieces,
        blocks: used.len() as u32,
        block_size,
    };
    let meta = build_metadata(options, inputs, None);
    drop(tree);
    let metadata_bytes = write_metadata(&mut image, options, &meta)?;
    write_history(&mut image, options)?;
    let image_bytes = image.finish(options.section_index, options.recovery)?;
    Ok(Summary {
        counts,
        original_bytes,
        blocks: used.len() as u64,
        block_bytes,
        metadata_bytes,
        image_bytes,
        warnings: scanned.warnings,
        ..Summary::default()
    })
}

/// A regular file of an image, read from the start.
struct Contents {
    fs: Arc<Filesystem>,
    ino: u32,
    offset: u64,
}

impl Read for Contents {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .fs
            .read(self.ino, self.offset, buf)
            .map_err(std::io::Error::other)?;
        self.offset += n as u64;
        Ok(n)
    }
}
