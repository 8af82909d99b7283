//! The signature section: an [`ImageDigest`], and any [`Claims`], signed
//! by one Ed25519 key.
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
//!   | digest length (u64 LE) | digest | [claims length (u32 LE) | claims]
//!   | "HOARDSIG" | section size (u64 LE)
//! ```
//!
//! The layout version names the digest's hash and whether claims follow
//! it: 3, BLAKE3 and claims (see [`crate::claims`]); 2, BLAKE3 without
//! claims; 1, SHA-512/256 without claims (still verified, no longer
//! written). hoard writes 2 when nothing is claimed, so such images read
//! with any hoard that reads signatures; one that knows only 1 and 2
//! refuses 3 rather than ignore what it claims.
//!
//! The trailer lets a reader find the section from its end. Its last 8
//! bytes (a size below 2^48) do not name a section index, so DwarFS walks
//! the section headers from the start, as for recovery data, and skips
//! this one with a warning. The Ed25519 signature is over
//! `"hoard image signature vN\0"` (N the layout version) followed, in
//! layouts 1 and 2, by the digest; in layout 3, by the payload's bytes
//! from the digest length to the end of the claims. The prefix keeps an
//! image signature from being taken for any other message an SSH key
//! signs (those start with a length or `SSHSIG`), or for one of another
//! layout.

use crate::claims::{self, Claims};
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

/// A signed image digest and claims, as the signature section holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// Who signed.
    pub key: PublicKey,
    /// What was signed.
    pub digest: ImageDigest,
    /// What else was signed: the image's name, version, expiry.
    pub claims: Claims,
    signature: [u8; 64],
}

/// The payload layout version of a digest of `kind` with `claims`.
fn layout_version(kind: DigestKind, claims: &Claims) -> u8 {
    match kind {
        DigestKind::Sha512_256 => 1,
        DigestKind::Blake3 if claims.is_empty() => 2,
        DigestKind::Blake3 => 3,
    }
}

/// What follows the layout's prefix in the signed message, as the
/// payload holds it from the digest length on: the digest, then in
/// layout 3 the claims, each after its length.
fn signed_body(digest: &ImageDigest, claims: &Claims) -> Vec<u8> {
    let digest = digest.encode();
    if claims.is_empty() {
        return digest;
    }
    let claims = claims.encode();
    let mut out = Vec::with_capacity(8 + digest.len() + 4 + claims.len());
    out.extend_from_slice(&(digest.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(&(claims.len() as u32).to_le_bytes());
    out.extend_from_slice(&claims);
    out
}

/// The message an image's signature is over: its signed body after a
/// prefix that names the layout (`hoard image signature v3\0`).
fn message(digest: &ImageDigest, claims: &Claims) -> Vec<u8> {
    let domain = format!(
        "hoard image signature v{}\0",
        layout_version(digest.kind, claims)
    );
    [domain.as_bytes(), &signed_body(digest, claims)].concat()
}

impl Signature {
    /// Signs `digest` and `claims` with `key`. Claims need a digest of
    /// [`DigestKind::NEWEST`]: with the SHA-512/256 of layout 1 (kept to
    /// test that old images still verify) they are left out.
    pub fn sign(digest: ImageDigest, claims: Claims, key: &SecretKey) -> Self {
        let claims = match digest.kind {
            DigestKind::Sha512_256 => Claims::default(),
            DigestKind::Blake3 => claims,
        };
        let signature = key.sign(&message(&digest, &claims));
        Signature {
            key: key.public(),
            digest,
            claims,
            signature,
        }
    }

    /// The section payload.
    pub fn payload(&self) -> Vec<u8> {
        let mut body = signed_body(&self.digest, &self.claims);
        if self.claims.is_empty() {
            // Layouts 1 and 2 store the digest after its length.
            body.splice(0..0, (body.len() as u64).to_le_bytes());
        }
        let size = HEAD_SIZE - 8 + body.len() + TRAILER_SIZE as usize;
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(MAGIC);
        out.push(layout_version(self.digest.kind, &self.claims));
        out.extend_from_slice(&[0; 7]);
        out.extend_from_slice(&self.key.to_bytes());
        out.extend_from_slice(&self.signature);
        out.extend_from_slice(&body);
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
        let (kind, has_claims) = match payload[8] {
            1 => (DigestKind::Sha512_256, false),
            2 => (DigestKind::Blake3, false),
            3 => (DigestKind::Blake3, true),
            _ => return Err(bad("unknown layout version (made by a newer hoard?)")),
        };
        if payload[9..16] != [0; 7] {
            return Err(bad("unknown layout version (made by a newer hoard?)"));
        }
        let key = PublicKey::from_bytes(payload[16..48].try_into().expect("32 bytes"))?;
        let signature: [u8; 64] = payload[48..112].try_into().expect("64 bytes");
        let digest_len = u64::from_le_bytes(payload[112..120].try_into().expect("8 bytes"));
        // Bytes between the digest and the trailer: none, or the claims
        // after their length.
        let between = payload.len() as u64 - HEAD_SIZE as u64 - TRAILER_SIZE;
        if digest_len > MAX_DIGEST || digest_len > between {
            return Err(bad("its digest length does not match its size"));
        }
        let digest_end = HEAD_SIZE + digest_len as usize;
        let claims_end = payload.len() - TRAILER_SIZE as usize;
        let claims = if has_claims {
            let len = payload
                .get(digest_end..digest_end + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .filter(|&len| len <= claims::MAX_ENCODED && digest_end + 4 + len == claims_end)
                .ok_or_else(|| bad("its claims length does not match its size"))?;
            Claims::decode(&payload[claims_end - len..claims_end])?
        } else if digest_end != claims_end {
            return Err(bad("its digest length does not match its size"));
        } else {
            Claims::default()
        };
        let trailer = &payload[claims_end..];
        if &trailer[..8] != MAGIC
            || u64::from_le_bytes(trailer[8..].try_into().expect("8 bytes"))
                != (V2_HEADER_SIZE + payload.len()) as u64
        {
            return Err(bad("its trailer is damaged"));
        }
        Ok(Signature {
            key,
            digest: ImageDigest::decode(kind, &payload[HEAD_SIZE..digest_end])?,
            claims,
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
        if !self
            .key
            .verifies(&message(&self.digest, &self.claims), &self.signature)
        {
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

    fn claimed() -> Claims {
        Claims::new(Some("app".into()), Some(3), Some(1_800_000_000)).unwrap()
    }

    fn signed_as(kind: DigestKind, key: &SecretKey) -> Signature {
        signed_claiming(kind, Claims::default(), key)
    }

    fn signed_claiming(kind: DigestKind, claims: Claims, key: &SecretKey) -> Signature {
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
        Signature::sign(digest, claims, key)
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
    fn claims_are_signed_in_layout_3_and_none_keeps_layout_2() {
        let key = SecretKey::generate().unwrap();
        let trusted = TrustedKeys::from_keys(vec![key.public()]);
        let plain = signed(&key);
        assert_eq!(plain.payload()[8], 2);
        let sig = signed_claiming(DigestKind::NEWEST, claimed(), &key);
        let payload = sig.payload();
        assert_eq!(payload[8], 3);
        let section = sig.section(3, Version { major: 2, minor: 5 });
        let end = 500 + section.len() as u64;
        assert_eq!(section_start(&section, end), Some(500));
        let parsed = Signature::parse(&payload).unwrap();
        assert_eq!(parsed.claims, claimed());
        assert_eq!(parsed, sig);
        parsed.verify(&trusted).unwrap();
        // The same digest and key, the claims dropped: layout 2 with the
        // layout 3 signature does not verify.
        let mut stripped = plain.payload();
        stripped[48..112].copy_from_slice(&payload[48..112]);
        let e = Signature::parse(&stripped)
            .unwrap()
            .verify(&trusted)
            .unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        // A claims length that runs past the payload, or short of it.
        let at = payload.len() - TRAILER_SIZE as usize - claimed().encode().len() - 4;
        for len in [0u32, 1, 1000, u32::MAX] {
            let mut bad = payload.clone();
            bad[at..at + 4].copy_from_slice(&len.to_le_bytes());
            assert!(Signature::parse(&bad).is_err(), "{len}");
        }
        // SHA-512/256 digests (layout 1) take no claims.
        let v1 = signed_claiming(DigestKind::Sha512_256, claimed(), &key);
        assert!(v1.claims.is_empty() && v1.payload()[8] == 1);
    }

    #[test]
    fn any_changed_byte_is_caught() {
        let key = SecretKey::generate().unwrap();
        let trusted = TrustedKeys::from_keys(vec![key.public()]);
        for claims in [Claims::default(), claimed()] {
            let payload = signed_claiming(DigestKind::NEWEST, claims, &key).payload();
            for i in 0..payload.len() {
                let mut bad = payload.clone();
                bad[i] ^= 1;
                let verdict = Signature::parse(&bad).and_then(|s| s.verify(&trusted));
                assert!(verdict.is_err(), "byte {i}");
            }
        }
    }
}
