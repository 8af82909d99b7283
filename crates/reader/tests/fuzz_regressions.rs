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

#[test]
fn key_parsers_inputs_and_seeds_do_not_panic() {
    replay("key_parsers", |data| {
        fuzzing::key_text(data);
        Ok::<(), ()>(())
    });
    for seed in seeds("key_parsers") {
        fuzzing::key_text(&seed);
    }
}

#[test]
fn tampered_signed_seeds_answer_as_the_genuine_images() {
    check_tampered("tampered_signed", fuzzing::tampered::signed_guard());
}

#[test]
fn tampered_sealed_seeds_answer_as_the_genuine_images() {
    check_tampered("tampered_sealed", fuzzing::tampered::sealed_guard());
}

/// The committed seeds of fuzz target `target`.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The genuine images a tampering target starts from, opened under `guard`.
fn genuine(
    target: &str,
    guard: fuzzing::tampered::Guard,
    names: &[&str],
) -> fuzzing::tampered::Genuine {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let images: Vec<Vec<u8>> = names
        .iter()
        .map(|name| std::fs::read(dir.join(name)).unwrap())
        .collect();
    let images: Vec<&[u8]> = images.iter().map(Vec::as_slice).collect();
    fuzzing::tampered::Genuine::new(guard, &images)
}

/// Replays the seeds and saved inputs of a tampering target: the genuine
/// images (`a.dwarfs`, `b.dwarfs`) open under `guard`, and no input
/// answers a read with what no genuine image holds.
fn check_tampered(target: &str, guard: fuzzing::tampered::Guard) {
    let genuine = genuine(target, guard, &["a.dwarfs", "b.dwarfs"]);
    for seed in seeds(target) {
        genuine.check(&seed);
    }
    for path in inputs(target) {
        genuine.check(&std::fs::read(path).unwrap());
    }
}

/// The oracle sees a substitution: image b, signed with the same key,
/// passed off as image a.
#[test]
#[should_panic(expected = "with what no genuine image holds")]
fn tampered_signed_oracle_refuses_another_genuine_image() {
    let only_a = genuine(
        "tampered_signed",
        fuzzing::tampered::signed_guard(),
        &["a.dwarfs"],
    );
    let b = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/tampered_signed/b.dwarfs"),
    )
    .unwrap();
    only_a.check(&b);
}
