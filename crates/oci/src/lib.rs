//! OCI container images for hoard.
//!
//! This crate knows where an OCI image's manifests and blobs come from and
//! checks every byte of them against its digest. A [`Store`] is one place
//! images are kept: an image layout directory ([`layout`]), a `docker
//! save` archive ([`docker_archive`]), or a registry. [`spec`] parses the
//! manifests, indexes and configs, [`image::Image::resolve`] follows a
//! reference to the image of a platform, and [`source`] parses the names
//! users give (`oci:DIR[:TAG]`, `docker-archive:FILE[:REF]`), and
//! [`mirror`] copies an image into a new layout. Nothing here
//! knows hoard's image format; the writer turns an image's layers into a
//! tree, and the remote reader reads a hoard image pushed as a blob.

pub mod digest;
pub mod docker_archive;
pub mod error;
pub mod fuzzing;
pub mod image;
pub mod layout;
pub mod mirror;
pub mod registry;
pub mod source;
pub mod spec;
pub mod store;
pub mod tar_index;

pub use digest::{Digest, VerifyingReader};
pub use error::{Error, Result};
pub use image::Image;
pub use source::Source;
pub use spec::Platform;
pub use store::{Fetched, Store};
