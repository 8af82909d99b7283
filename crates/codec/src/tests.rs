//! Round trips through every compressor, spec parsing, and refusal of
//! truncated, garbage and oversized payloads.

use crate::{
    compressor_from_spec, crc::crc32, decompress, lzma_declared_size, uncompressed_size, varint,
    CodecError,
};
use hoard_format::section::Compression;

/// Compressible but not trivial: text-like runs mixed with a counter.
pub(crate) fn sample_data(len: usize) -> Vec<u8> {
    let phrase = b"the quick brown fox jumps over the lazy dog ";
    hoard_testdata::text_like(len, 0x2545_f491, phrase, (600, 1000), 16)
}

pub(crate) const SPECS: &[&str] = &[
    "null",
    "none",
    "zstd:level=3",
    "zstd:level=-5",
    "zstd:level=5:long",
    "zstd:level=19:hash_log=25:chain_log=20:search_log=3:min_match=5:target_length=64",
    "zstd:level=12:target_length=16:redundant_target_length=64",
    "lzma:level=1",
    "lzma:level=2:extreme:dict_size=16",
    "lzma:level=0:binary=x86:mode=fast:mf=hc4:nice=32:depth=8",
    "lzma:level=3:lc=0:lp=2:pb=2",
    "lzma:level=9",
    "lzma:level=5:mf=bt2:nice=100:depth=20:lc=1:lp=1:pb=1",
    "lzma:level=6:redundant_extreme",
    "lz4",
    "lz4hc",
    "lz4hc:level=12",
    "brotli:quality=3",
    "brotli:quality=5:lgwin=26",
];

/// The memory a decoder needs for `payload` (an xz stream), in bytes.
fn lzma_decoder_memory(payload: &[u8]) -> u64 {
    let mut limit = 1 << 16;
    loop {
        let mut stream = liblzma::stream::Stream::new_stream_decoder(limit, 0).unwrap();
        let mut out = Vec::with_capacity(1 << 20);
        match stream.process_vec(payload, &mut out, liblzma::stream::Action::Finish) {
            Err(liblzma::stream::Error::MemLimit) => limit *= 2,
            _ => return limit,
        }
    }
}

#[test]
fn lzma_streams_pass_every_check_of_liblzma() {
    use liblzma::stream::{Action, Status, Stream};
    // Level 9 and bt2 go to 7-Zip's encoder, the others to liblzma's;
    // liblzma checks the container 7-Zip's stream is wrapped in.
    let data = sample_data(3 << 20);
    for spec in SPECS.iter().filter(|s| s.starts_with("lzma")) {
        let payload = compressor_from_spec(spec)
            .unwrap()
            .compress(&data, None)
            .unwrap();
        let mut stream = Stream::new_stream_decoder(u64::MAX, 0).unwrap();
        let mut out = Vec::with_capacity(data.len() + 1);
        let status = stream
            .process_vec(&payload, &mut out, Action::Finish)
            .unwrap();
        // The stream's end: its index, check and footer were verified.
        assert_eq!(status, Status::StreamEnd, "{spec}");
        assert_eq!(stream.total_in(), payload.len() as u64, "{spec}");
        assert!(out == data, "{spec}");
    }
}

#[test]
fn lzma_tells_the_memory_its_encoder_takes() {
    const MIB: u64 = 1 << 20;
    let level9 = compressor_from_spec("lzma:level=9").unwrap();
    // xz(1): level 9 compresses with 674 MiB.
    let full = level9.memory(64 << 20);
    assert!((600 * MIB..700 * MIB).contains(&full), "{full}");
    // A 16 MiB block has a 16 MiB dictionary and far smaller tables.
    let small = level9.memory(16 << 20);
    assert!((100 * MIB..250 * MIB).contains(&small), "{small}");
    assert_eq!(
        compressor_from_spec("zstd:level=22")
            .unwrap()
            .memory(64 << 20),
        0
    );
}

#[test]
fn lzma_dictionary_is_no_larger_than_the_input() {
    let data = sample_data(300_000);
    let small = compressor_from_spec("lzma:level=9").unwrap();
    let payload = small.compress(&data, None).unwrap();
    assert_eq!(
        decompress(Compression::LZMA, &payload, data.len()).unwrap(),
        data
    );
    // 512 KiB of dictionary, not the level's 64 MiB.
    assert!(lzma_decoder_memory(&payload) <= 2 << 20);
    let explicit = compressor_from_spec("lzma:level=1:dict_size=30").unwrap();
    assert!(lzma_decoder_memory(&explicit.compress(&data, None).unwrap()) <= 2 << 20);
    // Larger input keeps the level's dictionary, up to its size.
    let big = sample_data(5 << 20);
    let payload = compressor_from_spec("lzma:level=0")
        .unwrap()
        .compress(&big, None)
        .unwrap();
    let memory = lzma_decoder_memory(&payload);
    assert!((256 << 10..4 << 20).contains(&memory), "{memory}");
}

#[test]
fn lzma_gives_back_a_block_it_has_read_only_when_no_one_else_holds_it() {
    use std::sync::Arc;
    let data = sample_data(5 << 20);
    let specs = SPECS.iter().filter(|s| s.starts_with("lzma"));
    for spec in specs.chain(&["zstd:level=3", "null"]) {
        let c = compressor_from_spec(spec).unwrap();
        let whole = c.compress(&data, None).unwrap();
        // Shared: the same payload, the block untouched.
        let mut shared = Arc::new(data.clone());
        let other = Arc::clone(&shared);
        let (payload, released) = c.compress_shared(&mut shared, None).unwrap();
        assert_eq!(payload, whole, "{spec}");
        assert!(!released, "{spec}");
        assert_eq!(*other, data, "{spec}");
        drop(other);
        // Held by no one else: lzma gives its pages back (they read as
        // zeros), and the payload is the same.
        let mut alone = Arc::new(data.clone());
        let (payload, released) = c.compress_shared(&mut alone, None).unwrap();
        assert_eq!(payload, whole, "{spec}");
        let lzma = c.algo() == Compression::LZMA && !spec.contains("binary");
        assert_eq!(released, lzma, "{spec}");
        if lzma {
            assert!(alone[1 << 20..4 << 20].iter().all(|&b| b == 0), "{spec}");
        }
        assert_eq!(
            decompress(c.algo(), &payload, data.len()).unwrap(),
            data,
            "{spec}"
        );
    }
}

#[test]
fn lzma_size_is_read_from_the_end_of_the_payload() {
    let data = sample_data(300_000);
    let payload = compressor_from_spec("lzma:level=1")
        .unwrap()
        .compress(&data, None)
        .unwrap();
    let len = payload.len() as u64;
    for tail in [64, 256, payload.len()] {
        let tail = &payload[payload.len() - tail..];
        assert_eq!(lzma_declared_size(tail, len).unwrap(), 300_000);
    }
    // Too few bytes for the index, or a length the tail does not fit.
    assert!(lzma_declared_size(&payload[payload.len() - 8..], len).is_err());
    assert!(lzma_declared_size(&payload[payload.len() - 64..], 40).is_err());
    // A stream claiming more blocks than the payload holds.
    assert!(lzma_declared_size(&payload[payload.len() - 64..], 64).is_err());
}

#[test]
fn every_compressor_round_trips() {
    for len in [0, 1, 100, 300_000] {
        let data = sample_data(len);
        for spec in SPECS {
            let c = compressor_from_spec(spec).unwrap();
            let payload = c.compress(&data, None).unwrap();
            let algo = c.algo();
            assert_eq!(
                uncompressed_size(algo, &payload).unwrap(),
                Some(len as u64),
                "{spec}"
            );
            assert_eq!(
                decompress(algo, &payload, len).unwrap(),
                data,
                "{spec}, {len} bytes"
            );
            if len > 0 {
                assert!(
                    matches!(
                        decompress(algo, &payload, len - 1),
                        Err(CodecError::DeclaredTooLarge { .. })
                    ),
                    "{spec}: limit below the size"
                );
            }
            if len == 300_000 && algo != Compression::NONE {
                assert!(payload.len() < len / 2, "{spec} compresses");
            }
        }
    }
}

#[test]
fn specs_have_dwarfs_defaults_and_describe_themselves() {
    for (spec, described) in [
        ("null", "null"),
        ("none", "null"),
        ("zstd", "zstd:level=22"),
        ("zstd:long:level=7", "zstd:level=7:long"),
        (
            "zstd:target_length=9:hash_log=20:level=20",
            "zstd:level=20:hash_log=20:target_length=9",
        ),
        ("lzma", "lzma:level=9"),
        ("lzma:extreme:level=6", "lzma:level=6:extreme"),
        (
            "zstd:redundant_target_length=256:level=20:target_length=128",
            "zstd:level=20:target_length=128:redundant_target_length=256",
        ),
        ("lzma:redundant_extreme", "lzma:level=9:redundant_extreme"),
        ("lz4", "lz4"),
        ("lz4hc", "lz4hc:level=9"),
        ("brotli", "brotli:quality=11:lgwin=22"),
        ("brotli:lgwin=30", "brotli:quality=11:lgwin=30"),
        ("flac", "flac:level=5"),
        ("flac:exhaustive:level=8", "flac:level=8:exhaustive"),
    ] {
        let c = compressor_from_spec(spec).unwrap();
        assert_eq!(c.describe(), described);
        assert_eq!(
            compressor_from_spec(&c.describe()).unwrap().describe(),
            described
        );
    }
    for spec in SPECS {
        let d = compressor_from_spec(spec).unwrap().describe();
        assert_eq!(compressor_from_spec(&d).unwrap().describe(), d, "{spec}");
    }
    // DwarFS marks LZ4HC blocks as LZ4.
    assert_eq!(
        compressor_from_spec("lz4hc").unwrap().algo(),
        Compression::LZ4
    );
}

#[test]
fn bad_specs_are_refused() {
    for spec in [
        "",
        "gzip",
        "zstd:level=23",
        "zstd:level=x",
        "zstd:level",
        "zstd:foo",
        "zstd:level=1:level=2",
        "zstd:hash_log=31",
        "zstd:chain_log=5",
        "zstd:search_log=0",
        "zstd:min_match=2",
        "zstd:min_match=8",
        "zstd:target_length=131073",
        "zstd:hash_log",
        "lzma:level=10",
        "lzma:binary=mips",
        "lzma:extreme=maybe",
        "lzma:dict_size=31",
        "lzma:lc=5",
        "lzma:lp=2",
        "lzma:lc=2:lp=3",
        "lz4:level=1",
        "lz4hc:level=13",
        "brotli:quality=12",
        "brotli:lgwin=31",
        "flac:level=9",
        "flac:exhaustive=maybe",
        "ricepp:block_size=8",
        "ricepp:level=1",
    ] {
        let e = compressor_from_spec(spec)
            .err()
            .unwrap_or_else(|| panic!("{spec} accepted"));
        assert!(matches!(e, CodecError::BadSpec { .. }), "{spec}: {e}");
    }
    let e = compressor_from_spec("zstd:level=99").err().unwrap();
    assert_eq!(
        e.to_string(),
        "compression spec 'zstd:level=99': option 'level' must be in -131072..22"
    );
}

#[test]
fn truncated_payloads_are_refused() {
    let data = sample_data(20_000);
    for spec in SPECS.iter().filter(|s| !s.starts_with("n")) {
        let c = compressor_from_spec(spec).unwrap();
        let payload = c.compress(&data, None).unwrap();
        for cut in (0..payload.len()).step_by(37).chain([payload.len() - 1]) {
            let r = decompress(c.algo(), &payload[..cut], data.len());
            assert!(
                r.is_err(),
                "{spec}: payload cut to {cut} of {} bytes accepted",
                payload.len()
            );
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut x = 0x1234_5678_u32;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    let patterns: Vec<Vec<u8>> = vec![noise.clone(), vec![0; 4096], vec![0xff; 4096], {
        // Plausible size prefixes in front of noise.
        let mut v = vec![0x80, 0x20];
        v.extend_from_slice(&noise);
        v
    }];
    for algo in Compression::ALL
        .into_iter()
        .chain([Compression(8), Compression(0xffff)])
    {
        for p in &patterns {
            for len in [0, 1, 3, 4, 5, 9, 17, 64, 300, 4096] {
                let r = decompress(algo, &p[..len.min(p.len())], 1 << 16);
                // Some short patterns are valid (an LZ4 block of nothing);
                // whatever is accepted stays within the limit.
                if let Ok(out) = r {
                    assert!(out.len() <= 1 << 16);
                }
                let _ = uncompressed_size(algo, &p[..len.min(p.len())]);
            }
        }
    }
}

#[test]
fn unknown_algorithms_are_refused() {
    let e = decompress(Compression(8), b"abc", 10).unwrap_err();
    assert_eq!(e.to_string(), "unknown compression id 8");
    assert!(uncompressed_size(Compression(99), b"abc").is_err());
}

/// An xz stream whose index records one block of `size` bytes.
fn xz_with_declared_size(size: u64) -> Vec<u8> {
    let real = compressor_from_spec("lzma:level=0")
        .unwrap()
        .compress(b"hello", None)
        .unwrap();
    let footer = &real[real.len() - 12..];
    let backward = (u32::from_le_bytes(footer[4..8].try_into().unwrap()) as usize + 1) * 4;
    let index_start = real.len() - 12 - backward;
    // The real index: 0x00, count 1, unpadded size, uncompressed size.
    assert_eq!(&real[index_start..index_start + 2], &[0, 1]);
    let (unpadded, _) = varint::decode(&real[index_start + 2..]).unwrap();
    let mut index = vec![0, 1];
    varint::encode(unpadded, &mut index);
    varint::encode(size, &mut index);
    while index.len() % 4 != 0 {
        index.push(0);
    }
    index.extend_from_slice(&crc32(&index).to_le_bytes());
    let mut out = real[..index_start].to_vec();
    out.extend_from_slice(&index);
    let mut tail = ((index.len() / 4 - 1) as u32).to_le_bytes().to_vec();
    tail.extend_from_slice(&footer[8..10]);
    out.extend_from_slice(&crc32(&tail).to_le_bytes());
    out.extend_from_slice(&tail);
    out.extend_from_slice(b"YZ");
    out
}

#[test]
fn huge_declared_sizes_are_refused_before_decoding() {
    let limit = 16 << 20;
    let huge = 1u64 << 40;
    let mut with_varint = Vec::new();
    varint::encode(huge, &mut with_varint);
    with_varint.extend_from_slice(&[0x15, 0x02, 0x00, 0x00, 0x00]);
    // A zstd frame header: single segment, 8-byte content size.
    let mut zstd = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    zstd.extend_from_slice(&huge.to_le_bytes());
    let xz = xz_with_declared_size(huge);
    assert_eq!(
        uncompressed_size(Compression::LZMA, &xz).unwrap(),
        Some(huge)
    );
    let lz4 = [0xff, 0xff, 0xff, 0xff, 0x00];
    let cases: [(Compression, &[u8], u64); 7] = [
        (Compression::LZ4, &lz4, u64::from(u32::MAX)),
        (Compression::LZ4HC, &lz4, u64::from(u32::MAX)),
        (Compression::ZSTD, &zstd, huge),
        (Compression::LZMA, &xz, huge),
        (Compression::BROTLI, &with_varint, huge),
        (Compression::FLAC, &with_varint, huge),
        (Compression::RICEPP, &with_varint, huge),
    ];
    for (algo, payload, size) in cases {
        assert_eq!(
            uncompressed_size(algo, payload).unwrap(),
            Some(size),
            "{}",
            algo.name()
        );
        match decompress(algo, payload, limit) {
            Err(CodecError::DeclaredTooLarge {
                size: s, limit: l, ..
            }) => {
                assert_eq!((s, l), (size, limit));
            }
            other => panic!("{}: {other:?}", algo.name()),
        }
    }
    assert_eq!(
        decompress(Compression::LZ4, &lz4, limit)
            .unwrap_err()
            .to_string(),
        "lz4: declared size 4294967295 exceeds limit 16777216"
    );
    assert!(matches!(
        decompress(Compression::NONE, &[0; 100], 99),
        Err(CodecError::DeclaredTooLarge { size: 100, .. })
    ));
}

#[test]
fn xz_stream_padding_is_accepted() {
    let data = sample_data(5000);
    let mut payload = compressor_from_spec("lzma:level=1")
        .unwrap()
        .compress(&data, None)
        .unwrap();
    payload.extend_from_slice(&[0; 8]);
    assert_eq!(
        uncompressed_size(Compression::LZMA, &payload).unwrap(),
        Some(5000)
    );
    assert_eq!(decompress(Compression::LZMA, &payload, 5000).unwrap(), data);
    // An index that claims less than the stream holds is corrupt.
    let e = decompress(Compression::LZMA, &xz_with_declared_size(2), 100).unwrap_err();
    assert!(e.to_string().starts_with("lzma: corrupt data"), "{e}");
}

/// The payloads of the `algo` blocks of the shared upstream image made with
/// `--categorize` (none when the shared data is absent).
pub(crate) fn upstream_blocks(algo: Compression) -> Vec<Vec<u8>> {
    use hoard_format::section::{find_image_offset_in, parse_header, parse_version, SectionType};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/dwarfs-images/upstream/categorize.dwarfs"
    );
    let Ok(file) = std::fs::read(path) else {
        eprintln!("note: {path} is absent; skipping");
        return Vec::new();
    };
    let start = find_image_offset_in(&file).unwrap() as usize;
    let image = &file[start..];
    let version = parse_version(image).unwrap();
    let mut blocks = Vec::new();
    let mut pos = 0;
    while pos < image.len() {
        let h = parse_header(&image[pos..], version).unwrap();
        let begin = pos + h.size();
        let end = begin + h.length as usize;
        if h.kind == SectionType::BLOCK && h.compression == algo {
            blocks.push(image[begin..end].to_vec());
        }
        pos = end;
    }
    blocks
}

#[test]
fn redundant_blocks_get_their_own_settings_and_others_do_not() {
    // 5 MiB of 40 near copies of one text, as versions of a file side by
    // side are, and 5 MiB of text without such repeats.
    let base = sample_data(128 << 10);
    let mut redundant = Vec::new();
    for k in 0..40u8 {
        let mut copy = base.clone();
        copy[usize::from(k) * 3000] = k;
        redundant.extend_from_slice(&copy);
    }
    let plain = sample_data(redundant.len());
    let frame = |spec: &str, data: &[u8]| {
        compressor_from_spec(spec)
            .unwrap()
            .compress(data, None)
            .unwrap()
    };
    for (adaptive, redundant_spec, plain_spec) in [
        (
            "zstd:level=12:target_length=16:redundant_target_length=64",
            "zstd:level=12:target_length=64",
            "zstd:level=12:target_length=16",
        ),
        (
            "lzma:level=6:redundant_extreme",
            "lzma:level=6:extreme",
            "lzma:level=6",
        ),
    ] {
        assert_eq!(
            frame(adaptive, &redundant),
            frame(redundant_spec, &redundant)
        );
        assert_eq!(frame(adaptive, &plain), frame(plain_spec, &plain));
        // Blocks under 4 MiB get no trial.
        let small = &redundant[..4 << 20];
        assert_eq!(
            frame(adaptive, &small[..small.len() - 1]),
            frame(plain_spec, &small[..small.len() - 1])
        );
    }
}
