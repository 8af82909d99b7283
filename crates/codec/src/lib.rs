//! Block compression for DwarFS images, one algorithm per format id.
//!
//! [`decompress`] turns any section payload DwarFS writes back into its
//! bytes, refusing output beyond a caller-given limit; [`Compressor`] is the
//! writer's side for the general-purpose algorithms.
//!
//! Payload layouts (all sizes little-endian):
//!
//! | algorithm | payload |
//! |---|---|
//! | none | the bytes |
//! | zstd | one zstd frame |
//! | lzma | one xz stream |
//! | lz4, lz4hc | `u32` size, then an LZ4 block |
//! | brotli | varint size, then a brotli stream |
//! | flac | varint size, thrift `flac_block_header`, then a FLAC stream |
//! | ricepp | varint size, thrift `ricepp_block_header`, then the Rice bitstream |

mod compress;
mod flac;
mod ricepp;
mod varint;

pub use compress::{compressor_from_spec, Compressor};
use hoard_format::section::Compression;
use std::io::Read;

/// Why a payload could not be (de)compressed.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The payload is not valid for its algorithm.
    #[error("{algo}: {msg}")]
    Corrupt {
        /// Algorithm name.
        algo: &'static str,
        /// What is wrong.
        msg: String,
    },
    /// The payload would decompress to more than the caller allows.
    #[error("{algo}: uncompressed size {size} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Algorithm name.
        algo: &'static str,
        /// Declared or produced size.
        size: u64,
        /// The limit.
        limit: usize,
    },
    /// The algorithm id is not known, or not usable for this operation.
    #[error("{0}")]
    Unsupported(String),
}

pub(crate) fn corrupt(algo: &'static str, msg: impl ToString) -> CodecError {
    CodecError::Corrupt {
        algo,
        msg: msg.to_string(),
    }
}

fn check_size(algo: &'static str, size: u64, limit: usize) -> Result<usize, CodecError> {
    if size > limit as u64 {
        return Err(CodecError::TooLarge { algo, size, limit });
    }
    Ok(size as usize)
}

/// Reads all of `reader`, refusing more than `limit` bytes.
fn read_bounded(
    algo: &'static str,
    reader: impl Read,
    limit: usize,
    hint: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(hint.min(limit).min(64 << 20));
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(algo, e))?;
    if out.len() > limit {
        return Err(CodecError::TooLarge {
            algo,
            size: out.len() as u64,
            limit,
        });
    }
    Ok(out)
}

/// Decompresses one section payload written with `algo`, refusing to
/// produce more than `max_size` bytes.
pub fn decompress(
    algo: Compression,
    payload: &[u8],
    max_size: usize,
) -> Result<Vec<u8>, CodecError> {
    match algo {
        Compression::NONE => {
            check_size("none", payload.len() as u64, max_size)?;
            Ok(payload.to_vec())
        }
        Compression::ZSTD => {
            let declared = zstd::zstd_safe::get_frame_content_size(payload)
                .map_err(|_| corrupt("zstd", "not a zstd frame"))?;
            let hint = match declared {
                Some(n) => check_size("zstd", n, max_size)?,
                None => 0,
            };
            let decoder = zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|e| corrupt("zstd", e))?
                .single_frame();
            let out = read_bounded("zstd", decoder, max_size, hint)?;
            if declared.is_some_and(|n| n != out.len() as u64) {
                return Err(corrupt("zstd", "frame size does not match its content"));
            }
            Ok(out)
        }
        Compression::LZMA => {
            let decoder = liblzma::read::XzDecoder::new(payload);
            read_bounded("lzma", decoder, max_size, 0)
        }
        Compression::LZ4 | Compression::LZ4HC => {
            let algo = if algo == Compression::LZ4 {
                "lz4"
            } else {
                "lz4hc"
            };
            let head: [u8; 4] = payload
                .get(..4)
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| corrupt(algo, "payload too short"))?;
            let size = check_size(algo, u64::from(u32::from_le_bytes(head)), max_size)?;
            let mut out = vec![0u8; size];
            let n = lz4_flex::block::decompress_into(&payload[4..], &mut out)
                .map_err(|e| corrupt(algo, e))?;
            if n != size {
                return Err(corrupt(
                    algo,
                    format!("decompressed {n} bytes, expected {size}"),
                ));
            }
            Ok(out)
        }
        Compression::BROTLI => {
            let mut rest = payload;
            let size = check_size(
                "brotli",
                varint::decode(&mut rest).ok_or_else(|| corrupt("brotli", "bad size prefix"))?,
                max_size,
            )?;
            let out = read_bounded(
                "brotli",
                brotli::Decompressor::new(rest, 1 << 16),
                size,
                size,
            )?;
            if out.len() != size {
                return Err(corrupt(
                    "brotli",
                    format!("decompressed {} bytes, expected {size}", out.len()),
                ));
            }
            Ok(out)
        }
        Compression::FLAC => flac::decompress(payload, max_size),
        Compression::RICEPP => ricepp::decompress(payload, max_size),
        other => Err(CodecError::Unsupported(format!(
            "unknown compression {}",
            other.name()
        ))),
    }
}

/// The uncompressed size a payload declares, where its format stores one.
pub fn uncompressed_size(algo: Compression, payload: &[u8]) -> Result<Option<u64>, CodecError> {
    Ok(match algo {
        Compression::NONE => Some(payload.len() as u64),
        Compression::ZSTD => zstd::zstd_safe::get_frame_content_size(payload)
            .map_err(|_| corrupt("zstd", "not a zstd frame"))?,
        Compression::LZ4 | Compression::LZ4HC => payload
            .get(..4)
            .map(|h| u64::from(u32::from_le_bytes(h.try_into().expect("4 bytes")))),
        Compression::BROTLI | Compression::FLAC | Compression::RICEPP => {
            varint::decode(&mut &payload[..])
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_general_compressor() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for spec in [
            "null",
            "zstd:level=3",
            "lzma:level=1",
            "lz4",
            "brotli:quality=3",
        ] {
            let c = compressor_from_spec(spec).unwrap();
            let packed = c.compress(&data).unwrap();
            assert_eq!(
                decompress(c.algo(), &packed, data.len()).unwrap(),
                data,
                "{spec}"
            );
            assert!(
                decompress(c.algo(), &packed, data.len() - 1).is_err(),
                "{spec}: limit"
            );
        }
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        let garbage: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 256) as u8).collect();
        for algo in Compression::ALL {
            for len in [0, 1, 3, 4, 5, 17, 300] {
                let _ = decompress(algo, &garbage[..len], 1 << 20);
            }
        }
        let huge = [0xff, 0xff, 0xff, 0xff, 0];
        assert!(matches!(
            decompress(Compression::LZ4, &huge, 1 << 20),
            Err(CodecError::TooLarge { .. })
        ));
    }
}
