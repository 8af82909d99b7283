//! Keys named on the command line: `--trust PUB` (and `HOARD_TRUST`) and
//! `--identity FILE` (and `HOARD_IDENTITY`) for reading, `--sign KEY` and
//! `--encrypt-to RECIPIENT` for writing, `--passphrase-file FILE` for
//! either (see the hoard-trust crate).

use anyhow::{Context, Result};
use hoard_trust::encrypt::{Identities, Recipients};
use hoard_trust::{SecretKey, TrustedKeys};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Public key files trusted by every command, separated by `:`.
pub const TRUST_ENV: &str = "HOARD_TRUST";

/// The keys in the files `--trust` names and in those of `HOARD_TRUST`;
/// `None` when neither names any (images are then read unverified).
pub fn trusted_keys(args: &[PathBuf]) -> Result<Option<TrustedKeys>> {
    let mut files = args.to_vec();
    if let Some(list) = std::env::var_os(TRUST_ENV) {
        files.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(TrustedKeys::load(&files)?))
}

/// The secret key in `path`, if given (this process then writes no core
/// dump: see [`no_core_dumps`]).
pub fn signing_key(path: Option<&Path>) -> Result<Option<Arc<SecretKey>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    no_core_dumps();
    let key = SecretKey::load(path).context("cannot sign")?;
    Ok(Some(Arc::new(key)))
}

/// Keeps a secret key held by this process out of core dumps (and from
/// other processes of the user attaching to read it): the process is made
/// non-dumpable before any key is read.
pub fn no_core_dumps() {
    // SAFETY: prctl with PR_SET_DUMPABLE takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Identity files used by every command, separated by `:`.
pub const IDENTITY_ENV: &str = "HOARD_IDENTITY";

/// The identities in the files `--identity` names and in those of
/// `HOARD_IDENTITY`, and the passphrase in `passphrase` (a file); `None`
/// when none is given (an encrypted image then opens only as far as
/// `hoard info` needs). This process then writes no core dump.
pub fn identities(files: &[PathBuf], passphrase: Option<&Path>) -> Result<Option<Arc<Identities>>> {
    let mut files = files.to_vec();
    if let Some(list) = std::env::var_os(IDENTITY_ENV) {
        files.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
    }
    if files.is_empty() && passphrase.is_none() {
        return Ok(None);
    }
    no_core_dumps();
    let mut identities = Identities::load(&files)?;
    if let Some(path) = passphrase {
        identities.add_passphrase(path)?;
    }
    Ok(Some(Arc::new(identities)))
}

/// Who an image is to be encrypted to: the recipients `--encrypt-to`
/// names, or the passphrase in `passphrase` (a file); `None` for a plain
/// image.
pub fn recipients(to: &[String], passphrase: Option<&Path>) -> Result<Option<Arc<Recipients>>> {
    let recipients = match (to.is_empty(), passphrase) {
        (true, None) => return Ok(None),
        (false, None) => Recipients::parse(to)?,
        (true, Some(path)) => {
            no_core_dumps();
            Recipients::passphrase(path)?
        }
        (false, Some(_)) => {
            anyhow::bail!("--encrypt-to and --passphrase-file cannot be used together")
        }
    };
    Ok(Some(Arc::new(recipients)))
}
