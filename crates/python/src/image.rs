//! `hoard._hoard.Image`: an open image, or a stack of images read as one
//! tree (overlayfs rules, delta layers on their bases), over
//! [`hoard_reader::Stack`]: one image is a stack of one, read as it is.
//! Every call releases the GIL while the reader works, so threads read in
//! parallel; the stack is shared, and `close` only drops this handle's
//! reference (reads under way finish first).

use crate::errors::{extract_error, image_error, is_a_directory, not_a_directory, reader_error};
use hoard_reader::extract::{self, ExtractOptions, Patterns, XattrRestore};
use hoard_reader::open::{open, Form, Target};
use hoard_reader::{check, FileKind, Filesystem, ImageOffset, Stack, Stat, View, ViewExt};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// An open DwarFS image or stack of images (the compiled core of
/// `hoard.Image`).
#[pyclass(module = "hoard._hoard", frozen)]
pub struct Image {
    /// The image files, bottom layer first.
    paths: Vec<PathBuf>,
    /// How each is opened again, as its sections (for `check`).
    target: Target,
    /// None once closed.
    view: RwLock<Option<Arc<Stack>>>,
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
    u64,
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

/// The stat tuple of view inode `ino`, whose attributes are `st`.
fn stat_tuple(ino: u64, st: &Stat, block_size: u32) -> StatTuple {
    let blocks = match st.kind {
        FileKind::Regular => st.allocated_size.div_ceil(512),
        _ => 0,
    };
    (
        st.mode,
        ino,
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
    /// The stack, or an error once closed.
    fn view(&self) -> PyResult<Arc<Stack>> {
        self.view
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on a closed image"))
    }

    /// Runs `f` on the stack without the GIL.
    fn with_view<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Stack) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        let view = self.view()?;
        py.detach(|| f(&view))
    }

    /// The top layer (the image itself when there is one).
    fn top(&self) -> PyResult<Arc<Filesystem>> {
        let view = self.view()?;
        let top = view.layers().last().cloned();
        top.ok_or_else(|| image_error("a stack needs at least one image"))
    }
}

/// The inode `path` names (following symlinks, the last one too if `follow`).
fn resolve(view: &Stack, path: &Path, follow: bool) -> PyResult<u64> {
    let (bytes, text) = inner(path);
    view.resolve_path(bytes, follow)
        .map_err(|e| reader_error(e, &text, false))
}

/// The identity files `identity` and the passphrase in
/// `passphrase_file`, loaded; `None` when neither is given.
pub(crate) fn identities(
    identity: Option<Vec<PathBuf>>,
    passphrase_file: Option<&Path>,
) -> PyResult<Option<Arc<hoard_trust::encrypt::Identities>>> {
    hoard_trust::encrypt::Identities::given(&identity.unwrap_or_default(), passphrase_file)
        .map(|ids| ids.map(Arc::new))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The keys in the public key files `trust`; `None` when none is given.
pub(crate) fn trusted_keys(
    trust: Option<Vec<PathBuf>>,
) -> PyResult<Option<hoard_trust::TrustedKeys>> {
    trust
        .map(|files| hoard_trust::TrustedKeys::load(&files))
        .transpose()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymethods]
impl Image {
    /// Opens the images at `paths` as one tree, bottom layer first (one
    /// image is read as it is); `offset` is "auto" (find each image
    /// after any header) or a byte offset; `cache_size` the bytes of
    /// decompressed blocks kept in memory (default 512 MiB), shared by
    /// all layers; `trust` public key files, of which one key must have
    /// signed each image (every block is then checked against the
    /// signature); `identity` identity files (age or OpenSSH private keys)
    /// and `passphrase_file` a file holding a passphrase, one of which
    /// opens each encrypted image; `force_stack` stacks layers made on
    /// other images; `expect_name` and `min_version` what the signatures
    /// must claim (with `trust`; an expired signature is always refused).
    #[new]
    #[pyo3(signature = (paths, offset=None, cache_size=None, trust=None, identity=None, passphrase_file=None, force_stack=false, expect_name=None, min_version=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: Vec<PathBuf>,
        offset: Option<&Bound<'_, PyAny>>,
        cache_size: Option<usize>,
        trust: Option<Vec<PathBuf>>,
        identity: Option<Vec<PathBuf>>,
        passphrase_file: Option<PathBuf>,
        force_stack: bool,
        expect_name: Option<String>,
        min_version: Option<u64>,
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
        if paths.is_empty() {
            return Err(PyValueError::new_err("no image given"));
        }
        let mut target = Target::new(paths.clone());
        target.form = Form::Stack { force: force_stack };
        target.options.open.offset = offset;
        target.options.open.trust = trusted_keys(trust)?;
        target.options.open.expect = hoard_reader::Expectations {
            name: expect_name,
            min_version,
        };
        target.options.open.identities = identities(identity, passphrase_file.as_deref())?;
        if let Some(size) = cache_size {
            target.options.cache_size = size;
        }
        for path in &paths {
            // A missing or unreadable file is the usual OSError subclass.
            std::fs::metadata(path).map_err(PyErr::from)?;
        }
        let stack = py
            .detach(|| open(&target)?.into_stack())
            .map_err(image_error)?;
        target.form = Form::Sections;
        Ok(Image {
            target,
            paths,
            view: RwLock::new(Some(Arc::new(stack))),
        })
    }

    /// Drops the image (reads under way in other threads finish first).
    fn close(&self) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.view
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// The image files, bottom layer first.
    #[getter]
    fn paths(&self) -> Vec<PathBuf> {
        self.paths.clone()
    }

    /// The inode number of `path` (symlinks followed, the last one only
    /// if `follow`).
    fn lookup(&self, py: Python<'_>, path: PathBuf, follow: bool) -> PyResult<u64> {
        self.with_view(py, |view| resolve(view, &path, follow))
    }

    /// The attributes of `path` as a tuple (see `hoard.Image.stat`).
    fn stat(&self, py: Python<'_>, path: PathBuf, follow: bool) -> PyResult<StatTuple> {
        self.with_view(py, |view| {
            let ino = resolve(view, &path, follow)?;
            let at = view.locate(ino).map_err(image_error)?;
            let st = at
                .fs
                .stat(at.ino)
                .map_err(|e| reader_error(e, &inner(&path).1, false))?;
            Ok(stat_tuple(ino, &st, at.fs.block_size()))
        })
    }

    /// The entries of directory `path`: (name, inode, mode) each.
    fn scandir(&self, py: Python<'_>, path: PathBuf) -> PyResult<Vec<(PathBuf, u64, u32)>> {
        self.with_view(py, |view| {
            let text = inner(&path).1;
            let ino = resolve(view, &path, true)?;
            let kind = view
                .stat(ino)
                .map_err(|e| reader_error(e, &text, true))?
                .kind;
            if kind != FileKind::Directory {
                return Err(not_a_directory(&text));
            }
            let entries = view
                .entries(ino)
                .map_err(|e| reader_error(e, &text, true))?;
            entries
                .into_iter()
                .map(|e| {
                    let mode = view.stat(e.ino).map_err(image_error)?.mode;
                    let name = PathBuf::from(std::ffi::OsStr::from_bytes(&e.name));
                    Ok((name, e.ino, mode))
                })
                .collect()
        })
    }

    /// The target of symlink `path`.
    fn readlink(&self, py: Python<'_>, path: PathBuf) -> PyResult<PathBuf> {
        self.with_view(py, |view| {
            let ino = resolve(view, &path, false)?;
            let text = inner(&path).1;
            if view.stat(ino).map_err(image_error)?.kind != FileKind::Symlink {
                return Err(PyOSError::new_err((libc::EINVAL, "Invalid argument", text)));
            }
            let target = view
                .readlink(ino)
                .map_err(|e| reader_error(e, &text, false))?;
            Ok(PathBuf::from(std::ffi::OsString::from_vec(target)))
        })
    }

    /// Up to `size` bytes (all if None) of regular file inode `ino` at
    /// `offset`; fewer only at the end of the file.
    #[pyo3(signature = (ino, offset=0, size=None))]
    fn pread<'py>(
        &self,
        py: Python<'py>,
        ino: u64,
        offset: u64,
        size: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let view = self.view()?;
        let at = py.detach(|| view.locate(ino)).map_err(image_error)?;
        let (fs, file) = (at.fs, at.ino);
        let st = py.detach(|| fs.stat(file)).map_err(image_error)?;
        if st.kind != FileKind::Regular {
            return Err(is_a_directory(&format!("inode {ino}")));
        }
        let available = st.size.saturating_sub(offset);
        let len = size.map_or(available, |s| (s as u64).min(available));
        let len = usize::try_from(len).map_err(|_| PyValueError::new_err("file too large"))?;
        let mut failure = None;
        let bytes = PyBytes::new_with(py, len, |buf| {
            if let Err(e) = py.detach(|| fs.read(file, offset, buf)) {
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
        let value = self.with_view(py, |view| {
            let ino = resolve(view, &path, follow)?;
            let attrs = view.xattrs(ino).map_err(image_error)?;
            Ok(attrs
                .into_iter()
                .find(|(n, _)| n == name.as_bytes())
                .map(|(_, v)| v))
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
        self.with_view(py, |view| {
            let ino = resolve(view, &path, follow)?;
            let attrs = view.xattrs(ino).map_err(image_error)?;
            Ok(attrs
                .into_iter()
                .map(|(n, _)| String::from_utf8_lossy(&n).into_owned())
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
        let view = self.view()?;
        py.detach(|| {
            extract::extract(&*view, &dest, &patterns, &options)
                .map(drop)
                .map_err(extract_error)
        })
    }

    /// The (top) image's history: one dict per write or rewrite (see
    /// `hoard.Image.history`); empty when it has none.
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        use hoard_format::history::decode_history;
        use hoard_format::section::SectionType;
        let fs = self.top()?;
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

    /// Verifies each image as `hoard check` does (`full` also reads all
    /// data): a dict with "ok", "problems" (prefixed with the image's
    /// path in a stack), and "sections", "blocks", "inodes" summed over
    /// the images.
    fn check<'py>(&self, py: Python<'py>, full: bool) -> PyResult<Bound<'py, PyDict>> {
        let stacked = self.paths.len() > 1;
        let (mut problems, mut sections, mut blocks, mut inodes) = (Vec::new(), 0, 0, 0);
        for path in &self.paths {
            let mut target = self.target.clone();
            target.images = vec![path.clone()];
            let report = py.detach(|| {
                check::check_image(
                    || open(&target)?.into_sections(),
                    target.options.cache_size,
                    full,
                )
            });
            problems.extend(report.problems.into_iter().map(|p| match stacked {
                true => format!("{}: {p}", path.display()),
                false => p,
            }));
            sections += report.sections;
            blocks += report.blocks;
            inodes += report.inodes;
        }
        let dict = PyDict::new(py);
        dict.set_item("ok", problems.is_empty())?;
        dict.set_item("problems", problems)?;
        dict.set_item("sections", sections)?;
        dict.set_item("blocks", blocks)?;
        dict.set_item("inodes", inodes)?;
        Ok(dict)
    }

    /// Facts about the (top) image (see `hoard.Image.info`).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fs = self.top()?;
        let image = fs.image();
        let version = image.version();
        let dict = PyDict::new(py);
        dict.set_item("path", self.paths.last())?;
        dict.set_item("layers", &self.paths)?;
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
