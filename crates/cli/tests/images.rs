//! Every good DwarFS-made test image (the repository's, and `../shared`'s
//! when present) extracts to exactly its manifest
//! and passes `hoard check --full`.

mod common;

use common::*;

fn extract_and_compare(group: &str) {
    on_every_image(group, |image, expected| {
        let mut failed = Vec::new();
        let check = run(&["check", "--full", s(image)]);
        if !check.status.success() {
            let err = String::from_utf8_lossy(&check.stderr);
            failed.push(format!("check failed: {err}"));
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tree");
        let ex = run(&["extract", s(image), "-o", s(&out)]);
        if !ex.status.success() {
            let err = String::from_utf8_lossy(&ex.stderr);
            failed.push(format!("extract failed: {err}"));
            return failed;
        }
        let diff = manifest_diff(expected, &manifest_of(&out), Compare::Extracted);
        if !diff.is_empty() {
            failed.push(format!("extracted tree differs from manifest:\n{diff}"));
        }
        failed
    });
}

#[test]
fn compat_images_extract_exactly() {
    extract_and_compare("compat");
}

#[test]
fn upstream_images_extract_exactly() {
    extract_and_compare("upstream");
}

#[test]
fn misc_images_extract_exactly() {
    extract_and_compare("misc");
}

#[test]
fn future_features_image_is_refused_by_name() {
    let Some(image) = image("misc", "future-features.dwarfs") else {
        return;
    };
    for cmd in ["check", "info", "ls"] {
        let err = one_line_error(&[cmd, s(&image)]);
        assert!(
            err.contains("this-feature-will-never-exist"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn cat_prints_file_contents() {
    let Some(image) = image("compat", "compat-v0.9.10.dwarfs") else {
        return;
    };
    let contents = hoard_bytes(&["cat", s(&image), "format.sh"]);
    let manifest = std::fs::read_to_string(image.with_extension("manifest")).unwrap();
    let entry: serde_json::Value = manifest
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["path"] == "format.sh")
        .unwrap();
    use sha2::Digest;
    let sum: String = sha2::Sha256::digest(&contents)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(entry["sha256"], sum);
}

#[test]
fn checksums_match_manifest() {
    let Some(image) = image("upstream", "default.dwarfs") else {
        return;
    };
    let out = hoard_ok(&["check", "--checksum=sha256", s(&image)]);
    let sums: std::collections::HashMap<String, String> = out
        .lines()
        .map(|l| {
            let (sum, path) = l.split_once("  ").unwrap();
            match sum.strip_prefix('\\') {
                Some(sum) => (
                    path.replace("\\n", "\n").replace("\\\\", "\\"),
                    sum.to_string(),
                ),
                None => (path.to_string(), sum.to_string()),
            }
        })
        .collect();
    let manifest = std::fs::read_to_string(image.with_extension("manifest")).unwrap();
    let mut files = 0;
    for line in manifest.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["type"] == "f" {
            if let Some(path) = v["path"].as_str() {
                assert_eq!(
                    sums.get(path).map(String::as_str),
                    v["sha256"].as_str(),
                    "{path}"
                );
                files += 1;
            }
        }
    }
    assert!(files > 100);
}

#[test]
fn ls_long_lists_symlink_targets() {
    let Some(image) = image("upstream", "default.dwarfs") else {
        return;
    };
    let text = hoard_ok(&["ls", "-lR", s(&image)]);
    assert!(
        text.lines()
            .any(|l| l.starts_with('l') && l.ends_with("links/dangling -> ../does/not/exist")),
        "{text}"
    );
}

#[test]
fn a_closed_output_pipe_stops_quietly() {
    let Some(image) = image("upstream", "default.dwarfs") else {
        return;
    };
    let mut child = hoard()
        .args(["ls", "-lR", image.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    use std::io::Read;
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A damaged block header (block headers are read with their blocks, not
/// at open) fails the files with data in that block, with a one-line
/// error, and no other: the image opens, lists and reads the rest, and
/// `check` names the block. (Block 0's header is the image's first: an
/// image found by its first header cannot lose it.)
#[test]
fn a_damaged_block_header_fails_only_its_files() {
    // Block 0's header too: the image is then found by its section index.
    for damaged in [0usize, 1] {
        damaged_block_header_fails_only_its_files(damaged);
    }
}

fn damaged_block_header_fails_only_its_files(damaged: usize) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    // Noise is stored as it is: 64 KiB blocks of 64 + 65,536 bytes each.
    for i in 0..4 {
        std::fs::write(tree.join(format!("f{i}")), noise(150_000, i + 1)).unwrap();
    }
    let image = create_image(&tree, &dir.path().join("i.dwarfs"), &["-S", "16", "-l1"]);
    let mut bytes = std::fs::read(&image).unwrap();
    let block = damaged * (64 + 65_536);
    assert_eq!(
        &bytes[block..block + 6],
        b"DWARFS",
        "block {damaged}'s header"
    );
    bytes[block + 48] ^= 0x5a; // its section number
    std::fs::write(&image, &bytes).unwrap();
    let path = image.to_str().unwrap();

    hoard_ok(&["ls", path]);
    let mut failed = Vec::new();
    for i in 0..4u64 {
        let name = format!("f{i}");
        let out = run(&["cat", path, &name]);
        if out.status.success() {
            assert!(
                out.stdout == noise(150_000, i + 1),
                "{name} read wrong bytes"
            );
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
            failed.push(name);
        }
    }
    assert_eq!(failed, ["f0"], "only the file in block {damaged} fails");

    let check = run(&["check", path]);
    assert!(!check.status.success(), "check passed a damaged image");
    let report = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(
        report.contains(&format!("offset {block}")),
        "check names the block: {report}"
    );
}
