//! The signature section: an [`ImageDigest`] signed by one Ed25519 key.
//!
//! ```text
//! | prefix | sections ... | SECTION_INDEX | HOARD_SIGNATURE | [HOARD_RECOVERY] |
//! |<------- signed: the digest lists them --->|
//! ```
//!
//! It is a section of a type DwarFS does not know (0x4853), with a
//! regular v2 header (number: one past the section index's, uncompressed,
//! both hashes), placed after the section index and before any recovery
//! data (which covers it). Its payload:
//!
//! ```text
//! "HOARDSIG" | layout version, 7 zero bytes | public key (32) | signature (64)
//!   | digest length (u64 LE) | digest | "HOARDSIG" | section size (u64 LE)
//! ```
//!
//! The layout version names the digest's hash: 2, BLAKE3 (what hoard
//! writes); 1, SHA-512/256 (still verified).
//!
//! The trailer lets a reader find the section from its end. Its last 8
//! bytes (a size below 2^48) do not name a section index, so DwarFS walks
//! the section headers from the start, as for recovery data, and skips
//! this one with a warning. The Ed25519 signature is over
//! `"hoard image signature vN\0"` (N the layout version) followed by the
//! digest: the prefix keeps an image signature from being taken for any
//! other message an SSH key signs (those start with a length or
//! `SSHSIG`), or for one of another layout.

use crate::digest::{DigestKind, ImageDigest};
use crate::keys::{PublicKey, SecretKey, TrustedKeys};
use crate::{Error, Result};
use hoard_format::section::{encode_header_v2, Compression, SectionType, Version, V2_HEADER_SIZE};

/// The section type of the signature.
pub const SECTION_TYPE: SectionType = SectionType::HOARD_SIGNATURE;
/// Bytes at the end of the section that locate it: magic and size.
pub const TRAILER_SIZE: u64 = 16;
/// Starts and ends the payload.
const MAGIC: &[u8; 8] = b"HOARDSIG";
/// Payload bytes before the digest.
const HEAD_SIZE: usize = 8 + 8 + 32 + 64 + 8;
/// The largest digest accepted (about 5 million sections).
const MAX_DIGEST: u64 = 256 << 20;

/// A signed image digest, as the signature section holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Who signed.
    pub key: PublicKey,
    /// What was signed.
    pub digest: ImageDigest,
    signature: [u8; 64],
}

/// The payload layout version of a digest kind.
fn layout_version(kind: DigestKind) -> u8 {
    match kind {
        DigestKind::Sha512_256 => 1,
        DigestKind::Blake3 => 2,
    }
}

/// The message an image's signature is over: the digest after a prefix
/// that names the layout (`hoard image signature v2\0`).
fn message(digest: &ImageDigest) -> Vec<u8> {
    let domain = format!("hoard image signature v{}\0", layout_version(digest.kind));
    [domain.as_bytes(), &digest.encode()].concat()
}

impl Signature {
    /// Signs `digest` with `key`.
    pub fn sign(digest: ImageDigest, key: &SecretKey) -> Self {
        let signature = key.sign(&message(&digest));
        Signature {
            key: key.public(),
            digest,
            signature,
        }
    }

    /// The section payload.
    pub fn payload(&self) -> Vec<u8> {
        let digest = self.digest.encode();
        let size = HEAD_SIZE + digest.len() + TRAILER_SIZE as usize;
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(MAGIC);
        out.push(layout_version(self.digest.kind));
        out.extend_from_slice(&[0; 7]);
        out.extend_from_slice(&self.key.to_bytes());
        out.extend_from_slice(&self.signature);
        out.extend_from_slice(&(digest.len() as u64).to_le_bytes());
        out.extend_from_slice(&digest);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&((V2_HEADER_SIZE + size) as u64).to_le_bytes());
        out
    }

    /// The whole section, header and payload, numbered `number`, for an
    /// image of format `version`.
    pub fn section(&self, number: u32, version: Version) -> Vec<u8> {
        let payload = self.payload();
        let mut header = encode_header_v2(number, SECTION_TYPE, Compression::NONE, &payload);
        // The hashes do not cover the version bytes.
        header[6] = version.major;
        header[7] = version.minor;
        [&header[..], &payload].concat()
    }

    /// Decodes a signature section's payload (without verifying it).
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::Malformed(format!("signature section: {why}"));
        if payload.len() < HEAD_SIZE + TRAILER_SIZE as usize || &payload[..8] != MAGIC {
            return Err(bad("not a hoard signature"));
        }
        let kind = match payload[8] {
            1 => DigestKind::Sha512_256,
            2 => DigestKind::Blake3,
            _ => return Err(bad("unknown layout version (made by a newer hoard?)")),
        };
        if payload[9..16] != [0; 7] {
            return Err(bad("unknown layout version (made by a newer hoard?)"));
        }
        let key = PublicKey::from_bytes(payload[16..48].try_into().expect("32 bytes"))?;
        let signature: [u8; 64] = payload[48..112].try_into().expect("64 bytes");
        let digest_len = u64::from_le_bytes(payload[112..120].try_into().expect("8 bytes"));
        if digest_len > MAX_DIGEST
            || payload.len() as u64 != HEAD_SIZE as u64 + digest_len + TRAILER_SIZE
        {
            return Err(bad("its digest length does not match its size"));
        }
        let digest_end = HEAD_SIZE + digest_len as usize;
        let trailer = &payload[digest_end..];
        if &trailer[..8] != MAGIC
            || u64::from_le_bytes(trailer[8..].try_into().expect("8 bytes"))
                != (V2_HEADER_SIZE + payload.len()) as u64
        {
            return Err(bad("its trailer is damaged"));
        }
        Ok(Signature {
            key,
            digest: ImageDigest::decode(kind, &payload[HEAD_SIZE..digest_end])?,
            signature,
        })
    }

    /// Checks that one of `trusted` made this signature.
    pub fn verify(&self, trusted: &TrustedKeys) -> Result<()> {
        if !trusted.contains(&self.key) {
            return Err(Error::Untrusted(format!(
                "image is signed by key {}, which is not trusted",
                self.key.fingerprint()
            )));
        }
        if !self.key.verifies(&message(&self.digest), &self.signature) {
            return Err(Error::Untrusted(format!(
                "the image signature by key {} does not verify",
                self.key.fingerprint()
            )));
        }
        Ok(())
    }
}

/// Where the signature section ending at file offset `end` starts, from
/// the last [`TRAILER_SIZE`] bytes before `end`; `None` when they are not
/// a signature's trailer.
pub fn section_start(tail: &[u8], end: u64) -> Option<u64> {
    let tail = tail.get(tail.len().checked_sub(TRAILER_SIZE as usize)?..)?;
    if &tail[..8] != MAGIC {
        return None;
    }
    let size = u64::from_le_bytes(tail[8..].try_into().ok()?);
    if size < (V2_HEADER_SIZE + HEAD_SIZE) as u64 + TRAILER_SIZE {
        return None;
    }
    end.checked_sub(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::SectionDigest;

    fn signed_as(kind: DigestKind, key: &SecretKey) -> Signature {
        let digest = ImageDigest {
            kind,
            prefix_len: 0,
            prefix_hash: kind.hash(b""),
            sections: vec![SectionDigest {
                offset: 0,
                size: 100,
                hash: [7; 32],
            }],
        };
        Signature::sign(digest, key)
    }

    fn signed(key: &SecretKey) -> Signature {
        signed_as(DigestKind::NEWEST, key)
    }

    #[test]
    fn signs_parses_and_verifies() {
        let key = SecretKey::generate().unwrap();
        let sig = signed(&key);
        let version = Version { major: 2, minor: 4 };
        let section = sig.section(3, version);
        assert_eq!(
            section_start(&section, 1000 + section.len() as u64),
            Some(1000)
        );
        let parsed = Signature::parse(&section[V2_HEADER_SIZE..]).unwrap();
        assert_eq!(parsed, sig);
        parsed
            .verify(&TrustedKeys::from_keys(vec![key.public()]))
            .unwrap();
        let other = SecretKey::generate().unwrap();
        let e = parsed
            .verify(&TrustedKeys::from_keys(vec![other.public()]))
            .unwrap_err();
        assert!(e.to_string().contains("not trusted"), "{e}");
    }

    #[test]
    fn layout_version_1_still_verifies() {
        let key = SecretKey::generate().unwrap();
        let trusted = TrustedKeys::from_keys(vec![key.public()]);
        let v1 = signed_as(DigestKind::Sha512_256, &key).payload();
        assert_eq!(v1[8], 1);
        let parsed = Signature::parse(&v1).unwrap();
        assert_eq!(parsed.digest.kind, DigestKind::Sha512_256);
        parsed.verify(&trusted).unwrap();
        // The layout version is signed: the same digest read as the
        // other layout does not verify.
        let mut relabeled = v1.clone();
        relabeled[8] = 2;
        let e = Signature::parse(&relabeled)
            .unwrap()
            .verify(&trusted)
            .unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        let mut unknown = v1;
        unknown[8] = 3;
        assert!(Signature::parse(&unknown).is_err());
    }

    #[test]
    fn any_changed_byte_is_caught() {
        let key = SecretKey::generate().unwrap();
        let trusted = TrustedKeys::from_keys(vec![key.public()]);
        let payload = signed(&key).payload();
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 1;
            let verdict = Signature::parse(&bad).and_then(|s| s.verify(&trusted));
            assert!(verdict.is_err(), "byte {i}");
        }
    }
}
