//! Decodes every section of the shared DwarFS test images (made by DwarFS
//! 0.2 to 0.15), and checks the FLAC and RICEPP blocks of the categorized
//! image against the files they came from.

mod common;

use common::{image, images, sections, shared};
use hoard_codec::{decompress, uncompressed_size};
use hoard_format::section::{Compression, SectionType};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Larger than any block or metadata section of the test images.
const LIMIT: usize = 64 << 20;

/// Decodes every section of every image in `sub`; returns how many blocks
/// each algorithm had.
fn decode_all(sub: &str) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for path in images(sub) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let file = std::fs::read(&path).unwrap();
        let secs = sections(&file);
        assert!(!secs.is_empty(), "{name}: no sections");
        let mut block_sizes = Vec::new();
        for (i, s) in secs.iter().enumerate() {
            let algo = s.header.compression;
            let declared = uncompressed_size(algo, s.payload)
                .unwrap_or_else(|e| panic!("{name} section {i}: {e}"))
                .unwrap_or_else(|| panic!("{name} section {i}: no declared size"));
            let data = decompress(algo, s.payload, LIMIT)
                .unwrap_or_else(|e| panic!("{name} section {i} ({}): {e}", algo.name()));
            assert_eq!(data.len() as u64, declared, "{name} section {i}");
            if s.header.kind == SectionType::BLOCK {
                *seen.entry(algo.name()).or_default() += 1;
                block_sizes.push(data.len());
            }
        }
        // Outside categorized images, every block but the last is full, and
        // the block size is a power of two.
        let categorized = secs.iter().any(|s| {
            matches!(
                s.header.compression,
                Compression::FLAC | Compression::RICEPP
            )
        }) || name.starts_with("cat");
        if !categorized && block_sizes.len() > 1 {
            let full = block_sizes[0];
            assert!(full.is_power_of_two(), "{name}: block size {full}");
            assert!(
                block_sizes[..block_sizes.len() - 1]
                    .iter()
                    .all(|&n| n == full),
                "{name}: {block_sizes:?}"
            );
            assert!(*block_sizes.last().unwrap() <= full, "{name}");
        }
    }
    seen
}

#[test]
fn upstream_images_decode() {
    let seen = decode_all("upstream");
    // The repository's images have these; ../shared's have every one.
    let mut expected = vec!["none", "zstd", "lzma", "flac", "ricepp"];
    if shared().is_some() {
        expected.extend(["lz4", "brotli"]);
    }
    for algo in expected {
        assert!(seen.contains_key(algo), "no {algo} block decoded: {seen:?}");
    }
    eprintln!("upstream blocks per algorithm: {seen:?}");
}

#[test]
fn compat_and_misc_images_decode() {
    let mut seen = decode_all("compat");
    for (algo, n) in decode_all("misc") {
        *seen.entry(algo).or_default() += n;
    }
    eprintln!("compat/misc blocks per algorithm: {seen:?}");
}

/// One line of a manifest: path, size and sha256 of a regular file.
struct ManifestFile {
    path: String,
    size: usize,
    sha256: String,
}

fn manifest(path: &std::path::Path) -> Vec<ManifestFile> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["type"] == "f").then(|| ManifestFile {
                path: v["path"].as_str().unwrap().to_string(),
                size: v["size"].as_u64().unwrap() as usize,
                sha256: v["sha256"].as_str().unwrap().to_string(),
            })
        })
        .collect()
}

fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// The categorizer splits a WAV file into its header (stored in an ordinary
/// block) and its samples (a FLAC block), and a FITS file into header, image
/// data (a RICEPP block) and zero padding. Each FLAC and RICEPP block, put
/// back between its header and padding, must give a file of the manifest.
#[test]
fn categorized_blocks_rebuild_original_files() {
    let categorized = image("upstream", "categorize.dwarfs").unwrap();
    let files = manifest(&categorized.with_extension("manifest"));
    let file = std::fs::read(&categorized).unwrap();
    let mut plain = Vec::new();
    let mut coded = Vec::new();
    for s in sections(&file)
        .iter()
        .filter(|s| s.header.kind == SectionType::BLOCK)
    {
        let data = decompress(s.header.compression, s.payload, LIMIT).unwrap();
        match s.header.compression {
            Compression::FLAC | Compression::RICEPP => coded.push((s.header.compression, data)),
            _ => plain.extend_from_slice(&data),
        }
    }
    assert_eq!(coded.len(), 4, "expected two FLAC and two RICEPP blocks");
    let mut matched = Vec::new();
    for (algo, data) in &coded {
        let found = files.iter().find(|f| {
            if f.size < data.len() {
                return false;
            }
            let head_len = f.size - data.len();
            if *algo == Compression::FLAC {
                // RIFF header: "RIFF", file size - 8, "WAVE".
                let mut sig = b"RIFF".to_vec();
                sig.extend_from_slice(&((f.size - 8) as u32).to_le_bytes());
                sig.extend_from_slice(b"WAVE");
                find_all(&plain, &sig).into_iter().any(|p| {
                    plain.len() >= p + head_len
                        && sha256_hex(&[&plain[p..p + head_len], data]) == f.sha256
                })
            } else {
                // FITS: whole 2880-byte header records, the data, then zeros.
                find_all(&plain, b"SIMPLE  =").into_iter().any(|p| {
                    (1..=head_len / 2880).any(|records| {
                        let h = records * 2880;
                        let pad = vec![0u8; head_len - h];
                        plain.len() >= p + h
                            && sha256_hex(&[&plain[p..p + h], data, &pad]) == f.sha256
                    })
                })
            }
        });
        let found = found.unwrap_or_else(|| {
            panic!(
                "no file of the manifest matches a {} block of {} bytes",
                algo.name(),
                data.len()
            )
        });
        matched.push(found.path.clone());
    }
    matched.sort();
    eprintln!("rebuilt: {matched:?}");
    assert_eq!(matched.len(), 4);
    matched.dedup();
    assert_eq!(matched.len(), 4);
}

/// Re-encoding the decoded RICEPP blocks the way DwarFS's encoder does must
/// give back their bitstreams exactly.
#[test]
fn ricepp_blocks_reencode_bit_for_bit() {
    let file = std::fs::read(image("upstream", "categorize.dwarfs").unwrap()).unwrap();
    let mut n = 0;
    for s in sections(&file)
        .iter()
        .filter(|s| s.header.compression == Compression::RICEPP)
    {
        let data = decompress(Compression::RICEPP, s.payload, LIMIT).unwrap();
        let (size, used) = {
            let mut v = 0u64;
            let mut i = 0;
            loop {
                v |= u64::from(s.payload[i] & 0x7f) << (7 * i);
                i += 1;
                if s.payload[i - 1] & 0x80 == 0 {
                    break (v, i);
                }
            }
        };
        assert_eq!(size as usize, data.len());
        let (header, hlen) = hoard_format::thrift::decode_struct(&s.payload[used..]).unwrap();
        let num = |id| header.field(id).and_then(|v| v.as_int()).unwrap();
        let cfg = common::ricepp_encoder::Config {
            block_size: num(1) as usize,
            components: num(2) as usize,
            unused_lsb: num(4) as u32,
            big_endian: header.field(5).and_then(|v| v.as_bool()).unwrap(),
        };
        let words: Vec<u16> = data
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let encoded = common::ricepp_encoder::encode(&cfg, &words);
        assert!(
            encoded == s.payload[used + hlen..],
            "re-encoded RICEPP block differs"
        );
        n += 1;
    }
    assert_eq!(n, 2);
}
