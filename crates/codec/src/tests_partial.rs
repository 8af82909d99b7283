//! Partial decoding gives, step by step, exactly the whole-block output, and
//! refuses what whole-block decoding refuses.

use crate::tests::{sample_data, upstream_blocks, SPECS};
use crate::{compressor_from_spec, decompress, partial_decoder, CodecError, PartialDecoder};
use hoard_format::section::Compression;

/// Decodes all of `decoder` in steps of the given sizes (cycled).
fn decode_in_steps(
    decoder: &mut dyn PartialDecoder,
    steps: &[usize],
) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![0u8; decoder.size()];
    let mut at = 0;
    for &step in steps.iter().cycle() {
        let end = (at + step).min(out.len());
        decoder.decode(&mut out[at..end])?;
        assert_eq!(decoder.produced(), end);
        at = end;
        if at == out.len() {
            break;
        }
    }
    // An empty output still needs its end check.
    decoder.decode(&mut [])?;
    assert_eq!(decoder.state_bytes(), 0, "state dropped once complete");
    Ok(out)
}

/// Every algorithm's payloads of `data`, from the writer's compressors.
fn payloads(data: &[u8]) -> Vec<(String, Compression, Vec<u8>)> {
    SPECS
        .iter()
        .map(|spec| {
            let c = compressor_from_spec(spec).unwrap();
            (spec.to_string(), c.algo(), c.compress(data, None).unwrap())
        })
        .collect()
}

#[test]
fn small_steps_give_the_whole_block_output() {
    for len in [0, 1, 1000, 300_000] {
        let data = sample_data(len);
        for (spec, algo, payload) in payloads(&data) {
            for steps in [&[1usize, 7, 4096][..], &[65_536], &[len.max(1)]] {
                let mut d = partial_decoder(algo, &payload, len).unwrap();
                assert_eq!(d.size(), len);
                assert_eq!(
                    d.streams(),
                    matches!(
                        algo,
                        Compression::ZSTD | Compression::LZMA | Compression::BROTLI
                    )
                );
                let out = decode_in_steps(d.as_mut(), steps).unwrap();
                assert!(out == data, "{spec}, {len} bytes, steps {steps:?}");
            }
        }
    }
}

#[test]
fn upstream_flac_and_ricepp_blocks_decode_in_steps() {
    for algo in [Compression::FLAC, Compression::RICEPP] {
        for payload in upstream_blocks(algo) {
            let whole = decompress(algo, &payload, 1 << 26).unwrap();
            let mut d = partial_decoder(algo, &payload, 1 << 26).unwrap();
            assert!(decode_in_steps(d.as_mut(), &[333, 10_000]).unwrap() == whole);
        }
    }
}

#[test]
fn streaming_decoders_hold_their_state_until_complete() {
    let data = sample_data(1 << 20);
    for spec in ["zstd:level=3", "lzma:level=1", "brotli:quality=3"] {
        let c = compressor_from_spec(spec).unwrap();
        let payload = c.compress(&data, None).unwrap();
        let mut d = partial_decoder(c.algo(), &payload, data.len()).unwrap();
        let mut out = vec![0u8; 4096];
        d.decode(&mut out).unwrap();
        assert_eq!(out, data[..4096], "{spec}");
        assert!(d.state_bytes() >= payload.len(), "{spec}: state counted");
    }
}

#[test]
fn truncated_and_corrupt_payloads_are_refused() {
    let data = sample_data(20_000);
    for (spec, algo, payload) in payloads(&data) {
        if algo == Compression::NONE {
            continue;
        }
        for cut in (0..payload.len()).step_by(37).chain([payload.len() - 1]) {
            let r = partial_decoder(algo, &payload[..cut], data.len())
                .and_then(|mut d| decode_in_steps(d.as_mut(), &[1000]));
            assert!(r.is_err(), "{spec}: payload cut to {cut} accepted");
        }
        // Flipped bytes in the middle never panic; what is accepted has the
        // declared size.
        for at in (payload.len() / 4..payload.len()).step_by(53) {
            let mut bad = payload.clone();
            bad[at] ^= 0x5a;
            if let Ok(mut d) = partial_decoder(algo, &bad, data.len()) {
                if let Ok(out) = decode_in_steps(d.as_mut(), &[777]) {
                    assert_eq!(out.len(), data.len(), "{spec}");
                }
            }
        }
    }
}

#[test]
fn trailing_data_is_refused_as_by_whole_decoding() {
    let data = sample_data(5000);
    for (spec, algo, payload) in payloads(&data) {
        let mut longer = payload.clone();
        longer.extend_from_slice(b"trailing garbage");
        let whole = decompress(algo, &longer, 1 << 20);
        let partial = partial_decoder(algo, &longer, 1 << 20)
            .and_then(|mut d| decode_in_steps(d.as_mut(), &[100]));
        assert_eq!(whole.is_ok(), partial.is_ok(), "{spec}");
    }
}

#[test]
fn output_over_the_limit_is_refused() {
    let data = sample_data(10_000);
    for (spec, algo, payload) in payloads(&data) {
        assert!(
            matches!(
                partial_decoder(algo, &payload, data.len() - 1),
                Err(CodecError::DeclaredTooLarge { .. })
            ),
            "{spec}"
        );
        // Asking for more than the declared size is refused too.
        let mut d = partial_decoder(algo, &payload, data.len()).unwrap();
        let mut big = vec![0u8; data.len() + 1];
        assert!(d.decode(&mut big).is_err(), "{spec}");
    }
}

#[test]
fn garbage_never_panics() {
    let mut x = 0x9e37_79b9_u32;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    for algo in Compression::ALL.into_iter().chain([Compression(8)]) {
        for len in [0, 1, 4, 5, 9, 17, 300, 4096] {
            if let Ok(mut d) = partial_decoder(algo, &noise[..len], 1 << 16) {
                if let Ok(out) = decode_in_steps(d.as_mut(), &[100]) {
                    assert!(out.len() <= 1 << 16);
                }
            }
        }
    }
}
