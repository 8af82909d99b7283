//! The images `hoard merge --recompress` joins, read as one tree: each
//! part's tree under a directory of its own, or all of them at the root
//! ([`Parts::names`]); file contents are spooled from the parts, to be
//! compressed again. [`crate::merge`] builds from the same tree with the
//! parts' blocks copied as they are.

use super::images::{block_cache, open_stack};
use super::stack::{add_stack, attrs_of, image_error, image_scan_options, spool_contents};
use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::filter::Filter;
use crate::options::{CreateOptions, Parts};
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::{Error, Result};
use hoard_reader::{Located, Stack, View};
use std::path::PathBuf;

/// Opens each image of `parts` as a stack of one, all sharing one block
/// cache.
pub(crate) fn open(parts: &Parts, options: &CreateOptions) -> Result<Vec<Stack>> {
    let cache = block_cache()?;
    parts
        .images
        .iter()
        .map(|p| open_stack(std::slice::from_ref(p), options, &cache, false))
        .collect()
}

/// Builds the merged tree of `stacks` as `parts` place them; `contents`
/// gives each regular file the path its contents are read from.
pub(crate) fn merged_tree(
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
    let st = stack.stat(stack.root()).map_err(image_error)?;
    Ok(Member {
        path: Vec::new(),
        kind: MemberKind::Dir,
        attrs: attrs_of(&st),
        xattrs: Vec::new(),
    })
}

/// Stage 1 of a merge that recompresses: the merged tree of `parts`,
/// each file's contents spooled (in `scan.spool_dir`).
pub(crate) fn scan_parts(
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
