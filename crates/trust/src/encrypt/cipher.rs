//! The data key of an encrypted image and the sealing of section
//! payloads with it.
//!
//! Each sealed payload is the ChaCha20-Poly1305 ciphertext of the
//! compressed payload followed by its 16-byte tag. The 96-bit nonce is
//! the section number (little-endian, then zeros): section numbers are
//! unique in an image and the data key is drawn at random for each image
//! written, so no nonce is used twice under one key. The associated data
//! is the section's type, compression and number and the number of
//! blocks before it, so a section cannot be moved, renumbered or given
//! another codec, and no section before it can be retyped, dropped or
//! added, without failing its tag: a block is bound to its place among
//! the blocks, and the metadata (after the blocks) to their count.

use crate::{Error, Result};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};
use hoard_format::section::{Compression, SectionType};
use zeroize::Zeroizing;

/// Bytes of the data key.
pub const KEY_SIZE: usize = 32;
/// Bytes a sealed payload adds: the Poly1305 tag.
pub const TAG_SIZE: usize = 16;

/// An image's data key, ready to seal or open its sections. The key is
/// zeroized when dropped and never printed.
pub struct SectionCipher {
    aead: ChaCha20Poly1305,
    key: Zeroizing<[u8; KEY_SIZE]>,
}

impl std::fmt::Debug for SectionCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SectionCipher(..)")
    }
}

/// Where a section payload belongs: what its seal is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionPlace {
    /// The section's number.
    pub number: u32,
    /// Its type.
    pub kind: SectionType,
    /// How its (plain) payload is compressed.
    pub compression: Compression,
    /// How many BLOCK sections come before it in the image: for a block,
    /// its block number.
    pub blocks_before: u32,
}

impl SectionPlace {
    fn nonce(&self) -> Nonce {
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&self.number.to_le_bytes());
        nonce.into()
    }

    fn associated_data(&self) -> [u8; 12] {
        let mut aad = [0u8; 12];
        aad[0..2].copy_from_slice(&self.kind.0.to_le_bytes());
        aad[2..4].copy_from_slice(&self.compression.0.to_le_bytes());
        aad[4..8].copy_from_slice(&self.number.to_le_bytes());
        aad[8..12].copy_from_slice(&self.blocks_before.to_le_bytes());
        aad
    }
}

impl SectionCipher {
    /// A new random data key from the operating system.
    pub fn generate() -> Result<Self> {
        let mut key = Zeroizing::new([0u8; KEY_SIZE]);
        getrandom::getrandom(key.as_mut())
            .map_err(|e| Error::Key(format!("no random numbers for a data key: {e}")))?;
        Ok(Self::from_key(key))
    }

    /// The cipher of data key `key`.
    pub fn from_key(key: Zeroizing<[u8; KEY_SIZE]>) -> Self {
        SectionCipher {
            aead: ChaCha20Poly1305::new(Key::from_slice(key.as_ref())),
            key,
        }
    }

    /// The data key itself, to be wrapped.
    pub(crate) fn key(&self) -> &[u8; KEY_SIZE] {
        &self.key
    }

    /// Seals `payload` in place (the tag is appended) for the section at
    /// `place`.
    pub fn seal(&self, place: SectionPlace, payload: &mut Vec<u8>) {
        let tag = self
            .aead
            .encrypt_in_place_detached(&place.nonce(), &place.associated_data(), payload)
            .expect("a section payload is far below ChaCha20's limit");
        payload.extend_from_slice(&tag);
    }

    /// Opens the sealed `payload` of the section at `place`, in place:
    /// the plain payload (the buffer, the tag cut off), or an error when
    /// the tag does not match (a changed byte, a moved section or another
    /// image's key).
    pub fn open(&self, place: SectionPlace, mut sealed: Vec<u8>) -> Result<Vec<u8>> {
        let bad = || {
            Error::Untrusted(format!(
                "{} section {} does not decrypt (damaged or changed)",
                place.kind.name(),
                place.number
            ))
        };
        let split = sealed.len().checked_sub(TAG_SIZE).ok_or_else(bad)?;
        let tag: [u8; TAG_SIZE] = sealed[split..].try_into().expect("TAG_SIZE bytes");
        sealed.truncate(split);
        self.aead
            .decrypt_in_place_detached(
                &place.nonce(),
                &place.associated_data(),
                &mut sealed,
                Tag::from_slice(&tag),
            )
            .map_err(|_| bad())?;
        Ok(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(number: u32) -> SectionPlace {
        SectionPlace {
            number,
            kind: SectionType::BLOCK,
            compression: Compression::ZSTD,
            blocks_before: number - 1,
        }
    }

    #[test]
    fn seals_and_opens() {
        let cipher = SectionCipher::generate().unwrap();
        let mut payload = b"some compressed bytes".to_vec();
        cipher.seal(place(3), &mut payload);
        assert_eq!(payload.len(), 21 + TAG_SIZE);
        assert_ne!(&payload[..21], b"some compressed bytes");
        assert_eq!(
            cipher.open(place(3), payload.clone()).unwrap(),
            b"some compressed bytes"
        );
    }

    #[test]
    fn another_place_key_or_byte_fails() {
        let cipher = SectionCipher::generate().unwrap();
        let mut payload = vec![0u8; 100];
        cipher.seal(place(3), &mut payload);
        assert!(cipher.open(place(4), payload.clone()).is_err());
        let other_kind = SectionPlace {
            kind: SectionType::METADATA_V2,
            ..place(3)
        };
        assert!(cipher.open(other_kind, payload.clone()).is_err());
        let other_codec = SectionPlace {
            compression: Compression::NONE,
            ..place(3)
        };
        assert!(cipher.open(other_codec, payload.clone()).is_err());
        let other_ordinal = SectionPlace {
            blocks_before: 1,
            ..place(3)
        };
        assert!(cipher.open(other_ordinal, payload.clone()).is_err());
        assert!(SectionCipher::generate()
            .unwrap()
            .open(place(3), payload.clone())
            .is_err());
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0x40;
            assert!(cipher.open(place(3), bad).is_err(), "byte {i}");
        }
        assert!(cipher.open(place(3), payload[..15].to_vec()).is_err());
    }
}
