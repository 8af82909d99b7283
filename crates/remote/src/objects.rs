//! The objects under an S3 prefix, read as the files of a tree: listed
//! once (key, size, time, ETag), then each fetched in pieces of at most
//! [`PIECE`] bytes, every piece asked for with the listing's ETag, so an
//! object that changes or vanishes during the build is an error, never
//! a mix of two versions. Requests are retried by object_store (the
//! `remote_retries` and `remote_timeout` options).

use crate::s3::{client, one_line};
use crate::Options;
use futures::TryStreamExt;
use object_store::aws::AmazonS3;
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, GetOptions, GetRange, ObjectStore};
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of one object in memory at once.
pub const PIECE: u64 = 8 << 20;

/// An object as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last modified: seconds since the epoch, nanoseconds.
    pub modified: (i64, u32),
    /// Its ETag, when the server gives one.
    pub etag: Option<String>,
}

/// A bucket whose objects are listed and fetched.
pub struct Bucket {
    pub(crate) name: String,
    pub(crate) store: Arc<AmazonS3>,
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) timeout: Duration,
}

impl Bucket {
    /// The bucket `name`, with the credentials of the environment and the
    /// retries and timeout of `options`.
    pub fn new(name: &str, options: &Options) -> Result<Self, String> {
        let (store, runtime) = client(name, options.timeout, options.retries as usize)?;
        Ok(Bucket {
            name: name.to_string(),
            store: Arc::new(store),
            runtime,
            timeout: options.timeout,
        })
    }

    /// `s3://bucket/key`, for messages.
    pub(crate) fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.name)
    }

    /// Whether the object `key` exists (a failed request says no).
    pub fn exists(&self, key: &str) -> bool {
        let path = ObjectPath::from(key);
        self.runtime.block_on(self.store.head(&path)).is_ok()
    }

    /// Every object whose key starts with `prefix` (a whole number of
    /// `/`-separated components), sorted by key.
    pub fn list(&self, prefix: &str) -> Result<Vec<Object>, String> {
        let prefix_path = ObjectPath::from(prefix);
        let listed: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(Some(&prefix_path)).try_collect())
            .map_err(|e| format!("{}: cannot list: {}", self.url(prefix), one_line(&e)))?;
        let mut objects: Vec<Object> = listed
            .into_iter()
            .map(|m| Object {
                key: m.location.to_string(),
                size: m.size,
                modified: (
                    m.last_modified.timestamp(),
                    m.last_modified.timestamp_subsec_nanos(),
                ),
                etag: m.e_tag,
            })
            .collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    /// Fetches `object`, giving its bytes to `sink` in order, pieces of at
    /// most [`PIECE`] bytes; returns its user metadata (`x-amz-meta-NAME`
    /// as (NAME, value)), or None for a directory marker: object_store
    /// lists a key ending in `/` without it, and cannot ask for it, so an
    /// empty object that cannot be found is one if the marker is still
    /// listed (else it vanished: an error).
    pub fn fetch(
        &self,
        object: &Object,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Option<Vec<(String, String)>>, String> {
        let key = ObjectPath::from(object.key.as_str());
        let mut metadata = Vec::new();
        let mut offset = 0u64;
        loop {
            let end = (offset + PIECE).min(object.size);
            let options = GetOptions {
                // An empty object has no range to ask for.
                range: (object.size > 0).then_some(GetRange::Bounded(offset..end)),
                if_match: object.etag.clone(),
                ..GetOptions::default()
            };
            let bound = self.timeout * 4;
            let got = self.runtime.block_on(async {
                let f = async {
                    let result = self.store.get_opts(&key, options).await?;
                    let attributes = result.attributes.clone();
                    Ok::<_, object_store::Error>((result.bytes().await?, attributes))
                };
                tokio::time::timeout(bound, f).await
            });
            let (bytes, attributes) = match got
                .map_err(|_| format!("{}: the request timed out", self.url(&object.key)))?
            {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. })
                    if object.size == 0 && self.is_marker(&object.key) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(self.failed(&object.key, &e)),
            };
            if bytes.len() as u64 != end - offset {
                return Err(format!(
                    "{}: {} bytes came for {} asked (did it change during the build?)",
                    self.url(&object.key),
                    bytes.len(),
                    end - offset
                ));
            }
            if offset == 0 {
                metadata = attributes
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Attribute::Metadata(name) => Some((name.to_string(), v.to_string())),
                        _ => None,
                    })
                    .collect();
            }
            sink(&bytes).map_err(|e| format!("{}: {e}", self.url(&object.key)))?;
            offset = end;
            if offset >= object.size {
                return Ok(Some(metadata));
            }
        }
    }

    /// Whether the directory marker `key/` is stored: object_store lists
    /// it as `key` and cannot name it, so the first key listed below
    /// `key/` is asked for (one request, one page whatever lies below).
    fn is_marker(&self, key: &str) -> bool {
        let prefix = ObjectPath::from(key);
        let first = self.runtime.block_on(async {
            let mut listing = self.store.list(Some(&prefix));
            tokio::time::timeout(self.timeout * 4, listing.try_next()).await
        });
        matches!(first, Ok(Ok(Some(m))) if m.location == prefix && m.size == 0)
    }

    /// The message for a failed fetch of `key`.
    fn failed(&self, key: &str, e: &object_store::Error) -> String {
        use object_store::Error as E;
        let url = self.url(key);
        match e {
            E::Precondition { .. } => format!("{url}: changed during the build (its ETag)"),
            E::NotFound { .. } => format!("{url}: vanished during the build"),
            _ => format!("{url}: {}", one_line(e)),
        }
    }
}
