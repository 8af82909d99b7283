//! The one error type of this crate.

/// Why a piece of an image could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The image is malformed; the message says where and how.
    #[error("{0}")]
    Corrupt(String),
    /// The image is well formed but uses something this build cannot read.
    #[error("{0}")]
    Unsupported(String),
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for returning [`Error::Corrupt`] with a formatted message.
#[macro_export]
macro_rules! corrupt {
    ($($arg:tt)*) => { $crate::Error::Corrupt(format!($($arg)*)) };
}
