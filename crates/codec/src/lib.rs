//! Block compression for DwarFS images: one codec per compression id of the
//! section header, byte-compatible with what DwarFS writes and reads.
//!
//! [`decompress`] turns a section payload back into its bytes and never
//! produces (or allocates for) more than a caller-given limit;
//! [`uncompressed_size`] reads the size a payload declares without decoding
//! it. [`partial_decoder`] produces a payload's output a piece at a time,
//! for readers that need only the start of a block. On the writer's side,
//! [`compressor_from_spec`] builds a [`Compressor`] from a DwarFS-style
//! spec such as `zstd:level=19`.
//!
//! Payload layouts (integers little-endian; "varint" is LEB128):
//!
//! | algorithm | payload |
//! |---|---|
//! | none | the bytes |
//! | zstd | one zstd frame that records its content size |
//! | lzma | one xz stream (CRC64 check); its index gives the size (written by 7-Zip's encoder, see `lzma_encode`, or liblzma's) |
//! | lz4, lz4hc | `u32` size, then one raw LZ4 block |
//! | brotli | varint size, then a brotli stream (large windows allowed) |
//! | flac | varint size, thrift-compact `flac_block_header`, then a FLAC stream |
//! | ricepp | varint size, thrift-compact `ricepp_block_header`, then the Rice bitstream |

mod brotli;
mod compressor;
mod crc;
mod flac;
mod flac_encode;
mod flac_stream;
mod huge_pages;
mod lz4;
mod lzma;
mod lzma_encode;
mod partial;
mod release;
mod ricepp;
mod ricepp_encode;
mod spec;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_partial;
mod varint;
mod versions;
mod zstd;
mod zstd_encode;

pub use compressor::Compressor;
pub use partial::{partial_decoder, PartialDecoder};
pub use spec::compressor_from_spec;
pub use versions::library_versions;

use hoard_format::section::Compression;
use std::io::Read;

/// Why a payload could not be decompressed, or data compressed.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The payload is not valid for its algorithm.
    #[error("{algo}: corrupt data: {msg}")]
    Corrupt {
        /// Algorithm name.
        algo: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// The payload declares an uncompressed size above the caller's limit.
    #[error("{algo}: declared size {size} exceeds limit {limit}")]
    DeclaredTooLarge {
        /// Algorithm name.
        algo: &'static str,
        /// The size the payload declares.
        size: u64,
        /// The caller's limit.
        limit: usize,
    },
    /// The payload uses a valid feature this implementation does not support.
    #[error("{algo}: unsupported: {msg}")]
    Unsupported {
        /// Algorithm name.
        algo: &'static str,
        /// What is not supported.
        msg: String,
    },
    /// The compression id is not one DwarFS defines.
    #[error("unknown compression id {0}")]
    UnknownAlgorithm(u16),
    /// A compressor spec could not be understood.
    #[error("compression spec '{spec}': {msg}")]
    BadSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        msg: String,
    },
    /// The compressor failed.
    #[error("{algo}: compression failed: {msg}")]
    Compress {
        /// Algorithm name.
        algo: &'static str,
        /// The library's message.
        msg: String,
    },
}

pub(crate) fn corrupt(algo: &'static str, msg: impl ToString) -> CodecError {
    CodecError::Corrupt {
        algo,
        msg: msg.to_string(),
    }
}

pub(crate) fn failed(algo: &'static str, msg: impl ToString) -> CodecError {
    CodecError::Compress {
        algo,
        msg: msg.to_string(),
    }
}

pub(crate) fn unsupported(algo: &'static str, msg: impl ToString) -> CodecError {
    CodecError::Unsupported {
        algo,
        msg: msg.to_string(),
    }
}

/// Refuses a declared size above `limit`; returns it as a `usize` otherwise.
pub(crate) fn check_declared(
    algo: &'static str,
    size: u64,
    limit: usize,
) -> Result<usize, CodecError> {
    match usize::try_from(size) {
        Ok(n) if n <= limit => Ok(n),
        _ => Err(CodecError::DeclaredTooLarge { algo, size, limit }),
    }
}

/// Reads `reader` to its end, expecting exactly `size` bytes (already
/// checked against the caller's limit): more is refused as soon as one extra
/// byte appears, less is corrupt.
pub(crate) fn read_exact_size(
    algo: &'static str,
    reader: impl Read,
    size: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(size.saturating_add(1));
    reader
        .take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(algo, e))?;
    if out.len() > size {
        return Err(corrupt(
            algo,
            format!("stream holds more than the declared {size} bytes"),
        ));
    }
    if out.len() < size {
        return Err(corrupt(
            algo,
            format!(
                "stream ends after {} of the declared {size} bytes",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// Decompresses one section payload written by DwarFS with `algo`.
///
/// `max_size` is the largest output the caller accepts (for a block, the
/// image's block size). A payload that declares a larger size is refused
/// before anything is allocated; one that produces more than it declares,
/// or less, is corrupt.
pub fn decompress(
    algo: Compression,
    payload: &[u8],
    max_size: usize,
) -> Result<Vec<u8>, CodecError> {
    match algo {
        Compression::NONE => {
            check_declared("none", payload.len() as u64, max_size)?;
            Ok(payload.to_vec())
        }
        Compression::ZSTD => zstd::decompress(payload, max_size),
        Compression::LZMA => lzma::decompress(payload, max_size),
        Compression::LZ4 => lz4::decompress("lz4", payload, max_size),
        Compression::LZ4HC => lz4::decompress("lz4hc", payload, max_size),
        Compression::BROTLI => brotli::decompress(payload, max_size),
        Compression::FLAC => flac::decompress(payload, max_size),
        Compression::RICEPP => ricepp::decompress(payload, max_size),
        Compression(other) => Err(CodecError::UnknownAlgorithm(other)),
    }
}

/// The uncompressed size a payload declares, read without decompressing.
///
/// Every DwarFS algorithm stores one; `None` only for a zstd frame written
/// without a content size (which DwarFS itself refuses to decode). An error
/// means the size field itself is unreadable.
pub fn uncompressed_size(algo: Compression, payload: &[u8]) -> Result<Option<u64>, CodecError> {
    match algo {
        Compression::NONE => Ok(Some(payload.len() as u64)),
        Compression::ZSTD => zstd::declared_size(payload),
        Compression::LZMA => lzma::declared_size(payload).map(Some),
        Compression::LZ4 => lz4::declared_size("lz4", payload).map(Some),
        Compression::LZ4HC => lz4::declared_size("lz4hc", payload).map(Some),
        Compression::BROTLI => varint::size_prefix("brotli", payload).map(|(n, _)| Some(n)),
        Compression::FLAC => varint::size_prefix("flac", payload).map(|(n, _)| Some(n)),
        Compression::RICEPP => varint::size_prefix("ricepp", payload).map(|(n, _)| Some(n)),
        Compression(other) => Err(CodecError::UnknownAlgorithm(other)),
    }
}

/// The uncompressed size an LZMA payload of `payload_len` bytes declares,
/// read from its last bytes, `tail` (the xz stream's index and footer):
/// for sources that fetch by byte ranges.
pub fn lzma_declared_size(tail: &[u8], payload_len: u64) -> Result<u64, CodecError> {
    lzma::declared_size_at_end(tail, payload_len)
}
