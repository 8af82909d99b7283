//! brotli: a varint uncompressed size, then a brotli stream. DwarFS's
//! decoder enables large windows (`lgwin` up to 30), so this one does too.

use crate::{check_declared, read_exact_size, varint, CodecError};

const ALGO: &str = "brotli";

pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let (size, stream) = varint::size_prefix(ALGO, payload)?;
    let size = check_declared(ALGO, size, max_size)?;
    // The reader's state accepts large-window streams by default.
    read_exact_size(ALGO, ::brotli::Decompressor::new(stream, 64 << 10), size)
}
