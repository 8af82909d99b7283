//! Any bytes as the user metadata of an S3 object (`NAME: value` a line),
//! parsed for the file attributes s3fs, rclone and goofys keep there.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = hoard_format::object_attrs::ObjectAttrs::parse_lines(&String::from_utf8_lossy(data));
});
