//! Manifests: a tree described one entry per line, as JSON, sorted by path
//! (the format of DwarFS test manifests, made with `shared/tools/manifest.py`
//! on a mount). The same tree gives the same manifest wherever it lies, so a
//! source directory, a mounted or extracted image and the image itself
//! ([`tree`], [`image`]) can be compared line by line ([`diff`]).

pub mod diff;
pub mod image;
pub mod tree;

use crate::trust::ReadKeys;
use anyhow::{Context, Result};
use hoard_reader::open::{open, Form};
use hoard_reader::ImageOffset;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The manifest of what `path` names: a directory tree, a manifest file
/// (its first byte is `{`), or an image (a file, at `offset` in it, or a
/// URL) with the image `layers` stacked on it (on other images than they
/// were made on only if `force`).
pub fn load(
    path: &Path,
    layers: &[PathBuf],
    force: bool,
    offset: ImageOffset,
) -> Result<Vec<Entry>> {
    let is_url = path
        .to_str()
        .is_some_and(|p| hoard_reader::source::url_scheme(p).is_some());
    if is_url {
        return image_manifest(path, layers, force, offset);
    }
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot stat '{}'", path.display()))?;
    if !layers.is_empty() && meta.is_dir() {
        anyhow::bail!(
            "'{}': layers stack on an image, not a directory",
            path.display()
        );
    }
    if meta.is_dir() {
        return tree::manifest(path);
    }
    let mut first = [0u8; 1];
    let n = std::io::Read::read(
        &mut std::fs::File::open(path)
            .with_context(|| format!("cannot open '{}'", path.display()))?,
        &mut first,
    )
    .with_context(|| format!("cannot read '{}'", path.display()))?;
    if layers.is_empty() && (n == 0 || first[0] == b'{') {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read manifest '{}'", path.display()))?;
        return parse(&text).with_context(|| format!("manifest '{}'", path.display()));
    }
    image_manifest(path, layers, force, offset)
}

/// The manifest of the image at `path` (a file or a URL) with `layers`
/// stacked on it.
fn image_manifest(
    path: &Path,
    layers: &[PathBuf],
    force: bool,
    offset: ImageOffset,
) -> Result<Vec<Entry>> {
    let mut images = vec![path.to_path_buf()];
    images.extend(layers.iter().cloned());
    let form = Form::Stack { force };
    let target = crate::target::of_paths(images, form, offset, &ReadKeys::default())?;
    let view = open(&target)?.into_stack()?;
    image::manifest(&view).with_context(|| format!("image '{}'", path.display()))
}

/// One entry of a manifest. Fields are in the JSON's (sorted) key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Group.
    pub gid: u32,
    /// Hard-link group: the first path (sorted) of the file's inode, when
    /// it has more than one link.
    pub link: Option<String>,
    /// Permission bits, setuid/setgid/sticky included, as 4 octal digits.
    pub mode: String,
    /// Modification time, whole seconds (rounded down).
    pub mtime: i64,
    /// Nanoseconds past `mtime`.
    pub mtime_ns: u32,
    /// Link count of regular files; `None` for the rest.
    pub nlink: Option<u64>,
    /// Relative path (`.` for the root), when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path's bytes in hex, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    /// Device numbers `[major, minor]` of character and block devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdev: Option<[u32; 2]>,
    /// SHA-256 of a regular file's contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Length of a regular file or symlink target; 0 for the rest.
    pub size: u64,
    /// Symlink target, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The symlink target's bytes in hex, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_hex: Option<String>,
    /// `d`, `f`, `l`, `c`, `b`, `p` or `s`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Owner.
    pub uid: u32,
    /// Extended attributes by name, when the entry has any (manifests of
    /// trees without attributes are those `manifest.py` writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xattrs: Option<BTreeMap<String, XattrValue>>,
}

/// An extended attribute's value in a manifest: text when it is UTF-8
/// without NUL bytes, else hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum XattrValue {
    /// The value as text.
    Text(String),
    /// The value's bytes in hex.
    Hex {
        /// Lowercase hex.
        hex: String,
    },
}

impl XattrValue {
    /// The manifest form of `value`.
    pub fn of(value: &[u8]) -> Self {
        match std::str::from_utf8(value) {
            Ok(s) if !s.contains('\0') => XattrValue::Text(s.to_string()),
            _ => XattrValue::Hex { hex: hex(value) },
        }
    }
}

/// The manifest form of an entry's extended attributes: `None` when there
/// are none. Names that are not UTF-8 are shown lossily.
pub fn xattr_map<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    attrs: impl IntoIterator<Item = (N, V)>,
) -> Option<BTreeMap<String, XattrValue>> {
    let map: BTreeMap<_, _> = attrs
        .into_iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n.as_ref()).into_owned(),
                XattrValue::of(v.as_ref()),
            )
        })
        .collect();
    (!map.is_empty()).then_some(map)
}

/// What a manifest entry is made from: the facts of one entry of a tree.
#[derive(Debug, Clone)]
pub struct Facts {
    /// Path relative to the root, `/`-separated; empty for the root.
    pub path: Vec<u8>,
    /// Type letter (see [`Entry::kind`]).
    pub kind: char,
    /// Full mode (type bits are ignored).
    pub mode: u32,
    /// Owner and group.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Length (regular files and symlinks).
    pub size: u64,
    /// Modification time: seconds and nanoseconds.
    pub mtime: (i64, u32),
    /// Link count.
    pub nlink: u64,
    /// Identity of the inode (device and inode number), for hard-link
    /// groups.
    pub inode: (u64, u64),
    /// Symlink target.
    pub target: Option<Vec<u8>>,
    /// Device major and minor.
    pub rdev: Option<[u32; 2]>,
    /// SHA-256 of the contents (regular files), in hex.
    pub sha256: Option<String>,
    /// Extended attributes (see [`xattr_map`]).
    pub xattrs: Option<BTreeMap<String, XattrValue>>,
}

/// Manifest entries for `facts`, sorted by path bytes, with hard-link
/// groups named by their first path.
pub fn entries(mut facts: Vec<Facts>) -> Vec<Entry> {
    for f in &mut facts {
        if f.path.is_empty() {
            f.path = b".".to_vec();
        }
    }
    facts.sort_by(|a, b| a.path.cmp(&b.path));
    let mut first_of_inode = std::collections::HashMap::new();
    facts
        .into_iter()
        .map(|f| {
            let (path, path_hex) = text_or_hex(&f.path);
            let regular = f.kind == 'f';
            let link = (regular && f.nlink > 1).then(|| {
                first_of_inode
                    .entry(f.inode)
                    .or_insert_with(|| path.clone().or(path_hex.clone()).unwrap_or_default())
                    .clone()
            });
            let (target, target_hex) = match &f.target {
                Some(t) => text_or_hex(t),
                None => (None, None),
            };
            Entry {
                gid: f.gid,
                link,
                mode: format!("{:04o}", f.mode & 0o7777),
                mtime: f.mtime.0,
                mtime_ns: f.mtime.1,
                nlink: regular.then_some(f.nlink),
                path,
                path_hex,
                rdev: f.rdev,
                sha256: f.sha256,
                size: if matches!(f.kind, 'f' | 'l') {
                    f.size
                } else {
                    0
                },
                target,
                target_hex,
                kind: f.kind.to_string(),
                uid: f.uid,
                xattrs: f.xattrs,
            }
        })
        .collect()
}

/// `bytes` as text when it is UTF-8, else as hex.
fn text_or_hex(bytes: &[u8]) -> (Option<String>, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (Some(s.to_string()), None),
        Err(_) => (None, Some(hex(bytes))),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Entry {
    /// The entry's path, or its hex form when it is not UTF-8.
    pub fn key(&self) -> &str {
        self.path
            .as_deref()
            .or(self.path_hex.as_deref())
            .unwrap_or_default()
    }
}

/// Writes `entries` as manifest lines, spaced as Python's `json.dumps`
/// spaces them, so that manifests made here and by `manifest.py` are equal
/// byte for byte.
pub fn write(entries: &[Entry], out: &mut impl Write) -> io::Result<()> {
    for e in entries {
        let mut ser = serde_json::Serializer::with_formatter(&mut *out, PythonSpacing);
        e.serialize(&mut ser).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads manifest lines.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| anyhow::anyhow!("line {}: not a manifest entry: {e}", i + 1))
        })
        .collect()
}

/// JSON with `", "` between items and `": "` after keys.
struct PythonSpacing;

impl serde_json::ser::Formatter for PythonSpacing {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &[u8], inode: u64, nlink: u64) -> Facts {
        Facts {
            path: path.to_vec(),
            kind: 'f',
            mode: 0o100644,
            uid: 0,
            gid: 0,
            size: 3,
            mtime: (-1, 5),
            nlink,
            inode: (0, inode),
            target: None,
            rdev: None,
            sha256: Some("ab".into()),
            xattrs: None,
        }
    }

    #[test]
    fn lines_are_spaced_and_keyed_as_python_writes_them() {
        let e = entries(vec![file(b"a\"\n\xc3\xa9", 1, 1)]);
        let mut out = Vec::new();
        write(&e, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"gid\": 0, \"link\": null, \"mode\": \"0644\", \"mtime\": -1, \"mtime_ns\": 5, \
             \"nlink\": 1, \"path\": \"a\\\"\\n\u{e9}\", \"sha256\": \"ab\", \"size\": 3, \
             \"type\": \"f\", \"uid\": 0}\n"
        );
        let back = parse(
            std::str::from_utf8(&{
                let mut o = Vec::new();
                write(&e, &mut o).unwrap();
                o
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn hard_links_name_their_first_path_and_odd_names_go_hex() {
        let e = entries(vec![
            file(b"z", 7, 2),
            file(b"b", 7, 2),
            file(b"\xff", 8, 1),
        ]);
        assert_eq!(e[0].link.as_deref(), Some("b"));
        assert_eq!(e[1].link.as_deref(), Some("b"));
        assert_eq!(e[2].path_hex.as_deref(), Some("ff"));
        assert_eq!(e[2].link, None);
    }
}
