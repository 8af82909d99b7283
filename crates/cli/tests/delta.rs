//! Delta layers (`hoard create --base BASE --delta`): the layer's new
//! data points into its base's blocks. Stacked on its base it reads as
//! the new tree (mount, cat, extract, diff); alone or on another image it
//! is refused with one line naming the base; DwarFS refuses it alone and
//! reads its flattened stack.

mod common;

use common::*;
use std::path::PathBuf;

struct Delta {
    dir: tempfile::TempDir,
    new: PathBuf,
    base: PathBuf,
    layer: PathBuf,
}

/// The versioned trees, the base image and the delta layer.
fn delta() -> Delta {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = versioned_trees(dir.path());
    let base = create_image(&old, &dir.path().join("base.dwarfs"), &[]);
    let layer = create_image(
        &new,
        &dir.path().join("layer.dwarfs"),
        &["--base", base.to_str().unwrap(), "--delta"],
    );
    Delta {
        dir,
        new,
        base,
        layer,
    }
}

#[test]
fn a_delta_layer_is_small_and_its_stack_reads_exactly() {
    let d = delta();
    let (base, layer) = (s(&d.base), s(&d.layer));
    // Without --delta the new and changed files are stored whole: about
    // 3 x 64 KiB of noise; with it, little more than the edits.
    let plain = create_image(
        &d.new,
        &d.dir.path().join("plain.dwarfs"),
        &["--base", base],
    );
    let (plain, delta) = (
        std::fs::metadata(plain).unwrap().len(),
        std::fs::metadata(&d.layer).unwrap().len(),
    );
    assert!(delta * 20 < plain, "delta {delta} bytes, plain {plain}");

    hoard_ok(&[
        "diff",
        base,
        "--layer",
        layer,
        s(&d.new),
        "--ignore",
        "mtime_ns",
    ]);
    let cat = hoard_bytes(&["cat", base, "--layer", layer, "sub/added", "f02"]);
    let mut expected = std::fs::read(d.new.join("sub/added")).unwrap();
    expected.extend(std::fs::read(d.new.join("f02")).unwrap());
    assert!(cat == expected, "cat differs");
    let extracted = d.dir.path().join("extracted");
    extract_ok(&[base, "--layer", layer], &extracted);
    assert_same_files(&d.new, &extracted);

    if fuse_available() {
        let mnt = d.dir.path().join("mnt");
        let _mounted = mount_ok(&[base, layer], &mnt, &[]);
        assert_same_files(&d.new, &mnt);
    }
}

#[test]
fn a_delta_layer_reads_only_on_its_base() {
    let d = delta();
    let layer = s(&d.layer);
    let err = one_line_error(&["ls", layer]);
    assert!(
        err.contains("'base.dwarfs'") && err.contains("missing"),
        "{err}"
    );
    // Another image of the same tree has other blocks: refused too, even
    // with --force-stack.
    let other_tree = d.dir.path().join("old");
    std::fs::write(other_tree.join("text"), b"other text\n").unwrap();
    let other = create_image(&other_tree, &d.dir.path().join("other.dwarfs"), &[]);
    let err = one_line_error(&["cat", s(&other), "--layer", layer, "f01", "--force-stack"]);
    assert!(
        err.contains("'base.dwarfs'") && err.contains("another image"),
        "{err}"
    );
    // The base with other bytes in a block, its hashes made to match
    // again: another image, whose block hashes the layer did not record.
    let changed = tampered(
        &d.base,
        &d.dir.path().join("base-changed.dwarfs"),
        hoard_format::section::SectionType::BLOCK,
        0,
    );
    let err = hoard_fails(&["cat", s(&changed), "--layer", layer, "f01"]);
    assert!(err.contains("another image"), "{err}");
    // Only its XXH3-64 made to match, its SHA-512/256 kept: the identity
    // holds, and reads of the block check the SHA-512/256.
    let mut bytes = std::fs::read(&d.base).unwrap();
    let img = hoard_reader::Image::open(&d.base, &Default::default()).unwrap();
    let block = img
        .sections()
        .iter()
        .find(|s| s.header.kind == hoard_format::section::SectionType::BLOCK)
        .unwrap()
        .clone();
    let (start, end) = (block.offset as usize, block.end() as usize);
    let mut section = bytes[start..end].to_vec();
    tamper_section(&mut section);
    bytes[start + 64..end].copy_from_slice(&section[64..]);
    bytes[start + 40..start + 48].copy_from_slice(&section[40..48]);
    let xxh3_only = d.dir.path().join("base-xxh3.dwarfs");
    std::fs::write(&xxh3_only, bytes).unwrap();
    let mut failed = 0;
    for path in walkdir(&d.new) {
        let file = path.strip_prefix(&d.new).unwrap().to_str().unwrap();
        let out = run(&["cat", s(&xxh3_only), "--layer", layer, file]);
        if out.status.success() {
            assert!(
                out.stdout == std::fs::read(&path).unwrap(),
                "{file}: other bytes"
            );
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("SHA-512/256 mismatch"), "{file}: {err}");
            failed += 1;
        }
    }
    assert!(failed > 0, "the changed block went unnoticed");
    // Alone, `check` verifies what it holds itself.
    hoard_ok(&["check", "--full", layer]);
    // `info` names it.
    let info = hoard_ok(&["info", layer]);
    assert!(
        info.contains("depends on") && info.contains("base.dwarfs"),
        "{info}"
    );
    assert!(info.contains("hoard-delta"), "{info}");
}

#[test]
fn dwarfs_refuses_a_delta_layer_and_reads_its_flattened_stack() {
    let d = delta();
    let flat = d.dir.path().join("flat.dwarfs");
    rewrite_image(&[s(&d.base), s(&d.layer)], &flat, &[]);
    assert_same_tree(&d.new, &flat, "mtime_ns");
    if dwarfs_bin().is_none() {
        return;
    }
    let out = tool("dwarfsck").arg("-i").arg(&d.layer).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hoard-delta"));
    let into = d.dir.path().join("by-dwarfs");
    std::fs::create_dir_all(&into).unwrap();
    let out = tool("dwarfsextract")
        .arg("-i")
        .arg(&d.layer)
        .arg("-o")
        .arg(&into)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(walkdir(&into).is_empty());

    dwarfs_check_and_extract(&flat, &into);
    assert_same_files(&d.new, &into);
}

#[test]
fn a_chain_of_delta_layers_reads_exactly_past_the_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (tree, _) = versioned_trees(dir.path());
    let mut images = vec![create_image(&tree, &dir.path().join("day00.dwarfs"), &[])];
    // Eleven days (past the 8 images whose every block a layer uses):
    // a log grows, a file is edited, one is added and one removed.
    for day in 1..=11u64 {
        let mut log = std::fs::read(tree.join("f01")).unwrap();
        log.extend(format!("day {day}\n").as_bytes());
        std::fs::write(tree.join("f01"), log).unwrap();
        let mut edited = std::fs::read(tree.join("f02")).unwrap();
        edited[day as usize * 1000] ^= 0xff;
        std::fs::write(tree.join("f02"), edited).unwrap();
        std::fs::write(tree.join(format!("new{day}")), noise(20_000, 100 + day)).unwrap();
        let _ = std::fs::remove_file(tree.join(format!("new{}", day - 1)));
        let mut args = vec![];
        for image in &images {
            args.extend(["--base", s(image)]);
        }
        args.push("--delta");
        let name = dir.path().join(format!("day{day:02}.dwarfs"));
        let layer = create_image(&tree, &name, &args);
        assert!(std::fs::metadata(&layer).unwrap().len() < 20_000 + 8_000);
        images.push(layer);
    }
    let mut stack = vec![s(&images[0])];
    for image in &images[1..] {
        stack.extend(["--layer", s(image)]);
    }
    let out_dir = extract_ok(&stack, &dir.path().join("out"));
    assert_same_files(&tree, &out_dir);
    // Folded into a new base.
    let all: Vec<&str> = images.iter().map(|p| s(p)).collect();
    let folded = rewrite_image(&all, &dir.path().join("folded.dwarfs"), &[]);
    assert_same_tree(&tree, &folded, "mtime_ns");
}
