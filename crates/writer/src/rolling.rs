//! Rolling window hashes (a buzhash over a fixed window, one update per
//! byte), the tables that index them and the bloom filter in front of
//! those: what [`crate::segment`] matches new data with, and
//! [`crate::reference`] indexes a layer's base data by.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Window hashes are already well mixed: use them as their own hash.
#[derive(Default)]
pub(crate) struct SelfHasher(u64);

impl Hasher for SelfHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Window hash -> offset of the first window with it in a block.
pub(crate) type WindowIndex = HashMap<u32, u32, BuildHasherDefault<SelfHasher>>;

/// Window hash -> a value of the caller's (see [`crate::reference`]).
pub(crate) type WideWindowIndex = HashMap<u32, u64, BuildHasherDefault<SelfHasher>>;

/// Random values for the rolling hash, from a fixed seed.
fn byte_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    for v in t.iter_mut() {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *v = (z ^ (z >> 31)) as u32;
    }
    t
}

/// A buzhash over a fixed window.
#[derive(Clone)]
pub(crate) struct Roller {
    table: [u32; 256],
    /// Rotation applied to the byte leaving the window.
    out_rot: u32,
}

impl Roller {
    pub(crate) fn new(window: usize) -> Self {
        Roller {
            table: byte_table(),
            out_rot: (window % 32) as u32,
        }
    }

    pub(crate) fn hash(&self, data: &[u8]) -> u32 {
        data.iter()
            .fold(0u32, |h, &b| h.rotate_left(1) ^ self.table[b as usize])
    }

    #[inline]
    pub(crate) fn roll(&self, h: u32, out: u8, inp: u8) -> u32 {
        h.rotate_left(1)
            ^ self.table[out as usize].rotate_left(self.out_rot)
            ^ self.table[inp as usize]
    }
}

/// A one-hash bloom filter over window hashes.
pub(crate) struct Bloom {
    bits: Vec<u64>,
    mask: u32,
}

impl Bloom {
    pub(crate) fn new(entries: usize) -> Self {
        let nbits = (entries.max(64) * 16).next_power_of_two().min(1 << 31);
        Bloom {
            bits: vec![0; nbits / 64],
            mask: (nbits - 1) as u32,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.bits.fill(0);
    }

    #[inline]
    pub(crate) fn insert(&mut self, h: u32) {
        let b = h.rotate_left(7) & self.mask;
        self.bits[(b >> 6) as usize] |= 1 << (b & 63);
    }

    #[inline]
    pub(crate) fn maybe(&self, h: u32) -> bool {
        let b = h.rotate_left(7) & self.mask;
        self.bits[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }
}
