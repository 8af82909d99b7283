//! LZ4 and LZ4HC share one layout: the uncompressed size as a little-endian
//! `u32`, then a single raw LZ4 block (no frame).

use crate::{check_declared, corrupt, CodecError};

pub fn declared_size(algo: &'static str, payload: &[u8]) -> Result<u64, CodecError> {
    let head: [u8; 4] = payload
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| corrupt(algo, "payload shorter than its size field"))?;
    Ok(u64::from(u32::from_le_bytes(head)))
}

pub fn decompress(
    algo: &'static str,
    payload: &[u8],
    max_size: usize,
) -> Result<Vec<u8>, CodecError> {
    let size = check_declared(algo, declared_size(algo, payload)?, max_size)?;
    let mut out = vec![0u8; size];
    let n =
        lz4_flex::block::decompress_into(&payload[4..], &mut out).map_err(|e| corrupt(algo, e))?;
    if n != size {
        return Err(corrupt(
            algo,
            format!("decoded {n} bytes, the payload declares {size}"),
        ));
    }
    Ok(out)
}

/// Compresses `data` with liblz4 in `mode` into one buffer that starts
/// with the size prefix: a single allocation, where compressing and then
/// prefixing took two (at `-l1`, page faults on fresh output buffers were
/// a tenth of a build's CPU time).
pub fn compress_with_size_prefix(
    algo: &'static str,
    data: &[u8],
    mode: ::lz4::block::CompressionMode,
) -> Result<Vec<u8>, CodecError> {
    // The caller keeps `data` under liblz4's input limit, which a `u32`
    // holds: liblz4 writes it as the little-endian prefix.
    ::lz4::block::compress(data, Some(mode), true).map_err(|e| crate::failed(algo, e))
}

/// Prefixes an LZ4 block with the size of `data`.
pub fn with_size_prefix(
    algo: &'static str,
    data: &[u8],
    block: &[u8],
) -> Result<Vec<u8>, CodecError> {
    let size = u32::try_from(data.len()).map_err(|_| CodecError::Compress {
        algo,
        msg: format!("{} bytes is more than a u32 size field holds", data.len()),
    })?;
    let mut out = Vec::with_capacity(4 + block.len());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(block);
    Ok(out)
}
