//! Encrypted images: every section but the section index and hoard's own
//! sections is sealed with ChaCha20-Poly1305 under a random 256-bit data
//! key, and the data key is wrapped with age for the image's recipients.
//!
//! * [`cipher`] — the data key and the sealing of one section payload
//!   (nonce from the section number, the section's header fields as
//!   associated data).
//! * [`recipients`] — who an image is encrypted to (`--encrypt-to`,
//!   `--passphrase-file`).
//! * [`identities`] — the secrets that open it (`--identity`,
//!   `--passphrase-file`).
//! * [`key_section`] — the `HOARD_KEY` section: the data key as an age
//!   file, and how many recipients it names.

pub mod cipher;
pub mod identities;
pub mod key_section;
pub mod recipients;

pub use cipher::SectionCipher;
pub use identities::Identities;
pub use key_section::{KeySection, Wrapping};
pub use recipients::Recipients;

use hoard_format::section::SectionType;

/// Whether OpenSSH key text (a private key when `private`, else a public
/// key line) may be handed to age: age 0.12's SSH parser panics on an
/// RSA integer of zero bytes only, which ssh-key's parser refuses as
/// non-canonical. Keys of a type ssh-key does not know are left to age,
/// which says it does not support them.
pub(crate) fn age_may_parse_ssh(text: &str, private: bool) -> bool {
    let parsed = match private {
        true => ssh_key::PrivateKey::from_openssh(text).map(drop),
        false => ssh_key::PublicKey::from_openssh(text).map(drop),
    };
    match parsed {
        Ok(()) => true,
        Err(e) => matches!(
            e,
            ssh_key::Error::AlgorithmUnknown | ssh_key::Error::AlgorithmUnsupported { .. }
        ),
    }
}

/// The section type of the wrapped data key.
pub const SECTION_TYPE: SectionType = SectionType::HOARD_KEY;

/// The scrypt work factor (log2 of N) a passphrase is wrapped with: age's
/// own default (256 MiB and about a second), fixed rather than timed on
/// the machine, so an image made on an idle machine opens on a busy one.
pub const SCRYPT_WORK_FACTOR: u8 = 18;

/// The largest scrypt work factor an image's passphrase may ask for when
/// it is opened (1 GiB): a hostile image cannot make hoard spend more.
pub const SCRYPT_MAX_WORK_FACTOR: u8 = 20;

/// Whether sections of `kind` are sealed in an encrypted image: all but
/// the section index (which only says where sections are) and hoard's
/// own sections (key, signature, recovery data), which a reader needs
/// before it has the key.
pub fn is_sealed(kind: SectionType) -> bool {
    !matches!(
        kind,
        SectionType::SECTION_INDEX
            | SectionType::HOARD_KEY
            | SectionType::HOARD_SIGNATURE
            | SectionType::HOARD_RECOVERY
    )
}

/// Reads a passphrase file: its first line (the trailing newline
/// dropped), zeroized when dropped. Warns when others may read the file.
pub(crate) fn read_passphrase(path: &std::path::Path) -> crate::Result<age::secrecy::SecretString> {
    let text = crate::keys::read_key_file(path)?;
    crate::keys::warn_if_shared(path);
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err(crate::Error::Key(format!(
            "passphrase file '{}' is empty",
            path.display()
        )));
    }
    Ok(age::secrecy::SecretString::from(line.to_string()))
}
