//! The errors of reading OCI images.

/// What went wrong while reading an OCI image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file or a stream failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A digest is not of the form `ALGORITHM:HEX`, or its algorithm is unknown.
    #[error("bad digest {0:?}")]
    BadDigest(String),
    /// Content did not hash to the digest that names it.
    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The digest the manifest or reference names.
        expected: String,
        /// The digest of what was read.
        actual: String,
    },
    /// Content was longer or shorter than the size its descriptor gives.
    #[error("size mismatch for {digest}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The digest of the content.
        digest: String,
        /// The size the descriptor gives.
        expected: u64,
        /// The bytes read.
        actual: u64,
    },
    /// A manifest, index or config is not what the format allows.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// What was being read ("manifest", "index", "config", …).
        what: &'static str,
        /// Why it was refused.
        why: String,
    },
    /// The store has no manifest or blob of that name.
    #[error("not found: {0}")]
    NotFound(String),
    /// A registry refused a request, or could not be reached.
    #[error("{message}")]
    Registry {
        /// One line, without credentials.
        message: String,
        /// Whether trying again may help (timeouts, resets, 5xx, throttling).
        transient: bool,
    },
}

/// The result of reading OCI images.
pub type Result<T> = std::result::Result<T, Error>;
