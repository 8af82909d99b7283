//! The `object_attrs` fuzz target's body over its committed seeds
//! (`fuzz/seeds/object_attrs`) and over truncated and bit-flipped copies
//! of each: nothing panics, and the s3fs seeds give every attribute.

use hoard_format::object_attrs::ObjectAttrs;
use std::path::Path;

#[test]
fn seeds_and_their_mutations_parse_without_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/object_attrs");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let parse = |bytes: &[u8]| ObjectAttrs::parse_lines(&String::from_utf8_lossy(bytes));
        let attrs = parse(&data);
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("s3fs")
        {
            let all = [attrs.mode, attrs.uid, attrs.gid]
                .iter()
                .all(Option::is_some);
            assert!(
                all && attrs.mtime.is_some(),
                "{}: {attrs:?}",
                path.display()
            );
        }
        for cut in 0..data.len() {
            parse(&data[..cut]);
        }
        for i in 0..data.len() {
            let mut flipped = data.clone();
            flipped[i] ^= 0x5a;
            parse(&flipped);
        }
        seeds += 1;
    }
    assert!(seeds >= 4, "{seeds} seeds");
}
