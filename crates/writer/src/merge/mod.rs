//! `hoard merge PART... -o IMAGE`: images built apart (the shards of one
//! tree, or unrelated trees) joined into one image, each part's tree under
//! a directory of its own or all of them at the root (`--union`).
//!
//! [`merge_reusing_blocks`] copies the parts' compressed blocks as they
//! are (renumbered, part after part) and writes new metadata: a file's
//! chunks point into the copied blocks of its part, and with
//! [`Parts::dedupe`] a content a later part stores again points at the
//! earlier copy (the `equal` module); a block no content uses any more is left
//! out. The parts must share a block size. Memory grows with the number
//! of entries (the merged tree), not with the data; the data is read
//! only to hash contents of a size several parts hold.
//!
//! With `--recompress`, [`scan_parts`] makes the merged tree a build's
//! input instead (the build stage of [`crate::pipeline`]): file contents
//! are spooled from the parts and compressed again, any block sizes.

mod equal;

use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::filter::Filter;
use crate::flatten::{
    add_stack, image_scan_options, spool_contents, stored_contents, write_reusing_blocks,
    FileLocations,
};
use crate::output::ImageFile;
use crate::pipeline::{CreateOptions, Summary};
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
use hoard_reader::{Filesystem, Located, Stack, View};
use std::path::PathBuf;
use std::sync::Arc;

/// The images `hoard merge` joins, and where their trees go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// The images, in order.
    pub images: Vec<PathBuf>,
    /// The directory each image's tree goes under (one name each); `None`
    /// joins the trees at the root (`--union`), where a path in two parts
    /// is an error unless both are directories (they merge, the later
    /// part's attributes kept).
    pub names: Option<Vec<String>>,
    /// Store a content several parts hold once (found by size and hash).
    pub dedupe: bool,
}

impl Parts {
    /// `images`, each under a directory named after its file (the name
    /// without its last extension: `a.dwarfs` goes under `a/`).
    pub fn under_own_names(images: Vec<PathBuf>) -> Result<Self> {
        let names = images
            .iter()
            .map(|p| {
                p.file_stem()
                    .and_then(|s| s.to_str())
                    .map(String::from)
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "{}: no file name to name its directory by (use --as NAME)",
                            p.display()
                        ))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Parts {
            images,
            names: Some(names),
            dedupe: true,
        })
    }

    /// Checks that there are parts, and one valid, distinct name each.
    fn check(&self) -> Result<()> {
        if self.images.is_empty() {
            return Err(Error::Input("no images to merge".into()));
        }
        let Some(names) = &self.names else {
            return Ok(());
        };
        if names.len() != self.images.len() {
            return Err(Error::Input(format!(
                "{} directory names for {} images (one --as NAME each)",
                names.len(),
                self.images.len()
            )));
        }
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
                return Err(Error::Input(format!(
                    "'{name}' is not a directory name (one path component)"
                )));
            }
            if names[..i].contains(name) {
                return Err(Error::Input(format!(
                    "two images go under '{name}' (give each its own --as NAME)"
                )));
            }
        }
        Ok(())
    }
}

/// Opens each image of `parts` as a stack of one, all sharing one block
/// cache.
fn open(parts: &Parts, options: &CreateOptions) -> Result<Vec<Stack>> {
    let cache = crate::inputs::block_cache()?;
    parts
        .images
        .iter()
        .map(|p| crate::inputs::open_stack(std::slice::from_ref(p), options, &cache, false))
        .collect()
}

/// The first (only) layer of each stack.
fn layers(stacks: &[Stack]) -> Vec<Arc<Filesystem>> {
    stacks.iter().map(|s| s.layers()[0].clone()).collect()
}

/// Builds the merged tree of `stacks` as `parts` place them; `contents`
/// gives each regular file the path its contents are read from.
fn merged_tree(
    parts: &Parts,
    stacks: &[Stack],
    scan: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
    contents: &mut dyn FnMut(&mut Spool, &Located, u64) -> Result<PathBuf>,
) -> Result<Scanned> {
    let scan = image_scan_options(scan);
    let spool = Spool::new(scan.spool_dir.as_deref())?;
    let mut builder = Builder::new(&scan, filter, progress, spool);
    match &parts.names {
        Some(names) => {
            // The root takes the first part's root's attributes.
            builder.add(root_member(&stacks[0])?)?;
            for (stack, name) in stacks.iter().zip(names) {
                add_stack(&mut builder, stack, name.as_bytes(), contents)?;
            }
        }
        None => {
            builder.refuse_replacing();
            for (stack, image) in stacks.iter().zip(&parts.images) {
                add_stack(&mut builder, stack, b"", contents)
                    .map_err(|e| Error::Input(format!("{}: {e}", image.display())))?;
            }
        }
    }
    Ok(builder.finish())
}

/// The root directory of `stack`, without its extended attributes.
fn root_member(stack: &Stack) -> Result<Member> {
    let st = stack
        .stat(stack.root())
        .map_err(|e| Error::Input(e.to_string()))?;
    let time = |t: hoard_reader::Time| Time {
        sec: t.sec,
        nsec: t.nsec,
    };
    Ok(Member {
        path: Vec::new(),
        kind: MemberKind::Dir,
        attrs: Attrs {
            mode: st.mode,
            uid: st.uid,
            gid: st.gid,
            atime: time(st.atime),
            mtime: time(st.mtime),
            ctime: time(st.ctime),
        },
        xattrs: Vec::new(),
    })
}

/// Refuses parts of different block sizes, naming two of them.
fn check_block_sizes(parts: &Parts, layers: &[Arc<Filesystem>]) -> Result<()> {
    let first = layers[0].block_size();
    if let Some(i) = layers.iter().position(|fs| fs.block_size() != first) {
        return Err(Error::Input(format!(
            "'{}' has blocks of {} bytes, '{}' of {}: merging them as they are cannot work \
             (--recompress writes new blocks)",
            parts.images[0].display(),
            first,
            parts.images[i].display(),
            layers[i].block_size()
        )));
    }
    Ok(())
}

/// Writes the merge of `options.merge` to `options.output` with the
/// parts' blocks copied as they are (`options`' compression applies to
/// the metadata only).
pub fn merge_reusing_blocks(options: &CreateOptions) -> Result<Summary> {
    let parts = options
        .merge
        .as_ref()
        .ok_or_else(|| Error::Input("no images to merge".into()))?;
    parts.check()?;
    let stacks = open(parts, options)?;
    let layers = layers(&stacks);
    check_block_sizes(parts, &layers)?;
    let image = ImageFile::create(&options.output)?;
    let mut located = FileLocations::default();
    let scanned = merged_tree(
        parts,
        &stacks,
        &options.scan,
        options.filter.as_ref(),
        &ScanProgress::default(),
        &mut |spool, at, _| located.record(&layers, spool, at),
    )?;
    let mut stored = stored_contents(&scanned.tree, &located, &layers)?;
    if parts.dedupe {
        stored = equal::join_equal_contents(stored, &layers)?;
    }
    write_reusing_blocks(image, options, &layers, scanned, stored)
}

/// Stage 1 of a merge that recompresses: the merged tree of `parts`,
/// each file's contents spooled (in `scan.spool_dir`).
pub fn scan_parts(
    parts: &Parts,
    options: &CreateOptions,
    scan: &ScanOptions,
    progress: &ScanProgress,
) -> Result<Scanned> {
    parts.check()?;
    let stacks = open(parts, options)?;
    merged_tree(
        parts,
        &stacks,
        scan,
        options.filter.as_ref(),
        progress,
        &mut spool_contents,
    )
}
