//! Archive input through libarchive: archives made by the tools a Debian
//! machine has (GNU tar in every `--format`, bsdtar, GNU cpio in every
//! `-H`, zip, 7z, genisoimage, xorriso, ar, gcab) and by hand where no
//! tool writes them (big-endian binary cpio, an RPM, a zstd stream behind
//! a skippable frame), behind every filter (gzip, bzip2, xz, lzma, lzip,
//! zstd, lz4, compress, lzop, uuencode). Each is packed by `hoard create
//! -i` and compared by `hoard diff` with bsdtar's extraction of the same
//! archive: names (non-UTF-8 ones too), types, contents, permission bits,
//! owners, times (before 1970 and after 2038), link targets, and holes.
//! Then `hoard mount ARCHIVE`, and archives that are broken or hostile.

mod common;

use common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Names in three legacy encodings, as bytes: cp866 and KOI8-R
/// ("privet"), EUC-JP ("nihon").
const LEGACY_NAMES: [&[u8]; 3] = [
    b"\x8f\xe0\xa8\xa2\xa5\xe2",
    b"\xf0\xd2\xc9\xd7\xc5\xd4",
    b"\xc6\xfc\xcb\xdc",
];

/// A source tree every format can hold (short ASCII and UTF-8 names,
/// files, a directory, a symlink, a hard link, setuid and private
/// modes); with `full`, also legacy-encoded names and times before 1970
/// and after 2038, which only some formats hold.
fn source(root: &Path, full: bool) -> PathBuf {
    std::fs::create_dir_all(root.join("dir/sub")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("dir/small.txt"), b"small\n").unwrap();
    std::fs::write(root.join("dir/sub/noise.bin"), noise(300_000, 7)).unwrap();
    std::fs::write(root.join("dir/grüße.txt"), b"utf-8\n").unwrap();
    std::fs::write(root.join("run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::write(root.join("private"), b"secret\n").unwrap();
    std::fs::write(root.join("one"), b"two names\n").unwrap();
    std::fs::hard_link(root.join("one"), root.join("dir/two")).unwrap();
    std::os::unix::fs::symlink("dir/small.txt", root.join("link")).unwrap();
    let mut script = String::from(
        "chmod 4755 run.sh; chmod 600 private; find . -exec touch -h -d @1699999200 {} +",
    );
    if full {
        for name in LEGACY_NAMES {
            std::fs::write(root.join(OsStr::from_bytes(name)), name).unwrap();
        }
        std::fs::write(root.join("old"), b"1960\n").unwrap();
        std::fs::write(root.join("future"), b"2100\n").unwrap();
        script += "; touch -d 1960-01-01T00:00:00Z old; touch -d 2100-01-01T00:00:00Z future";
    }
    sh(root, &script);
    root.to_path_buf()
}

/// Packs `archive` with `hoard create -i` and compares the image with
/// bsdtar's extraction of it; returns the differences (empty when none),
/// ignoring the `ignore` fields.
fn differences_from_bsdtar(archive: &Path, ignore: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let image = work.path().join("x.dwarfs");
    let o = run(&create_args(
        archive,
        &image,
        &["--with-devices", "--with-specials"],
    ));
    if !o.status.success() {
        return format!("create failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let out = work.path().join("bsdtar");
    std::fs::create_dir(&out).unwrap();
    let x = Command::new("bsdtar")
        .env("LC_ALL", "C.UTF-8")
        .args(["-x", "-p", "--numeric-owner", "-f"])
        .arg(archive)
        .arg("-C")
        .arg(&out)
        .output()
        .unwrap();
    // bsdtar exits 1 after names it could not convert to UTF-8, which it
    // extracts with their bytes all the same.
    let stderr = String::from_utf8_lossy(&x.stderr);
    let only_names = stderr
        .lines()
        .all(|l| l.contains("can't be converted") || l.contains("Error exit delayed"));
    assert!(
        x.status.success() || only_names,
        "bsdtar -x {}: {stderr}",
        archive.display(),
    );
    // The extraction directory's own time is bsdtar's business.
    differences_below_root(&image, &out, ignore)
}

/// Makes each archive with its shell command (`$S`: the source tree,
/// `$A`: the archive; run in a scratch directory) and compares it with
/// bsdtar's extraction; fails listing every archive that differs.
/// Archives whose tool is missing are skipped and said so.
fn check_all(src: &Path, cases: &[(&str, &str, &str)], ignore: &str) {
    let work = tempfile::tempdir().unwrap();
    let mut failures = String::new();
    for (name, tools, script) in cases {
        if let Some(missing) = tools.split_whitespace().find(|t| !has_tool(t)) {
            skipped(&format!("{name}: tool '{missing}' missing"));
            continue;
        }
        let archive = work.path().join(name);
        output_ok(
            Command::new("sh")
                .args(["-ec", &format!("umask 022; {script}")])
                .env("S", src)
                .env("A", &archive)
                .env("LC_ALL", "C")
                .current_dir(work.path()),
        );
        let d = differences_from_bsdtar(&archive, ignore);
        if !d.is_empty() {
            failures += &format!("{name}:\n{d}");
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// The bsdtar-format cases plus the same tar behind every filter.
const FILTERS: [(&str, &str, &str); 12] = [
    ("gz.tar.gz", "gzip", "tar -cf - -C $S . | gzip > $A"),
    ("bz2.tar.bz2", "bzip2", "tar -cf - -C $S . | bzip2 > $A"),
    ("xz.tar.xz", "xz", "tar -cf - -C $S . | xz > $A"),
    (
        "lzma.tar.lzma",
        "xz",
        "tar -cf - -C $S . | xz --format=lzma > $A",
    ),
    ("lzip.tar.lz", "lzip", "tar -cf - -C $S . | lzip > $A"),
    ("zstd.tar.zst", "zstd", "tar -cf - -C $S . | zstd -q > $A"),
    (
        "zstd-frames.tar.zst",
        "zstd head tail",
        "tar -cf t -C $S .; head -c 5000 t | zstd -q > $A; tail -c +5001 t | zstd -q >> $A",
    ),
    ("lz4.tar.lz4", "lz4", "tar -cf - -C $S . | lz4 -q > $A"),
    (
        "compress.tar.Z",
        "compress",
        "tar -cf - -C $S . | compress -cf > $A",
    ),
    ("lzop.tar.lzo", "lzop", "tar -cf - -C $S . | lzop -c > $A"),
    ("uu.tar.uu", "bsdtar", "bsdtar -cf $A --uuencode -C $S ."),
    ("b64.tar.uu", "bsdtar", "bsdtar -cf $A --b64encode -C $S ."),
];

#[test]
fn tar_dialects_and_filters_pack_like_bsdtar_extracts() {
    if !has_tool("bsdtar") {
        return skipped("bsdtar missing (libarchive-tools)");
    }
    let dir = tempfile::tempdir().unwrap();
    let full = source(&dir.path().join("src"), true);
    let mut cases = vec![
        ("gnu.tar", "tar", "tar --format=gnu -cf $A -C $S ."),
        ("oldgnu.tar", "tar", "tar --format=oldgnu -cf $A -C $S ."),
        ("posix.tar", "tar", "tar --format=posix -cf $A -C $S ."),
        (
            "label.tar",
            "tar",
            "tar --format=gnu -V 'a volume label' -cf $A -C $S .",
        ),
        ("pax.tar", "bsdtar", "bsdtar --format=pax -cf $A -C $S ."),
        ("bsd-gnutar.tar", "bsdtar", "bsdtar --format=gnutar -cf $A -C $S ."),
        // A pax global header, as git archive writes one.
        (
            "global.tar",
            "git",
            "git init -q r; cp -a $S/dir r/; cd r; git add -A; \
             git -c user.name=t -c user.email=t@t commit -qm t; git archive --format=tar -o $A HEAD",
        ),
    ];
    cases.extend(FILTERS);
    check_all(&full, &cases, "mtime_ns");

    // ustar and v7 hold no times before 1970, xar no names in other
    // encodings (v7 has no type for directories: a trailing '/' marks
    // them).
    let portable = source(&dir.path().join("portable"), false);
    let cases = [
        ("ustar.tar", "tar", "tar --format=ustar -cf $A -C $S ."),
        ("v7.tar", "tar", "tar --format=v7 -cf $A -C $S ."),
        (
            "bsd-ustar.tar",
            "bsdtar",
            "bsdtar --format=ustar -cf $A -C $S .",
        ),
        ("bsd-v7.tar", "bsdtar", "bsdtar --format=v7 -cf $A -C $S ."),
        ("xar.xar", "bsdtar", "bsdtar --format=xar -cf $A -C $S ."),
    ];
    check_all(&portable, &cases, "mtime_ns");
}

#[test]
fn sparse_files_in_every_tar_sparse_format_keep_their_holes() {
    if !has_tool("bsdtar") {
        return skipped("bsdtar missing (libarchive-tools)");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let f = std::fs::File::create(src.join("sparse")).unwrap();
    f.set_len(16 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"in the middle", 8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &noise(70_000, 3), 12 << 20).unwrap();
    drop(f);
    let cases = [
        ("gnu.tar", "tar", "tar --format=gnu --sparse -cf $A -C $S ."),
        (
            "pax00.tar",
            "tar",
            "tar --format=posix --sparse --sparse-version=0.0 -cf $A -C $S .",
        ),
        (
            "pax01.tar",
            "tar",
            "tar --format=posix --sparse --sparse-version=0.1 -cf $A -C $S .",
        ),
        (
            "pax10.tar",
            "tar",
            "tar --format=posix --sparse --sparse-version=1.0 -cf $A -C $S .",
        ),
        (
            "bsdpax.tar",
            "bsdtar",
            "bsdtar --format=pax --read-sparse -cf $A -C $S .",
        ),
    ];
    check_all(&src, &cases, "mtime,mtime_ns");
    // The image keeps the holes: hoard's own extraction is sparse.
    let work = tempfile::tempdir().unwrap();
    for (name, _, script) in &cases[..4] {
        let archive = work.path().join(name);
        sh(
            work.path(),
            &script
                .replace("$A", archive.to_str().unwrap())
                .replace("$S", src.to_str().unwrap()),
        );
        let image = create_image(&archive, &work.path().join(format!("{name}.dwarfs")), &[]);
        let out = extract_ok(&[s(&image)], &work.path().join(format!("{name}.out")));
        let m = std::fs::metadata(out.join("sparse")).unwrap();
        let allocated = std::os::unix::fs::MetadataExt::blocks(&m) * 512;
        assert!(allocated < 1 << 20, "{name}: {allocated} bytes allocated");
    }
}

/// A big-endian binary cpio archive of `files` (name, contents), as old
/// big-endian Unix machines wrote them; no tool here writes one.
fn cpio_big_endian(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let entries =
        files
            .iter()
            .map(|&(n, d)| (n, d, 0o100644u16))
            .chain([("TRAILER!!!", &b""[..], 0)]);
    for (i, (name, data, mode)) in entries.enumerate() {
        let name = [name.as_bytes(), b"\0"].concat();
        let size = data.len() as u32;
        let mtime = 1_699_999_200u32;
        let words: [u16; 13] = [
            0o070707,
            1,
            i as u16 + 1,
            mode,
            0,
            0,
            1,
            0,
            (mtime >> 16) as u16,
            mtime as u16,
            name.len() as u16,
            (size >> 16) as u16,
            size as u16,
        ];
        for w in words {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out.extend_from_slice(&name);
        out.resize(out.len() + name.len() % 2, 0);
        out.extend_from_slice(data);
        out.resize(out.len() + data.len() % 2, 0);
    }
    out
}

/// A minimal RPM package (version 3 lead, an empty signature header, an
/// empty header) whose payload is `cpio`, gzipped: what libarchive needs
/// of the layout to find the payload.
fn rpm(cpio_gz: &[u8]) -> Vec<u8> {
    let mut lead = vec![0u8; 96];
    lead[..4].copy_from_slice(&[0xed, 0xab, 0xee, 0xdb]);
    lead[4] = 3; // major version
    lead[10..14].copy_from_slice(b"test");
    lead[78..80].copy_from_slice(&5u16.to_be_bytes()); // signature type
    let header = {
        let mut h = vec![0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];
        h.extend_from_slice(&0u32.to_be_bytes()); // index entries
        h.extend_from_slice(&0u32.to_be_bytes()); // data bytes
        h
    };
    [lead, header.clone(), header, cpio_gz.to_vec()].concat()
}

#[test]
fn cpio_zip_7z_iso_ar_and_more_pack_like_bsdtar_extracts() {
    if !has_tool("bsdtar") {
        return skipped("bsdtar missing (libarchive-tools)");
    }
    let dir = tempfile::tempdir().unwrap();
    let full = source(&dir.path().join("src"), true);
    let mut cases = vec![];
    for format in [
        "bin", "odc", "newc", "crc", "tar", "ustar", "hpbin", "hpodc",
    ] {
        let name: &'static str = Box::leak(format!("{format}.cpio").into_boxed_str());
        let script: &'static str = Box::leak(
            format!("cd $S && find . -print | cpio --quiet -o -H {format} > $A").into_boxed_str(),
        );
        // ustar-style headers hold no times before 1970.
        if !matches!(format, "tar" | "ustar") {
            cases.push((name, "cpio", script));
        }
    }
    cases.extend([
        ("bsd.cpio", "bsdtar", "bsdtar --format=cpio -cf $A -C $S ."),
        (
            "bsd-newc.cpio.gz",
            "bsdtar",
            "bsdtar --format=newc -czf $A -C $S .",
        ),
        ("store.zip", "zip", "cd $S && zip -qry -0 $A ."),
    ]);
    check_all(&full, &cases, "mtime_ns");

    // Formats without owners or legacy names, or whose tools rename
    // entries (ISO 9660), get the portable tree; those without
    // directories' times are compared without times.
    let portable = source(&dir.path().join("portable"), false);
    let bsd_iso = "bsdtar --format=iso9660 --options=rockridge -cf $A -C $S .";
    let cases = [
        ("deflate.zip", "zip", "cd $S && zip -qry $A ."),
        ("bzip2.zip", "zip", "cd $S && zip -qry -Z bzip2 $A ."),
        ("zip64.zip", "zip", "cd $S && zip -qry -fz $A ."),
        (
            "lzma.zip",
            "7z",
            "cd $S && 7z a -bd -tzip -mm=LZMA -snl $A . >/dev/null",
        ),
        ("bsd.zip", "bsdtar", "bsdtar --format=zip -cf $A -C $S ."),
        ("p7zip.7z", "7z", "cd $S && 7z a -bd -snl $A . >/dev/null"),
        ("bsd.7z", "bsdtar", "bsdtar --format=7zip -cf $A -C $S ."),
        ("rr.iso", "genisoimage", "genisoimage -quiet -R -J -o $A $S"),
        (
            "xorriso.iso",
            "xorriso",
            "xorriso -as mkisofs -quiet -R -J -o $A $S 2>/dev/null",
        ),
        ("bsd.iso", "bsdtar", bsd_iso),
        ("files.a", "ar", "cd $S && ar rc $A one private run.sh"),
        (
            "package.deb",
            "dpkg-deb",
            "mkdir -p p/DEBIAN p/usr; printf 'Package: t\\nVersion: 1\\nArchitecture: all\\n\
             Maintainer: t <t@t>\\nDescription: t\\n' > p/DEBIAN/control; cp -a $S/dir p/usr/; \
             dpkg-deb -Zxz --root-owner-group -b p $A >/dev/null",
        ),
        (
            "files.cab",
            "gcab",
            "cd $S && gcab -c $A one private run.sh",
        ),
        (
            "files.lzh",
            "lha",
            "cd $S && lha aq $A one private run.sh dir/small.txt",
        ),
    ];
    check_all(&portable, &cases, "mtime,mtime_ns");

    // Hand-made: big-endian binary cpio, and an RPM.
    let work = tempfile::tempdir().unwrap();
    let be = work.path().join("be.cpio");
    std::fs::write(
        &be,
        cpio_big_endian(&[("a", b"big endian\n"), ("b", &noise(5000, 1))]),
    )
    .unwrap();
    assert_eq!(differences_from_bsdtar(&be, "mtime_ns"), "");
    let payload = work.path().join("payload.cpio.gz");
    sh(
        work.path(),
        &format!(
            "cd {} && find . -print | cpio --quiet -o -H newc | gzip > {}",
            portable.display(),
            payload.display()
        ),
    );
    let package = work.path().join("x.rpm");
    std::fs::write(&package, rpm(&std::fs::read(&payload).unwrap())).unwrap();
    assert_eq!(differences_from_bsdtar(&package, "mtime_ns"), "");
    // zstd behind a skippable frame (as seekable-zstd writers add).
    let tar = work.path().join("plain.tar");
    sh(
        work.path(),
        &format!("tar -cf {} -C {} .", tar.display(), portable.display()),
    );
    let mut skippable = vec![0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    let o = output_ok(Command::new("zstd").args(["-q", "-c"]).arg(&tar));
    skippable.extend_from_slice(&o.stdout);
    let framed = work.path().join("skippable.tar.zst");
    std::fs::write(&framed, skippable).unwrap();
    assert_eq!(differences_from_bsdtar(&framed, "mtime_ns"), "");
}

/// CRC-32 (IEEE), for the hand-made RAR headers.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// A RAR 4 block: its CRC-16 (the low half of the CRC-32 of the rest),
/// type, flags and size, then `rest`.
fn rar_block(kind: u8, flags: u16, rest: &[u8]) -> Vec<u8> {
    let mut body = vec![kind];
    body.extend_from_slice(&flags.to_le_bytes());
    body.extend_from_slice(&((7 + rest.len()) as u16).to_le_bytes());
    body.extend_from_slice(rest);
    [&(crc32(&body) as u16).to_le_bytes()[..], &body].concat()
}

/// A RAR 4 archive of `files` (name, Unix mode, contents), stored
/// uncompressed, made by Unix: what no free tool writes.
fn rar(files: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = b"Rar!\x1a\x07\x00".to_vec();
    out.extend(rar_block(0x73, 0, &[0; 6]));
    // 2023-11-14 22:00:00 as a DOS time.
    let dos_time: u32 = (43 << 25) | (11 << 21) | (14 << 16) | (22 << 11);
    for &(name, mode, data) in files {
        let dir = mode & 0o170000 == 0o040000;
        let mut h = Vec::new();
        h.extend_from_slice(&(data.len() as u32).to_le_bytes()); // packed
        h.extend_from_slice(&(data.len() as u32).to_le_bytes()); // unpacked
        h.push(3); // Unix
        h.extend_from_slice(&crc32(data).to_le_bytes());
        h.extend_from_slice(&dos_time.to_le_bytes());
        h.push(20); // version to unpack
        h.push(0x30); // stored
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&mode.to_le_bytes());
        h.extend_from_slice(name.as_bytes());
        let flags = 0x8000 | if dir { 0x00e0 } else { 0 };
        out.extend(rar_block(0x74, flags, &h));
        out.extend_from_slice(data);
    }
    out.extend(rar_block(0x7b, 0x4000, &[]));
    out
}

/// A tar with a Solaris ACL record (type `A`: the POSIX draft ACL of the
/// member after it, as Solaris tar writes it) on a file.
fn solaris_acl_tar() -> Vec<u8> {
    let acl = b"01000005\0user::rw-,user:1234:r--,group::r--,mask:r--,other:r--\0";
    let mut tar = ustar_header("f", b'A', acl.len() as u64);
    tar.extend_from_slice(acl);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
    tar.extend(ustar_header("f", b'0', 6));
    tar.extend_from_slice(b"acl'd\n");
    tar.resize(tar.len().div_ceil(512) * 512 + 1024, 0);
    tar
}

#[test]
fn rar_and_solaris_acl_archives_made_by_hand_pack_like_bsdtar_extracts() {
    if !has_tool("bsdtar") {
        return skipped("bsdtar missing (libarchive-tools)");
    }
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("x.rar");
    let files: [(&str, u32, &[u8]); 3] = [
        ("d", 0o040755, b""),
        ("d/a.txt", 0o100644, b"stored in a rar\n"),
        ("run", 0o104755, &noise(3000, 4)),
    ];
    std::fs::write(&archive, rar(&files)).unwrap();
    assert_eq!(differences_from_bsdtar(&archive, "mtime,mtime_ns"), "");

    let probe = work.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    let acls = Command::new("setfacl")
        .args(["-m", "u:1234:r--"])
        .arg(&probe)
        .status();
    if !acls.is_ok_and(|s| s.success()) {
        return skipped("setfacl missing or no ACLs in the temporary directory");
    }
    let archive = work.path().join("solaris.tar");
    std::fs::write(&archive, solaris_acl_tar()).unwrap();
    assert_eq!(differences_from_bsdtar(&archive, "mtime_ns"), "");
}

/// Runs `hoard create -i ARCHIVE` with `extra` options; returns its
/// output and whether an image was left.
fn create_from(archive: &Path, extra: &[&str]) -> (std::process::Output, bool) {
    let image = archive.with_extension("dwarfs");
    let o = run(&create_args(archive, &image, extra));
    (o, image.exists())
}

#[test]
fn broken_and_hostile_archives_get_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(&dir.path().join("src"), false);
    let work = dir.path();
    sh(work, &format!("tar -czf whole.tgz -C {} .", src.display()));
    let whole = std::fs::read(work.join("whole.tgz")).unwrap();

    // Truncated: an error naming the archive and the member, no image.
    let cut = work.join("cut.tgz");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let (o, image) = create_from(&cut, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!image, "an image was left");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cut.tgz") && err.contains('\''), "{err}");

    // --continue-on-error keeps what could be read, lists the rest and
    // exits 2.
    let (o, image) = create_from(&cut, &["--continue-on-error"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(image && err.contains("left out"), "{err}");

    // Not an archive; an empty file; random bytes behind a gzip header.
    let cases: [(&str, Vec<u8>); 3] = [
        ("text.txt", b"just some text\n".repeat(100)),
        ("empty.tar", Vec::new()),
        (
            "junk.gz",
            [&[0x1f, 0x8b, 8, 0][..], &noise(4000, 9)].concat(),
        ),
    ];
    for (name, bytes) in cases {
        let path = work.join(name);
        std::fs::write(&path, bytes).unwrap();
        let (o, image) = create_from(&path, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(!image, "{name}: an image was left");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
    }

    // An encrypted zip member: a clear error.
    if has_tool("zip") {
        sh(
            work,
            &format!(
                "cd {} && zip -q -P secret {}/enc.zip one",
                src.display(),
                work.display()
            ),
        );
        let (o, _) = create_from(&work.join("enc.zip"), &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("encrypted"), "{err}");
    }

    // A member that claims a terabyte but holds a few bytes: an error,
    // quickly, without the memory or disk the claim asks for.
    let mut huge = ustar_header("huge", b'0', 1 << 40);
    huge.extend_from_slice(&[b'x'; 512]);
    let path = work.join("huge.tar");
    std::fs::write(&path, &huge).unwrap();
    let (o, image) = create_from(&path, &[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!image);

    // Long-name and pax records claiming 64 GiB: refused at once.
    for kind in [b'x', b'L'] {
        let mut special = ustar_header("special", kind, 0o77777777770);
        special.extend_from_slice(&[b'a'; 5000]);
        let path = work.join(format!("special-{}.tar", kind as char));
        std::fs::write(&path, &special).unwrap();
        let (o, image) = create_from(&path, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!image && err.contains("too large"), "{err}");
    }

    // Names that climb out or start at the root stay inside the image;
    // a hard link pointing out is an error or lands inside.
    let mut hostile = Vec::new();
    for (name, kind) in [
        ("../../escape", b'0'),
        ("/etc/rooted", b'0'),
        ("a/../../b", b'0'),
    ] {
        hostile.extend(ustar_header(name, kind, 3));
        hostile.extend_from_slice(&[b'x'; 512]);
    }
    hostile.extend(vec![0u8; 1024]);
    let path = work.join("hostile.tar");
    std::fs::write(&path, &hostile).unwrap();
    let (o, image) = create_from(&path, &[]);
    assert!(
        o.status.success() && image,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listing = hoard_ok(&["ls", "-R", s(&path.with_extension("dwarfs"))]);
    for name in ["escape", "etc/rooted", "b"] {
        assert!(
            listing.lines().any(|l| l.trim_end().ends_with(name)),
            "{name}: {listing}"
        );
    }
    assert!(!work.join("escape").exists() && !Path::new("/etc/rooted").exists());
}

#[test]
fn archives_mount_directly_and_are_packed_once() {
    if !fuse_available() || !has_tool("bsdtar") {
        return skipped("FUSE or bsdtar missing");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = source(&dir.path().join("src"), false);
    let work = dir.path();
    let cache = work.join("cache");
    let mut scripts = vec![
        (
            "x.tar.bz2",
            format!("tar -cjf x.tar.bz2 -C {} .", src.display()),
        ),
        (
            "x.zip",
            format!(
                "cd {} && zip -qry {}/x.zip .",
                src.display(),
                work.display()
            ),
        ),
    ];
    if has_tool("genisoimage") {
        scripts.push((
            "x.iso",
            format!("genisoimage -quiet -R -J -o x.iso {}", src.display()),
        ));
    }
    for (name, script) in scripts {
        sh(work, &script);
        let archive = work.join(name);
        let expected = work.join(format!("{name}.bsdtar"));
        std::fs::create_dir(&expected).unwrap();
        sh(
            work,
            &format!(
                "bsdtar -xpf {} --numeric-owner -C {}",
                archive.display(),
                expected.display()
            ),
        );
        let mnt = work.join(format!("{name}.mnt"));
        std::fs::create_dir(&mnt).unwrap();
        let opt = format!("archive_cache={}", cache.display());
        for round in 0..2 {
            let o = output_ok(hoard().args(["mount", s(&archive), s(&mnt), "-o", &opt]));
            let err = String::from_utf8_lossy(&o.stderr);
            let _mounted = FuseMount(mnt.clone());
            // Packed on the first mount only.
            assert_eq!(
                err.contains("packing"),
                round == 0,
                "{name} round {round}: {err}"
            );
            let a = without_root(&manifest_of(&expected));
            let b = without_root(&manifest_of(&mnt));
            assert_same_manifest(&a, &b, Compare::Mounted);
        }
    }
    // ls and cat take archives the same way, through the same cache.
    let zip = work.join("x.zip");
    let o = output_ok(hoard().env("XDG_CACHE_HOME", work.join("xdg")).args([
        "cat",
        s(&zip),
        "dir/small.txt",
    ]));
    assert_eq!(o.stdout, b"small\n");
    assert!(work.join("xdg/hoard").is_dir());
    // One image per archive in the cache.
    let images = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some(OsStr::new("dwarfs")));
    assert_eq!(images.count(), if has_tool("genisoimage") { 3 } else { 2 });
}

/// A manifest without the line of its root directory (whose times are the
/// unpacker's).
fn without_root(manifest: &str) -> String {
    manifest
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["path"] != ".")
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn dwarfs_reads_images_of_archives_with_old_times_and_legacy_names() {
    if dwarfs_bin().is_none() {
        return skipped("DwarFS 0.15.3 tools (../shared) missing");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = source(&dir.path().join("src"), true);
    let work = dir.path();
    sh(
        work,
        &format!("tar --format=gnu -cjf x.tar.bz2 -C {} .", src.display()),
    );
    let image = create_image(&work.join("x.tar.bz2"), &work.join("x.dwarfs"), &[]);
    let out = work.join("out");
    dwarfs_check_and_extract(&image, &out);
    // 1960 and 2100 come back as such, and the names with their bytes.
    assert_eq!(differences_below_root(&image, &out, "mtime_ns"), "");
    let old = std::fs::metadata(out.join("old")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::mtime(&old), -315_619_200);
}
