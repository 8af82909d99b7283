//! `hoard create --categorize`: audio, executables and incompressible
//! data get blocks and codecs of their own (FLAC for audio, none for
//! incompressible data), the image reads back identical, and a rewrite
//! keeps the categories.

mod common;

use common::*;
use std::path::Path;

/// A WAV file of `frames` frames of a sine per channel.
fn wav(channels: u16, bytes: u16, frames: usize) -> Vec<u8> {
    let mut pcm = Vec::new();
    let amplitude = ((1i64 << (8 * bytes - 1)) - 1) as f64 * 0.7;
    for i in 0..frames {
        for c in 0..channels {
            let v = ((i as f64) * 0.01 * f64::from(c + 1)).sin() * amplitude;
            let v = v as i64 + if bytes == 1 { 128 } else { 0 };
            pcm.extend_from_slice(&v.to_le_bytes()[..bytes as usize]);
        }
    }
    let mut f = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
    f.extend(16u32.to_le_bytes());
    f.extend(1u16.to_le_bytes());
    f.extend(channels.to_le_bytes());
    f.extend(48000u32.to_le_bytes());
    f.extend((48000 * u32::from(channels * bytes)).to_le_bytes());
    f.extend((channels * bytes).to_le_bytes());
    f.extend((8 * bytes).to_le_bytes());
    f.extend(b"data");
    f.extend((pcm.len() as u32).to_le_bytes());
    f.extend(&pcm);
    let size = (f.len() - 8) as u32;
    f[4..8].copy_from_slice(&size.to_le_bytes());
    f
}

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("audio")).unwrap();
    std::fs::write(root.join("audio/stereo16.wav"), wav(2, 2, 100_000)).unwrap();
    std::fs::write(root.join("audio/mono8.wav"), wav(1, 1, 30_001)).unwrap();
    std::fs::write(root.join("audio/surround24.wav"), wav(6, 3, 20_000)).unwrap();
    std::fs::write(
        root.join("random.bin"),
        noise(2 << 20, 0x9e37_79b9_7f4a_7c15),
    )
    .unwrap();
    std::fs::write(root.join("text.txt"), "categories\n".repeat(50_000)).unwrap();
    std::fs::copy("/bin/true", root.join("true")).unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
}

fn info(image: &Path) -> serde_json::Value {
    serde_json::from_str(&hoard_ok(&["info", "--json", s(image)])).unwrap()
}

fn count(info: &serde_json::Value, algo: &str) -> u64 {
    info["blocks_by_compression"][algo]["count"]
        .as_u64()
        .unwrap_or(0)
}

/// Checks `image` and asserts that it extracts to the tree of `manifest`.
fn assert_reads_back(image: &Path, manifest: &str) {
    hoard_ok(&["check", "--full", s(image)]);
    let dir = tempfile::tempdir().unwrap();
    assert_extracts_as(&[s(image)], &dir.path().join("x"), manifest);
}

#[test]
fn categorized_images_read_back_and_use_flac_and_no_compression() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let manifest = manifest_of(&src);
    let plain = dir.path().join("plain.dwarfs");
    let categorized = dir.path().join("cat.dwarfs");
    for (image, extra) in [(&plain, &[][..]), (&categorized, &["--categorize"][..])] {
        create_image(
            &src,
            image,
            &[&["-l", "5", "--time-resolution=ns"], extra].concat(),
        );
        assert_reads_back(image, &manifest);
    }
    let i = info(&categorized);
    let names = json_strings(&i["categories"]);
    for want in [
        "<default>",
        "pcmaudio/waveform",
        "pcmaudio/metadata",
        "binary/elf",
        "incompressible",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // One FLAC block per sample layout; random data stored as it is.
    assert_eq!(count(&i, "flac"), 3, "{i}");
    assert!(count(&i, "none") >= 1, "{i}");
    assert!(count(&info(&plain), "flac") == 0);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&categorized) < size(&plain),
        "FLAC should beat zstd on audio: {} vs {}",
        size(&categorized),
        size(&plain)
    );

    // A rewrite keeps the categories: FLAC again for audio, zstd elsewhere.
    let rewritten = dir.path().join("rewritten.dwarfs");
    rewrite_image(
        &[s(&categorized)],
        &rewritten,
        &[
            "-C",
            "zstd:level=3",
            "-C",
            "pcmaudio/waveform::flac:level=8",
            "-C",
            "incompressible::null",
        ],
    );
    assert_reads_back(&rewritten, &manifest);
    let i = info(&rewritten);
    assert_eq!(count(&i, "flac"), 3, "{i}");

    // Everything as zstd: audio blocks become ordinary blocks.
    let zstd = dir.path().join("zstd.dwarfs");
    rewrite_image(&[s(&categorized)], &zstd, &["-C", "zstd:level=3"]);
    assert_reads_back(&zstd, &manifest);
    assert_eq!(count(&info(&zstd), "flac"), 0);
}

/// Names of the categories in `info`.
fn categories(info: &serde_json::Value) -> Vec<String> {
    info["categories"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn the_default_level_keeps_zip_headers_apart_and_none_turns_it_off() {
    // (What it gains shows on large archives: the bench's rootfs corpus.)
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("lib")).unwrap();
    for (i, name) in ["a.jar", "b.zip"].iter().enumerate() {
        let jar = zip_archive(700 + 20 * i, i as u64);
        assert!(jar.len() > 1 << 20);
        std::fs::write(src.join("lib").join(name), jar).unwrap();
    }
    // Too small to split, and not an archive.
    std::fs::write(src.join("lib/small.jar"), zip_archive(3, 9)).unwrap();
    std::fs::write(src.join("notes.txt"), "zip headers\n".repeat(5_000)).unwrap();
    let manifest = manifest_of(&src);
    let build = |name: &str, extra: &[&str]| {
        let options = [&["--time-resolution=ns"], extra].concat();
        let image = create_image(&src, &dir.path().join(name), &options);
        assert_reads_back(&image, &manifest);
        image
    };
    let default = build("default.dwarfs", &[]);
    let none = build("none.dwarfs", &["--categorize=none"]);
    let level5 = build("l5.dwarfs", &["-l", "5"]);
    assert_eq!(
        categories(&info(&default)),
        ["<default>", "zip/headers"],
        "{}",
        info(&default)
    );
    assert!(categories(&info(&none)).is_empty());
    assert!(categories(&info(&level5)).is_empty());

    // Reads anywhere in a jar of many chunks return its bytes.
    let fs = hoard_reader::Filesystem::open(&default, &Default::default()).unwrap();
    let ino = fs.lookup_path("lib/a.jar").unwrap();
    assert!(fs.chunk_range(ino).unwrap().len() > 1000);
    let jar = std::fs::read(src.join("lib/a.jar")).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let offset = (x % jar.len() as u64) as usize;
        let mut buf = vec![0u8; 1 + (x >> 40) as usize % 9000];
        let n = fs.read(ino, offset as u64, &mut buf).unwrap();
        let want = &jar[offset..(offset + buf.len()).min(jar.len())];
        assert_eq!(&buf[..n], want, "at {offset}");
    }
}

#[test]
fn category_options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let src = tree_with(dir.path(), "src", &[]);
    let image = dir.path().join("x.dwarfs");
    let cases: &[&[&str]] = &[
        &["--categorize=nosuch"],
        &["--categorize", "-C", "nosuch/category::zstd"],
        &["--categorize", "-C", "pcmaudio/waveform::flac:level=42"],
        &["-W", "pcmaudio/waveform::99"],
        &["--order", "incompressible::sideways"],
    ];
    for extra in cases {
        one_line_error(&create_args(&src, &image, extra));
        assert!(!image.exists());
    }
}

/// The tree of DwarFS's own `--categorize` test image, packed again by us:
/// the same files go to FLAC and RICEPP blocks, the FLAC and RICEPP bytes
/// come out the same size as DwarFS's, and the tree reads back identical.
#[test]
fn dwarfs_categorized_tree_categorizes_alike() {
    if !is_root() {
        return; // the tree has devices
    }
    let Some(theirs) = image("upstream", "categorize.dwarfs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    extract_ok(&[s(&theirs)], &src);
    let manifest = manifest_of(&src);
    let ours = create_image(
        &src,
        &dir.path().join("ours.dwarfs"),
        &[
            "--categorize",
            "--with-devices",
            "--with-specials",
            "--time-resolution=ns",
        ],
    );
    assert_reads_back(&ours, &manifest);
    let (a, b) = (info(&theirs), info(&ours));
    for algo in ["flac", "ricepp"] {
        assert_eq!(count(&a, algo), count(&b, algo), "{algo}: {a} vs {b}");
        assert_eq!(
            a["blocks_by_compression"][algo]["compressed_bytes"],
            b["blocks_by_compression"][algo]["compressed_bytes"],
            "{algo}"
        );
    }
}
