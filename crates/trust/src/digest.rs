//! The image digest: what a signature commits to.
//!
//! An image is a prefix (any bytes before the first section, often none),
//! then sections laid end to end up to the signature section. The digest
//! lists the hash of the prefix and, for each section, its place, its
//! size (header and payload) and the hash of all its bytes: BLAKE3 in the
//! signatures hoard writes, SHA-512/256 in those of layout version 1
//! (see [`DigestKind`]).
//! The entries must tile the image without gaps, so the digest commits
//! to every byte before the signature. A reader checks the signature over
//! the list once, then each section against its entry when it first loads
//! it: a remote image fetches only what is read.

use crate::{Error, Result};
use rayon::prelude::*;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// Bytes of an encoded [`SectionDigest`].
const ENTRY_SIZE: usize = 48;
/// Bytes of the encoded digest before its entries.
const HEAD_SIZE: usize = 8 + 32 + 4;

/// The hash function of a digest: one per signature layout version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// SHA-512/256 (layout version 1; still verified, no longer written).
    Sha512_256,
    /// BLAKE3, 256 bits (layout version 2: what hoard signs with).
    Blake3,
}

impl DigestKind {
    /// What new signatures use.
    pub const NEWEST: DigestKind = DigestKind::Blake3;

    /// The hash of `bytes`.
    pub fn hash(self, bytes: &[u8]) -> [u8; 32] {
        self.section_hash(&[], bytes)
    }

    /// The hash of a section whose header and payload were read apart.
    pub fn section_hash(self, header: &[u8], payload: &[u8]) -> [u8; 32] {
        match self {
            // Through the fastest implementation hoard-format was given.
            DigestKind::Sha512_256 => hoard_format::section::sha512_256(header, payload),
            DigestKind::Blake3 => {
                let mut state = blake3::Hasher::new();
                state.update(header);
                state.update(payload);
                state.finalize().into()
            }
        }
    }
}

/// The hash of one section of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionDigest {
    /// File offset of the section's header.
    pub offset: u64,
    /// Bytes of header and payload.
    pub size: u64,
    /// The hash of those bytes.
    pub hash: [u8; 32],
}

impl SectionDigest {
    /// File offset just past the section.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// The digest of an image: its prefix and every section before the
/// signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageDigest {
    /// How its hashes are computed.
    pub kind: DigestKind,
    /// Bytes before the first section (the image offset in its file).
    pub prefix_len: u64,
    /// The hash of those bytes.
    pub prefix_hash: [u8; 32],
    /// Every section, in file order, the first at `prefix_len`.
    pub sections: Vec<SectionDigest>,
}

/// The digest (of the [`DigestKind::NEWEST`] kind) of the image in
/// `file`: the `prefix_len` bytes before it and each of `sections` (byte
/// ranges of the file, laid end to end from `prefix_len`), hashed on all
/// cores.
pub fn of_file(
    file: &File,
    prefix_len: u64,
    sections: &[Range<u64>],
) -> std::io::Result<ImageDigest> {
    let kind = DigestKind::NEWEST;
    let read = |range: &Range<u64>| -> std::io::Result<[u8; 32]> {
        let len = usize::try_from(range.end.saturating_sub(range.start))
            .map_err(|_| std::io::Error::other("a section too large to hash"))?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, range.start)?;
        Ok(kind.hash(&bytes))
    };
    let hashes: Vec<[u8; 32]> = sections
        .par_iter()
        .map(read)
        .collect::<std::io::Result<_>>()?;
    Ok(ImageDigest {
        kind,
        prefix_len,
        prefix_hash: read(&(0..prefix_len))?,
        sections: sections
            .iter()
            .zip(hashes)
            .map(|(r, hash)| SectionDigest {
                offset: r.start,
                size: r.end - r.start,
                hash,
            })
            .collect(),
    })
}

impl ImageDigest {
    /// File offset just past the last section: where the signature starts.
    pub fn end(&self) -> u64 {
        self.sections.last().map_or(self.prefix_len, |s| s.end())
    }

    /// The entry of the section at file offset `offset`.
    pub fn section_at(&self, offset: u64) -> Option<&SectionDigest> {
        self.sections
            .binary_search_by_key(&offset, |s| s.offset)
            .ok()
            .map(|i| &self.sections[i])
    }

    /// The bytes that are signed.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_SIZE + self.sections.len() * ENTRY_SIZE);
        out.extend_from_slice(&self.prefix_len.to_le_bytes());
        out.extend_from_slice(&self.prefix_hash);
        out.extend_from_slice(&(self.sections.len() as u32).to_le_bytes());
        for s in &self.sections {
            out.extend_from_slice(&s.offset.to_le_bytes());
            out.extend_from_slice(&s.size.to_le_bytes());
            out.extend_from_slice(&s.hash);
        }
        out
    }

    /// Decodes a digest of `kind`, checking that its sections tile the
    /// image.
    pub fn decode(kind: DigestKind, bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::Malformed(format!("signed digest: {why}"));
        if bytes.len() < HEAD_SIZE {
            return Err(bad("truncated"));
        }
        let prefix_len = le_u64(&bytes[0..8]);
        let prefix_hash: [u8; 32] = bytes[8..40].try_into().expect("32 bytes");
        let count = u32::from_le_bytes(bytes[40..44].try_into().expect("4 bytes")) as usize;
        let entries = &bytes[HEAD_SIZE..];
        if entries.len() / ENTRY_SIZE != count || !entries.len().is_multiple_of(ENTRY_SIZE) {
            return Err(bad("its length does not match its number of sections"));
        }
        let sections: Vec<SectionDigest> = entries
            .chunks_exact(ENTRY_SIZE)
            .map(|e| SectionDigest {
                offset: le_u64(&e[0..8]),
                size: le_u64(&e[8..16]),
                hash: e[16..48].try_into().expect("32 bytes"),
            })
            .collect();
        let mut at = prefix_len;
        for s in &sections {
            if s.offset != at || s.size == 0 || s.offset.checked_add(s.size).is_none() {
                return Err(bad("its sections do not follow one another"));
            }
            at = s.end();
        }
        Ok(ImageDigest {
            kind,
            prefix_len,
            prefix_hash,
            sections,
        })
    }
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> ImageDigest {
        ImageDigest {
            kind: DigestKind::NEWEST,
            prefix_len: 5,
            prefix_hash: DigestKind::NEWEST.hash(b"#!sh\n"),
            sections: vec![
                SectionDigest {
                    offset: 5,
                    size: 70,
                    hash: [1; 32],
                },
                SectionDigest {
                    offset: 75,
                    size: 64,
                    hash: [2; 32],
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        let d = digest();
        assert_eq!(
            ImageDigest::decode(DigestKind::NEWEST, &d.encode()).unwrap(),
            d
        );
        assert_eq!(d.end(), 139);
        assert_eq!(d.section_at(75).unwrap().hash, [2; 32]);
        assert!(d.section_at(76).is_none());
    }

    #[test]
    fn kinds_hash_as_their_standards_say() {
        // BLAKE3 and SHA-512/256 of "abc" (the BLAKE3 reference
        // implementation's and FIPS 180-4's examples).
        let hex = |h: [u8; 32]| h.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(DigestKind::Blake3.hash(b"abc")),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(
            hex(DigestKind::Sha512_256.hash(b"abc")),
            "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23"
        );
        for kind in [DigestKind::Blake3, DigestKind::Sha512_256] {
            assert_eq!(kind.section_hash(b"ab", b"c"), kind.hash(b"abc"));
        }
    }

    #[test]
    fn gaps_and_truncation_are_refused() {
        let mut d = digest();
        d.sections[1].offset = 76;
        assert!(ImageDigest::decode(DigestKind::NEWEST, &d.encode()).is_err());
        let bytes = digest().encode();
        for len in 0..bytes.len() {
            assert!(ImageDigest::decode(DigestKind::NEWEST, &bytes[..len]).is_err());
        }
    }
}
