//! Flipping any single byte of a good v2.2+ image (no header prefix) is
//! reported by the check `hoard check` runs ([`check::check_image`]): every
//! byte of every section header, and a fixed-seed sample of positions in
//! block payloads and in metadata, schema, index and history payloads.

use hoard_format::section::SectionType;
use hoard_reader::source::Source;
use hoard_reader::{check, Image, ImageOffset};
use hoard_testdata::Rng;
use std::path::Path;

/// Positions sampled in the block payloads, and again in the other payloads.
const SAMPLES: usize = 100;

fn open(bytes: &[u8]) -> hoard_reader::Result<Image> {
    Image::from_source(Source::Bytes(bytes.to_vec()), ImageOffset::At(0))
}

/// Every header byte of every section plus sampled payload bytes.
fn positions(bytes: &[u8], rng: &mut Rng) -> Vec<u64> {
    let image = open(bytes).unwrap();
    let mut headers = Vec::new();
    let mut blocks = Vec::new();
    let mut others = Vec::new();
    for s in image.sections() {
        headers.extend(s.offset..s.payload_offset());
        let payload = s.payload_offset()..s.end();
        if s.header.kind == SectionType::BLOCK {
            blocks.push(payload);
        } else {
            others.push(payload);
        }
    }
    let mut out = headers;
    out.extend(rng.sample(&blocks, SAMPLES));
    out.extend(rng.sample(&others, SAMPLES));
    out.sort_unstable();
    out.dedup();
    out
}

/// The flips in `image` that the check does not report.
fn missed_flips(image: &Path, seed: u64) -> Vec<String> {
    let original = std::fs::read(image).unwrap();
    let name = image.file_name().unwrap().to_string_lossy().into_owned();
    let clean = check::check_image(|| open(&original), 64 << 20, false);
    assert!(clean.problems.is_empty(), "{name}: {:?}", clean.problems);
    let mut rng = Rng(seed);
    let mut missed = Vec::new();
    for pos in positions(&original, &mut rng) {
        let mut bytes = original.clone();
        let bit = rng.below(8);
        bytes[pos as usize] ^= 1 << bit;
        let report = check::check_image(|| open(&bytes), 64 << 20, false);
        if report.problems.is_empty() {
            missed.push(format!("{name}: bit {bit} of byte {pos}"));
        }
    }
    missed
}

#[test]
fn single_byte_flips_are_reported() {
    let images: Vec<_> = [
        ("upstream", "default.dwarfs"),
        ("upstream", "l1-lz4.dwarfs"),
        ("upstream", "pack-all.dwarfs"),
        ("upstream", "no-index.dwarfs"),
        ("upstream", "categorize.dwarfs"),
        ("compat", "compat-v0.9.10.dwarfs"),
        ("compat", "compat-v0.6.2.dwarfs"),
    ]
    .into_iter()
    .filter_map(|(group, name)| hoard_testdata::image(group, name))
    .collect();
    let missed = hoard_testdata::problems_in_parallel(&images, |i, path| {
        missed_flips(path, 0x9e37_79b9_7f4a_7c15 ^ i as u64)
    });
    hoard_testdata::assert_no_problems(&missed, "flips not reported");
}
