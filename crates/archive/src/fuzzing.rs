//! The body of the `archive_read` fuzz target (`fuzz/`), here so that the
//! stable tests can run the same code on the seed corpus.

use crate::ArchiveReader;

/// Data read from one input at most, so that a small bomb (a filter
/// expanding to terabytes) ends the run rather than time it out.
const MAX_DATA: u64 = 64 << 20;

/// Reads `data` as an archive stream to its end: every member's header
/// and data blocks, checking that blocks stay inside the member's size
/// when it is known. Errors are fine; panics, hangs and unbounded memory
/// are not.
pub fn read_all(data: &[u8]) {
    let input = Box::new(std::io::Cursor::new(data.to_vec()));
    let Ok(mut reader) = ArchiveReader::open_stream(input, "fuzz input") else {
        return;
    };
    let mut total = 0u64;
    loop {
        match reader.next_member() {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(crate::Error::Member(_)) => continue,
            Err(crate::Error::Fatal(_)) => return,
        }
        loop {
            match reader.read_block() {
                Ok(Some((_, block))) => {
                    total += block.len() as u64;
                    if total > MAX_DATA {
                        return;
                    }
                }
                Ok(None) | Err(crate::Error::Member(_)) => break,
                Err(crate::Error::Fatal(_)) => return,
            }
        }
    }
}
