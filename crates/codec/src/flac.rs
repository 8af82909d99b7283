//! FLAC blocks: PCM audio coded with FLAC. The block header records how the
//! original samples were laid out (bytes per sample, byte order, signedness,
//! which end the padding bits sit at), so the exact bytes can be rebuilt.

use crate::{check_size, corrupt, varint, CodecError};
use hoard_format::thrift::{self, Value};

const BIG_ENDIAN: i64 = 0x80;
const SIGNED: i64 = 0x40;
const LSB_PADDING: i64 = 0x20;
const BYTES_PER_SAMPLE_MASK: i64 = 0x03;

/// How decoded samples are turned back into bytes.
struct SampleLayout {
    bytes: usize,
    bits: u32,
    big_endian: bool,
    signed: bool,
    lsb_padding: bool,
}

impl SampleLayout {
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

/// Decodes a FLAC block payload.
pub fn decompress(payload: &[u8], max_size: usize) -> Result<Vec<u8>, CodecError> {
    let mut rest = payload;
    let size = varint::decode(&mut rest).ok_or_else(|| corrupt("flac", "bad size prefix"))?;
    let size = check_size("flac", size, max_size)?;
    let (header, used) = thrift::decode_struct(rest).map_err(|e| corrupt("flac", e))?;
    let stream = &rest[used..];
    let num = |id| header.field(id).and_then(Value::as_int).unwrap_or(0);
    let (channels, bits, flags) = (num(1), num(2), num(3));
    let layout = SampleLayout {
        bytes: ((flags & BYTES_PER_SAMPLE_MASK) + 1) as usize,
        bits: bits as u32,
        big_endian: flags & BIG_ENDIAN != 0,
        signed: flags & SIGNED != 0,
        lsb_padding: flags & LSB_PADDING != 0,
    };
    if !(1..=8).contains(&channels) || layout.bits == 0 || layout.bits as usize > 8 * layout.bytes {
        return Err(corrupt(
            "flac",
            format!(
                "bad header: {channels} channels, {bits} bits in {} bytes",
                layout.bytes
            ),
        ));
    }
    let mut reader = claxon::FlacReader::new(stream).map_err(|e| corrupt("flac", e))?;
    let mut out = Vec::with_capacity(size);
    let mut blocks = reader.blocks();
    let mut buffer = Vec::new();
    while out.len() < size {
        let block = match blocks.read_next_or_eof(std::mem::take(&mut buffer)) {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => return Err(corrupt("flac", e)),
        };
        if block.channels() as i64 != channels {
            return Err(corrupt("flac", "channel count differs from the header"));
        }
        for i in 0..block.duration() {
            for c in 0..block.channels() {
                layout.pack(block.sample(c, i), &mut out);
            }
        }
        if out.len() > size {
            return Err(corrupt(
                "flac",
                format!("stream holds more than the declared {size} bytes"),
            ));
        }
        buffer = block.into_buffer();
    }
    if out.len() != size {
        return Err(corrupt(
            "flac",
            format!("decoded {} bytes, expected {size}", out.len()),
        ));
    }
    Ok(out)
}
