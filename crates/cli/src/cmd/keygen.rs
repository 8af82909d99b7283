//! `hoard keygen`: a new Ed25519 key pair for signing images.

use crate::args::KeygenArgs;
use anyhow::Result;
use hoard_trust::SecretKey;

/// Writes NAME.key and NAME.pub; returns the exit code.
pub fn run(args: &KeygenArgs) -> Result<u8> {
    crate::trust::no_core_dumps();
    let key = SecretKey::generate()?;
    let comment = args.comment.clone().unwrap_or_else(default_comment);
    let (secret, public) = key.write_pair(&args.name, &comment, args.force)?;
    println!(
        "{}: secret key (keep it private)\n{}: public key {}",
        secret.display(),
        public.display(),
        key.public().fingerprint()
    );
    Ok(0)
}

/// `user@host`, as ssh-keygen comments its keys.
fn default_comment() -> String {
    let user = std::env::var("USER").unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    match (user.as_str(), host.trim()) {
        ("", _) | (_, "") => String::new(),
        (user, host) => format!("{user}@{host}"),
    }
}
