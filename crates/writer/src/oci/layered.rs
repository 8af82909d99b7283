//! A container image's tree, built in memory layer by layer under OCI's
//! rules: an entry replaces what was at its path (a directory named
//! again keeps what it holds), `.wh.NAME` deletes `NAME` and all under it
//! from the layers below, and `.wh..wh..opq` empties its directory of
//! what the layers below put there.
//!
//! Nothing is ever looked up on the host. A path is refused when it is
//! absolute, holds `..`, or passes through an entry that is not a
//! directory: a symlink is a name with a target here, never followed.

use crate::archive::{attrs_of, Member, MemberKind, Spool};
use crate::tree::Attrs;
use hoard_archive::{ArchiveReader, Kind};
use hoard_format::xattrs::Xattr;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// The prefix of a whiteout's name.
const WHITEOUT: &[u8] = b".wh.";
/// The name of an opaque directory's marker.
const OPAQUE: &[u8] = b".wh..wh..opq";

/// An entry of the tree.
struct Node {
    kind: NodeKind,
    attrs: Attrs,
    xattrs: Vec<Xattr>,
    /// The layer (from 1) that put it there; 0 for the root made up.
    layer: usize,
}

/// What an entry is.
enum NodeKind {
    Dir,
    /// A regular file: its contents, by index (hard links share one).
    File(usize),
    Symlink(Vec<u8>),
    Device(u64),
    Special,
}

impl NodeKind {
    fn name(&self) -> &'static str {
        match self {
            NodeKind::Dir => "directory",
            NodeKind::File(_) => "file",
            NodeKind::Symlink(_) => "symlink",
            NodeKind::Device(_) => "device",
            NodeKind::Special => "special file",
        }
    }
}

/// The tree so far, by path (`/`-separated, relative; the root is empty).
pub(super) struct Layered {
    nodes: BTreeMap<Vec<u8>, Node>,
    /// Each regular file's spooled contents and size.
    contents: Vec<(PathBuf, u64)>,
    spool: Spool,
}

/// `raw`, a path in a layer, made relative: `.` components and a
/// trailing `/` dropped; refused when absolute or holding `..`.
fn layer_path(raw: &[u8]) -> Result<Vec<u8>, String> {
    let shown = || String::from_utf8_lossy(raw).into_owned();
    if raw.first() == Some(&b'/') {
        return Err(format!("'{}' is an absolute path", shown()));
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in raw.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(format!("'{}' goes up out of the tree", shown())),
            p => parts.push(p),
        }
    }
    Ok(parts.join(&b'/'))
}

/// The parent of `path` and its last name.
fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b"", path),
    }
}

/// `dir/name`.
fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        name.to_vec()
    } else {
        [dir, b"/", name].concat()
    }
}

fn shown(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl Layered {
    /// An empty tree (a root directory, mode 0755), contents spooled in
    /// `spool`.
    pub(super) fn new(spool: Spool) -> Layered {
        let root = Node {
            kind: NodeKind::Dir,
            attrs: Attrs {
                mode: libc::S_IFDIR | 0o755,
                ..Attrs::default()
            },
            xattrs: Vec::new(),
            layer: 0,
        };
        Layered {
            nodes: BTreeMap::from([(Vec::new(), root)]),
            contents: Vec::new(),
            spool,
        }
    }

    /// The paths under `dir` (not `dir` itself).
    fn under(&self, dir: &[u8]) -> Vec<Vec<u8>> {
        if dir.is_empty() {
            return self.nodes.keys().skip(1).cloned().collect();
        }
        let start = join(dir, b"");
        let mut end = start.clone();
        *end.last_mut().expect("ends with '/'") += 1;
        self.nodes
            .range(start..end)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Removes what the layers below `layer` put under `path`, and
    /// `path` itself (if they put it there) unless `keep`.
    fn remove_below(&mut self, path: &[u8], layer: usize, keep: bool) {
        let mut paths = self.under(path);
        if !keep && !path.is_empty() {
            paths.push(path.to_vec());
        }
        for p in paths {
            if self.nodes.get(&p).is_some_and(|n| n.layer < layer) {
                self.nodes.remove(&p);
            }
        }
    }

    /// Makes sure `dir` and every directory above it are directories,
    /// making those missing (mode 0755, owner 0, time 0) in `layer` when
    /// `make`; returns whether they all are there.
    fn directories(&mut self, dir: &[u8], layer: usize, make: bool) -> Result<bool, String> {
        let mut end = 0;
        while end < dir.len() {
            end = dir[end..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(dir.len(), |i| end + i);
            let prefix = &dir[..end];
            match self.nodes.get(prefix) {
                Some(Node {
                    kind: NodeKind::Dir,
                    ..
                }) => {}
                Some(other) => {
                    return Err(format!(
                        "'{}' is used as a directory but is a {} (never followed)",
                        shown(prefix),
                        other.kind.name()
                    ))
                }
                None if !make => return Ok(false),
                None => {
                    let node = Node {
                        kind: NodeKind::Dir,
                        attrs: Attrs {
                            mode: libc::S_IFDIR | 0o755,
                            ..Attrs::default()
                        },
                        xattrs: Vec::new(),
                        layer,
                    };
                    self.nodes.insert(prefix.to_vec(), node);
                }
            }
            end += 1;
        }
        Ok(true)
    }

    /// Applies member `m` of layer `layer` (from 1), its data read from
    /// `reader`.
    pub(super) fn apply(
        &mut self,
        layer: usize,
        m: hoard_archive::Member,
        reader: &mut ArchiveReader,
    ) -> Result<(), String> {
        let path = layer_path(&m.path)?;
        let (dir, name) = split(&path);
        if let Some(whited) = name.strip_prefix(WHITEOUT) {
            return self.whiteout(layer, &path, dir, whited);
        }
        self.directories(dir, layer, true)?;
        let attrs = attrs_of(&m).map_err(|e| format!("'{}': {e}", shown(&path)))?;
        let mut node = Node {
            kind: NodeKind::Dir,
            attrs,
            xattrs: m.xattrs,
            layer,
        };
        node.kind = match (m.kind, m.hardlink) {
            (Kind::File, Some(target)) => {
                let target = layer_path(&target)?;
                match self.nodes.get(&target) {
                    Some(
                        first @ Node {
                            kind: NodeKind::File(c),
                            ..
                        },
                    ) => {
                        node.attrs = first.attrs;
                        node.xattrs = first.xattrs.clone();
                        NodeKind::File(*c)
                    }
                    _ => {
                        return Err(format!(
                            "'{}' is a hard link to '{}', which is not a regular file",
                            shown(&path),
                            shown(&target)
                        ))
                    }
                }
            }
            (Kind::File, None) => {
                let source = self
                    .spool
                    .store_blocks(reader, m.size)
                    .map_err(|e| format!("'{}': {e}", shown(&path)))?;
                self.contents.push((source, m.size));
                NodeKind::File(self.contents.len() - 1)
            }
            (Kind::Dir, _) => NodeKind::Dir,
            (Kind::Symlink(target), _) => NodeKind::Symlink(target),
            (Kind::CharDevice(rdev) | Kind::BlockDevice(rdev), _) => NodeKind::Device(rdev),
            (Kind::Fifo | Kind::Socket, _) => NodeKind::Special,
        };
        let is_dir = matches!(node.kind, NodeKind::Dir);
        match self.nodes.get_mut(&path) {
            Some(old) if is_dir && matches!(old.kind, NodeKind::Dir) => {
                // A directory named again keeps what it holds.
                old.attrs = node.attrs;
                old.xattrs = node.xattrs;
            }
            Some(_) if path.is_empty() => {
                return Err("the root is replaced by something not a directory".into())
            }
            _ => {
                for p in self.under(&path) {
                    self.nodes.remove(&p);
                }
                self.nodes.insert(path, node);
            }
        }
        Ok(())
    }

    /// Applies the whiteout at `path` (in `dir`, naming `whited`) of
    /// `layer`.
    fn whiteout(
        &mut self,
        layer: usize,
        path: &[u8],
        dir: &[u8],
        whited: &[u8],
    ) -> Result<(), String> {
        let opaque = whited == &OPAQUE[WHITEOUT.len()..];
        if !opaque && whited.starts_with(WHITEOUT) {
            // Another of AUFS's own files (`.wh..wh.plnk`, ...): not an entry.
            return Ok(());
        }
        if whited.is_empty() || whited == b"." || whited == b".." {
            return Err(format!(
                "whiteout '{}' names nothing inside the tree",
                shown(path)
            ));
        }
        if !self.directories(dir, layer, false)? {
            // Nothing below to delete.
            return Ok(());
        }
        if opaque {
            self.remove_below(dir, layer, true);
        } else {
            self.remove_below(&join(dir, whited), layer, false);
        }
        Ok(())
    }

    /// The tree as members, parents first (hard links after the first
    /// name of their file), and the spool their contents are in; contents
    /// no entry names any more are emptied.
    pub(super) fn finish(self) -> (Vec<Member>, Spool) {
        let mut first_name: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut members = Vec::with_capacity(self.nodes.len());
        for (path, node) in self.nodes {
            let kind = match node.kind {
                NodeKind::Dir => MemberKind::Dir,
                NodeKind::File(c) => match first_name.get(&c) {
                    Some(first) => MemberKind::HardLink(first.clone()),
                    None => {
                        first_name.insert(c, path.clone());
                        let (source, size) = self.contents[c].clone();
                        MemberKind::File { source, size }
                    }
                },
                NodeKind::Symlink(target) => MemberKind::Symlink(target),
                NodeKind::Device(rdev) => MemberKind::Device(rdev),
                NodeKind::Special => MemberKind::Special,
            };
            members.push(Member {
                path,
                kind,
                attrs: node.attrs,
                xattrs: node.xattrs,
            });
        }
        for (c, (source, _)) in self.contents.iter().enumerate() {
            if !first_name.contains_key(&c) {
                Spool::empty(source);
            }
        }
        (members, self.spool)
    }
}

#[cfg(test)]
mod tests {
    use super::layer_path;

    #[test]
    fn paths_stay_inside() {
        assert_eq!(layer_path(b"./a/./b/").unwrap(), b"a/b");
        assert_eq!(layer_path(b"./").unwrap(), b"");
        assert!(layer_path(b"/etc/passwd").is_err());
        assert!(layer_path(b"a/../b").is_err());
        assert!(layer_path(b"..").is_err());
    }
}
