//! `hoard extract --format`: an image written as tar (pax), GNU tar, cpio
//! and zip, to a file and to a pipe, unpacked by the usual tools (GNU tar,
//! GNU cpio, bsdtar, unzip) and compared with the image by `hoard diff`:
//! long names and link targets, hard links, a fifo, a device (as root),
//! modes, owners, times, nanosecond times (pax), extended attributes (pax),
//! sparse files (pax, GNU format 1.0), `--pattern`, and `dwarfsextract -f`.

mod common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Size of the sparse file: data in the middle, holes around it.
const SPARSE_SIZE: u64 = 8 << 20;

/// Asserts that `file` came out sparse (holes, not zeros).
fn assert_sparse(file: &Path, what: &str) {
    let m = std::fs::metadata(file).unwrap();
    assert_eq!(m.len(), SPARSE_SIZE, "{what}");
    let allocated = std::os::unix::fs::MetadataExt::blocks(&m) * 512;
    assert!(allocated < 1 << 20, "{what}: {allocated} bytes allocated");
}

/// Every stored time: whole seconds, so every format keeps them.
const TIME: &str = "@1699999200";

fn has_tool(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(dir: &Path, script: &str) {
    let o = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A tree with what archives find hard: names past 100 and 255 bytes, a
/// long symlink target, hard links, a fifo, a device (as root), a UTF-8
/// name, setuid and private modes, an empty file, a multi-block file.
fn tree(root: &Path) -> PathBuf {
    let long_dir = "d".repeat(120);
    let long_name = "n".repeat(200);
    std::fs::create_dir_all(root.join(&long_dir).join("sub")).unwrap();
    std::fs::create_dir_all(root.join("plain/empty-dir")).unwrap();
    std::fs::write(root.join(&long_dir).join("sub").join(&long_name), b"deep\n").unwrap();
    std::fs::write(root.join("plain/big.bin"), noise(3 << 20, 5)).unwrap();
    std::fs::write(root.join("plain/empty"), b"").unwrap();
    std::fs::write(root.join("plain/grüße.txt"), b"utf-8\n").unwrap();
    std::fs::write(root.join("plain/setuid"), b"#!/bin/sh\n").unwrap();
    std::fs::write(root.join("plain/private"), b"secret\n").unwrap();
    std::fs::write(root.join("linked"), b"two names\n").unwrap();
    let sparse = std::fs::File::create(root.join("plain/sparse")).unwrap();
    sparse.set_len(SPARSE_SIZE).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, b"in the middle", SPARSE_SIZE / 2).unwrap();
    std::fs::hard_link(root.join("linked"), root.join("plain/linked-too")).unwrap();
    std::os::unix::fs::symlink("t".repeat(150), root.join("long-link")).unwrap();
    std::os::unix::fs::symlink("plain/empty", root.join("short-link")).unwrap();
    let mut script = format!(
        "chmod 4755 plain/setuid; chmod 600 plain/private; mkfifo fifo; \
         find . -exec touch -h -d {TIME} {{}} +"
    );
    if is_root() {
        script = format!("mknod null-dev c 1 3; chown 1234:5678 plain/private; {script}");
    }
    sh(root, &script);
    root.to_path_buf()
}

/// `hoard diff IMAGE DIR [--ignore FIELDS]`: the differences, empty when
/// the same.
fn differences(image: &Path, dir: &Path, ignore: &str) -> String {
    let mut args = vec!["diff", image.to_str().unwrap(), dir.to_str().unwrap()];
    if !ignore.is_empty() {
        args.extend(["--ignore", ignore]);
    }
    let o = run(&args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "hoard diff: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The output directory's own time is the unpacker's business.
    out.lines()
        .filter(|l| !l.starts_with("differs: .: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Writes `image` as `format` to a file (or through a pipe when `file` is
/// `None`) and unpacks it into a new directory `to` with `unpack` (a shell
/// command reading the archive on standard input).
fn unpack(image: &Path, format: &str, file: Option<&Path>, unpack: &str, to: &Path) {
    std::fs::create_dir(to).unwrap();
    let img = image.to_str().unwrap();
    let archive = match file {
        Some(f) => {
            let o = run(&[
                "extract",
                img,
                "--format",
                format,
                "-o",
                f.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            std::fs::read(f).unwrap()
        }
        None => {
            let o = run(&["extract", img, "--format", format, "-o", "-"]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            o.stdout
        }
    };
    let mut child = Command::new("sh")
        .args(["-ec", unpack])
        .current_dir(to)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&archive).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{unpack}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = tree(&dir.path().join("src"));
    let image = create_image(
        &src,
        &dir.path().join("x.dwarfs"),
        &["--with-devices", "--with-specials"],
    );
    assert_eq!(differences(&image, &src, ""), "", "the image itself");
    (dir, image)
}

#[test]
fn tar_archives_unpack_to_the_image_tree() {
    let (dir, image) = setup();
    let d = dir.path();
    unpack(&image, "tar", None, "tar -xpf -", &d.join("pax"));
    assert_eq!(
        differences(&image, &d.join("pax"), ""),
        "",
        "pax via GNU tar"
    );
    assert_sparse(&d.join("pax/plain/sparse"), "pax via GNU tar");
    let gnu = d.join("x.gnutar");
    unpack(&image, "gnutar", Some(&gnu), "tar -xpf -", &d.join("gnu"));
    assert_eq!(
        differences(&image, &d.join("gnu"), ""),
        "",
        "gnutar via GNU tar"
    );
    let listing = Command::new("tar").arg("-tvf").arg(&gnu).output().unwrap();
    assert!(String::from_utf8_lossy(&listing.stdout).contains(&"n".repeat(200)));
    if has_tool("bsdtar") {
        unpack(&image, "tar", None, "bsdtar -xpf -", &d.join("pax-bsd"));
        assert_eq!(
            differences(&image, &d.join("pax-bsd"), ""),
            "",
            "pax via bsdtar"
        );
        assert_sparse(&d.join("pax-bsd/plain/sparse"), "pax via bsdtar");
    } else {
        skipped("bsdtar missing (libarchive-tools)");
    }
}

#[test]
fn cpio_and_zip_archives_unpack_to_the_image_tree() {
    let (dir, image) = setup();
    let d = dir.path();
    if has_tool("cpio") {
        unpack(&image, "cpio", None, "cpio -idm --quiet", &d.join("cpio"));
        // GNU cpio sets no symlink times, and directory times before it
        // fills the directories.
        assert_eq!(
            differences(&image, &d.join("cpio"), "mtime,mtime_ns"),
            "",
            "cpio via GNU cpio"
        );
    } else {
        skipped("GNU cpio missing");
    }
    if has_tool("bsdtar") {
        let f = d.join("x.cpio");
        unpack(
            &image,
            "cpio",
            Some(&f),
            "bsdtar -xpf -",
            &d.join("cpio-bsd"),
        );
        assert_eq!(
            differences(&image, &d.join("cpio-bsd"), ""),
            "",
            "cpio via bsdtar"
        );
    }
    if has_tool("unzip") {
        let f = d.join("x.zip");
        unpack(&image, "zip", Some(&f), "unzip -q ../x.zip", &d.join("zip"));
        let o = run(&[
            "extract",
            image.to_str().unwrap(),
            "--format",
            "zip",
            "-o",
            "-",
        ]);
        let notes = String::from_utf8_lossy(&o.stderr);
        assert!(notes.contains("fifo: zip holds only"), "{notes}");
        // zip has no owners, fifos, devices or hard links, and unzip sets
        // no symlink times.
        let diff = differences(&image, &d.join("zip"), "uid,gid,nlink,link");
        let allowed = [
            "only in first: fifo",
            "only in first: null-dev",
            "differs: long-link: mtime ",
            "differs: short-link: mtime ",
        ];
        for line in diff.lines() {
            assert!(
                allowed.iter().any(|a| line.starts_with(a)),
                "zip via unzip: {line}\n{diff}"
            );
        }
        let m = std::fs::metadata(d.join("zip/plain/big.bin")).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::mtime(&m),
            1_699_999_200,
            "zip: file time"
        );
    } else {
        skipped("unzip missing");
    }
}

#[test]
fn patterns_and_dwarfsextract_select_what_is_archived() {
    let (dir, image) = setup();
    let o = run(&[
        "extract",
        image.to_str().unwrap(),
        "--format=gnutar",
        "-o",
        "-",
        "--pattern",
        "plain/*.txt",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("listed.tar");
    std::fs::write(&out, &o.stdout).unwrap();
    let list = Command::new("tar").arg("-tf").arg(&out).output().unwrap();
    let names = String::from_utf8(list.stdout).unwrap();
    assert_eq!(names, "./\nplain\nplain/grüße.txt\n");

    let bin = dir.path().join("dwarfsextract");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hoard"), &bin).unwrap();
    let o = Command::new(&bin)
        .args(["-i", image.to_str().unwrap(), "-f", "newc"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.starts_with(b"070701"), "a newc archive on stdout");
    assert!(o.stdout.windows(10).any(|w| w == b"TRAILER!!!"));

    // A failed write leaves nothing behind and says so in one line.
    let missing = dir.path().join("no/such/dir/x.tar");
    let o = run(&[
        "extract",
        image.to_str().unwrap(),
        "--format=tar",
        "-o",
        missing.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!missing.exists());
}

#[test]
fn pax_archives_carry_nanoseconds_and_extended_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"attributes\n").unwrap();
    let xattrs = xattr::set(src.join("f"), "user.archive", b"kept\0binary").is_ok();
    if !xattrs {
        skipped("the temporary directory stores no user.* attributes");
    }
    sh(&src, "touch -d '2023-11-14 22:00:00.123456789' f");
    let image = create_image(
        &src,
        &dir.path().join("x.dwarfs"),
        &["--time-resolution=ns"],
    );
    let out = dir.path().join("out");
    unpack(
        &image,
        "tar",
        None,
        "tar --xattrs --xattrs-include='*' -xpf -",
        &out,
    );
    assert_eq!(differences(&image, &out, ""), "");
    let m = std::fs::metadata(out.join("f")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::mtime_nsec(&m), 123_456_789);
    if xattrs {
        assert_eq!(
            xattr::get(out.join("f"), "user.archive")
                .unwrap()
                .as_deref(),
            Some(&b"kept\0binary"[..])
        );
    }
}
