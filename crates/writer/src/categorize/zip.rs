//! The `zip` categorizer: the headers of a zip archive (local headers with
//! their names, data descriptors, the central directory) go to
//! `zip/headers`, its members' data stays in the default category.
//!
//! A member's name is written twice in a zip, in its local header and in
//! the central directory, and each local header sits between two
//! compressed members, where no compressor finds the names of the others.
//! Side by side in blocks of their own the headers shrink about sevenfold
//! (the quick `rootfs` corpus's JDK `src.zip`: 3.1 MB of headers among
//! 53 MB); the members' data, already compressed, loses nothing by the
//! move. Each member then takes two chunks in the metadata instead of a
//! share of one, so members shorter than [`MIN_DATA`] stay with their
//! headers.

use super::{Category, Fragment, DEFAULT_CATEGORY};
use std::os::unix::fs::FileExt;

/// The category of the headers.
pub const HEADERS: &str = "zip/headers";

/// Members with less data than this stay in `zip/headers`: a chunk of
/// their own would cost about as much metadata as the move saves.
pub const MIN_DATA: u64 = 256;

/// Smaller archives stay whole: within a block's window zstd and lzma find
/// the names of one archive's members anyway (on a tree of three jars of
/// 160 to 230 KB the image grew by 187 bytes, the cost of the chunks).
pub const MIN_ARCHIVE: u64 = 1 << 20;

/// The most central directory this categorizer reads.
const MAX_DIRECTORY: u64 = 256 << 20;

const LOCAL_HEADER: &[u8; 4] = b"PK\x03\x04";
const DIRECTORY_ENTRY: &[u8; 4] = b"PK\x01\x02";
const END: &[u8; 4] = b"PK\x05\x06";
const END64_LOCATOR: &[u8; 4] = b"PK\x06\x07";
const END64: &[u8; 4] = b"PK\x06\x06";
const DESCRIPTOR: &[u8; 4] = b"PK\x07\x08";

/// Whether `head` starts like a zip archive (or a jar, apk, wheel...).
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(LOCAL_HEADER)
}

/// The fragments of the zip archive `file` (`size` bytes), or None when it
/// is not one this categorizer understands.
pub fn categorize(file: &impl FileExt, size: u64) -> Option<Vec<Fragment>> {
    let members = members(file, size)?;
    let mut out = Fragments::default();
    let mut pos = 0;
    for m in members {
        if m.offset < pos || m.data_end() > size {
            return None; // overlapping or out of the file
        }
        // Bytes between members (a preamble, padding) stay in the default
        // category.
        out.push(DEFAULT_CATEGORY, m.offset - pos);
        let mut local = [0u8; 30];
        file.read_exact_at(&mut local, m.offset).ok()?;
        if &local[..4] != LOCAL_HEADER {
            return None;
        }
        let names = u64::from(le16(&local[26..])) + u64::from(le16(&local[28..]));
        let data = m.offset + 30 + names;
        if data + m.compressed > size {
            return None;
        }
        out.push(HEADERS, 30 + names);
        let kind = if m.compressed < MIN_DATA {
            HEADERS
        } else {
            DEFAULT_CATEGORY
        };
        out.push(kind, m.compressed);
        pos = data + m.compressed;
        if m.descriptor {
            let descriptor = descriptor_len(file, pos, m.zip64).min(size - pos);
            out.push(HEADERS, descriptor);
            pos += descriptor;
        }
    }
    // The central directory and the end records.
    out.push(HEADERS, size - pos);
    Some(out.0)
}

/// One member, as the central directory describes it.
struct Member {
    offset: u64,
    compressed: u64,
    /// A data descriptor follows the data.
    descriptor: bool,
    /// Its sizes take 8 bytes.
    zip64: bool,
}

impl Member {
    /// The least the member's local header and data span.
    fn data_end(&self) -> u64 {
        self.offset
            .saturating_add(30)
            .saturating_add(self.compressed)
    }
}

/// The members of the archive, in the order their data lies in the file.
fn members(file: &impl FileExt, size: u64) -> Option<Vec<Member>> {
    let (directory, count, end) = find_directory(file, size)?;
    let length = end.checked_sub(directory)?;
    if end > size || length > MAX_DIRECTORY || count > length / 46 {
        return None;
    }
    let mut bytes = vec![0u8; usize::try_from(length).ok()?];
    file.read_exact_at(&mut bytes, directory).ok()?;
    let mut members = Vec::with_capacity(usize::try_from(count).ok()?);
    let mut at = 0usize;
    for _ in 0..count {
        let fixed = bytes.get(at..at + 46)?;
        if &fixed[..4] != DIRECTORY_ENTRY {
            return None;
        }
        let flags = le16(&fixed[8..]);
        let (name, extra, comment) = (
            usize::from(le16(&fixed[28..])),
            usize::from(le16(&fixed[30..])),
            usize::from(le16(&fixed[32..])),
        );
        let mut compressed = u64::from(le32(&fixed[20..]));
        let mut uncompressed = u64::from(le32(&fixed[24..]));
        let mut offset = u64::from(le32(&fixed[42..]));
        let extra_start = at + 46 + name;
        let extras = bytes.get(extra_start..extra_start + extra)?;
        let zip64 = [compressed, uncompressed, offset].contains(&u64::from(u32::MAX));
        if zip64 {
            let fields = zip64_extra(extras)?;
            let mut next = fields.chunks_exact(8).map(le64);
            for value in [&mut uncompressed, &mut compressed, &mut offset] {
                if *value == u64::from(u32::MAX) {
                    *value = next.next()?;
                }
            }
        }
        members.push(Member {
            offset,
            compressed,
            descriptor: flags & 8 != 0,
            zip64,
        });
        at = extra_start + extra + comment;
    }
    members.sort_unstable_by_key(|m| m.offset);
    Some(members)
}

/// The central directory's offset, number of entries and end, from the
/// end records in the archive's last 64 KiB.
fn find_directory(file: &impl FileExt, size: u64) -> Option<(u64, u64, u64)> {
    let tail_len = size.min(22 + 0xffff);
    let mut tail = vec![0u8; usize::try_from(tail_len).ok()?];
    let tail_start = size - tail_len;
    file.read_exact_at(&mut tail, tail_start).ok()?;
    let at = (0..tail.len().checked_sub(22)? + 1)
        .rev()
        .find(|&i| &tail[i..i + 4] == END)?;
    let end = &tail[at..at + 22];
    let end_offset = tail_start + at as u64;
    let count = u64::from(le16(&end[10..]));
    let length = u64::from(le32(&end[12..]));
    let directory = u64::from(le32(&end[16..]));
    if count != 0xffff && length != u64::from(u32::MAX) && directory != u64::from(u32::MAX) {
        return Some((directory, count, directory.checked_add(length)?));
    }
    // Zip64: the locator just before the end record points at the zip64
    // end record.
    let locator_at = at.checked_sub(20)?;
    let locator = &tail[locator_at..at];
    if &locator[..4] != END64_LOCATOR {
        return None;
    }
    let mut end64 = [0u8; 56];
    let end64_offset = le64(&locator[8..]);
    if end64_offset >= end_offset {
        return None;
    }
    file.read_exact_at(&mut end64, end64_offset).ok()?;
    if &end64[..4] != END64 {
        return None;
    }
    let (count, length, directory) = (le64(&end64[32..]), le64(&end64[40..]), le64(&end64[48..]));
    Some((directory, count, directory.checked_add(length)?))
}

/// The zip64 extended information field's data in a central directory
/// entry's extra fields.
fn zip64_extra(mut extras: &[u8]) -> Option<&[u8]> {
    while extras.len() >= 4 {
        let (id, len) = (le16(extras), usize::from(le16(&extras[2..])));
        let data = extras.get(4..4 + len)?;
        if id == 1 {
            return Some(data);
        }
        extras = &extras[4 + len..];
    }
    None
}

/// The length of the data descriptor at `at`: with or without its
/// signature, sizes of 4 or (zip64) 8 bytes.
fn descriptor_len(file: &impl FileExt, at: u64, zip64: bool) -> u64 {
    let mut signature = [0u8; 4];
    let signed = file.read_exact_at(&mut signature, at).is_ok() && &signature == DESCRIPTOR;
    let fields = if zip64 { 20 } else { 12 };
    fields + if signed { 4 } else { 0 }
}

/// Fragments built in order, runs of one category joined.
#[derive(Default)]
struct Fragments(Vec<Fragment>);

impl Fragments {
    fn push(&mut self, name: &'static str, size: u64) {
        if size == 0 {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.category.name == name => last.size += size,
            _ => self.0.push(Fragment {
                category: Category::plain(name),
                size,
            }),
        }
    }
}

fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member of a test archive: name, data, and whether a data
    /// descriptor (with its signature) follows the data.
    struct Entry<'a>(&'a str, Vec<u8>, bool);

    /// A zip archive of stored `entries` after `preamble`, and where each
    /// part lies: (header or descriptor, data) lengths in order.
    fn archive(preamble: &[u8], entries: &[Entry<'_>]) -> Vec<u8> {
        let mut zip = preamble.to_vec();
        let mut directory = Vec::new();
        for Entry(name, data, descriptor) in entries {
            let offset = zip.len() as u32;
            let flags: u16 = if *descriptor { 8 } else { 0 };
            let size = data.len() as u32;
            zip.extend_from_slice(LOCAL_HEADER);
            zip.extend_from_slice(&20u16.to_le_bytes());
            zip.extend_from_slice(&flags.to_le_bytes());
            zip.extend_from_slice(&[0; 10]); // method, time, date, crc
            let sizes = if *descriptor { 0 } else { size };
            zip.extend_from_slice(&sizes.to_le_bytes());
            zip.extend_from_slice(&sizes.to_le_bytes());
            zip.extend_from_slice(&(name.len() as u16).to_le_bytes());
            zip.extend_from_slice(&0u16.to_le_bytes());
            zip.extend_from_slice(name.as_bytes());
            zip.extend_from_slice(data);
            if *descriptor {
                zip.extend_from_slice(DESCRIPTOR);
                zip.extend_from_slice(&[0; 4]);
                zip.extend_from_slice(&size.to_le_bytes());
                zip.extend_from_slice(&size.to_le_bytes());
            }
            directory.extend_from_slice(DIRECTORY_ENTRY);
            directory.extend_from_slice(&[20, 0, 20, 0]);
            directory.extend_from_slice(&flags.to_le_bytes());
            directory.extend_from_slice(&[0; 10]);
            directory.extend_from_slice(&size.to_le_bytes());
            directory.extend_from_slice(&size.to_le_bytes());
            directory.extend_from_slice(&(name.len() as u16).to_le_bytes());
            directory.extend_from_slice(&[0; 12]); // extra, comment, disk, attributes
            directory.extend_from_slice(&offset.to_le_bytes());
            directory.extend_from_slice(name.as_bytes());
        }
        let start = zip.len() as u32;
        zip.extend_from_slice(&directory);
        zip.extend_from_slice(END);
        zip.extend_from_slice(&[0; 4]);
        let count = (entries.len() as u16).to_le_bytes();
        zip.extend_from_slice(&count);
        zip.extend_from_slice(&count);
        zip.extend_from_slice(&(directory.len() as u32).to_le_bytes());
        zip.extend_from_slice(&start.to_le_bytes());
        zip.extend_from_slice(&0u16.to_le_bytes());
        zip
    }

    fn fragments_of(zip: &[u8]) -> Option<Vec<(&'static str, u64)>> {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(zip, 0).unwrap();
        let found = categorize(&file, zip.len() as u64)?;
        assert_eq!(found.iter().map(|f| f.size).sum::<u64>(), zip.len() as u64);
        Some(found.iter().map(|f| (f.category.name, f.size)).collect())
    }

    #[test]
    fn headers_and_data_alternate_and_short_members_stay_with_headers() {
        let entries = [
            Entry("a.txt", vec![1; 1000], false),
            Entry("dir/b.bin", vec![2; 2000], true),
            Entry("tiny", vec![3; 10], false),
            Entry("c", vec![4; 300], false),
        ];
        let preamble = b"#!/bin/sh\nexec java -jar $0\n";
        let zip = archive(preamble, &entries);
        assert!(!sniff(&zip) && sniff(&zip[preamble.len()..]));
        let directory = 4 * 46 + 5 + 9 + 4 + 1 + 22;
        assert_eq!(
            fragments_of(&zip).unwrap(),
            [
                (DEFAULT_CATEGORY, preamble.len() as u64),
                (HEADERS, 35),
                (DEFAULT_CATEGORY, 1000),
                (HEADERS, 39),
                (DEFAULT_CATEGORY, 2000),
                // b's descriptor, tiny's header and data, c's header.
                (HEADERS, 16 + 34 + 10 + 31),
                (DEFAULT_CATEGORY, 300),
                (HEADERS, directory),
            ]
        );
    }

    #[test]
    fn broken_archives_are_left_whole() {
        let zip = archive(b"", &[Entry("a", vec![1; 5000], false)]);
        // No end record.
        assert_eq!(fragments_of(&zip[..zip.len() - 22]), None);
        // A member said to lie past the end.
        let mut far = zip.clone();
        let at = far.len() - 22 - 1 - 4;
        far[at..at + 4].copy_from_slice(&9_999_999u32.to_le_bytes());
        assert_eq!(fragments_of(&far), None);
        // A member's size running past the directory's start.
        let mut long = zip.clone();
        let at = long.len() - 22 - 1 - 46 + 20;
        long[at..at + 4].copy_from_slice(&60_000u32.to_le_bytes());
        assert_eq!(fragments_of(&long), None);
        // Garbage where the local header should be.
        let mut bad = zip;
        bad[0] = b'X';
        assert_eq!(fragments_of(&bad), None);
        // Bytes changed anywhere: fragments that cover the file, or none.
        let zip = archive(
            b"",
            &[
                Entry("a", vec![1; 700], true),
                Entry("b", vec![2; 900], false),
            ],
        );
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
            let mut bad = zip.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % bad.len() as u64) as usize;
                bad[at] = (x >> 32) as u8;
            }
            let _ = fragments_of(&bad);
        }
        // Too many entries for the directory.
        assert_eq!(
            fragments_of(b"PK\x05\x06\0\0\0\0\xff\x00\xff\x00\0\0\0\0\0\0\0\0\0\0"),
            None
        );
    }
}
