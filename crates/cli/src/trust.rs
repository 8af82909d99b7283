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

/// The secret key in `path`, if given.
pub fn signing_key(path: Option<&Path>) -> Result<Option<Arc<SecretKey>>> {
    path.map(|p| SecretKey::load(p).map(Arc::new).context("cannot sign"))
        .transpose()
}
