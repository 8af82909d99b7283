//! The reader's error type: one line of text per problem, cheap to clone so a
//! failed block decompression can be shared by every thread waiting for it.

/// Why an image or a part of it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Reading the image file failed.
    #[error("{0}")]
    Io(String),
    /// The image is malformed.
    #[error("{0}")]
    Corrupt(String),
    /// The image needs something this build does not implement.
    #[error("{0}")]
    Unsupported(String),
    /// No entry of that name.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// The inode is not of the kind the operation needs.
    #[error("{0}")]
    WrongType(String),
}

impl Error {
    /// The same error, its message prefixed with `what` (an image's name).
    pub fn context(self, what: &str) -> Error {
        match self {
            Error::Io(m) => Error::Io(format!("{what}: {m}")),
            Error::Corrupt(m) => Error::Corrupt(format!("{what}: {m}")),
            Error::Unsupported(m) => Error::Unsupported(format!("{what}: {m}")),
            Error::NotFound(m) => Error::NotFound(format!("{what}: {m}")),
            Error::WrongType(m) => Error::WrongType(format!("{what}: {m}")),
        }
    }
}

/// Result with the reader's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl From<hoard_format::Error> for Error {
    fn from(e: hoard_format::Error) -> Self {
        match e {
            hoard_format::Error::Corrupt(m) => Error::Corrupt(m),
            hoard_format::Error::Unsupported(m) => Error::Unsupported(m),
        }
    }
}

/// Shorthand for returning [`Error::Corrupt`] with a formatted message.
macro_rules! corrupt {
    ($($arg:tt)*) => { $crate::Error::Corrupt(format!($($arg)*)) };
}
pub(crate) use corrupt;
