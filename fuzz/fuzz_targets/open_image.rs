//! Any bytes as an image: open it (hashes fixed up), then read everything.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_reader::fuzzing::open_image(data);
});
