//! Who an image is encrypted to: age recipients (`age1…`), OpenSSH
//! public keys (`ssh-ed25519 …`, `ssh-rsa …`), files of either (one a
//! line, `#` lines are comments, as `age -R` reads them), or a
//! passphrase read from a file (age's scrypt recipient, which must be
//! alone).

use crate::{Error, Result};
use std::path::Path;

/// The largest recipients file read.
const MAX_RECIPIENTS_FILE: u64 = 1 << 20;

/// The recipients of an image's data key.
pub struct Recipients {
    list: Vec<Box<dyn age::Recipient + Send + Sync>>,
    passphrase: bool,
}

impl std::fmt::Debug for Recipients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.passphrase {
            true => f.write_str("Recipients(passphrase)"),
            false => write!(f, "Recipients({})", self.list.len()),
        }
    }
}

impl Recipients {
    /// The recipients named by `args`: each a recipient (`age1…`,
    /// `ssh-ed25519 …`, `ssh-rsa …`) or a file of them.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut list = Vec::new();
        for arg in args {
            if let Some(r) = parse_one(arg.trim()) {
                list.push(r.map_err(|why| Error::Key(format!("recipient '{arg}': {why}")))?);
                continue;
            }
            let path = Path::new(arg);
            if !path.exists() {
                return Err(Error::Key(format!(
                    "recipient '{arg}' is neither an age or SSH public key nor a file"
                )));
            }
            list.extend(from_file(path)?);
        }
        if list.is_empty() {
            return Err(Error::Key("no recipients given".into()));
        }
        Ok(Recipients {
            list,
            passphrase: false,
        })
    }

    /// The recipients in `text`, the contents of a recipients file (for
    /// tests and fuzzing: real ones come from [`Recipients::parse`]).
    pub fn from_text(text: &str) -> Result<Self> {
        let list = from_lines(text).map_err(|why| Error::Key(format!("recipients: {why}")))?;
        Ok(Recipients {
            list,
            passphrase: false,
        })
    }

    /// A passphrase, read from the first line of `path`.
    pub fn passphrase(path: &Path) -> Result<Self> {
        let mut recipient = age::scrypt::Recipient::new(super::read_passphrase(path)?);
        recipient.set_work_factor(super::SCRYPT_WORK_FACTOR);
        Ok(Recipients {
            list: vec![Box::new(recipient)],
            passphrase: true,
        })
    }

    /// How many recipients (1 for a passphrase).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none (never, once made).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The recipients, as age takes them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &dyn age::Recipient> {
        self.list.iter().map(|r| r.as_ref() as &dyn age::Recipient)
    }
}

/// One recipient given as text; `None` when it is not one.
fn parse_one(
    text: &str,
) -> Option<std::result::Result<Box<dyn age::Recipient + Send + Sync>, String>> {
    if text.starts_with("age1") {
        return Some(
            text.parse::<age::x25519::Recipient>()
                .map(|r| Box::new(r) as _)
                .map_err(|e| e.to_string()),
        );
    }
    if text.starts_with("ssh-") {
        if !super::age_may_parse_ssh(text, false) {
            return Some(Err("not a valid SSH public key".into()));
        }
        return Some(
            text.parse::<age::ssh::Recipient>()
                .map(|r| Box::new(r) as _)
                .map_err(|e| match e {
                    age::ssh::ParseRecipientKeyError::Unsupported(kind) => {
                        format!("SSH keys of type {kind} are not supported (ssh-ed25519 and ssh-rsa are)")
                    }
                    _ => "not a valid SSH public key".into(),
                }),
        );
    }
    None
}

/// The recipients in a file, one a line.
fn from_file(path: &Path) -> Result<Vec<Box<dyn age::Recipient + Send + Sync>>> {
    let named = |why: String| Error::Key(format!("recipients file '{}': {why}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| named(e.to_string()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_RECIPIENTS_FILE),
        &mut text,
    )
    .map_err(|e| named(e.to_string()))?;
    from_lines(&text).map_err(named)
}

/// The recipients in the text of a recipients file, one a line (blank
/// lines and `#` comments skipped).
fn from_lines(
    text: &str,
) -> std::result::Result<Vec<Box<dyn age::Recipient + Send + Sync>>, String> {
    let mut list = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_one(line) {
            Some(r) => list.push(r.map_err(|why| format!("line {}: {why}", n + 1))?),
            None => return Err(format!("line {} is not an age or SSH public key", n + 1)),
        }
    }
    if list.is_empty() {
        return Err("holds no recipients".into());
    }
    Ok(list)
}
