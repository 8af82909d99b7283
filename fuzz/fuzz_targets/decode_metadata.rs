//! Any bytes as a metadata schema and metadata payload.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_reader::fuzzing::decode_metadata(data);
});
