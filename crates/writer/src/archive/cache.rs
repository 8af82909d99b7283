//! Archives opened as images: `hoard mount x.tar.gz MNT` (and `ls`, `cat`,
//! `extract`) pack an archive once into an image kept in a cache
//! directory, then open that image. Later opens of the same archive find
//! it at once.
//!
//! Container images (`oci:LAYOUT[:TAG]`, `docker-archive:FILE[:REF]`,
//! `docker://HOST/REPO[:TAG|@DIGEST]`) are packed the same way, their
//! layers applied ([`crate::oci`]). A `docker://` name may also be a
//! hoard image pushed there (`hoard push`): this is the one place that
//! tells them apart, by the manifest. A pushed hoard image is no archive:
//! its name is opened as it is, and the remote reader reads it lazily.
//!
//! An image is named by a key of the archive's size, modification time,
//! a hash of its first and last MiB and the level it was packed at, so an
//! archive changed in place is packed anew; a container image's by the
//! digest of its manifest (which names every byte of it) and the level. Images are built as any
//! other ([`crate::output`]) and put in place when complete: a cache
//! never holds half an image, and two packers of one archive race
//! harmlessly.

use crate::level::Level;
use crate::{create, CreateOptions, Error, Progress, Result};
use hoard_oci::registry::artifact;
use hoard_reader::open::ArchiveImages;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use xxhash_rust::xxh3::Xxh3;

/// Level archives are packed at unless told otherwise: the fastest build.
pub const DEFAULT_LEVEL: u8 = 1;

/// Runs the build that packs an archive (with a progress display, say)
/// and gives the image's path.
pub type PackRunner = Arc<dyn Fn(Box<Pack>) -> Result<PathBuf> + Send + Sync>;

/// Where packed archives are kept and how they are packed; the
/// reader's opener packs and opens them through it
/// ([`ArchiveImages`]).
#[derive(Clone)]
pub struct ArchiveCache {
    /// The cache directory.
    pub dir: PathBuf,
    /// The level archives are packed at.
    pub level: u8,
    /// How packs are run; `None` runs them quietly.
    pub runner: Option<PackRunner>,
    /// How registries (`docker://…`) are reached.
    pub registry: hoard_oci::registry::Options,
}

impl std::fmt::Debug for ArchiveCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveCache")
            .field("dir", &self.dir)
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Default for ArchiveCache {
    /// `$XDG_CACHE_HOME/hoard` (else `~/.cache/hoard`) at level 1.
    fn default() -> Self {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        ArchiveCache {
            dir: base.join("hoard"),
            level: DEFAULT_LEVEL,
            runner: None,
            registry: hoard_oci::registry::Options::default(),
        }
    }
}

/// Whether `path` may be an archive: a local regular file that does not
/// start with DwarFS's magic (an image with a header before it still
/// may; [`is_archive`] tells).
fn may_be_archive(path: &Path) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut magic = [0u8; 6];
    !(file.read_exact(&mut magic).is_ok() && &magic == b"DWARFS")
}

/// Whether `path` is a local file that is an archive rather than an image:
/// [`may_be_archive`], and libarchive reads a first member (or a valid
/// empty archive) from it.
fn is_archive(path: &Path) -> bool {
    may_be_archive(path)
        && hoard_archive::ArchiveReader::open_file(path).is_ok_and(|mut r| r.next_member().is_ok())
}

/// An archive's image in the cache, or what it takes to make it.
enum Cached {
    /// The image, packed before.
    Ready(PathBuf),
    /// The image is not there yet.
    ToPack(Box<Pack>),
}

/// The build that packs an archive into the cache.
pub struct Pack {
    archive: PathBuf,
    options: CreateOptions,
}

impl Pack {
    /// The archive packed.
    pub fn archive(&self) -> &Path {
        &self.archive
    }

    /// Where the image will be.
    pub fn image(&self) -> &Path {
        &self.options.output.path
    }

    /// Packs the archive, reporting to `progress`; returns the image's
    /// path and the build's summary (warnings included).
    pub fn run(self, progress: &Progress) -> Result<(PathBuf, crate::Summary)> {
        let dir = self.options.scan.spool_dir.clone().unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let summary = create(&self.options, progress, Arc::new(AtomicBool::new(false)))?;
        Ok((self.options.output.path, summary))
    }
}

/// The container image `path` names (`oci:…`, `docker-archive:…`,
/// `docker://…`), if it names one.
fn container(path: &Path) -> Option<hoard_oci::Source> {
    path.to_str().and_then(hoard_oci::Source::parse)
}

impl ArchiveImages for ArchiveCache {
    fn is_archive(&self, path: &Path) -> bool {
        match container(path) {
            // A registry that cannot be asked: the remote reader's open
            // of the name says why.
            Some(source) => self.lookup_container(&source).is_ok_and(|c| c.is_some()),
            None => is_archive(path),
        }
    }

    fn image_for(&self, path: &Path) -> hoard_reader::Result<Option<PathBuf>> {
        let cannot = |what: &str, e: Error| {
            hoard_reader::Error::Io(format!("cannot {what} '{}': {e}", path.display()))
        };
        if let Some(source) = container(path) {
            // A registry's name may be a hoard image's: its error is not
            // a container image's.
            let what = match source {
                hoard_oci::Source::Registry { .. } => "read registry image",
                _ => "read container image",
            };
            let pack = match self.lookup_container(&source) {
                Ok(None) => return Ok(None),
                Ok(Some(Cached::Ready(image))) => return Ok(Some(image)),
                Ok(Some(Cached::ToPack(pack))) => pack,
                Err(e) => return Err(cannot(what, e)),
            };
            return self
                .pack(pack)
                .map(Some)
                .map_err(|e| cannot("pack container image", e));
        }
        if !may_be_archive(path) {
            return Ok(None);
        }
        // The cache first: telling an archive (a zip's central directory,
        // say) takes longer than finding its image.
        let pack = match self.lookup(path) {
            Ok(Cached::Ready(image)) => return Ok(Some(image)),
            Ok(Cached::ToPack(pack)) if is_archive(path) => pack,
            _ => return Ok(None),
        };
        self.pack(pack)
            .map(Some)
            .map_err(|e| cannot("pack archive", e))
    }
}

impl ArchiveCache {
    /// Runs `pack` as the cache says; returns the image's path.
    fn pack(&self, pack: Box<Pack>) -> Result<PathBuf> {
        match &self.runner {
            Some(run) => run(pack),
            None => pack.run(&Progress::default()).map(|(image, _)| image),
        }
    }

    /// The image of the container image `source` in the cache, named by
    /// its manifest's digest, or the build that makes it (from the
    /// manifest of that digest, whatever a tag names by then); `None`
    /// for a hoard image pushed to a registry, which is read as it is.
    fn lookup_container(&self, source: &hoard_oci::Source) -> Result<Option<Cached>> {
        let oci = |e: hoard_oci::Error| Error::Input(e.to_string());
        let opened = source.open(&self.registry).map_err(oci)?;
        let mut reference = opened.reference;
        if let hoard_oci::Source::Registry { .. } = source {
            let fetched = opened.store.manifest(&reference).map_err(oci)?;
            if artifact::parse(&fetched).map_err(oci)?.is_some() {
                return Ok(None);
            }
            reference = fetched.digest.to_string();
        }
        let image = hoard_oci::Image::resolve(&*opened.store, &reference, None).map_err(oci)?;
        let key = format!(
            "{}-{}.l{}",
            image.manifest_digest.algorithm(),
            image.manifest_digest.hex(),
            self.level
        );
        let pinned = PathBuf::from(source.name_with(&image.manifest_digest.to_string()));
        self.cached(&pinned, &key).map(Some)
    }

    /// The image of the archive at `archive` in the cache, or the build
    /// that makes it.
    fn lookup(&self, archive: &Path) -> Result<Cached> {
        self.cached(archive, &self.key(archive)?)
    }

    /// The image of `archive` in the cache under `key`, or the build
    /// that makes it.
    fn cached(&self, archive: &Path, key: &str) -> Result<Cached> {
        let image = self.dir.join(format!("{key}.dwarfs"));
        if image.is_file() {
            return Ok(Cached::Ready(image));
        }
        let level = Level::get(self.level)
            .ok_or_else(|| Error::Input(format!("archive level {} is not 0 to 9", self.level)))?;
        let mut options = CreateOptions::at_level(archive.to_path_buf(), image, level);
        options.scan.with_devices = true;
        options.scan.with_specials = true;
        options.scan.spool_dir = Some(self.dir.clone());
        options.registry = self.registry.clone();
        Ok(Cached::ToPack(Box::new(Pack {
            archive: archive.to_path_buf(),
            options,
        })))
    }

    /// The cache key of the archive at `path`.
    fn key(&self, path: &Path) -> Result<String> {
        let io = |e| Error::io(path, e);
        let mut file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let mut hash = Xxh3::new();
        for n in [meta.size(), meta.mtime() as u64, meta.mtime_nsec() as u64] {
            hash.update(&n.to_le_bytes());
        }
        hash.update(&[self.level]);
        let mut buf = vec![0u8; 1 << 20];
        for start in [0, meta.size().saturating_sub(1 << 20)] {
            file.seek(SeekFrom::Start(start)).map_err(io)?;
            let n = read_full(&mut file, &mut buf).map_err(io)?;
            hash.update(&buf[..n]);
        }
        Ok(format!("{:032x}", hash.digest128()))
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
