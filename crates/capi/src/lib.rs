//! The C API of hoard: `libhoard.so` / `libhoard.a` with `include/hoard.h`.
//!
//! A thin layer over [`hoard_reader::Stack`] (one image is a stack of
//! one, read as it is; several are read as one tree, delta layers on
//! their bases), opened through the reader's opener
//! ([`hoard_reader::open`]): each function converts its C arguments, calls the
//! reader, and converts the result to a C return value (0, a length, or
//! `-errno`). The message of the last failure on the
//! calling thread is kept for [`hoard_last_error`]. An image handle may be
//! used from any number of threads at once; no panic crosses the boundary
//! (one is caught and reported as `-EIO` with its message).

mod convert;

use convert::{c_path, errno_of, fill_stat, guard};
use hoard_reader::open::{open, Opened, Target};
use hoard_reader::{FileKind, Stack, View, ViewExt};
use libc::{c_char, c_int, c_void, off_t, ssize_t};
use std::cell::RefCell;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::Arc;

/// An open image or stack of images (opaque to C).
pub struct HoardImage {
    view: Stack,
}

thread_local! {
    /// The message of the last failure on this thread.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Called by [`hoard_readdir`] once per entry with its name, its
/// attributes and the caller's `ctx`; returning non-zero stops the listing.
pub type HoardReaddirCb = Option<
    unsafe extern "C" fn(name: *const c_char, st: *const libc::stat, ctx: *mut c_void) -> c_int,
>;

/// Opens the DwarFS image at `path` (an image after a prefix, such as a
/// shell script header, is found). Returns NULL on error; see
/// `hoard_last_error`. Close it with `hoard_close`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hoard_open(path: *const c_char) -> *mut HoardImage {
    hoard_open_with(path, 0)
}

/// Like `hoard_open`, keeping at most `cache_size` bytes of decompressed
/// blocks in memory (0: the default, 512 MiB).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_with(
    path: *const c_char,
    cache_size: usize,
) -> *mut HoardImage {
    let options = HoardOpenOptions {
        cache_size,
        ..HoardOpenOptions::default()
    };
    hoard_open_layers(&path, 1, &options)
}

/// Like `hoard_open_with`, opening the image only if it is signed by a
/// key in one of the `n_trust` public key files `trust` names (`hoard
/// keygen`'s NAME.pub or OpenSSH `ssh-ed25519` lines); every block is
/// then checked against the signature before use, and a read of a file
/// in a tampered block fails with `-EIO`. Returns NULL on error (an
/// unsigned image, a key not trusted, tampered metadata); see
/// `hoard_last_error`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `trust` points to
/// `n_trust` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_trusted(
    path: *const c_char,
    trust: *const *const c_char,
    n_trust: usize,
    cache_size: usize,
) -> *mut HoardImage {
    hoard_open_stack_trusted(&path, 1, trust, n_trust, cache_size)
}

/// Opens the `count` images `paths` names, bottom layer first, as one
/// tree, as `hoard mount LOWER... UPPER` shows it (overlayfs rules; a
/// `--delta` layer reads only on exactly the base images it was made
/// on); one image is read as it is. The handle works with every other
/// call; inode numbers of a stack of several do not fit 32 bits. Returns
/// NULL on error (an image that cannot be opened, a layer made on other
/// images than the ones below it, a delta layer without its bases); see
/// `hoard_last_error`.
///
/// # Safety
/// `paths` points to `count` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_stack(
    paths: *const *const c_char,
    count: usize,
) -> *mut HoardImage {
    hoard_open_layers(paths, count, std::ptr::null())
}

/// `hoard_open_stack` with the options of `hoard_open_trusted`: every
/// image must be signed by a key of the `n_trust` public key files
/// `trust` names (none given is an error), and at most
/// `cache_size` bytes of decompressed blocks (0: 512 MiB) are kept for
/// all layers together.
///
/// # Safety
/// `paths` points to `count` NUL-terminated strings, `trust` to
/// `n_trust`.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_stack_trusted(
    paths: *const *const c_char,
    count: usize,
    trust: *const *const c_char,
    n_trust: usize,
    cache_size: usize,
) -> *mut HoardImage {
    if trust.is_null() || n_trust == 0 {
        keep_error("no trusted key files given");
        return std::ptr::null_mut();
    }
    let options = HoardOpenOptions {
        trust,
        n_trust,
        cache_size,
        ..HoardOpenOptions::default()
    };
    hoard_open_layers(paths, count, &options)
}

/// What `hoard_open_layers` is told besides the images. All zero (`{0}`)
/// asks for the defaults: no signature required, no key for encrypted
/// images, 512 MiB of decompressed blocks kept.
#[repr(C)]
pub struct HoardOpenOptions {
    /// `n_trust` public key files (`hoard keygen`'s NAME.pub or OpenSSH
    /// `ssh-ed25519` lines): when `n_trust` is not 0, every image must be
    /// signed by one of their keys, and every block is checked against
    /// the signature before use.
    pub trust: *const *const c_char,
    /// The number of strings `trust` points to.
    pub n_trust: usize,
    /// `n_identity` identity files (age identities made by `age-keygen`,
    /// or unencrypted OpenSSH private keys) that may open encrypted
    /// images.
    pub identity: *const *const c_char,
    /// The number of strings `identity` points to.
    pub n_identity: usize,
    /// A file whose first line is the passphrase of encrypted images, or
    /// NULL.
    pub passphrase_file: *const c_char,
    /// Bytes of decompressed blocks kept for all layers together (0:
    /// 512 MiB).
    pub cache_size: usize,
    /// The name the signature of every image must claim (`hoard sign
    /// --sign-name`), or NULL; needs trusted keys.
    pub expect_name: *const c_char,
    /// The least version the signature of every image must claim
    /// (`--sign-version`); 0 for any. Needs trusted keys.
    pub min_version: u64,
}

impl Default for HoardOpenOptions {
    fn default() -> Self {
        HoardOpenOptions {
            trust: std::ptr::null(),
            n_trust: 0,
            identity: std::ptr::null(),
            n_identity: 0,
            passphrase_file: std::ptr::null(),
            cache_size: 0,
            expect_name: std::ptr::null(),
            min_version: 0,
        }
    }
}

/// Opens the `count` images `paths` names, bottom layer first, as
/// `hoard_open_stack` does, with `options` (NULL for the defaults):
/// signatures required, keys for encrypted images (each layer of a stack
/// may be encrypted, to any of the identities given), the cache size.
/// Returns NULL on error (an image that cannot be opened, is not signed
/// by a trusted key, or is encrypted to none of the identities); see
/// `hoard_last_error`.
///
/// # Safety
/// `paths` points to `count` NUL-terminated strings; `options` is NULL
/// or points to a `hoard_open_options` whose lists hold as many
/// NUL-terminated strings as it says.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_layers(
    paths: *const *const c_char,
    count: usize,
    options: *const HoardOpenOptions,
) -> *mut HoardImage {
    let opened = guard(|| {
        let mut target = Target::new(c_paths(paths, count)?);
        if let Some(o) = options.as_ref() {
            load_options(&mut target, o)?;
        }
        open(&target)
            .and_then(Opened::into_stack)
            .map_err(|e| (libc::EIO, e.to_string()))
    });
    match opened {
        Ok(view) => Box::into_raw(Box::new(HoardImage { view })),
        Err(e) => {
            keep_error(&e.1);
            std::ptr::null_mut()
        }
    }
}

/// Sets the options `o` gives on `target`, its key files loaded.
unsafe fn load_options(target: &mut Target, o: &HoardOpenOptions) -> Result<(), convert::Failure> {
    let key_error = |e: hoard_trust::Error| (libc::EINVAL, e.to_string());
    let options = &mut target.options;
    if o.n_trust > 0 {
        let files = c_paths(o.trust, o.n_trust)?;
        options.open.trust = Some(hoard_trust::TrustedKeys::load(&files).map_err(key_error)?);
    }
    let files = if o.n_identity > 0 {
        c_paths(o.identity, o.n_identity)?
    } else {
        Vec::new()
    };
    let passphrase = if o.passphrase_file.is_null() {
        None
    } else {
        c_paths(&o.passphrase_file, 1)?.pop()
    };
    let identities = hoard_trust::encrypt::Identities::given(&files, passphrase.as_deref());
    options.open.identities = identities.map_err(key_error)?.map(Arc::new);
    if o.cache_size > 0 {
        options.cache_size = o.cache_size;
    }
    if !o.expect_name.is_null() {
        let name = std::str::from_utf8(c_path(o.expect_name)?)
            .map_err(|_| (libc::EINVAL, "expect_name is not UTF-8".to_string()))?;
        options.open.expect.name = Some(name.to_string());
    }
    options.open.expect.min_version = (o.min_version > 0).then_some(o.min_version);
    Ok(())
}

/// The `count` paths at `paths`.
unsafe fn c_paths(
    paths: *const *const c_char,
    count: usize,
) -> Result<Vec<PathBuf>, convert::Failure> {
    if paths.is_null() || count == 0 {
        return Err((libc::EINVAL, "a list of paths is NULL or empty".into()));
    }
    (0..count)
        .map(|i| {
            let bytes = c_path(*paths.add(i))?;
            Ok(PathBuf::from(
                std::ffi::OsStr::from_encoded_bytes_unchecked(bytes),
            ))
        })
        .collect()
}

/// Like `hoard_open_with`, for an encrypted image: its data key is
/// unwrapped by one of the `n_identity` identity files `identity` names
/// (age identities made by `age-keygen`, or unencrypted OpenSSH private
/// keys) or by the passphrase in the first line of the file
/// `passphrase_file` (NULL for none). A plain image opens as with
/// `hoard_open_with`. Returns NULL on error (no identity opens the
/// image, a wrong passphrase, a damaged image); see `hoard_last_error`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `identity` points to
/// `n_identity` NUL-terminated strings (or is NULL when `n_identity` is
/// 0); `passphrase_file` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hoard_open_encrypted(
    path: *const c_char,
    identity: *const *const c_char,
    n_identity: usize,
    passphrase_file: *const c_char,
    cache_size: usize,
) -> *mut HoardImage {
    if n_identity == 0 && passphrase_file.is_null() {
        keep_error("no identity or passphrase file given");
        return std::ptr::null_mut();
    }
    let options = HoardOpenOptions {
        identity,
        n_identity,
        passphrase_file,
        cache_size,
        ..HoardOpenOptions::default()
    };
    hoard_open_layers(&path, 1, &options)
}

/// The message of the last failure of a hoard function on the calling
/// thread (NULL if none yet). Valid until the next failing call on this
/// thread.
#[no_mangle]
pub extern "C" fn hoard_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |s| s.as_ptr()))
}

/// Closes an image opened by `hoard_open` (NULL is ignored). No other call
/// may be using it.
///
/// # Safety
/// `img` is NULL or a handle from `hoard_open` not closed before.
#[no_mangle]
pub unsafe extern "C" fn hoard_close(img: *mut HoardImage) {
    if !img.is_null() {
        // A panic in a destructor is caught too; nothing can be reported.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(Box::from_raw(img))));
    }
}

/// The inode number of `path` (relative to the image root; symlinks are
/// not followed), for the `_inode` variants; or `-errno`.
///
/// # Safety
/// `img` is a handle from `hoard_open`; `path` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hoard_lookup(img: *mut HoardImage, path: *const c_char) -> i64 {
    result(|| {
        let ino = lookup(img, path)?.1;
        i64::try_from(ino).map_err(|_| (libc::EOVERFLOW, format!("inode {ino} too large")))
    })
}

/// Fills `st` with the attributes of `path` (symlinks are not followed).
/// Returns 0 or `-errno` (`-ENOENT` when there is no such entry).
///
/// # Safety
/// `img` is a handle from `hoard_open`; `path` a NUL-terminated string;
/// `st` points to a `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn hoard_stat(
    img: *mut HoardImage,
    path: *const c_char,
    st: *mut libc::stat,
) -> c_int {
    result(|| {
        let (image, ino) = lookup(img, path)?;
        stat_into(image, ino, st)
    })
}

/// `hoard_stat` by inode number.
///
/// # Safety
/// `img` is a handle from `hoard_open`; `st` points to a `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn hoard_stat_inode(
    img: *mut HoardImage,
    ino: u64,
    st: *mut libc::stat,
) -> c_int {
    result(|| stat_into(image(img)?, ino, st))
}

/// Reads up to `size` bytes of regular file `path` at `offset` into `buf`.
/// Returns the number of bytes read (less than `size` only at the end of
/// the file) or `-errno` (`-EISDIR`, `-EINVAL` for other non-files).
///
/// # Safety
/// `img` is a handle from `hoard_open`; `path` a NUL-terminated string;
/// `buf` has room for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn hoard_read(
    img: *mut HoardImage,
    path: *const c_char,
    buf: *mut c_void,
    size: usize,
    offset: off_t,
) -> ssize_t {
    result(|| {
        let (image, ino) = lookup(img, path)?;
        read_into(image, ino, buf, size, offset)
    })
}

/// `hoard_read` by inode number.
///
/// # Safety
/// `img` is a handle from `hoard_open`; `buf` has room for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn hoard_read_inode(
    img: *mut HoardImage,
    ino: u64,
    buf: *mut c_void,
    size: usize,
    offset: off_t,
) -> ssize_t {
    result(|| read_into(image(img)?, ino, buf, size, offset))
}

/// Copies the target of symlink `path`, NUL-terminated, into `buf`.
/// Returns its length (without the NUL), `-ERANGE` when `size` is not
/// larger than that, `-EINVAL` when `path` is not a symlink, or `-errno`.
///
/// # Safety
/// `img` is a handle from `hoard_open`; `path` a NUL-terminated string;
/// `buf` has room for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn hoard_readlink(
    img: *mut HoardImage,
    path: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    result(|| {
        let (image, ino) = lookup(img, path)?;
        if image.view.stat(ino).map_err(errno_of)?.kind != FileKind::Symlink {
            return Err((libc::EINVAL, "not a symbolic link".into()));
        }
        let target = image.view.readlink(ino).map_err(errno_of)?;
        if target.len() >= size || target.len() >= c_int::MAX as usize {
            return Err((
                libc::ERANGE,
                format!(
                    "buffer of {size} bytes too small for a target of {} bytes",
                    target.len()
                ),
            ));
        }
        if buf.is_null() {
            return Err((libc::EINVAL, "buffer is NULL".into()));
        }
        std::ptr::copy_nonoverlapping(target.as_ptr(), buf.cast::<u8>(), target.len());
        *buf.add(target.len()) = 0;
        Ok(target.len() as i64)
    })
}

/// Calls `cb` for each entry of directory `path` in stored (sorted) order,
/// without `.` and `..`, with its name, attributes and `ctx`. Stops when
/// `cb` returns non-zero. Returns 0 or `-errno` (`-ENOTDIR`, ...).
///
/// # Safety
/// `img` is a handle from `hoard_open`; `path` a NUL-terminated string;
/// `cb` a valid function.
#[no_mangle]
pub unsafe extern "C" fn hoard_readdir(
    img: *mut HoardImage,
    path: *const c_char,
    cb: HoardReaddirCb,
    ctx: *mut c_void,
) -> c_int {
    result(|| {
        let (image, ino) = lookup(img, path)?;
        let cb = cb.ok_or_else(|| (libc::EINVAL, "callback is NULL".to_string()))?;
        if image.view.stat(ino).map_err(errno_of)?.kind != FileKind::Directory {
            return Err((libc::ENOTDIR, "not a directory".into()));
        }
        for entry in image.view.entries(ino).map_err(errno_of)? {
            let st = fill_stat(&image.view, entry.ino)?;
            let Ok(name) = CString::new(entry.name) else {
                return Err((libc::EIO, "entry name contains a NUL byte".into()));
            };
            if cb(name.as_ptr(), &st, ctx) != 0 {
                break;
            }
        }
        Ok(0)
    })
}

/// Runs `f`, turning its error (and any panic) into `-errno` with the
/// message kept for [`hoard_last_error`].
fn result<T: TryFrom<i64> + Default>(f: impl FnOnce() -> Result<i64, convert::Failure>) -> T {
    let value = guard(f).unwrap_or_else(|(errno, message)| {
        keep_error(&message);
        -i64::from(errno)
    });
    T::try_from(value).unwrap_or_default()
}

/// The image behind `img`.
unsafe fn image<'a>(img: *mut HoardImage) -> Result<&'a HoardImage, convert::Failure> {
    img.as_ref()
        .ok_or_else(|| (libc::EINVAL, "image handle is NULL".to_string()))
}

/// The image behind `img` and the inode at `path`.
unsafe fn lookup<'a>(
    img: *mut HoardImage,
    path: *const c_char,
) -> Result<(&'a HoardImage, u64), convert::Failure> {
    let image = image(img)?;
    let bytes = c_path(path)?;
    let ino = image.view.lookup_path_bytes(bytes).map_err(errno_of)?;
    Ok((image, ino))
}

unsafe fn stat_into(
    image: &HoardImage,
    ino: u64,
    st: *mut libc::stat,
) -> Result<i64, convert::Failure> {
    let filled = fill_stat(&image.view, ino)?;
    let st = st
        .as_mut()
        .ok_or_else(|| (libc::EINVAL, "stat buffer is NULL".to_string()))?;
    *st = filled;
    Ok(0)
}

unsafe fn read_into(
    image: &HoardImage,
    ino: u64,
    buf: *mut c_void,
    size: usize,
    offset: off_t,
) -> Result<i64, convert::Failure> {
    let at = image.view.locate(ino).map_err(errno_of)?;
    match at.fs.kind(at.ino).map_err(errno_of)? {
        FileKind::Regular => {}
        FileKind::Directory => return Err((libc::EISDIR, "is a directory".into())),
        _ => return Err((libc::EINVAL, "not a regular file".into())),
    }
    let offset =
        u64::try_from(offset).map_err(|_| (libc::EINVAL, "negative offset".to_string()))?;
    if size == 0 {
        return Ok(0);
    }
    if buf.is_null() {
        return Err((libc::EINVAL, "buffer is NULL".into()));
    }
    let size = size.min(isize::MAX as usize);
    let out = std::slice::from_raw_parts_mut(buf.cast::<u8>(), size);
    let n = at.fs.read(at.ino, offset, out).map_err(errno_of)?;
    Ok(n as i64)
}

/// Keeps `message` as this thread's last error.
fn keep_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}
