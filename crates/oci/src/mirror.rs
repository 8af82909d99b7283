//! One image of a store copied into a new image layout directory, for
//! work that reads its layers more than once (`hoard create --layers`
//! builds layer N from layers 1 to N): a registry's blobs are then
//! fetched once. Every blob is checked against its digest as it is
//! copied; the copy holds the manifest, config and layers, and its
//! `index.json` names only the manifest.

use crate::digest::Digest;
use crate::error::Result;
use crate::image::Image;
use crate::store::Store;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Copies `image` of `store` into `dir` (an existing, empty directory)
/// as an OCI image layout whose only image it is.
pub fn mirror(store: &dyn Store, image: &Image, dir: &Path) -> Result<()> {
    let manifest = store.manifest(&image.manifest_digest.to_string())?;
    let blobs = dir.join("blobs").join(manifest.digest.algorithm());
    std::fs::create_dir_all(&blobs)?;
    write_new(&blob_path(dir, &manifest.digest), &manifest.bytes)?;
    let config = image.manifest.config.digest()?;
    config.verify(&image.config_bytes)?;
    write_new(&blob_path(dir, &config), &image.config_bytes)?;
    for layer in &image.manifest.layers {
        let digest = layer.digest()?;
        let path = blob_path(dir, &digest);
        if path.exists() {
            continue;
        }
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        let mut out = File::create(&path)?;
        // The store's reader fails, rather than end, on bytes that do not
        // match the digest.
        std::io::copy(&mut store.blob(&digest, layer.size)?, &mut out)?;
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": crate::spec::OCI_INDEX,
        "manifests": [{
            "mediaType": manifest.media_type,
            "digest": manifest.digest.to_string(),
            "size": manifest.bytes.len(),
        }],
    });
    write_new(&dir.join("index.json"), index.to_string().as_bytes())?;
    write_new(
        &dir.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    Ok(())
}

/// Where a layout keeps the blob `digest`.
fn blob_path(dir: &Path, digest: &Digest) -> std::path::PathBuf {
    dir.join("blobs")
        .join(digest.algorithm())
        .join(digest.hex())
}

/// Writes `bytes` to `path`.
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    File::create(path)?.write_all(bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use crate::spec;
    use std::io::Read;

    /// A layout of one image with one layer (its bytes `layer`).
    fn layout_with(dir: &Path, layer: &[u8]) {
        let config =
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
        let (config_d, layer_d) = (Digest::sha256_of(config), Digest::sha256_of(layer));
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": spec::OCI_MANIFEST,
            "config": {"mediaType": spec::OCI_CONFIG,
                       "digest": config_d.to_string(), "size": config.len()},
            "layers": [{"mediaType": spec::OCI_LAYER_TAR,
                        "digest": layer_d.to_string(), "size": layer.len()}],
        })
        .to_string();
        let manifest_d = Digest::sha256_of(manifest.as_bytes());
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        for (d, bytes) in [
            (&config_d, &config[..]),
            (&layer_d, layer),
            (&manifest_d, manifest.as_bytes()),
        ] {
            std::fs::write(blob_path(dir, d), bytes).unwrap();
        }
        let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
            "mediaType": spec::OCI_MANIFEST, "digest": manifest_d.to_string(),
            "size": manifest.len()}]});
        std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    }

    #[test]
    fn the_copy_holds_the_same_image_and_a_changed_blob_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("source");
        layout_with(&source, b"layer bytes");
        let store = Layout::open(&source).unwrap();
        let image = Image::resolve(&store, &store.only_reference().unwrap(), None).unwrap();

        let copy = tmp.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        mirror(&store, &image, &copy).unwrap();
        let copied = Layout::open(&copy).unwrap();
        let again = Image::resolve(&copied, &copied.only_reference().unwrap(), None).unwrap();
        assert_eq!(again.manifest_digest, image.manifest_digest);
        let layer = &again.manifest.layers[0];
        let mut bytes = Vec::new();
        copied
            .blob(&layer.digest().unwrap(), layer.size)
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        assert_eq!(bytes, b"layer bytes");

        // A layer changed in the source is never copied as if it were good.
        let digest = image.manifest.layers[0].digest().unwrap();
        std::fs::write(blob_path(&source, &digest), b"LAYER bytes").unwrap();
        let bad = tmp.path().join("bad");
        std::fs::create_dir(&bad).unwrap();
        let err = mirror(&store, &image, &bad).unwrap_err().to_string();
        assert!(err.contains("sha256"), "{err}");
        assert!(!bad.join("index.json").exists());
    }
}
