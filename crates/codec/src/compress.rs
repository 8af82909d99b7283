//! The writer's side: one [`Compressor`] per general-purpose algorithm,
//! configured from DwarFS-style specs such as `zstd:level=19`.

use crate::{corrupt, varint, CodecError};
use hoard_format::section::Compression;
use std::io::Write;

/// Compresses blocks with one algorithm and its settings.
pub trait Compressor: Send + Sync {
    /// The algorithm id written into section headers.
    fn algo(&self) -> Compression;
    /// Compresses one block into a payload [`crate::decompress`] reads.
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError>;
    /// The spec this compressor was made from, normalized.
    fn describe(&self) -> String;
}

struct Null;
struct Zstd {
    level: i32,
}
struct Lzma {
    preset: u32,
}
struct Lz4;
struct Brotli {
    quality: u32,
    window: u32,
}

impl Compressor for Null {
    fn algo(&self) -> Compression {
        Compression::NONE
    }
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        Ok(data.to_vec())
    }
    fn describe(&self) -> String {
        "null".into()
    }
}

impl Compressor for Zstd {
    fn algo(&self) -> Compression {
        Compression::ZSTD
    }
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        zstd::bulk::compress(data, self.level).map_err(|e| corrupt("zstd", e))
    }
    fn describe(&self) -> String {
        format!("zstd:level={}", self.level)
    }
}

impl Compressor for Lzma {
    fn algo(&self) -> Compression {
        Compression::LZMA
    }
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), self.preset);
        enc.write_all(data).map_err(|e| corrupt("lzma", e))?;
        enc.finish().map_err(|e| corrupt("lzma", e))
    }
    fn describe(&self) -> String {
        let extreme = if self.preset & liblzma::stream::PRESET_EXTREME != 0 {
            ":extreme"
        } else {
            ""
        };
        format!("lzma:level={}{extreme}", self.preset & 0x1f)
    }
}

impl Compressor for Lz4 {
    fn algo(&self) -> Compression {
        Compression::LZ4
    }
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let size =
            u32::try_from(data.len()).map_err(|_| corrupt("lz4", "block larger than 4 GiB"))?;
        let mut out = size.to_le_bytes().to_vec();
        out.extend_from_slice(&lz4_flex::block::compress(data));
        Ok(out)
    }
    fn describe(&self) -> String {
        "lz4".into()
    }
}

impl Compressor for Brotli {
    fn algo(&self) -> Compression {
        Compression::BROTLI
    }
    fn compress(&self, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        varint::encode(data.len() as u64, &mut out);
        let mut w = brotli::CompressorWriter::new(out, 1 << 16, self.quality, self.window);
        w.write_all(data).map_err(|e| corrupt("brotli", e))?;
        Ok(w.into_inner())
    }
    fn describe(&self) -> String {
        format!("brotli:quality={}:lgwin={}", self.quality, self.window)
    }
}

/// Builds a compressor from a spec: `algo[:key=value|flag...]`, e.g.
/// `null`, `zstd:level=19`, `lzma:level=9:extreme`, `lz4`,
/// `brotli:quality=11:lgwin=22`.
pub fn compressor_from_spec(spec: &str) -> Result<Box<dyn Compressor>, CodecError> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let mut opts: Vec<(&str, Option<&str>)> = parts
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (p, None),
        })
        .collect();
    let bad = |m: String| CodecError::Unsupported(format!("compression '{spec}': {m}"));
    let mut take_num = |key: &str,
                        default: i64,
                        range: std::ops::RangeInclusive<i64>|
     -> Result<i64, CodecError> {
        match opts.iter().position(|(k, _)| *k == key) {
            None => Ok(default),
            Some(i) => {
                let (_, v) = opts.remove(i);
                let n: i64 = v
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad(format!("'{key}' needs a number")))?;
                if !range.contains(&n) {
                    return Err(bad(format!("'{key}' must be in {range:?}")));
                }
                Ok(n)
            }
        }
    };
    let c: Box<dyn Compressor> = match name {
        "null" | "none" => Box::new(Null),
        "zstd" => Box::new(Zstd {
            level: take_num("level", 19, -131072..=22)? as i32,
        }),
        "lzma" => {
            let level = take_num("level", 9, 0..=9)? as u32;
            let extreme = match opts.iter().position(|(k, _)| *k == "extreme") {
                Some(i) => {
                    opts.remove(i);
                    liblzma::stream::PRESET_EXTREME
                }
                None => 0,
            };
            Box::new(Lzma {
                preset: level | extreme,
            })
        }
        "lz4" => Box::new(Lz4),
        "brotli" => Box::new(Brotli {
            quality: take_num("quality", 11, 0..=11)? as u32,
            window: take_num("lgwin", 22, 10..=24)? as u32,
        }),
        "lz4hc" | "flac" | "ricepp" => {
            return Err(bad("no compressor for this algorithm yet".into()))
        }
        other => return Err(bad(format!("unknown algorithm '{other}'"))),
    };
    if let Some((k, _)) = opts.first() {
        return Err(bad(format!("unknown option '{k}'")));
    }
    Ok(c)
}
