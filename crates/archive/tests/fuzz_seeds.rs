//! The `archive_read` fuzz target's body over its committed seed corpus
//! (`fuzz/seeds/archive_read`: one small archive per format and filter),
//! and over truncated and bit-flipped copies of each: nothing panics, and
//! every seed reads to its end with at least one member.

use hoard_archive::{fuzzing, ArchiveReader};
use std::path::Path;

#[test]
fn seeds_and_their_mutations_read_without_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/archive_read");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let mut reader = ArchiveReader::open_file(&path).unwrap();
        let mut members = 0;
        while reader
            .next_member()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .is_some()
        {
            while reader.read_block().unwrap().is_some() {}
            members += 1;
        }
        assert!(members > 0, "{}", path.display());
        fuzzing::read_all(&data);
        for cut in [1, data.len() / 3, data.len() / 2, data.len() - 1] {
            fuzzing::read_all(&data[..cut]);
        }
        for i in (0..data.len()).step_by(97) {
            let mut flipped = data.clone();
            flipped[i] ^= 0x5a;
            fuzzing::read_all(&flipped);
        }
        seeds += 1;
    }
    assert!(seeds >= 20, "{seeds} seeds");
}
