//! S3 and S3-compatible servers, through object_store: the AWS settings
//! come from the environment (`AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL` for
//! MinIO, Ceph and the like, ...). object_store is async: its calls run on
//! a small tokio runtime of this backend's own, made at open (after a
//! mount has forked) and waited for.

use crate::backend::{Backend, FetchError, Fetched, Identity};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};
use std::ops::Range;
use std::time::Duration;

/// An image at `s3://bucket/key`.
pub struct S3 {
    store: Box<dyn ObjectStore>,
    key: ObjectPath,
    runtime: tokio::runtime::Runtime,
    timeout: Duration,
}

impl S3 {
    /// The object `key` in `bucket`; requests give up after `timeout`
    /// (object_store's own retries are off: the remote source retries).
    pub fn new(bucket: &str, key: &str, timeout: Duration) -> Result<Self, String> {
        let (store, runtime) = client(bucket, timeout, 0)?;
        Ok(S3 {
            store: Box::new(store),
            key: ObjectPath::from(key),
            runtime,
            timeout,
        })
    }

    /// Runs `f` to completion, giving up after twice the timeout.
    fn wait<T>(
        &self,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, FetchError> {
        let bound = self.timeout * 2;
        self.runtime
            .block_on(async { tokio::time::timeout(bound, f).await })
            .map_err(|_| FetchError::transient("the request timed out"))?
            .map_err(|e| failed(&e))
    }
}

/// A client of `bucket` whose requests give up after `timeout`, retried
/// `retries` times by object_store, and the runtime its calls run on.
pub(crate) fn client(
    bucket: &str,
    timeout: Duration,
    retries: usize,
) -> Result<(AmazonS3, tokio::runtime::Runtime), String> {
    let client = ClientOptions::new()
        .with_timeout(timeout)
        .with_connect_timeout(timeout)
        .with_allow_http(true);
    let retry = RetryConfig {
        max_retries: retries,
        retry_timeout: timeout * (retries as u32 + 1),
        ..RetryConfig::default()
    };
    let store = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_client_options(client)
        .with_retry(retry)
        .build()
        .map_err(|e| one_line(&e))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hoard-s3")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the S3 client: {e}"))?;
    Ok((store, runtime))
}

pub(crate) fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reader's error for a failed request.
fn failed(e: &object_store::Error) -> FetchError {
    use object_store::Error as E;
    let text = one_line(e);
    match e {
        E::Precondition { .. } => FetchError::changed("the image changed on the server"),
        E::NotFound { .. }
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::NotSupported { .. }
        | E::NotImplemented => FetchError::permanent(text),
        _ => FetchError::transient(text),
    }
}

impl Backend for S3 {
    fn identify(&self) -> Result<Identity, FetchError> {
        let meta = self.wait(self.store.head(&self.key))?;
        Ok(Identity {
            size: meta.size,
            etag: meta.e_tag,
        })
    }

    fn get(&self, range: Range<u64>, etag: Option<&str>) -> Result<Fetched, FetchError> {
        let len = range.end - range.start;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: etag.map(str::to_string),
            ..GetOptions::default()
        };
        let (bytes, etag) = self.wait(async {
            let result = self.store.get_opts(&self.key, options).await?;
            let etag = result.meta.e_tag.clone();
            Ok((result.bytes().await?, etag))
        })?;
        if bytes.len() as u64 != len {
            return Err(FetchError::transient(format!(
                "the answer has {} bytes, not {len}",
                bytes.len()
            )));
        }
        Ok(Fetched {
            bytes: bytes.to_vec(),
            etag,
        })
    }
}
