//! Helpers shared by the integration tests: where the DwarFS-made test
//! images are, and a minimal walk over the sections of an image.

#![allow(dead_code)]

use hoard_format::section::{
    find_image_offset_in, parse_header, parse_version, HeaderLayout, SectionHeader,
    FILE_HEADER_SIZE,
};

pub mod ricepp_encoder;

#[allow(unused_imports)]
pub use hoard_testdata::{image, images, shared};

/// One section of an image: its header and payload.
pub struct Section<'a> {
    pub header: SectionHeader,
    pub payload: &'a [u8],
}

/// The sections of an image file (after any prefix such as a shell script),
/// stopping quietly at the first one that does not parse.
pub fn sections(file: &[u8]) -> Vec<Section<'_>> {
    let mut out = Vec::new();
    let Some(start) = find_image_offset_in(file) else {
        return out;
    };
    let image = &file[start as usize..];
    let Ok(version) = parse_version(image) else {
        return out;
    };
    let mut pos = match version.layout() {
        HeaderLayout::V1 => FILE_HEADER_SIZE,
        HeaderLayout::V2 => 0,
    };
    while pos < image.len() {
        let Ok(header) = parse_header(&image[pos..], version) else {
            break;
        };
        let begin = pos + header.size();
        let Some(end) = usize::try_from(header.length)
            .ok()
            .and_then(|n| begin.checked_add(n))
            .filter(|&e| e <= image.len())
        else {
            break;
        };
        out.push(Section {
            header,
            payload: &image[begin..end],
        });
        pos = end;
    }
    out
}

/// Appends a thrift compact-protocol field header (`id` after `last`).
pub fn thrift_field(out: &mut Vec<u8>, last: &mut i16, id: i16, ty: u8) {
    assert!(id > *last && id - *last <= 15);
    out.push(((id - *last) as u8) << 4 | ty);
    *last = id;
}

/// Appends a LEB128 varint.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a zigzag varint (thrift i16/i32/i64).
pub fn zigzag(out: &mut Vec<u8>, v: i64) {
    varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A FLAC block payload as DwarFS writes it.
pub fn flac_payload(size: usize, channels: u16, bits: u8, flags: u8, stream: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, size as u64);
    let mut last = 0;
    thrift_field(&mut out, &mut last, 1, 4);
    zigzag(&mut out, i64::from(channels));
    thrift_field(&mut out, &mut last, 2, 3);
    out.push(bits);
    thrift_field(&mut out, &mut last, 3, 3);
    out.push(flags);
    out.push(0);
    out.extend_from_slice(stream);
    out
}

/// A RICEPP block payload as DwarFS writes it (version 1).
pub fn ricepp_payload(
    size: usize,
    block_size: u32,
    components: u16,
    unused_lsb: u8,
    big_endian: bool,
    bitstream: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, size as u64);
    let mut last = 0;
    thrift_field(&mut out, &mut last, 1, 5);
    zigzag(&mut out, i64::from(block_size));
    thrift_field(&mut out, &mut last, 2, 4);
    zigzag(&mut out, i64::from(components));
    thrift_field(&mut out, &mut last, 3, 3);
    out.push(2);
    thrift_field(&mut out, &mut last, 4, 3);
    out.push(unused_lsb);
    thrift_field(&mut out, &mut last, 5, if big_endian { 1 } else { 2 });
    thrift_field(&mut out, &mut last, 6, 4);
    zigzag(&mut out, 1);
    out.push(0);
    out.extend_from_slice(bitstream);
    out
}
