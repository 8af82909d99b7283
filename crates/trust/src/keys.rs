//! Ed25519 keys: hoard's text format and OpenSSH's.
//!
//! hoard's format (`hoard keygen -o NAME`), one key per line, `#` lines
//! are comments:
//!
//! ```text
//! NAME.pub: hoard-ed25519 BASE64(public key, 32 bytes) COMMENT
//! NAME.key: hoard-ed25519-secret BASE64(seed, 32 bytes | public key, 32 bytes)
//! ```
//!
//! The secret line carries the public key too, so a damaged or mistyped
//! secret is found (the seed must give that public key). Signing also
//! takes an unencrypted OpenSSH ed25519 private key, and `--trust` an
//! OpenSSH public key line (`ssh-ed25519 AAAA... comment`), as git's SSH
//! signing does. A public key file may hold several keys.
//!
//! Secrets are zeroized when dropped and never printed: [`SecretKey`] has
//! no `Debug`, and errors name the file, never its contents.

use crate::{Error, Result};
use base64ct::{Base64, Base64Unpadded, Encoding};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// The first word of a hoard public key line.
const PUBLIC_TAG: &str = "hoard-ed25519";
/// The first word of a hoard secret key line.
const SECRET_TAG: &str = "hoard-ed25519-secret";
/// The first word of an OpenSSH ed25519 public key line.
const SSH_TAG: &str = "ssh-ed25519";
/// The first line of an OpenSSH private key file.
const SSH_PRIVATE_BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";
/// The largest key file read.
const MAX_KEY_FILE: u64 = 1 << 20;

/// A secret signing key. Zeroized when dropped; never printed (`Debug`
/// shows its public half).
pub struct SecretKey(SigningKey);

/// A public key: who signed an image.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

/// The public keys an image may be signed by (`--trust`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

impl SecretKey {
    /// A new key from the operating system's random numbers.
    pub fn generate() -> Result<Self> {
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::getrandom(seed.as_mut())
            .map_err(|e| Error::Key(format!("no random numbers for a new key: {e}")))?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// The key whose secret is `seed` (for tests and fuzzing: real keys
    /// come from [`SecretKey::generate`]).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        SecretKey(SigningKey::from_bytes(seed))
    }

    /// Reads the secret key in `path`: hoard's format or an unencrypted
    /// OpenSSH ed25519 key. Warns (on standard error) when others than
    /// its owner may read the file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = read_key_file(path)?;
        warn_if_shared(path);
        Self::from_text(&text)
            .map_err(|why| Error::Key(format!("secret key '{}': {why}", path.display())))
    }

    /// Parses the contents of a secret key file (for tests and fuzzing:
    /// real keys come from [`SecretKey::load`]).
    pub fn parse(text: &str) -> Result<Self> {
        Self::from_text(text).map_err(|why| Error::Key(format!("secret key: {why}")))
    }

    /// A key in hoard's format or an OpenSSH one, from a file's text.
    fn from_text(text: &str) -> std::result::Result<Self, String> {
        if text.trim_start().starts_with(SSH_PRIVATE_BEGIN) {
            return Self::from_openssh(text);
        }
        Self::from_hoard_text(text)
    }

    fn from_openssh(text: &str) -> std::result::Result<Self, String> {
        let key = ssh_key::PrivateKey::from_openssh(text)
            .map_err(|_| "not a valid OpenSSH private key".to_string())?;
        if key.is_encrypted() {
            return Err(
                "it is protected by a passphrase; hoard takes unencrypted keys only".into(),
            );
        }
        let pair = key
            .key_data()
            .ed25519()
            .ok_or("not an ed25519 key (signing takes ed25519 keys only)")?;
        let seed = Zeroizing::new(pair.private.to_bytes());
        let signing = SigningKey::from_bytes(&seed);
        if signing.verifying_key().to_bytes() != pair.public.0 {
            return Err("its public half does not match its secret half".into());
        }
        Ok(SecretKey(signing))
    }

    fn from_hoard_text(text: &str) -> std::result::Result<Self, String> {
        let mut lines = key_lines(text);
        let line = lines.next().ok_or("no key in the file")?;
        let mut words = line.split_whitespace();
        if words.next() != Some(SECRET_TAG) {
            return Err(format!(
                "not a hoard secret key (`{SECRET_TAG} ...`) nor an OpenSSH private key"
            ));
        }
        let encoded = words.next().ok_or("the key is missing")?;
        let mut pair = Zeroizing::new([0u8; 64]);
        let decoded =
            Base64::decode(encoded, pair.as_mut()).map_err(|_| "the key is not valid Base64")?;
        if decoded.len() != 64 {
            return Err("the key has the wrong length".into());
        }
        let seed: Zeroizing<[u8; 32]> = Zeroizing::new(pair[..32].try_into().expect("32 bytes"));
        let signing = SigningKey::from_bytes(&seed);
        if signing.verifying_key().to_bytes()[..] != pair[32..] {
            return Err("the key is damaged (its public half does not match)".into());
        }
        Ok(SecretKey(signing))
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }

    /// The key in hoard's secret key format.
    fn to_hoard_text(&self) -> Zeroizing<String> {
        let mut pair = Zeroizing::new([0u8; 64]);
        pair[..32].copy_from_slice(self.0.as_bytes());
        pair[32..].copy_from_slice(self.0.verifying_key().as_bytes());
        let encoded = Zeroizing::new(Base64::encode_string(pair.as_ref()));
        Zeroizing::new(format!(
            "# hoard secret signing key (Ed25519): keep it private\n{SECRET_TAG} {}\n",
            encoded.as_str()
        ))
    }

    /// Writes this key to `NAME.key` (mode 0600) and its public half to
    /// `NAME.pub`, each complete or not at all; existing files are kept
    /// unless `force`. Returns the two paths.
    pub fn write_pair(
        &self,
        name: &Path,
        comment: &str,
        force: bool,
    ) -> Result<(PathBuf, PathBuf)> {
        let secret = with_suffix(name, "key");
        let public = with_suffix(name, "pub");
        let public_text = format!("{}\n", self.public().to_hoard_text(comment));
        write_file(&public, public_text.as_bytes(), force)?;
        write_file(&secret, self.to_hoard_text().as_bytes(), force)?;
        Ok((secret, public))
    }
}

impl PublicKey {
    /// A public key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self> {
        let key = VerifyingKey::from_bytes(bytes)
            .map_err(|_| Error::Key("not a valid Ed25519 public key".into()))?;
        if key.is_weak() {
            return Err(Error::Key("a weak Ed25519 public key".into()));
        }
        Ok(PublicKey(key))
    }

    /// The key's 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Parses one key line: `hoard-ed25519 BASE64 [comment]` or
    /// `ssh-ed25519 BASE64 [comment]`.
    pub fn parse_line(line: &str) -> Result<Self> {
        let mut words = line.split_whitespace();
        match words.next() {
            Some(PUBLIC_TAG) => {
                let encoded = words
                    .next()
                    .ok_or_else(|| Error::Key("the key is missing".into()))?;
                let mut bytes = [0u8; 32];
                let decoded = Base64::decode(encoded, &mut bytes)
                    .map_err(|_| Error::Key("the key is not valid Base64".into()))?;
                if decoded.len() != 32 {
                    return Err(Error::Key("the key has the wrong length".into()));
                }
                Self::from_bytes(&bytes)
            }
            Some(SSH_TAG) => {
                let key = ssh_key::PublicKey::from_openssh(line.trim())
                    .map_err(|_| Error::Key("not a valid OpenSSH public key".into()))?;
                let ed = key
                    .key_data()
                    .ed25519()
                    .ok_or_else(|| Error::Key("not an ed25519 key".into()))?;
                Self::from_bytes(&ed.0)
            }
            _ => Err(Error::Key(format!(
                "not a public key line (`{PUBLIC_TAG} ...` or `{SSH_TAG} ...`)"
            ))),
        }
    }

    /// The key as a hoard public key line.
    pub fn to_hoard_text(&self, comment: &str) -> String {
        let line = format!("{PUBLIC_TAG} {}", Base64::encode_string(self.0.as_bytes()));
        match comment.trim() {
            "" => line,
            c => format!("{line} {c}"),
        }
    }

    /// The key's fingerprint as OpenSSH prints it (`ssh-keygen -l`):
    /// `SHA256:` and the unpadded Base64 of the SHA-256 of its SSH wire
    /// encoding, the same for a key in either format.
    pub fn fingerprint(&self) -> String {
        let mut wire = Vec::with_capacity(51);
        wire.extend_from_slice(&(SSH_TAG.len() as u32).to_be_bytes());
        wire.extend_from_slice(SSH_TAG.as_bytes());
        wire.extend_from_slice(&32u32.to_be_bytes());
        wire.extend_from_slice(self.0.as_bytes());
        format!(
            "SHA256:{}",
            Base64Unpadded::encode_string(&sha2::Sha256::digest(&wire))
        )
    }

    /// Whether `signature` is this key's signature of `message` (strict
    /// Ed25519: no malleable signatures).
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        self.0.verify_strict(message, &signature).is_ok()
    }
}

/// Names the key by its public half only.
impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey(public {})", self.public().fingerprint())
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl TrustedKeys {
    /// The keys in these public key files (every key line of each).
    pub fn load(paths: &[PathBuf]) -> Result<Self> {
        let mut keys = Vec::new();
        for path in paths {
            let text = read_key_file(path)?;
            let before = keys.len();
            for line in key_lines(&text) {
                let key = PublicKey::parse_line(line).map_err(|e| {
                    Error::Key(format!("public key file '{}': {e}", path.display()))
                })?;
                keys.push(key);
            }
            if keys.len() == before {
                return Err(Error::Key(format!(
                    "public key file '{}' holds no key",
                    path.display()
                )));
            }
        }
        Ok(TrustedKeys(keys))
    }

    /// These keys.
    pub fn from_keys(keys: Vec<PublicKey>) -> Self {
        TrustedKeys(keys)
    }

    /// Whether `key` is one of them.
    pub fn contains(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The lines of a key file that are not blank or comments.
fn key_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The text of a key file, zeroized when dropped.
pub(crate) fn read_key_file(path: &Path) -> Result<Zeroizing<String>> {
    let io =
        |e: std::io::Error| Error::Io(format!("cannot read key file '{}': {e}", path.display()));
    let file = std::fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() > MAX_KEY_FILE {
        return Err(Error::Key(format!(
            "key file '{}' is too large",
            path.display()
        )));
    }
    let mut bytes = Zeroizing::new(Vec::new());
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_KEY_FILE), &mut bytes)
        .map_err(io)?;
    match std::str::from_utf8(&bytes) {
        Ok(text) => Ok(Zeroizing::new(text.to_string())),
        Err(_) => Err(Error::Key(format!(
            "key file '{}' is not text",
            path.display()
        ))),
    }
}

/// Warns when users other than the owner may read or write the secret
/// key file at `path`.
pub(crate) fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "hoard: warning: secret key file '{}' is accessible by others (mode {:o}; chmod 600 it)",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
}

/// `name` with `.suffix` appended.
fn with_suffix(name: &Path, suffix: &str) -> PathBuf {
    let mut s = name.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// Writes `bytes` to a private temporary file beside `path`, then renames
/// it to `path` (mode 0600; the caller widens it for public keys).
fn write_file(path: &Path, bytes: &[u8], force: bool) -> Result<()> {
    let io = |e: std::io::Error| Error::Io(format!("cannot write '{}': {e}", path.display()));
    if !force && path.symlink_metadata().is_ok() {
        return Err(Error::Io(format!(
            "'{}' already exists (use -f to overwrite)",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".hoard-key-")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(io)?;
    if path.extension().is_some_and(|e| e == "pub") {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(io)?;
    }
    let persisted = if force {
        tmp.persist(path).map(drop)
    } else {
        tmp.persist_noclobber(path).map(drop)
    };
    persisted.map_err(|e| io(e.error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_round_trips_and_signs() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate().unwrap();
        let (secret, public) = key
            .write_pair(&dir.path().join("k"), "test key", false)
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let loaded = SecretKey::load(&secret).unwrap();
        let trusted = TrustedKeys::load(&[public]).unwrap();
        assert!(trusted.contains(&loaded.public()));
        let sig = loaded.sign(b"message");
        assert!(key.public().verifies(b"message", &sig));
        assert!(!key.public().verifies(b"messagf", &sig));
        assert!(key.write_pair(&dir.path().join("k"), "", false).is_err());
    }

    #[test]
    fn damaged_secret_is_refused_without_showing_it() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate().unwrap();
        let text = key.to_hoard_text().to_string();
        let encoded = text.lines().last().unwrap().split(' ').nth(1).unwrap();
        let mut damaged = encoded.as_bytes().to_vec();
        damaged[3] = if damaged[3] == b'A' { b'B' } else { b'A' };
        let damaged = String::from_utf8(damaged).unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, format!("{SECRET_TAG} {damaged}\n")).unwrap();
        let e = SecretKey::load(&path).err().unwrap().to_string();
        assert!(e.contains("bad.key") && e.contains("damaged"), "{e}");
        assert!(!e.contains(&damaged[..8]), "{e}");
        assert!(!format!("{key:?}").contains(&encoded[..8]));
    }
}
