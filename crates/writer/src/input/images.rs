//! The images a build reads: the bases of a layer (`--base`), the layers
//! `rewrite` flattens and the parts `merge` joins. Encrypted ones open
//! with [`CreateOptions::identities`]; a build from them must encrypt its
//! output too or say [`CreateOptions::decrypt`], so that no key given
//! for reading writes a plain image unasked.

use crate::options::CreateOptions;
use crate::{Error, Result};
use hoard_reader::cache::BlockCache;
use hoard_reader::{Filesystem, FsOptions, Image, OpenOptions, Stack};
use std::path::Path;
use std::sync::Arc;

/// The block cache the images a build reads share: 64 MiB of
/// decompressed blocks.
pub fn block_cache() -> Result<BlockCache> {
    let options = FsOptions {
        cache_size: 64 << 20,
        ..FsOptions::default()
    };
    Filesystem::check_options(&options).map_err(|e| Error::Input(e.to_string()))
}

/// Opens the images at `paths` as a stack, bottom layer first, their
/// blocks read through `cache`; `what` names them in errors (`image`,
/// `base image`).
pub fn open_stack(
    paths: &[&Path],
    options: &CreateOptions,
    cache: &BlockCache,
    what: &str,
) -> Result<Stack> {
    let open = OpenOptions {
        identities: options.identities.clone(),
        ..OpenOptions::default()
    };
    let layers = paths
        .iter()
        .map(|path| {
            let failed =
                |why: String| Error::Input(format!("cannot open {what} {}: {why}", path.display()));
            let image = Image::open(path, &open).map_err(|e| failed(e.to_string()))?;
            readable(&image, options).map_err(failed)?;
            Filesystem::from_image_with_cache(image, cache.for_another_image())
                .map(Arc::new)
                .map_err(|e| failed(e.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    Stack::from_layers(layers).map_err(|e| Error::Input(format!("cannot open {what}s: {e}")))
}

/// Whether a build with `options` may read `image`: a key must open it
/// if it is encrypted, and then the output must be encrypted too or
/// decrypting asked for.
fn readable(image: &Image, options: &CreateOptions) -> std::result::Result<(), String> {
    let Some(encryption) = image.encryption() else {
        return Ok(());
    };
    if !encryption.is_unlocked() {
        return Err(format!(
            "it is encrypted ({}): give --identity FILE or --input-passphrase-file FILE",
            encryption.wrapping()
        ));
    }
    if options.output.encrypt.is_none() && !options.decrypt {
        return Err(
            "it is encrypted: encrypt the output too (--encrypt-to or --passphrase-file) or say --decrypt"
                .into(),
        );
    }
    Ok(())
}
