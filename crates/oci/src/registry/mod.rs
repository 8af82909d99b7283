//! Registries, through the OCI distribution API (v2):
//! `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]`.
//!
//! * [`reference`](mod@reference) — the `docker://` names.
//! * [`auth`] — credentials (environment, auth files) and challenges.
//! * `client` — the requests: scheme, authentication, retries, timeouts.
//! * [`artifact`] — a hoard image as an OCI artifact.
//! * `push` — uploading blobs and manifests.
//!
//! ```no_run
//! use hoard_oci::registry::{Options, Registry};
//! use hoard_oci::Store;
//! let registry = Registry::open("docker://127.0.0.1:5000/app:1.0", &Options::default())?;
//! let manifest = registry.manifest(&registry.reference())?;
//! # Ok::<(), hoard_oci::Error>(())
//! ```

pub mod artifact;
pub mod auth;
mod client;
mod push;
pub mod reference;

pub use client::{Auth, Options};
pub use push::OpenBlob;
pub use reference::{ImageRef, Target};

use std::io::Read;
use std::ops::Range;

use crate::digest::{Digest, VerifyingReader};
use crate::error::{Error, Result};
use crate::store::{Fetched, Store};
use client::{failure, read_bounded, Body, Client};

/// Largest manifest or index read (the distribution registry's own bound).
const MAX_MANIFEST: u64 = 4 << 20;

/// The manifest types asked for: OCI and Docker v2 manifests and indexes.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// One repository of a registry, as a [`Store`].
pub struct Registry {
    image: ImageRef,
    client: Client,
}

impl Registry {
    /// The repository of `image`, reached with `options`.
    pub fn new(image: &ImageRef, options: &Options) -> Result<Registry> {
        Ok(Registry {
            image: image.clone(),
            client: Client::new(image, options)?,
        })
    }

    /// The repository a `docker://HOST/REPO[:TAG|@DIGEST]` name is in;
    /// [`Registry::reference`] gives its tag or digest.
    pub fn open(url: &str, options: &Options) -> Result<Registry> {
        Registry::new(&ImageRef::parse(url)?, options)
    }

    /// The image this registry was opened for.
    pub fn image(&self) -> &ImageRef {
        &self.image
    }

    /// The tag or digest of the image opened, for [`Store::manifest`].
    pub fn reference(&self) -> String {
        self.image.target.as_reference()
    }

    /// `ORIGIN/v2/REPO/PATH`.
    fn url(&self, path: &str) -> Result<String> {
        Ok(format!(
            "{}/v2/{}/{path}",
            self.client.origin()?,
            self.image.repository
        ))
    }

    /// The bytes `range` (non-empty) of the blob `digest`, by a range
    /// request. They cannot be checked against the blob's digest, which
    /// covers the whole blob: the caller checks them (a hoard image's
    /// sections carry their own checksums and signatures).
    pub fn blob_range(&self, digest: &Digest, range: Range<u64>) -> Result<Vec<u8>> {
        let what = format!("{}: blob {digest}", self.image);
        let len = range.end.saturating_sub(range.start);
        if len == 0 {
            return Ok(Vec::new());
        }
        let header = format!("bytes={}-{}", range.start, range.end - 1);
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self
            .client
            .send("GET", &url, &[("Range", &header)], Body::Empty, &what)?;
        let starts_right = response
            .header("content-range")
            .and_then(|c| c.strip_prefix("bytes "))
            .and_then(|c| c.split_once('-'))
            .is_some_and(|(start, _)| start.trim() == range.start.to_string());
        if response.status() != 206 || !starts_right {
            return Err(failure(
                format!(
                    "{what}: the registry does not serve byte ranges (HTTP {})",
                    response.status()
                ),
                false,
            ));
        }
        let mut bytes = Vec::with_capacity(len.min(64 << 20) as usize);
        response
            .into_reader()
            .take(len + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| failure(format!("{what}: reading the answer: {e}"), true))?;
        if bytes.len() as u64 != len {
            return Err(failure(
                format!("{what}: the answer has {} bytes, not {len}", bytes.len()),
                true,
            ));
        }
        Ok(bytes)
    }
}

impl Store for Registry {
    fn manifest(&self, reference: &str) -> Result<Fetched> {
        let what = format!("{}: manifest {reference}", self.image);
        let asked = reference
            .contains(':')
            .then(|| Digest::parse(reference))
            .transpose()?;
        let url = self.url(&format!("manifests/{reference}"))?;
        let response = self.client.send(
            "GET",
            &url,
            &[("Accept", MANIFEST_ACCEPT)],
            Body::Empty,
            &what,
        )?;
        let media_type = response
            .header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let named = response
            .header("docker-content-digest")
            .and_then(|d| Digest::parse(d.trim()).ok());
        let bytes = read_bounded(response, MAX_MANIFEST, "manifest")?;
        let digest = match (asked, named) {
            (Some(asked), _) => {
                asked.verify(&bytes)?;
                asked
            }
            (None, Some(named)) => {
                named.verify(&bytes)?;
                named
            }
            (None, None) => Digest::sha256_of(&bytes),
        };
        Ok(Fetched {
            media_type,
            digest,
            bytes,
        })
    }

    fn blob(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + Send + '_>> {
        let what = format!("{}: blob {digest}", self.image);
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self.client.send("GET", &url, &[], Body::Empty, &what)?;
        if let Some(length) = response
            .header("content-length")
            .and_then(|l| l.trim().parse::<u64>().ok())
        {
            if length != size {
                return Err(Error::SizeMismatch {
                    digest: digest.to_string(),
                    expected: size,
                    actual: length,
                });
            }
        }
        Ok(Box::new(VerifyingReader::new(
            response.into_reader(),
            digest.clone(),
            size,
        )))
    }
}
