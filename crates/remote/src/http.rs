//! HTTP(S) servers, through ureq: `HEAD` for the size and ETag, `GET` with
//! a `Range` header for bytes.

use crate::backend::{Backend, FetchError, Fetched, Identity};
use std::io::Read;
use std::ops::Range;
use std::time::Duration;

/// An image at an `http://` or `https://` URL.
pub struct Http {
    url: String,
    agent: ureq::Agent,
}

impl Http {
    /// Requests to `url` give up after `timeout` without progress.
    pub fn new(url: &str, timeout: Duration) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(timeout)
            .timeout_read(timeout)
            .timeout_write(timeout)
            .redirects(5)
            .build();
        Http {
            url: url.to_string(),
            agent,
        }
    }
}

/// The reader's error for a failed request.
fn failed(e: ureq::Error) -> FetchError {
    match e {
        ureq::Error::Status(412, _) => FetchError::changed("the image changed on the server"),
        ureq::Error::Status(code, r) => {
            let text = format!("HTTP {code} {}", r.status_text());
            if FetchError::retry_status(code) {
                FetchError::transient(text)
            } else {
                FetchError::permanent(text)
            }
        }
        ureq::Error::Transport(t) => FetchError::transient(t.to_string()),
    }
}

fn etag_of(r: &ureq::Response) -> Option<String> {
    r.header("etag").map(str::to_string)
}

/// The total length in a `Content-Range: bytes a-b/total` header.
fn total_of(r: &ureq::Response) -> Option<u64> {
    r.header("content-range")?
        .rsplit_once('/')?
        .1
        .trim()
        .parse()
        .ok()
}

impl Backend for Http {
    fn identify(&self) -> Result<Identity, FetchError> {
        match self.agent.head(&self.url).call() {
            Ok(r) => {
                let size = r
                    .header("content-length")
                    .and_then(|l| l.trim().parse().ok())
                    .ok_or_else(|| FetchError::permanent("the server gives no Content-Length"))?;
                Ok(Identity {
                    size,
                    etag: etag_of(&r),
                })
            }
            // No HEAD: ask for one byte and read the total from its range.
            Err(ureq::Error::Status(405 | 501, _)) => {
                let r = self
                    .agent
                    .get(&self.url)
                    .set("Range", "bytes=0-0")
                    .call()
                    .map_err(failed)?;
                let size = total_of(&r).ok_or_else(|| {
                    FetchError::permanent("the server does not serve byte ranges")
                })?;
                Ok(Identity {
                    size,
                    etag: etag_of(&r),
                })
            }
            Err(e) => Err(failed(e)),
        }
    }

    fn get(&self, range: Range<u64>, etag: Option<&str>) -> Result<Fetched, FetchError> {
        let len = range.end - range.start;
        let mut request = self
            .agent
            .get(&self.url)
            .set("Range", &format!("bytes={}-{}", range.start, range.end - 1));
        if let Some(etag) = etag {
            request = request.set("If-Match", etag);
        }
        let r = request.call().map_err(failed)?;
        if r.status() != 206 {
            return Err(FetchError::permanent(format!(
                "the server answered a range request with HTTP {} (it must support byte ranges)",
                r.status()
            )));
        }
        let starts_right = r
            .header("content-range")
            .and_then(|c| c.strip_prefix("bytes "))
            .and_then(|c| c.split_once('-'))
            .is_some_and(|(start, _)| start.trim() == range.start.to_string());
        if !starts_right {
            return Err(FetchError::transient(
                "the server answered with a different byte range",
            ));
        }
        let etag = etag_of(&r);
        let mut bytes = Vec::with_capacity(len as usize);
        r.into_reader()
            .take(len + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| FetchError::transient(format!("reading the answer: {e}")))?;
        if bytes.len() as u64 != len {
            return Err(FetchError::transient(format!(
                "the answer has {} bytes, not {len}",
                bytes.len()
            )));
        }
        Ok(Fetched { bytes, etag })
    }
}
