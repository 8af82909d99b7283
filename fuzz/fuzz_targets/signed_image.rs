//! Any bytes as key lines, a signature and a signed image: opened trusting
//! a fixed key (the signature made again with it), then read everything.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_reader::fuzzing::signed_image(data);
});
