//! Reads of an encrypted image (`--identity`, `--passphrase-file`): the
//! data key is unwrapped once at open, and each sealed section is opened
//! when it is loaded, after its checksums (and signature, with
//! `--trust`) are checked and before it is decompressed (see the
//! hoard-trust crate). Nothing else changes: blocks are found, fetched
//! and cached as in a plain image, so a remote image still fetches only
//! what is read.
//!
//! The structure is authenticated too: at open, the key section must be
//! the first section and every section of a type this build knows, and
//! each seal is bound to the number of blocks before its section as the
//! listing gives it, so a block retyped, dropped, added or moved fails
//! the seals of the blocks after it and of the metadata (which follows
//! the blocks), whatever checksums were recomputed.

use crate::error::{corrupt, Error, Result};
use crate::section::Section;
use hoard_format::section::{SectionHeader, SectionType};
use hoard_trust::encrypt::cipher::SectionPlace;
use hoard_trust::encrypt::{Identities, KeySection, SectionCipher, Wrapping};

/// The key of an encrypted image, and its data key when it was unwrapped.
#[derive(Debug)]
pub struct Encryption {
    wrapping: Wrapping,
    cipher: Option<SectionCipher>,
    /// For each section number, how many blocks come before it (what its
    /// seal is bound to besides its own header fields).
    blocks_before: Vec<u32>,
}

impl Encryption {
    /// The encryption of an image listed as `sections`, whose key
    /// section payload is `payload`, its data key unwrapped by one of
    /// `identities` if given (an image opened without them is read only
    /// as far as its plain sections go). An image whose listing is not
    /// one an encrypted image can have is refused.
    pub(crate) fn open(
        sections: &[Section],
        payload: &[u8],
        identities: Option<&Identities>,
    ) -> Result<Self> {
        let blocks_before = structure(sections)?;
        let section = KeySection::parse(payload).map_err(|e| Error::Corrupt(e.to_string()))?;
        let cipher = match identities {
            Some(ids) if !ids.is_empty() => Some(
                section
                    .unwrap(ids)
                    .map_err(|e| Error::Corrupt(e.to_string()))?,
            ),
            _ => None,
        };
        Ok(Encryption {
            wrapping: section.wrapping(),
            cipher,
            blocks_before,
        })
    }

    /// How the image's data key is wrapped: for how many recipients, or
    /// with a passphrase.
    pub fn wrapping(&self) -> Wrapping {
        self.wrapping
    }

    /// Whether the data key was unwrapped (the image can be read).
    pub fn is_unlocked(&self) -> bool {
        self.cipher.is_some()
    }

    /// The plain payload of the sealed section `header` describes.
    /// The buffer of `sealed` is decrypted in place when it is owned
    /// (a checked copy, a fetched range), copied once when borrowed.
    pub(crate) fn open_section(
        &self,
        header: &SectionHeader,
        sealed: std::borrow::Cow<'_, [u8]>,
    ) -> Result<Vec<u8>> {
        let cipher = self.cipher.as_ref().ok_or_else(|| {
            Error::Corrupt(format!(
                "the image is encrypted ({}): give --identity FILE or --passphrase-file FILE",
                self.wrapping
            ))
        })?;
        let number = header.number.unwrap_or_default();
        let blocks_before = *self
            .blocks_before
            .get(number as usize)
            .ok_or_else(|| corrupt!("section {number} is not in the image's listing"))?;
        let place = SectionPlace {
            number,
            kind: header.kind,
            compression: header.compression,
            blocks_before,
        };
        cipher
            .open(place, sealed.into_owned())
            .map_err(|e| Error::Corrupt(e.to_string()))
    }
}

/// Checks the listing of an encrypted image: its one key section first,
/// every section of a known type (one this build cannot tell apart from
/// a retyped block is refused); gives, for each section, the number of
/// blocks before it.
fn structure(sections: &[Section]) -> Result<Vec<u32>> {
    if sections.first().map(|s| s.header.kind) != Some(hoard_trust::encrypt::SECTION_TYPE) {
        return Err(corrupt!(
            "encrypted image: its key section is not its first section"
        ));
    }
    let mut blocks_before = Vec::with_capacity(sections.len());
    let mut blocks = 0u32;
    for (i, s) in sections.iter().enumerate() {
        let kind = s.header.kind;
        if !kind.is_known() {
            return Err(corrupt!(
                "encrypted image: section {i} has unknown type {}",
                kind.name()
            ));
        }
        if i > 0 && kind == hoard_trust::encrypt::SECTION_TYPE {
            return Err(corrupt!(
                "encrypted image: section {i} is a second key section"
            ));
        }
        blocks_before.push(blocks);
        if kind == SectionType::BLOCK {
            blocks = blocks.saturating_add(1);
        }
    }
    Ok(blocks_before)
}

/// Whether `first_bytes`, the start of the payload of an image's first
/// section, is a key section's: an encrypted image whose key section was
/// given another type, which must not be read as a plain image.
pub(crate) fn is_hidden_key(first_bytes: &[u8]) -> bool {
    KeySection::starts(first_bytes)
}
