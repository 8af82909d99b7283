//! Any bytes as a block payload: the first byte picks the algorithm.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_reader::fuzzing::decompress(data);
});
