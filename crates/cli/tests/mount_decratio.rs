//! `-o decratio=R`: blocks decompressed only as far as reads go. A mount
//! with it shows exactly the packed tree; the reader decodes the start of a
//! block for a read near its start; a bad ratio is refused.

mod common;

use common::*;
use hoard_reader::{Extent, Filesystem, FsOptions};
use std::path::{Path, PathBuf};

/// Text-like bytes that zstd shrinks but does not trivialise.
fn contents(seed: u32, len: usize) -> Vec<u8> {
    let phrase = b"sphinx of black quartz, judge my vow ";
    hoard_testdata::text_like(len, seed | 1, phrase, (300, 512), 64)
}

/// A tree with a few large files and many small ones, packed with zstd in
/// 4 MiB blocks, times kept to the nanosecond; returns the tree and the
/// image.
fn packed_tree(dir: &Path) -> (PathBuf, PathBuf) {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("big")).unwrap();
    std::fs::create_dir_all(tree.join("small/deeper")).unwrap();
    for i in 0..3u32 {
        let data = contents(i + 1, (3 << 20) + 12_345 * i as usize);
        std::fs::write(tree.join(format!("big/f{i}")), data).unwrap();
    }
    for i in 0..200u32 {
        let sub = if i % 3 == 0 { "small/deeper" } else { "small" };
        let data = contents(i + 100, 1 + (i as usize * 7919) % 20_000);
        std::fs::write(tree.join(format!("{sub}/s{i}")), data).unwrap();
    }
    std::os::unix::fs::symlink("big/f0", tree.join("link")).unwrap();
    let image = create_image(
        &tree,
        &dir.join("tree.dwarfs"),
        &["-C", "zstd:level=3", "-S", "22", "--time-resolution=ns"],
    );
    (tree, image)
}

#[test]
fn a_mount_with_decratio_shows_the_tree() {
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let (tree, image) = packed_tree(dir.path());
    for ratio in ["0.5", "0", "1"] {
        let mnt = dir.path().join(format!("mnt-{ratio}"));
        let options = format!("decratio={ratio},cachesize=8m");
        let guard = mount_ok(&[s(&image)], &mnt, &["-o", &options]);
        // A read near the start of a big file first, then everything.
        let mut start = [0u8; 100];
        use std::io::Read;
        std::fs::File::open(mnt.join("big/f1"))
            .unwrap()
            .read_exact(&mut start)
            .unwrap();
        assert_eq!(start[..], contents(2, 100)[..]);
        assert_same_manifest(&manifest_of(&tree), &manifest_of(&mnt), Compare::Mounted);
        drop(guard);
        assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0, "still mounted");
    }
}

#[test]
fn a_read_near_the_start_of_a_block_decodes_only_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let (tree, image) = packed_tree(dir.path());
    let fs = Filesystem::open(&image, &FsOptions::default()).unwrap();
    // Of the big files, the one that starts nearest a block's start (where
    // each lands depends on the file order).
    let (i, ino, block, offset) = (0..3u32)
        .map(|i| {
            let ino = fs.lookup_path(&format!("big/f{i}")).unwrap();
            let Extent::Data { block, offset, .. } = fs.extents(ino).unwrap()[0] else {
                panic!("big/f{i} starts with data");
            };
            (i, ino, block, offset)
        })
        .min_by_key(|&(.., offset)| offset)
        .unwrap();
    assert!(
        offset < 2 << 20,
        "big/f{i} starts {offset} bytes into its block"
    );
    let mut buf = [0u8; 10];
    assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), 10);
    assert_eq!(buf[..], contents(i + 1, 10)[..]);
    let p = fs.cache().progress(block).unwrap();
    assert!(!p.complete, "{p:?}");
    assert!(
        p.decoded < p.size && p.decoded >= offset as usize + 10,
        "{p:?}, file at {offset}"
    );
    // Reading all of the file completes its blocks.
    let expected = std::fs::read(tree.join(format!("big/f{i}"))).unwrap();
    let mut all = vec![0u8; expected.len()];
    assert_eq!(fs.read(ino, 0, &mut all).unwrap(), expected.len());
    assert!(all == expected);
    assert!(fs.cache().progress(block).unwrap().complete);
}

#[test]
fn a_bad_decratio_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let image = dir.path().join("absent.dwarfs");
    for (ratio, says) in [
        ("1.5", "not between 0.0 and 1.0"),
        ("-0.25", "not between 0.0 and 1.0"),
        ("lots", "invalid number"),
    ] {
        let err = hoard_fails(&[
            "mount",
            s(&image),
            s(&mnt),
            "-o",
            &format!("decratio={ratio}"),
        ]);
        assert!(err.contains("decratio") && err.contains(says), "{err}");
    }
}
