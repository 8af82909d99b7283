//! Where image bytes come from: a memory map of the file, `pread` when the
//! file cannot be mapped, or bytes already in memory; for an image with
//! recovery data, through that data, which repairs damaged bytes.

use crate::error::{corrupt, Error, Result};
use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Read-only random access to the bytes of an image file.
#[derive(Debug)]
pub enum Source {
    /// The whole file, mapped.
    Mapped(memmap2::Mmap),
    /// The open file, read with `pread`.
    File {
        /// The file.
        file: File,
        /// Its length when opened.
        len: u64,
    },
    /// An image held in memory.
    Bytes(Vec<u8>),
    /// The first `len` bytes of another source (an image embedded in a
    /// larger file, `imagesize`).
    Limited {
        /// The whole source.
        inner: Box<Source>,
        /// Bytes of it to use.
        len: u64,
    },
    /// Another source read through its recovery data: every read is
    /// checked shard by shard, and damaged shards are repaired.
    Recovering {
        /// The source as it is.
        inner: Box<Source>,
        /// Its recovery data.
        recovery: Arc<hoard_recovery::Recovery>,
    },
}

impl Source {
    /// Opens `path`, mapping it unless `use_mmap` is false or mapping fails.
    /// Errors do not repeat the path: the caller names the file.
    pub fn open(path: &Path, use_mmap: bool) -> Result<Self> {
        let io = |e: std::io::Error| Error::Io(e.to_string());
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(Error::Io("is a directory".into()));
        }
        if use_mmap && meta.len() > 0 {
            // SAFETY: the image is opened read-only; like every mmap-based
            // reader we rely on the file not being truncated while in use.
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(Source::Mapped(map));
            }
        }
        Ok(Source::File {
            file,
            len: meta.len(),
        })
    }

    /// Length of the file in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Source::Mapped(m) => m.len() as u64,
            Source::File { len, .. } => *len,
            Source::Bytes(b) => b.len() as u64,
            Source::Limited { inner, len } => inner.len().min(*len),
            Source::Recovering { inner, .. } => inner.len(),
        }
    }

    /// This source read through `recovery`.
    pub fn recovering(self, recovery: hoard_recovery::Recovery) -> Source {
        Source::Recovering {
            inner: Box::new(self),
            recovery: Arc::new(recovery),
        }
    }

    /// The recovery data reads go through, and the source as it is.
    pub fn recovery(&self) -> Option<(&hoard_recovery::Recovery, &Source)> {
        match self {
            Source::Recovering { inner, recovery } => Some((recovery, inner)),
            _ => None,
        }
    }

    /// This source cut off after `len` bytes.
    pub fn limited(self, len: u64) -> Source {
        Source::Limited {
            inner: Box::new(self),
            len,
        }
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns `len` bytes at `offset`, or an error if they lie past the end.
    pub fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.len())
            .ok_or_else(|| {
                corrupt!(
                    "read of {len} bytes at offset {offset} is past the end of the image ({} bytes)",
                    self.len()
                )
            })?;
        match self {
            Source::Mapped(m) => Ok(Cow::Borrowed(&m[offset as usize..end as usize])),
            Source::Bytes(b) => Ok(Cow::Borrowed(&b[offset as usize..end as usize])),
            Source::Limited { inner, .. } => inner.read(offset, len),
            Source::Recovering { inner, recovery } => {
                let mut buf = vec![0u8; len as usize];
                let inner: &Source = inner;
                let repaired = recovery
                    .read(inner, offset, &mut buf)
                    .map_err(|e| corrupt!("read of {len} bytes at offset {offset}: {e}"))?;
                for stripe in repaired {
                    // Once per stripe: each is repaired once, then kept.
                    eprintln!(
                        "hoard: warning: damaged image bytes repaired in memory from the recovery data (stripe {stripe} of {}); `hoard repair` fixes the file",
                        recovery.layout().stripes
                    );
                }
                Ok(Cow::Owned(buf))
            }
            Source::File { file, .. } => {
                let mut buf = vec![0u8; len as usize];
                file.read_exact_at(&mut buf, offset)
                    .map_err(|e| Error::Io(format!("read at offset {offset}: {e}")))?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    /// Returns up to `len` bytes at `offset`, fewer at the end of the file.
    pub fn read_upto(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let avail = self.len().saturating_sub(offset);
        self.read(offset.min(self.len()), len.min(avail))
    }
}

/// Raw reads for the recovery data (a recovering source reads repaired).
impl hoard_recovery::ReadAt for Source {
    fn size(&self) -> u64 {
        self.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let bytes = self
            .read(offset, buf.len() as u64)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }
}
