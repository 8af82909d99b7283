//! Replays every input the fuzzers once crashed on (`fuzz/regressions/
//! <target>/*`) through the same code as the fuzz target, on stable Rust:
//! each must give a result, `Ok` or `Err`, without panicking.

use hoard_reader::fuzzing;
use std::path::{Path, PathBuf};

/// The saved inputs of fuzz target `target`, sorted (none when the
/// fuzzer never found anything for it, so its folder does not exist).
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `body` on every saved input of fuzz target `target`.
fn replay<E: std::fmt::Debug>(target: &str, body: fn(&[u8]) -> Result<(), E>) {
    for path in inputs(target) {
        let result = body(&std::fs::read(&path).unwrap());
        eprintln!("{}: {result:?}", path.display());
    }
}

#[test]
fn saved_inputs_of_every_target_do_not_panic() {
    replay("open_image", fuzzing::open_image);
    replay("signed_image", fuzzing::signed_image);
    replay("decode_metadata", fuzzing::decode_metadata);
    replay("decompress", fuzzing::decompress);
    replay("encrypted_image", fuzzing::encrypted_image);
}

#[test]
fn the_encrypted_image_seed_opens() {
    // The seed is encrypted to the fuzzing identity: the target reaches
    // the decryption of every section.
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/encrypted_image/tiny.dwarfs");
    fuzzing::encrypted_image(&std::fs::read(seed).unwrap()).unwrap();
}
