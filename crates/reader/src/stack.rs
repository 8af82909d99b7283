//! Images stacked as layers, the last on top, read as one tree with the
//! rules of Linux's overlayfs (and so of OCI image layers):
//!
//! * a name in a higher layer hides the same name below it, unless both
//!   are directories: directories merge, their entries listed together;
//! * a character device 0:0 (a *whiteout*) hides the name below it and is
//!   not shown itself;
//! * a directory with the extended attribute `trusted.overlay.opaque`
//!   (or `user.overlay.opaque`) set to `y` hides everything below it;
//! * a regular file with the attribute `trusted.overlay.metacopy` (or
//!   `user.overlay.metacopy`) holds only attributes: its contents are
//!   those of the first regular file of its name below it (overlayfs's
//!   `metacopy=on`).
//!
//! One image is a stack of one, read as it is (whiteouts shown), with the
//! image's own inode numbers. In a stack of several, an entry's number is
//! its layer's index in the high 32 bits and its inode there in the low
//! ones; a merged directory takes its topmost layer's. All layers share
//! one block cache.
//!
//! A stack of several remembers each merged directory it hands out (its
//! layers, and once listed its merged entries) and where each metacopy
//! file's contents are, for as long as it lives: memory grows with the
//! directories visited, as a kernel's dentry cache does.

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::view::{AddEntry, Located, View};
use crate::{FileKind, Filesystem, OpenOptions};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

/// The extended attribute on a layer's root recording the stack of
/// images it was made on: the hex [`Stack::chain_id`] of its bases. In
/// overlayfs's private namespace, so that neither a hoard stack nor the
/// kernel's overlayfs shows it in the merged tree.
pub const BASE_XATTR: &[u8] = b"trusted.overlay.hoard.base";

/// The most layers a stack may have.
pub const MAX_LAYERS: usize = 4096;

/// The extended attributes that make a directory opaque (`y`).
const OPAQUE_XATTRS: [&[u8]; 2] = [b"trusted.overlay.opaque", b"user.overlay.opaque"];

/// The extended attribute marking a file whose contents are below it,
/// as hoard writes it, and the names overlayfs reads.
pub const METACOPY_XATTR: &[u8] = b"trusted.overlay.metacopy";
const METACOPY_XATTRS: [&[u8]; 2] = [METACOPY_XATTR, b"user.overlay.metacopy"];

/// Images read as one tree, the last on top.
#[derive(Debug)]
pub struct Stack {
    /// The layers, bottom first.
    layers: Vec<Arc<Filesystem>>,
    /// The merged directories handed out so far, by inode number.
    dirs: RwLock<HashMap<u64, Arc<MergedDir>>>,
    /// Where the contents of the metacopy files handed out so far are.
    contents: RwLock<HashMap<u64, (usize, u32)>>,
}

/// A directory of the merged tree.
#[derive(Debug)]
struct MergedDir {
    parent: u64,
    /// Its directory in each layer that shows through, top first.
    sources: Vec<(usize, u32)>,
    /// Its merged entries, made at the first listing.
    listing: OnceLock<Result<Vec<Merged>>>,
}

/// An entry of a merged directory.
#[derive(Debug, Clone)]
struct Merged {
    name: Vec<u8>,
    ino: u64,
    kind: FileKind,
    /// For a directory: its sources, top first; for a metacopy file,
    /// where its contents are.
    sources: Vec<(usize, u32)>,
}

/// What a name resolves to while layers are searched top down.
enum Found {
    /// Whited out, or a non-directory: nothing below shows.
    Final(Option<(usize, u32, FileKind)>),
    /// A directory, with the layers found so far; `open` while lower
    /// layers may still add to it.
    Dir {
        sources: Vec<(usize, u32)>,
        open: bool,
    },
    /// A metacopy file (`top`) and, once found, the file below holding
    /// its contents; `open` while lower layers are searched.
    Meta {
        top: (usize, u32),
        data: Option<(usize, u32)>,
        open: bool,
    },
}

impl Found {
    /// Whether lower layers may still change what the name is.
    fn is_open(&self) -> bool {
        matches!(
            self,
            Found::Dir { open: true, .. } | Found::Meta { open: true, .. }
        )
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `name` is one of overlayfs's own attributes.
fn is_overlay_xattr(name: &[u8]) -> bool {
    name.starts_with(b"trusted.overlay.") || name.starts_with(b"user.overlay.")
}

/// Checks that the images below each delta layer are the ones it
/// depends on (see [`crate::delta`]), and gives it them: a delta layer
/// reads only on exactly its bases, whatever `--force-stack` says.
fn attach_delta_layers(layers: &[Arc<Filesystem>]) -> Result<()> {
    for (i, fs) in layers.iter().enumerate() {
        if !fs.is_delta() {
            continue;
        }
        let deps = fs.dependencies()?;
        let layer = i + 1;
        for (j, dep) in deps.iter().enumerate() {
            let short = &dep.identity[..16.min(dep.identity.len())];
            let Some(below) = layers.get(j).filter(|_| j < i) else {
                return Err(Error::Unsupported(format!(
                    "layer {layer} is a delta layer: its base image '{}' (identity {short}...) is missing below it",
                    dep.name
                )));
            };
            if hex(&below.delta_identity()) != dep.identity {
                return Err(Error::Unsupported(format!(
                    "layer {layer} is a delta layer on base image '{}' (identity {short}...), but layer {} is another image",
                    dep.name,
                    j + 1
                )));
            }
            // Its identity names its blocks by the hashes their headers
            // record: reads check them.
            below.image().check_contents();
        }
        if deps.len() != i {
            return Err(Error::Unsupported(format!(
                "layer {layer} is a delta layer on {} base images, but {i} are below it",
                deps.len()
            )));
        }
        fs.attach_lower(layers[..i].to_vec());
    }
    Ok(())
}

fn encode(layer: usize, ino: u32) -> u64 {
    (layer as u64) << 32 | u64::from(ino)
}

fn decode(ino: u64) -> (usize, u32) {
    ((ino >> 32) as usize, ino as u32)
}

impl Stack {
    /// Opens the images at `paths`, bottom layer first, their blocks kept
    /// in the store of `cache` (for a [`crate::Set`]'s members; others
    /// open through [`crate::open`]). Errors name the image.
    pub(crate) fn open_in(
        paths: &[&Path],
        open: &OpenOptions,
        cache: &BlockCache,
    ) -> Result<Stack> {
        if paths.len() > MAX_LAYERS {
            return Err(Error::Unsupported(format!(
                "{} layers: a stack may have at most {MAX_LAYERS}",
                paths.len()
            )));
        }
        let mut layers: Vec<Arc<Filesystem>> = Vec::with_capacity(paths.len());
        for path in paths {
            let name = path.display().to_string();
            let fs = Filesystem::open_sharing(path, open, cache).map_err(|e| e.context(&name))?;
            layers.push(Arc::new(fs));
        }
        Stack::from_layers(layers)
    }

    /// A stack of opened images, bottom first.
    pub fn from_layers(layers: Vec<Arc<Filesystem>>) -> Result<Stack> {
        if layers.is_empty() {
            return Err(Error::Unsupported(
                "a stack needs at least one image".into(),
            ));
        }
        attach_delta_layers(&layers)?;
        let stack = Stack {
            layers,
            dirs: RwLock::new(HashMap::new()),
            contents: RwLock::new(HashMap::new()),
        };
        if stack.layers.len() > 1 {
            let top = stack.layers.len() - 1;
            let mut sources = vec![(top, stack.layers[top].root())];
            if !stack.is_opaque(top, sources[0].1) {
                for layer in (0..top).rev() {
                    let root = stack.layers[layer].root();
                    sources.push((layer, root));
                    if stack.is_opaque(layer, root) {
                        break;
                    }
                }
            }
            let root = encode(top, stack.layers[top].root());
            stack.register(root, root, sources);
        }
        Ok(stack)
    }

    /// The identity of the stack: for one image, the SHA-256 of its
    /// metadata ([`Filesystem::identity`]); for more, the SHA-256 of the
    /// identity of the layers below and that of the top one, as hex. A
    /// layer records its bases' (see [`BASE_XATTR`]); a layer cannot
    /// record a chain holding itself, so stacks have no cycles.
    pub fn chain_id(&self) -> String {
        hex(&self.chain()[self.layers.len() - 1])
    }

    /// The identity of the stack up to each layer.
    fn chain(&self) -> Vec<[u8; 32]> {
        use sha2::Digest;
        let mut chain: Vec<[u8; 32]> = Vec::with_capacity(self.layers.len());
        for fs in &self.layers {
            let id = fs.identity();
            chain.push(match chain.last() {
                None => id,
                Some(below) => {
                    let mut h = sha2::Sha256::new();
                    h.update(below);
                    h.update(id);
                    h.finalize().into()
                }
            });
        }
        chain
    }

    /// Checks that each layer that records its bases lies on them (one
    /// image alone is read as it is: always fine); otherwise gives the
    /// index of the first that does not, and why.
    pub fn check_bases(&self) -> std::result::Result<(), (usize, String)> {
        if self.layers.len() == 1 {
            return Ok(());
        }
        let chain = self.chain();
        for (i, fs) in self.layers.iter().enumerate() {
            let xattrs = fs.xattrs(fs.root()).map_err(|e| (i, e.to_string()))?;
            let Some((_, recorded)) = xattrs.iter().find(|(n, _)| *n == BASE_XATTR) else {
                continue;
            };
            if i == 0 {
                return Err((i, "is a layer, but its base images are not below it".into()));
            }
            if *recorded != hex(&chain[i - 1]).as_bytes() {
                return Err((
                    i,
                    "is a layer made on other base images than the ones below it".into(),
                ));
            }
        }
        Ok(())
    }

    /// The layers, bottom first.
    pub fn layers(&self) -> &[Arc<Filesystem>] {
        &self.layers
    }

    /// The only layer, when there is one.
    fn single(&self) -> Option<&Filesystem> {
        match self.layers.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    fn layer(&self, ino: u64) -> Result<(&Arc<Filesystem>, u32)> {
        let (layer, ino) = decode(ino);
        let fs = self
            .layers
            .get(layer)
            .ok_or_else(|| Error::NotFound(format!("inode {layer}:{ino}")))?;
        Ok((fs, ino))
    }

    fn register(&self, ino: u64, parent: u64, sources: Vec<(usize, u32)>) -> Arc<MergedDir> {
        let mut dirs = self.dirs.write().unwrap_or_else(|p| p.into_inner());
        dirs.entry(ino)
            .or_insert_with(|| {
                Arc::new(MergedDir {
                    parent,
                    sources,
                    listing: OnceLock::new(),
                })
            })
            .clone()
    }

    /// The merged directory `dir`, registered when it was handed out.
    fn merged(&self, dir: u64) -> Result<Arc<MergedDir>> {
        let dirs = self.dirs.read().unwrap_or_else(|p| p.into_inner());
        dirs.get(&dir)
            .cloned()
            .ok_or_else(|| Error::WrongType(format!("inode {dir} is not a directory of the stack")))
    }

    fn is_whiteout(&self, layer: usize, ino: u32, kind: FileKind) -> bool {
        kind == FileKind::CharDevice && self.layers[layer].stat(ino).is_ok_and(|s| s.rdev == 0)
    }

    fn is_opaque(&self, layer: usize, ino: u32) -> bool {
        self.layers[layer].xattrs(ino).is_ok_and(|x| {
            x.iter()
                .any(|(n, v)| OPAQUE_XATTRS.contains(n) && *v == b"y")
        })
    }

    fn is_metacopy(&self, layer: usize, ino: u32, kind: FileKind) -> bool {
        kind == FileKind::Regular
            && self.layers[layer]
                .xattrs(ino)
                .is_ok_and(|x| x.iter().any(|(n, _)| METACOPY_XATTRS.contains(n)))
    }

    /// Folds the entry `ino` of `layer` (found under a name already
    /// resolved as `found` by the layers above, if any) into it.
    fn fold(&self, found: Option<Found>, layer: usize, ino: u32) -> Result<Found> {
        let kind = self.layers[layer].kind(ino)?;
        let whiteout = self.is_whiteout(layer, ino, kind);
        Ok(match found {
            None if whiteout => Found::Final(None),
            None if kind == FileKind::Directory => Found::Dir {
                sources: vec![(layer, ino)],
                open: !self.is_opaque(layer, ino),
            },
            None if self.is_metacopy(layer, ino, kind) => Found::Meta {
                top: (layer, ino),
                data: None,
                open: true,
            },
            None => Found::Final(Some((layer, ino, kind))),
            Some(Found::Meta {
                top,
                data: None,
                open: true,
            }) => {
                let full = kind == FileKind::Regular && !self.is_metacopy(layer, ino, kind);
                Found::Meta {
                    top,
                    data: full.then_some((layer, ino)),
                    // A metacopy file below: its contents are further down.
                    open: kind == FileKind::Regular && !full,
                }
            }
            Some(Found::Dir {
                mut sources,
                open: true,
            }) => {
                let open = if kind == FileKind::Directory && !whiteout {
                    sources.push((layer, ino));
                    !self.is_opaque(layer, ino)
                } else {
                    false
                };
                Found::Dir { sources, open }
            }
            Some(done) => done,
        })
    }

    /// The merged entry a resolved name makes, if it shows.
    fn entry(name: Vec<u8>, found: Found) -> Option<Merged> {
        match found {
            Found::Final(None) => None,
            Found::Final(Some((layer, ino, kind))) => Some(Merged {
                name,
                ino: encode(layer, ino),
                kind,
                sources: Vec::new(),
            }),
            Found::Dir { sources, .. } => Some(Merged {
                name,
                ino: encode(sources[0].0, sources[0].1),
                kind: FileKind::Directory,
                sources,
            }),
            Found::Meta { top, data, .. } => Some(Merged {
                name,
                ino: encode(top.0, top.1),
                kind: FileKind::Regular,
                sources: data.into_iter().collect(),
            }),
        }
    }

    /// Remembers what `entry` needs later: a directory's sources, a
    /// metacopy file's contents.
    fn remember(&self, entry: &Merged, dir: u64) {
        match (entry.kind, entry.sources.first()) {
            (FileKind::Directory, _) => {
                self.register(entry.ino, dir, entry.sources.clone());
            }
            (_, Some(&data)) => {
                let mut contents = self.contents.write().unwrap_or_else(|p| p.into_inner());
                contents.insert(entry.ino, data);
            }
            _ => {}
        }
    }

    /// The merged entries of `dir`, made at the first call; the
    /// directories among them are registered.
    fn listing(&self, dir: u64) -> Result<(Arc<MergedDir>, usize)> {
        let merged = self.merged(dir)?;
        let listing = merged.listing.get_or_init(|| {
            let mut names: BTreeMap<Vec<u8>, Found> = BTreeMap::new();
            for &(layer, d) in &merged.sources {
                for e in self.layers[layer].readdir_from(d, 0)? {
                    let e = e?;
                    let found = names.remove(&e.name);
                    let folded = self.fold(found, layer, e.ino)?;
                    names.insert(e.name, folded);
                }
            }
            Ok(names
                .into_iter()
                .filter_map(|(name, found)| Self::entry(name, found))
                .collect())
        });
        let entries = listing.as_ref().map_err(Clone::clone)?;
        for e in entries.iter().filter(|e| !e.sources.is_empty()) {
            self.remember(e, dir);
        }
        Ok((merged.clone(), entries.len()))
    }
}

impl View for Stack {
    fn root(&self) -> u64 {
        let top = self.layers.len() - 1;
        encode(top, self.layers[top].root())
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<Option<u64>> {
        if let Some(fs) = self.single() {
            return Ok(fs.lookup(dir as u32, name)?.map(u64::from));
        }
        let merged = self.merged(dir)?;
        let mut found = None;
        for &(layer, d) in &merged.sources {
            if let Some(ino) = self.layers[layer].lookup(d, name)? {
                let folded = self.fold(found, layer, ino)?;
                let done = !folded.is_open();
                found = Some(folded);
                if done {
                    break;
                }
            }
        }
        let Some(entry) = found.and_then(|f| Self::entry(name.to_vec(), f)) else {
            return Ok(None);
        };
        self.remember(&entry, dir);
        Ok(Some(entry.ino))
    }

    fn list(&self, dir: u64, skip: usize, add: &mut AddEntry<'_>) -> Result<()> {
        if let Some(fs) = self.single() {
            for e in fs.readdir_from(dir as u32, skip)? {
                let e = e?;
                if add(&e.name, u64::from(e.ino), fs.kind(e.ino)?)? {
                    break;
                }
            }
            return Ok(());
        }
        let (merged, _) = self.listing(dir)?;
        let Some(Ok(entries)) = merged.listing.get() else {
            return Ok(());
        };
        for e in entries.iter().skip(skip) {
            if add(&e.name, e.ino, e.kind)? {
                break;
            }
        }
        Ok(())
    }

    fn parent(&self, dir: u64) -> Result<u64> {
        match self.single() {
            Some(fs) => Ok(u64::from(fs.parent(dir as u32)?)),
            None => Ok(self.merged(dir)?.parent),
        }
    }

    /// A metacopy file's contents are in a lower layer.
    fn locate(&self, ino: u64) -> Result<Located> {
        let data = {
            let contents = self.contents.read().unwrap_or_else(|p| p.into_inner());
            contents.get(&ino).copied()
        };
        let (fs, ino) = match data {
            Some((layer, ino)) => (&self.layers[layer], ino),
            None => self.layer(ino)?,
        };
        Ok(Located {
            fs: fs.clone(),
            ino,
        })
    }

    /// Attributes from the top layer, even for a metacopy file (whose
    /// allocated size is that of its contents).
    fn stat(&self, ino: u64) -> Result<crate::Stat> {
        let (fs, image_ino) = self.layer(ino)?;
        let mut st = fs.stat(image_ino)?;
        if st.kind == FileKind::Regular && self.layers.len() > 1 {
            let at = self.locate(ino)?;
            if !Arc::ptr_eq(&at.fs, fs) {
                st.allocated_size = at.fs.stat(at.ino)?.allocated_size;
            }
        }
        Ok(st)
    }

    /// In a stack of several, overlayfs's own attributes (opaque marks)
    /// are not shown, as overlayfs does not show them.
    fn xattrs(&self, ino: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (fs, ino) = self.layer(ino)?;
        let merged = self.layers.len() > 1;
        Ok(fs
            .xattrs(ino)?
            .into_iter()
            .filter(|(n, _)| !(merged && is_overlay_xattr(n)))
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect())
    }

    fn images(&self) -> Vec<Arc<Filesystem>> {
        self.layers.clone()
    }

    fn totals(&self) -> (u64, u64) {
        self.layers.iter().fold((0, 0), |(size, count), fs| {
            (
                size + fs.total_fs_size(),
                count + u64::from(fs.layout().count),
            )
        })
    }

    fn cache(&self) -> &BlockCache {
        self.layers[0].cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_layers_are_refused_before_any_is_opened() {
        let paths = vec![std::path::PathBuf::from("/nonexistent"); MAX_LAYERS + 1];
        let e = crate::open::open(&crate::Target::new(paths)).unwrap_err();
        assert!(e.to_string().contains("at most 4096"), "{e}");
        assert!(Stack::from_layers(Vec::new()).is_err());
    }

    #[test]
    fn numbers_keep_layer_and_inode_apart() {
        assert_eq!(decode(encode(499, 7)), (499, 7));
        assert_eq!(decode(encode(0, u32::MAX)), (0, u32::MAX));
        assert!(is_overlay_xattr(BASE_XATTR));
        assert!(!is_overlay_xattr(b"user.mime_type"));
    }
}
