//! The nilsimsa digest of a content (as DwarFS computes it): a 256-bit
//! summary of its trigrams, taken while [`crate::dedupe`] reads each
//! file, by which the `nilsimsa` orders of [`crate::order`] put alike
//! contents side by side.

/// A content's nilsimsa digest: 256 bits, bit `i` in bit `i % 64` of word
/// `i / 64`, set where the content's trigram count in bucket `i` is above
/// the mean. Similar contents have digests a small Hamming distance
/// ([`nilsimsa_distance`]) apart; unrelated ones about 128.
pub type Nilsimsa = [u64; 4];

/// Contents smaller than this get no nilsimsa digest.
pub const NILSIMSA_MIN_SIZE: u64 = 1;

/// The number of bits in which two digests differ.
#[inline(always)]
pub fn nilsimsa_distance(a: &Nilsimsa, b: &Nilsimsa) -> u32 {
    (a[0] ^ b[0]).count_ones()
        + (a[1] ^ b[1]).count_ones()
        + (a[2] ^ b[2]).count_ones()
        + (a[3] ^ b[3]).count_ones()
}

/// Nilsimsa's byte permutation.
const TRAN: [u8; 256] = [
    0x02, 0xD6, 0x9E, 0x6F, 0xF9, 0x1D, 0x04, 0xAB, 0xD0, 0x22, 0x16, 0x1F, 0xD8, 0x73, 0xA1, 0xAC,
    0x3B, 0x70, 0x62, 0x96, 0x1E, 0x6E, 0x8F, 0x39, 0x9D, 0x05, 0x14, 0x4A, 0xA6, 0xBE, 0xAE, 0x0E,
    0xCF, 0xB9, 0x9C, 0x9A, 0xC7, 0x68, 0x13, 0xE1, 0x2D, 0xA4, 0xEB, 0x51, 0x8D, 0x64, 0x6B, 0x50,
    0x23, 0x80, 0x03, 0x41, 0xEC, 0xBB, 0x71, 0xCC, 0x7A, 0x86, 0x7F, 0x98, 0xF2, 0x36, 0x5E, 0xEE,
    0x8E, 0xCE, 0x4F, 0xB8, 0x32, 0xB6, 0x5F, 0x59, 0xDC, 0x1B, 0x31, 0x4C, 0x7B, 0xF0, 0x63, 0x01,
    0x6C, 0xBA, 0x07, 0xE8, 0x12, 0x77, 0x49, 0x3C, 0xDA, 0x46, 0xFE, 0x2F, 0x79, 0x1C, 0x9B, 0x30,
    0xE3, 0x00, 0x06, 0x7E, 0x2E, 0x0F, 0x38, 0x33, 0x21, 0xAD, 0xA5, 0x54, 0xCA, 0xA7, 0x29, 0xFC,
    0x5A, 0x47, 0x69, 0x7D, 0xC5, 0x95, 0xB5, 0xF4, 0x0B, 0x90, 0xA3, 0x81, 0x6D, 0x25, 0x55, 0x35,
    0xF5, 0x75, 0x74, 0x0A, 0x26, 0xBF, 0x19, 0x5C, 0x1A, 0xC6, 0xFF, 0x99, 0x5D, 0x84, 0xAA, 0x66,
    0x3E, 0xAF, 0x78, 0xB3, 0x20, 0x43, 0xC1, 0xED, 0x24, 0xEA, 0xE6, 0x3F, 0x18, 0xF3, 0xA0, 0x42,
    0x57, 0x08, 0x53, 0x60, 0xC3, 0xC0, 0x83, 0x40, 0x82, 0xD7, 0x09, 0xBD, 0x44, 0x2A, 0x67, 0xA8,
    0x93, 0xE0, 0xC2, 0x56, 0x9F, 0xD9, 0xDD, 0x85, 0x15, 0xB4, 0x8A, 0x27, 0x28, 0x92, 0x76, 0xDE,
    0xEF, 0xF8, 0xB2, 0xB7, 0xC9, 0x3D, 0x45, 0x94, 0x4B, 0x11, 0x0D, 0x65, 0xD5, 0x34, 0x8B, 0x91,
    0x0C, 0xFA, 0x87, 0xE9, 0x7C, 0x5B, 0xB1, 0x4D, 0xE5, 0xD4, 0xCB, 0x10, 0xA2, 0x17, 0x89, 0xBC,
    0xDB, 0xB0, 0xE2, 0x97, 0x88, 0x52, 0xF7, 0x48, 0xD3, 0x61, 0x2C, 0x3A, 0x2B, 0xD1, 0x8C, 0xFB,
    0xF1, 0xCD, 0xE4, 0x6A, 0xE7, 0xA9, 0xFD, 0xC4, 0x37, 0xC8, 0xD2, 0xF6, 0xDF, 0x58, 0x72, 0x4E,
];

/// What one byte value contributes to the 8 trigram buckets computed at
/// each position, one lane (byte) per bucket, for each place in the window
/// of the last 5 bytes `w0` (newest) .. `w4` it can take.
///
/// Bucket `n` of the window is `(TRAN[a + n] ^ TRAN[b] * (2n + 1)) +
/// TRAN[c ^ TRAN[n]]` (bytes wrapping), for `(a, b, c)` = `(w0, w1, w2)`,
/// `(w0, w1, w3)`, `(w0, w2, w3)`, `(w0, w1, w4)`, `(w0, w2, w4)`,
/// `(w0, w3, w4)`, `(w4, w1, w0)`, `(w4, w3, w0)` for `n` = 0..7. The field
/// `aK` holds the `TRAN[a + n]` terms of the lanes whose `a` is `wK` (0
/// elsewhere), `bK` and `cK` likewise; as the lanes of each kind of term are
/// taken from distinct window places, or-ing the fields of the window's
/// bytes yields all 8 lanes of each term.
#[derive(Clone, Copy)]
struct Lanes {
    a0: u64,
    a4: u64,
    b1: u64,
    b2: u64,
    b3: u64,
    c0: u64,
    c2: u64,
    c3: u64,
    c4: u64,
}

static LANES: [Lanes; 256] = lanes();

const fn lanes() -> [Lanes; 256] {
    // The window places of a, b and c of each lane.
    const A: [usize; 8] = [0, 0, 0, 0, 0, 0, 4, 4];
    const B: [usize; 8] = [1, 1, 2, 1, 2, 3, 1, 3];
    const C: [usize; 8] = [2, 3, 3, 4, 4, 4, 0, 0];
    let zero = Lanes {
        a0: 0,
        a4: 0,
        b1: 0,
        b2: 0,
        b3: 0,
        c0: 0,
        c2: 0,
        c3: 0,
        c4: 0,
    };
    let mut t = [zero; 256];
    let mut v = 0;
    while v < 256 {
        let mut n = 0;
        while n < 8 {
            let shift = 8 * n;
            let a = (TRAN[(v + n) & 255] as u64) << shift;
            let b = (TRAN[v].wrapping_mul(2 * n as u8 + 1) as u64) << shift;
            let c = (TRAN[v ^ TRAN[n] as usize] as u64) << shift;
            match A[n] {
                0 => t[v].a0 |= a,
                _ => t[v].a4 |= a,
            }
            match B[n] {
                1 => t[v].b1 |= b,
                2 => t[v].b2 |= b,
                _ => t[v].b3 |= b,
            }
            match C[n] {
                0 => t[v].c0 |= c,
                2 => t[v].c2 |= c,
                3 => t[v].c3 |= c,
                _ => t[v].c4 |= c,
            }
            n += 1;
        }
        v += 1;
    }
    t
}

/// The 8 trigram buckets of a window, one per byte.
#[inline(always)]
fn buckets(w0: &Lanes, w1: &Lanes, w2: &Lanes, w3: &Lanes, w4: &Lanes) -> u64 {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = (w0.a0 | w4.a4) ^ (w1.b1 | w2.b2 | w3.b3);
    let y = w0.c0 | w2.c2 | w3.c3 | w4.c4;
    // Byte-wise x + y, no carries across bytes.
    ((x & !HIGH) + (y & !HIGH)) ^ ((x ^ y) & HIGH)
}

/// Computes a [`Nilsimsa`] digest over data given in pieces (the same
/// digest DwarFS computes).
#[derive(Debug, Clone)]
pub struct NilsimsaHasher {
    /// Trigram counts per bucket.
    acc: [u64; 256],
    /// The last 4 bytes, newest first.
    window: [u8; 4],
    size: u64,
}

impl Default for NilsimsaHasher {
    fn default() -> Self {
        NilsimsaHasher {
            acc: [0; 256],
            window: [0; 4],
            size: 0,
        }
    }
}

impl NilsimsaHasher {
    /// Feeds the next piece of the content.
    pub fn update(&mut self, mut data: &[u8]) {
        // The first 4 bytes do not fill the window: count only the
        // trigrams they complete.
        while self.size < 4 {
            let Some((&w0, rest)) = data.split_first() else {
                return;
            };
            let [w1, w2, w3, w4] = self.window;
            let h = buckets(
                &LANES[w0 as usize],
                &LANES[w1 as usize],
                &LANES[w2 as usize],
                &LANES[w3 as usize],
                &LANES[w4 as usize],
            );
            let lanes = match self.size {
                0 | 1 => 0,
                2 => 1,
                _ => 3,
            };
            for n in 0..lanes {
                self.acc[(h >> (8 * n)) as u8 as usize] += 1;
            }
            self.window = [w0, w1, w2, w3];
            self.size += 1;
            data = rest;
        }
        if data.is_empty() {
            return;
        }
        let acc = &mut self.acc;
        let [w1, w2, w3, w4] = self.window;
        let (mut l1, mut l2, mut l3, mut l4) = (
            &LANES[w1 as usize],
            &LANES[w2 as usize],
            &LANES[w3 as usize],
            &LANES[w4 as usize],
        );
        for &w0 in data {
            let l0 = &LANES[w0 as usize];
            let h = buckets(l0, l1, l2, l3, l4);
            for n in 0..8 {
                acc[(h >> (8 * n)) as u8 as usize] += 1;
            }
            (l4, l3, l2, l1) = (l3, l2, l1, l0);
        }
        let n = data.len();
        self.window = if n >= 4 {
            [data[n - 1], data[n - 2], data[n - 3], data[n - 4]]
        } else {
            let mut w = self.window;
            for &b in data {
                w = [b, w[0], w[1], w[2]];
            }
            w
        };
        self.size += n as u64;
    }

    /// The digest of everything fed.
    pub fn finish(&self) -> Nilsimsa {
        let total = match self.size {
            0..=2 => 0,
            3 => 1,
            4 => 4,
            n => 8 * n - 28,
        };
        let threshold = total / 256;
        let mut digest = [0u64; 4];
        for (i, &count) in self.acc.iter().enumerate() {
            if count > threshold {
                digest[i / 64] |= 1 << (i % 64);
            }
        }
        digest
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A digest as DwarFS's tests print it: the words from last to first.
    fn hex(d: Nilsimsa) -> String {
        format!("{:016x}{:016x}{:016x}{:016x}", d[3], d[2], d[1], d[0])
    }

    /// The digest of `data`.
    pub(crate) fn nilsimsa(data: &[u8]) -> Nilsimsa {
        let mut h = NilsimsaHasher::default();
        h.update(data);
        h.finish()
    }

    #[test]
    fn nilsimsa_digests_match_dwarfs() {
        assert_eq!(hex(nilsimsa(b"")), "0".repeat(64));
        let alphabet = b"abcdefghijklmnopqrstuvwxyz";
        // DwarFS's digests of the alphabet's prefixes of 3, 8, 16 and 26
        // letters (its test suite's vectors).
        for (len, want) in [
            (
                3,
                "0040000000000000000000000000000000000000000000000000000000000000",
            ),
            (
                8,
                "14c8118000000000030800000004042004189020001308014088003280000078",
            ),
            (
                16,
                "94ca11850432005ca3a828418804473004199c200a17586dc2d8107384004178",
            ),
            (
                26,
                "94ca95850773045cabb93869ba8657373499beb81a17587fd6f9107fc54cc978",
            ),
        ] {
            assert_eq!(hex(nilsimsa(&alphabet[..len])), want, "{len} letters");
        }
    }

    #[test]
    fn nilsimsa_digests_do_not_depend_on_pieces() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 13 % 241) as u8).collect();
        let whole = nilsimsa(&data);
        for piece in [1, 2, 3, 5, 1000] {
            let mut h = NilsimsaHasher::default();
            for p in data.chunks(piece) {
                h.update(p);
            }
            assert_eq!(h.finish(), whole, "pieces of {piece}");
        }
        // A digest may be taken midway and the hashing go on.
        let mut h = NilsimsaHasher::default();
        h.update(&data[..2]);
        h.finish();
        h.update(&data[2..]);
        assert_eq!(h.finish(), whole);
    }

    /// `lines` lines of text that differ with `seed`.
    pub(crate) fn text(seed: u32, lines: u32) -> Vec<u8> {
        (0..lines)
            .flat_map(|i| format!("{seed} says line {} here\n", i * 31 % 977).into_bytes())
            .collect()
    }

    #[test]
    fn similar_contents_have_near_digests() {
        let a = text(1, 2000);
        let mut b = a.clone();
        b[500..520].copy_from_slice(b"--an edit in between");
        let noise = hoard_testdata::noise(a.len(), 0x9e37_79b9_7f4a_7c15);
        let near = nilsimsa_distance(&nilsimsa(&a), &nilsimsa(&b));
        let far = nilsimsa_distance(&nilsimsa(&a), &nilsimsa(&noise));
        assert!(near < 20, "near {near}");
        assert!(far > 80, "far {far}");
    }
}
