//! FLAC blocks made with the reference encoder (libFLAC 1.4.2, as DwarFS
//! uses it) in every sample layout DwarFS's categorizer produces: 8-bit
//! unsigned, 16-bit with several channels, 20 and 24 bits padded below or
//! above in wider containers, 24-bit big-endian, and 32-bit (whose stereo
//! side channels need 33 bits). See `data/flac/make_fixtures.py`.

mod common;

use hoard_codec::{decompress, uncompressed_size, CodecError};
use hoard_format::section::Compression;
use sha2::{Digest, Sha256};

struct Case {
    name: String,
    payload: Vec<u8>,
    size: usize,
    sha256: String,
}

fn cases() -> Vec<Case> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/flac");
    let table = std::fs::read_to_string(format!("{dir}/expected.tsv")).unwrap();
    table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let stream = std::fs::read(format!("{dir}/{}.flac", f[1])).unwrap();
            let size: usize = f[5].parse().unwrap();
            Case {
                name: f[0].to_string(),
                payload: common::flac_payload(
                    size,
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                    f[4].parse().unwrap(),
                    &stream,
                ),
                size,
                sha256: f[6].to_string(),
            }
        })
        .collect()
}

#[test]
fn reference_streams_decode_to_the_original_bytes() {
    let cases = cases();
    assert_eq!(cases.len(), 9);
    for c in &cases {
        assert_eq!(
            uncompressed_size(Compression::FLAC, &c.payload).unwrap(),
            Some(c.size as u64)
        );
        let out = decompress(Compression::FLAC, &c.payload, c.size)
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(out.len(), c.size, "{}", c.name);
        let sha: String = Sha256::digest(&out)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, c.sha256, "{}: decoded bytes differ", c.name);
    }
}

#[test]
fn damaged_streams_are_refused() {
    for c in cases() {
        // Below the declared size.
        assert!(matches!(
            decompress(Compression::FLAC, &c.payload, c.size - 1),
            Err(CodecError::DeclaredTooLarge { .. })
        ));
        // Every truncation fails: the stream ends before the declared size.
        for cut in (0..c.payload.len()).step_by(97) {
            assert!(
                decompress(Compression::FLAC, &c.payload[..cut], c.size).is_err(),
                "{} cut at {cut}",
                c.name
            );
        }
        // Flipped bits in the audio are caught by the frame checksums.
        let mut bad = c.payload.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x10;
        assert!(
            decompress(Compression::FLAC, &bad, c.size).is_err(),
            "{}",
            c.name
        );
    }
}
