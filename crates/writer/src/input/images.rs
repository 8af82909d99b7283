//! The images a build reads: the bases of a layer (`--base`), the layers
//! `rewrite` flattens and the parts `merge` joins, opened through the
//! reader's opener ([`hoard_reader::open`]). With
//! [`CreateOptions::trust`] each must be signed by a trusted key, and
//! every section of it is checked against the signature before use, so
//! no build reads an unverified byte. Encrypted ones open with
//! [`CreateOptions::identities`]; a build from them must encrypt its
//! output too or say [`CreateOptions::decrypt`], so that no key given
//! for reading writes a plain image unasked.

use crate::options::CreateOptions;
use crate::{Error, Result};
use hoard_reader::cache::BlockCache;
use hoard_reader::open::{open, Form, Opened, Target};
use hoard_reader::{Filesystem, FsOptions, Image, Stack};
use std::path::PathBuf;

/// The block cache the images a build reads share: 64 MiB of
/// decompressed blocks.
pub fn block_cache() -> Result<BlockCache> {
    let options = FsOptions {
        cache_size: 64 << 20,
        ..FsOptions::default()
    };
    Filesystem::check_options(&options).map_err(|e| Error::Input(e.to_string()))
}

/// Opens the images at `paths` as a stack, bottom layer first, with the
/// keys of `options`, their blocks read through `cache`; a layer made
/// on other images than the ones below it is refused unless `force`.
pub fn open_stack(
    paths: &[PathBuf],
    options: &CreateOptions,
    cache: &BlockCache,
    force: bool,
) -> Result<Stack> {
    let mut target = Target::new(paths.to_vec());
    target.form = Form::Stack { force };
    target.options.open.trust = options.trust.clone();
    target.options.open.identities = options.identities.clone();
    target.cache = Some(cache.for_another_image());
    let stack = open(&target)
        .and_then(Opened::into_stack)
        .map_err(|e| Error::Input(e.to_string()))?;
    for (layer, path) in stack.layers().iter().zip(paths) {
        readable(layer.image(), options).map_err(|why| {
            Error::Input(format!("cannot open image '{}': {why}", path.display()))
        })?;
    }
    Ok(stack)
}

/// Whether a build with `options` may read `image` (opened, so
/// unlocked if encrypted): when it is encrypted, the output must be
/// encrypted too or decrypting asked for.
fn readable(image: &Image, options: &CreateOptions) -> std::result::Result<(), String> {
    if image.encryption().is_none() {
        return Ok(());
    }
    if options.output.encrypt.is_none() && !options.decrypt {
        return Err(
            "it is encrypted: encrypt the output too (--encrypt-to or --passphrase-file) or say --decrypt"
                .into(),
        );
    }
    Ok(())
}
