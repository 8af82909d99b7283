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
//! With `--recompress`, the parts are a build's input instead
//! ([`Input::Parts`], read by `input::parts`): file contents are
//! spooled from the parts and compressed again, any block sizes.

mod equal;

use crate::flatten::{stored_contents, write_reusing_blocks, FileLocations};
use crate::input::parts::{merged_tree, open};
use crate::options::{CreateOptions, Input, Parts};
use crate::output::ImageFile;
use crate::scan::ScanProgress;
use crate::summary::Summary;
use crate::{Error, Result};
use hoard_reader::{Filesystem, Stack};
use std::sync::Arc;

/// The first (only) layer of each stack.
fn layers(stacks: &[Stack]) -> Vec<Arc<Filesystem>> {
    stacks.iter().map(|s| s.layers()[0].clone()).collect()
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

/// Writes the merge of the parts `options.input` names to
/// `options.output` with their blocks copied as they are (`options`'
/// compression applies to the metadata only).
pub fn merge_reusing_blocks(options: &CreateOptions) -> Result<Summary> {
    let Input::Parts(parts) = &options.input else {
        return Err(Error::Input("no images to merge".into()));
    };
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
