//! RICEPP round trips through an encoder that makes DwarFS's choices, over
//! every configuration DwarFS's decoder accepts, and refusal of the rest.

mod common;

use common::ricepp_encoder::{encode, Config};
use common::ricepp_payload;
use hoard_codec::{decompress, CodecError};
use hoard_format::section::Compression;

/// Pixel words in the block's byte order with the unused low bits clear:
/// a mix of smooth ramps, flat runs (zero-coded chunks), small noise (Rice
/// chunks) and full-range jumps (raw chunks).
fn words(n: usize, cfg: &Config, seed: u32) -> Vec<u16> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mask = u16::MAX << cfg.unused_lsb;
    (0..n)
        .map(|i| {
            let v = match (i / 700) % 4 {
                0 => (20_000 + (i as u32 % 300) * 7 + next() % 8) as u16,
                1 => 12_345,
                2 => next() as u16,
                _ => (30_000 + next() % 200) as u16,
            } & mask;
            if cfg.big_endian {
                v.swap_bytes()
            } else {
                v
            }
        })
        .collect()
}

#[test]
fn round_trips_every_configuration() {
    let mut n = 0;
    for block_size in [1, 7, 16, 128, 512] {
        for components in [1, 2] {
            for unused_lsb in [0, 2, 4, 9, 15] {
                for big_endian in [false, true] {
                    let cfg = Config {
                        block_size,
                        components,
                        unused_lsb,
                        big_endian,
                    };
                    let len = 2800 + 2 * (block_size % 5) * components;
                    let w = words(len, &cfg, n + 7);
                    let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
                    let payload = ricepp_payload(
                        bytes.len(),
                        block_size as u32,
                        components as u16,
                        unused_lsb as u8,
                        big_endian,
                        &encode(&cfg, &w),
                    );
                    let out = decompress(Compression::RICEPP, &payload, bytes.len())
                        .unwrap_or_else(|e| {
                            panic!("{block_size}/{components}/{unused_lsb}/{big_endian}: {e}")
                        });
                    assert!(
                        out == bytes,
                        "{block_size}/{components}/{unused_lsb}/{big_endian}"
                    );
                    n += 1;
                }
            }
        }
    }
}

#[test]
fn damaged_and_unsupported_blocks_are_refused() {
    let cfg = Config {
        block_size: 64,
        components: 2,
        unused_lsb: 0,
        big_endian: true,
    };
    let w = words(4000, &cfg, 3);
    let size = w.len() * 2;
    let stream = encode(&cfg, &w);
    let good = ricepp_payload(size, 64, 2, 0, true, &stream);
    assert!(decompress(Compression::RICEPP, &good, size).is_ok());
    for cut in (0..good.len()).step_by(41) {
        assert!(
            decompress(Compression::RICEPP, &good[..cut], size).is_err(),
            "cut at {cut}"
        );
    }
    assert!(matches!(
        decompress(Compression::RICEPP, &good, size - 1),
        Err(CodecError::DeclaredTooLarge { .. })
    ));
    // Configurations DwarFS cannot decode either.
    for (block_size, components, unused_lsb) in
        [(0, 1, 0), (513, 1, 0), (64, 0, 0), (64, 3, 0), (64, 1, 16)]
    {
        let p = ricepp_payload(size, block_size, components, unused_lsb, false, &stream);
        assert!(
            decompress(Compression::RICEPP, &p, size).is_err(),
            "{block_size}/{components}/{unused_lsb}"
        );
    }
    // Sizes that are not whole pixels of every component.
    for odd in [size - 1, size - 2] {
        let p = ricepp_payload(odd, 64, 2, 0, true, &stream);
        assert!(
            decompress(Compression::RICEPP, &p, size).is_err(),
            "{odd} bytes"
        );
    }
    // A newer bitstream version, or other sample widths.
    let mut newer = good.clone();
    let at = newer.len() - stream.len() - 2;
    assert_eq!(newer[at], 0x02, "version field");
    newer[at] = 0x04;
    let e = decompress(Compression::RICEPP, &newer, size).unwrap_err();
    assert_eq!(e.to_string(), "ricepp: unsupported: bitstream version 2");
}
