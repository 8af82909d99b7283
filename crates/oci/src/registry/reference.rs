//! `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]`: which registry, repository
//! and image a name means.
//!
//! The host is always written out (no default registry, no `library/`
//! prefix): a name means one server, whatever the machine's configuration.

use std::fmt;

use crate::digest::Digest;
use crate::error::{Error, Result};

/// The scheme that names registry images.
pub const SCHEME: &str = "docker://";

/// Longest repository name the distribution spec lets registries refuse
/// beyond (host and path together).
const MAX_NAME: usize = 255;

/// A tag when none is given.
const DEFAULT_TAG: &str = "latest";

/// One image in one registry repository.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ImageRef {
    /// `HOST[:PORT]`, as written (`[::1]:5000` for IPv6).
    pub host: String,
    /// The repository: lowercase path components.
    pub repository: String,
    /// The tag or digest.
    pub target: Target,
}

/// What in a repository a reference names.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Target {
    /// A tag, which the registry resolves.
    Tag(String),
    /// A digest, which the manifest fetched is checked against.
    Digest(Digest),
}

impl Target {
    /// The reference as the distribution API takes it in a manifest URL.
    pub fn as_reference(&self) -> String {
        match self {
            Target::Tag(tag) => tag.clone(),
            Target::Digest(digest) => digest.to_string(),
        }
    }
}

impl ImageRef {
    /// Parses `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]` (the tag defaults
    /// to `latest`).
    pub fn parse(url: &str) -> Result<ImageRef> {
        let bad = |why: &str| Error::Invalid {
            what: "registry reference",
            why: format!("{why} in {:?}", shown(url)),
        };
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("not of the form docker://HOST/REPO[:TAG|@DIGEST]"))?;
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the host"))?;
        if !valid_host(host) {
            return Err(bad("bad host"));
        }
        let (name, target) = if let Some((name, digest)) = path.split_once('@') {
            let digest = Digest::parse(digest).map_err(|_| bad("bad digest"))?;
            (name, Target::Digest(digest))
        } else {
            // A colon after the last slash starts the tag.
            let last = path.rfind('/').map_or(0, |i| i + 1);
            match path[last..].find(':') {
                Some(i) => {
                    let tag = &path[last + i + 1..];
                    if !valid_tag(tag) {
                        return Err(bad("bad tag"));
                    }
                    (&path[..last + i], Target::Tag(tag.to_string()))
                }
                None => (path, Target::Tag(DEFAULT_TAG.to_string())),
            }
        };
        if !valid_repository(name) || host.len() + 1 + name.len() > MAX_NAME {
            return Err(bad("bad repository name"));
        }
        Ok(ImageRef {
            host: host.to_string(),
            repository: name.to_string(),
            target,
        })
    }

    /// Whether the host is this machine, where plain HTTP is allowed.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }
}

/// Whether `HOST[:PORT]` is this machine: `localhost`, `127.0.0.0/8` or
/// `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => name.eq_ignore_ascii_case("localhost"),
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = match self.target {
            Target::Tag(_) => ':',
            Target::Digest(_) => '@',
        };
        write!(
            f,
            "{SCHEME}{}/{}{sep}{}",
            self.host,
            self.repository,
            self.target.as_reference()
        )
    }
}

/// At most 200 characters of a name, for an error message.
fn shown(text: &str) -> String {
    text.chars().take(200).collect()
}

/// `NAME[:PORT]` or `[IPV6][:PORT]`: letters, digits, dots and dashes.
fn valid_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => {
                if addr.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                (None, rest)
            }
            None => return false,
        },
        None => match host.find(':') {
            Some(i) => (Some(&host[..i]), &host[i..]),
            None => (Some(host), ""),
        },
    };
    let name_ok = name.is_none_or(|n| {
        !n.is_empty()
            && n.len() <= 253
            && n.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    let port_ok = match port.strip_prefix(':') {
        Some(p) => !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok_and(|p| p > 0),
        None => port.is_empty(),
    };
    name_ok && port_ok
}

/// Path components of `[a-z0-9]+` runs joined by separators, as the
/// distribution spec's name grammar has it.
fn valid_repository(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.split('/').all(|component| {
            component.starts_with(alnum)
                && component.ends_with(alnum)
                && component.chars().all(|c| alnum(c) || "._-".contains(c))
                && separators_ok(component)
        })
}

/// Between two runs of letters and digits: one `.`, one or two `_`, or
/// any number of `-`.
fn separators_ok(component: &str) -> bool {
    let is_sep = |c: char| "._-".contains(c);
    let mut rest = component;
    while let Some(start) = rest.find(is_sep) {
        let after = &rest[start..];
        let end = after.find(|c: char| !is_sep(c)).unwrap_or(after.len());
        let sep = &after[..end];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|c| c == '-');
        if !ok {
            return false;
        }
        rest = &after[end..];
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn valid_tag(tag: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    tag.len() <= 128
        && tag.chars().next().is_some_and(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_tags_and_digests() {
        let r = ImageRef::parse("docker://127.0.0.1:5000/a/b-c:v1.2").unwrap();
        assert_eq!(r.host, "127.0.0.1:5000");
        assert_eq!(r.repository, "a/b-c");
        assert_eq!(r.target, Target::Tag("v1.2".into()));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "docker://127.0.0.1:5000/a/b-c:v1.2");

        let r = ImageRef::parse(&format!("docker://ghcr.io/x/y@{DIGEST}")).unwrap();
        assert_eq!(r.target.as_reference(), DIGEST);
        assert!(!r.is_loopback());

        let r = ImageRef::parse("docker://[::1]:80/x").unwrap();
        assert_eq!(r.target, Target::Tag("latest".into()));
        assert!(r.is_loopback());
        assert!(ImageRef::parse("docker://localhost/a__b.c/d")
            .unwrap()
            .is_loopback());
    }

    #[test]
    fn refuses_bad_names() {
        for bad in [
            "docker://",
            "docker://host",
            "docker://host/",
            "docker://host/UPPER",
            "docker://host/a//b",
            "docker://host/a/",
            "docker://host/-a",
            "docker://host/a..b",
            "docker://host/a___b",
            "docker://host/a:",
            "docker://host/a:-x",
            "docker://host/a@sha256:00",
            "docker://ho st/a",
            "docker://host:0/a",
            "docker://host:99999/a",
            "docker://[::1/a",
            "docker://-host/a",
            "https://host/a",
        ] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
    }
}
