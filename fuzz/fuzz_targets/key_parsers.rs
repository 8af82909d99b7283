//! Any bytes as a secret key, public keys, an identity file, a recipients
//! file, expiry times and a signature payload with claims.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hoard_reader::fuzzing::key_text(data);
});
