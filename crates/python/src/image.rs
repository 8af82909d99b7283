//! `hoard._hoard.Image`: an open image, over [`hoard_reader::Filesystem`].
//! Every call releases the GIL while the reader works, so threads read in
//! parallel; the file system is shared, and `close` only drops this
//! handle's reference (reads under way finish first).

use crate::errors::{extract_error, image_error, is_a_directory, not_a_directory, reader_error};
use hoard_reader::extract::{self, ExtractOptions, Patterns, XattrRestore};
use hoard_reader::{check, FileKind, Filesystem, FsOptions, ImageOffset, OpenOptions, Stat};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// An open DwarFS image (the compiled core of `hoard.Image`).
#[pyclass(module = "hoard._hoard", frozen)]
pub struct Image {
    /// The image file.
    path: PathBuf,
    /// How it was opened (for `check`, which opens it again).
    open: OpenOptions,
    cache_size: usize,
    /// None once closed.
    fs: RwLock<Option<Arc<Filesystem>>>,
}

/// A path inside the image as the bytes to look up and as text for errors.
fn inner(path: &Path) -> (&[u8], String) {
    (path.as_os_str().as_bytes(), path.display().to_string())
}

/// The stat tuple the Python side turns into an `os.stat_result`: mode,
/// ino, nlink, uid, gid, size, atime, mtime, ctime (each as seconds and
/// nanoseconds), rdev, blocks (of 512 bytes), blksize.
type StatTuple = (
    u32,
    u32,
    u32,
    u32,
    u32,
    u64,
    (i64, u32),
    (i64, u32),
    (i64, u32),
    u64,
    u64,
    u32,
);

fn stat_tuple(st: &Stat, block_size: u32) -> StatTuple {
    let blocks = match st.kind {
        FileKind::Regular => st.allocated_size.div_ceil(512),
        _ => 0,
    };
    (
        st.mode,
        st.ino,
        st.nlink,
        st.uid,
        st.gid,
        st.size,
        (st.atime.sec, st.atime.nsec),
        (st.mtime.sec, st.mtime.nsec),
        (st.ctime.sec, st.ctime.nsec),
        st.rdev,
        blocks,
        block_size,
    )
}

impl Image {
    /// The file system, or an error once closed.
    fn fs(&self) -> PyResult<Arc<Filesystem>> {
        self.fs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on a closed image"))
    }

    /// Runs `f` on the file system without the GIL.
    fn with_fs<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Filesystem) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        let fs = self.fs()?;
        py.detach(|| f(&fs))
    }
}

/// The inode `path` names (following symlinks, the last one too if `follow`).
fn resolve(fs: &Filesystem, path: &Path, follow: bool) -> PyResult<u32> {
    let (bytes, text) = inner(path);
    fs.resolve_path(bytes, follow)
        .map_err(|e| reader_error(e, &text, false))
}

#[pymethods]
impl Image {
    /// Opens the image at `path`; `offset` is "auto" (find the image
    /// after any header) or a byte offset; `cache_size` the bytes of
    /// decompressed blocks kept in memory (default 512 MiB); `trust`
    /// public key files, of which one key must have signed the image
    /// (every block is then checked against the signature); `identity`
    /// identity files (age or OpenSSH private keys) and `passphrase_file`
    /// a file holding a passphrase, one of which opens an encrypted image.
    #[new]
    #[pyo3(signature = (path, offset=None, cache_size=None, trust=None, identity=None, passphrase_file=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        offset: Option<&Bound<'_, PyAny>>,
        cache_size: Option<usize>,
        trust: Option<Vec<PathBuf>>,
        identity: Option<Vec<PathBuf>>,
        passphrase_file: Option<PathBuf>,
    ) -> PyResult<Self> {
        let offset = match offset {
            None => ImageOffset::Auto,
            Some(o) => match o.extract::<u64>() {
                Ok(n) => ImageOffset::At(n),
                Err(_) => o
                    .extract::<String>()?
                    .parse()
                    .map_err(PyValueError::new_err)?,
            },
        };
        // A missing or unreadable file is the usual OSError subclass.
        std::fs::metadata(&path).map_err(PyErr::from)?;
        let mut options = FsOptions::default();
        options.open.offset = offset;
        if let Some(files) = trust {
            let keys = hoard_trust::TrustedKeys::load(&files)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            options.open.trust = Some(keys);
        }
        if identity.is_some() || passphrase_file.is_some() {
            let mut ids = hoard_trust::encrypt::Identities::load(&identity.unwrap_or_default())
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            if let Some(p) = &passphrase_file {
                ids.add_passphrase(p)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
            }
            options.open.identities = Some(Arc::new(ids));
        }
        if let Some(size) = cache_size {
            options.cache_size = size;
        }
        let fs = py
            .detach(|| Filesystem::open(&path, &options))
            .map_err(|e| image_error(format!("cannot open image '{}': {e}", path.display())))?;
        Ok(Image {
            open: options.open.clone(),
            cache_size: options.cache_size,
            path,
            fs: RwLock::new(Some(Arc::new(fs))),
        })
    }

    /// Drops the image (reads under way in other threads finish first).
    fn close(&self) {
        *self.fs.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.fs.read().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// The image file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The inode number of `path` (symlinks followed, the last one only
    /// if `follow`).
    fn lookup(&self, py: Python<'_>, path: PathBuf, follow: bool) -> PyResult<u32> {
        self.with_fs(py, |fs| resolve(fs, &path, follow))
    }

    /// The attributes of `path` as a tuple (see `hoard.Image.stat`).
    fn stat(&self, py: Python<'_>, path: PathBuf, follow: bool) -> PyResult<StatTuple> {
        self.with_fs(py, |fs| {
            let ino = resolve(fs, &path, follow)?;
            let st = fs
                .stat(ino)
                .map_err(|e| reader_error(e, &inner(&path).1, false))?;
            Ok(stat_tuple(&st, fs.block_size()))
        })
    }

    /// The entries of directory `path`: (name, inode, mode) each.
    fn scandir(&self, py: Python<'_>, path: PathBuf) -> PyResult<Vec<(PathBuf, u32, u32)>> {
        self.with_fs(py, |fs| {
            let text = inner(&path).1;
            let ino = resolve(fs, &path, true)?;
            if fs.kind(ino).map_err(|e| reader_error(e, &text, true))? != FileKind::Directory {
                return Err(not_a_directory(&text));
            }
            let entries = fs.readdir(ino).map_err(|e| reader_error(e, &text, true))?;
            entries
                .into_iter()
                .map(|e| {
                    let mode = fs.stat(e.ino).map_err(image_error)?.mode;
                    let name = PathBuf::from(std::ffi::OsStr::from_bytes(&e.name));
                    Ok((name, e.ino, mode))
                })
                .collect()
        })
    }

    /// The target of symlink `path`.
    fn readlink(&self, py: Python<'_>, path: PathBuf) -> PyResult<PathBuf> {
        self.with_fs(py, |fs| {
            let ino = resolve(fs, &path, false)?;
            let text = inner(&path).1;
            if fs.kind(ino).map_err(image_error)? != FileKind::Symlink {
                return Err(PyOSError::new_err((libc::EINVAL, "Invalid argument", text)));
            }
            let target = fs
                .readlink(ino)
                .map_err(|e| reader_error(e, &text, false))?;
            Ok(PathBuf::from(std::ffi::OsStr::from_bytes(target)))
        })
    }

    /// Up to `size` bytes (all if None) of regular file inode `ino` at
    /// `offset`; fewer only at the end of the file.
    #[pyo3(signature = (ino, offset=0, size=None))]
    fn pread<'py>(
        &self,
        py: Python<'py>,
        ino: u32,
        offset: u64,
        size: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let fs = self.fs()?;
        let st = py.detach(|| fs.stat(ino)).map_err(image_error)?;
        if st.kind != FileKind::Regular {
            return Err(is_a_directory(&format!("inode {ino}")));
        }
        let available = st.size.saturating_sub(offset);
        let len = size.map_or(available, |s| (s as u64).min(available));
        let len = usize::try_from(len).map_err(|_| PyValueError::new_err("file too large"))?;
        let mut failure = None;
        let bytes = PyBytes::new_with(py, len, |buf| {
            if let Err(e) = py.detach(|| fs.read(ino, offset, buf)) {
                failure = Some(e);
            }
            Ok(())
        })?;
        match failure {
            Some(e) => Err(image_error(e)),
            None => Ok(bytes),
        }
    }

    /// The extended attribute `name` of `path`.
    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        name: &str,
        follow: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let value = self.with_fs(py, |fs| {
            let ino = resolve(fs, &path, follow)?;
            let attrs = fs.xattrs(ino).map_err(image_error)?;
            Ok(attrs
                .into_iter()
                .find(|(n, _)| *n == name.as_bytes())
                .map(|(_, v)| v.to_vec()))
        })?;
        match value {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(PyOSError::new_err((
                libc::ENODATA,
                "No data available",
                format!("{}: {name}", path.display()),
            ))),
        }
    }

    /// The names of the extended attributes of `path`.
    fn listxattr(&self, py: Python<'_>, path: PathBuf, follow: bool) -> PyResult<Vec<String>> {
        self.with_fs(py, |fs| {
            let ino = resolve(fs, &path, follow)?;
            let attrs = fs.xattrs(ino).map_err(image_error)?;
            Ok(attrs
                .into_iter()
                .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
                .collect())
        })
    }

    /// Writes the entries matching `patterns` (all without) into directory
    /// `dest`, as `hoard extract` does (see `hoard.Image.extract`).
    #[pyo3(signature = (dest, patterns, owners=None, xattrs=true, devices=true, specials=true))]
    #[allow(clippy::too_many_arguments)]
    fn extract(
        &self,
        py: Python<'_>,
        dest: PathBuf,
        patterns: Vec<String>,
        owners: Option<bool>,
        xattrs: bool,
        devices: bool,
        specials: bool,
    ) -> PyResult<()> {
        let patterns = Patterns::new(&patterns).map_err(extract_error)?;
        let mut options = ExtractOptions::for_current_user();
        options.owners = owners.unwrap_or(options.owners);
        options.devices &= devices;
        options.specials = specials;
        if !xattrs {
            options.xattrs = XattrRestore::None;
        }
        // Extraction reads through a view: here a stack of this one image.
        let fs = self.fs()?;
        py.detach(|| {
            let view =
                hoard_reader::Stack::from_layers(vec![fs]).map_err(crate::errors::image_error)?;
            extract::extract(&view, &dest, &patterns, &options)
                .map(drop)
                .map_err(extract_error)
        })
    }

    /// The image's history: one dict per write or rewrite (see
    /// `hoard.Image.history`); empty when it has none.
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        use hoard_format::history::decode_history;
        use hoard_format::section::SectionType;
        let fs = self.fs()?;
        let entries = py.detach(|| {
            let image = fs.image();
            match image.find(SectionType::HISTORY) {
                None => Ok(Vec::new()),
                Some(s) => image
                    .load(s, 1 << 24)
                    .and_then(|p| decode_history(&p).map_err(Into::into)),
            }
        });
        entries
            .map_err(image_error)?
            .iter()
            .map(|h| {
                let dict = PyDict::new(py);
                dict.set_item("version", h.version.to_string())?;
                dict.set_item("git_desc", &h.version.git_desc)?;
                dict.set_item("system", &h.system_id)?;
                dict.set_item("compiler", &h.compiler_id)?;
                dict.set_item("arguments", &h.arguments)?;
                dict.set_item("timestamp", h.timestamp)?;
                dict.set_item("libraries", &h.library_versions)?;
                Ok(dict)
            })
            .collect()
    }

    /// Verifies the image as `hoard check` does (`full` also reads all
    /// data): a dict with "ok", "problems", "sections", "blocks", "inodes".
    fn check<'py>(&self, py: Python<'py>, full: bool) -> PyResult<Bound<'py, PyDict>> {
        let report = py.detach(|| {
            check::check_image(
                || hoard_reader::Image::open(&self.path, &self.open),
                self.cache_size,
                full,
            )
        });
        let dict = PyDict::new(py);
        dict.set_item("ok", report.problems.is_empty())?;
        dict.set_item("problems", report.problems)?;
        dict.set_item("sections", report.sections)?;
        dict.set_item("blocks", report.blocks)?;
        dict.set_item("inodes", report.inodes)?;
        Ok(dict)
    }

    /// Facts about the image (see `hoard.Image.info`).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fs = self.fs()?;
        let image = fs.image();
        let version = image.version();
        let dict = PyDict::new(py);
        dict.set_item("path", &self.path)?;
        dict.set_item(
            "format_version",
            format!("{}.{}", version.major, version.minor),
        )?;
        dict.set_item("image_offset", image.offset())?;
        dict.set_item("file_size", image.file_size())?;
        dict.set_item("block_size", fs.block_size())?;
        dict.set_item("blocks", fs.block_count())?;
        dict.set_item("inodes", fs.layout().count)?;
        dict.set_item("total_fs_size", fs.total_fs_size())?;
        let sections: Vec<String> = image
            .sections()
            .iter()
            .map(|s| s.header.kind.name())
            .collect();
        dict.set_item("sections", sections)?;
        let mut categories: Vec<&str> = (0..fs.block_count() as u32)
            .filter_map(|b| fs.block_category(b))
            .collect();
        categories.sort_unstable();
        categories.dedup();
        dict.set_item("categories", categories)?;
        dict.set_item("has_xattrs", fs.has_xattrs())?;
        dict.set_item("has_recovery_data", image.recovery().is_some())?;
        Ok(dict)
    }
}
