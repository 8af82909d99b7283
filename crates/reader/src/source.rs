//! Where image bytes come from: a memory map of the file, `pread` when the
//! file cannot be mapped, or bytes already in memory; for an image with
//! recovery data, through that data, which repairs damaged bytes; for an
//! image elsewhere (a URL), from a [`RangeRead`] that an [`Opener`] gives,
//! such as the hoard-remote crate's.

use crate::error::{corrupt, Error, Result};
use std::borrow::Cow;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// Bytes at each end of a mapped file read ahead when it is opened.
const OPEN_READ_AHEAD: u64 = 64 << 10;

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
    /// An image read by byte ranges from elsewhere (a server).
    Remote(Arc<dyn RangeRead>),
}

/// Random access to an image that is not a local file: reads by byte
/// range, told ahead what will be read and which bytes proved right.
pub trait RangeRead: Send + Sync + std::fmt::Debug {
    /// Length of the image file in bytes.
    fn size(&self) -> u64;

    /// Returns `len` bytes at `offset` (within [`RangeRead::size`]), or a
    /// one-line reason why they cannot be had.
    fn read_at(&self, offset: u64, len: u64) -> std::result::Result<Vec<u8>, String>;

    /// These ranges will be read soon: fetch them now, together.
    fn prefetch(&self, ranges: &[Range<u64>]);

    /// The bytes of `range` (one section, header and payload) passed their
    /// checksum (`ok`), or failed it: keep them, or fetch them again.
    fn checked(&self, range: Range<u64>, ok: bool);

    /// What was fetched so far.
    fn stats(&self) -> FetchStats;
}

/// Counters of a [`RangeRead`]: what it asked its server for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FetchStats {
    /// Requests sent (each retry counts).
    pub requests: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Requests that failed and were retried or given up.
    pub failures: u64,
    /// Bytes served from the on-disk cache instead of the server.
    pub cache_bytes: u64,
    /// Sum of the requests' latencies (until the whole answer was in), in
    /// microseconds.
    pub latency_us: u64,
    /// The longest request's latency, in microseconds.
    pub max_latency_us: u64,
}

/// Opens images named by URL: [`Source::open`] hands it every name with a
/// scheme (`http://`, `s3://`, ...).
pub trait Opener: Send + Sync {
    /// The source of the image at `url`.
    fn open(&self, url: &str) -> Result<Source>;
}

static OPENER: RwLock<Option<Arc<dyn Opener>>> = RwLock::new(None);

/// Makes [`Source::open`] (and so every `open` of an image by path) open
/// URLs with `opener`, for the rest of the process.
pub fn set_opener(opener: Arc<dyn Opener>) {
    *OPENER.write().unwrap_or_else(|p| p.into_inner()) = Some(opener);
}

/// The scheme of `name` if it is a URL (`scheme://...`), lowercase.
pub fn url_scheme(name: &str) -> Option<String> {
    let (scheme, _) = name.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then(|| scheme.to_ascii_lowercase())
}

impl Source {
    /// Opens `path`, mapping it unless `use_mmap` is false or mapping fails.
    /// Errors do not repeat the path: the caller names the file.
    /// A name with a scheme (`https://host/image`) is opened by the
    /// [`Opener`] set with [`set_opener`].
    pub fn open(path: &Path, use_mmap: bool) -> Result<Self> {
        if let Some(url) = path.to_str().filter(|p| url_scheme(p).is_some()) {
            let opener = OPENER.read().unwrap_or_else(|p| p.into_inner()).clone();
            return match opener {
                Some(opener) => opener.open(url),
                None => Err(Error::Unsupported(
                    "reading images from URLs needs the hoard-remote crate".into(),
                )),
            };
        }
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
                let source = Source::Mapped(map);
                // Opening reads the first headers and the section index at
                // the end: both reads start now, side by side.
                let len = meta.len();
                source.prefetch(&[0..OPEN_READ_AHEAD, len.saturating_sub(OPEN_READ_AHEAD)..len]);
                return Ok(source);
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
            Source::Remote(r) => r.size(),
        }
    }

    /// The remote source underneath, if the image is not a local file.
    pub fn remote(&self) -> Option<&dyn RangeRead> {
        match self {
            Source::Remote(r) => Some(r.as_ref()),
            Source::Limited { inner, .. } | Source::Recovering { inner, .. } => inner.remote(),
            _ => None,
        }
    }

    /// Tells the source these ranges will be read soon: a remote source
    /// fetches them together, a mapped file has the kernel read them in
    /// (large reads ahead of the page faults that would read them a few
    /// pages at a time).
    pub fn prefetch(&self, ranges: &[Range<u64>]) {
        match self {
            Source::Mapped(m) => {
                for r in ranges {
                    let start = (r.start as usize).min(m.len());
                    let len = (r.end as usize).min(m.len()).saturating_sub(start);
                    if len > 0 {
                        // Advice only: a failure changes nothing.
                        let _ = m.advise_range(memmap2::Advice::WillNeed, start, len);
                    }
                }
            }
            Source::Limited { inner, .. } | Source::Recovering { inner, .. } => {
                inner.prefetch(ranges)
            }
            _ => {
                if let Some(r) = self.remote() {
                    r.prefetch(ranges);
                }
            }
        }
    }

    /// Tells a remote source whether the bytes of `range` passed their
    /// checksum.
    pub fn checked(&self, range: Range<u64>, ok: bool) {
        if let Some(r) = self.remote() {
            r.checked(range, ok);
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
            Source::Remote(r) => r.read_at(offset, len).map(Cow::Owned).map_err(Error::Io),
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
