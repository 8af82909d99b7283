//! lzma: the payload is one xz stream (LZMA2, CRC64 check). Like DwarFS, the
//! uncompressed size is taken from the stream's index, found through the
//! stream footer at the end of the payload, before anything is decoded.

use crate::{check_declared, corrupt, crc::crc32, read_exact_size, CodecError};
use liblzma::stream::{Stream, CONCATENATED};

const ALGO: &str = "lzma";
/// Size of the xz stream header and of the stream footer.
const HEADER_SIZE: usize = 12;
const FOOTER_MAGIC: &[u8; 2] = b"YZ";

/// Reads an xz variable-length integer (at most 9 bytes, 63 bits).
fn vli(bytes: &[u8], pos: &mut usize) -> Result<u64, CodecError> {
    let mut value = 0u64;
    for i in 0..9 {
        let b = *bytes
            .get(*pos)
            .ok_or_else(|| corrupt(ALGO, "index ends inside a number"))?;
        *pos += 1;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(corrupt(ALGO, "index number is not minimally encoded"));
            }
            return Ok(value);
        }
    }
    Err(corrupt(ALGO, "index number too long"))
}

/// The uncompressed size recorded in the index of the (last) xz stream.
pub fn declared_size(payload: &[u8]) -> Result<u64, CodecError> {
    declared_size_at_end(payload, payload.len() as u64)
}

/// [`declared_size`] of a payload of `payload_len` bytes from its last
/// bytes, `tail`, which must hold the stream's index and footer.
pub fn declared_size_at_end(tail: &[u8], payload_len: u64) -> Result<u64, CodecError> {
    if payload_len < 2 * HEADER_SIZE as u64 || (tail.len() as u64) > payload_len {
        return Err(corrupt(ALGO, "payload too small for an xz stream"));
    }
    // Where `tail` starts in the payload.
    let skipped = payload_len - tail.len() as u64;
    if tail.len() < HEADER_SIZE {
        return Err(corrupt(ALGO, "no xz stream footer"));
    }
    // Stream padding: groups of four zero bytes after the stream.
    let mut end = tail.len();
    while tail[end - 4..end] == [0; 4] {
        end -= 4;
        if skipped + (end as u64) < 2 * HEADER_SIZE as u64 || end < HEADER_SIZE {
            return Err(corrupt(ALGO, "payload is all stream padding"));
        }
    }
    let footer = &tail[end - HEADER_SIZE..end];
    if &footer[10..12] != FOOTER_MAGIC {
        return Err(corrupt(ALGO, "no xz stream footer"));
    }
    if crc32(&footer[4..10]) != u32::from_le_bytes(footer[0..4].try_into().expect("4 bytes")) {
        return Err(corrupt(ALGO, "stream footer checksum mismatch"));
    }
    let index_size = (u64::from(u32::from_le_bytes(
        footer[4..8].try_into().expect("4 bytes"),
    )) + 1)
        * 4;
    let footer_pos = end - HEADER_SIZE;
    let index_pos = (footer_pos as u64)
        .checked_sub(index_size)
        .filter(|&p| skipped + p >= HEADER_SIZE as u64)
        .ok_or_else(|| corrupt(ALGO, "index larger than the stream"))? as usize;
    let index = &tail[index_pos..footer_pos];

    // Indicator, record count, records, padding to four bytes, CRC32.
    if index[0] != 0 {
        return Err(corrupt(ALGO, "bad index indicator"));
    }
    let body_end = index.len() - 4;
    if crc32(&index[..body_end])
        != u32::from_le_bytes(index[body_end..].try_into().expect("4 bytes"))
    {
        return Err(corrupt(ALGO, "index checksum mismatch"));
    }
    let mut pos = 1;
    let records = vli(&index[..body_end], &mut pos)?;
    let (mut blocks_size, mut total) = (0u64, 0u64);
    for _ in 0..records {
        let unpadded = vli(&index[..body_end], &mut pos)?;
        let uncompressed = vli(&index[..body_end], &mut pos)?;
        if unpadded == 0 {
            return Err(corrupt(ALGO, "index records an empty block"));
        }
        blocks_size = blocks_size.saturating_add(unpadded.saturating_add(3) & !3);
        total = total
            .checked_add(uncompressed)
            .ok_or_else(|| corrupt(ALGO, "index sizes overflow"))?;
    }
    if pos.next_multiple_of(4) != body_end || index[pos..body_end].iter().any(|&b| b != 0) {
        return Err(corrupt(ALGO, "bad index padding"));
    }
    if blocks_size > skipped + index_pos as u64 - HEADER_SIZE as u64 {
        return Err(corrupt(
            ALGO,
            "index records more data than the stream holds",
        ));
    }
    Ok(total)
}

/// The decoder DwarFS uses: concatenated streams allowed, no memory limit.
pub fn stream_decoder() -> Result<Stream, CodecError> {
    Stream::new_stream_decoder(u64::MAX, CONCATENATED).map_err(|e| corrupt(ALGO, e))
}

pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let size = check_declared(ALGO, declared_size(payload)?, max_size)?;
    read_exact_size(
        ALGO,
        liblzma::read::XzDecoder::new_stream(payload, stream_decoder()?),
        size,
    )
}
