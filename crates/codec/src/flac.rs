//! FLAC blocks: PCM audio coded with libFLAC.
//!
//! Payload: varint uncompressed size, a thrift-compact `flac_block_header`
//! (1: `num_channels` u16, 2: `bits_per_sample` u8, 3: `flags` u8), then a
//! FLAC stream. The flags say how the original samples were laid out, so
//! the exact original bytes are rebuilt from the decoded samples: bits 0-1
//! hold bytes per sample - 1, 0x20 means the padding bits sit below the
//! sample (left-justified), 0x40 signed samples, 0x80 big-endian.

use crate::flac_stream::Decoder;
use crate::{check_declared, corrupt, unsupported, varint, CodecError};
use hoard_format::thrift::{self, Value};

const ALGO: &str = "flac";

const FLAG_BIG_ENDIAN: u8 = 0x80;
const FLAG_SIGNED: u8 = 0x40;
const FLAG_LSB_PADDING: u8 = 0x20;
const BYTES_PER_SAMPLE_MASK: u8 = 0x03;

/// How one decoded sample is stored as bytes.
#[derive(Debug, Clone, Copy)]
struct SampleLayout {
    bytes: usize,
    bits: u32,
    big_endian: bool,
    signed: bool,
    lsb_padding: bool,
}

impl SampleLayout {
    fn from_header(bits: u8, flags: u8) -> Result<Self, CodecError> {
        let layout = SampleLayout {
            bytes: usize::from(flags & BYTES_PER_SAMPLE_MASK) + 1,
            bits: u32::from(bits),
            big_endian: flags & FLAG_BIG_ENDIAN != 0,
            signed: flags & FLAG_SIGNED != 0,
            lsb_padding: flags & FLAG_LSB_PADDING != 0,
        };
        if layout.bits == 0 || layout.bits as usize > 8 * layout.bytes {
            return Err(corrupt(
                ALGO,
                format!(
                    "{bits} bits per sample do not fit in {} bytes",
                    layout.bytes
                ),
            ));
        }
        Ok(layout)
    }

    /// Appends `sample` in this layout: unsigned samples are offset by half
    /// their range, padding bits go below or above the value, and the low
    /// `bytes` bytes are written in the block's byte order.
    fn pack(&self, sample: i32, out: &mut Vec<u8>) {
        let mut v = sample as u32;
        if !self.signed {
            v = v.wrapping_add(1 << (self.bits - 1));
        }
        if self.lsb_padding {
            v <<= 8 * self.bytes as u32 - self.bits;
        }
        let le = v.to_le_bytes();
        if self.big_endian {
            out.extend(le[..self.bytes].iter().rev());
        } else {
            out.extend_from_slice(&le[..self.bytes]);
        }
    }
}

/// An unsigned header field: thrift stores DwarFS's unsigned fields in
/// their signed types, so the stored value is reinterpreted at `width` bits.
fn field(header: &Value, id: i16, width: u32) -> u64 {
    let v = header.field(id).and_then(Value::as_int).unwrap_or(0) as u64;
    v & ((1u64 << width) - 1)
}

pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let (size, rest) = varint::size_prefix(ALGO, payload)?;
    let size = check_declared(ALGO, size, max_size)?;
    let (header, used) = thrift::decode_struct(rest).map_err(|e| corrupt(ALGO, e))?;
    let channels = field(&header, 1, 16) as usize;
    let layout = SampleLayout::from_header(field(&header, 2, 8) as u8, field(&header, 3, 8) as u8)?;
    if layout.bits > 32 {
        return Err(unsupported(
            ALGO,
            format!("{} bits per sample", layout.bits),
        ));
    }
    let mut decoder = Decoder::new(&rest[used..])?;
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let frame = decoder.next_frame()?.ok_or_else(|| {
            corrupt(
                ALGO,
                format!("stream ends after {} of {size} bytes", out.len()),
            )
        })?;
        if frame.channels != channels {
            return Err(corrupt(
                ALGO,
                format!(
                    "frame has {} channels, the header {channels}",
                    frame.channels
                ),
            ));
        }
        if frame.block_size * frame.channels * layout.bytes > size - out.len() {
            return Err(corrupt(
                ALGO,
                format!("stream holds more than the declared {size} bytes"),
            ));
        }
        // Interleave: sample i of every channel, then sample i + 1.
        for i in 0..frame.block_size {
            for c in 0..frame.channels {
                layout.pack(frame.samples[c * frame.block_size + i] as i32, &mut out);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(bits: u8, flags: u8, samples: &[i32]) -> Vec<u8> {
        let layout = SampleLayout::from_header(bits, flags).unwrap();
        let mut out = Vec::new();
        for &s in samples {
            layout.pack(s, &mut out);
        }
        out
    }

    #[test]
    fn packs_like_dwarfs() {
        // 8-bit unsigned: offset by 128.
        assert_eq!(
            packed(8, 0x00, &[-128, -127, -86, 126, 127]),
            [0, 1, 42, 254, 255]
        );
        // 12 bits in 2 big-endian bytes, unsigned, padding above the value.
        assert_eq!(
            packed(12, 0x81, &[-2048, -1, 0, 2047]),
            [0x00, 0x00, 0x07, 0xff, 0x08, 0x00, 0x0f, 0xff]
        );
        // The same with the padding below the value.
        assert_eq!(
            packed(12, 0xa1, &[-2048, -1, 0, 2047]),
            [0x00, 0x00, 0x7f, 0xf0, 0x80, 0x00, 0xff, 0xf0]
        );
        // 16-bit signed little-endian.
        assert_eq!(
            packed(16, 0x41, &[-32768, -1, 1]),
            [0x00, 0x80, 0xff, 0xff, 0x01, 0x00]
        );
        // 20 bits in 3 bytes, signed: sign-extended above, shifted below.
        assert_eq!(
            packed(20, 0x42, &[-1, 0x7ffff]),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0x07]
        );
        assert_eq!(
            packed(20, 0x62, &[-1, 0x7ffff]),
            [0xf0, 0xff, 0xff, 0xf0, 0xff, 0x7f]
        );
        // 24 bits in 4 big-endian bytes, padding below.
        assert_eq!(
            packed(24, 0xe3, &[-2, 0x123456]),
            [0xff, 0xff, 0xfe, 0x00, 0x12, 0x34, 0x56, 0x00]
        );
        // 32-bit signed and unsigned.
        assert_eq!(packed(32, 0x43, &[i32::MIN]), [0, 0, 0, 0x80]);
        assert_eq!(
            packed(32, 0x03, &[i32::MIN, -1]),
            [0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]
        );
    }

    #[test]
    fn refuses_impossible_layouts() {
        assert!(SampleLayout::from_header(0, 0x41).is_err());
        assert!(SampleLayout::from_header(17, 0x41).is_err());
        assert!(SampleLayout::from_header(33, 0x43).is_err());
    }
}
