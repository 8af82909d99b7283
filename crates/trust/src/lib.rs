//! Trust in hoard images: who signed an image, and whether its bytes are
//! the ones signed.
//!
//! * [`keys`] — Ed25519 key pairs: hoard's own text format (written by
//!   `hoard keygen`) and OpenSSH ed25519 keys (`ssh-keygen -t ed25519`).
//!   Secret keys are zeroized when dropped and never printed.
//! * [`digest`] — the image digest: the BLAKE3 hash of every section of
//!   the image (header and payload) and of any bytes before the first one
//!   (SHA-512/256 in signatures of layout version 1).
//! * [`signature`] — the signature section: a digest signed by one key,
//!   appended to the image; verifying it against trusted keys.
//! * [`claims`] — what a signature may also sign: the image's name,
//!   version and expiry, and a reader's expectations of them.
//! * [`encrypt`] — encrypted images: the data key, wrapped with age for
//!   the image's recipients, and the sealing of each section with it.
//!
//! The crate sees an image as byte ranges; the writer and the reader tell
//! it where the sections are.

pub mod claims;
pub mod digest;
pub mod encrypt;
pub mod keys;
pub mod signature;

pub use claims::{Claims, Expectations};
pub use digest::{ImageDigest, SectionDigest};
pub use keys::{PublicKey, SecretKey, TrustedKeys};
pub use signature::{Signature, SECTION_TYPE};

/// What can go wrong, as one line of text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A key file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// A key is malformed or of a kind hoard does not take.
    #[error("{0}")]
    Key(String),
    /// A claim to sign (a name, a version, an expiry) is not valid.
    #[error("{0}")]
    Claim(String),
    /// A signature section is malformed.
    #[error("{0}")]
    Malformed(String),
    /// A signature does not verify, or is by a key that is not trusted.
    #[error("{0}")]
    Untrusted(String),
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
