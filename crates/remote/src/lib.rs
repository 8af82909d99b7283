//! Read DwarFS images from HTTP(S) servers and S3 object storage.
//!
//! ```no_run
//! hoard_remote::install(hoard_remote::Options::default());
//! let fs = hoard_reader::Filesystem::open(
//!     "https://example.com/image.dwarfs".as_ref(),
//!     &hoard_reader::FsOptions::default(),
//! )?;
//! # Ok::<(), hoard_reader::Error>(())
//! ```
//!
//! [`install`] makes every open of an image by name in this process take
//! URLs (`http://`, `https://`, `s3://bucket/key`, `docker://host/repo:tag`)
//! besides paths: the
//! reader gets a [`hoard_reader::source::Source::Remote`] that fetches byte
//! ranges as they are read.
//!
//! * [`backend`] — the two requests a server must answer (identity, byte
//!   range); [`http`] (ureq), [`s3`] (object_store) and [`registry`] (a
//!   hoard image pushed to an OCI registry, through hoard-oci) answer them.
//! * [`remote`] — the source: retries with backoff, requests in parallel
//!   up to a bound, readahead for sequential reads, the image's ETag
//!   checked at every answer.
//! * `pieces` — fetched bytes in memory; `disk` — verified sections on
//!   disk, shared between processes.
//! * [`options`] — the `remote_*` options.
//! * [`stream`] — a remote file read in order (a remote archive packed).
//! * [`objects`] — the objects under an S3 prefix, listed and fetched as
//!   the files of a tree (`hoard create -i s3://bucket/prefix/`).
//! * [`upload`] — an object written as it is made, in the parts of a
//!   multipart upload (`hoard create -o s3://bucket/key`).
//!
//! See README.md for the design.

pub mod backend;
mod disk;
pub mod http;
pub mod objects;
pub mod options;
mod pieces;
pub mod registry;
pub mod remote;
pub mod s3;
pub mod stream;
pub mod upload;

pub use options::{is_remote_option, Options};
pub use remote::Remote;

use hoard_reader::source::{Opener, Source};
use std::sync::Arc;

/// Opens URLs with [`Options`].
struct RemoteOpener(Options);

impl Opener for RemoteOpener {
    fn open(&self, url: &str) -> hoard_reader::Result<Source> {
        open(url, &self.0)
            .map(remote::into_source)
            .map_err(hoard_reader::Error::Io)
    }
}

/// Makes every open of an image in this process take URLs, fetched with
/// `options`.
pub fn install(options: Options) {
    hoard_reader::source::set_opener(Arc::new(RemoteOpener(options)));
}

/// Opens the image at `url` (`http://`, `https://`, `s3://bucket/key`,
/// or a hoard image pushed to a registry, `docker://HOST/REPO:TAG`).
pub fn open(url: &str, options: &Options) -> Result<Remote, String> {
    let scheme = hoard_reader::source::url_scheme(url).unwrap_or_default();
    let backend: Box<dyn backend::Backend> = match scheme.as_str() {
        "http" | "https" => Box::new(http::Http::new(url, options.timeout)),
        "docker" => Box::new(registry::RegistryImage::new(url, options)?),
        "s3" => {
            let rest = &url[url.find("://").map_or(0, |i| i + 3)..];
            let (bucket, key) = rest
                .split_once('/')
                .filter(|(b, k)| !b.is_empty() && !k.is_empty())
                .ok_or_else(|| format!("'{url}' is not of the form s3://bucket/key"))?;
            Box::new(s3::S3::new(bucket, key, options.timeout)?)
        }
        other => {
            return Err(format!(
                "unsupported URL scheme '{other}' (http, https, s3, docker)"
            ))
        }
    };
    Remote::open(url, backend, options)
}
