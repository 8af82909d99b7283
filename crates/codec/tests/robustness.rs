//! Damaged payloads never panic and never yield more than the limit: every
//! section of DwarFS's fuzzing corpus of broken images, and truncated and
//! bit-flipped copies of real payloads of every algorithm.

mod common;

use common::{images, sections};
use hoard_codec::{decompress, uncompressed_size};
use hoard_format::section::Compression;

const LIMIT: usize = 16 << 20;

#[test]
fn fuzzing_corpus_sections_never_panic() {
    let mut n = 0;
    for path in images("badfs") {
        let file = std::fs::read(&path).unwrap();
        for s in sections(&file) {
            let _ = uncompressed_size(s.header.compression, s.payload);
            if let Ok(out) = decompress(s.header.compression, s.payload, LIMIT) {
                assert!(out.len() <= LIMIT);
            }
            n += 1;
        }
    }
    eprintln!("{n} sections tried");
}

/// The smallest block payload of each algorithm in the upstream images.
fn smallest_blocks() -> Vec<(Compression, Vec<u8>)> {
    let mut best: Vec<(Compression, Vec<u8>)> = Vec::new();
    for path in images("upstream") {
        let file = std::fs::read(&path).unwrap();
        for s in sections(&file) {
            let algo = s.header.compression;
            match best.iter_mut().find(|(a, _)| *a == algo) {
                Some((_, p)) if p.len() <= s.payload.len() => {}
                Some((_, p)) => *p = s.payload.to_vec(),
                None => best.push((algo, s.payload.to_vec())),
            }
        }
    }
    best
}

#[test]
fn damaged_real_payloads_never_panic() {
    let blocks = smallest_blocks();
    for (algo, payload) in &blocks {
        let size = decompress(*algo, payload, LIMIT).unwrap().len();
        // Every truncation of a compressed payload is refused.
        let step = (payload.len() / 60).max(1);
        for cut in (0..payload.len()).step_by(step) {
            let r = decompress(*algo, &payload[..cut], LIMIT);
            assert!(
                *algo == Compression::NONE || r.is_err(),
                "{}: cut at {cut} accepted",
                algo.name()
            );
        }
        // Flipped bits: an error, or output within the declared size.
        let step = (payload.len() / 150).max(1);
        for at in (0..payload.len()).step_by(step) {
            for bit in [0x01, 0x80] {
                let mut bad = payload.clone();
                bad[at] ^= bit;
                if let Ok(out) = decompress(*algo, &bad, size.max(64)) {
                    assert!(out.len() <= size.max(64));
                }
            }
        }
    }
    eprintln!(
        "algorithms: {:?}",
        blocks
            .iter()
            .map(|(a, p)| (a.name(), p.len()))
            .collect::<Vec<_>>()
    );
}
