//! RICEPP blocks: DwarFS's Rice coding of 16-bit image (FITS) data.
//!
//! Payload: varint uncompressed size, a thrift-compact `ricepp_block_header`
//! (1: `block_size` u32, 2: `component_count` u16, 3: `bytes_per_sample` u8,
//! 4: `unused_lsb_count` u8, 5: `big_endian` bool, 6: `ricepp_version` u16),
//! then the bitstream.
//!
//! The bitstream is read least significant bit first (as little-endian
//! 64-bit words). Pixels are 16-bit words in the block's byte order whose
//! lowest `unused_lsb_count` bits are zero; a pixel's *value* is the word
//! in native order shifted right by those bits. Pixels alternate between
//! `component_count` interleaved streams. Each stream starts with its first
//! value as 16 raw bits; then the pixels come in chunks of
//! `component_count * block_size`, and within a chunk each stream's pixels
//! are coded in turn, after a 4-bit code `k`:
//!
//! * `k = 0`: every pixel repeats the stream's last value;
//! * `k = 1..=14`: Rice-coded differences to the previous value, with
//!   parameter `k - 1`: a unary quotient (zero bits ended by a one bit),
//!   then `k - 1` low bits; the difference is zigzag-coded;
//! * `k = 15`: the pixels' 16-bit words as stored, raw; the last of them
//!   becomes the stream's last value.
//!
//! The decoded words are written little-endian, as DwarFS does on the
//! little-endian machines it writes images on.

use crate::{check_declared, corrupt, unsupported, varint, CodecError};
use hoard_format::thrift::{self, Value};

const ALGO: &str = "ricepp";
/// The newest bitstream version this decoder reads.
const VERSION: u64 = 1;
const PIXEL_BITS: u32 = 16;
/// Width of the per-chunk code.
const CODE_BITS: u32 = 4;
/// Largest code that means Rice coding; the next one means raw pixels.
const CODE_RICE_MAX: u64 = 14;
/// Largest `block_size` DwarFS's decoder accepts.
const MAX_BLOCK_SIZE: u64 = 512;
/// Largest `component_count` DwarFS's decoder accepts.
const MAX_COMPONENTS: u64 = 2;

fn err(msg: impl ToString) -> CodecError {
    corrupt(ALGO, msg)
}

/// A least-significant-bit-first reader over a byte slice.
struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: usize,
}

impl BitReader<'_> {
    /// The 64 bits from byte `byte` on, little-endian, zero past the end.
    fn word(&self, byte: usize) -> u64 {
        match self.data.get(byte..byte + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
            None => {
                let mut w = [0u8; 8];
                let tail = self.data.get(byte..).unwrap_or_default();
                w[..tail.len()].copy_from_slice(tail);
                u64::from_le_bytes(w)
            }
        }
    }

    fn bits_left(&self) -> usize {
        self.data.len() * 8 - self.pos
    }

    /// Reads `n` bits (at most 32).
    fn bits(&mut self, n: u32) -> Result<u64, CodecError> {
        if n as usize > self.bits_left() {
            return Err(err("bitstream ends early"));
        }
        if n == 0 {
            return Ok(0);
        }
        let v = (self.word(self.pos / 8) >> (self.pos % 8)) & ((1u64 << n) - 1);
        self.pos += n as usize;
        Ok(v)
    }

    /// Counts zero bits up to the next one bit, which is consumed too.
    fn unary(&mut self) -> Result<u64, CodecError> {
        let mut zeros = 0u64;
        loop {
            let left = self.bits_left();
            if left == 0 {
                return Err(err("bitstream ends early"));
            }
            let off = self.pos % 8;
            let w = self.word(self.pos / 8) >> off;
            if w != 0 {
                // Bits past the end read as zero, so this one is in the data.
                let tz = w.trailing_zeros() as usize;
                self.pos += tz + 1;
                return Ok(zeros + tz as u64);
            }
            let step = (64 - off).min(left);
            zeros += step as u64;
            self.pos += step;
        }
    }
}

/// The block header fields, checked against what DwarFS can have written.
struct Header {
    block_size: usize,
    components: usize,
    unused_lsb: u32,
    big_endian: bool,
}

/// An unsigned header field: thrift stores DwarFS's unsigned fields in
/// their signed types, so the stored value is reinterpreted at `width` bits.
fn field(header: &Value, id: i16, width: u32) -> u64 {
    let v = header.field(id).and_then(Value::as_int).unwrap_or(0) as u64;
    v & ((1u64 << width) - 1)
}

impl Header {
    fn parse(header: &Value) -> Result<Self, CodecError> {
        let version = field(header, 6, 16);
        if version > VERSION {
            return Err(unsupported(ALGO, format!("bitstream version {version}")));
        }
        let bytes_per_sample = field(header, 3, 8);
        if bytes_per_sample != 2 {
            return Err(unsupported(
                ALGO,
                format!("{bytes_per_sample} bytes per sample"),
            ));
        }
        let block_size = field(header, 1, 32);
        let components = field(header, 2, 16);
        let unused_lsb = field(header, 4, 8);
        if !(1..=MAX_BLOCK_SIZE).contains(&block_size)
            || !(1..=MAX_COMPONENTS).contains(&components)
            || unused_lsb >= u64::from(PIXEL_BITS)
        {
            return Err(unsupported(
                ALGO,
                format!(
                    "block size {block_size}, {components} components, {unused_lsb} unused bits"
                ),
            ));
        }
        Ok(Header {
            block_size: block_size as usize,
            components: components as usize,
            unused_lsb: unused_lsb as u32,
            big_endian: header.field(5).and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// The stored word of a pixel value.
    fn store(&self, value: u64) -> u16 {
        let w = (value as u16) << self.unused_lsb;
        if self.big_endian {
            w.swap_bytes()
        } else {
            w
        }
    }

    /// The value of a stored word.
    fn load(&self, word: u16) -> u64 {
        let w = if self.big_endian {
            word.swap_bytes()
        } else {
            word
        };
        u64::from(w >> self.unused_lsb)
    }
}

pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let (size, rest) = varint::size_prefix(ALGO, payload)?;
    let size = check_declared(ALGO, size, max_size)?;
    let (header, used) = thrift::decode_struct(rest).map_err(|e| corrupt(ALGO, e))?;
    let h = Header::parse(&header)?;
    if size % (2 * h.components) != 0 {
        return Err(err(format!(
            "{size} bytes is not a whole number of {}-component pixels",
            h.components
        )));
    }
    let mut out = vec![0u8; size];
    if size == 0 {
        return Ok(out);
    }
    let mut r = BitReader {
        data: &rest[used..],
        pos: 0,
    };
    let mut last = [0u64; MAX_COMPONENTS as usize];
    for l in last.iter_mut().take(h.components) {
        *l = r.bits(PIXEL_BITS)?;
    }
    for chunk in out.chunks_mut(2 * h.components * h.block_size) {
        for (c, last) in last.iter_mut().enumerate().take(h.components) {
            let targets = chunk.chunks_exact_mut(2).skip(c).step_by(h.components);
            let code = r.bits(CODE_BITS)?;
            if code == 0 {
                let w = h.store(*last).to_le_bytes();
                targets.for_each(|p| p.copy_from_slice(&w));
            } else if code <= CODE_RICE_MAX {
                let fs = (code - 1) as u32;
                for p in targets {
                    let q = r.unary()?;
                    let diff = q.wrapping_shl(fs) | r.bits(fs)?;
                    let delta = (diff >> 1) ^ (diff & 1).wrapping_neg();
                    *last = last.wrapping_add(delta);
                    p.copy_from_slice(&h.store(*last).to_le_bytes());
                }
            } else {
                let mut final_word = None;
                for p in targets {
                    let w = r.bits(PIXEL_BITS)? as u16;
                    p.copy_from_slice(&w.to_le_bytes());
                    final_word = Some(w);
                }
                if let Some(w) = final_word {
                    *last = h.load(w);
                }
            }
        }
    }
    Ok(out)
}
