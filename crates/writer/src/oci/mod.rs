//! Stage 1 for a container image (`-i oci:LAYOUT[:TAG]`,
//! `-i docker-archive:FILE[:REF]`): the image's layers, applied in order
//! under OCI's whiteout rules, become the same [`Tree`](crate::tree::Tree)
//! a directory scan gives, and the image's config is kept for the
//! metadata.
//!
//! Everything is read through a [`hoard_oci::Store`] and a reference, so
//! any store (a layout, a docker archive, a registry) gives the same
//! tree. Each layer (tar, tar+gzip, tar+zstd: libarchive tells them
//! apart) streams through its digest and is read to its end: a layer
//! whose digest or size differs fails the build, and since the tree is
//! applied in memory ([`layered`]), before the image is written, nothing
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
use crate::{Error, Result};
use hoard_archive::ArchiveReader;
use hoard_oci::spec::Descriptor;
use hoard_oci::{Image, Platform, Source, Store};
use layered::Layered;

/// An error of the container image read.
fn oci_error(e: hoard_oci::Error) -> Error {
    Error::Input(e.to_string())
}

/// Reads the container image `source` names (the one for `platform`,
/// this machine's if `None`) into a tree, as `scan` says.
pub fn scan_source(
    source: &Source,
    platform: Option<&Platform>,
    scan: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let opened = source.open().map_err(oci_error)?;
    scan_image(
        &*opened.store,
        &opened.reference,
        platform,
        scan,
        filter,
        progress,
    )
}

/// Reads the image `reference` names in `store` into a tree: its layers
/// applied bottom first, devices and special files kept, its config in
/// [`Scanned::container_config`].
pub fn scan_image(
    store: &dyn Store,
    reference: &str,
    platform: Option<&Platform>,
    scan: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let image = Image::resolve(store, reference, platform).map_err(oci_error)?;
    let scan = image_scan_options(scan);
    let mut layered = Layered::new(Spool::new(scan.spool_dir.as_deref())?);
    for (i, layer) in image.manifest.layers.iter().enumerate() {
        apply_layer(store, layer, i + 1, &mut layered)
            .map_err(|e| Error::Input(format!("layer {} ({}): {e}", i + 1, layer.digest_text)))?;
    }
    let (members, spool) = layered.finish();
    let mut builder = Builder::new(&scan, filter, progress, spool);
    for member in members {
        builder.add(member)?;
    }
    let mut scanned = builder.finish();
    scanned.container_config = Some(image.config_bytes);
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
