//! A `docker save` archive as a [`Store`]: an uncompressed tar holding
//! `manifest.json` (one entry per image: its config file, tags and layer
//! files), the configs and the layers as uncompressed tars, as `docker
//! save` and `skopeo copy … docker-archive:` write it.
//!
//! Such an archive has no manifests of its own, so the store makes one
//! per image, in OCI form: the config named by its digest, each layer by
//! the config's `rootfs.diff_ids` (the digest of the uncompressed tar,
//! which is what the archive holds). Layers are read straight from the
//! archive, through their digests.

use crate::digest::{Digest, VerifyingReader};
use crate::error::{Error, Result};
use crate::spec::{self, Descriptor, Manifest};
use crate::store::{Fetched, Store};
use crate::tar_index::{index, Span};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A `docker save` archive.
pub struct DockerArchive {
    path: PathBuf,
    /// Each image: its tags and the manifest made for it.
    images: Vec<(Vec<String>, Fetched)>,
    /// Where each blob (config or layer) lies, by digest.
    blobs: HashMap<Digest, Span>,
}

/// One entry of `manifest.json`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

fn invalid(why: impl Into<String>) -> Error {
    Error::Invalid {
        what: "docker archive",
        why: why.into(),
    }
}

impl DockerArchive {
    /// Opens the archive at `path`, indexing its members and making a
    /// manifest for each image.
    pub fn open(path: &Path) -> Result<DockerArchive> {
        let mut file = File::open(path).map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", path.display()),
            ))
        })?;
        let members = index(&mut file)?;
        let mut read = |name: &str, max: u64| -> Result<(Vec<u8>, Span)> {
            let span = *members
                .get(name.strip_prefix("./").unwrap_or(name).as_bytes())
                .ok_or_else(|| invalid(format!("it has no member '{name}'")))?;
            if span.size > max {
                return Err(invalid(format!("'{name}' is larger than {max} bytes")));
            }
            let mut bytes = vec![0u8; span.size as usize];
            file.seek(SeekFrom::Start(span.offset))?;
            file.read_exact(&mut bytes)?;
            Ok((bytes, span))
        };
        let (list, _) = read("manifest.json", spec::MAX_MANIFEST)?;
        let entries: Vec<Entry> =
            serde_json::from_slice(&list).map_err(|e| invalid(format!("manifest.json: {e}")))?;
        if entries.len() > spec::MAX_MANIFESTS {
            return Err(invalid("too many images"));
        }
        let mut images = Vec::new();
        let mut blobs = HashMap::new();
        for entry in entries {
            let (config, config_span) = read(&entry.config, spec::MAX_CONFIG)?;
            let config_digest = Digest::sha256_of(&config);
            let diff_ids = spec::parse_config(&config)?
                .rootfs
                .map(|r| r.diff_ids)
                .unwrap_or_default();
            if diff_ids.len() != entry.layers.len() {
                return Err(invalid(format!(
                    "{} layers, but its config names {}",
                    entry.layers.len(),
                    diff_ids.len()
                )));
            }
            blobs.insert(config_digest.clone(), config_span);
            let mut layers = Vec::new();
            for (name, diff_id) in entry.layers.iter().zip(diff_ids) {
                let span = *members
                    .get(name.strip_prefix("./").unwrap_or(name).as_bytes())
                    .ok_or_else(|| invalid(format!("it has no member '{name}'")))?;
                blobs.insert(Digest::parse(&diff_id)?, span);
                layers.push(descriptor(spec::OCI_LAYER_TAR, diff_id, span.size));
            }
            let manifest = Manifest {
                schema_version: 2,
                media_type: Some(spec::OCI_MANIFEST.into()),
                config: descriptor(
                    spec::OCI_CONFIG,
                    config_digest.to_string(),
                    config.len() as u64,
                ),
                layers,
            };
            let bytes = serde_json::to_vec(&manifest).map_err(|e| invalid(e.to_string()))?;
            let fetched = Fetched {
                media_type: spec::OCI_MANIFEST.into(),
                digest: Digest::sha256_of(&bytes),
                bytes,
            };
            images.push((entry.repo_tags.unwrap_or_default(), fetched));
        }
        Ok(DockerArchive {
            path: path.to_path_buf(),
            images,
            blobs,
        })
    }

    fn tags(&self) -> String {
        let tags: Vec<&str> = self
            .images
            .iter()
            .flat_map(|(tags, _)| tags.iter().map(String::as_str))
            .collect();
        tags.join(", ")
    }

    /// The reference of the archive's only image (its manifest's
    /// digest); an error listing the tags when there are several.
    pub fn only_reference(&self) -> Result<String> {
        let digests: Vec<String> = self
            .images
            .iter()
            .map(|(_, m)| m.digest.to_string())
            .collect();
        let what = format!("the archive '{}'", self.path.display());
        crate::store::only_reference(&what, &digests, &self.tags())
    }
}

fn descriptor(media_type: &str, digest: String, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest_text: digest,
        size,
        platform: None,
        annotations: BTreeMap::new(),
    }
}

impl Store for DockerArchive {
    fn manifest(&self, reference: &str) -> Result<Fetched> {
        let latest = format!("{reference}:latest");
        let found = self.images.iter().find(|(tags, fetched)| {
            fetched.digest.to_string() == reference
                || tags.iter().any(|t| *t == reference || *t == latest)
        });
        match found {
            Some((_, fetched)) => Ok(Fetched {
                media_type: fetched.media_type.clone(),
                digest: fetched.digest.clone(),
                bytes: fetched.bytes.clone(),
            }),
            None => Err(Error::NotFound(format!(
                "no image '{reference}' in '{}' (tags: {})",
                self.path.display(),
                self.tags()
            ))),
        }
    }

    fn blob(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + Send + '_>> {
        let span = self
            .blobs
            .get(digest)
            .ok_or_else(|| Error::NotFound(format!("blob {digest}")))?;
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(span.offset))?;
        let data = file.take(span.size);
        Ok(Box::new(VerifyingReader::new(data, digest.clone(), size)))
    }
}
