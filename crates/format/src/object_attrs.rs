//! File attributes kept as an object's user metadata (`x-amz-meta-NAME`)
//! by the tools that show S3 as a file system (s3fs, rclone, goofys):
//! `mode` (st_mode in decimal, the file type included or not), `uid`,
//! `gid`, and `mtime` (seconds since the epoch, a fraction allowed).
//! Outside input: a value that does not parse is as if absent.

/// The attributes an object's metadata gives (None: not given, or not a
/// valid value).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ObjectAttrs {
    /// st_mode (its file type bits may be 0).
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Modification time: seconds since the epoch, nanoseconds.
    pub mtime: Option<(i64, u32)>,
}

impl ObjectAttrs {
    /// The attributes in `metadata` ((NAME, value) pairs; names matched
    /// ignoring case, the first of a name used).
    pub fn parse(metadata: &[(String, String)]) -> Self {
        let get = |name: &str| {
            metadata
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        };
        ObjectAttrs {
            mode: get("mode").and_then(|v| v.parse().ok()),
            uid: get("uid").and_then(|v| v.parse().ok()),
            gid: get("gid").and_then(|v| v.parse().ok()),
            mtime: get("mtime").and_then(parse_seconds),
        }
    }

    /// The attributes in metadata written one `NAME: value` a line (the
    /// form of the fuzz target's inputs and seeds).
    pub fn parse_lines(text: &str) -> Self {
        let pairs: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::parse(&pairs)
    }
}

/// Seconds since the epoch, with an optional fraction of up to 9 digits
/// that count (`1600000000`, `1600000000.25`): (seconds, nanoseconds).
pub fn parse_seconds(text: &str) -> Option<(i64, u32)> {
    let (sec, frac) = text.split_once('.').unwrap_or((text, ""));
    let sec: i64 = sec.parse().ok()?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nsec = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    Some((sec, nsec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3fs_metadata_parses_and_bad_values_are_absent() {
        let a = ObjectAttrs::parse_lines("Mode: 33261\nuid:1000\ngid: x\nmtime: 1600000000.5\n");
        assert_eq!(
            a,
            ObjectAttrs {
                mode: Some(33261),
                uid: Some(1000),
                gid: None,
                mtime: Some((1_600_000_000, 500_000_000)),
            }
        );
        assert_eq!(parse_seconds("12x"), None);
        assert_eq!(parse_seconds("1.5x"), None);
        assert_eq!(parse_seconds("7.1234567891"), Some((7, 123_456_789)));
        assert_eq!(ObjectAttrs::parse(&[]), ObjectAttrs::default());
    }
}
