//! `hoard extract` never writes outside its output directory: malicious
//! names in an image are refused, and symlinks already in the output
//! directory are never followed.

mod common;

use common::*;
use hoard_format::section::{self, Compression, SectionType};
use hoard_reader::{Filesystem, FsOptions, Image, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// An image whose names table is stored as one plain buffer (`-P none`),
/// made once per test run: `docs/readme`, `links/h1`, the symlink
/// `links/rel` and the directory `links/sub`.
fn source_image() -> PathBuf {
    static IMAGE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, image) = IMAGE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("docs")).unwrap();
        std::fs::create_dir_all(tree.join("links/sub")).unwrap();
        std::fs::write(tree.join("docs/readme"), b"read me\n").unwrap();
        std::fs::write(tree.join("links/h1"), b"hard\n").unwrap();
        std::fs::write(tree.join("links/sub/inner"), b"inner\n").unwrap();
        std::os::unix::fs::symlink("h1", tree.join("links/rel")).unwrap();
        let image = create_image(&tree, &dir.path().join("source.dwarfs"), &["-P", "none"]);
        (dir, image)
    });
    image.clone()
}

/// Writes a copy of `image` to `out` with each `(old, new)` entry name
/// replaced (same length), the metadata stored uncompressed and no section
/// index.
fn patch_names(image: &Path, renames: &[(&str, &str)], out: &Path) {
    let fs = Filesystem::open(image, &FsOptions::default()).unwrap();
    let names = &fs.metadata().unwrap().names;
    let img = Image::open(image, &OpenOptions::default()).unwrap();
    let file = std::fs::read(image).unwrap();
    let mut result = Vec::new();
    for s in img.sections() {
        let raw = &file[s.offset as usize..s.end() as usize];
        match s.header.kind {
            SectionType::SECTION_INDEX => {}
            SectionType::METADATA_V2 => {
                let payload = &file[s.payload_offset() as usize..s.end() as usize];
                let mut meta =
                    hoard_codec::decompress(s.header.compression, payload, 1 << 28).unwrap();
                let buffer = names.concatenated();
                let start = meta
                    .windows(buffer.len())
                    .position(|w| w == buffer)
                    .expect("names buffer");
                for (old, new) in renames {
                    assert_eq!(old.len(), new.len());
                    let index = names
                        .iter()
                        .position(|n| n == old.as_bytes())
                        .expect("name");
                    let at = start + names.iter().take(index).map(<[u8]>::len).sum::<usize>();
                    meta[at..at + old.len()].copy_from_slice(new.as_bytes());
                }
                let number = s.header.number.unwrap();
                result.extend_from_slice(&section::encode_header_v2(
                    number,
                    s.header.kind,
                    Compression::NONE,
                    &meta,
                ));
                result.extend_from_slice(&meta);
            }
            _ => result.extend_from_slice(raw),
        }
    }
    std::fs::write(out, result).unwrap();
}

/// Extracts `image` into `<dir>/out`; returns (exit code, stderr).
fn extract(image: &Path, dir: &Path) -> (Option<i32>, String) {
    let out = run(&[
        "extract",
        image.to_str().unwrap(),
        "-o",
        dir.join("out").to_str().unwrap(),
    ]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn refuses_patched_image(renames: &[(&str, &str)], expect_in_error: &str) {
    let source = source_image();
    let scratch = tempfile::tempdir().unwrap();
    let image = scratch.path().join("evil.dwarfs");
    patch_names(&source, renames, &image);
    let dir = scratch.path().join("work");
    std::fs::create_dir(&dir).unwrap();
    let (code, err) = extract(&image, &dir);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(expect_in_error), "{err}");
    let made = listing(&dir);
    assert!(
        made.iter().all(|n| n == "out"),
        "nothing outside the output directory: {made:?}"
    );
    assert_eq!(
        listing(scratch.path()),
        vec!["evil.dwarfs".to_string(), "work".to_string()]
    );
}

#[test]
fn dot_dot_name_is_refused() {
    refuses_patched_image(&[("h1", "..")], "'..'");
}

#[test]
fn name_with_slash_is_refused() {
    refuses_patched_image(&[("docs", "../x")], "'../x'");
}

#[test]
fn symlink_and_directory_with_one_name_are_refused() {
    // links/ holds the symlink `rel` and the directory `sub`.
    refuses_patched_image(&[("sub", "rel")], "duplicate");
}

#[test]
fn existing_symlink_in_place_of_a_directory_is_not_followed() {
    let source = source_image();
    let scratch = tempfile::tempdir().unwrap();
    let outside = scratch.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let out = scratch.path().join("work/out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("links")).unwrap();
    let (code, err) = extract(&source, &scratch.path().join("work"));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("links") && err.contains("not a directory"),
        "{err}"
    );
    assert!(
        listing(&outside).is_empty(),
        "nothing written through the symlink"
    );
}

#[test]
fn existing_symlink_in_place_of_a_file_is_replaced() {
    let source = source_image();
    let scratch = tempfile::tempdir().unwrap();
    let victim = scratch.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out = scratch.path().join("work/out");
    std::fs::create_dir_all(out.join("links")).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("links/h1")).unwrap();
    let (code, err) = extract(&source, &scratch.path().join("work"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let meta = std::fs::symlink_metadata(out.join("links/h1")).unwrap();
    assert!(meta.is_file(), "the symlink was replaced by the file");
}
