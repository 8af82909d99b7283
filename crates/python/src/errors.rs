//! Reader and writer errors as Python exceptions.

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyNotADirectoryError, PyOSError, PyValueError,
};
use pyo3::prelude::*;

pyo3::create_exception!(
    hoard,
    ImageError,
    PyOSError,
    "The image is damaged, malformed or needs a feature this build lacks; the message says what."
);

/// The Python exception for reader error `e` on `path`: a missing entry is
/// `FileNotFoundError`, an entry of the wrong kind `NotADirectoryError`
/// when `want_dir`, else `OSError(EINVAL)`; a bad image `ImageError`.
pub fn reader_error(e: hoard_reader::Error, path: &str, want_dir: bool) -> PyErr {
    use hoard_reader::Error;
    match e {
        Error::NotFound(_) => PyFileNotFoundError::new_err((
            libc::ENOENT,
            "No such file or directory",
            path.to_string(),
        )),
        Error::WrongType(_) if want_dir => not_a_directory(path),
        Error::WrongType(m) => PyOSError::new_err((libc::EINVAL, m, path.to_string())),
        other => image_error(other),
    }
}

/// `ImageError` with the reader's message.
pub fn image_error(e: impl std::fmt::Display) -> PyErr {
    ImageError::new_err(e.to_string())
}

/// `IsADirectoryError` for `path`.
pub fn is_a_directory(path: &str) -> PyErr {
    PyIsADirectoryError::new_err((libc::EISDIR, "Is a directory", path.to_string()))
}

/// `NotADirectoryError` for `path`.
pub fn not_a_directory(path: &str) -> PyErr {
    PyNotADirectoryError::new_err((libc::ENOTDIR, "Not a directory", path.to_string()))
}

/// The Python exception for a failed extraction: `ValueError` for a bad
/// pattern, `ImageError` when the image could not be read, else the
/// `OSError` subclass of the system's error number.
pub fn extract_error(e: hoard_reader::extract::ExtractError) -> PyErr {
    use hoard_reader::extract::ExtractError;
    match e {
        ExtractError::Pattern { .. } => PyValueError::new_err(e.to_string()),
        ExtractError::Output {
            message,
            errno: Some(errno),
        } => PyOSError::new_err((errno, message)),
        other => image_error(other),
    }
}
