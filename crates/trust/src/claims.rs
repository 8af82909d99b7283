//! Claims a signature makes about the image it signs: a name, a version
//! and an expiry (`--sign-name`, `--sign-version`, `--sign-expires`), and
//! what a reader expects of them (`--expect-name`, `--min-version`).
//!
//! They are part of the signed message (signature layout version 3), so
//! they cannot be changed or moved to another image without the key: an
//! older image signed by the same key cannot pass for a newer one, nor an
//! image for another. Encoded as entries in increasing tag order:
//!
//! ```text
//! tag (u8) | value length (u16 LE) | value
//!   1 name: UTF-8, 1 to 255 bytes, no control characters
//!   2 version: u64 LE
//!   3 expires: i64 LE, seconds since 1970-01-01 UTC
//! ```
//!
//! A tag this hoard does not know makes the signature malformed: a claim
//! that would restrict the image is never ignored.

use crate::{Error, Result};
use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, Utc};

/// The longest name claimed, in bytes.
pub const MAX_NAME: usize = 255;
/// The largest encoded claims accepted.
pub(crate) const MAX_ENCODED: usize = 1024;

const NAME: u8 = 1;
const VERSION: u8 = 2;
const EXPIRES: u8 = 3;

/// What a signature says of the image, besides its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    /// The image's name (`--sign-name`).
    pub name: Option<String>,
    /// Its version (`--sign-version`): a reader may refuse older ones.
    pub version: Option<u64>,
    /// When the signature stops being accepted, in seconds since
    /// 1970-01-01 UTC (`--sign-expires`).
    pub expires: Option<i64>,
}

/// What a reader requires of an image's claims (every signature is
/// also refused once expired).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectations {
    /// The image must be signed with this name (`--expect-name`).
    pub name: Option<String>,
    /// The image must be signed with this version or a later one
    /// (`--min-version`).
    pub min_version: Option<u64>,
}

impl Expectations {
    /// Whether nothing is expected.
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.min_version.is_none()
    }
}

impl Claims {
    /// Claims with the given parts, each checked (a name must be 1 to
    /// [`MAX_NAME`] bytes without control characters; an expiry between
    /// years 1 and 9999).
    pub fn new(name: Option<String>, version: Option<u64>, expires: Option<i64>) -> Result<Self> {
        let claims = Claims {
            name,
            version,
            expires,
        };
        claims.validate().map_err(Error::Claim)?;
        Ok(claims)
    }

    /// Whether nothing is claimed (the signature then has layout 2, as
    /// before claims existed).
    pub fn is_empty(&self) -> bool {
        *self == Claims::default()
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if let Some(name) = &self.name {
            if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
                return Err(format!(
                    "a signed name must be 1 to {MAX_NAME} bytes without control characters"
                ));
            }
        }
        if let Some(at) = self.expires {
            let year = DateTime::from_timestamp(at, 0).map(|t| t.year());
            if !year.is_some_and(|y| (1..=9999).contains(&y)) {
                return Err("a signature's expiry must be in years 1 to 9999".into());
            }
        }
        Ok(())
    }

    /// The encoded claims (empty when there are none).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut entry = |tag: u8, value: &[u8]| {
            out.push(tag);
            out.extend_from_slice(&(value.len() as u16).to_le_bytes());
            out.extend_from_slice(value);
        };
        if let Some(name) = &self.name {
            entry(NAME, name.as_bytes());
        }
        if let Some(version) = self.version {
            entry(VERSION, &version.to_le_bytes());
        }
        if let Some(expires) = self.expires {
            entry(EXPIRES, &expires.to_le_bytes());
        }
        out
    }

    /// Decodes claims, refusing unknown, repeated or misordered tags
    /// and bad values.
    pub(crate) fn decode(mut bytes: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::Malformed(format!("signed claims: {why}"));
        let mut claims = Claims::default();
        let mut last = 0u8;
        while !bytes.is_empty() {
            let [tag, l0, l1, rest @ ..] = bytes else {
                return Err(bad("truncated".into()));
            };
            let len = u16::from_le_bytes([*l0, *l1]) as usize;
            let value = rest.get(..len).ok_or_else(|| bad("truncated".into()))?;
            bytes = &rest[len..];
            if *tag <= last {
                return Err(bad("repeated or out of order".into()));
            }
            last = *tag;
            let fixed = || -> Result<[u8; 8]> {
                value
                    .try_into()
                    .map_err(|_| bad(format!("claim {tag} has the wrong length")))
            };
            match *tag {
                NAME => {
                    let name = std::str::from_utf8(value)
                        .map_err(|_| bad("the name is not UTF-8".into()))?;
                    claims.name = Some(name.to_string());
                }
                VERSION => claims.version = Some(u64::from_le_bytes(fixed()?)),
                EXPIRES => claims.expires = Some(i64::from_le_bytes(fixed()?)),
                _ => {
                    return Err(bad(format!(
                        "claim {tag} is unknown to this hoard (made by a newer one?)"
                    )))
                }
            }
        }
        if claims.is_empty() {
            return Err(bad("none in a signature of layout 3".into()));
        }
        claims.validate().map_err(bad)?;
        Ok(claims)
    }

    /// Checks these claims against `expect` at time `now` (seconds since
    /// 1970-01-01 UTC): the name expected, a version at least the one
    /// expected, and not expired. The error says what was found.
    pub fn check(&self, expect: &Expectations, now: i64) -> Result<()> {
        let refused = |why: String| Err(Error::Untrusted(why));
        if let Some(at) = self.expires.filter(|&at| now >= at) {
            return refused(format!(
                "its signature expired on {} (get a newer image, or have it signed again)",
                format_time(at)
            ));
        }
        if let Some(name) = expect
            .name
            .as_ref()
            .filter(|&n| self.name.as_ref() != Some(n))
        {
            return refused(format!(
                "it is {}, expected name '{name}' (--expect-name)",
                self.signed_as()
            ));
        }
        if let Some(min) = expect.min_version {
            match self.version {
                Some(v) if v >= min => {}
                Some(_) => {
                    return refused(format!(
                        "it is {}, which is older than --min-version {min}",
                        self.signed_as()
                    ))
                }
                None => {
                    return refused(format!(
                        "it is {}, and --min-version {min} needs a signed version",
                        self.signed_as()
                    ))
                }
            }
        }
        Ok(())
    }

    /// "signed as 'app' version 3", or what part is missing.
    fn signed_as(&self) -> String {
        match (&self.name, self.version) {
            (Some(n), Some(v)) => format!("signed as '{n}' version {v}"),
            (Some(n), None) => format!("signed as '{n}' without a version"),
            (None, Some(v)) => format!("signed as version {v} without a name"),
            (None, None) => "signed without a name or version".into(),
        }
    }
}

impl std::fmt::Display for Claims {
    /// `name 'app', version 3, expires 2027-01-31` (`no claims`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(name) = &self.name {
            parts.push(format!("name '{name}'"));
        }
        if let Some(version) = self.version {
            parts.push(format!("version {version}"));
        }
        if let Some(at) = self.expires {
            parts.push(format!("expires {}", format_time(at)));
        }
        if parts.is_empty() {
            return f.write_str("no claims");
        }
        f.write_str(&parts.join(", "))
    }
}

/// Parses an RFC 3339 date or date and time: `2027-01-31` (the start of
/// that day, UTC), `2027-01-31T12:00:00Z`, `2027-01-31T14:00:00+02:00`;
/// returns seconds since 1970-01-01 UTC.
pub fn parse_time(s: &str) -> Result<i64> {
    let at = match NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        Ok(date) => date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp(),
        Err(_) => DateTime::parse_from_rfc3339(s)
            .map_err(|_| {
                Error::Claim(format!(
                    "'{s}' is not an RFC 3339 date or time (2027-01-31 or 2027-01-31T12:00:00Z)"
                ))
            })?
            .timestamp(),
    };
    Claims::new(None, None, Some(at))?;
    Ok(at)
}

/// `secs` (seconds since 1970-01-01 UTC) in RFC 3339: the date alone at
/// midnight UTC, else date and time in UTC.
pub fn format_time(secs: i64) -> String {
    match DateTime::<Utc>::from_timestamp(secs, 0) {
        Some(t) if secs.rem_euclid(86_400) == 0 => t.format("%Y-%m-%d").to_string(),
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Secs, true),
        None => format!("{secs} seconds after 1970-01-01"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Claims {
        Claims::new(
            Some("app".into()),
            Some(3),
            Some(parse_time("2027-01-31").unwrap()),
        )
        .unwrap()
    }

    #[test]
    fn round_trip_and_canonical() {
        let c = all();
        assert_eq!(Claims::decode(&c.encode()).unwrap(), c);
        let only = Claims::new(None, Some(7), None).unwrap();
        assert_eq!(Claims::decode(&only.encode()).unwrap(), only);
        assert!(Claims::default().encode().is_empty());
        assert!(Claims::decode(&[]).is_err(), "layout 3 claims something");
        let bytes = c.encode();
        // Cut inside an entry (entries: 6, 11 and 11 bytes).
        for len in (0..bytes.len()).filter(|l| ![0, 6, 17].contains(l)) {
            assert!(Claims::decode(&bytes[..len]).is_err(), "{len}");
        }
        // Unknown, repeated and misordered tags.
        for bad in [
            [&bytes[..], &[9, 0, 0]].concat(),
            [&bytes[..], &[3, 8, 0], &[0; 8]].concat(),
            [&[2, 8, 0][..], &[0; 8], &[1, 1, 0, b'a']].concat(),
            vec![2, 4, 0, 1, 2, 3, 4],
            vec![1, 1, 0, 0x0a],
            vec![1, 1, 0, 0xff],
        ] {
            assert!(Claims::decode(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn checks_name_version_and_expiry() {
        let c = all();
        let now = parse_time("2026-06-01T12:00:00Z").unwrap();
        let expect = |name: Option<&str>, min_version| Expectations {
            name: name.map(String::from),
            min_version,
        };
        c.check(&Expectations::default(), now).unwrap();
        c.check(&expect(Some("app"), Some(3)), now).unwrap();
        let e = c.check(&expect(Some("other"), None), now).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is signed as 'app' version 3, expected name 'other' (--expect-name)"
        );
        let e = c.check(&expect(None, Some(4)), now).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is signed as 'app' version 3, which is older than --min-version 4"
        );
        let later = parse_time("2027-01-31").unwrap();
        let e = c.check(&Expectations::default(), later).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("its signature expired on 2027-01-31 "),
            "{e}"
        );
        let none = Claims::default();
        none.check(&Expectations::default(), now).unwrap();
        assert!(none.check(&expect(Some("app"), None), now).is_err());
        assert!(none.check(&expect(None, Some(0)), now).is_err());
    }

    #[test]
    fn times_parse_and_format() {
        assert_eq!(parse_time("1970-01-02").unwrap(), 86_400);
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00").unwrap(), 0);
        assert_eq!(format_time(86_400), "1970-01-02");
        assert_eq!(format_time(86_401), "1970-01-02T00:00:01Z");
        assert!(parse_time("2027-13-01").is_err());
        assert!(parse_time("tomorrow").is_err());
        assert!(Claims::new(None, None, Some(i64::MAX)).is_err());
        assert!(Claims::new(Some(String::new()), None, None).is_err());
        assert!(Claims::new(Some("a\nb".into()), None, None).is_err());
        assert!(Claims::new(Some("é".repeat(128)), None, None).is_err());
    }
}
