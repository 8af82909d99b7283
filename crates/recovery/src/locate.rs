//! Finding the recovery data of an image.

use crate::layout::{Layout, DESCRIPTOR_SIZE, SECTION_HEADER_SIZE, TRAILER_SIZE};
use crate::ReadAt;

/// The layout whose descriptor is stored at `pos`, if one is, intact, and
/// made for a file of this size.
fn descriptor_at(file: &dyn ReadAt, pos: u64) -> Option<Layout> {
    let mut d = [0u8; DESCRIPTOR_SIZE as usize];
    file.read_at(pos, &mut d).ok()?;
    Layout::decode(&d).filter(|l| l.file_len == file.size() && l.descriptor_starts().contains(&pos))
}

/// The layout whose second descriptor copy ends the file (before the
/// trailer): one small read.
pub(crate) fn at_end(file: &dyn ReadAt) -> Option<Layout> {
    let pos = file.size().checked_sub(TRAILER_SIZE + DESCRIPTOR_SIZE)?;
    descriptor_at(file, pos)
}

/// The layout of the recovery section whose header is at `pos`.
pub(crate) fn at_section(file: &dyn ReadAt, pos: u64) -> Option<Layout> {
    descriptor_at(file, pos.checked_add(SECTION_HEADER_SIZE)?)
}

/// Searches the whole file for an intact descriptor, for images whose
/// section headers or index are too damaged to lead to it.
pub(crate) fn search(file: &dyn ReadAt) -> Option<Layout> {
    const CHUNK: u64 = 4 << 20;
    let len = file.size();
    let mut buf = vec![0u8; (CHUNK + DESCRIPTOR_SIZE) as usize];
    let mut pos = 0;
    while pos < len {
        let n = (CHUNK + DESCRIPTOR_SIZE).min(len - pos) as usize;
        file.read_at(pos, &mut buf[..n]).ok()?;
        let mut at = 0;
        while let Some(i) = find(&buf[at..n], b"HOARDREC") {
            if let Some(layout) = descriptor_at(file, pos + (at + i) as u64) {
                return Some(layout);
            }
            at += i + 1;
        }
        pos += CHUNK;
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
