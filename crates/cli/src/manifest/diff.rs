//! Comparing two manifests entry by entry.

use super::Entry;
use std::collections::BTreeMap;

/// The fields an entry has, in the order differences are reported.
pub const FIELDS: [&str; 13] = [
    "type", "mode", "uid", "gid", "size", "mtime", "mtime_ns", "nlink", "link", "target", "rdev",
    "sha256", "xattrs",
];

/// One difference between two manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The path is only in the first manifest.
    OnlyInFirst(String),
    /// The path is only in the second manifest.
    OnlyInSecond(String),
    /// The path is in both, with these fields different: name, first
    /// value, second value.
    Changed(String, Vec<(&'static str, String, String)>),
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::OnlyInFirst(p) => write!(f, "only in first: {p}"),
            Difference::OnlyInSecond(p) => write!(f, "only in second: {p}"),
            Difference::Changed(p, fields) => {
                write!(f, "differs: {p}:")?;
                for (i, (name, a, b)) in fields.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep} {name} {a} -> {b}")?;
                }
                Ok(())
            }
        }
    }
}

/// The differences between manifests `a` and `b`, in path order, leaving
/// out the fields named in `ignore`.
pub fn compare(a: &[Entry], b: &[Entry], ignore: &[String]) -> Vec<Difference> {
    let index = |m: &[Entry]| -> BTreeMap<String, Entry> {
        m.iter().map(|e| (e.key().to_string(), e.clone())).collect()
    };
    let (a, b) = (index(a), index(b));
    let mut out = Vec::new();
    for (path, ea) in &a {
        let Some(eb) = b.get(path) else {
            out.push(Difference::OnlyInFirst(path.clone()));
            continue;
        };
        let (va, vb) = (fields(ea), fields(eb));
        let changed: Vec<_> = FIELDS
            .iter()
            .filter(|f| !ignore.iter().any(|i| i == *f))
            .filter(|f| va.get(**f) != vb.get(**f))
            .map(|f| (*f, show(va.get(*f)), show(vb.get(*f))))
            .collect();
        if !changed.is_empty() {
            out.push(Difference::Changed(path.clone(), changed));
        }
    }
    out.extend(
        b.keys()
            .filter(|p| !a.contains_key(*p))
            .map(|p| Difference::OnlyInSecond(p.clone())),
    );
    out.sort_by(|x, y| key(x).cmp(key(y)));
    out
}

/// The path a difference is about.
fn key(d: &Difference) -> &str {
    match d {
        Difference::OnlyInFirst(p) | Difference::OnlyInSecond(p) | Difference::Changed(p, _) => p,
    }
}

/// An entry's fields by name; a symlink target in hex counts as `target`.
fn fields(e: &Entry) -> serde_json::Map<String, serde_json::Value> {
    let mut m = match serde_json::to_value(e) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    if let Some(hex) = m.remove("target_hex") {
        m.insert("target".into(), serde_json::json!({ "hex": hex }));
    }
    m
}

/// A field's value for a report.
fn show(v: Option<&serde_json::Value>) -> String {
    v.map_or_else(|| "(none)".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64, mode: &str) -> Entry {
        Entry {
            gid: 0,
            link: None,
            mode: mode.into(),
            mtime: 0,
            mtime_ns: 0,
            nlink: Some(1),
            path: Some(path.into()),
            path_hex: None,
            rdev: None,
            sha256: Some("00".into()),
            size,
            target: None,
            target_hex: None,
            kind: "f".into(),
            uid: 0,
            xattrs: None,
        }
    }

    #[test]
    fn reports_missing_extra_and_changed_fields_in_path_order() {
        let a = [
            entry("a", 1, "0644"),
            entry("b", 1, "0644"),
            entry("c", 1, "0644"),
        ];
        let b = [
            entry("b", 2, "0600"),
            entry("c", 1, "0644"),
            entry("d", 1, "0644"),
        ];
        let d = compare(&a, &b, &[]);
        assert_eq!(
            d.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            [
                "only in first: a",
                "differs: b: mode \"0644\" -> \"0600\", size 1 -> 2",
                "only in second: d",
            ]
        );
        let d = compare(&a[1..], &b[..2], &["size".into(), "mode".into()]);
        assert!(d.is_empty(), "{d:?}");
    }
}
