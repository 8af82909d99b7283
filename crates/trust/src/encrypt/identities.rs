//! The secrets that open an encrypted image: age identity files (made by
//! `age-keygen`, one `AGE-SECRET-KEY-1…` a line), unencrypted OpenSSH
//! private keys (ed25519 or RSA), or a passphrase read from a file.
//!
//! Files are read into buffers zeroized when dropped; a file that others
//! may read is used with a warning; errors name the file, never its
//! contents.

use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// How an OpenSSH private key file starts (the PEM form too).
const SSH_PRIVATE_BEGIN: &str = "-----BEGIN ";

/// Identities to try on an image's wrapped data key.
#[derive(Default)]
pub struct Identities {
    list: Vec<Box<dyn age::Identity + Send + Sync>>,
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identities({})", self.list.len())
    }
}

impl Identities {
    /// The identities in `files` (age identity files or OpenSSH private
    /// keys).
    pub fn load(files: &[PathBuf]) -> Result<Self> {
        let mut identities = Identities::default();
        for path in files {
            identities.add_file(path)?;
        }
        Ok(identities)
    }

    /// The identities in `files` and, if given, the passphrase in the
    /// first line of `passphrase`; `None` when neither is given.
    pub fn given(files: &[PathBuf], passphrase: Option<&Path>) -> Result<Option<Self>> {
        if files.is_empty() && passphrase.is_none() {
            return Ok(None);
        }
        let mut identities = Identities::load(files)?;
        if let Some(path) = passphrase {
            identities.add_passphrase(path)?;
        }
        Ok(Some(identities))
    }

    /// Adds the identities in `path`.
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let text = crate::keys::read_key_file(path)?;
        crate::keys::warn_if_shared(path);
        self.add(&text, &format!("identity file '{}'", path.display()))
    }

    /// Adds the identities in `text`, the contents of an identity file
    /// (for tests and fuzzing: real ones come from [`Identities::add_file`]).
    pub fn add_text(&mut self, text: &str) -> Result<()> {
        self.add(text, "identity text")
    }

    /// Adds the identities in `text`, errors naming it `what`.
    fn add(&mut self, text: &str, what: &str) -> Result<()> {
        let named = |why: &str| Error::Key(format!("{what}: {why}"));
        if text.trim_start().starts_with(SSH_PRIVATE_BEGIN) {
            if !super::age_may_parse_ssh(text, true) {
                return Err(named("not an OpenSSH private key age can use"));
            }
            let identity = age::ssh::Identity::from_buffer(text.as_bytes(), None)
                .map_err(|_| named("not an OpenSSH private key age can use"))?;
            match identity {
                age::ssh::Identity::Unencrypted(_) => self.list.push(Box::new(identity)),
                age::ssh::Identity::Encrypted(_) => {
                    return Err(named(
                        "the SSH key is protected by a passphrase, which hoard cannot ask for (use an unencrypted copy or an age identity)",
                    ))
                }
                age::ssh::Identity::Unsupported(_) => {
                    return Err(named("SSH keys of this type are not supported (ssh-ed25519 and ssh-rsa are)"))
                }
            }
            return Ok(());
        }
        let file = age::IdentityFile::from_buffer(text.as_bytes())
            .map_err(|_| named("not an age identity file (AGE-SECRET-KEY-1… lines)"))?;
        let found = file
            .into_identities()
            .map_err(|_| named("holds identities hoard cannot use"))?;
        if found.is_empty() {
            return Err(named("holds no identities"));
        }
        self.list.extend(found);
        Ok(())
    }

    /// Adds the passphrase in the first line of `path`.
    pub fn add_passphrase(&mut self, path: &Path) -> Result<()> {
        let mut identity = age::scrypt::Identity::new(super::read_passphrase(path)?);
        identity.set_max_work_factor(super::SCRYPT_MAX_WORK_FACTOR);
        self.list.push(Box::new(identity));
        Ok(())
    }

    /// How many identities.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The identities, as age takes them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &dyn age::Identity> {
        self.list.iter().map(|i| i.as_ref() as &dyn age::Identity)
    }
}
