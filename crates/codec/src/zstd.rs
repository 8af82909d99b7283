//! zstd: the payload is one zstd frame. DwarFS requires the frame to record
//! its content size and decodes in one shot into a buffer of that size, so
//! no window limit applies (blocks made with `zstd:long` use windows as
//! large as the block).

use crate::{check_declared, corrupt, CodecError};

const ALGO: &str = "zstd";

/// The content size the frame header records, if any.
pub fn declared_size(payload: &[u8]) -> Result<Option<u64>, CodecError> {
    ::zstd::zstd_safe::get_frame_content_size(payload)
        .map_err(|_| corrupt(ALGO, "not a zstd frame header"))
}

pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let size = declared_size(payload)?
        .ok_or_else(|| corrupt(ALGO, "frame does not record its content size"))?;
    let size = check_declared(ALGO, size, max_size)?;
    let mut out = Vec::with_capacity(size);
    let mut dctx = ::zstd::bulk::Decompressor::new().map_err(|e| corrupt(ALGO, e))?;
    let n = dctx
        .decompress_to_buffer(payload, &mut out)
        .map_err(|e| corrupt(ALGO, e))?;
    if n != size {
        return Err(corrupt(
            ALGO,
            format!("decoded {n} bytes, the frame declares {size}"),
        ));
    }
    Ok(out)
}
