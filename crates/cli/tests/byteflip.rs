//! Flipping any single byte of a good image (no header prefix) is reported
//! by `hoard check`: in every section header, and at sampled positions in
//! block, metadata, schema, index and history payloads.

mod common;

use common::*;
use hoard_reader::{Image, OpenOptions};
use std::path::{Path, PathBuf};

/// Payload positions sampled per section.
const SAMPLES_PER_SECTION: u64 = 12;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Every header byte of every section plus sampled payload bytes.
fn positions(image: &Path, rng: &mut Rng) -> Vec<u64> {
    let img = Image::open(image, &OpenOptions::default()).unwrap();
    assert_eq!(
        img.offset(),
        0,
        "{}: test images must have no prefix",
        image.display()
    );
    let mut out = Vec::new();
    for s in img.sections() {
        out.extend(s.offset..s.payload_offset());
        if s.header.length > 0 {
            for _ in 0..SAMPLES_PER_SECTION {
                out.push(s.payload_offset() + rng.below(s.header.length));
            }
            out.push(s.end() - 1);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn check_detects_flips(image: &Path, scratch: &Path, seed: u64) -> Vec<String> {
    let original = std::fs::read(image).unwrap();
    let name = image.file_name().unwrap().to_string_lossy().to_string();
    let mut rng = Rng(seed);
    let mut missed = Vec::new();
    let flipped_path = scratch.join(&name);
    for pos in positions(image, &mut rng) {
        let mut bytes = original.clone();
        bytes[pos as usize] ^= 1 << rng.below(8);
        std::fs::write(&flipped_path, &bytes).unwrap();
        let out = run(&["check", flipped_path.to_str().unwrap()]);
        let code = out.status.code();
        if code != Some(1) {
            missed.push(format!(
                "{name}: flip at byte {pos}: exit {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    missed
}

#[test]
fn single_byte_flips_are_reported() {
    let Some(shared) = shared() else { return };
    let images: Vec<PathBuf> = [
        "compat/compat-v0.9.10.dwarfs",
        "compat/compat-v0.6.2.dwarfs",
        "upstream/default.dwarfs",
        "upstream/no-index.dwarfs",
        "upstream/l1-lz4.dwarfs",
        "upstream/categorize.dwarfs",
    ]
    .iter()
    .map(|p| shared.join("dwarfs-images").join(p))
    .collect();
    let scratch = tempfile::tempdir().unwrap();
    let missed: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = images
            .iter()
            .enumerate()
            .map(|(i, img)| {
                let scratch = scratch.path();
                s.spawn(move || check_detects_flips(img, scratch, 0x9e37_79b9_7f4a_7c15 ^ i as u64))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        missed.is_empty(),
        "{} flips not reported:\n{}",
        missed.len(),
        missed.join("\n")
    );
}
