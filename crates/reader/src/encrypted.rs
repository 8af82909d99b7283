//! Reads of an encrypted image (`--identity`, `--passphrase-file`): the
//! data key is unwrapped once at open, and each sealed section is opened
//! when it is loaded, after its checksums (and signature, with
//! `--trust`) are checked and before it is decompressed (see the
//! hoard-trust crate). Nothing else changes: blocks are found, fetched
//! and cached as in a plain image, so a remote image still fetches only
//! what is read.

use crate::error::{Error, Result};
use hoard_format::section::SectionHeader;
use hoard_trust::encrypt::cipher::SectionPlace;
use hoard_trust::encrypt::{Identities, KeySection, SectionCipher, Wrapping};

/// The key of an encrypted image, and its data key when it was unwrapped.
#[derive(Debug)]
pub struct Encryption {
    wrapping: Wrapping,
    cipher: Option<SectionCipher>,
}

impl Encryption {
    /// The encryption of an image whose key section payload is `payload`,
    /// its data key unwrapped by one of `identities` if given (an image
    /// opened without them is read only as far as its plain sections go).
    pub(crate) fn open(payload: &[u8], identities: Option<&Identities>) -> Result<Self> {
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
        let place = SectionPlace {
            number: header.number.unwrap_or_default(),
            kind: header.kind,
            compression: header.compression,
        };
        cipher
            .open(place, sealed.into_owned())
            .map_err(|e| Error::Corrupt(e.to_string()))
    }
}
