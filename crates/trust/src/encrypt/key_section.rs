//! The `HOARD_KEY` section: an encrypted image's data key, wrapped with
//! age for its recipients. It is the image's first section (number 0),
//! listed in the section index, uncompressed and not sealed. Payload:
//!
//! ```text
//! "HOARDKEY" | layout version 2 | cipher 1 (ChaCha20-Poly1305) | 6 zero bytes
//!   | an age file (age-encryption.org/v1) whose plaintext is the 32-byte data key
//! ```
//!
//! The age file is a genuine one: `age -d -i IDENTITY` decrypts it. Its
//! header lists one stanza per recipient (`-> X25519 …`, `-> ssh-ed25519
//! …`, `-> scrypt …` for a passphrase), which is how [`KeySection`] tells
//! how an image is encrypted without a key.
//!
//! Layout version 2 binds each sealed section to the number of blocks
//! before it (see [`super::cipher`]); version 1, written by hoard before
//! that, bound only the section's own number, type and codec, so a
//! retyped block shifted the blocks after it unnoticed. Images of
//! version 1 are refused with a message saying so.

use super::{Identities, Recipients, SectionCipher};
use crate::{Error, Result};
use std::io::{Read, Write};
use zeroize::Zeroizing;

/// Starts the payload.
const MAGIC: &[u8; 8] = b"HOARDKEY";
/// The payload layout version.
const LAYOUT_VERSION: u8 = 2;
/// The layout version of images whose seals do not cover their
/// structure: no longer read.
const UNBOUND_LAYOUT_VERSION: u8 = 1;
/// The section cipher: ChaCha20-Poly1305 (see [`super::cipher`]).
const CIPHER_CHACHA20_POLY1305: u8 = 1;
/// Payload bytes before the age file.
const HEAD_SIZE: usize = 16;
/// The largest age file accepted (thousands of recipients).
const MAX_AGE_FILE: usize = 1 << 20;
/// The first line of an age file.
const AGE_VERSION_LINE: &[u8] = b"age-encryption.org/v1";

/// How an image's data key is wrapped, as its key section says (not
/// authenticated: the age header's MAC is checked only with a key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapping {
    /// For this many recipients (age or SSH public keys).
    Recipients(usize),
    /// With a passphrase.
    Passphrase,
}

impl std::fmt::Display for Wrapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wrapping::Passphrase => f.write_str("with a passphrase"),
            Wrapping::Recipients(1) => f.write_str("for 1 recipient"),
            Wrapping::Recipients(n) => write!(f, "for {n} recipients"),
        }
    }
}

/// A parsed key section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySection {
    age_file: Vec<u8>,
    wrapping: Wrapping,
}

impl KeySection {
    /// Wraps the data key of `cipher` for `recipients`.
    pub fn wrap(cipher: &SectionCipher, recipients: &Recipients) -> Result<Self> {
        let failed =
            |e: &dyn std::fmt::Display| Error::Key(format!("cannot wrap the data key: {e}"));
        let encryptor =
            age::Encryptor::with_recipients(recipients.iter()).map_err(|e| failed(&e))?;
        let mut age_file = Vec::new();
        let mut writer = encryptor
            .wrap_output(&mut age_file)
            .map_err(|e| failed(&e))?;
        writer.write_all(cipher.key()).map_err(|e| failed(&e))?;
        writer.finish().map_err(|e| failed(&e))?;
        let wrapping = wrapping(&age_file).map_err(|e| failed(&e))?;
        Ok(KeySection { age_file, wrapping })
    }

    /// The section payload.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_SIZE + self.age_file.len());
        out.extend_from_slice(MAGIC);
        out.push(LAYOUT_VERSION);
        out.push(CIPHER_CHACHA20_POLY1305);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&self.age_file);
        out
    }

    /// Whether `bytes` (the first bytes of a section payload, any type)
    /// start as a key section's do: how a key section whose type was
    /// changed, to have its image read as a plain one, is told.
    pub fn starts(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }

    /// Decodes a key section's payload (read from an image: any bytes).
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::Malformed(format!("key section: {why}"));
        if payload.len() < HEAD_SIZE || &payload[..8] != MAGIC {
            return Err(bad("not a hoard key section"));
        }
        if payload[8] == UNBOUND_LAYOUT_VERSION {
            return Err(bad(
                "layout version 1, whose seals do not cover the image's structure, is no longer read: decrypt it with the hoard that wrote it and encrypt it again",
            ));
        }
        if payload[8] != LAYOUT_VERSION || payload[10..16] != [0; 6] {
            return Err(bad("unknown layout version (made by a newer hoard?)"));
        }
        if payload[9] != CIPHER_CHACHA20_POLY1305 {
            return Err(bad("unknown cipher (made by a newer hoard?)"));
        }
        let age_file = &payload[HEAD_SIZE..];
        if age_file.len() > MAX_AGE_FILE {
            return Err(bad("too large"));
        }
        let wrapping = wrapping(age_file).map_err(|why| bad(&why))?;
        Ok(KeySection {
            age_file: age_file.to_vec(),
            wrapping,
        })
    }

    /// How the data key is wrapped.
    pub fn wrapping(&self) -> Wrapping {
        self.wrapping
    }

    /// The wrapped data key, an age file.
    pub fn age_file(&self) -> &[u8] {
        &self.age_file
    }

    /// The data key, unwrapped by one of `identities`.
    pub fn unwrap(&self, identities: &Identities) -> Result<SectionCipher> {
        let decryptor = age::Decryptor::new_buffered(&self.age_file[..])
            .map_err(|_| Error::Malformed("key section: its age file is damaged".into()))?;
        let mut reader = decryptor.decrypt(identities.iter()).map_err(|e| {
            Error::Untrusted(match (e, self.wrapping) {
                (age::DecryptError::ExcessiveWork { .. }, _) => {
                    "the image's passphrase needs more scrypt work than allowed".into()
                }
                (_, Wrapping::Passphrase) => {
                    "wrong passphrase (or --identity given where the image is encrypted with a passphrase)".into()
                }
                (_, wrapping) => format!(
                    "no identity given opens this image (encrypted {wrapping})"
                ),
            })
        })?;
        let mut key = Zeroizing::new([0u8; super::cipher::KEY_SIZE]);
        let mut rest = Zeroizing::new(Vec::new());
        reader
            .read_exact(key.as_mut())
            .and_then(|_| reader.read_to_end(&mut rest))
            .ok()
            .filter(|&n| n == 0)
            .ok_or_else(|| {
                Error::Malformed("key section: the wrapped data key is damaged".into())
            })?;
        Ok(SectionCipher::from_key(key))
    }
}

/// How the age file `age_file` wraps its key, from its header's stanza
/// lines (`-> TAG ARGS…`, grease stanzas left out) up to its MAC line.
fn wrapping(age_file: &[u8]) -> std::result::Result<Wrapping, String> {
    let mut lines = age_file.split(|&b| b == b'\n');
    if lines.next() != Some(AGE_VERSION_LINE) {
        return Err("its wrapped key is not an age file".into());
    }
    let mut count = 0usize;
    let mut passphrase = false;
    for line in lines {
        if line.starts_with(b"--- ") {
            return match (count, passphrase) {
                (0, _) => Err("its age file names no recipient".into()),
                (1, true) => Ok(Wrapping::Passphrase),
                (_, true) => Err("its age file mixes a passphrase with recipients".into()),
                (n, false) => Ok(Wrapping::Recipients(n)),
            };
        }
        let Some(stanza) = line.strip_prefix(b"-> ") else {
            continue;
        };
        let tag = stanza.split(|&b| b == b' ').next().unwrap_or_default();
        if tag.ends_with(b"-grease") {
            continue;
        }
        passphrase |= tag == b"scrypt";
        count += 1;
    }
    Err("its age file has no header end".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::secrecy::ExposeSecret;

    fn identity_file(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
        let identity = age::x25519::Identity::generate();
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!("# test\n{}\n", identity.to_string().expose_secret()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        (path, identity.to_public().to_string())
    }

    #[test]
    fn wraps_parses_and_unwraps() {
        let dir = tempfile::tempdir().unwrap();
        let (id, recipient) = identity_file(dir.path(), "a");
        let (_, other) = identity_file(dir.path(), "b");
        let recipients = Recipients::parse(&[recipient, other]).unwrap();
        let cipher = SectionCipher::generate().unwrap();
        let section = KeySection::wrap(&cipher, &recipients).unwrap();
        let parsed = KeySection::parse(&section.payload()).unwrap();
        assert_eq!(parsed.wrapping(), Wrapping::Recipients(2));
        let unwrapped = parsed.unwrap(&Identities::load(&[id]).unwrap()).unwrap();
        assert_eq!(unwrapped.key(), cipher.key());
    }

    #[test]
    fn the_unbound_layout_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (_, recipient) = identity_file(dir.path(), "a");
        let mut payload = KeySection::wrap(
            &SectionCipher::generate().unwrap(),
            &Recipients::parse(&[recipient]).unwrap(),
        )
        .unwrap()
        .payload();
        assert!(KeySection::starts(&payload));
        payload[8] = 1;
        let e = KeySection::parse(&payload).unwrap_err().to_string();
        assert!(e.contains("layout version 1"), "{e}");
    }

    #[test]
    fn a_wrong_identity_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_, recipient) = identity_file(dir.path(), "a");
        let section = KeySection::wrap(
            &SectionCipher::generate().unwrap(),
            &Recipients::parse(&[recipient]).unwrap(),
        )
        .unwrap();
        let (wrong, _) = identity_file(dir.path(), "b");
        let e = section
            .unwrap(&Identities::load(&[wrong]).unwrap())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "no identity given opens this image (encrypted for 1 recipient)"
        );
    }

    #[test]
    fn truncated_or_changed_payloads_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (id, recipient) = identity_file(dir.path(), "a");
        let identities = Identities::load(&[id]).unwrap();
        let payload = KeySection::wrap(
            &SectionCipher::generate().unwrap(),
            &Recipients::parse(&[recipient]).unwrap(),
        )
        .unwrap()
        .payload();
        for len in 0..payload.len() {
            if let Ok(s) = KeySection::parse(&payload[..len]) {
                assert!(s.unwrap(&identities).is_err(), "length {len}");
            }
        }
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 1;
            if let Ok(s) = KeySection::parse(&bad) {
                assert!(s.unwrap(&identities).is_err(), "byte {i}");
            }
        }
    }
}
