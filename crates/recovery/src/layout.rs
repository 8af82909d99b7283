//! Where every byte of the recovery data lives, and how the protected bytes
//! are cut into shards and stripes.
//!
//! The recovery section is appended after the image, section index
//! included, and protects every byte before it. These protected bytes
//! are cut into shards of `shard_size` bytes (the last one zero-padded).
//! Shard `j` belongs to stripe `j % stripes` at position `j / stripes`, so
//! a run of damaged shards is spread over all stripes. Each stripe is one
//! Reed-Solomon code word of `data_shards` originals (positions past the
//! last shard are zeros, never stored) and `parity_shards` recovery shards.
//!
//! The payload of the recovery section:
//!
//! ```text
//! descriptor | checksum table | parity shards | checksum table | descriptor | 8 zero bytes
//! ```
//!
//! The descriptor and the table are stored twice, at both ends, so no
//! single run of damage takes both; the second descriptor is found from
//! the end of the file. The table holds the XXH3-64 of every data shard,
//! then of every parity shard, in pages of 4 KiB that each end with the
//! XXH3-64 of the page. Parity shard `r` of stripe `g` is stored at
//! position `r * stripes + g`. The zero bytes at the very end tell DwarFS
//! readers that look for a section index there that there is none.

use crate::{Error, Result};
use xxhash_rust::xxh3::xxh3_64;

/// Bytes per shard.
pub const SHARD_SIZE: u32 = 4096;
/// The most data shards in one stripe: a read that meets damage repairs
/// its whole stripe, so this bounds that work (4 MiB).
pub const MAX_DATA_SHARDS: u64 = 1024;
/// Size of one stored descriptor.
pub const DESCRIPTOR_SIZE: u64 = 128;
/// Zero bytes that end the payload.
pub const TRAILER_SIZE: u64 = 8;
/// Bytes per page of the checksum table.
pub const TABLE_PAGE: u64 = 4096;
/// Checksums per table page (the last slot holds the page's own).
pub const ENTRIES_PER_PAGE: u64 = TABLE_PAGE / 8 - 1;
/// Size of a section header (v2 layout).
pub const SECTION_HEADER_SIZE: u64 = hoard_format::section::V2_HEADER_SIZE as u64;
const MAGIC: &[u8; 8] = b"HOARDREC";
const LAYOUT_VERSION: u32 = 1;

/// The shape of an image's recovery data; everything else follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per shard.
    pub shard_size: u32,
    /// Size of the whole file, recovery section included.
    pub file_len: u64,
    /// Size of the recovery section, header included.
    pub section_len: u64,
    /// Number of stripes (code words).
    pub stripes: u32,
    /// Original shards per stripe.
    pub data_shards: u32,
    /// Recovery shards per stripe.
    pub parity_shards: u32,
    /// The percentage asked for.
    pub percent: u32,
    /// Section number of the recovery section.
    pub section_number: u32,
}

impl Layout {
    /// Plans recovery data of about `percent`% for the first
    /// `protected_len` bytes of a file, to be appended to them as section
    /// `section_number`.
    pub fn plan(protected_len: u64, section_number: u32, percent: u32) -> Result<Self> {
        if !(1..=100).contains(&percent) {
            return Err(Error::Invalid(format!(
                "recovery percentage {percent} is out of range (1 to 100)"
            )));
        }
        if protected_len == 0 {
            return Err(Error::Invalid("nothing to protect".into()));
        }
        let shards = protected_len.div_ceil(SHARD_SIZE as u64);
        let stripes = shards.div_ceil(MAX_DATA_SHARDS);
        let data_shards = shards.div_ceil(stripes);
        let parity_shards = (data_shards * percent as u64).div_ceil(100).max(1);
        let stripes = u32::try_from(stripes)
            .map_err(|_| Error::Invalid("image too large for recovery data".into()))?;
        let mut layout = Layout {
            shard_size: SHARD_SIZE,
            // Without the hole for now, so the sizes below see all shards.
            file_len: protected_len,
            section_len: 0,
            stripes,
            data_shards: data_shards as u32,
            parity_shards: parity_shards as u32,
            percent,
            section_number,
        };
        let section_len = SECTION_HEADER_SIZE + layout.payload_len();
        layout.section_len = section_len;
        layout.file_len = protected_len + section_len;
        Ok(layout)
    }

    /// Bytes covered by the recovery data: all before its section.
    pub fn protected_len(&self) -> u64 {
        self.file_len - self.section_len
    }

    /// File offset of the recovery section's header.
    pub fn section_start(&self) -> u64 {
        self.protected_len()
    }

    /// Number of (real) data shards.
    pub fn shard_count(&self) -> u64 {
        self.protected_len().div_ceil(self.shard_size as u64)
    }

    /// Number of parity shards over all stripes.
    pub fn parity_count(&self) -> u64 {
        self.stripes as u64 * self.parity_shards as u64
    }

    /// File offset of the recovery section's payload.
    pub fn payload_start(&self) -> u64 {
        self.section_start() + SECTION_HEADER_SIZE
    }

    /// Size of the recovery section's payload.
    pub fn payload_len(&self) -> u64 {
        2 * DESCRIPTOR_SIZE
            + 2 * self.table_len()
            + self.parity_count() * self.shard_size as u64
            + TRAILER_SIZE
    }

    /// Size of one copy of the checksum table.
    pub fn table_len(&self) -> u64 {
        (self.shard_count() + self.parity_count()).div_ceil(ENTRIES_PER_PAGE) * TABLE_PAGE
    }

    /// File offsets of the two copies of the checksum table.
    pub fn table_starts(&self) -> [u64; 2] {
        let first = self.payload_start() + DESCRIPTOR_SIZE;
        [
            first,
            self.parity_start() + self.parity_count() * self.shard_size as u64,
        ]
    }

    /// File offsets of the two copies of the descriptor.
    pub fn descriptor_starts(&self) -> [u64; 2] {
        [
            self.payload_start(),
            self.file_len - TRAILER_SIZE - DESCRIPTOR_SIZE,
        ]
    }

    /// File offset of parity shard `q` (`r * stripes + g`).
    pub fn parity_offset(&self, q: u64) -> u64 {
        self.parity_start() + q * self.shard_size as u64
    }

    fn parity_start(&self) -> u64 {
        self.payload_start() + DESCRIPTOR_SIZE + self.table_len()
    }

    /// The data shard at position `i` of stripe `g`, if it exists.
    pub fn data_shard(&self, g: u32, i: u32) -> Option<u64> {
        let j = i as u64 * self.stripes as u64 + g as u64;
        (j < self.shard_count()).then_some(j)
    }

    /// The stripe of data shard `j`.
    pub fn stripe_of(&self, j: u64) -> u32 {
        (j % self.stripes as u64) as u32
    }

    /// The stored descriptor.
    pub fn encode(&self) -> [u8; DESCRIPTOR_SIZE as usize] {
        let mut d = [0u8; DESCRIPTOR_SIZE as usize];
        d[..8].copy_from_slice(MAGIC);
        let fields32 = [
            (8, LAYOUT_VERSION),
            (12, self.shard_size),
            (40, self.stripes),
            (44, self.data_shards),
            (48, self.parity_shards),
            (52, self.percent),
            (56, self.section_number),
        ];
        for (at, v) in fields32 {
            d[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        for (at, v) in [(16, self.file_len), (24, self.section_len)] {
            d[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        let sum = xxh3_64(&d[..120]);
        d[120..].copy_from_slice(&sum.to_le_bytes());
        d
    }

    /// Decodes a stored descriptor; `None` unless it is intact and
    /// self-consistent.
    pub fn decode(d: &[u8]) -> Option<Self> {
        if d.len() < DESCRIPTOR_SIZE as usize || &d[..8] != MAGIC {
            return None;
        }
        let u32_at = |at: usize| u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
        if u64_at(120) != xxh3_64(&d[..120]) || u32_at(8) != LAYOUT_VERSION {
            return None;
        }
        let layout = Layout {
            shard_size: u32_at(12),
            file_len: u64_at(16),
            section_len: u64_at(24),
            stripes: u32_at(40),
            data_shards: u32_at(44),
            parity_shards: u32_at(48),
            percent: u32_at(52),
            section_number: u32_at(56),
        };
        // Only layouts `plan` makes are accepted, so no field is trusted
        // on its own.
        let protected = layout.file_len.checked_sub(layout.section_len)?;
        let planned = Layout::plan(protected, layout.section_number, layout.percent).ok()?;
        (planned == layout).then_some(layout)
    }

    /// Where checksum entry `e` lies in a table copy starting at `start`.
    pub fn entry_offset(start: u64, e: u64) -> u64 {
        start + (e / ENTRIES_PER_PAGE) * TABLE_PAGE + (e % ENTRIES_PER_PAGE) * 8
    }
}

/// Encodes checksums as table pages, each closed by its own checksum.
pub fn encode_table(sums: &[u64], table_len: u64) -> Vec<u8> {
    let mut out = vec![0u8; table_len as usize];
    for (page, chunk) in out
        .chunks_exact_mut(TABLE_PAGE as usize)
        .zip(sums.chunks(ENTRIES_PER_PAGE as usize))
    {
        for (slot, s) in page.chunks_exact_mut(8).zip(chunk) {
            slot.copy_from_slice(&s.to_le_bytes());
        }
        let own = xxh3_64(&page[..TABLE_PAGE as usize - 8]);
        page[TABLE_PAGE as usize - 8..].copy_from_slice(&own.to_le_bytes());
    }
    out
}

/// Decodes `count` checksums from two copies of the table: each page is
/// taken from a copy whose page checksum holds; entries on a page lost in
/// both are `None`.
pub fn decode_table(copies: [&[u8]; 2], count: u64) -> Vec<Option<u64>> {
    let pages = count.div_ceil(ENTRIES_PER_PAGE) as usize;
    let mut sums = Vec::with_capacity(count as usize);
    for p in 0..pages {
        let range = p * TABLE_PAGE as usize..(p + 1) * TABLE_PAGE as usize;
        let page = copies
            .iter()
            .filter_map(|c| c.get(range.clone()))
            .find(|page| {
                let own = u64::from_le_bytes(page[TABLE_PAGE as usize - 8..].try_into().unwrap());
                own == xxh3_64(&page[..TABLE_PAGE as usize - 8])
            });
        let in_page = (count - p as u64 * ENTRIES_PER_PAGE).min(ENTRIES_PER_PAGE) as usize;
        for e in 0..in_page {
            sums.push(
                page.map(|page| u64::from_le_bytes(page[e * 8..e * 8 + 8].try_into().unwrap())),
            );
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_round_trips_and_rejects_damage() {
        let layout = Layout::plan(6 << 20, 5, 5).unwrap();
        let d = layout.encode();
        assert_eq!(Layout::decode(&d), Some(layout));
        for i in [0, 9, 20, 60, 121] {
            let mut bad = d;
            bad[i] ^= 1;
            assert_eq!(Layout::decode(&bad), None, "byte {i}");
        }
    }

    #[test]
    fn plan_spreads_shards_over_stripes() {
        let layout = Layout::plan(6 << 20, 3, 5).unwrap();
        assert_eq!(layout.shard_count(), 1536);
        assert_eq!(layout.stripes, 2);
        assert_eq!(layout.data_shards, 768);
        assert_eq!(layout.parity_shards, 39);
        assert_eq!(layout.section_start(), 6 << 20);
        assert_eq!(layout.data_shard(1, 767), Some(1535));
        assert_eq!(layout.data_shard(1, 768), None);
        assert!(Layout::plan(100, 0, 0).is_err());
        assert!(Layout::plan(100, 0, 101).is_err());
        assert!(Layout::plan(0, 0, 5).is_err());
    }

    #[test]
    fn table_pages_survive_in_either_copy() {
        let sums: Vec<u64> = (0..1200).map(|i| i * 7 + 1).collect();
        let len = 1200u64.div_ceil(ENTRIES_PER_PAGE) * TABLE_PAGE;
        let a = encode_table(&sums, len);
        let mut b = a.clone();
        let mut a2 = a.clone();
        a2[10] ^= 1; // page 0 lost in copy A
        b[TABLE_PAGE as usize + 3] ^= 1; // page 1 lost in copy B
        let got = decode_table([&a2, &b], 1200);
        assert!(got.iter().zip(&sums).all(|(g, s)| *g == Some(*s)));
        b[5] ^= 1; // page 0 now lost in both
        let got = decode_table([&a2, &b], 1200);
        assert!(got[..ENTRIES_PER_PAGE as usize].iter().all(Option::is_none));
        assert_eq!(
            got[ENTRIES_PER_PAGE as usize],
            Some(sums[ENTRIES_PER_PAGE as usize])
        );
    }
}
