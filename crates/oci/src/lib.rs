//! OCI container images for hoard.
//!
//! This crate knows where an OCI image's manifests and blobs come from and
//! checks every byte of them against its digest. A [`Store`] is one place
//! images are kept: an image layout directory, a `docker save` archive, or
//! a registry. Nothing here knows hoard's image format; the writer turns an
//! image's layers into a tree, and the remote reader reads a hoard image
//! pushed as a blob.

pub mod digest;
pub mod error;
pub mod registry;
pub mod store;

pub use digest::{Digest, VerifyingReader};
pub use error::{Error, Result};
pub use store::{Fetched, Store};
