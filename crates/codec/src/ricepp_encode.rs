//! The RICEPP block compressor: 16-bit image data (FITS), Rice-coded the
//! way DwarFS's encoder does it, so the payloads are the same bytes.
//!
//! See [`crate::ricepp`] for the payload and bitstream layout. Per chunk
//! and stream, the encoder zigzag-codes the differences between
//! consecutive pixel values and picks the Rice parameter that needs the
//! fewest bits (searching from an estimate based on their mean); when all
//! differences are zero it writes code 0, and when Rice coding would not
//! beat the raw words it writes them raw.

use crate::compressor::Compressor;
use crate::{failed, varint, CodecError};
use hoard_format::section::Compression;

const ALGO: &str = "ricepp";
const PIXEL_BITS: u32 = 16;
const CODE_BITS: u32 = 4;
/// Largest Rice parameter + 1 that still means Rice coding.
const FS_MAX: u32 = PIXEL_BITS - 2;
/// The bitstream version written.
const VERSION: u16 = 1;
/// Pixels per stream and chunk when the spec gives no `block_size`.
pub const DEFAULT_BLOCK_SIZE: usize = 128;
/// Accepted `block_size` values.
pub const BLOCK_SIZES: std::ops::RangeInclusive<usize> = 16..=512;

/// Compresses FITS image blocks into DwarFS RICEPP payloads.
///
/// Built from the spec `ricepp[:block_size=N]`; each block needs its
/// `fits/image` metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RiceppCompressor {
    /// Pixels per stream coded with one Rice parameter (16..=512).
    pub block_size: usize,
}

/// The pixel layout of a block, from its category metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    components: usize,
    unused_lsb: u32,
    big_endian: bool,
}

impl Layout {
    /// Parses DwarFS's `fits/image` metadata, such as
    /// `{"bytes_per_sample":2,"component_count":1,"endianness":"big",
    /// "unused_lsb_count":0}`.
    fn parse(metadata: Option<&str>) -> Result<Self, CodecError> {
        let text =
            metadata.ok_or_else(|| failed(ALGO, "no pixel layout metadata for the block"))?;
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| failed(ALGO, format!("bad metadata: {e}")))?;
        let number = |key: &str, range: std::ops::RangeInclusive<u64>| {
            json.get(key)
                .and_then(serde_json::Value::as_u64)
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    failed(
                        ALGO,
                        format!(
                            "metadata needs '{key}' in {}..={}",
                            range.start(),
                            range.end()
                        ),
                    )
                })
        };
        number("bytes_per_sample", 2..=2)?;
        let components = number("component_count", 1..=2)? as usize;
        let unused_lsb = number("unused_lsb_count", 0..=8)? as u32;
        let big_endian = match json.get("endianness").and_then(serde_json::Value::as_str) {
            Some("big") => true,
            Some("little") => false,
            _ => return Err(failed(ALGO, "metadata needs 'endianness' big or little")),
        };
        Ok(Layout {
            components,
            unused_lsb,
            big_endian,
        })
    }

    /// The value of a stored pixel word (read little-endian from the data).
    fn value(&self, raw: u16) -> u32 {
        let w = if self.big_endian {
            raw.swap_bytes()
        } else {
            raw
        };
        u32::from(w >> self.unused_lsb)
    }
}

/// A least-significant-bit-first writer, flushed to whole bytes.
#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    bits: u32,
}

impl BitWriter {
    /// Appends the low `n` bits of `v` (n <= 32).
    fn bits(&mut self, v: u32, n: u32) {
        if n == 0 {
            return;
        }
        let v = u64::from(v) & ((1u64 << n) - 1);
        self.acc |= v << self.bits;
        self.bits += n;
        if self.bits >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.bits -= 32;
        }
    }

    /// Appends `n` zero bits.
    fn zeros(&mut self, mut n: u32) {
        while n > 0 {
            let step = n.min(32);
            self.bits(0, step);
            n -= step;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let bytes = self.bits.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
        self.out
    }
}

/// Bits needed to Rice-code `deltas` with parameter `fs`.
fn cost(deltas: &[u32], fs: u32) -> u64 {
    let high: u64 = deltas.iter().map(|&d| u64::from(d >> fs)).sum();
    deltas.len() as u64 * u64::from(fs + 1) + high
}

/// The Rice parameter with the fewest bits, found as DwarFS's encoder
/// does: start from the mean's bit length, then walk while it improves.
fn best_split(deltas: &[u32], sum: u64) -> (u32, u64) {
    let mean = sum / deltas.len() as u64;
    let start = 64u32.saturating_sub(mean.leading_zeros() + 2);
    let (b0, b1) = (cost(deltas, start), cost(deltas, start + 1));
    let (mut fs, mut bits, up) = if b1 <= b0 {
        (start + 1, b1, true)
    } else {
        (start, b0, false)
    };
    if b0 != b1 {
        while fs > 0 && fs < FS_MAX {
            let next = if up { fs + 1 } else { fs - 1 };
            let c = cost(deltas, next);
            if c > bits {
                break;
            }
            bits = c;
            fs = next;
        }
    }
    (fs, bits)
}

/// Codes one chunk of one stream: `raw` words, the stream's `last` value.
fn encode_chunk(raw: &[u16], layout: &Layout, last: &mut u32, w: &mut BitWriter) {
    let mut deltas = Vec::with_capacity(raw.len());
    let mut sum = 0u64;
    for &r in raw {
        let v = layout.value(r);
        let diff = v.wrapping_sub(*last) & 0xffff;
        let zigzag = if diff & 0x8000 != 0 {
            !(diff << 1) & 0xffff
        } else {
            (diff << 1) & 0xffff
        };
        deltas.push(zigzag);
        sum += u64::from(zigzag);
        *last = v;
    }
    if sum == 0 {
        w.bits(0, CODE_BITS);
        return;
    }
    let (fs, bits) = best_split(&deltas, sum);
    if fs < FS_MAX && bits < u64::from(PIXEL_BITS) * raw.len() as u64 {
        w.bits(fs + 1, CODE_BITS);
        for &d in &deltas {
            w.zeros(d >> fs);
            w.bits(1, 1);
            w.bits(d, fs);
        }
    } else {
        w.bits(FS_MAX + 1, CODE_BITS);
        for &r in raw {
            w.bits(u32::from(r), PIXEL_BITS);
        }
    }
}

impl RiceppCompressor {
    /// The payload prefix: varint size and the thrift-compact
    /// `ricepp_block_header` {1: block_size i32, 2: component_count i16,
    /// 3: bytes_per_sample byte, 4: unused_lsb_count byte, 5: big_endian
    /// bool, 6: ricepp_version i16}.
    fn prefix(&self, size: usize, layout: &Layout, out: &mut Vec<u8>) {
        const BOOL_TRUE: u8 = 1;
        const BOOL_FALSE: u8 = 2;
        const BYTE: u8 = 3;
        const I16: u8 = 4;
        const I32: u8 = 5;
        varint::encode(size as u64, out);
        out.push(0x10 | I32);
        varint::encode((self.block_size as u64) << 1, out);
        out.push(0x10 | I16);
        out.push((layout.components as u8) << 1);
        out.push(0x10 | BYTE);
        out.push(2);
        out.push(0x10 | BYTE);
        out.push(layout.unused_lsb as u8);
        out.push(
            0x10 | if layout.big_endian {
                BOOL_TRUE
            } else {
                BOOL_FALSE
            },
        );
        out.push(0x10 | I16);
        out.push((VERSION as u8) << 1);
        out.push(0);
    }
}

impl Compressor for RiceppCompressor {
    fn algo(&self) -> Compression {
        Compression::RICEPP
    }

    fn compress(&self, data: &[u8], metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        let layout = Layout::parse(metadata)?;
        let pixel = 2 * layout.components;
        if !data.len().is_multiple_of(pixel) {
            return Err(failed(
                ALGO,
                format!(
                    "{} bytes is not a whole number of {}-component pixels",
                    data.len(),
                    layout.components
                ),
            ));
        }
        let mut out = Vec::with_capacity(data.len() / 2 + 32);
        self.prefix(data.len(), &layout, &mut out);
        if data.is_empty() {
            return Ok(out);
        }
        let raw: Vec<u16> = data
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        let mut w = BitWriter::default();
        let mut last = [0u32; 2];
        for (c, l) in last.iter_mut().enumerate().take(layout.components) {
            *l = layout.value(raw[c]);
            w.bits(*l, PIXEL_BITS);
        }
        let mut stream = Vec::with_capacity(self.block_size);
        for chunk in raw.chunks(layout.components * self.block_size) {
            for (c, l) in last.iter_mut().enumerate().take(layout.components) {
                stream.clear();
                stream.extend(chunk.iter().skip(c).step_by(layout.components));
                encode_chunk(&stream, &layout, l, &mut w);
            }
        }
        out.extend(w.finish());
        Ok(out)
    }

    fn describe(&self) -> String {
        format!("ricepp:block_size={}", self.block_size)
    }

    fn needs_metadata(&self) -> bool {
        true
    }

    fn granularity(&self, metadata: Option<&str>) -> Result<usize, CodecError> {
        Ok(2 * Layout::parse(metadata)?.components)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(components: usize, unused: u32, big: bool) -> String {
        format!(
            r#"{{"bytes_per_sample":2,"component_count":{components},"endianness":"{}","unused_lsb_count":{unused}}}"#,
            if big { "big" } else { "little" }
        )
    }

    /// Words whose low `unused` bits are zero, in the given byte order.
    fn image(values: impl Iterator<Item = u32>, unused: u32, big: bool) -> Vec<u8> {
        values
            .flat_map(|v| {
                let w = ((v << unused) & 0xffff) as u16;
                if big {
                    w.to_be_bytes()
                } else {
                    w.to_le_bytes()
                }
            })
            .collect()
    }

    fn round_trip(data: &[u8], metadata: &str, block_size: usize) -> usize {
        let c = RiceppCompressor { block_size };
        let payload = c.compress(data, Some(metadata)).unwrap();
        let back = crate::ricepp::decompress(&payload, data.len()).unwrap();
        assert_eq!(back, data, "{metadata}, block size {block_size}");
        payload.len()
    }

    #[test]
    fn every_layout_round_trips() {
        let mut x = 12345u32;
        let mut noise = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for components in [1, 2] {
            for unused in [0, 3, 8] {
                for big in [true, false] {
                    let m = meta(components, unused, big);
                    let max = 0xffff >> unused;
                    let n = components * 1000;
                    let gradient = image((0..n as u32).map(|i| (i * 7) % max), unused, big);
                    let noisy = image((0..n).map(|_| noise() % max), unused, big);
                    let flat = image((0..n).map(|_| 42), unused, big);
                    for data in [&gradient, &noisy, &flat] {
                        for bs in [16, 128, 512] {
                            round_trip(data, &m, bs);
                        }
                    }
                    round_trip(&[], &m, 128);
                    round_trip(&gradient[..2 * components * 17], &m, 16);
                }
            }
        }
    }

    #[test]
    fn smooth_images_shrink() {
        let m = meta(1, 0, true);
        let data = image((0..100_000u32).map(|i| 1000 + (i % 300)), 0, true);
        assert!(round_trip(&data, &m, 128) < data.len() / 3);
    }

    #[test]
    fn bad_metadata_and_partial_pixels_are_refused() {
        let c = RiceppCompressor { block_size: 128 };
        assert!(c.compress(&[0; 4], None).is_err());
        assert!(c.compress(&[0; 4], Some("{")).is_err());
        for bad in [
            r#"{"bytes_per_sample":1,"component_count":1,"endianness":"big","unused_lsb_count":0}"#,
            r#"{"bytes_per_sample":2,"component_count":3,"endianness":"big","unused_lsb_count":0}"#,
            r#"{"bytes_per_sample":2,"component_count":1,"endianness":"middle","unused_lsb_count":0}"#,
            r#"{"bytes_per_sample":2,"component_count":1,"endianness":"big","unused_lsb_count":9}"#,
        ] {
            assert!(c.compress(&[0; 4], Some(bad)).is_err(), "{bad}");
        }
        assert!(c.compress(&[0; 6], Some(&meta(2, 0, true))).is_err());
        assert_eq!(c.granularity(Some(&meta(2, 0, true))).unwrap(), 4);
    }

    /// Our payloads equal DwarFS's for the RICEPP blocks of a real image.
    #[test]
    fn upstream_blocks_reencode_identically() {
        let blocks = crate::tests::upstream_blocks(Compression::RICEPP);
        assert!(blocks.is_empty() || blocks.len() == 2, "{}", blocks.len());
        for payload in blocks {
            let (size, rest) = varint::size_prefix(ALGO, &payload).unwrap();
            let (header, _) = hoard_format::thrift::decode_struct(rest).unwrap();
            let int = |id| header.field(id).and_then(|v| v.as_int()).unwrap();
            let big = header.field(5).and_then(|v| v.as_bool()).unwrap();
            let m = meta(int(2) as usize, int(4) as u32, big);
            let data = crate::ricepp::decompress(&payload, size as usize).unwrap();
            let c = RiceppCompressor {
                block_size: int(1) as usize,
            };
            assert_eq!(c.compress(&data, Some(&m)).unwrap(), payload);
        }
    }
}
