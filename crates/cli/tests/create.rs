//! `hoard create`: trees with every kind of entry and edge case pack and
//! read back identical, through `hoard extract` and a FUSE mount, compared
//! with `hoard manifest`; builds are reproducible; failures and
//! interruptions leave no image behind.

mod common;

use common::*;
use hoard_format::frozen::Schema;
use hoard_format::section::{Compression, SectionType};
use hoard_reader::{Image, OpenOptions};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn write(root: &Path, rel: &str, data: &[u8]) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, data).unwrap();
    p
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Sets the mtime (and atime) of `p`, not following symlinks.
fn set_mtime(p: &Path, sec: i64, nsec: i64) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    let times = [t, t];
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(r, 0, "utimensat {}", p.display());
}

fn mknod(p: &Path, mode: u32, dev: libc::dev_t) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), mode, dev) },
        0,
        "{}",
        p.display()
    );
}

/// A tree with every entry kind and the edge cases of the writer issue.
fn edge_tree(root: &Path) {
    edge_tree_with(root, true);
}

/// The edge-case tree; `all` adds the 1 GiB sparse file and a non-UTF-8
/// name (which the `dwarfs` crate cannot represent).
fn edge_tree_with(root: &Path, all: bool) {
    std::fs::create_dir_all(root).unwrap();
    write(root, "empty", b"");
    std::fs::create_dir(root.join("emptydir")).unwrap();
    write(root, "hello.txt", b"hello, world\n");
    // Duplicates, and files sharing long ranges (for the segmenter).
    let big = noise(300_000, 1);
    write(root, "dup/a.bin", &big);
    write(root, "dup/b.bin", &big);
    write(root, "dup/deeper/c.bin", &big);
    let mut partial = noise(10_000, 2);
    partial.extend_from_slice(&big[5_000..250_000]);
    write(root, "dup/partial.bin", &partial);
    let text: Vec<u8> = (0..5000)
        .flat_map(|i| format!("line {i}: the quick brown fox\n").into_bytes())
        .collect();
    write(root, "text/a.txt", &text);
    // Hard links across directories.
    let target = write(root, "hard/one", b"linked content\n");
    std::fs::create_dir_all(root.join("other/place")).unwrap();
    std::fs::hard_link(&target, root.join("other/place/two")).unwrap();
    std::fs::hard_link(&target, root.join("hard/three")).unwrap();
    // Symlinks: relative, dangling, absolute, to a directory.
    std::fs::create_dir(root.join("links")).unwrap();
    symlink("../hello.txt", root.join("links/relative")).unwrap();
    symlink("does/not/exist", root.join("links/dangling")).unwrap();
    symlink("/etc/passwd", root.join("links/absolute")).unwrap();
    symlink("../dup", root.join("links/dir")).unwrap();
    // Names: unicode, spaces, newline, non-UTF-8.
    write(root, "names/ünïcødé ☃.txt", b"snow\n");
    write(root, "names/with space", b"space\n");
    write(root, "names/new\nline", b"newline\n");
    if all {
        let raw = root
            .join("names")
            .join(OsStr::from_bytes(b"latin1-\xe9t\xe9"));
        std::fs::write(raw, b"bytes\n").unwrap();
    }
    // A 30-deep path.
    let deep: String = (0..30).map(|i| format!("d{i}/")).collect();
    write(root, &format!("{deep}leaf"), b"deep\n");
    // 20,000 files in one directory.
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..20_000 {
        std::fs::write(many.join(format!("f{i:05}")), format!("{}\n", i % 1000)).unwrap();
    }
    // A 1 GiB sparse file with data in the middle and at the end.
    if all {
        let sparse = std::fs::File::create(root.join("sparse.img")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        use std::os::unix::fs::FileExt;
        sparse.write_all_at(&noise(70_000, 3), 512 << 20).unwrap();
        sparse.write_all_at(b"tail", (1 << 30) - 4).unwrap();
        // And one that ends in a hole.
        let holey = std::fs::File::create(root.join("ends-in-a-hole.img")).unwrap();
        holey.write_all_at(&noise(65_536, 4), 0).unwrap();
        holey.set_len(4 << 20).unwrap();
    }
    // Permission bits.
    let suid = write(root, "modes/setuid", b"#!/bin/sh\n");
    chmod(&suid, 0o4755);
    let sgid = root.join("modes/setgid-dir");
    std::fs::create_dir(&sgid).unwrap();
    chmod(&sgid, 0o2775);
    let sticky = root.join("modes/sticky");
    std::fs::create_dir(&sticky).unwrap();
    chmod(&sticky, 0o1777);
    let private = write(root, "modes/private", b"secret\n");
    chmod(&private, 0o600);
    // Devices, fifo and socket (devices only as root).
    std::fs::create_dir(root.join("special")).unwrap();
    if is_root() {
        mknod(
            &root.join("special/null"),
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 3),
        );
        mknod(
            &root.join("special/loop"),
            libc::S_IFBLK | 0o660,
            libc::makedev(7, 0),
        );
    }
    mknod(&root.join("special/fifo"), libc::S_IFIFO | 0o644, 0);
    let sock = std::os::unix::net::UnixListener::bind(root.join("special/sock")).unwrap();
    drop(sock);
    // Owners (as root).
    if is_root() {
        std::os::unix::fs::lchown(root.join("hello.txt"), Some(1000), Some(1000)).unwrap();
        std::os::unix::fs::lchown(root.join("links/relative"), Some(65534), Some(100)).unwrap();
    }
    // Times, with nanoseconds; one before 1970 is not representable, one
    // far in the future is.
    set_mtime(&root.join("hello.txt"), 1_600_000_000, 123_456_789);
    set_mtime(&root.join("links/absolute"), 1_000_000_000, 5);
    set_mtime(&root.join("text/a.txt"), 4_102_444_800, 999_999_999);
    // Directory times last, once their contents are complete.
    let mut dirs: Vec<PathBuf> = Vec::new();
    collect_dirs(root, &mut dirs);
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for (i, d) in dirs.iter().enumerate() {
        set_mtime(d, 1_500_000_000 + i as i64, 0);
    }
}

fn collect_dirs(p: &Path, out: &mut Vec<PathBuf>) {
    out.push(p.to_path_buf());
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            collect_dirs(&e.path(), out);
        }
    }
}

/// The edge-case tree and its manifest, made once per test run.
fn edge() -> Option<&'static (tempfile::TempDir, String)> {
    static TREE: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    Some(TREE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        edge_tree(&dir.path().join("tree"));
        let manifest = manifest_of(&dir.path().join("tree"));
        (dir, manifest)
    }))
}

/// `hoard create` with devices and specials and `extra` options.
fn create(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    run(&create_args(input, output, &[WITH_ALL, extra].concat()))
}

/// [`create`], asserting that it succeeds; returns its standard output.
fn create_ok(input: &Path, output: &Path, extra: &[&str]) -> String {
    hoard_ok(&create_args(input, output, &[WITH_ALL, extra].concat()))
}

/// The options that keep every kind of entry.
const WITH_ALL: &[&str] = &["--with-devices", "--with-specials"];

/// Extracts `image` and compares the tree with `manifest`.
fn assert_extracts_to(image: &Path, manifest: &str) {
    let dir = tempfile::tempdir().unwrap();
    assert_extracts_as(&[s(image)], &dir.path().join("x"), manifest);
}

#[test]
fn every_entry_kind_round_trips_through_extract_and_check() {
    let Some((dir, manifest)) = edge() else {
        return;
    };
    let image = dir.path().join("exact.dwarfs");
    create_ok(
        &dir.path().join("tree"),
        &image,
        &["--time-resolution=ns", "-l", "3", "--keep-all-times"],
    );
    hoard_ok(&["check", "--full", image.to_str().unwrap()]);
    assert_extracts_to(&image, manifest);
    // The sparse file stays sparse in the image: far less than 1 GiB.
    let m = std::fs::metadata(&image).unwrap();
    assert!(m.len() < 8 << 20);
    // The image has the mode a new file gets, not the temporary file's.
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    assert_eq!(m.permissions().mode() & 0o777, 0o666 & !mask);
}

#[test]
fn every_entry_kind_round_trips_through_a_mount() {
    let Some((dir, manifest)) = edge() else {
        return;
    };
    if !Path::new("/dev/fuse").exists() {
        skipped("/dev/fuse missing");
        return;
    }
    let image = dir.path().join("mount.dwarfs");
    create_ok(
        &dir.path().join("tree"),
        &image,
        &["--time-resolution=ns", "-l", "1"],
    );
    let mnt = tempfile::tempdir().unwrap();
    hoard_ok(&[
        "mount",
        image.to_str().unwrap(),
        mnt.path().to_str().unwrap(),
    ]);
    let seen = manifest_of(mnt.path());
    hoard_ok(&["umount", mnt.path().to_str().unwrap()]);
    let diff = manifest_diff(manifest, &seen, Compare::Mounted);
    assert!(diff.is_empty(), "mounted tree differs:\n{diff}");
}

#[test]
fn default_level_keeps_second_resolution() {
    let Some((dir, manifest)) = edge() else {
        return;
    };
    let image = dir.path().join("default.dwarfs");
    create_ok(&dir.path().join("tree"), &image, &[]);
    let truncated: String = manifest
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["mtime_ns"] = 0.into();
            format!("{v}\n")
        })
        .collect();
    assert_extracts_to(&image, &truncated);
}

/// A small tree with some redundancy, quick to pack at any level.
fn small_tree(root: &Path) {
    let base = noise(200_000, 7);
    for v in 0..4 {
        let mut f = base.clone();
        f[v * 1000] ^= 0xff;
        write(root, &format!("v{v}/lib.bin"), &f);
        write(
            root,
            &format!("v{v}/README"),
            format!("version {v}\n").as_bytes(),
        );
    }
    symlink("v3", root.join("latest")).unwrap();
}

/// A temporary directory with [`small_tree`] in it as `tree`.
fn small_tree_in_tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    small_tree(&tree);
    (dir, tree)
}

#[test]
fn every_level_and_codec_round_trips() {
    let (dir, tree) = small_tree_in_tempdir();
    let manifest = manifest_of(&tree);
    let variants: &[&[&str]] = &[
        &["-l", "0"],
        &["-l", "1"],
        &["-l", "2"],
        &["-l", "4", "--fsync"],
        &["-l", "6"],
        &["-l", "8"],
        &["-l", "9"],
        &["-C", "brotli:quality=5", "-S", "16", "--order=nilsimsa"],
        &["-C", "zstd:level=1", "-S", "16", "--order=name-nilsimsa"],
        &[
            "-l",
            "3",
            "--order=nilsimsa:max-children=2:max-cluster-size=3",
        ],
        &["-C", "lzma:level=1", "--order=revpath", "-P", "all"],
        &[
            "-C",
            "null",
            "--order=path",
            "-P",
            "none",
            "--no-section-index",
        ],
        &[
            "-C",
            "zstd:level=3",
            "-W",
            "10",
            "-w",
            "1",
            "-B",
            "4",
            "-S",
            "14",
        ],
    ];
    for (i, extra) in variants.iter().enumerate() {
        let image = dir.path().join(format!("v{i}.dwarfs"));
        let mut args = extra.to_vec();
        args.push("--time-resolution=ns");
        create_ok(&tree, &image, &args);
        hoard_ok(&["check", "--full", image.to_str().unwrap()]);
        assert_extracts_to(&image, &manifest);
    }
}

/// The compression of `image`'s metadata section and its `info --json`.
fn metadata_of(image: &Path) -> (Compression, serde_json::Value) {
    let opened = Image::open(image, &OpenOptions::default()).unwrap();
    let section = opened
        .sections()
        .iter()
        .find(|s| s.header.kind == SectionType::METADATA_V2)
        .expect("a metadata section");
    let info = hoard_ok(&["info", "--json", s(image)]);
    (
        section.header.compression,
        serde_json::from_str(&info).unwrap(),
    )
}

#[test]
fn default_level_packs_tables_and_compresses_small_metadata_with_lzma() {
    let (dir, tree) = small_tree_in_tempdir();
    // Enough entries for metadata that compresses.
    for i in 0..2000u32 {
        write(
            &tree,
            &format!("many/d{}/file{i}.txt", i % 20),
            &i.to_le_bytes(),
        );
    }
    let image = dir.path().join("default.dwarfs");
    create_ok(&tree, &image, &[]);
    let (codec, info) = metadata_of(&image);
    assert_eq!(codec, Compression::LZMA);
    let packed = &info["packed"];
    assert_eq!(packed["chunk_table"], true, "{info}");
    assert_eq!(packed["directories"], true, "{info}");
    // The `dwarfs` crate misreads a packed shared files table.
    assert_eq!(packed["shared_files_table"], false, "{info}");
    assert!(
        packed["names"]
            .as_str()
            .unwrap()
            .contains("packed_index: true"),
        "{info}"
    );

    // An explicit codec applies whatever the size; DwarFS's `auto`-like
    // packing is `-P names,symlinks`.
    let zstd = dir.path().join("zstd.dwarfs");
    create_ok(
        &tree,
        &zstd,
        &[
            "--metadata-compression",
            "zstd:level=22",
            "-P",
            "names,symlinks",
        ],
    );
    let (codec, info) = metadata_of(&zstd);
    assert_eq!(codec, Compression::ZSTD);
    assert_eq!(info["packed"]["chunk_table"], false, "{info}");
    assert_eq!(info["packed"]["directories"], false, "{info}");

    // Levels 8 and 9 use lzma and levels up to 6 store the metadata as it
    // is, whatever its size.
    let l6 = dir.path().join("l6.dwarfs");
    create_ok(&tree, &l6, &["-l", "6"]);
    let (codec, _) = metadata_of(&l6);
    assert_eq!(codec, Compression::NONE);

    // Compressed metadata has fields of whole bytes (it compresses
    // smaller so); metadata stored as it is, the fewest bits.
    let widths = |image: &Path| -> Vec<u32> {
        let opened = Image::open(image, &OpenOptions::default()).unwrap();
        let section = opened.find(SectionType::METADATA_V2_SCHEMA).unwrap();
        let schema = Schema::decode(&opened.load(section, 1 << 20).unwrap()).unwrap();
        schema
            .layouts()
            .filter(|l| l.fields.is_empty())
            .map(|l| l.bits)
            .collect()
    };
    for compressed in [&image, &zstd] {
        let bits = widths(compressed);
        assert!(bits.iter().all(|b| b % 8 == 0), "{bits:?}");
    }
    assert!(widths(&l6).iter().any(|b| b % 8 != 0));
}

#[test]
fn segmenting_stores_repeated_data_once() {
    let (dir, tree) = small_tree_in_tempdir();
    let image = dir.path().join("seg.dwarfs");
    let r = create_ok(&tree, &image, &["-C", "null", "-W", "10", "--json"]);
    let summary: serde_json::Value = serde_json::from_str(&r).unwrap();
    // Four near-identical 200 kB files: about one is stored.
    assert!(
        summary["stored_bytes"].as_u64().unwrap() < 300_000,
        "{summary}"
    );
    assert!(std::fs::metadata(&image).unwrap().len() < 320_000);
}

#[test]
fn builds_are_reproducible_whatever_the_thread_count() {
    let Some((dir, _)) = edge() else { return };
    let tree = dir.path().join("tree");
    let a = dir.path().join("n1.dwarfs");
    let b = dir.path().join("n2.dwarfs");
    for (image, n) in [(&a, "1"), (&b, "2")] {
        create_ok(
            &tree,
            image,
            &["-N", n, "-l", "4", "--no-history", "--no-create-timestamp"],
        );
    }
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "-N 1 and -N 2 differ"
    );
}

#[test]
fn source_date_epoch_clamps_every_time() {
    let (dir, tree) = small_tree_in_tempdir();
    set_mtime(&tree.join("v1/README"), 2_000_000_000, 0);
    let image = dir.path().join("sde.dwarfs");
    output_ok(
        hoard()
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .args(create_args(&tree, &image, &[])),
    );
    let text = hoard_ok(&["info", "--json", s(&image)]);
    assert!(text.contains("1700000000"), "{text}");
    let out = dir.path().join("x");
    extract_ok(&[image.to_str().unwrap()], &out);
    for e in walk(&out) {
        let m = std::fs::symlink_metadata(&e).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(m.mtime() <= 1_700_000_000, "{}: {}", e.display(), m.mtime());
    }
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if std::fs::symlink_metadata(p).unwrap().is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".hoard-") || n.ends_with(".dwarfs"))
        .collect()
}

/// What the process `pid` holds open in `dir`: names relative to `dir`,
/// and `#… (deleted)` for a file made without one (`O_TMPFILE`).
fn open_in(pid: u32, dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let name = target.strip_prefix(&dir).ok()?;
            Some(name.to_string_lossy().into_owned())
        })
        .collect()
}

#[test]
fn failures_and_interruptions_leave_no_image() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // A bad option: nothing written.
    let r = create(&dir.path().join("missing"), &out.join("a.dwarfs"), &[]);
    assert_eq!(r.status.code(), Some(1));
    let r = create(dir.path(), &out.join("a.dwarfs"), &["-C", "zstd:level=99"]);
    assert_eq!(
        r.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(leftovers(&out).is_empty(), "{:?}", leftovers(&out));
    // A build under way, waiting for the rest of its archive on standard
    // input, which never comes (a build busy compressing a large block
    // stops as promptly), with its image open but still without a name
    // and, when the archive is cut inside the file's data, that file
    // being spooled beside the output.
    write(&dir.path().join("small"), "f", &noise(64 << 10, 1));
    sh(dir.path(), "tar -cf small.tar small");
    let archive = std::fs::read(dir.path().join("small.tar")).unwrap();
    let start = |cut: usize| {
        let mut child = hoard()
            .args(["create", "-i", "-", "-o"])
            .arg(out.join("b.dwarfs"))
            .arg("--no-progress")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, &archive[..cut]).unwrap();
        let started = std::time::Instant::now();
        loop {
            let open = open_in(child.id(), &out);
            let unnamed = open.iter().any(|f| f.ends_with(" (deleted)"));
            let spooled = open.iter().any(|f| f.starts_with(".hoard-spool-"));
            if unnamed && (spooled || cut < 512) {
                break;
            }
            assert!(started.elapsed().as_secs() < 120, "not started: {open:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (child, stdin)
    };
    let stop = |child: &mut std::process::Child, signal: i32| {
        unsafe { libc::kill(child.id() as i32, signal) };
        let stopped = std::time::Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if stopped.elapsed().as_secs() >= 120 {
                child.kill().unwrap();
                panic!("hoard create still running 120 s after signal {signal}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let half = archive.len() / 2;
    // Ctrl-C or SIGTERM: exit 128 + the signal, the spool removed.
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let (mut child, _stdin) = start(half);
        assert_eq!(stop(&mut child, signal).code(), Some(128 + signal));
        assert!(leftovers(&out).is_empty(), "{:?}", leftovers(&out));
    }
    // SIGKILL, which no process can handle: the image, never named, is
    // gone with the process.
    let (mut child, _stdin) = start(100);
    assert_eq!(
        stop(&mut child, libc::SIGKILL).signal(),
        Some(libc::SIGKILL)
    );
    assert!(leftovers(&out).is_empty(), "{:?}", leftovers(&out));
    // Killed while spooling, the build leaves its spool directory (named,
    // as its files are read by name), and the next build beside it
    // removes it.
    let (mut child, _stdin) = start(half);
    stop(&mut child, libc::SIGKILL);
    let left = leftovers(&out);
    assert!(
        left.len() == 1 && left[0].starts_with(".hoard-spool-"),
        "{left:?}"
    );
    create_ok(
        dir.path().join("small").as_path(),
        &out.join("d.dwarfs"),
        &[],
    );
    assert_eq!(leftovers(&out), ["d.dwarfs"]);
    std::fs::remove_file(out.join("d.dwarfs")).unwrap();
    let tree = dir.path().join("tree");
    for i in 0..8 {
        write(&tree, &format!("f{i}"), &noise(3 << 20, i + 10));
    }
    // An existing image is kept unless -f.
    write(&out, "c.dwarfs", b"precious");
    let r = create(&tree, &out.join("c.dwarfs"), &["-l", "1"]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(std::fs::read(out.join("c.dwarfs")).unwrap(), b"precious");
    create_ok(&tree, &out.join("c.dwarfs"), &["-l", "1", "-f"]);
}

#[test]
fn the_image_inside_its_input_is_left_out() {
    let (dir, tree) = small_tree_in_tempdir();
    let image = tree.join("self.dwarfs");
    create_ok(&tree, &image, &["-l", "1", "--time-resolution=ns"]);
    // The image (and its temporary file) changed the root's mtime.
    let manifest: String = manifest_of(&tree)
        .lines()
        .filter(|l| !l.contains("\"path\": \".\"") && !l.contains("self.dwarfs"))
        .map(|l| format!("{l}\n"))
        .collect();
    let text = hoard_ok(&["ls", "-R", s(&image)]);
    assert!(!text.contains("self.dwarfs"), "{text}");
    // And no temporary file of ours either.
    assert!(!text.contains(".hoard-"), "{text}");
    let out = dir.path().join("x");
    extract_ok(&[image.to_str().unwrap()], &out);
    let got: String = manifest_of(&out)
        .lines()
        .filter(|l| !l.contains("\"path\": \".\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let diff = manifest_diff(&manifest, &got, Compare::Extracted);
    assert!(diff.is_empty(), "{diff}");
}

#[test]
fn unreadable_files_are_skipped_with_exit_code_2() {
    if !is_root() {
        skipped("running hoard as another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o777);
    let tree = dir.path().join("tree");
    write(&tree, "ok.txt", b"fine\n");
    let secret = write(&tree, "secret.txt", b"no\n");
    chmod(&secret, 0o000);
    // A directory that cannot be listed is kept, empty.
    write(&tree, "locked/inner.txt", b"hidden\n");
    chmod(&tree.join("locked"), 0o000);
    chmod(&tree, 0o755);
    let image = dir.path().join("u.dwarfs");
    hoard_copy_in(dir.path());
    // The image's temporary file is made through the output directory's
    // full path (`tempfile` completes a relative one with the current
    // directory's), which user 65534 may not walk; /proc/self/cwd reaches
    // the same directory without walking its ancestors.
    let r = as_user_in(65534, dir.path(), "./hoard")
        .args(["create", "-i", "tree", "-o", "/proc/self/cwd/u.dwarfs"])
        .arg("--no-progress")
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("secret.txt") && stderr.contains("locked"),
        "{stderr}"
    );
    hoard_ok(&["check", "--full", image.to_str().unwrap()]);
    let listing = hoard_ok(&["ls", s(&image)]);
    assert!(
        listing.contains("ok.txt") && !listing.contains("secret.txt"),
        "{listing}"
    );
    assert!(
        listing.contains("locked") && !listing.contains("inner.txt"),
        "{listing}"
    );
}

#[test]
fn filters_select_entries() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    write(&tree, "src/main.c", b"int main;\n");
    write(&tree, "src/main.o", b"obj");
    write(&tree, "src/keep.o", b"obj2");
    write(&tree, "build/out", b"x");
    let image = dir.path().join("f.dwarfs");
    let rules = ["-F", "+ keep.o", "-F", "- *.o", "-F", "- /build/"];
    let mut args = rules.to_vec();
    args.push("--remove-empty-dirs");
    create_ok(&tree, &image, &args);
    let listing = hoard_ok(&["ls", "-R", s(&image)]);
    assert!(
        listing.contains("main.c") && listing.contains("keep.o"),
        "{listing}"
    );
    assert!(
        !listing.contains("main.o") && !listing.contains("build"),
        "{listing}"
    );
    let mut debug = rules.to_vec();
    debug.push("--debug-filter");
    let text = create_ok(&tree, &dir.path().join("none.dwarfs"), &debug);
    assert!(
        text.contains("- /src/main.o") && text.contains("+ /src/keep.o"),
        "{text}"
    );
    assert!(!dir.path().join("none.dwarfs").exists());
}

#[test]
fn an_input_list_selects_paths() {
    let (dir, tree) = small_tree_in_tempdir();
    let list = dir.path().join("list");
    std::fs::write(&list, "./v1/lib.bin\nv2/README\n\n").unwrap();
    let image = dir.path().join("l.dwarfs");
    create_ok(&tree, &image, &["--input-list", list.to_str().unwrap()]);
    let listing = hoard_ok(&["ls", "-R", s(&image)]);
    let mut names: Vec<&str> = listing.lines().collect();
    names.sort();
    assert_eq!(names, ["v1", "v1/lib.bin", "v2", "v2/README"], "{listing}");
}

#[test]
fn rewrite_recompresses_and_rebuilds_metadata() {
    let (dir, tree) = small_tree_in_tempdir();
    let manifest = manifest_of(&tree);
    let image = dir.path().join("orig.dwarfs");
    create_ok(&tree, &image, &["-l", "1", "--time-resolution=ns"]);
    // Recompress everything with other codecs.
    let lzma = dir.path().join("lzma.dwarfs");
    hoard_ok(&[
        "rewrite",
        image.to_str().unwrap(),
        "-o",
        lzma.to_str().unwrap(),
        "-C",
        "lzma:level=6",
        "--metadata-compression",
        "zstd:level=19",
        "--fsync",
        "--no-progress",
    ]);
    hoard_ok(&["check", "--full", lzma.to_str().unwrap()]);
    assert_extracts_to(&lzma, &manifest);
    let info = hoard_ok(&["info", s(&lzma)]);
    assert!(info.contains("lzma"), "{info}");
    // As mkdwarfs: rebuild the metadata with new owners and permissions.
    let bin = dir.path().join("mkdwarfs");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hoard"), &bin).unwrap();
    let rebuilt = dir.path().join("rebuilt.dwarfs");
    output_ok(
        Command::new(&bin)
            .args(["-i", s(&image), "-o", s(&rebuilt)])
            .args(["--recompress=none", "--rebuild-metadata"])
            .args(["--set-owner", "4321", "--chmod", "F0600", "--no-progress"]),
    );
    let ls = hoard_ok(&["ls", "-l", s(&rebuilt), "v1"]);
    assert!(ls.contains("-rw-------") && ls.contains("4321"), "{ls}");
}

#[test]
fn the_dwarfs_crate_reads_our_images() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    edge_tree_with(&tree, false);
    small_tree(&tree.join("small"));
    for (codec, extra) in [
        ("lz4", &["-l", "1"][..]),
        ("zstd", &["-l", "4", "-S", "16"][..]),
        // Blocks and metadata from 7-Zip's lzma encoder.
        ("lzma-9", &["-l", "9", "-S", "16"][..]),
        // Every packing but `shared_files`: dwarfs 0.2.1 unpacks packed
        // shared files tables differently from the format spec (it
        // repeats each count instead of each index), so it cannot be the
        // oracle for that one; our reader's tests cover it with DwarFS's
        // own `-P all` image.
        (
            "lzma",
            &[
                "-C",
                "lzma:level=3",
                "-P",
                "chunk_table,directories,names,names_index,symlinks,symlinks_index,force",
            ][..],
        ),
        (
            "zstd-plain",
            &[
                "-l",
                "2",
                "-C",
                "zstd:level=5",
                "-P",
                "plain",
                "--keep-all-times",
            ][..],
        ),
    ] {
        let image = dir.path().join(format!("{codec}.dwarfs"));
        let mut args = extra.to_vec();
        args.push("--no-sparse-files");
        create_ok(&tree, &image, &args);
        let file = std::fs::File::open(&image).unwrap();
        let (index, mut archive) = dwarfs::Archive::new(file)
            .unwrap_or_else(|e| panic!("{codec}: the dwarfs crate refuses the image: {e}"));
        oracle_compare(&tree, &[], &index, &mut archive);
    }
}

/// A tree whose data fits in one block is cut into one block per worker
/// (so that they compress it side by side): hoard and DwarFS's tools
/// read it back exactly.
#[test]
fn a_lone_block_is_cut_for_the_workers_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let a = noise(3 << 20, 21);
    write(&tree, "a", &a);
    // Data on both sides of the cut, found again by the segmenter.
    let mut b = noise(1 << 20, 22);
    b.extend_from_slice(&a[1 << 20..5 << 19]);
    write(&tree, "b", &b);
    write(&tree, "c", &noise(2 << 20, 23));
    let image = dir.path().join("i.dwarfs");
    create_ok(
        &tree,
        &image,
        &[
            "-C",
            "zstd:level=1",
            "-S",
            "24",
            "-N",
            "2",
            "--time-resolution=ns",
        ],
    );
    let info: serde_json::Value =
        serde_json::from_str(&hoard_ok(&["info", "--json", s(&image)])).unwrap();
    assert_eq!(info["blocks"], 2, "one block per worker");
    assert_extracts_to(&image, &manifest_of(&tree));
    let Some(bin) = dwarfs_bin() else {
        return;
    };
    output_ok(Command::new(bin.join("dwarfsck")).args(["-i", s(&image), "--check-integrity"]));
    let x = dir.path().join("x");
    std::fs::create_dir(&x).unwrap();
    output_ok(Command::new(bin.join("dwarfsextract")).args(["-i", s(&image), "-o", s(&x)]));
    for name in ["a", "b", "c"] {
        assert!(
            std::fs::read(x.join(name)).unwrap() == std::fs::read(tree.join(name)).unwrap(),
            "dwarfsextract: {name}"
        );
    }
}
