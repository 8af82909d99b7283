//! The LEB128 varints DwarFS puts in front of some payloads.

/// Decodes a varint from the front of `bytes`, advancing it.
pub fn decode(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Some(v);
        }
    }
    None
}

/// Appends the varint encoding of `v` to `out`.
pub fn encode(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut buf = Vec::new();
            super::encode(v, &mut buf);
            let mut s = &buf[..];
            assert_eq!(super::decode(&mut s), Some(v));
            assert!(s.is_empty());
        }
        assert_eq!(super::decode(&mut &[0x80u8][..]), None);
    }
}
