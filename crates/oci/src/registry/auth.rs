//! Who the client is to a registry: the credentials it may send, from
//! the environment or the docker/podman auth files, and the challenges
//! (`WWW-Authenticate`) a registry answers a request without them with.

use std::fmt;
use std::path::{Path, PathBuf};

use base64ct::{Base64, Encoding};

use crate::error::{Error, Result};

/// The environment variable naming the user to log in as.
pub const USER_VAR: &str = "HOARD_REGISTRY_USER";
/// The environment variable holding the password (or token) of
/// [`USER_VAR`]; both or neither must be set.
pub const PASSWORD_VAR: &str = "HOARD_REGISTRY_PASSWORD";

/// Largest auth file read.
const MAX_AUTH_FILE: u64 = 1 << 20;
/// Longest `WWW-Authenticate` header parsed.
const MAX_CHALLENGE: usize = 8 << 10;

/// A user name and password. Neither is ever printed: `Debug` shows the
/// user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({:?}, <hidden>)", self.user)
    }
}

impl Credentials {
    /// A user and a password.
    pub fn new(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.to_string(),
            password: password.to_string(),
        }
    }

    /// The value of an `Authorization: Basic` header.
    pub fn basic_header(&self) -> String {
        let pair = format!("{}:{}", self.user, self.password);
        format!("Basic {}", Base64::encode_string(pair.as_bytes()))
    }

    /// The credentials for `host` (`HOST[:PORT]`): from
    /// [`USER_VAR`]/[`PASSWORD_VAR`] when set, else from the first auth
    /// file with an entry for the host (`$REGISTRY_AUTH_FILE`,
    /// `$XDG_RUNTIME_DIR/containers/auth.json`,
    /// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`); `None`
    /// when there are none (the client is then anonymous).
    pub fn lookup(host: &str) -> Result<Option<Credentials>> {
        let user = std::env::var(USER_VAR).ok();
        let password = std::env::var(PASSWORD_VAR).ok();
        match (user, password) {
            (Some(user), Some(password)) => return Ok(Some(Credentials { user, password })),
            (None, None) => {}
            _ => {
                return Err(Error::Registry {
                    message: format!("{USER_VAR} and {PASSWORD_VAR} must be set together"),
                    transient: false,
                })
            }
        }
        for file in auth_files() {
            if let Some(found) = from_auth_file(&file, host)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

/// The auth files looked at, in order (those that exist are read).
fn auth_files() -> Vec<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut files = Vec::new();
    if let Some(file) = var("REGISTRY_AUTH_FILE") {
        files.push(PathBuf::from(file));
    }
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        files.push(Path::new(&dir).join("containers/auth.json"));
    }
    match (var("DOCKER_CONFIG"), var("HOME")) {
        (Some(dir), _) => files.push(Path::new(&dir).join("config.json")),
        (None, Some(home)) => files.push(Path::new(&home).join(".docker/config.json")),
        (None, None) => {}
    }
    files
}

/// The entry for `host` in the auth file `path` (`auths.HOST.auth`, the
/// Base64 of `user:password`); `None` when the file or the entry is not
/// there. Errors name the file, never its content.
fn from_auth_file(path: &Path, host: &str) -> Result<Option<Credentials>> {
    use std::io::Read;
    let bad = |why: &str| Error::Registry {
        message: format!("auth file {}: {why}", path.display()),
        transient: false,
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(&e.to_string())),
    };
    let mut text = String::new();
    file.take(MAX_AUTH_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(&e.to_string()))?;
    if text.len() as u64 > MAX_AUTH_FILE {
        return Err(bad("larger than 1 MiB"));
    }
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| bad("not valid JSON"))?;
    let Some(auths) = config.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let entry = auths
        .iter()
        .find(|(key, _)| auth_key_host(key) == host)
        .map(|(_, entry)| entry);
    let Some(encoded) = entry.and_then(|e| e.get("auth")).and_then(|a| a.as_str()) else {
        return Ok(None);
    };
    let decoded =
        Base64::decode_vec(encoded.trim()).map_err(|_| bad("an auth entry is not Base64"))?;
    let pair = String::from_utf8(decoded).map_err(|_| bad("an auth entry is not UTF-8"))?;
    let (user, password) = pair
        .split_once(':')
        .ok_or_else(|| bad("an auth entry is not user:password"))?;
    Ok(Some(Credentials::new(user, password)))
}

/// The `HOST[:PORT]` of an auth file's key, which may be a URL
/// (`https://host/v1/`).
fn auth_key_host(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

/// What a registry asks for in its `WWW-Authenticate` header.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Challenge {
    /// `Basic realm=…`: send the credentials with every request.
    Basic,
    /// `Bearer realm=…,service=…,scope=…`: get a token from `realm`.
    Bearer {
        /// The token server's URL.
        realm: String,
        /// The `service` to name to it, if any.
        service: Option<String>,
        /// The `scope` to ask for, if any.
        scope: Option<String>,
    },
}

impl Challenge {
    /// Parses the value of a `WWW-Authenticate` header: a scheme and
    /// comma-separated `key=value` or `key="quoted value"` parameters.
    /// `None` for an unknown scheme or a malformed header.
    pub fn parse(header: &str) -> Option<Challenge> {
        if header.len() > MAX_CHALLENGE {
            return None;
        }
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        let params = parse_params(rest)?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        if scheme.eq_ignore_ascii_case("basic") {
            Some(Challenge::Basic)
        } else if scheme.eq_ignore_ascii_case("bearer") {
            Some(Challenge::Bearer {
                realm: get("realm").filter(|r| !r.is_empty())?,
                service: get("service"),
                scope: get("scope"),
            })
        } else {
            None
        }
    }
}

/// `key=value` and `key="quoted \"value\""`, separated by commas.
fn parse_params(mut rest: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Some(params);
        }
        let (key, after) = rest.split_once('=')?;
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return None;
        }
        let after = after.trim_start();
        let value;
        if let Some(quoted) = after.strip_prefix('"') {
            let mut text = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i,
                    (_, '\\') => text.push(chars.next()?.1),
                    (_, c) => text.push(c),
                }
            };
            value = text;
            rest = &quoted[end + 1..];
        } else {
            let end = after.find(',').unwrap_or(after.len());
            value = after[..end].trim().to_string();
            rest = &after[end..];
        }
        params.push((key.to_string(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_challenges() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("reg".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            Challenge::parse(r#"bearer realm=http://127.0.0.1:1/t"#),
            Some(Challenge::Bearer {
                realm: "http://127.0.0.1:1/t".into(),
                service: None,
                scope: None,
            })
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="say \"hi\"""#),
            Some(Challenge::Basic)
        );
        for bad in [
            "",
            "Bearer",
            "Bearer service=x",
            r#"Bearer realm="unterminated"#,
            "Bearer =x",
            "Negotiate abc",
        ] {
            assert_eq!(Challenge::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn reads_auth_files() {
        let dir = std::env::temp_dir().join(format!("hoard-oci-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("auth.json");
        let entry = Base64::encode_string(b"me:se:cret");
        std::fs::write(
            &file,
            format!(r#"{{"auths":{{"https://reg.example:5000/v1/":{{"auth":"{entry}"}}}}}}"#),
        )
        .unwrap();
        let found = from_auth_file(&file, "reg.example:5000").unwrap().unwrap();
        assert_eq!(found, Credentials::new("me", "se:cret"));
        assert!(!format!("{found:?}").contains("cret"));
        assert_eq!(from_auth_file(&file, "other").unwrap(), None);
        assert_eq!(from_auth_file(&dir.join("none"), "x").unwrap(), None);
        std::fs::write(&file, "{not json").unwrap();
        assert!(from_auth_file(&file, "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
