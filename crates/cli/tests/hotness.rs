//! Hot files first (#46): `hoard create --categorize=hotness
//! --hotness-list=FILE` puts the listed files, in the list's order, in
//! blocks of their own at the start of the image (LZ4 HC by default);
//! `--order=explicit:file=FILE` lays the listed files out first; `hoard
//! rewrite --hotness-list` lays an image out again the same way. The
//! images read back byte for byte, through DwarFS's tools too, and mount
//! with `-o preload_category=hotness`.

mod common;

use common::*;
use hoard_reader::{Extent, Filesystem, FsOptions};
use std::path::{Path, PathBuf};

/// The hot files of the tests, in the order they are listed.
const HOT: [&str; 3] = ["lib/f07", "bin/f02", "lib/f10"];

/// A tree of 12 files of 40 KiB of text that compresses but does not
/// repeat (`bin/f00`… and `lib/f06`…), and a list of [`HOT`] beside it,
/// written as an analysis file is (with a leading slash on one, one
/// given twice and one path the tree lacks).
fn tree_and_list() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for i in 0..12u64 {
        let path = tree.join(format!("{}/f{i:02}", if i < 6 { "bin" } else { "lib" }));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = noise(40 << 10, i + 1)
            .chunks(4)
            .map(|n| format!("{} {}\n", u32::from_le_bytes(n.try_into().unwrap()), i))
            .collect();
        std::fs::write(path, &text[..40 << 10]).unwrap();
    }
    let list = dir.path().join("hot.list");
    let text = format!(
        "/{}\n{}\nnot/there\n{}\n{}\n",
        HOT[0], HOT[1], HOT[0], HOT[2]
    );
    std::fs::write(&list, text).unwrap();
    (dir, tree, list)
}

/// Every regular file below `tree`, as paths relative to it.
fn files(tree: &Path) -> Vec<String> {
    walkdir(tree)
        .iter()
        .map(|p| p.strip_prefix(tree).unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Where the file at `path` starts in `fs` (its first chunk's block and
/// offset), and every block it uses.
fn places(fs: &Filesystem, path: &str) -> ((u32, u32), Vec<u32>) {
    let ino = fs.lookup_path(path).unwrap();
    let blocks: Vec<(u32, u32)> = fs
        .extents(ino)
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Extent::Data { block, offset, .. } => Some((*block, *offset)),
            _ => None,
        })
        .collect();
    (blocks[0], blocks.iter().map(|b| b.0).collect())
}

/// Asserts that `image` holds [`HOT`] first, in that order, and nothing
/// else, in blocks of category `hotness` at its start.
fn assert_hot_first(image: &Path, tree: &Path) {
    let fs = Filesystem::open(image, &FsOptions::default()).unwrap();
    let hot_blocks: Vec<u32> = (0..fs.block_count() as u32)
        .filter(|&b| fs.block_category(b) == Some("hotness"))
        .collect();
    assert!(!hot_blocks.is_empty());
    assert_eq!(hot_blocks, (0..hot_blocks.len() as u32).collect::<Vec<_>>());
    let mut last = None;
    for path in HOT {
        let (start, used) = places(&fs, path);
        assert!(
            used.iter().all(|b| hot_blocks.contains(b)),
            "{path}: {used:?}"
        );
        assert!(last < Some(start), "{path} at {start:?}, after {last:?}");
        last = Some(start);
    }
    for path in files(tree).iter().filter(|p| !HOT.contains(&p.as_str())) {
        let (_, used) = places(&fs, path);
        assert!(
            used.iter().all(|b| !hot_blocks.contains(b)),
            "{path}: {used:?}"
        );
    }
}

#[test]
fn hot_files_come_first_in_blocks_of_their_own_and_read_back() {
    let (dir, tree, list) = tree_and_list();
    let image = dir.path().join("hot.dwarfs");
    let out = hoard_ok(&create_args(
        &tree,
        &image,
        &[
            "-l4",
            "-S16",
            "--categorize=hotness,incompressible",
            "--hotness-list",
            s(&list),
            "--json",
        ],
    ));
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["lists"][0]["listed"], 4, "{summary}");
    assert_eq!(summary["lists"][0]["unmatched"], 1, "{summary}");
    assert_hot_first(&image, &tree);

    let info: serde_json::Value =
        serde_json::from_str(&hoard_ok(&["info", "--json", s(&image)])).unwrap();
    assert_eq!(json_strings(&info["categories"])[0], "hotness", "{info}");
    let hot = &info["blocks_by_category"]["hotness"]["count"];
    assert_eq!(
        &info["blocks_by_compression"]["lz4"]["count"], hot,
        "{info}"
    );
    assert_same_tree(&tree, &image, "mtime_ns");

    if dwarfs_bin().is_some() {
        let into = dir.path().join("dwarfs");
        dwarfs_check_and_extract(&image, &into);
        assert_same_files(&tree, &into);
    }
}

#[test]
fn hot_blocks_stay_small_whatever_the_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let mut list = String::new();
    for i in 0..3u64 {
        let text: String = noise(1 << 20, i + 1)
            .chunks(4)
            .map(|n| format!("{}\n", u32::from_le_bytes(n.try_into().unwrap())))
            .collect();
        std::fs::write(tree.join(format!("f{i}")), text).unwrap();
        list.push_str(&format!("f{i}\n"));
    }
    let list_file = dir.path().join("hot.list");
    std::fs::write(&list_file, list).unwrap();
    let image = dir.path().join("hot.dwarfs");
    let hot_list = format!("--hotness-list={}", s(&list_file));
    create_image(&tree, &image, &["-S22", "--categorize=hotness", &hot_list]);
    let fs = Filesystem::open(&image, &FsOptions::default()).unwrap();
    let hot: Vec<u64> = (0..fs.block_count() as u32)
        .filter(|&b| fs.block_category(b) == Some("hotness"))
        .map(|b| fs.decoded_size(b))
        .collect();
    assert!(hot.len() > 3, "{hot:?}");
    assert!(hot.iter().all(|&size| size <= 1 << 20), "{hot:?}");
    assert_same_tree(&tree, &image, "mtime_ns");
    if dwarfs_bin().is_some() {
        let into = dir.path().join("dwarfs");
        dwarfs_check_and_extract(&image, &into);
        assert_same_files(&tree, &into);
    }
}

#[test]
fn an_explicit_order_lays_the_listed_files_out_first() {
    let (dir, tree, list) = tree_and_list();
    let build = |name: &str, order: String| {
        let image = dir.path().join(name);
        create_image(
            &tree,
            &image,
            &["-S16", "--no-history", "--no-create-timestamp", &order],
        )
    };
    let image = build("x.dwarfs", format!("--order=explicit:file={}", s(&list)));
    let short = build("short.dwarfs", format!("--order=explicit:{}", s(&list)));
    assert!(std::fs::read(&image).unwrap() == std::fs::read(short).unwrap());
    let fs = Filesystem::open(&image, &FsOptions::default()).unwrap();
    let starts: Vec<(u32, u32)> = HOT.iter().map(|p| places(&fs, p).0).collect();
    assert_eq!(starts[0], (0, 0));
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    for path in files(&tree).iter().filter(|p| !HOT.contains(&p.as_str())) {
        assert!(places(&fs, path).0 > starts[2], "{path}");
    }
    assert_same_tree(&tree, &image, "mtime_ns");
}

#[test]
fn a_rewrite_with_a_hotness_list_lays_an_image_out_again() {
    let (dir, tree, list) = tree_and_list();
    let plain = create_image(&tree, &dir.path().join("plain.dwarfs"), &["-S16"]);
    let hot = rewrite_image(
        &[s(&plain)],
        &dir.path().join("hot.dwarfs"),
        &["--hotness-list", s(&list)],
    );
    assert_hot_first(&hot, &tree);
    assert_same_tree(&tree, &hot, "mtime_ns");

    let Some((_dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let _mounted = mount_ok(&[s(&hot)], &mnt, &["-o", "preload_category=hotness"]);
    assert_same_tree(&tree, &mnt, "mtime_ns");
}

#[test]
fn hotness_options_are_checked() {
    let (dir, tree, list) = tree_and_list();
    let image = dir.path().join("x.dwarfs");
    let missing = dir.path().join("missing.list");
    let cases: &[&[&str]] = &[
        &["--categorize=hotness", "--hotness-list", s(&missing)],
        &["--categorize=hotness"],
        &["--hotness-list", s(&list)],
        &["--categorize=binary", "--hotness-list", s(&list)],
        &["--order=explicit:file=/nonexistent/list"],
        &["--order=explicit"],
    ];
    for extra in cases {
        one_line_error(&create_args(&tree, &image, extra));
        assert!(!image.exists());
    }
    let plain = create_image(&tree, &dir.path().join("plain.dwarfs"), &[]);
    let out = dir.path().join("re.dwarfs");
    for extra in [
        &["--hotness-list", s(&missing)][..],
        &["--hotness-list", s(&list), "--recompress=none"],
    ] {
        one_line_error(&[&["rewrite", s(&plain), "-o", s(&out)][..], extra].concat());
        assert!(!out.exists());
    }
}
