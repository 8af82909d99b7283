//! Finding the recovery data of an image.

use crate::layout::{Layout, DESCRIPTOR_SIZE, SECTION_HEADER_SIZE};
use crate::{ReadAt, SECTION_TYPE};
use hoard_format::section::{index_offset_hint, parse_section_index};

/// The layout whose descriptor is stored at `pos`, if one is, intact, and
/// made for a file of this size.
fn descriptor_at(file: &dyn ReadAt, pos: u64) -> Option<Layout> {
    let mut d = [0u8; DESCRIPTOR_SIZE as usize];
    file.read_at(pos, &mut d).ok()?;
    Layout::decode(&d).filter(|l| l.file_len == file.size() && l.descriptor_starts().contains(&pos))
}

/// Finds the layout through the section index of an image starting at
/// `image_offset`: the entry for the recovery section, or the descriptor
/// copy stored just before the index. Reads a few small pieces.
pub(crate) fn through_index(file: &dyn ReadAt, image_offset: u64) -> Option<Layout> {
    let len = file.size();
    let mut tail = [0u8; 8];
    file.read_at(len.checked_sub(8)?, &mut tail).ok()?;
    let index_pos = image_offset.checked_add(index_offset_hint(&tail)?)?;
    if let Some(layout) = index_pos
        .checked_sub(DESCRIPTOR_SIZE)
        .and_then(|p| descriptor_at(file, p))
    {
        return Some(layout);
    }
    let payload_len = len.checked_sub(index_pos)?.checked_sub(SECTION_HEADER_SIZE)?;
    if payload_len > 64 << 20 {
        return None;
    }
    let mut payload = vec![0u8; payload_len as usize];
    file.read_at(index_pos + SECTION_HEADER_SIZE, &mut payload).ok()?;
    let entries = parse_section_index(&payload).ok()?;
    let entry = entries.iter().find(|e| e.kind == SECTION_TYPE)?;
    at_section(file, image_offset.checked_add(entry.offset)?)
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
