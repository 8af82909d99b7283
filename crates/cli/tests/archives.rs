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

/// [`unpack`]s `image` into `to` and asserts that `to` holds the image's
/// tree.
fn assert_unpacks(image: &Path, format: &str, file: Option<&Path>, command: &str, to: &Path) {
    unpack(image, format, file, command, to);
    let diff = differences_below_root(image, to, "");
    assert!(diff.is_empty(), "{format} unpacked by `{command}`:\n{diff}");
}

/// Writes `image` as `format` to a file (or through a pipe when `file` is
/// `None`) and unpacks it into a new directory `to` with `unpack` (a shell
/// command reading the archive on standard input, or the file).
fn unpack(image: &Path, format: &str, file: Option<&Path>, unpack: &str, to: &Path) {
    std::fs::create_dir(to).unwrap();
    let img = image.to_str().unwrap();
    let archive = match file {
        Some(f) => {
            extract_ok(&[img, "--format", format], f);
            std::fs::read(f).unwrap()
        }
        None => hoard_bytes(&["extract", img, "--format", format, "-o", "-"]),
    };
    let mut child = Command::new("sh")
        .args(["-ec", unpack])
        .current_dir(to)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // An unpacker that reads the file itself (unzip) closes standard input.
    match child.stdin.take().unwrap().write_all(&archive) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
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
    assert_eq!(
        differences_below_root(&image, &src, ""),
        "",
        "the image itself"
    );
    (dir, image)
}

#[test]
fn tar_archives_unpack_to_the_image_tree() {
    let (dir, image) = setup();
    let d = dir.path();
    let tar = "tar -xpf -";
    assert_unpacks(&image, "tar", None, tar, &d.join("pax"));
    assert_sparse(&d.join("pax/plain/sparse"), "pax via GNU tar");
    let gnu = d.join("x.gnutar");
    assert_unpacks(&image, "gnutar", Some(&gnu), tar, &d.join("gnu"));
    let listing = output_ok(Command::new("tar").arg("-tvf").arg(&gnu));
    assert!(String::from_utf8_lossy(&listing.stdout).contains(&"n".repeat(200)));
    if has_tool("bsdtar") {
        let bsdtar = "bsdtar -xpf -";
        assert_unpacks(&image, "tar", None, bsdtar, &d.join("pax-bsd"));
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
        // GNU cpio sets no symlink times, and directory times before it
        // fills the directories.
        let cpio = d.join("cpio");
        unpack(&image, "cpio", None, "cpio -idm --quiet", &cpio);
        let diff = differences_below_root(&image, &cpio, "mtime,mtime_ns");
        assert!(diff.is_empty(), "cpio via GNU cpio:\n{diff}");
    } else {
        skipped("GNU cpio missing");
    }
    if has_tool("bsdtar") {
        let f = d.join("x.cpio");
        let bsdtar = "bsdtar -xpf -";
        assert_unpacks(&image, "cpio", Some(&f), bsdtar, &d.join("cpio-bsd"));
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
        // zip has no owners, fifos, devices or hard links, unzip sets no
        // symlink times, and hoard's zip writer (the `zip` crate) keeps
        // only the permission bits, not setuid/setgid/sticky.
        let diff = differences_below_root(&image, &d.join("zip"), "uid,gid,nlink,link");
        let allowed = [
            "only in first: fifo",
            "only in first: null-dev",
            "differs: long-link: mtime ",
            "differs: short-link: mtime ",
            "differs: plain/setuid: mode \"4755\" -> \"0755\"",
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
    let tar = hoard_bytes(&[
        "extract",
        s(&image),
        "--format=gnutar",
        "-o",
        "-",
        "--pattern",
        "plain/*.txt",
    ]);
    let out = dir.path().join("listed.tar");
    std::fs::write(&out, tar).unwrap();
    let list = output_ok(Command::new("tar").arg("-tf").arg(&out));
    let names = String::from_utf8(list.stdout).unwrap();
    assert_eq!(names, "./\nplain/\nplain/grüße.txt\n");

    let bin = dir.path().join("dwarfsextract");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hoard"), &bin).unwrap();
    let o = output_ok(Command::new(&bin).args(["-i", s(&image), "-f", "newc"]));
    assert!(o.stdout.starts_with(b"070701"), "a newc archive on stdout");
    assert!(o.stdout.windows(10).any(|w| w == b"TRAILER!!!"));

    // A failed write leaves nothing behind and says so in one line.
    let missing = dir.path().join("no/such/dir/x.tar");
    one_line_error(&["extract", s(&image), "--format=tar", "-o", s(&missing)]);
    assert!(!missing.exists());
}

#[test]
fn pax_archives_carry_nanoseconds_and_extended_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let src = tree_with(dir.path(), "src", &[("f", b"attributes\n")]);
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
    assert_eq!(differences_below_root(&image, &out, ""), "");
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

// ------------------------------------------------------------ archives in

/// `hoard create` with `input` (a path or `-` with `stdin`), the options
/// that make images comparable byte for byte, and `extra`.
fn create_from(
    input: &str,
    stdin: Option<Vec<u8>>,
    image: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "create",
        "-i",
        input,
        "-o",
        image.to_str().unwrap(),
        "--no-progress",
        "--no-history",
        "--no-create-timestamp",
        "--with-devices",
        "--with-specials",
    ];
    args.extend_from_slice(extra);
    let mut child = hoard()
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(data) = stdin {
        // A failed build may stop reading early.
        let _ = pipe.write_all(&data);
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// [`create_from`], asserting that it succeeds.
fn create_from_ok(input: &str, stdin: Option<Vec<u8>>, image: &Path, extra: &[&str]) {
    let o = create_from(input, stdin, image, extra);
    assert!(
        o.status.success(),
        "create -i {input} {extra:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A tar of `src` made by GNU tar with `options`.
fn gnu_tar(src: &Path, options: &str) -> Vec<u8> {
    let o = output_ok(
        Command::new("sh")
            .args(["-ec", &format!("tar {options} -cf - .")])
            .current_dir(src),
    );
    o.stdout
}

#[test]
fn tar_streams_pack_like_their_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = tree(&d.join("src"));
    let from_dir = d.join("dir.dwarfs");
    create_from_ok(src.to_str().unwrap(), None, &from_dir, &[]);
    let expected = std::fs::read(&from_dir).unwrap();

    // GNU format with sparse files, through a pipe.
    let tar = gnu_tar(&src, "--sparse --xattrs");
    let piped = d.join("piped.dwarfs");
    create_from_ok("-", Some(tar.clone()), &piped, &[]);
    assert_eq!(differences_below_root(&piped, &src, ""), "");
    assert!(
        std::fs::read(&piped).unwrap() == expected,
        "a tar stream and its directory give different images"
    );

    // Compressed files, told by their magic numbers.
    for (tool, suffix) in [("gzip", "gz"), ("zstd", "zst"), ("xz", "xz")] {
        if !has_tool(tool) {
            skipped(&format!("{tool} missing"));
            continue;
        }
        let plain = d.join("t.tar");
        std::fs::write(&plain, &tar).unwrap();
        sh(d, &format!("{tool} -c t.tar > t.tar.{suffix}"));
        let image = d.join(format!("{suffix}.dwarfs"));
        let packed = d.join(format!("t.tar.{suffix}"));
        create_from_ok(packed.to_str().unwrap(), None, &image, &[]);
        assert!(std::fs::read(&image).unwrap() == expected, "{suffix}");
    }

    // pax: nanosecond times and long names.
    sh(&src, "touch -d '2023-11-14 22:00:00.123456789' plain/empty");
    let pax = d.join("pax.dwarfs");
    create_from_ok(
        "-",
        Some(gnu_tar(&src, "--format=pax --sparse")),
        &pax,
        &["--time-resolution=ns"],
    );
    assert_eq!(differences_below_root(&pax, &src, ""), "");

    // Options apply as for a directory.
    let filtered = d.join("filtered.dwarfs");
    create_from_ok(
        "-",
        Some(tar),
        &filtered,
        &[
            "-F",
            "- plain/big.bin",
            "-F",
            "- /linked",
            "--set-owner",
            "77",
        ],
    );
    let listing = hoard_ok(&["ls", "-lR", s(&filtered)]);
    assert!(!listing.contains("big.bin"), "{listing}");
    // A hard link keeps its contents when the filter drops its other name.
    assert!(!listing.contains(" linked\n"), "{listing}");
    let cat = hoard_ok(&["cat", s(&filtered), "plain/linked-too"]);
    assert_eq!(cat, "two names\n", "{listing}");
    assert!(
        listing
            .lines()
            .all(|l| l.split_whitespace().nth(2) == Some("77")),
        "{listing}"
    );
}

#[test]
fn gnu_tar_text_acls_become_acl_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("src");
    std::fs::create_dir_all(src.join("shared")).unwrap();
    std::fs::write(src.join("shared/f"), b"acl\n").unwrap();
    std::fs::write(src.join("plain"), b"no acl\n").unwrap();
    // A named user by number and one by name, a named group, and a
    // default ACL on the directory.
    let set = Command::new("sh")
        .args([
            "-c",
            "setfacl -m u:1234:r--,u:bin:r-x,g:daemon:rw- shared/f && setfacl -d -m u:55:rwx shared \
             && setfattr -n user.lines -v 0x0a000a0a shared/f",
        ])
        .current_dir(&src)
        .status();
    if !set.is_ok_and(|s| s.success()) {
        skipped("setfacl missing or ACLs not supported in the temporary directory");
        return;
    }
    sh(&src, "find . -exec touch -h -d 2024-01-02T03:04:05 {} +");
    let from_dir = d.join("dir.dwarfs");
    create_from_ok(src.to_str().unwrap(), None, &from_dir, &[]);

    // `--acls` stores them as SCHILY.acl.* text, not as attributes; the
    // text, like the binary attribute value, holds newlines.
    let tar = gnu_tar(&src, "--format=pax --acls --xattrs");
    assert!(tar.windows(17).any(|w| w == b"SCHILY.acl.access"));
    let image = d.join("tar.dwarfs");
    create_from_ok("-", Some(tar), &image, &[]);
    assert_eq!(differences_below_root(&image, &src, ""), "");
    assert!(
        std::fs::read(&image).unwrap() == std::fs::read(&from_dir).unwrap(),
        "the tar and its directory give different images"
    );

    // A name this machine does not know: the ACL is left out, said so,
    // and the build ends with status 2 like one with an unreadable file.
    let mut odd = gnu_tar(&src, "--format=pax --acls");
    let at = odd.windows(8).position(|w| w == b"user:bin").unwrap();
    odd[at + 5..at + 8].copy_from_slice(b"zq9");
    let o = create_from("-", Some(odd), &d.join("odd.dwarfs"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("shared/f") && err.contains("unknown user 'zq9'"),
        "{err}"
    );
}

#[test]
fn cpio_streams_pack_like_their_directory() {
    if !has_tool("cpio") {
        skipped("GNU cpio missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = tree(&dir.path().join("src"));
    let o = output_ok(
        Command::new("sh")
            .args(["-ec", "find . | cpio -o -H newc --quiet"])
            .current_dir(&src),
    );
    let image = dir.path().join("cpio.dwarfs");
    create_from_ok("-", Some(o.stdout), &image, &[]);
    assert_eq!(differences_below_root(&image, &src, ""), "");
}

#[test]
fn bad_archives_are_refused_and_leave_no_image() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("data"), noise(200_000, 3)).unwrap();
    std::fs::write(src.join("small"), b"small\n").unwrap();
    let tar = gnu_tar(&src, "");
    let mut gz = gzipped(&tar);
    gz.truncate(gz.len() / 2);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated inside a file",
            tar[..100_000].to_vec(),
            "'./data': Truncated tar archive",
        ),
        ("corrupt gzip", gz, "truncated gzip input"),
        (
            "not an archive",
            b"just some text, long enough".repeat(40),
            "Unrecognized archive format",
        ),
        ("empty", Vec::new(), "empty input"),
    ];
    for (what, data, message) in cases {
        let image = d.join("bad.dwarfs");
        let o = create_from("-", Some(data), &image, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(err.contains(message), "{what}: {err}");
        assert!(!image.exists(), "{what}: an image was left");
    }
}

/// A ustar member holding the byte `x`.
fn ustar_member(name: &str, kind: u8) -> Vec<u8> {
    let mut member = ustar_header(name, kind, 1).to_vec();
    let mut data = [0u8; 512];
    data[0] = b'x';
    member.extend_from_slice(&data);
    member
}

/// File `i` of the large stream: the pool, rotated.
fn rotated(pool: &[u8], i: usize) -> Vec<u8> {
    let at = i * 12_345 % pool.len();
    [&pool[at..], &pool[..at]].concat()
}

#[test]
fn a_large_tar_stream_packs_in_bounded_memory() {
    // 1 GiB of files (128 of 8 MiB, rotations of one pool, so segmenting
    // and compressing cost little) piped into `hoard create -i -`: memory
    // holds the tree, not the stream. (bench/tar_stream.py measures 5 GB.)
    const FILES: usize = 128;
    let pool = noise(8 << 20, 5);
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("big.dwarfs");
    // Reaped below with wait4, which gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = hoard()
        .args([
            "create",
            "-i",
            "-",
            "-o",
            image.to_str().unwrap(),
            "-l1",
            "--no-progress",
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = {
        let pool = pool.clone();
        std::thread::spawn(move || -> std::io::Result<()> {
            use std::io::Write;
            for i in 0..FILES {
                let data = rotated(&pool, i);
                stdin.write_all(&ustar_header(
                    &format!("d{}/f{i}", i % 4),
                    b'0',
                    data.len() as u64,
                ))?;
                stdin.write_all(&data)?;
            }
            stdin.write_all(&[0u8; 1024])
        })
    };
    let mut stderr = child.stderr.take().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    writer.join().unwrap().unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{err}"
    );
    let peak_mib = usage.ru_maxrss / 1024;
    eprintln!("peak RSS of hoard create: {peak_mib} MiB");
    assert!(peak_mib < 256, "peak RSS {peak_mib} MiB for a 1 GiB stream");
    for i in [0, 77, FILES - 1] {
        let cat = hoard_bytes(&["cat", s(&image), &format!("d{}/f{i}", i % 4)]);
        assert!(cat == rotated(&pool, i), "file {i}");
    }
}

#[test]
fn archive_names_stay_inside_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut tar = Vec::new();
    for name in ["../../escape", "/etc/absolute", "a/../../b", "./c/./d"] {
        tar.extend(ustar_member(name, b'0'));
    }
    tar.extend_from_slice(&[0u8; 1024]);
    let image = d.join("names.dwarfs");
    create_from_ok("-", Some(tar), &image, &[]);
    let listing = hoard_ok(&["ls", "-R", s(&image)]);
    assert_eq!(listing, "b\nc\nc/d\nescape\netc\netc/absolute\n");
    assert!(!d.join("escape").exists() && !dir.path().parent().unwrap().join("escape").exists());

    // The root must stay a directory, and nothing goes below a file.
    for (members, message) in [
        (vec![(".", b'0')], "must be a directory"),
        (vec![("f", b'0'), ("f/g", b'0')], "not one"),
    ] {
        let mut tar: Vec<u8> = members
            .iter()
            .flat_map(|&(n, k)| ustar_member(n, k))
            .collect();
        tar.extend_from_slice(&[0u8; 1024]);
        let o = create_from("-", Some(tar), &image, &["-f"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{members:?}: {err}");
        assert!(err.contains(message), "{members:?}: {err}");
    }
}

/// `data` gzip-compressed by the system's gzip.
fn gzipped(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out.stdout
}

/// A `dwarfsextract` link to hoard in `dir`.
fn dwarfsextract_in(dir: &Path) -> PathBuf {
    let bin = dir.join("dwarfsextract");
    if !bin.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hoard"), &bin).unwrap();
    }
    bin
}

#[test]
fn format_options_choose_the_zip_compression() {
    let (dir, image) = setup();
    let img = image.to_str().unwrap();
    let bin = dwarfsextract_in(dir.path());
    // The method of every file in a zip written with `options`.
    let methods = |options: &str| -> Vec<zip::CompressionMethod> {
        let out = dir.path().join(format!("{options}.zip"));
        output_ok(
            Command::new(&bin)
                .args(["-i", img, "-f", "zip", "--format-options", options, "-o"])
                .arg(&out),
        );
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
        let mut found = Vec::new();
        for i in 0..zip.len() {
            let mut f = zip.by_index(i).unwrap();
            if f.is_file() {
                found.push(f.compression());
                let name = f.name().unwrap().to_string();
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut data).unwrap();
                let cat = hoard_bytes(&["cat", img, &name]);
                assert!(data == cat, "{options}: {name}");
            }
        }
        assert!(found.len() >= 5, "{options}: {found:?}");
        found
    };
    use zip::CompressionMethod::{Deflated, Stored};
    assert!(methods("compression=store").iter().all(|m| *m == Stored));
    assert!(methods("zip:compression-level=0")
        .iter()
        .all(|m| *m == Stored));
    assert!(methods("compression=deflate,compression-level=9")
        .iter()
        .all(|m| *m == Deflated));

    // Options libarchive does not take are refused by name, as is an
    // encryption without a passphrase, and no archive is left behind.
    let out = dir.path().join("refused.zip");
    for (format, options, says) in [
        ("zip", "bogus=1", "Undefined option: `bogus'"),
        ("zip", "compression-level=10", "`compression-level'"),
        (
            "newc",
            "zip:compression=store",
            "Unknown module name: `zip'",
        ),
        ("zip", "encryption=zipcrypt", "Encryption needs passphrase"),
    ] {
        let o = Command::new(&bin)
            .args(["-i", img, "-f", format, "--format-options", options, "-o"])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{options}: {err}");
        assert!(!out.exists());
    }
    let o = run(&["extract", img, "-o", "x", "--format-options", "zip64"]);
    assert_eq!(o.status.code(), Some(2), "--format-options needs --format");
}

#[test]
fn disk_writers_extract_the_same_tree() {
    let (dir, image) = setup();
    let img = image.to_str().unwrap();
    let bin = dwarfsextract_in(dir.path());
    for writers in ["0", "3"] {
        let out = dir.path().join(format!("writers-{writers}"));
        std::fs::create_dir(&out).unwrap();
        output_ok(
            Command::new(&bin)
                .args(["-i", img, "-o", out.to_str().unwrap()])
                .args(["--num-disk-writers", writers, "-n", "2"]),
        );
        assert_eq!(
            differences_below_root(&image, &out, ""),
            "",
            "{writers} writers"
        );
        assert_sparse(&out.join("plain/sparse"), "sparse file");
    }

    // A file that cannot be written: the error names it; with
    // --continue-on-error every other file is written and the exit is 2.
    for (extra, code) in [(None, 1), (Some("--continue-on-error"), 2)] {
        let out = dir.path().join(format!("blocked-{code}"));
        std::fs::create_dir_all(out.join("plain/big.bin")).unwrap();
        let mut args = vec!["extract", img, "-o", out.to_str().unwrap()];
        args.extend(["--num-disk-writers", "1"]);
        args.extend(extra);
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(
            err.contains("cannot write file") && err.contains("plain/big.bin"),
            "{err}"
        );
        if code == 2 {
            assert_eq!(std::fs::read(out.join("linked")).unwrap(), b"two names\n");
        }
    }
    let o = run(&[
        "extract",
        img,
        "-o",
        "-",
        "-f",
        "tar",
        "--num-disk-writers",
        "1",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--num-disk-writers is not for archives"
    );
}
