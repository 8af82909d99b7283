//! Any bytes as an archive stream, through libarchive and hoard's binding:
//! every member and data block read to the end.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hoard_archive::fuzzing::read_all(data);
});
