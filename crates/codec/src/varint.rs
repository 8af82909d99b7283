//! The LEB128 varints DwarFS puts in front of brotli, FLAC and RICEPP payloads.

use crate::{corrupt, CodecError};

/// Longest encoding of a `u64`.
const MAX_LEN: usize = 10;

/// Decodes a varint from the front of `bytes`; returns the value and the
/// number of bytes it took. `None` if it is truncated, too long, or
/// overflows 64 bits.
pub fn decode(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_LEN) {
        let bits = u64::from(b & 0x7f);
        if i == MAX_LEN - 1 && bits > 1 {
            return None;
        }
        value |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The declared size at the start of a payload, and the rest of it.
pub fn size_prefix<'a>(
    algo: &'static str,
    payload: &'a [u8],
) -> Result<(u64, &'a [u8]), CodecError> {
    let (size, used) = decode(payload).ok_or_else(|| corrupt(algo, "bad size prefix"))?;
    Ok((size, &payload[used..]))
}

/// Appends the varint encoding of `value` to `out`.
pub fn encode(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut buf = Vec::new();
            encode(v, &mut buf);
            assert_eq!(decode(&buf), Some((v, buf.len())));
        }
    }

    #[test]
    fn refuses_malformed() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x80]), None);
        assert_eq!(decode(&[0xff; 11]), None);
        // Ten bytes whose last one carries bits beyond 64.
        let mut too_big = vec![0xff; 9];
        too_big.push(0x02);
        assert_eq!(decode(&too_big), None);
        assert_eq!(decode(&[0x96, 0x01, 0xff]), Some((150, 2)));
    }
}
