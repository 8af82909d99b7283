//! A remote file read from start to end, as a stream: a remote archive
//! packed by `hoard create -i https://…/x.tar.gz`. The bytes come through
//! [`Remote`] (retries, the ETag checked at every answer, readahead for
//! sequential reads, at most `remote_memory` bytes held), so the archive
//! is never stored whole.

use crate::remote::Remote;
use hoard_reader::source::RangeRead;
use std::io::Read;

/// Bytes asked of the remote source per read, at most.
const READ: u64 = 1 << 20;

/// The file at a URL, read in order.
#[derive(Debug)]
pub struct Stream {
    remote: Remote,
    offset: u64,
}

/// Opens the file at `url` (`http://`, `https://`, `s3://bucket/key`) to
/// read it from the start.
pub fn open_stream(url: &str, options: &crate::Options) -> Result<Stream, String> {
    Ok(Stream {
        remote: crate::open(url, options)?,
        offset: 0,
    })
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.remote.size() - self.offset;
        let n = (buf.len() as u64).min(READ).min(left);
        if n == 0 {
            return Ok(0);
        }
        let bytes = self
            .remote
            .read_at(self.offset, n)
            .map_err(std::io::Error::other)?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.offset += bytes.len() as u64;
        Ok(bytes.len())
    }
}
