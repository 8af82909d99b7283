//! A hoard image pushed to a registry (`hoard push`), read by byte ranges
//! of its blob: `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]`.
//!
//! The manifest is fetched when the image is identified: it must be a
//! hoard artifact (a container image is converted instead: by `hoard
//! create -i`, or into the archive cache when a command opens it, which
//! hands only hoard artifacts on to this reader). The blob's digest is the image's identity (its ETag, so the
//! disk cache is keyed by it). A range cannot be checked against the
//! blob's digest, which covers the whole blob; the reader checks every
//! section it loads against its checksum, and against the signature with
//! `--trust`.

use std::ops::Range;
use std::sync::OnceLock;

use hoard_oci::registry::{artifact, Auth, Registry};
use hoard_oci::{Digest, Store};

use crate::backend::{Backend, FetchError, Fetched, Identity};
use crate::options::Options;

/// A hoard image in a registry repository.
pub struct RegistryImage {
    registry: Registry,
    /// The image blob, once the manifest named it.
    blob: OnceLock<(Digest, u64)>,
}

/// The registry options of the remote options for range reads: the
/// retries are the remote source's own, so the client does not retry.
pub fn registry_options(options: &Options) -> hoard_oci::registry::Options {
    hoard_oci::registry::Options {
        retries: 0,
        ..transfer_options(options)
    }
}

/// The registry options of the remote options for whole transfers (a
/// push, a container image pulled and converted): the client retries as
/// many times as the remote options say.
pub fn transfer_options(options: &Options) -> hoard_oci::registry::Options {
    hoard_oci::registry::Options {
        tls_verify: options.tls_verify,
        timeout: options.timeout,
        retries: options.retries,
        auth: Auth::Environment,
    }
}

impl RegistryImage {
    /// The image `url` names (`docker://…`); nothing is fetched yet.
    pub fn new(url: &str, options: &Options) -> Result<Self, String> {
        let registry =
            Registry::open(url, &registry_options(options)).map_err(|e| e.to_string())?;
        Ok(RegistryImage {
            registry,
            blob: OnceLock::new(),
        })
    }

    /// The image's blob, from the manifest (fetched once).
    fn blob(&self) -> Result<&(Digest, u64), FetchError> {
        if let Some(blob) = self.blob.get() {
            return Ok(blob);
        }
        let fetched = self
            .registry
            .manifest(&self.registry.reference())
            .map_err(failed)?;
        let image = artifact::parse(&fetched)
            .map_err(|e| FetchError::permanent(e.to_string()))?
            .ok_or_else(|| {
                FetchError::permanent(format!(
                    "{} is not a hoard image ({}): container images from registries are converted by `hoard create -i {}` (or `hoard mount`)",
                    self.registry.image(),
                    if fetched.media_type.is_empty() { "no media type" } else { &fetched.media_type },
                    self.registry.image()
                ))
            })?;
        Ok(self.blob.get_or_init(|| (image.digest, image.size)))
    }
}

/// The reader's error for a registry error.
fn failed(e: hoard_oci::Error) -> FetchError {
    match e {
        hoard_oci::Error::Registry {
            message,
            transient: true,
        } => FetchError::transient(message),
        other => FetchError::permanent(other.to_string()),
    }
}

impl Backend for RegistryImage {
    fn identify(&self) -> Result<Identity, FetchError> {
        let (digest, size) = self.blob()?;
        Ok(Identity {
            size: *size,
            etag: Some(digest.to_string()),
        })
    }

    fn get(&self, range: Range<u64>, _etag: Option<&str>) -> Result<Fetched, FetchError> {
        let (digest, _) = self.blob()?;
        let bytes = self.registry.blob_range(digest, range).map_err(failed)?;
        // The blob is named by its content: the answer is of the image
        // identified, whatever the server's own ETag.
        Ok(Fetched {
            bytes,
            etag: Some(digest.to_string()),
        })
    }
}
