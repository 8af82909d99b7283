//! The small checksums the codecs verify: CRC-32 (xz index), and CRC-8 and
//! CRC-16 (FLAC frame header and frame).

/// Builds a byte-wise lookup table for a CRC of `width` bits, MSB-first, or
/// LSB-first (`reflected`) with the polynomial already bit-reversed.
const fn table(poly: u32, width: u32, reflected: bool) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = if reflected {
            i as u32
        } else {
            (i as u32) << (width - 8)
        };
        let top = 1u32 << (width - 1);
        let mut k = 0;
        while k < 8 {
            c = if reflected {
                if c & 1 != 0 {
                    (c >> 1) ^ poly
                } else {
                    c >> 1
                }
            } else if c & top != 0 {
                (c << 1) ^ poly
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = if width == 32 {
            c
        } else {
            c & ((1 << width) - 1)
        };
        i += 1;
    }
    t
}

static CRC32: [u32; 256] = table(0xedb8_8320, 32, true);
static CRC8: [u32; 256] = table(0x07, 8, false);
static CRC16: [u32; 256] = table(0x8005, 16, false);

/// CRC-32 (IEEE 802.3), as xz uses it.
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| {
        CRC32[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// CRC-8, polynomial 0x07, initial 0: the FLAC frame header checksum.
pub fn crc8(data: &[u8]) -> u8 {
    data.iter()
        .fold(0u8, |c, &b| CRC8[usize::from(c ^ b)] as u8)
}

/// CRC-16, polynomial 0x8005, initial 0: the FLAC frame checksum.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |c, &b| {
        (c << 8) ^ CRC16[usize::from((c >> 8) as u8 ^ b)] as u16
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        // The standard check input "123456789".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc8(b"123456789"), 0xf4);
        assert_eq!(crc16(b"123456789"), 0xfee8);
    }
}
