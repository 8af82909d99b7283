//! `hoard merge`: images built apart joined into one, their compressed
//! blocks copied as they are. The merge is the union of the parts' trees
//! (seen through a FUSE mount and by DwarFS's own tools), no larger than
//! the parts together, and smaller when they hold the same files.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// Part `n`'s tree: small files, a hard link, a symlink, a file of its
/// own bulk, and `shared` (the same bulk in every part).
fn part_tree(root: &Path, n: u64, shared: &[u8]) {
    for i in 0..20 {
        write(
            &root.join(format!("d{n}/f{i}")),
            format!("part {n} file {i}\n").as_bytes(),
        );
    }
    write(&root.join(format!("d{n}/own.bin")), &noise(200_000, n));
    write(&root.join("shared.bin"), shared);
    std::fs::hard_link(
        root.join(format!("d{n}/f0")),
        root.join(format!("d{n}/f0.link")),
    )
    .unwrap();
    std::os::unix::fs::symlink("f1", root.join(format!("d{n}/f1.sym"))).unwrap();
}

/// The arguments of `hoard merge ARGS…` without progress.
fn merge_args<'a>(args: &[&'a str]) -> Vec<&'a str> {
    [&["merge", "--no-progress"], args].concat()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Three parts of 64 KiB blocks (`-S 16`), and the tree their merge
/// under their own names should be.
struct Parts {
    dir: tempfile::TempDir,
    images: Vec<PathBuf>,
    expected: PathBuf,
}

fn three_parts() -> Parts {
    let dir = tempfile::tempdir().unwrap();
    let shared = noise(300_000, 99);
    let expected = dir.path().join("expected");
    let mut images = Vec::new();
    for n in 1..=3 {
        let tree = dir.path().join(format!("p{n}"));
        part_tree(&tree, n, &shared);
        images.push(create_image(
            &tree,
            &dir.path().join(format!("p{n}.dwarfs")),
            &["-S", "16"],
        ));
        sh(
            dir.path(),
            &format!("mkdir -p expected && cp -a p{n} expected/p{n}"),
        );
    }
    // The merged root has the first part's attributes.
    sh(
        dir.path(),
        "chmod --reference=p1 expected && touch -r p1 expected",
    );
    Parts {
        dir,
        images,
        expected,
    }
}

fn paths(images: &[PathBuf]) -> Vec<&str> {
    images.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn three_parts_merge_into_their_union() {
    let p = three_parts();
    let merged = p.dir.path().join("merged.dwarfs");
    let mut args = paths(&p.images);
    args.extend(["-o", merged.to_str().unwrap()]);
    hoard_ok(&merge_args(&args));
    assert_eq!(same_to_the_second(&p.expected, &merged), "");

    // The shared file is stored once: its blocks in the later parts are
    // left out. Without dedupe, no more than the parts together (and
    // the header).
    let parts: u64 = p.images.iter().map(|i| size(i)).sum();
    assert!(
        size(&merged) < parts - 400_000,
        "{} of {parts}",
        size(&merged)
    );
    // Without dedupe, and with a header before the image.
    let copied = p.dir.path().join("copied.dwarfs");
    let header = p.dir.path().join("header.sh");
    write(&header, b"#!/bin/sh\nexit 0\n");
    let mut args = paths(&p.images);
    args.extend(["-o", copied.to_str().unwrap(), "--no-dedupe"]);
    args.extend(["--header", header.to_str().unwrap()]);
    hoard_ok(&merge_args(&args));
    assert!(std::fs::read(&copied)
        .unwrap()
        .starts_with(b"#!/bin/sh\nexit 0\n"));
    assert!(
        size(&copied) as f64 <= 1.01 * parts as f64,
        "{} of {parts}",
        size(&copied)
    );
    assert_eq!(same_to_the_second(&p.expected, &copied), "");

    if fuse_available() {
        let mnt = p.dir.path().join("mnt");
        let mounted = assert_mounts_as(&[s(&merged)], &mnt, &p.expected, "mtime_ns");
        drop(mounted);
    }
    if dwarfs_bin().is_some() {
        let extracted = p.dir.path().join("dwarfs-extracted");
        dwarfs_check_and_extract(&merged, &extracted);
        sh(p.dir.path(), "touch -r p1 dwarfs-extracted");
        let d = same_to_the_second(&extracted, &p.expected);
        assert_eq!(d, "", "extracted by dwarfsextract");
    }
}

#[test]
fn named_parts_and_unions() {
    let p = three_parts();
    let renamed = p.dir.path().join("renamed.dwarfs");
    let [a, b, _] = &p.images[..] else {
        unreachable!()
    };
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    hoard_ok(&merge_args(&[
        a,
        b,
        "--as",
        "x",
        "--as",
        "y",
        "-o",
        renamed.to_str().unwrap(),
    ]));
    sh(
        p.dir.path(),
        "mkdir renamed && cp -a p1 renamed/x && cp -a p2 renamed/y \
         && chmod --reference=p1 renamed && touch -r p1 renamed",
    );
    assert_eq!(
        same_to_the_second(&p.dir.path().join("renamed"), &renamed),
        ""
    );

    // Both parts hold shared.bin: a union of them is refused, naming it,
    // and leaves no image.
    let union = p.dir.path().join("union.dwarfs");
    let err = one_line_error(&merge_args(&["--union", a, b, "-o", s(&union)]));
    assert!(err.contains("'shared.bin' is in more than one"), "{err}");
    assert!(!union.exists());

    // Disjoint but for directories: the trees join.
    sh(
        p.dir.path(),
        "mkdir -p u1/common u2/common && echo one > u1/common/a && echo two > u2/common/b \
         && echo top > u2/top && mkdir u && cp -a u1/. u/ && cp -a u2/. u/",
    );
    let u1 = create_image(
        &p.dir.path().join("u1"),
        &p.dir.path().join("u1.dwarfs"),
        &[],
    );
    let u2 = create_image(
        &p.dir.path().join("u2"),
        &p.dir.path().join("u2.dwarfs"),
        &[],
    );
    hoard_ok(&merge_args(&[
        "--union",
        u1.to_str().unwrap(),
        u2.to_str().unwrap(),
        "-o",
        union.to_str().unwrap(),
    ]));
    assert_eq!(same_to_the_second(&p.dir.path().join("u"), &union), "");

    // Two parts under one name.
    let err = hoard_fails(&merge_args(&[
        a,
        b,
        "--as",
        "x",
        "--as",
        "x",
        "-o",
        "never.dwarfs",
    ]));
    assert!(err.contains("two images go under 'x'"), "{err}");
}

#[test]
fn different_block_sizes_merge_only_recompressed() {
    let p = three_parts();
    let tree = p.dir.path().join("p3");
    let other = create_image(&tree, &p.dir.path().join("p3-big.dwarfs"), &["-S", "18"]);
    let out_path = p.dir.path().join("out.dwarfs");
    let mut args = paths(&p.images[..2]);
    args.push(other.to_str().unwrap());
    args.extend(["--as", "p1", "--as", "p2", "--as", "p3"]);
    args.extend(["-o", out_path.to_str().unwrap()]);
    let err = hoard_fails(&merge_args(&args));
    assert!(
        err.contains("has blocks of 65536 bytes") && err.contains("--recompress"),
        "{err}"
    );
    assert!(!out_path.exists());
    args.push("--recompress");
    hoard_ok(&merge_args(&args));
    assert_eq!(same_to_the_second(&p.expected, &out_path), "");
}

#[test]
fn equal_contents_join_whatever_order_their_data_lies_in() {
    // The first part stores `a` before `z` (in data order), and `z` is
    // equal to the second part's `m`, which comes first in the merged
    // tree: the contents are hashed in data order, and joined in the
    // tree's (64 KiB blocks, so that the blocks only `z` used are left
    // out).
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (noise(200_000, 1), noise(200_000, 2));
    write(&dir.path().join("p1/a.txt"), &y);
    write(&dir.path().join("p1/z.txt"), &x);
    write(&dir.path().join("p2/m.txt"), &x);
    let images: Vec<PathBuf> = ["p1", "p2"]
        .iter()
        .map(|p| {
            create_image(
                &dir.path().join(p),
                &dir.path().join(format!("{p}.dwarfs")),
                &["-S", "16"],
            )
        })
        .collect();
    sh(
        dir.path(),
        "mkdir u && cp -a p1/. u && cp -a p2/. u && touch -r p1 u",
    );
    let merged = dir.path().join("merged.dwarfs");
    let mut args = vec!["--union"];
    args.extend(paths(&images));
    args.extend(["-o", merged.to_str().unwrap()]);
    hoard_ok(&merge_args(&args));
    assert_eq!(same_to_the_second(&dir.path().join("u"), &merged), "");
    let parts: u64 = images.iter().map(|i| size(i)).sum();
    assert!(
        size(&merged) < parts - 100_000,
        "{} of {parts}",
        size(&merged)
    );
}
