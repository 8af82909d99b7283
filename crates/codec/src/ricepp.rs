//! RICEPP blocks: DwarFS's Rice coding of 16-bit image (FITS) data.
//!
//! The bitstream is read least significant bit first. Pixels are split into
//! `component_count` interleaved streams; per stream the first value is
//! stored raw (16 bits), then the pixels come in chunks of `block_size` per
//! stream. Each chunk starts with 4 bits `k`: 0 repeats the last value, 15
//! stores raw 16-bit pixels, anything else Rice-codes zigzag differences
//! from the previous value with parameter `k - 1` (a unary quotient ended by
//! a one bit, then `k - 1` low bits). Values are shifted left by the unused
//! low bits and stored in the block's byte order.

use crate::{check_size, corrupt, varint, CodecError};
use hoard_format::thrift::{self, Value};

/// The newest bitstream version this decoder reads.
const VERSION: i64 = 1;
const PIXEL_BITS: u32 = 16;
const K_BITS: u32 = 4;
const K_RAW: u64 = (PIXEL_BITS - 1) as u64;

struct BitReader<'a> {
    data: &'a [u8],
    pos: u64,
}

impl BitReader<'_> {
    fn bits(&mut self, n: u32) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for i in 0..n {
            v |= u64::from(self.bit()?) << i;
        }
        Ok(v)
    }

    fn bit(&mut self) -> Result<u8, CodecError> {
        let byte = *self
            .data
            .get((self.pos / 8) as usize)
            .ok_or_else(|| corrupt("ricepp", "bitstream ends early"))?;
        let b = (byte >> (self.pos % 8)) & 1;
        self.pos += 1;
        Ok(b)
    }

    /// Counts zero bits up to and including the next one bit.
    fn unary(&mut self) -> Result<u64, CodecError> {
        let mut zeros = 0u64;
        while self.bit()? == 0 {
            zeros += 1;
        }
        Ok(zeros)
    }
}

/// Decodes a RICEPP block payload.
pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let mut rest = payload;
    let size = varint::decode(&mut rest).ok_or_else(|| corrupt("ricepp", "bad size prefix"))?;
    let size = check_size("ricepp", size, max_size)?;
    let (header, used) = thrift::decode_struct(rest).map_err(|e| corrupt("ricepp", e))?;
    let num = |id| header.field(id).and_then(Value::as_int).unwrap_or(0);
    let block_size = num(1);
    let components = num(2);
    let bytes_per_sample = num(3);
    let unused_lsb = num(4) as u32;
    let big_endian = header.field(5).and_then(Value::as_bool).unwrap_or(false);
    if num(6) > VERSION {
        return Err(corrupt("ricepp", format!("unsupported version {}", num(6))));
    }
    if bytes_per_sample != 2 {
        return Err(corrupt(
            "ricepp",
            format!("unsupported bytes per sample: {bytes_per_sample}"),
        ));
    }
    if !(1..=512).contains(&block_size)
        || !(1..=16).contains(&components)
        || unused_lsb >= PIXEL_BITS
    {
        return Err(corrupt("ricepp", "bad block header"));
    }
    let (block_size, components) = (block_size as usize, components as usize);
    let pixels = size / 2;
    if size % 2 != 0 || pixels % components != 0 {
        return Err(corrupt(
            "ricepp",
            format!("{size} bytes is not a whole number of {components}-component pixels"),
        ));
    }
    let store = |v: u64| -> u16 {
        let v = (v as u16) << unused_lsb;
        if big_endian {
            v.swap_bytes()
        } else {
            v
        }
    };
    let load = |v: u16| -> u64 {
        let v = if big_endian { v.swap_bytes() } else { v };
        u64::from(v >> unused_lsb)
    };
    let mut r = BitReader {
        data: &rest[used..],
        pos: 0,
    };
    let mut out = vec![0u16; pixels];
    if pixels > 0 {
        let mut last: Vec<u64> = (0..components)
            .map(|_| r.bits(PIXEL_BITS))
            .collect::<Result<_, _>>()?;
        for chunk in out.chunks_mut(components * block_size) {
            for (c, last) in last.iter_mut().enumerate() {
                let k = r.bits(K_BITS)?;
                let targets = chunk.iter_mut().skip(c).step_by(components);
                if k == 0 {
                    targets.for_each(|p| *p = store(*last));
                } else if k > K_RAW {
                    let mut final_raw = None;
                    for p in targets {
                        *p = r.bits(PIXEL_BITS)? as u16;
                        final_raw = Some(*p);
                    }
                    if let Some(v) = final_raw {
                        *last = load(v);
                    }
                } else {
                    let shift = (k - 1) as u32;
                    for p in targets {
                        let q = r.unary()?;
                        let diff = (q << shift) | r.bits(shift)?;
                        let delta = (diff >> 1) ^ (diff & 1).wrapping_neg();
                        *last = last.wrapping_add(delta);
                        *p = store(*last);
                    }
                }
            }
        }
    }
    Ok(out.iter().flat_map(|p| p.to_le_bytes()).collect())
}
