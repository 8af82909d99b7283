//! One section of an image as listed at open: its header, where it is,
//! and whether its header is read yet (see [`crate::image::Image`]).

use crate::error::{corrupt, Error};
use hoard_format::section::SectionHeader;

/// One section of the image.
#[derive(Debug, Clone)]
pub struct Section {
    /// Its decoded header.
    pub header: SectionHeader,
    /// Absolute file offset of its header.
    pub offset: u64,
    /// Why its payload cannot be read: set for a BLOCK whose header is
    /// damaged but whose place the (sound) section index gives, so the
    /// rest of the image stays readable.
    pub damaged: Option<String>,
    /// The header is not read yet (a BLOCK listed from the section index):
    /// its place, size, kind and number are known, its compression and
    /// checksums are read with its payload (in the same request from a
    /// remote source). [`crate::Image::sections`] lists every section with its
    /// header.
    pub pending: bool,
}

impl Section {
    /// Absolute file offset of its payload.
    pub fn payload_offset(&self) -> u64 {
        self.offset + self.header.size() as u64
    }

    /// Absolute file offset just past its payload.
    pub fn end(&self) -> u64 {
        self.payload_offset() + self.header.length
    }

    /// The reader's error for a payload of this section that does not
    /// decode.
    pub fn decode_error(&self, e: hoard_codec::CodecError) -> Error {
        corrupt!(
            "{} section {} at offset {}: {e}",
            self.header.kind.name(),
            self.header.number.map_or(String::new(), |n| n.to_string()),
            self.offset
        )
    }
}
