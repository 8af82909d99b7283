//! What the remote source asks a server: the image's size and identity,
//! and a byte range of it. One implementation per kind of server.

use std::ops::Range;

/// The image as the server describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Length in bytes.
    pub size: u64,
    /// Its entity tag, if the server gives one; a new one means new bytes.
    pub etag: Option<String>,
}

/// The bytes of a range, and the entity tag they were sent with.
#[derive(Debug)]
pub struct Fetched {
    /// Exactly the bytes asked for.
    pub bytes: Vec<u8>,
    /// The entity tag of the answer, if any.
    pub etag: Option<String>,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    /// One line.
    pub message: String,
    /// Whether trying again may help (timeouts, resets, 5xx, throttling).
    pub retry: bool,
    /// Whether the server says the image is not the one opened.
    pub changed: bool,
}

impl FetchError {
    /// A failure that may pass.
    pub fn transient(message: impl Into<String>) -> Self {
        FetchError {
            message: message.into(),
            retry: true,
            changed: false,
        }
    }

    /// A failure that will not pass by trying again.
    pub fn permanent(message: impl Into<String>) -> Self {
        FetchError {
            message: message.into(),
            retry: false,
            changed: false,
        }
    }

    /// The image is not the one opened any more.
    pub fn changed(message: impl Into<String>) -> Self {
        FetchError {
            message: message.into(),
            retry: false,
            changed: true,
        }
    }

    /// Whether an HTTP status is worth retrying: timeouts, throttling and
    /// server errors.
    pub fn retry_status(status: u16) -> bool {
        matches!(status, 408 | 425 | 429 | 500..=599)
    }
}

/// A server holding one image.
pub trait Backend: Send + Sync {
    /// Asks for the image's size and identity.
    fn identify(&self) -> Result<Identity, FetchError>;

    /// Fetches `range` (non-empty, within the image) of the image that has
    /// entity tag `etag` (if known).
    fn get(&self, range: Range<u64>, etag: Option<&str>) -> Result<Fetched, FetchError>;
}
