//! Uploads: blobs (one monolithic `PUT` after the `POST` that opens the
//! upload session), then the manifest, which makes the tag appear.

use std::io::{self, Read};

use super::{client::failure, Registry};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::registry::client::Body;

/// Opens the content of a blob afresh, for each upload attempt.
pub type OpenBlob<'a> = &'a dyn Fn() -> io::Result<Box<dyn Read + Send>>;

impl Registry {
    /// Whether the repository holds the blob `digest` already.
    pub fn has_blob(&self, digest: &Digest) -> Result<bool> {
        let what = format!("{}: blob {digest}", self.image);
        let url = self.url(&format!("blobs/{digest}"))?;
        match self.client.send("HEAD", &url, &[], Body::Empty, &what) {
            Ok(_) => Ok(true),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Uploads the blob of `size` bytes that `open` reads, unless the
    /// repository has it; `progress` is told the bytes sent so far. A
    /// failure that may pass starts the upload over, up to the retries.
    pub fn push_blob(
        &self,
        digest: &Digest,
        size: u64,
        open: OpenBlob<'_>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        if self.has_blob(digest)? {
            progress(size);
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            match self.upload_once(digest, size, open, progress) {
                Err(Error::Registry {
                    transient: true, ..
                }) if attempt < self.client.retries() => attempt += 1,
                other => return other,
            }
        }
    }

    fn upload_once(
        &self,
        digest: &Digest,
        size: u64,
        open: OpenBlob<'_>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let what = format!("{}: uploading blob {digest}", self.image);
        let start = self.url("blobs/uploads/")?;
        let session = self.client.send(
            "POST",
            &start,
            &[("Content-Length", "0")],
            Body::Bytes(b""),
            &what,
        )?;
        let location = session.header("location").ok_or_else(|| {
            failure(
                format!("{what}: the registry gave no upload location"),
                false,
            )
        })?;
        let location = self.client.resolve(location, &what)?;
        let separator = if location.contains('?') { '&' } else { '?' };
        let url = format!(
            "{location}{separator}digest={}",
            digest.to_string().replace(':', "%3A")
        );
        let reader = open().map_err(Error::Io)?;
        let counted = Counting {
            inner: reader,
            sent: 0,
            progress,
        };
        self.client.send(
            "PUT",
            &url,
            &[("Content-Type", "application/octet-stream")],
            Body::Stream(Box::new(counted), size),
            &what,
        )?;
        Ok(())
    }

    /// Uploads a manifest of `media_type` under `tag` (the tag points at
    /// it from then on); returns its digest.
    pub fn push_manifest(&self, tag: &str, media_type: &str, bytes: &[u8]) -> Result<Digest> {
        let what = format!("{}: manifest {tag}", self.image);
        let digest = Digest::sha256_of(bytes);
        let url = self.url(&format!("manifests/{tag}"))?;
        let response = self.client.send(
            "PUT",
            &url,
            &[("Content-Type", media_type)],
            Body::Bytes(bytes),
            &what,
        )?;
        if let Some(named) = response.header("docker-content-digest") {
            if named.trim() != digest.to_string() {
                return Err(failure(
                    format!(
                        "{what}: the registry stored it as {}, not {digest}",
                        named.trim()
                    ),
                    false,
                ));
            }
        }
        Ok(digest)
    }
}

/// A reader that reports the bytes read so far.
struct Counting<'a, R> {
    inner: R,
    sent: u64,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sent += n as u64;
        (self.progress)(self.sent);
        Ok(n)
    }
}
