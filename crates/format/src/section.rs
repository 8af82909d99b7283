//! Sections: the units an image is made of.
//!
//! An image is an optional arbitrary prefix (a "header", e.g. a shell script)
//! followed by sections laid end to end. Format v2.2 and later give each
//! section a 64-byte header carrying the magic, the version, a SHA-512/256
//! and an XXH3-64 hash; v2.0 and v2.1 have one 8-byte file header and then
//! an 8-byte header per section, without hashes.

use crate::{corrupt, Error, Result};
use sha2::Digest;

/// The magic at the start of every (v2.2+) section and of every image.
pub const MAGIC: &[u8; 6] = b"DWARFS";
/// The only major format version there is.
pub const MAJOR_VERSION: u8 = 2;
/// The newest minor format version this build reads and writes.
pub const MAX_MINOR_VERSION: u8 = 5;
/// Size of a v2.2+ section header.
pub const V2_HEADER_SIZE: usize = 64;
/// Size of the file header of a v2.0/v2.1 image.
pub const FILE_HEADER_SIZE: usize = 8;
/// Size of a v2.0/v2.1 section header.
pub const V1_HEADER_SIZE: usize = 8;
/// Offset in a v2 header of the first byte covered by the XXH3-64 hash.
const XXH3_COVERS_FROM: usize = 0x30;
/// Offset in a v2 header of the first byte covered by the SHA-512/256 hash.
const SHA_COVERS_FROM: usize = 0x28;
/// The low 48 bits of a section index entry hold the offset.
const INDEX_OFFSET_MASK: u64 = (1 << 48) - 1;

/// What a section holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SectionType(pub u16);

impl SectionType {
    /// File data.
    pub const BLOCK: Self = Self(0);
    /// The frozen2 schema of the metadata, thrift compact encoded.
    pub const METADATA_V2_SCHEMA: Self = Self(7);
    /// The frozen2 metadata.
    pub const METADATA_V2: Self = Self(8);
    /// Offsets of all sections; always last and uncompressed.
    pub const SECTION_INDEX: Self = Self(9);
    /// History of the tools that wrote or rewrote the image.
    pub const HISTORY: Self = Self(10);
    /// hoard's Reed-Solomon recovery data (see the hoard-recovery crate).
    /// DwarFS skips section types it does not know, with a warning.
    pub const HOARD_RECOVERY: Self = Self(0x4852);
    /// hoard's image signature (see the hoard-trust crate), after the
    /// section index and before any recovery data.
    pub const HOARD_SIGNATURE: Self = Self(0x4853);
    /// hoard's wrapped data key of an encrypted image (see the hoard-trust
    /// crate): the first section, listed in the section index.
    pub const HOARD_KEY: Self = Self(0x484B);

    /// The name DwarFS uses for this type, or `unknown(N)`.
    pub fn name(self) -> String {
        match self {
            Self::BLOCK => "BLOCK".into(),
            Self::METADATA_V2_SCHEMA => "METADATA_V2_SCHEMA".into(),
            Self::METADATA_V2 => "METADATA_V2".into(),
            Self::SECTION_INDEX => "SECTION_INDEX".into(),
            Self::HISTORY => "HISTORY".into(),
            Self::HOARD_RECOVERY => "HOARD_RECOVERY".into(),
            Self::HOARD_SIGNATURE => "HOARD_SIGNATURE".into(),
            Self::HOARD_KEY => "HOARD_KEY".into(),
            Self(n) => format!("unknown({n})"),
        }
    }

    /// Whether this build knows what the section means.
    pub fn is_known(self) -> bool {
        matches!(self.0, 0 | 7..=10 | 0x484B | 0x4852 | 0x4853)
    }
}

/// The algorithm a section's payload is compressed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Compression(pub u16);

impl Compression {
    /// Stored as is.
    pub const NONE: Self = Self(0);
    /// An xz stream.
    pub const LZMA: Self = Self(1);
    /// A zstd frame.
    pub const ZSTD: Self = Self(2);
    /// An LZ4 block with a size prefix.
    pub const LZ4: Self = Self(3);
    /// Like LZ4, from the high-compression encoder.
    pub const LZ4HC: Self = Self(4);
    /// A brotli stream with a size prefix.
    pub const BROTLI: Self = Self(5);
    /// FLAC-coded PCM audio.
    pub const FLAC: Self = Self(6);
    /// DwarFS's Rice coding of image (FITS) data.
    pub const RICEPP: Self = Self(7);

    /// Every algorithm this build knows, in id order.
    pub const ALL: [Self; 8] = [
        Self::NONE,
        Self::LZMA,
        Self::ZSTD,
        Self::LZ4,
        Self::LZ4HC,
        Self::BROTLI,
        Self::FLAC,
        Self::RICEPP,
    ];

    /// The lower-case name DwarFS uses (`zstd`, `lz4hc`, …), or `unknown(N)`.
    pub fn name(self) -> String {
        match self.0 {
            0 => "none".into(),
            1 => "lzma".into(),
            2 => "zstd".into(),
            3 => "lz4".into(),
            4 => "lz4hc".into(),
            5 => "brotli".into(),
            6 => "flac".into(),
            7 => "ricepp".into(),
            n => format!("unknown({n})"),
        }
    }

    /// Looks an algorithm up by its lower-case name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether this build knows the algorithm.
    pub fn is_known(self) -> bool {
        self.0 <= 7
    }
}

/// Which of the two header layouts an image uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderLayout {
    /// v2.0 and v2.1: one file header, then 8-byte section headers.
    V1,
    /// v2.2 and later: a 64-byte header with hashes on every section.
    V2,
}

/// The format version of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Always 2.
    pub major: u8,
    /// 0 to [`MAX_MINOR_VERSION`].
    pub minor: u8,
}

impl Version {
    /// The header layout sections of this version use.
    pub fn layout(self) -> HeaderLayout {
        if self.minor >= 2 {
            HeaderLayout::V2
        } else {
            HeaderLayout::V1
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Reads the magic and version at the start of `bytes` and refuses versions
/// this build cannot read.
pub fn parse_version(bytes: &[u8]) -> Result<Version> {
    if bytes.len() < FILE_HEADER_SIZE {
        return Err(corrupt!("image too small for a DwarFS header"));
    }
    if &bytes[..6] != MAGIC {
        return Err(corrupt!("magic 'DWARFS' not found"));
    }
    let version = Version {
        major: bytes[6],
        minor: bytes[7],
    };
    if version.major != MAJOR_VERSION || version.minor > MAX_MINOR_VERSION {
        return Err(Error::Unsupported(format!(
            "unsupported format version {version} (this build reads 2.0 to 2.{MAX_MINOR_VERSION})"
        )));
    }
    Ok(version)
}

/// A decoded section header, of either layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    /// Format version written in the header (v2 layout) or the file header.
    pub version: Version,
    /// Position of the section in the image, counted from 0 (v2 layout only).
    pub number: Option<u32>,
    /// What the section holds.
    pub kind: SectionType,
    /// How its payload is compressed.
    pub compression: Compression,
    /// Length of the payload following the header.
    pub length: u64,
    /// SHA-512/256 over the header from byte 0x28 on and the payload (v2 only).
    pub sha512_256: Option<[u8; 32]>,
    /// XXH3-64 over the header from byte 0x30 on and the payload (v2 only).
    pub xxh3_64: Option<u64>,
}

impl SectionHeader {
    /// Size of the header in bytes.
    pub fn size(&self) -> usize {
        match self.version.layout() {
            HeaderLayout::V1 => V1_HEADER_SIZE,
            HeaderLayout::V2 => V2_HEADER_SIZE,
        }
    }
}

fn le_u16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Decodes a section header at the start of `bytes`, in the layout of `version`.
pub fn parse_header(bytes: &[u8], version: Version) -> Result<SectionHeader> {
    match version.layout() {
        HeaderLayout::V1 => parse_header_v1(bytes, version),
        HeaderLayout::V2 => parse_header_v2(bytes),
    }
}

fn parse_header_v1(bytes: &[u8], version: Version) -> Result<SectionHeader> {
    if bytes.len() < V1_HEADER_SIZE {
        return Err(corrupt!("truncated section header"));
    }
    let kind = SectionType(le_u16(&bytes[0..2]));
    let compression = Compression(u16::from(bytes[2]));
    if !matches!(
        kind,
        SectionType::BLOCK | SectionType::METADATA_V2_SCHEMA | SectionType::METADATA_V2
    ) {
        return Err(corrupt!(
            "invalid section type {} in a v{version} image",
            kind.0
        ));
    }
    if compression.0 > Compression::LZ4HC.0 {
        return Err(corrupt!(
            "invalid compression {} in a v{version} image",
            compression.0
        ));
    }
    Ok(SectionHeader {
        version,
        number: None,
        kind,
        compression,
        length: u64::from(le_u32(&bytes[4..8])),
        sha512_256: None,
        xxh3_64: None,
    })
}

fn parse_header_v2(bytes: &[u8]) -> Result<SectionHeader> {
    if bytes.len() < V2_HEADER_SIZE {
        return Err(corrupt!("truncated section header"));
    }
    let version = parse_version(bytes)?;
    if version.layout() != HeaderLayout::V2 {
        return Err(corrupt!(
            "section header with version {version} inside a v2.2+ image"
        ));
    }
    let mut sha = [0u8; 32];
    sha.copy_from_slice(&bytes[8..40]);
    Ok(SectionHeader {
        version,
        number: Some(le_u32(&bytes[48..52])),
        kind: SectionType(le_u16(&bytes[52..54])),
        compression: Compression(le_u16(&bytes[54..56])),
        length: le_u64(&bytes[56..64]),
        sha512_256: Some(sha),
        xxh3_64: Some(le_u64(&bytes[40..48])),
    })
}

/// Encodes a v2 section header for `payload`, computing both hashes.
pub fn encode_header_v2(
    number: u32,
    kind: SectionType,
    compression: Compression,
    payload: &[u8],
) -> [u8; V2_HEADER_SIZE] {
    let mut h = [0u8; V2_HEADER_SIZE];
    h[..6].copy_from_slice(MAGIC);
    h[6] = MAJOR_VERSION;
    h[7] = MAX_MINOR_VERSION;
    h[48..52].copy_from_slice(&number.to_le_bytes());
    h[52..54].copy_from_slice(&kind.0.to_le_bytes());
    h[54..56].copy_from_slice(&compression.0.to_le_bytes());
    h[56..64].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let xxh = xxh3_of(&h[XXH3_COVERS_FROM..], payload);
    h[40..48].copy_from_slice(&xxh.to_le_bytes());
    let sha = sha512_256_of(&h[SHA_COVERS_FROM..], payload);
    h[8..40].copy_from_slice(&sha);
    h
}

fn xxh3_of(header_tail: &[u8], payload: &[u8]) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    state.update(header_tail);
    state.update(payload);
    state.digest()
}

/// The SHA-512/256 of `first` then `second`, by the implementation given
/// to [`use_sha512_256`] if any (hoard-trust hashes whole sections with it).
pub fn sha512_256(first: &[u8], second: &[u8]) -> [u8; 32] {
    sha512_256_of(first, second)
}

fn sha512_256_of(header_tail: &[u8], payload: &[u8]) -> [u8; 32] {
    if let Some(digest) = SHA512_256.get().and_then(|f| f(header_tail, payload)) {
        return digest;
    }
    let mut state = sha2::Sha512_256::new();
    state.update(header_tail);
    state.update(payload);
    state.finalize().into()
}

/// A SHA-512/256 of two byte strings one after the other, or `None` when
/// it cannot serve (then the built-in `sha2` does).
pub type Sha512_256 = fn(&[u8], &[u8]) -> Option<[u8; 32]>;

static SHA512_256: std::sync::OnceLock<Sha512_256> = std::sync::OnceLock::new();

/// Hashes sections with `hash` from now on, in place of the built-in
/// pure-Rust `sha2` (a program may plug in a faster one, such as
/// OpenSSL's); the first call wins.
pub fn use_sha512_256(hash: Sha512_256) {
    let _ = SHA512_256.set(hash);
}

/// Checks the fast XXH3-64 hash of a v2 section. `header` is the raw 64-byte
/// header, `payload` the bytes after it. v1 sections have no hash and pass.
pub fn verify_xxh3(header: &SectionHeader, raw_header: &[u8], payload: &[u8]) -> Result<()> {
    let Some(expected) = header.xxh3_64 else {
        return Ok(());
    };
    if xxh3_of(&raw_header[XXH3_COVERS_FROM..V2_HEADER_SIZE], payload) != expected {
        return Err(corrupt!(
            "{} section {}: XXH3-64 mismatch",
            header.kind.name(),
            header.number.unwrap_or(0)
        ));
    }
    Ok(())
}

/// Checks the slow SHA-512/256 hash of a v2 section; v1 sections pass.
pub fn verify_sha512_256(header: &SectionHeader, raw_header: &[u8], payload: &[u8]) -> Result<()> {
    let Some(expected) = header.sha512_256 else {
        return Ok(());
    };
    if sha512_256_of(&raw_header[SHA_COVERS_FROM..V2_HEADER_SIZE], payload) != expected {
        return Err(corrupt!(
            "{} section {}: SHA-512/256 mismatch",
            header.kind.name(),
            header.number.unwrap_or(0)
        ));
    }
    Ok(())
}

/// One entry of a SECTION_INDEX section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Type of the indexed section.
    pub kind: SectionType,
    /// Offset of its header, relative to the first section of the image.
    pub offset: u64,
}

/// Decodes a SECTION_INDEX payload: offsets must start at 0 and increase.
pub fn parse_section_index(payload: &[u8]) -> Result<Vec<IndexEntry>> {
    if !payload.len().is_multiple_of(8) {
        return Err(corrupt!(
            "section index length {} is not a multiple of 8",
            payload.len()
        ));
    }
    let entries: Vec<IndexEntry> = payload
        .chunks_exact(8)
        .map(|c| {
            let v = le_u64(c);
            IndexEntry {
                kind: SectionType((v >> 48) as u16),
                offset: v & INDEX_OFFSET_MASK,
            }
        })
        .collect();
    if entries.first().map(|e| e.offset) != Some(0) {
        return Err(corrupt!("section index does not start at offset 0"));
    }
    if entries.windows(2).any(|w| w[0].offset >= w[1].offset) {
        return Err(corrupt!("section index offsets are not increasing"));
    }
    Ok(entries)
}

/// Encodes a section index entry.
pub fn encode_index_entry(entry: IndexEntry) -> u64 {
    (u64::from(entry.kind.0) << 48) | (entry.offset & INDEX_OFFSET_MASK)
}

/// If the last 8 bytes of an image look like a section index entry pointing
/// at the index itself, returns the index section's offset relative to the
/// image start.
pub fn index_offset_hint(image: &[u8]) -> Option<u64> {
    let tail = image.len().checked_sub(8).map(|p| le_u64(&image[p..]))?;
    (SectionType((tail >> 48) as u16) == SectionType::SECTION_INDEX)
        .then_some(tail & INDEX_OFFSET_MASK)
}

/// Finds where the image starts inside a file, skipping an arbitrary prefix.
///
/// `read_at(offset, len)` returns up to `len` bytes of the file at `offset`
/// (fewer at its end). A candidate is a `DWARFS` magic with major version 2
/// whose first section is followed by a second plausible section header: for
/// v2.2+ section 0 followed by section 1; for v2.0/v2.1 a block or schema
/// section followed by a section of a type that may come next. Failing
/// that, a section index at the end of the file says where its image
/// starts (whatever its first headers hold), and then a file that starts
/// with section 0 (v2.2+) starts the image.
pub fn find_image_offset(
    file_len: u64,
    read_at: &mut dyn FnMut(u64, usize) -> Vec<u8>,
) -> Option<u64> {
    const WINDOW: usize = 1 << 20;
    // Most images start the file: two headers say so, where the search
    // would read a megabyte (what a cold mount spends most time on).
    if is_plausible_image_start(0, read_at) {
        return Some(0);
    }
    let mut window_start = 0u64;
    while window_start < file_len {
        let window = read_at(window_start, WINDOW + 6);
        if window.len() < 7 {
            break;
        }
        for (rel, w) in window.windows(7).enumerate() {
            if w[..6] == *MAGIC && w[6] == MAJOR_VERSION {
                let pos = window_start + rel as u64;
                if is_plausible_image_start(pos, read_at) {
                    return Some(pos);
                }
            }
        }
        window_start += (window.len() - 6) as u64;
    }
    if let Some(start) = start_from_section_index(file_len, read_at) {
        return Some(start);
    }
    // An image at the start of the file whose second header is damaged:
    // what DwarFS reads without an offset, so its blocks stay readable.
    let first = read_at(0, V2_HEADER_SIZE);
    let starts_image = parse_version(&first).is_ok_and(|v| v.layout() == HeaderLayout::V2)
        && parse_header_v2(&first).is_ok_and(|h| h.number == Some(0));
    starts_image.then_some(0)
}

/// Bytes at the end of a file searched for a section index whose first
/// headers are damaged: room for about 500,000 sections.
const INDEX_SEARCH: u64 = 4 << 20;

/// Where the image starts, by the section index at the end of the file:
/// its last entry gives the index's own offset in the image, and its
/// header, found by its length, where that lies in the file.
fn start_from_section_index(
    file_len: u64,
    read_at: &mut dyn FnMut(u64, usize) -> Vec<u8>,
) -> Option<u64> {
    let tail_len = file_len.min(INDEX_SEARCH);
    let tail = read_at(file_len - tail_len, tail_len as usize);
    if tail.len() as u64 != tail_len {
        return None;
    }
    let own_offset = index_offset_hint(&tail)?;
    let header_size = V2_HEADER_SIZE as u64;
    // The index holds `n` entries: its header lies 64 + 8n bytes before
    // the end.
    for n in 1..=(tail_len.saturating_sub(header_size) / 8) {
        let at = (tail_len - header_size - 8 * n) as usize;
        let Ok(head) = parse_header_v2(&tail[at..at + V2_HEADER_SIZE]) else {
            continue;
        };
        if head.kind != SectionType::SECTION_INDEX || head.length != 8 * n {
            continue;
        }
        let valid = parse_section_index(&tail[at + V2_HEADER_SIZE..])
            .is_ok_and(|e| e.last().map(|l| l.offset) == Some(own_offset));
        if valid {
            let header_pos = file_len - tail_len + at as u64;
            return header_pos.checked_sub(own_offset);
        }
    }
    None
}

/// [`find_image_offset`] over a file held in memory.
pub fn find_image_offset_in(file: &[u8]) -> Option<u64> {
    find_image_offset(file.len() as u64, &mut |off, len| {
        let start = (off as usize).min(file.len());
        file[start..(start + len).min(file.len())].to_vec()
    })
}

fn is_plausible_image_start(pos: u64, read_at: &mut dyn FnMut(u64, usize) -> Vec<u8>) -> bool {
    let first = read_at(pos, V2_HEADER_SIZE);
    let Ok(version) = parse_version(&first) else {
        return false;
    };
    match version.layout() {
        HeaderLayout::V2 => {
            let Ok(head) = parse_header_v2(&first) else {
                return false;
            };
            let Some(next) = (V2_HEADER_SIZE as u64)
                .checked_add(head.length)
                .and_then(|n| n.checked_add(pos))
            else {
                return false;
            };
            head.number == Some(0)
                && matches!(parse_header_v2(&read_at(next, V2_HEADER_SIZE)), Ok(h) if h.number == Some(1))
        }
        HeaderLayout::V1 => {
            let Ok(head) = parse_header_v1(&first[FILE_HEADER_SIZE.min(first.len())..], version)
            else {
                return false;
            };
            if head.length == 0 || head.kind == SectionType::METADATA_V2 {
                return false;
            }
            let next = pos + (FILE_HEADER_SIZE + V1_HEADER_SIZE) as u64 + head.length;
            match parse_header_v1(&read_at(next, V1_HEADER_SIZE), version) {
                Ok(second) => {
                    second.length > 0
                        && if head.kind == SectionType::BLOCK {
                            matches!(
                                second.kind,
                                SectionType::BLOCK | SectionType::METADATA_V2_SCHEMA
                            )
                        } else {
                            second.kind == SectionType::METADATA_V2
                        }
                }
                Err(_) => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_header_round_trips_and_verifies() {
        let payload = b"hello world";
        let raw = encode_header_v2(3, SectionType::BLOCK, Compression::ZSTD, payload);
        let h = parse_header(&raw, parse_version(&raw).unwrap()).unwrap();
        assert_eq!(h.number, Some(3));
        assert_eq!(h.kind, SectionType::BLOCK);
        assert_eq!(h.compression, Compression::ZSTD);
        assert_eq!(h.length, payload.len() as u64);
        verify_xxh3(&h, &raw, payload).unwrap();
        verify_sha512_256(&h, &raw, payload).unwrap();
        assert!(verify_xxh3(&h, &raw, b"hello worle").is_err());
        assert!(verify_sha512_256(&h, &raw, b"hello worle").is_err());
    }

    #[test]
    fn newer_versions_are_refused_by_name() {
        let err = parse_version(b"DWARFS\x02\x09").unwrap_err();
        assert!(err.to_string().contains("2.9"), "{err}");
        let err = parse_version(b"DWARFS\x03\x00").unwrap_err();
        assert!(err.to_string().contains("3.0"), "{err}");
    }

    #[test]
    fn finds_image_after_a_prefix() {
        let mut file = b"#!/bin/sh\necho DWARFS\x02 fake\n".to_vec();
        let prefix = file.len();
        file.extend_from_slice(&encode_header_v2(
            0,
            SectionType::BLOCK,
            Compression::NONE,
            b"abc",
        ));
        file.extend_from_slice(b"abc");
        file.extend_from_slice(&encode_header_v2(
            1,
            SectionType::BLOCK,
            Compression::NONE,
            b"",
        ));
        assert_eq!(find_image_offset_in(&file), Some(prefix as u64));
        assert_eq!(find_image_offset_in(b"no image here"), None);
    }

    /// Sections of `payloads` (all blocks), then their section index.
    fn image_with_index(payloads: &[&[u8]]) -> Vec<u8> {
        let mut image = Vec::new();
        let mut index = Vec::new();
        for (n, p) in payloads.iter().enumerate() {
            let entry = IndexEntry {
                kind: SectionType::BLOCK,
                offset: image.len() as u64,
            };
            index.extend_from_slice(&encode_index_entry(entry).to_le_bytes());
            image.extend_from_slice(&encode_header_v2(
                n as u32,
                SectionType::BLOCK,
                Compression::NONE,
                p,
            ));
            image.extend_from_slice(p);
        }
        let own = IndexEntry {
            kind: SectionType::SECTION_INDEX,
            offset: image.len() as u64,
        };
        index.extend_from_slice(&encode_index_entry(own).to_le_bytes());
        let number = payloads.len() as u32;
        image.extend_from_slice(&encode_header_v2(
            number,
            SectionType::SECTION_INDEX,
            Compression::NONE,
            &index,
        ));
        image.extend_from_slice(&index);
        image
    }

    #[test]
    fn the_section_index_finds_an_image_whose_first_headers_are_damaged() {
        let image = image_with_index(&[b"first", b"second", b"third"]);
        let prefix = b"#!/bin/sh
exec something
";
        for damage in [0usize, 7, 64 + 5] {
            for with_prefix in [false, true] {
                let mut file = if with_prefix {
                    prefix.to_vec()
                } else {
                    Vec::new()
                };
                let start = file.len();
                file.extend_from_slice(&image);
                assert_eq!(find_image_offset_in(&file), Some(start as u64));
                // The magic, the version or the second header's magic.
                file[start + damage] ^= 0xff;
                assert_eq!(
                    find_image_offset_in(&file),
                    Some(start as u64),
                    "damage at {damage}, prefix {with_prefix}"
                );
            }
        }
        // An index whose last entry does not point at itself finds nothing.
        let mut file = image.clone();
        file[0] ^= 0xff;
        let last = file.len() - 8;
        file[last] ^= 0x01;
        assert_eq!(find_image_offset_in(&file), None);
    }

    #[test]
    fn section_index_must_increase() {
        let mut p = Vec::new();
        for e in [(0u16, 0u64), (8, 100), (9, 200)] {
            p.extend_from_slice(
                &encode_index_entry(IndexEntry {
                    kind: SectionType(e.0),
                    offset: e.1,
                })
                .to_le_bytes(),
            );
        }
        assert_eq!(parse_section_index(&p).unwrap().len(), 3);
        p[8..16].copy_from_slice(
            &encode_index_entry(IndexEntry {
                kind: SectionType(8),
                offset: 0,
            })
            .to_le_bytes(),
        );
        assert!(parse_section_index(&p).is_err());
    }
}
