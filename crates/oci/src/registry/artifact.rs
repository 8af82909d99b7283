//! A hoard image stored in a registry as an OCI artifact: an image
//! manifest with hoard's `artifactType`, the empty config, and the image
//! as its one layer.

use serde_json::{json, Value};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::store::Fetched;

/// The `artifactType` of a hoard image's manifest.
pub const ARTIFACT_TYPE: &str = "application/vnd.hoard.image.v1";
/// The media type of the layer that holds the image file.
pub const LAYER_TYPE: &str = "application/vnd.hoard.image.v1.dwarfs";
/// The media type of an OCI image manifest.
pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The media type of the empty config (`{}`) artifacts carry.
pub const EMPTY_CONFIG_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty config's content.
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// The annotation naming the key that signed the image (its fingerprint,
/// `SHA256:…`, as `hoard keygen` and `ssh-keygen -l` print it).
pub const SIGNER_ANNOTATION: &str = "vnd.hoard.image.signer";
/// The standard annotation holding the image's file name.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The layer of a hoard artifact: where the image is, and who signed it
/// (as the manifest says: the reader checks the signature itself).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HoardImage {
    /// The image blob's digest.
    pub digest: Digest,
    /// The image's size in bytes.
    pub size: u64,
    /// The signing key's fingerprint, when the manifest names one.
    pub signer: Option<String>,
}

/// The manifest of an artifact holding the image blob `image`, named
/// `title`.
pub fn manifest(image: &HoardImage, title: &str) -> Vec<u8> {
    let mut annotations = serde_json::Map::new();
    if let Some(signer) = &image.signer {
        annotations.insert(SIGNER_ANNOTATION.into(), Value::String(signer.clone()));
    }
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": {
            "mediaType": EMPTY_CONFIG_TYPE,
            "digest": Digest::sha256_of(EMPTY_CONFIG).to_string(),
            "size": EMPTY_CONFIG.len(),
        },
        "layers": [{
            "mediaType": LAYER_TYPE,
            "digest": image.digest.to_string(),
            "size": image.size,
            "annotations": { TITLE_ANNOTATION: title },
        }],
    });
    if !annotations.is_empty() {
        manifest["annotations"] = Value::Object(annotations);
    }
    serde_json::to_vec_pretty(&manifest).expect("a JSON value serializes")
}

/// The hoard image a manifest holds; `None` when the manifest is not a
/// hoard artifact (a container image, an index, another artifact).
pub fn parse(fetched: &Fetched) -> Result<Option<HoardImage>> {
    let bad = |why: &str| Error::Invalid {
        what: "hoard artifact manifest",
        why: why.to_string(),
    };
    let Ok(manifest) = serde_json::from_slice::<Value>(&fetched.bytes) else {
        return Ok(None);
    };
    let artifact_type = manifest.get("artifactType").and_then(Value::as_str);
    if fetched.media_type != MANIFEST_TYPE || artifact_type != Some(ARTIFACT_TYPE) {
        return Ok(None);
    }
    let layers = manifest
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no layers"))?;
    let [layer] = layers.as_slice() else {
        return Err(bad("not exactly one layer"));
    };
    if layer.get("mediaType").and_then(Value::as_str) != Some(LAYER_TYPE) {
        return Err(bad("its layer is not of hoard's media type"));
    }
    let digest = layer
        .get("digest")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the layer has no digest"))?;
    let size = layer
        .get("size")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("the layer has no size"))?;
    let signer = manifest
        .get("annotations")
        .and_then(|a| a.get(SIGNER_ANNOTATION))
        .and_then(Value::as_str)
        .map(|s| s.chars().take(200).collect());
    Ok(Some(HoardImage {
        digest: Digest::parse(digest)?,
        size,
        signer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let image = HoardImage {
            digest: Digest::sha256_of(b"image"),
            size: 5,
            signer: Some("SHA256:abc".into()),
        };
        let bytes = manifest(&image, "x.dwarfs");
        let fetched = Fetched {
            media_type: MANIFEST_TYPE.into(),
            digest: Digest::sha256_of(&bytes),
            bytes,
        };
        assert_eq!(parse(&fetched).unwrap(), Some(image));
        let other = Fetched {
            media_type: "application/vnd.docker.distribution.manifest.v2+json".into(),
            ..fetched
        };
        assert_eq!(parse(&other).unwrap(), None);
    }
}
