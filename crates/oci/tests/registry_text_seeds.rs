//! The `registry_text` fuzz target's body over its committed seeds
//! (`fuzz/seeds/registry_text`) and truncated and bit-flipped copies of
//! each: nothing panics, and a reference that parses prints as one that
//! parses to the same.

use hoard_oci::registry::{auth::Challenge, ImageRef};
use std::path::Path;

fn body(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = Challenge::parse(&text);
    for name in [text.to_string(), format!("docker://{text}")] {
        if let Ok(parsed) = ImageRef::parse(&name) {
            assert_eq!(ImageRef::parse(&parsed.to_string()).unwrap(), parsed);
        }
    }
}

#[test]
fn seeds_and_their_mutations_parse_without_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/registry_text");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        body(&data);
        for cut in 0..data.len() {
            body(&data[..cut]);
        }
        for i in 0..data.len() {
            let mut flipped = data.clone();
            flipped[i] ^= 0x5a;
            body(&flipped);
        }
        seeds += 1;
    }
    assert!(seeds >= 5, "{seeds} seeds");
}
