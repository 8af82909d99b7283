//! Any bytes as an OCI manifest, index or config (the first byte picks
//! the media type), as a platform name and as a tar to index
//! (`hoard_oci::fuzzing::parse_documents`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hoard_oci::fuzzing::parse_documents(data);
});
