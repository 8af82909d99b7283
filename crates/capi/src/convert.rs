//! Conversions between the reader's types and C's: paths, errors as
//! `errno` values, attributes as `struct stat`, and panics caught.

use hoard_reader::{Error, FileKind, Stack, View};
use libc::c_char;
use std::ffi::CStr;

/// A failure: the `errno` value to return (negated) and its message.
pub type Failure = (i32, String);

/// Runs `f`, turning a panic into an `EIO` failure.
pub fn guard<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err((libc::EIO, format!("internal error: {what}")))
    })
}

/// The bytes of the NUL-terminated path `path`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string that outlives the result.
pub unsafe fn c_path<'a>(path: *const c_char) -> Result<&'a [u8], Failure> {
    if path.is_null() {
        return Err((libc::EINVAL, "path is NULL".into()));
    }
    Ok(CStr::from_ptr(path).to_bytes())
}

/// The `errno` value and message of a reader error.
pub fn errno_of(e: Error) -> Failure {
    let errno = match &e {
        Error::NotFound(_) => libc::ENOENT,
        Error::WrongType(_) => libc::EINVAL,
        Error::Unsupported(_) => libc::ENOTSUP,
        Error::Io(_) | Error::Corrupt(_) => libc::EIO,
    };
    (errno, e.to_string())
}

/// The attributes of inode `ino` of `view` as a `struct stat` (with the
/// view's inode number).
pub fn fill_stat(view: &Stack, ino: u64) -> Result<libc::stat, Failure> {
    let at = view.locate(ino).map_err(errno_of)?;
    let (fs, s) = (&at.fs, at.fs.stat(at.ino).map_err(errno_of)?);
    // SAFETY: struct stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_ino = ino as libc::ino_t;
    st.st_mode = s.mode as libc::mode_t;
    st.st_nlink = s.nlink as libc::nlink_t;
    st.st_uid = s.uid;
    st.st_gid = s.gid;
    st.st_size = s.size as libc::off_t;
    st.st_blksize = fs.block_size() as libc::blksize_t;
    st.st_blocks = if s.kind == FileKind::Regular {
        s.allocated_size.div_ceil(512) as libc::blkcnt_t
    } else {
        0
    };
    st.st_rdev = s.rdev as libc::dev_t;
    st.st_atime = s.atime.sec as libc::time_t;
    st.st_atime_nsec = i64::from(s.atime.nsec) as _;
    st.st_mtime = s.mtime.sec as libc::time_t;
    st.st_mtime_nsec = i64::from(s.mtime.nsec) as _;
    st.st_ctime = s.ctime.sec as libc::time_t;
    st.st_ctime_nsec = i64::from(s.ctime.nsec) as _;
    Ok(st)
}
