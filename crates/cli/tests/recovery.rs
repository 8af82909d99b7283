//! Recovery data (`create --recovery`, `rewrite --recovery`, `check`,
//! `repair`, reads through it): an image of about 8 MB with 5% recovery
//! data survives 32 changed bytes, a 256 KiB zeroed run inside a block, a
//! damaged section header, section index and metadata section: `check`
//! reports it as repairable, `repair` restores the original bytes, and
//! `extract` and a mount read every file correctly meanwhile. Damage
//! beyond the budget is reported with the lost files, and `repair`
//! refuses it without touching the image. DwarFS 0.15.3 and the `dwarfs`
//! crate read images with recovery data. Without recovery data, `check
//! --full` names the files damage takes and `extract --continue-on-error`
//! saves the others.

mod common;

use common::*;
use hoard_reader::{Image, OpenOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILES: usize = 10;
const FILE_SIZE: usize = 800_000;

/// A tree of incompressible files (so the image is about 8 MB, 1 MiB
/// blocks) and its image with 5% recovery data.
struct Fixture {
    dir: tempfile::TempDir,
    tree: PathBuf,
    image: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("data")).unwrap();
    for i in 0..FILES {
        let path = tree.join(format!("data/f{i}.bin"));
        std::fs::write(
            path,
            noise(
                FILE_SIZE,
                (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
        )
        .unwrap();
    }
    std::fs::write(tree.join("notes.txt"), "recovery test\n".repeat(1000)).unwrap();
    let image = create_image(
        &tree,
        &dir.path().join("image.dwarfs"),
        &["-S", "20", "-l", "1", "--recovery", "5"],
    );
    Fixture { dir, tree, image }
}

/// `hoard check --json` of `image`: its exit code and report.
fn check(image: &Path) -> (i32, Value) {
    let out = run(&["check", "--json", image.to_str().unwrap()]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check --json: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), report)
}

/// Asserts that every file of `tree` has the same contents below `root`.
fn assert_same_files(tree: &Path, root: &Path, what: &str) {
    for i in 0..FILES {
        let rel = format!("data/f{i}.bin");
        let got = std::fs::read(root.join(&rel)).unwrap_or_else(|e| panic!("{what}: {rel}: {e}"));
        assert!(
            got == std::fs::read(tree.join(&rel)).unwrap(),
            "{what}: {rel} differs"
        );
    }
    let notes = std::fs::read(root.join("notes.txt")).unwrap();
    assert_eq!(
        notes,
        std::fs::read(tree.join("notes.txt")).unwrap(),
        "{what}: notes.txt"
    );
}

/// Offsets and ends of the image's sections, by type name.
fn sections(image: &Path) -> Vec<(String, u64, u64)> {
    let image = Image::open(image, &OpenOptions::default()).unwrap();
    image
        .sections()
        .iter()
        .map(|s| (s.header.kind.name(), s.offset, s.end()))
        .collect()
}

fn section(image: &Path, kind: &str, nth: usize) -> (u64, u64) {
    sections(image)
        .into_iter()
        .filter(|s| s.0 == kind)
        .map(|s| (s.1, s.2))
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind} section {nth}"))
}

/// A copy of `image` named `name` with `damage` applied to its bytes.
fn damaged(fx: &Fixture, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(&fx.image).unwrap();
    let before = bytes.clone();
    damage(&mut bytes);
    assert_ne!(bytes, before, "{name}: no damage done");
    let path = fx.dir.path().join(format!("{name}.dwarfs"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Flips every byte of `range` (so each one really changes).
fn flip(bytes: &mut [u8], range: std::ops::Range<u64>) {
    for b in &mut bytes[range.start as usize..range.end as usize] {
        *b ^= 0xA5;
    }
}

/// The damage cases within the 5% budget.
fn repairable_cases(fx: &Fixture) -> Vec<(&'static str, PathBuf)> {
    let img = &fx.image;
    let len = std::fs::metadata(img).unwrap().len();
    let block3 = section(img, "BLOCK", 3);
    let meta = section(img, "METADATA_V2", 0);
    let index = section(img, "SECTION_INDEX", 0);
    let block1 = section(img, "BLOCK", 1);
    vec![
        (
            "bytes",
            damaged(fx, "bytes", |b| {
                let positions = noise(32 * 8, 99);
                for p in positions.chunks(8) {
                    let at = u64::from_le_bytes(p.try_into().unwrap()) % len;
                    b[at as usize] ^= 0x40;
                }
            }),
        ),
        (
            "zeroed-run",
            damaged(fx, "zeroed-run", |b| {
                let mid = (block3.0 + block3.1) / 2 - 128 * 1024;
                b[mid as usize..mid as usize + 256 * 1024].fill(0);
            }),
        ),
        (
            "section-header",
            damaged(fx, "section-header", |b| flip(b, block1.0..block1.0 + 64)),
        ),
        (
            "section-index",
            damaged(fx, "section-index", |b| flip(b, index.0..index.1)),
        ),
        (
            "metadata",
            damaged(fx, "metadata", |b| flip(b, meta.0..meta.1)),
        ),
        (
            // The last descriptor too: the recovery data is then found
            // through its section.
            "metadata-and-end",
            damaged(fx, "metadata-and-end", |b| {
                flip(b, meta.0..meta.1);
                flip(b, len - 200..len);
            }),
        ),
    ]
}

#[test]
fn damage_within_the_budget_is_reported_read_through_and_repaired() {
    let fx = fixture();
    let original = std::fs::read(&fx.image).unwrap();
    let (code, report) = check(&fx.image);
    assert_eq!(code, 0, "clean image: {report}");
    assert_eq!(report["recovery"]["percent"], 5);
    for (name, image) in repairable_cases(&fx) {
        let (code, report) = check(&image);
        assert_eq!(code, 1, "{name}: check must report the damage: {report}");
        let rec = &report["recovery"];
        assert_eq!(rec["repairable"], true, "{name}: {report}");
        assert!(
            !rec["damaged"].as_array().unwrap().is_empty(),
            "{name}: no damaged ranges: {report}"
        );
        let out_dir = fx.dir.path().join(format!("{name}-x"));
        extract_ok(&[image.to_str().unwrap()], &out_dir);
        assert_same_files(&fx.tree, &out_dir, name);
        let repaired = fx.dir.path().join(format!("{name}-repaired.dwarfs"));
        hoard_ok(&[
            "repair",
            image.to_str().unwrap(),
            "-o",
            repaired.to_str().unwrap(),
        ]);
        assert!(
            std::fs::read(&repaired).unwrap() == original,
            "{name}: repair did not restore the original bytes"
        );
        let (code, report) = check(&repaired);
        assert_eq!(code, 0, "{name}: repaired image: {report}");
    }
}

#[test]
fn repair_in_place_replaces_the_image_only_when_it_verifies() {
    let fx = fixture();
    let original = std::fs::read(&fx.image).unwrap();
    let image = damaged(&fx, "in-place", |b| {
        let at = b.len() / 2;
        b[at..at + 100_000].fill(0xEE);
    });
    hoard_ok(&["repair", image.to_str().unwrap()]);
    assert!(std::fs::read(&image).unwrap() == original);
    let again = hoard_ok(&["repair", s(&image)]);
    assert!(again.contains("no damage found"), "{again}");
    let leftovers: Vec<_> = std::fs::read_dir(fx.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn damage_beyond_the_budget_is_reported_with_the_lost_files_and_refused() {
    let fx = fixture();
    let len = std::fs::metadata(&fx.image).unwrap().len();
    // 10% of the image, block headers included: the image still opens
    // (the section index gives the blocks' places) and the metadata is
    // intact, so the lost files can be named.
    let start = len * 3 / 10;
    let image = damaged(&fx, "beyond", |b| {
        b[start as usize..(start + len / 10) as usize].fill(0);
    });
    let before = std::fs::read(&image).unwrap();
    let (code, report) = check(&image);
    assert_eq!(code, 1);
    let rec = &report["recovery"];
    assert_eq!(rec["repairable"], false, "{report}");
    let lost = json_strings(&rec["lost_files"]);
    assert!(!lost.is_empty() && !lost.contains(&"*"), "{report}");
    assert!(lost.iter().all(|f| f.starts_with("data/f")), "{lost:?}");
    assert!(lost.len() < FILES, "not every file is lost: {lost:?}");
    // The files not listed as lost still read correctly.
    let fs = hoard_reader::Filesystem::open(&image, &Default::default()).unwrap();
    for i in 0..FILES {
        let rel = format!("data/f{i}.bin");
        if lost.contains(&rel.as_str()) {
            continue;
        }
        let ino = fs.lookup_path(&rel).unwrap();
        let mut buf = vec![0u8; FILE_SIZE];
        assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), FILE_SIZE);
        assert!(buf == std::fs::read(fx.tree.join(&rel)).unwrap(), "{rel}");
    }
    for target in [None, Some(fx.dir.path().join("out.dwarfs"))] {
        let mut args = vec!["repair", image.to_str().unwrap()];
        if let Some(t) = &target {
            args.extend(["-o", t.to_str().unwrap()]);
        }
        let r = run(&args);
        assert_eq!(r.status.code(), Some(1), "repair must refuse");
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains("exceeds the recovery data"), "{err}");
        assert!(std::fs::read(&image).unwrap() == before, "image changed");
        assert!(target.is_none_or(|t| !t.exists()), "output written");
    }
}

#[test]
fn rewrite_adds_and_drops_recovery_data() {
    let fx = fixture();
    let plain = fx.dir.path().join("plain.dwarfs");
    let with = fx.dir.path().join("with.dwarfs");
    rewrite_image(&[s(&fx.image)], &plain, &[]);
    assert_eq!(check(&plain).1.get("recovery"), None, "recovery dropped");
    let args = [
        "rewrite",
        plain.to_str().unwrap(),
        "-o",
        with.to_str().unwrap(),
    ];
    hoard_ok(&[&args[..], &["--recovery", "8", "--no-progress"]].concat());
    let (code, report) = check(&with);
    assert_eq!((code, &report["recovery"]["percent"]), (0, &Value::from(8)));
    for (image, percent) in [(&with, Value::from(8)), (&plain, Value::Null)] {
        let info = run(&["info", "--json", image.to_str().unwrap()]);
        let info: Value = serde_json::from_slice(&info.stdout).unwrap();
        assert_eq!(info["recovery_percent"], percent, "{}", image.display());
    }
    let plain_len = std::fs::metadata(&plain).unwrap().len() as f64;
    let with_len = std::fs::metadata(&with).unwrap().len() as f64;
    let overhead = with_len / plain_len - 1.0;
    assert!((0.08..0.10).contains(&overhead), "overhead {overhead}");
    let bad = run(&["create", "-i", "x", "-o", "y", "--recovery", "0"]);
    assert!(!bad.status.success());
}

#[test]
fn a_mount_of_a_damaged_image_reads_every_file() {
    if !fuse_available() {
        skipped("FUSE is not available");
        return;
    }
    let fx = fixture();
    for (name, image) in repairable_cases(&fx) {
        let mnt = fx.dir.path().join(format!("{name}-mnt"));
        let _mounted = mount_ok(&[s(&image)], &mnt, &[]);
        assert_same_files(&fx.tree, &mnt, &format!("{name} (mounted)"));
    }
}

#[test]
fn dwarfs_reads_images_with_recovery_data() {
    let fx = fixture();
    // The dwarfs crate, an independent reader, reads every file.
    let file = std::fs::File::open(&fx.image).unwrap();
    let (index, mut archive) = dwarfs::Archive::new(file).expect("the dwarfs crate opens it");
    for i in 0..FILES {
        let rel = format!("f{i}.bin");
        let inode = index.get_path(["data", rel.as_str()]).unwrap();
        let dwarfs::InodeKind::File(f) = inode.classify() else {
            panic!("{rel}: not a file");
        };
        let data = dwarfs::AsChunks::read_to_vec(&f, &mut archive).unwrap();
        assert!(
            data == std::fs::read(fx.tree.join("data").join(&rel)).unwrap(),
            "{rel}"
        );
    }
    let Some(bin) = dwarfs_bin() else {
        skipped("DwarFS 0.15.3 tools are not in ../shared");
        return;
    };
    let img = fx.image.to_str().unwrap();
    output_ok(Command::new(bin.join("dwarfsck")).args(["-i", img, "--check-integrity"]));
    let out = output_ok(Command::new(bin.join("dwarfsck")).args(["-i", img, "-d", "3"]));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("type=unknown (18514)"), "{listing}");
    // DwarFS finds no index at the end of the file, so it walks the
    // section headers and calls the index (no longer last) invalid.
    assert!(listing.contains("type=SECTION_INDEX"), "{listing}");
    let x = fx.dir.path().join("dwarfs-x");
    std::fs::create_dir(&x).unwrap();
    output_ok(Command::new(bin.join("dwarfsextract")).args(["-i", img, "-o", x.to_str().unwrap()]));
    assert_same_files(&fx.tree, &x, "dwarfsextract");
    if !fuse_available() {
        skipped("FUSE is not available for the dwarfs mount");
        return;
    }
    let mnt = fx.dir.path().join("dwarfs-mnt");
    std::fs::create_dir(&mnt).unwrap();
    output_ok(Command::new(bin.join("dwarfs")).args([img, mnt.to_str().unwrap()]));
    let _mounted = FuseMount(mnt.clone());
    assert_same_files(&fx.tree, &mnt, "dwarfs mount");
}

#[test]
fn without_recovery_data_a_full_check_names_the_lost_files_and_extract_saves_the_rest() {
    let fx = fixture();
    let plain = fx.dir.path().join("plain.dwarfs");
    rewrite_image(&[s(&fx.image)], &plain, &[]);
    // Block 3's payload and block 1's header: the section index still
    // places every block, so only these two are lost.
    let block = section(&plain, "BLOCK", 3);
    let header = section(&plain, "BLOCK", 1);
    let mut bytes = std::fs::read(&plain).unwrap();
    flip(&mut bytes, block.0 + 1000..block.0 + 2000);
    flip(&mut bytes, header.0..header.0 + 64);
    std::fs::write(&plain, bytes).unwrap();
    let fs = hoard_reader::Filesystem::open(&fx.image, &Default::default()).unwrap();
    let in_block: Vec<String> = (0..FILES)
        .map(|i| format!("data/f{i}.bin"))
        .filter(|rel| {
            let ino = fs.lookup_path(rel).unwrap();
            fs.extents(ino)
                .unwrap()
                .iter()
                .any(|e| matches!(e, hoard_reader::Extent::Data { block: 1 | 3, .. }))
        })
        .collect();
    assert!(!in_block.is_empty());
    let out = run(&["check", "--full", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for i in 0..FILES {
        let rel = format!("data/f{i}.bin");
        let named = err.contains(&format!("cannot read '{rel}'"));
        assert_eq!(named, in_block.contains(&rel), "{rel}: {err}");
    }
    let x = fx.dir.path().join("saved");
    let out = run(&[
        "extract",
        plain.to_str().unwrap(),
        "-o",
        x.to_str().unwrap(),
        "--continue-on-error",
    ]);
    assert_eq!(out.status.code(), Some(2));
    for i in 0..FILES {
        let rel = format!("data/f{i}.bin");
        if !in_block.contains(&rel) {
            let got = std::fs::read(x.join(&rel)).unwrap();
            assert!(got == std::fs::read(fx.tree.join(&rel)).unwrap(), "{rel}");
        }
    }
}
