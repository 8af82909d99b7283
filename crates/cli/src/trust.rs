//! Keys named on the command line: `--trust PUB` (and `HOARD_TRUST`) for
//! reading, `--sign KEY` for writing (see the hoard-trust crate).

use anyhow::{Context, Result};
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
