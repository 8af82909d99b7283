//! A FLAC stream decoder (RFC 9639), enough for what libFLAC writes into
//! DwarFS blocks: every subframe type, both residual coding methods
//! including escaped partitions, wasted bits, stereo decorrelation, and
//! sample sizes up to 32 bits (so side channels of 33 bits). Frame header
//! CRC-8 and frame CRC-16 are verified, as libFLAC does.
//!
//! Arithmetic is done in `i64` with wrapping operations, so corrupt input
//! can produce wrong samples (caught by the checksums) but never a panic.

use crate::crc::{crc16, crc8};
use crate::{corrupt, unsupported, CodecError};

const ALGO: &str = "flac";
/// Largest block size the format can express.
const MAX_BLOCK_SIZE: usize = 65536;

fn err(msg: impl ToString) -> CodecError {
    corrupt(ALGO, msg)
}

/// A most-significant-bit-first reader over a byte slice.
struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: usize,
}

impl<'a> BitReader<'a> {
    fn new(data: &'a [u8], byte_pos: usize) -> Self {
        Self {
            data,
            pos: byte_pos * 8,
        }
    }

    fn byte_pos(&self) -> usize {
        self.pos / 8
    }

    /// Reads `n` bits (at most 56) as an unsigned value.
    fn bits(&mut self, n: u32) -> Result<u64, CodecError> {
        debug_assert!(n <= 56);
        if n == 0 {
            return Ok(0);
        }
        if self.pos + n as usize > self.data.len() * 8 {
            return Err(err("stream ends inside a frame"));
        }
        let byte = self.pos / 8;
        let mut word = [0u8; 8];
        let avail = (self.data.len() - byte).min(8);
        word[..avail].copy_from_slice(&self.data[byte..byte + avail]);
        let word = u64::from_be_bytes(word) << (self.pos % 8);
        self.pos += n as usize;
        Ok(word >> (64 - n))
    }

    /// Reads `n` bits (at most 56) as a two's complement value.
    fn signed(&mut self, n: u32) -> Result<i64, CodecError> {
        if n == 0 {
            return Ok(0);
        }
        let v = self.bits(n)?;
        Ok(((v << (64 - n)) as i64) >> (64 - n))
    }

    /// Counts zero bits up to the next one bit, which is consumed too.
    fn unary(&mut self) -> Result<u64, CodecError> {
        let mut zeros = 0u64;
        loop {
            let byte = *self
                .data
                .get(self.pos / 8)
                .ok_or_else(|| err("stream ends inside a frame"))?;
            let off = (self.pos % 8) as u32;
            let rest = byte << off;
            if rest != 0 {
                let z = rest.leading_zeros();
                self.pos += z as usize + 1;
                return Ok(zeros + u64::from(z));
            }
            zeros += u64::from(8 - off);
            self.pos += (8 - off) as usize;
        }
    }

    /// Skips to the next byte boundary; the skipped bits must be zero.
    fn align(&mut self) -> Result<(), CodecError> {
        let pad = (8 - self.pos % 8) % 8;
        if self.bits(pad as u32)? != 0 {
            return Err(err("non-zero frame padding"));
        }
        Ok(())
    }
}

/// How the channels of a frame are coded.
#[derive(Clone, Copy, PartialEq)]
enum Channels {
    Independent(usize),
    LeftSide,
    SideRight,
    MidSide,
}

impl Channels {
    fn count(self) -> usize {
        match self {
            Channels::Independent(n) => n,
            _ => 2,
        }
    }

    /// Whether channel `ch` is a side channel, coded with one extra bit.
    fn is_side(self, ch: usize) -> bool {
        matches!(
            (self, ch),
            (Channels::LeftSide, 1) | (Channels::SideRight, 0) | (Channels::MidSide, 1)
        )
    }
}

/// One decoded frame, channel after channel.
pub struct Frame<'a> {
    /// Number of channels.
    pub channels: usize,
    /// Samples per channel.
    pub block_size: usize,
    /// `channels * block_size` samples; channel `c` is
    /// `samples[c * block_size..(c + 1) * block_size]`.
    pub samples: &'a [i64],
}

/// Decodes the FLAC stream in `data`, one frame at a time.
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    /// Bits per sample from STREAMINFO, for frames that refer to it.
    streaminfo_bits: Option<u32>,
    samples: Vec<i64>,
    residual: Vec<i64>,
}

impl<'a> Decoder<'a> {
    /// Reads the `fLaC` marker and the metadata blocks.
    pub fn new(data: &'a [u8]) -> Result<Self, CodecError> {
        if data.get(..4) != Some(b"fLaC") {
            return Err(err("no fLaC stream marker"));
        }
        let mut pos = 4;
        let mut streaminfo_bits = None;
        loop {
            let head = data
                .get(pos..pos + 4)
                .ok_or_else(|| err("stream ends inside the metadata"))?;
            let last = head[0] & 0x80 != 0;
            let kind = head[0] & 0x7f;
            let len = usize::from(head[1]) << 16 | usize::from(head[2]) << 8 | usize::from(head[3]);
            pos += 4;
            let body = data
                .get(pos..pos + len)
                .ok_or_else(|| err("stream ends inside the metadata"))?;
            match kind {
                0 => {
                    if len < 34 {
                        return Err(err("STREAMINFO too short"));
                    }
                    // Bits 103..108 of the block hold bits per sample - 1.
                    let bps = ((u32::from(body[12]) & 0x01) << 4 | u32::from(body[13]) >> 4) + 1;
                    streaminfo_bits = Some(bps);
                }
                127 => return Err(err("invalid metadata block type 127")),
                _ => {}
            }
            pos += len;
            if last {
                break;
            }
        }
        Ok(Self {
            data,
            pos,
            streaminfo_bits,
            samples: Vec::new(),
            residual: Vec::new(),
        })
    }

    /// Decodes the next frame; `None` at the end of the data.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CodecError> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let start = self.pos;
        let mut r = BitReader::new(self.data, start);

        // Frame header.
        if r.bits(15)? != 0x7ffc {
            return Err(err("frame sync code not found"));
        }
        let _variable_block_size = r.bits(1)?;
        let size_code = r.bits(4)?;
        let rate_code = r.bits(4)?;
        let channels = match r.bits(4)? {
            n @ 0..=7 => Channels::Independent(n as usize + 1),
            8 => Channels::LeftSide,
            9 => Channels::SideRight,
            10 => Channels::MidSide,
            _ => return Err(err("reserved channel assignment")),
        };
        let bits = match r.bits(3)? {
            0 => self
                .streaminfo_bits
                .ok_or_else(|| err("frame refers to a missing STREAMINFO"))?,
            1 => 8,
            2 => 12,
            4 => 16,
            5 => 20,
            6 => 24,
            7 => 32,
            _ => return Err(err("reserved sample size")),
        };
        if r.bits(1)? != 0 {
            return Err(err("reserved frame header bit set"));
        }
        // Frame or sample number, coded like UTF-8 (up to 7 bytes).
        let first = r.bits(8)? as u8;
        let extra = match first.leading_ones() {
            0 => 0,
            n @ 2..=7 => n - 1,
            _ => return Err(err("bad frame number")),
        };
        for _ in 0..extra {
            if r.bits(2)? != 0b10 {
                return Err(err("bad frame number"));
            }
            r.bits(6)?;
        }
        let block_size = match size_code {
            0 => return Err(err("reserved block size")),
            1 => 192,
            2..=5 => 576 << (size_code - 2),
            6 => r.bits(8)? as usize + 1,
            7 => r.bits(16)? as usize + 1,
            _ => 256 << (size_code - 8),
        };
        match rate_code {
            12 => {
                r.bits(8)?;
            }
            13 | 14 => {
                r.bits(16)?;
            }
            15 => return Err(err("invalid sample rate")),
            _ => {}
        }
        let header_end = r.byte_pos();
        let crc = r.bits(8)? as u8;
        if crc8(&self.data[start..header_end]) != crc {
            return Err(err("frame header checksum mismatch"));
        }

        // Subframes.
        let count = channels.count();
        debug_assert!(block_size <= MAX_BLOCK_SIZE);
        self.samples.clear();
        self.samples.resize(count * block_size, 0);
        for ch in 0..count {
            let sf_bits = bits + u32::from(channels.is_side(ch));
            let out = &mut self.samples[ch * block_size..(ch + 1) * block_size];
            decode_subframe(&mut r, sf_bits, out, &mut self.residual)?;
        }
        decorrelate(channels, &mut self.samples, block_size);

        // Padding to a byte, then the CRC-16 of the whole frame.
        r.align()?;
        let frame_end = r.byte_pos();
        let crc = r.bits(16)? as u16;
        if crc16(&self.data[start..frame_end]) != crc {
            return Err(err("frame checksum mismatch"));
        }
        self.pos = r.byte_pos();
        Ok(Some(Frame {
            channels: count,
            block_size,
            samples: &self.samples,
        }))
    }
}

/// Decodes one subframe of `bits` bits per sample into `out`.
fn decode_subframe(
    r: &mut BitReader<'_>,
    bits: u32,
    out: &mut [i64],
    residual: &mut Vec<i64>,
) -> Result<(), CodecError> {
    if r.bits(1)? != 0 {
        return Err(err("subframe padding bit set"));
    }
    let kind = r.bits(6)? as u32;
    let wasted = if r.bits(1)? == 1 { r.unary()? + 1 } else { 0 };
    if wasted >= u64::from(bits) {
        return Err(err("more wasted bits than bits per sample"));
    }
    let bits = bits - wasted as u32;
    match kind {
        0 => {
            let v = r.signed(bits)?;
            out.fill(v);
        }
        1 => {
            for s in out.iter_mut() {
                *s = r.signed(bits)?;
            }
        }
        8..=12 => {
            let order = (kind - 8) as usize;
            warm_up(r, bits, order, out)?;
            read_residual(r, order, out.len(), residual)?;
            predict_fixed(order, out, residual);
        }
        32..=63 => {
            let order = (kind - 31) as usize;
            warm_up(r, bits, order, out)?;
            let precision = r.bits(4)? as u32 + 1;
            if precision == 16 {
                return Err(err("invalid LPC coefficient precision"));
            }
            let shift = r.signed(5)?;
            if shift < 0 {
                return Err(unsupported(ALGO, "negative LPC shift"));
            }
            let mut coefs = [0i64; 32];
            for c in coefs.iter_mut().take(order) {
                *c = r.signed(precision)?;
            }
            read_residual(r, order, out.len(), residual)?;
            predict_lpc(&coefs[..order], shift as u32, out, residual);
        }
        _ => return Err(err(format!("reserved subframe type {kind}"))),
    }
    if wasted > 0 {
        for s in out.iter_mut() {
            *s = s.wrapping_shl(wasted as u32);
        }
    }
    Ok(())
}

fn warm_up(
    r: &mut BitReader<'_>,
    bits: u32,
    order: usize,
    out: &mut [i64],
) -> Result<(), CodecError> {
    if order > out.len() {
        return Err(err("predictor order exceeds the block size"));
    }
    for s in out.iter_mut().take(order) {
        *s = r.signed(bits)?;
    }
    Ok(())
}

/// Reads the partitioned Rice residual of a block after `order` warm-up
/// samples into `residual[order..block_size]`.
fn read_residual(
    r: &mut BitReader<'_>,
    order: usize,
    block_size: usize,
    residual: &mut Vec<i64>,
) -> Result<(), CodecError> {
    let (param_bits, escape) = match r.bits(2)? {
        0 => (4, 0b1111),
        1 => (5, 0b11111),
        _ => return Err(err("reserved residual coding method")),
    };
    let partition_order = r.bits(4)? as u32;
    let per_partition = block_size >> partition_order;
    if per_partition << partition_order != block_size || per_partition < order {
        return Err(err("residual partitions do not fit the block"));
    }
    residual.clear();
    residual.resize(block_size, 0);
    let mut i = order;
    for p in 0..1usize << partition_order {
        let end = (p + 1) * per_partition;
        let param = r.bits(param_bits)? as u32;
        if param == escape {
            let raw_bits = r.bits(5)? as u32;
            for v in &mut residual[i..end] {
                *v = r.signed(raw_bits)?;
            }
        } else {
            for v in &mut residual[i..end] {
                let q = r.unary()?;
                if q > u64::MAX >> (param + 1) {
                    return Err(err("residual out of range"));
                }
                let u = (q << param) | r.bits(param)?;
                *v = (u >> 1) as i64 ^ -((u & 1) as i64);
            }
        }
        i = end;
    }
    Ok(())
}

fn predict_fixed(order: usize, out: &mut [i64], residual: &[i64]) {
    for i in order..out.len() {
        let p = match order {
            0 => 0,
            1 => out[i - 1],
            2 => out[i - 1].wrapping_mul(2).wrapping_sub(out[i - 2]),
            3 => out[i - 1]
                .wrapping_sub(out[i - 2])
                .wrapping_mul(3)
                .wrapping_add(out[i - 3]),
            _ => out[i - 1]
                .wrapping_add(out[i - 3])
                .wrapping_mul(4)
                .wrapping_sub(out[i - 2].wrapping_mul(6))
                .wrapping_sub(out[i - 4]),
        };
        out[i] = residual[i].wrapping_add(p);
    }
}

fn predict_lpc(coefs: &[i64], shift: u32, out: &mut [i64], residual: &[i64]) {
    let order = coefs.len();
    for i in order..out.len() {
        let sum = coefs
            .iter()
            .zip(out[i - order..i].iter().rev())
            .fold(0i64, |acc, (&c, &s)| acc.wrapping_add(c.wrapping_mul(s)));
        out[i] = residual[i].wrapping_add(sum >> shift);
    }
}

/// Turns side/mid channels back into left and right.
fn decorrelate(channels: Channels, samples: &mut [i64], block_size: usize) {
    if let Channels::Independent(_) = channels {
        return;
    }
    let (a, b) = samples.split_at_mut(block_size);
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        match channels {
            // x = left, y = side: right = left - side.
            Channels::LeftSide => *y = x.wrapping_sub(*y),
            // x = side, y = right: left = side + right.
            Channels::SideRight => *x = x.wrapping_add(*y),
            // x = mid, y = side.
            _ => {
                let mid = x.wrapping_shl(1) | (*y & 1);
                let side = *y;
                *x = mid.wrapping_add(side) >> 1;
                *y = mid.wrapping_sub(side) >> 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Most-significant-bit-first writer for hand-made frames.
    #[derive(Default)]
    struct BitWriter {
        bytes: Vec<u8>,
        bits: usize,
    }

    impl BitWriter {
        fn put(&mut self, value: i64, n: u32) {
            for i in (0..n).rev() {
                if self.bits & 7 == 0 {
                    self.bytes.push(0);
                }
                let bit = ((value >> i) & 1) as u8;
                *self.bytes.last_mut().unwrap() |= bit << (7 - self.bits % 8);
                self.bits += 1;
            }
        }

        fn rice(&mut self, v: i64, param: u32) {
            let u = ((v << 1) ^ (v >> 63)) as u64;
            for _ in 0..u >> param {
                self.put(0, 1);
            }
            self.put(1, 1);
            self.put(u as i64, param);
        }
    }

    /// A stream with one frame of 16 samples in three channels: a fixed
    /// order-2 subframe with 2 wasted bits whose residual uses 5-bit Rice
    /// parameters, an escaped partition and a Rice partition; a verbatim
    /// subframe; and a constant one.
    fn hand_made_stream(residual: &[i64; 14], warm: [i64; 2], verbatim: &[i64; 16]) -> Vec<u8> {
        let mut s = b"fLaC".to_vec();
        s.extend_from_slice(&[0x80, 0, 0, 34]);
        s.extend_from_slice(&[0; 34]);
        let start = s.len();
        let mut w = BitWriter::default();
        w.put(0xfff8, 16); // sync, fixed block size
        w.put(6, 4); // block size from an 8-bit field
        w.put(0, 4); // sample rate from STREAMINFO
        w.put(2, 4); // three independent channels
        w.put(4, 3); // 16 bits per sample
        w.put(0, 1);
        w.put(0, 8); // frame number 0
        w.put(15, 8); // block size 16
        let crc = crc8(&w.bytes);
        w.put(i64::from(crc), 8);

        // Channel 0: fixed order 2, two wasted bits, so 14-bit samples.
        w.put(0, 1);
        w.put(0b001010, 6);
        w.put(1, 1);
        w.put(0b01, 2); // wasted bits: one zero, then a one
        for v in warm {
            w.put(v, 14);
        }
        w.put(1, 2); // 5-bit Rice parameters
        w.put(1, 4); // two partitions of 8
        w.put(31, 5); // escape: 6 raw 5-bit values
        w.put(5, 5);
        for &v in &residual[..6] {
            w.put(v, 5);
        }
        w.put(2, 5);
        for &v in &residual[6..] {
            w.rice(v, 2);
        }
        // Channel 1: verbatim.
        w.put(0, 1);
        w.put(1, 6);
        w.put(0, 1);
        for &v in verbatim {
            w.put(v, 16);
        }
        // Channel 2: constant.
        w.put(0, 1);
        w.put(0, 6);
        w.put(0, 1);
        w.put(-1234, 16);
        // Pad to a byte, then the CRC-16 of the whole frame.
        let pad = (8 - w.bits % 8) % 8;
        w.put(0, pad as u32);
        let crc = crc16(&w.bytes);
        w.put(i64::from(crc), 16);
        s.extend_from_slice(&w.bytes);
        assert_eq!(s[start], 0xff);
        s
    }

    #[test]
    fn decodes_escaped_partitions_wasted_bits_and_every_simple_subframe() {
        let residual = [3, -4, 15, -16, 0, 1, 9, -9, 0, 2, -3, 7, 1, -1];
        let warm = [100, -37];
        let verbatim: [i64; 16] = std::array::from_fn(|i| (i as i64 - 8) * 4001);
        let stream = hand_made_stream(&residual, warm, &verbatim);
        let mut d = Decoder::new(&stream).unwrap();
        let frame = d.next_frame().unwrap().unwrap();
        assert_eq!((frame.channels, frame.block_size), (3, 16));
        let mut expect = vec![warm[0], warm[1]];
        for r in residual {
            let n = expect.len();
            expect.push(r + 2 * expect[n - 1] - expect[n - 2]);
        }
        let expect: Vec<i64> = expect.iter().map(|v| v << 2).collect();
        assert_eq!(&frame.samples[..16], &expect[..]);
        assert_eq!(&frame.samples[16..32], &verbatim[..]);
        assert!(frame.samples[32..].iter().all(|&v| v == -1234));
        assert!(d.next_frame().unwrap().is_none());

        // Any flipped bit in the frame is caught by a checksum or refused.
        for i in 42..stream.len() {
            let mut bad = stream.clone();
            bad[i] ^= 0x08;
            let mut d = Decoder::new(&bad).unwrap();
            assert!(d.next_frame().is_err(), "flip in byte {i} accepted");
        }
    }
}
