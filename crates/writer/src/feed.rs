//! Reading a file's bytes into the segmenter: one range of it (a
//! fragment), holes as holes where the file is sparse.

use crate::piece::PieceList;
use crate::segment::{BlockSink, Segmenter};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The part of a file one fragment covers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    /// Offset of the range in the file.
    pub(crate) start: u64,
    /// Its length.
    pub(crate) len: u64,
    /// The fragment is the whole file: holes may be kept, and a file that
    /// grew since the scan is noticed.
    pub(crate) whole: bool,
}

/// Feeds `range` of the file at `path` to the segmenter, holes as holes
/// when `sparse` and the range is the whole file; returns the number of
/// bytes (holes included) fed.
pub(crate) fn feed<S: BlockSink>(
    segmenter: &mut Segmenter<'_, S>,
    path: &Path,
    range: Range,
    sparse: bool,
    buf: &mut [u8],
    out: &mut PieceList,
    progress: &AtomicU64,
) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let (first, len) = (range.start, range.start + range.len);
    // Where the file's offset is, if known: a file opened here starts at
    // 0, and looking for holes moves it.
    let mut offset = Some(0);
    let regions = if sparse && range.whole {
        offset = None;
        data_regions(&file, len)
    } else {
        vec![(first, len)]
    };
    let mut pos = first;
    for (start, end) in regions {
        if start > pos {
            segmenter.hole(start - pos, out);
            progress.fetch_add(start - pos, Ordering::Relaxed);
        }
        if offset != Some(start) {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(start))?;
        }
        let mut left = end - start;
        let mut region = (&mut file).take(left);
        while left > 0 {
            let n = match region.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            segmenter
                .add(&buf[..n], out)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            progress.fetch_add(n as u64, Ordering::Relaxed);
            left -= n as u64;
        }
        pos = end - left;
        offset = Some(pos);
        if left > 0 {
            // The file shrank: stop here.
            return Ok(pos - first);
        }
    }
    if len > pos {
        segmenter.hole(len - pos, out);
        progress.fetch_add(len - pos, Ordering::Relaxed);
    }
    if range.whole {
        // Anything appended after the scan is left out; a file that grew
        // is reported by its size.
        use std::os::unix::fs::FileExt;
        let mut probe = [0u8; 1];
        if file.read_at(&mut probe, len)? > 0 {
            return Ok(len + 1);
        }
    }
    Ok(range.len)
}

/// The data regions (start, end) of an open file of length `len`, from
/// SEEK_DATA / SEEK_HOLE; the whole file where those are not supported.
fn data_regions(file: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    let fd = file.as_raw_fd();
    let mut regions = Vec::new();
    let mut pos = 0i64;
    let len = len as i64;
    while pos < len {
        // SAFETY: lseek on an open descriptor has no memory effects.
        let data = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if data < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole remains
            }
            return vec![(0, len as u64)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return vec![(0, len as u64)];
        }
        let end = hole.min(len);
        if end > data {
            regions.push((data as u64, end as u64));
        }
        pos = end.max(data + 1);
    }
    regions
}
