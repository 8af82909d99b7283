//! An OCI image layout directory as a [`Store`]: `oci-layout`,
//! `index.json` (the images, tagged by `org.opencontainers.image.ref.name`)
//! and `blobs/ALGORITHM/HEX`, as umoci and skopeo write it.

use crate::digest::{Digest, VerifyingReader};
use crate::error::{Error, Result};
use crate::spec::{self, Descriptor, Index};
use crate::store::{Fetched, Store};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// An image layout directory.
pub struct Layout {
    dir: PathBuf,
    index: Index,
}

impl Layout {
    /// Opens the layout at `dir`, reading its `index.json`.
    pub fn open(dir: &Path) -> Result<Layout> {
        let marker = dir.join("oci-layout");
        if !marker.is_file() {
            return Err(Error::NotFound(format!(
                "'{}' is not an OCI image layout (no oci-layout file)",
                dir.display()
            )));
        }
        let bytes = read_bounded(&dir.join("index.json"), spec::MAX_MANIFEST)?;
        let media_type = own_media_type(&bytes).unwrap_or_else(|| spec::OCI_INDEX.to_string());
        let index = match spec::parse_manifest(&media_type, &bytes)? {
            spec::Parsed::Index(index) => index,
            spec::Parsed::Manifest(_) => {
                return Err(Error::Invalid {
                    what: "layout",
                    why: "index.json is not an index".into(),
                })
            }
        };
        Ok(Layout {
            dir: dir.to_path_buf(),
            index,
        })
    }

    /// The tags of the layout's images.
    pub fn tags(&self) -> Vec<&str> {
        self.index
            .manifests
            .iter()
            .filter_map(Descriptor::ref_name)
            .collect()
    }

    /// The reference of the layout's only image (its digest); an error
    /// listing the tags when there are several.
    pub fn only_reference(&self) -> Result<String> {
        let digests: Vec<String> = self
            .index
            .manifests
            .iter()
            .map(|d| d.digest_text.clone())
            .collect();
        let what = format!("the layout '{}'", self.dir.display());
        crate::store::only_reference(&what, &digests, &self.tags().join(", "))
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir
            .join("blobs")
            .join(digest.algorithm())
            .join(digest.hex())
    }
}

impl Store for Layout {
    fn manifest(&self, reference: &str) -> Result<Fetched> {
        let listed = match Digest::parse(reference) {
            Ok(digest) => self
                .index
                .manifests
                .iter()
                .find(|d| d.digest_text == reference)
                .cloned()
                .ok_or(digest),
            Err(_) => {
                let found = self
                    .index
                    .manifests
                    .iter()
                    .find(|d| d.ref_name() == Some(reference));
                match found {
                    Some(d) => Ok(d.clone()),
                    None => {
                        return Err(Error::NotFound(format!(
                            "no image tagged '{reference}' in '{}' (tags: {})",
                            self.dir.display(),
                            self.tags().join(", ")
                        )))
                    }
                }
            }
        };
        let (digest, media_type, size) = match listed {
            Ok(d) => (d.digest()?, Some(d.media_type.clone()), Some(d.size)),
            Err(digest) => (digest, None, None),
        };
        let bytes = read_bounded(&self.blob_path(&digest), spec::MAX_MANIFEST)?;
        digest.verify(&bytes)?;
        if let Some(size) = size.filter(|&s| s != bytes.len() as u64) {
            return Err(Error::SizeMismatch {
                digest: digest.to_string(),
                expected: size,
                actual: bytes.len() as u64,
            });
        }
        let media_type = media_type
            .or_else(|| own_media_type(&bytes))
            .unwrap_or_default();
        Ok(Fetched {
            media_type,
            digest,
            bytes,
        })
    }

    fn blob(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + Send + '_>> {
        let path = self.blob_path(digest);
        let file = File::open(&path).map_err(|e| not_found(&path, e))?;
        if !file.metadata()?.is_file() {
            return Err(Error::NotFound(format!("{} is not a file", path.display())));
        }
        Ok(Box::new(VerifyingReader::new(file, digest.clone(), size)))
    }
}

fn not_found(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::NotFound(path.display().to_string())
    } else {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    }
}

/// The file at `path`, refused when longer than `max` bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let file = File::open(path).map_err(|e| not_found(path, e))?;
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(Error::Invalid {
            what: "file",
            why: format!("{} is larger than {max} bytes", path.display()),
        });
    }
    Ok(bytes)
}

/// The `mediaType` a manifest or index names itself with, if any.
fn own_media_type(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Typed {
        media_type: Option<String>,
    }
    serde_json::from_slice::<Typed>(bytes).ok()?.media_type
}
