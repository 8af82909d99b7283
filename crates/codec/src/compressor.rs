//! What every block compressor does: [`Compressor`], made from a spec by
//! [`crate::compressor_from_spec`].

use crate::CodecError;
use hoard_format::section::Compression;
use std::sync::Arc;

/// Compresses blocks with one algorithm and its settings, into payloads
/// that [`crate::decompress`] (and DwarFS) read.
///
/// A payload is produced even when it is not smaller than the input;
/// like DwarFS, a writer should then store the block uncompressed.
pub trait Compressor: Send + Sync {
    /// The algorithm id to write into the section header.
    fn algo(&self) -> Compression;
    /// Compresses one block into a section payload. `metadata` is the
    /// block's category metadata (the JSON stored in the image, such as
    /// the sample layout of PCM audio); only FLAC and RICEPP need it, the
    /// others ignore it.
    fn compress(&self, data: &[u8], metadata: Option<&str>) -> Result<Vec<u8>, CodecError>;
    /// Compresses like [`Compressor::compress`] a block that others may
    /// be reading too. A compressor that copies its input (lzma) gives
    /// the memory of what it has read back as it goes, once `data` is
    /// held by no one else; the returned flag says whether it did, and
    /// so whether `data` still holds the block (if not, it must not be
    /// read again: decode the payload to get the block back).
    fn compress_shared(
        &self,
        data: &mut Arc<Vec<u8>>,
        metadata: Option<&str>,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        Ok((self.compress(data, metadata)?, false))
    }
    /// The normalized spec of this compressor, with every option spelled
    /// out; [`crate::compressor_from_spec`] accepts it back.
    fn describe(&self) -> String;
    /// The working memory one call takes for a block of `len` bytes
    /// (besides the block and the payload), when it is large enough to
    /// matter; 0 otherwise.
    fn memory(&self, _len: usize) -> u64 {
        0
    }
    /// Whether [`Compressor::compress`] needs category metadata.
    fn needs_metadata(&self) -> bool {
        false
    }
    /// The unit, in bytes, that a block with `metadata` must be a whole
    /// multiple of (one frame of samples for FLAC); 1 for byte-oriented
    /// compressors. An error says the metadata does not suit this
    /// compressor.
    fn granularity(&self, _metadata: Option<&str>) -> Result<usize, CodecError> {
        Ok(1)
    }
}
