//! Where OCI images are read from.

use std::io::Read;

use crate::digest::Digest;
use crate::error::{Error, Result};

/// A manifest or index as a store returned it: its media type and its raw
/// bytes, already checked against its digest when it was asked for by one.
pub struct Fetched {
    /// The media type the store gives (the `Content-Type` of a registry,
    /// the `mediaType` of a layout's descriptor).
    pub media_type: String,
    /// The digest of `bytes`.
    pub digest: Digest,
    /// The manifest or index, as stored.
    pub bytes: Vec<u8>,
}

/// One place OCI images are kept: an image layout directory, a docker
/// archive, or a registry repository.
pub trait Store {
    /// The manifest or index that `reference` names: a tag, or a digest
    /// (`sha256:…`), in which case the bytes are checked against it.
    fn manifest(&self, reference: &str) -> Result<Fetched>;

    /// A blob's content, streamed through a [`crate::VerifyingReader`]
    /// for `digest` and `size`, so it fails rather than end on content
    /// that does not match.
    fn blob(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + Send + '_>>;
}

/// The reference of a store's only image, given the digests of the
/// images `what` (`"the layout 'DIR'"`, …) holds and their tags: the one
/// digest, or an error saying there is none, or listing the tags to pick
/// from when there are several.
pub(crate) fn only_reference(what: &str, digests: &[String], tags: &str) -> Result<String> {
    match digests {
        [one] => Ok(one.clone()),
        [] => Err(Error::NotFound(format!("{what} holds no image"))),
        more => Err(Error::NotFound(format!(
            "{what} holds {} images: name one of the tags {tags}",
            more.len()
        ))),
    }
}
