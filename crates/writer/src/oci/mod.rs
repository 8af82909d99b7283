//! Stage 1 for a container image (`-i oci:LAYOUT[:TAG]`,
//! `-i docker-archive:FILE[:REF]`, `-i docker://HOST/REPO[:TAG]`): the image's layers, applied in order
//! under OCI's whiteout rules, become the same [`Tree`](crate::tree::Tree)
//! a directory scan gives, and the image's config is kept for the
//! metadata.
//!
//! Everything is read through a [`hoard_oci::Store`] and a reference, so
//! any store (a layout, a docker archive, a registry) gives the same
//! tree. Each layer (tar, tar+gzip, tar+zstd: libarchive tells them
//! apart) streams through its digest and is read to its end: a layer
//! whose digest or size differs fails the build, and since the tree is
//! applied in memory (the `layered` module), before the image is written, nothing
//! is left behind. File contents are spooled as an archive's are.
//!
//! Paths are never followed on the host: there is no tree on disk. An
//! entry or whiteout whose path is absolute, goes up (`..`) or passes
//! through something that is not a directory (a symlink, say) is an
//! error.

mod layered;
mod pump;

use crate::archive::{Builder, Spool};
use crate::filter::Filter;
use crate::input::stack::image_scan_options;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::scratch::ScratchDir;
use crate::{Error, Result};
use hoard_archive::ArchiveReader;
use hoard_oci::registry::Options as RegistryOptions;
use hoard_oci::spec::Descriptor;
use hoard_oci::{Image, Platform, Source, Store};
use layered::Layered;
use std::path::Path;

/// An error of the container image read.
fn oci_error(e: hoard_oci::Error) -> Error {
    Error::Input(e.to_string())
}

/// Reads the container image `source` names (the one for `platform`,
/// this machine's if `None`; only its bottom `layers` layers if given;
/// a registry reached with `registry`) into a tree, as `scan` says.
pub fn scan_source(
    source: &Source,
    platform: Option<&Platform>,
    layers: Option<usize>,
    registry: &RegistryOptions,
    scan: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let opened = source.open(registry).map_err(oci_error)?;
    let image = Image::resolve(&*opened.store, &opened.reference, platform).map_err(oci_error)?;
    scan_image(&*opened.store, &image, layers, scan, filter, progress)
}

/// What `create --layers` builds its layers from.
pub struct LayerInput {
    /// The layers' names, bottom first: each the hex of its chain
    /// digest, the digest of its own digest after the chain digest of
    /// the layers below (the first's is its digest), as OCI's chain ids.
    /// A name stands for a layer over exactly those below it, so images
    /// that share base layers share these names, and a layer is never
    /// put on other layers than it was made on.
    pub names: Vec<String>,
    /// The input each layer is read from: the source itself, or its copy.
    pub input: String,
    /// A registry image's copy, removed when this is dropped.
    _copy: Option<ScratchDir>,
}

/// The layers of the image `source` names (`name` as the user gave it;
/// for `platform`; a registry reached with `registry`). Layer N is built
/// from layers 1 to N, so an image in a registry is first copied into a
/// scratch layout in `dir` (the layers' directory): each blob is fetched
/// once, not once per layer above it. A local source is read in place.
pub fn layer_input(
    name: &str,
    source: &Source,
    platform: Option<&Platform>,
    registry: &RegistryOptions,
    dir: &Path,
) -> Result<LayerInput> {
    let opened = source.open(registry).map_err(oci_error)?;
    let image = Image::resolve(&*opened.store, &opened.reference, platform).map_err(oci_error)?;
    let names = chain_names(&image)?;
    // `oci:DIR` cannot name a directory with a colon in its path.
    let copyable = dir.to_str().is_some_and(|d| !d.contains(':'));
    if !matches!(source, Source::Registry { .. }) || !copyable {
        return Ok(LayerInput {
            names,
            input: name.to_string(),
            _copy: None,
        });
    }
    let copy = ScratchDir::new_in(dir, "pull")?;
    hoard_oci::mirror::mirror(&*opened.store, &image, copy.path()).map_err(oci_error)?;
    Ok(LayerInput {
        names,
        input: format!("oci:{}", copy.path().display()),
        _copy: Some(copy),
    })
}

/// The chain names of `image`'s layers, bottom first (see
/// [`LayerInput::names`]).
fn chain_names(image: &Image) -> Result<Vec<String>> {
    let mut chain: Option<hoard_oci::Digest> = None;
    let mut names = Vec::new();
    for layer in &image.manifest.layers {
        let digest = layer.digest().map_err(oci_error)?;
        let next = match &chain {
            None => digest,
            Some(below) => hoard_oci::Digest::sha256_of(format!("{below} {digest}").as_bytes()),
        };
        names.push(format!("{}-{}", next.algorithm(), next.hex()));
        chain = Some(next);
    }
    Ok(names)
}

/// Reads `image` of `store` into a tree: its layers (the bottom `layers`
/// if given) applied bottom first, devices and special files kept, its
/// config in [`Scanned::container_config`].
pub fn scan_image(
    store: &dyn Store,
    image: &Image,
    layers: Option<usize>,
    scan: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let scan = image_scan_options(scan);
    let mut layered = Layered::new(Spool::new(scan.spool_dir.as_deref())?);
    let count = layers.unwrap_or(usize::MAX);
    for (i, layer) in image.manifest.layers.iter().take(count).enumerate() {
        apply_layer(store, layer, i + 1, &mut layered)
            .map_err(|e| Error::Input(format!("layer {} ({}): {e}", i + 1, layer.digest_text)))?;
    }
    let (members, spool) = layered.finish();
    let mut builder = Builder::new(&scan, filter, progress, spool);
    for member in members {
        builder.add(member)?;
    }
    let mut scanned = builder.finish();
    scanned.container_config = Some(image.config_bytes.clone());
    Ok(scanned)
}

/// Applies the layer `layer` (number `number`, from 1) of `store` to
/// `layered`, reading it to its end through its digest.
fn apply_layer(
    store: &dyn Store,
    layer: &Descriptor,
    number: usize,
    layered: &mut Layered,
) -> std::result::Result<(), String> {
    let digest = layer.digest().map_err(|e| e.to_string())?;
    let blob = store.blob(&digest, layer.size).map_err(|e| e.to_string())?;
    pump::with_stream(blob, |stream| {
        let mut reader =
            ArchiveReader::open_stream(stream, &layer.digest_text).map_err(|e| e.to_string())?;
        let mut first = true;
        while let Some(member) = reader.next_member().map_err(|e| e.to_string())? {
            if first {
                check_tar(&reader.format())?;
                first = false;
            }
            layered.apply(number, member, &mut reader)?;
        }
        Ok(())
    })
}

/// Refuses a layer libarchive read as anything but a tar.
fn check_tar(format: &str) -> std::result::Result<(), String> {
    let kind = format
        .split(',')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if kind.contains("tar") || kind.contains("pax") {
        Ok(())
    } else {
        Err(format!("it is not a tar ({format})"))
    }
}
