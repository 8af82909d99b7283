//! Any bytes as a key section payload and as an encrypted image: parsed,
//! unwrapped and opened with a fixed age identity, then read everything.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_reader::fuzzing::encrypted_image(data);
});
