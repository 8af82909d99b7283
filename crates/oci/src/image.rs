//! One image of a store, resolved: the reference followed through an
//! index to the manifest of the platform asked for, and its config read.

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::spec::{self, Config, Descriptor, Manifest, Parsed, Platform};
use crate::store::Store;
use std::io::Read;

/// Most indexes followed from a reference to a manifest.
const MAX_NESTING: usize = 4;

/// An image: its manifest (checked against its digest) and config.
#[derive(Debug, Clone)]
pub struct Image {
    /// The digest of the manifest: what names this image's content.
    pub manifest_digest: Digest,
    /// The manifest.
    pub manifest: Manifest,
    /// The config, parsed.
    pub config: Config,
    /// The config as stored (checked against its digest).
    pub config_bytes: Vec<u8>,
}

impl Image {
    /// The image `reference` names in `store`: an index is followed to
    /// the manifest for `platform` (this machine's if `None`).
    pub fn resolve(
        store: &dyn Store,
        reference: &str,
        platform: Option<&Platform>,
    ) -> Result<Image> {
        let wanted = platform.cloned().unwrap_or_else(Platform::current);
        let mut fetched = store.manifest(reference)?;
        let mut depth = 0;
        let manifest = loop {
            match spec::parse_manifest(&fetched.media_type, &fetched.bytes)? {
                Parsed::Manifest(m) => break m,
                Parsed::Index(index) => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(Error::Invalid {
                            what: "index",
                            why: "indexes nested too deep".into(),
                        });
                    }
                    let chosen = choose(&index.manifests, &wanted)?;
                    let digest = chosen.digest()?;
                    fetched = store.manifest(&digest.to_string())?;
                    if fetched.digest != digest || fetched.bytes.len() as u64 != chosen.size {
                        return Err(Error::Invalid {
                            what: "index",
                            why: format!("the manifest of {digest} is not the one it names"),
                        });
                    }
                }
            }
        };
        let config_bytes = read_blob(store, &manifest.config, spec::MAX_CONFIG)?;
        let config = spec::parse_config(&config_bytes)?;
        if let Some(rootfs) = &config.rootfs {
            if !rootfs.diff_ids.is_empty() && rootfs.diff_ids.len() != manifest.layers.len() {
                return Err(Error::Invalid {
                    what: "config",
                    why: format!(
                        "{} layer digests for {} layers",
                        rootfs.diff_ids.len(),
                        manifest.layers.len()
                    ),
                });
            }
        }
        Ok(Image {
            manifest_digest: fetched.digest,
            manifest,
            config,
            config_bytes,
        })
    }
}

/// The descriptor of `list` for `platform`: the first image manifest
/// (or index) whose platform matches; an error listing those there are.
fn choose<'a>(list: &'a [Descriptor], platform: &Platform) -> Result<&'a Descriptor> {
    let images = || {
        list.iter()
            .filter(|d| spec::is_manifest_type(&d.media_type))
    };
    if let Some(d) = images().find(|d| d.platform.as_ref().is_some_and(|p| platform.matches(p))) {
        return Ok(d);
    }
    // An index without platforms (a layout's, say) with one image.
    let mut all = images();
    if let (Some(only), None) = (all.next(), all.next()) {
        if only.platform.is_none() {
            return Ok(only);
        }
    }
    let offered: Vec<String> = images()
        .filter_map(|d| d.platform.as_ref().map(Platform::to_string))
        .take(20)
        .collect();
    Err(Error::NotFound(format!(
        "no image for platform {platform} (the index has: {})",
        if offered.is_empty() {
            "none named".to_string()
        } else {
            offered.join(", ")
        }
    )))
}

/// Reads the whole blob `d` (at most `max` bytes), checked against its
/// digest and size.
pub fn read_blob(store: &dyn Store, d: &Descriptor, max: u64) -> Result<Vec<u8>> {
    if d.size > max {
        return Err(Error::Invalid {
            what: "descriptor",
            why: format!("{} is {} bytes, more than {max}", d.digest_text, d.size),
        });
    }
    let mut bytes = Vec::with_capacity(d.size as usize);
    store.blob(&d.digest()?, d.size)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}
