//! Two-way compatibility with DwarFS 0.15.3's own tools
//! (`../shared/anchors/dwarfs-0.15.3`), on a small tree with every entry
//! kind, at every level, with every codec, with categories, every metadata
//! packing option, without a section index, behind a header, with a coarse
//! time resolution, and after `hoard rewrite`:
//!
//! - images hoard writes pass `dwarfsck` (default, `-d3`, `-j`,
//!   `--check-integrity`, `--checksum=sha256`), which prints their history;
//!   `dwarfsextract` and a `dwarfs` mount give back the source tree;
//! - images `mkdwarfs` writes with the same options give back the source
//!   tree through `hoard extract` and `hoard mount`;
//! - `hoard info --json` gives the numbers `dwarfsck -j -d3` gives.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Every stored time is a whole hour, so that every time resolution keeps it.
const HOUR_BASE: i64 = 1_699_999_200;

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs a command; its stdout, or a report of how it failed.
fn ok(mut cmd: Command, what: &str) -> Result<Vec<u8>, String> {
    let o = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if o.status.success() {
        Ok(o.stdout)
    } else {
        Err(format!("{what}: {}", text(&o)))
    }
}

// ---------------------------------------------------------------- the tree

/// A WAV file of a stereo 16-bit sine.
fn wav(frames: usize) -> Vec<u8> {
    let mut pcm = Vec::new();
    for i in 0..frames {
        for c in 0..2 {
            let v = ((i as f64) * 0.01 * f64::from(c + 1)).sin() * 20_000.0;
            pcm.extend_from_slice(&(v as i16).to_le_bytes());
        }
    }
    let mut f = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
    f.extend(16u32.to_le_bytes());
    f.extend(1u16.to_le_bytes());
    f.extend(2u16.to_le_bytes());
    f.extend(48000u32.to_le_bytes());
    f.extend((48000u32 * 4).to_le_bytes());
    f.extend(4u16.to_le_bytes());
    f.extend(16u16.to_le_bytes());
    f.extend(b"data");
    f.extend((pcm.len() as u32).to_le_bytes());
    f.extend(&pcm);
    let size = (f.len() - 8) as u32;
    f[4..8].copy_from_slice(&size.to_le_bytes());
    f
}

/// A FITS file of a 16-bit `w` x `h` image whose low 4 bits are unused.
fn fits(w: usize, h: usize) -> Vec<u8> {
    let card = |s: &str| format!("{s:<80}");
    let mut header = card("SIMPLE  =                    T");
    header += &card("BITPIX  =                   16");
    header += &card("NAXIS   =                    2");
    header += &card(&format!("NAXIS1  = {w:>20}"));
    header += &card(&format!("NAXIS2  = {h:>20}"));
    header += &card("END");
    let mut f = header.into_bytes();
    f.resize(2880, b' ');
    for i in 0..w * h {
        f.extend((((i * 7 + i / w) % 2000) as u16 * 16).to_be_bytes());
    }
    f.resize(f.len().div_ceil(2880) * 2880, 0);
    f
}

fn cpath(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Sets a path's (not a symlink target's) atime and mtime.
fn set_time(p: &Path, secs: i64) {
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            cpath(p).as_ptr(),
            [t, t].as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(r, 0, "utimensat {}", p.display());
}

/// A small tree with every entry kind: directories (one empty), text,
/// duplicate, empty, setuid and foreign-owned files, hard links, relative,
/// absolute and dangling symlinks, devices (as root), a fifo, a socket, a
/// sparse file, and inputs for every categorizer (WAV, FITS, a jar, random
/// data).
fn make_tree(root: &Path) {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    for d in ["a/b", "empty"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    let words = "the quick brown fox jumps over the lazy dog\n".repeat(400);
    fs::write(root.join("a/text.txt"), &words).unwrap();
    fs::write(root.join("a/b/same.txt"), &words).unwrap();
    fs::write(root.join("empty-file"), b"").unwrap();
    fs::write(root.join("name with spaces ü"), b"unicode\n").unwrap();
    fs::write(root.join("tool"), b"#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(root.join("tool"), fs::Permissions::from_mode(0o4755)).unwrap();
    fs::write(root.join("a/hard"), b"one content, two names\n").unwrap();
    fs::hard_link(root.join("a/hard"), root.join("a/b/hard-too")).unwrap();
    std::os::unix::fs::symlink("a/text.txt", root.join("rel-link")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    fs::write(root.join("audio.wav"), wav(20_000)).unwrap();
    fs::write(root.join("image.fits"), fits(64, 48)).unwrap();
    fs::write(root.join("a/lib.jar"), zip_archive(700, 11)).unwrap();
    fs::write(
        root.join("random.bin"),
        noise(64 << 10, 0x9e37_79b9_7f4a_7c15),
    )
    .unwrap();
    let sparse = fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(1 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, b"data in the middle", 256 << 10).unwrap();
    drop(sparse);
    let fifo = cpath(&root.join("fifo"));
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    drop(std::os::unix::net::UnixListener::bind(root.join("socket")).unwrap());
    if is_root() {
        for (name, kind, dev) in [
            ("null-dev", libc::S_IFCHR, libc::makedev(1, 3)),
            ("loop-dev", libc::S_IFBLK, libc::makedev(7, 200)),
        ] {
            let p = cpath(&root.join(name));
            assert_eq!(unsafe { libc::mknod(p.as_ptr(), kind | 0o640, dev) }, 0);
        }
        let owned = cpath(&root.join("a/text.txt"));
        assert_eq!(unsafe { libc::lchown(owned.as_ptr(), 1000, 100) }, 0);
    }
    // Times last, children before their directories.
    let mut paths = vec![root.to_path_buf()];
    let mut i = 0;
    while i < paths.len() {
        if paths[i].is_dir() && !paths[i].is_symlink() {
            let mut children: Vec<PathBuf> = fs::read_dir(&paths[i])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            children.sort();
            paths.extend(children);
        }
        i += 1;
    }
    for (n, p) in paths.iter().enumerate().rev() {
        set_time(p, HOUR_BASE + 3600 * (n as i64 % 7));
    }
}

/// The source tree and what it should read back as, made once per test.
struct Source {
    _dir: tempfile::TempDir,
    root: PathBuf,
    manifest: String,
    header: PathBuf,
}

fn source() -> Source {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    make_tree(&root);
    let header = dir.path().join("header.sh");
    std::fs::write(
        &header,
        b"#!/bin/sh\necho 'a header before the image'\nexit 0\n",
    )
    .unwrap();
    let manifest = manifest_of(&root);
    Source {
        _dir: dir,
        root,
        manifest,
        header,
    }
}

// ---------------------------------------------------------------- the cases

/// One set of `mkdwarfs` options, given alike to `hoard create` and to
/// DwarFS's `mkdwarfs`.
struct Case {
    name: String,
    options: Vec<String>,
}

fn cases(src: &Source) -> Vec<Case> {
    let case = |name: String, options: &[&str]| Case {
        name,
        options: options.iter().map(|s| s.to_string()).collect(),
    };
    let mut v = Vec::new();
    for l in 0..=9 {
        v.push(case(format!("-l{l}"), &["-l", &l.to_string()]));
    }
    for codec in ["null", "lz4", "lz4hc", "zstd", "lzma", "brotli"] {
        v.push(case(format!("-C {codec}"), &["-l", "4", "-C", codec]));
    }
    v.push(case("--categorize".into(), &["--categorize"]));
    for pack in [
        "auto",
        "none",
        "all",
        "chunk_table",
        "directories",
        "shared_files",
        "names",
        "names_index",
        "symlinks",
        "symlinks_index",
        "force",
        "plain",
    ] {
        v.push(case(format!("-P {pack}"), &["-l", "1", "-P", pack]));
    }
    v.push(case(
        "--no-section-index".into(),
        &["-l", "1", "--no-section-index"],
    ));
    let header = src.header.to_str().unwrap();
    v.push(case("--header".into(), &["-l", "1", "--header", header]));
    v.push(case(
        "--time-resolution=min".into(),
        &["-l", "1", "--time-resolution=min"],
    ));
    v.push(case(
        "--no-sparse-files".into(),
        &["-l", "1", "--no-sparse-files"],
    ));
    v
}

/// Runs `job` on every item with a few threads; the failures, each named.
fn run_all<T: Sync>(
    items: &[T],
    name: impl Fn(&T) -> String + Sync,
    job: impl Fn(&T) -> Result<(), String> + Sync,
) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                if let Err(e) = job(item) {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("[{}] {e}", name(item)));
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

// ---------------------------------------------------------------- checks

/// Leaves out what `dwarfsextract` cannot restore: sockets (libarchive
/// makes them empty files) and the time of the output directory itself.
fn as_dwarfsextract_restores(manifest: &str, source: &str) -> String {
    let sockets: Vec<Value> = source
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "s")
        .map(|v| v["path"].clone())
        .collect();
    manifest
        .lines()
        .filter_map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if sockets.contains(&v["path"]) {
                return None;
            }
            if v["path"] == "." {
                let o = v.as_object_mut().unwrap();
                o.remove("mtime");
                o.remove("mtime_ns");
            }
            Some(v.to_string() + "\n")
        })
        .collect()
}

/// Unmounts a FUSE mount when dropped, whatever happened meanwhile.
/// The sha256 of every regular file of a manifest, by path.
fn file_hashes(manifest: &str) -> BTreeMap<String, String> {
    manifest
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "f")
        .map(|v| {
            (
                v["path"].as_str().unwrap().to_string(),
                v["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// DwarFS's tools read a hoard image as the source tree: `dwarfsck` in
/// every mode (printing the history, with `git_desc` and library versions),
/// `dwarfsextract`, and a `dwarfs` mount.
fn dwarfs_reads(
    image: &Path,
    src: &Source,
    work: &Path,
    history_entries: usize,
) -> Result<(), String> {
    let img = image.to_str().unwrap();
    for args in [
        &["-i", img][..],
        &["-d3", "-i", img],
        &["--check-integrity", "-i", img],
    ] {
        let mut c = tool("dwarfsck");
        c.args(args);
        let out = String::from_utf8_lossy(&ok(c, &format!("dwarfsck {args:?}"))?).into_owned();
        if !out.contains("History:") || !out.contains("libdwarfs hoard v") {
            return Err(format!("dwarfsck {args:?} shows no hoard history:\n{out}"));
        }
    }
    let mut c = tool("dwarfsck");
    c.args(["-j", "-i", img]);
    let json: Value =
        serde_json::from_slice(&ok(c, "dwarfsck -j")?).map_err(|e| format!("dwarfsck -j: {e}"))?;
    let history = json["history"].as_array().cloned().unwrap_or_default();
    if history.len() != history_entries {
        return Err(format!(
            "dwarfsck -j: {} history entries, want {history_entries}",
            history.len()
        ));
    }
    let last = &history[history.len() - 1];
    let desc = last["libdwarfs_version"]["git_desc"]
        .as_str()
        .unwrap_or_default();
    let libraries = last["library_versions"].as_array().map_or(0, Vec::len);
    if !desc.starts_with("hoard v") || libraries == 0 {
        return Err(format!("dwarfsck -j: last history entry {last}"));
    }
    let mut c = tool("dwarfsck");
    c.args(["--checksum=sha256", "-i", img]);
    let sums: BTreeMap<String, String> = String::from_utf8_lossy(&ok(c, "dwarfsck --checksum")?)
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(h, p)| (p.to_string(), h.to_string()))
        .collect();
    if sums != file_hashes(&src.manifest) {
        return Err(format!("dwarfsck --checksum=sha256 gives {sums:?}"));
    }
    let out = work.join("dwarfsextract");
    std::fs::create_dir(&out).unwrap();
    let mut c = tool("dwarfsextract");
    c.args(["-i", img, "-o", out.to_str().unwrap()]);
    ok(c, "dwarfsextract")?;
    let diff = manifest_diff(
        &as_dwarfsextract_restores(&src.manifest, &src.manifest),
        &as_dwarfsextract_restores(&manifest_of(&out), &src.manifest),
        Compare::Extracted,
    );
    if !diff.is_empty() {
        return Err(format!("dwarfsextract differs from the source:\n{diff}"));
    }
    let mnt = work.join("dwarfs-mnt");
    let mut c = tool("dwarfs");
    c.args([img, mnt.to_str().unwrap(), "-o", "ro,offset=auto"]);
    mounts_as_source(c, &mnt, src, "dwarfs mount")
}

/// hoard reads a DwarFS image as the source tree: `hoard extract` and
/// `hoard mount`.
fn hoard_reads(image: &Path, src: &Source, work: &Path) -> Result<(), String> {
    let img = image.to_str().unwrap();
    let out = work.join("hoard-extract");
    let mut c = hoard();
    c.args(["extract", img, "-o", out.to_str().unwrap()]);
    ok(c, "hoard extract")?;
    let diff = manifest_diff(&src.manifest, &manifest_of(&out), Compare::Extracted);
    if !diff.is_empty() {
        return Err(format!("hoard extract differs from the source:\n{diff}"));
    }
    let mnt = work.join("hoard-mnt");
    let mut c = hoard();
    c.args(["mount", img, mnt.to_str().unwrap(), "-o", "ro"]);
    mounts_as_source(c, &mnt, src, "hoard mount")
}

/// Runs `mount` (`what`) onto `mnt`, made here, and compares the mounted
/// tree with the source; unmounts.
fn mounts_as_source(mount: Command, mnt: &Path, src: &Source, what: &str) -> Result<(), String> {
    std::fs::create_dir(mnt).unwrap();
    ok(mount, what)?;
    let guard = FuseMount(mnt.to_path_buf());
    let diff = manifest_diff(&src.manifest, &manifest_of(mnt), Compare::Mounted);
    drop(guard);
    if !diff.is_empty() {
        return Err(format!("{what} differs from the source:\n{diff}"));
    }
    Ok(())
}

fn hoard_create(src: &Source, image: &Path, options: &[String]) -> Result<(), String> {
    let mut c = hoard();
    c.args([
        "create",
        "-i",
        src.root.to_str().unwrap(),
        "-o",
        image.to_str().unwrap(),
    ])
    .args(["--no-progress", "--with-devices", "--with-specials"])
    .args(options);
    ok(c, "hoard create").map(drop)
}

fn mkdwarfs(src: &Source, image: &Path, options: &[String]) -> Result<(), String> {
    let mut c = tool("mkdwarfs");
    c.args([
        "-i",
        src.root.to_str().unwrap(),
        "-o",
        image.to_str().unwrap(),
    ])
    .args([
        "--progress=none",
        "--log-level=warn",
        "--with-devices",
        "--with-specials",
    ])
    .args(options);
    ok(c, "mkdwarfs").map(drop)
}

/// The [`source`] tree, or `None` (the skip recorded) without DwarFS's
/// tools or FUSE.
fn ready_source() -> Option<Source> {
    (dwarfs_bin().is_some() && fuse_available()).then(source)
}

/// Runs `test` on every case (the source, the case and a temporary
/// directory of its own), and fails listing every case it failed on;
/// skipped without DwarFS's tools or FUSE.
fn on_every_case(test: impl Fn(&Source, &Case, &Path) -> Result<(), String> + Sync) {
    let Some(src) = ready_source() else {
        return;
    };
    let failures = run_all(
        &cases(&src),
        |c| c.name.clone(),
        |case| test(&src, case, tempfile::tempdir().unwrap().path()),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn dwarfs_tools_read_every_image_hoard_writes() {
    on_every_case(|src, case, work| {
        let image = work.join("hoard.dwarfs");
        hoard_create(src, &image, &case.options)?;
        dwarfs_reads(&image, src, work, 1)
    });
}

#[test]
fn hoard_reads_every_image_mkdwarfs_writes() {
    on_every_case(|src, case, work| {
        let image = work.join("dwarfs.dwarfs");
        mkdwarfs(src, &image, &case.options)?;
        hoard_reads(&image, src, work)
    });
}

/// `hoard rewrite` appends its entry to the history, of a hoard image and
/// of a DwarFS one, and DwarFS's tools read the result.
#[test]
fn dwarfs_tools_read_rewritten_images() {
    let Some(src) = ready_source() else {
        return;
    };
    let rewrites: [(&str, &[&str]); 3] = [
        ("hoard image, -C lzma", &["-C", "lzma"]),
        ("hoard image, --categorize, -l9", &["-l", "9"]),
        ("mkdwarfs image, -C brotli", &["-C", "brotli"]),
    ];
    let failures = run_all(
        &rewrites,
        |r| r.0.to_string(),
        |(name, options)| {
            let work = tempfile::tempdir().unwrap();
            let first = work.path().join("first.dwarfs");
            let options: Vec<String> = options.iter().map(|s| s.to_string()).collect();
            if name.starts_with("mkdwarfs") {
                mkdwarfs(&src, &first, &["-l".into(), "1".into()])?;
            } else {
                let create: &[&str] = if name.contains("categorize") {
                    &["--categorize"]
                } else {
                    &["-l", "1"]
                };
                hoard_create(
                    &src,
                    &first,
                    &create.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                )?;
            }
            let image = work.path().join("rewritten.dwarfs");
            let mut c = hoard();
            c.args([
                "rewrite",
                first.to_str().unwrap(),
                "-o",
                image.to_str().unwrap(),
                "--no-progress",
            ])
            .args(&options);
            ok(c, "hoard rewrite")?;
            dwarfs_reads(&image, &src, work.path(), 2)
        },
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The figures of `dwarfsck -j -d3` that `hoard info --json` must repeat,
/// as (what, DwarFS's value, hoard's value).
fn info_pairs(d: &Value, h: &Value) -> Vec<(String, Value, Value)> {
    let mut pairs: Vec<(String, Value, Value)> = [
        ("block_count", "blocks"),
        ("block_size", "block_size"),
        ("inode_count", "/inodes/total"),
        ("original_filesystem_size", "original_file_bytes"),
        (
            "original_allocated_filesystem_size",
            "original_allocated_file_bytes",
        ),
        ("compressed_block_size", "compressed_block_bytes"),
        ("uncompressed_block_size", "uncompressed_block_bytes"),
        ("compressed_metadata_size", "compressed_metadata_bytes"),
        ("uncompressed_metadata_size", "uncompressed_metadata_bytes"),
        ("options", "options"),
        ("created_by", "created_by"),
        ("preferred_path_separator", "preferred_path_separator"),
    ]
    .into_iter()
    .map(|(dk, hk)| {
        let hv = if hk.starts_with('/') {
            h.pointer(hk)
        } else {
            h.get(hk)
        };
        (
            dk.to_string(),
            d.get(dk).cloned().unwrap_or(Value::Null),
            hv.cloned().unwrap_or(Value::Null),
        )
    })
    .collect();
    let features = d
        .get("features")
        .cloned()
        .unwrap_or_else(|| serde_json::json!([]));
    pairs.push(("features".into(), features, h["features"].clone()));
    let resolution = match h["subsecond_nsec_multiplier"].as_f64() {
        Some(ns) => ns * 1e-9,
        None => h["time_resolution_sec"].as_f64().unwrap(),
    };
    pairs.push((
        "time_resolution".into(),
        d["time_resolution"].as_f64().into(),
        resolution.into(),
    ));
    let categories: serde_json::Map<String, Value> = h["blocks_by_category"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, s)| {
            let v = serde_json::json!({
                "block_count": s["count"],
                "compressed_size": s["compressed_bytes"],
                "uncompressed_size": s["uncompressed_bytes"],
            });
            (name.clone(), v)
        })
        .collect();
    pairs.push((
        "categories".into(),
        d.get("categories").cloned().unwrap_or(Value::Null),
        (!categories.is_empty()).then_some(categories).into(),
    ));
    let mut tables = h["metadata_tables"].clone();
    tables.as_object_mut().unwrap().retain(|_, v| !v.is_null());
    let mut meta = d["meta"].clone();
    meta.as_object_mut().unwrap().remove("entry_table_v2_2");
    pairs.push(("meta".into(), meta, tables));
    let history = |v: &Value| -> Vec<Value> { v.as_array().cloned().unwrap_or_default() };
    let ours: Vec<Value> = history(&h["history"])
        .iter()
        .map(|e| {
            let mut version = e["tool_version"].clone();
            version.as_object_mut().unwrap().retain(|_, v| !v.is_null());
            serde_json::json!({
                "arguments": e["arguments"],
                "compiler_id": e["compiler"],
                "libdwarfs_version": version,
                "library_versions": e["libraries"].as_array().map(|l| vec![l.clone()]),
                "system_id": e["system"],
                "timestamp": e["timestamp"],
            })
        })
        .collect();
    let theirs: Vec<Value> = history(&d["history"])
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let epoch = e["timestamp"]["epoch"].clone();
            e["timestamp"] = epoch;
            e
        })
        .collect();
    pairs.push(("history".into(), theirs.into(), ours.into()));
    pairs
}

/// `hoard info --json` gives the numbers `dwarfsck -j -d3` gives: block,
/// category, metadata and table sizes, options, history; on hoard images
/// and on DwarFS's.
#[test]
fn hoard_info_gives_the_numbers_dwarfsck_gives() {
    let Some(src) = ready_source() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for (name, options) in [
        ("hoard-categorize", &["--categorize"][..]),
        ("hoard-pack-all", &["-l", "3", "-P", "all"]),
    ] {
        let image = work.path().join(format!("{name}.dwarfs"));
        hoard_create(
            &src,
            &image,
            &options.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        images.push(image);
    }
    let upstream = shared().unwrap().join("dwarfs-images/upstream");
    images.extend(
        ["categorize", "pack-all", "subsecond", "l9-lzma"]
            .map(|n| upstream.join(format!("{n}.dwarfs"))),
    );
    let mut failures = Vec::new();
    for image in &images {
        let img = image.to_str().unwrap();
        let mut c = tool("dwarfsck");
        c.args(["-j", "-d3", "-i", img]);
        let d: Value = serde_json::from_slice(&ok(c, "dwarfsck -j -d3").unwrap()).unwrap();
        let h: Value = serde_json::from_slice(&run(&["info", "--json", img]).stdout).unwrap();
        for (what, theirs, ours) in info_pairs(&d, &h) {
            if theirs != ours {
                failures.push(format!("{img}: {what}: dwarfsck {theirs}, hoard {ours}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The history time is `SOURCE_DATE_EPOCH` when set, for `create` and
/// `rewrite` alike, and left out with `--no-history-timestamps`; `dwarfsck`
/// shows what was stored.
#[test]
fn history_timestamps_follow_source_date_epoch_and_can_be_left_out() {
    let Some(src) = ready_source() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let path = |name: &str| work.path().join(name).to_str().unwrap().to_string();
    let (stamped, bare, rewritten) = (path("stamped"), path("bare"), path("rewritten"));
    let root = src.root.to_str().unwrap();
    for (image, extra) in [(&stamped, None), (&bare, Some("--no-history-timestamps"))] {
        let mut c = hoard();
        c.args([
            "create",
            "-i",
            root,
            "-o",
            image,
            "-l",
            "1",
            "--no-progress",
        ])
        .args(extra)
        .env("SOURCE_DATE_EPOCH", "1700000000");
        ok(c, "hoard create").unwrap();
    }
    let mut c = hoard();
    c.args(["rewrite", &stamped, "-o", &rewritten, "--no-progress"])
        .env("SOURCE_DATE_EPOCH", "1700003600");
    ok(c, "hoard rewrite").unwrap();
    let times = |image: &str| -> Vec<Value> {
        let mut c = tool("dwarfsck");
        c.args(["-j", "-i", image]);
        let json: Value = serde_json::from_slice(&ok(c, "dwarfsck -j").unwrap()).unwrap();
        json["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["timestamp"]["epoch"].clone())
            .collect()
    };
    assert_eq!(times(&stamped), [Value::from(1_700_000_000)]);
    assert_eq!(times(&bare), [Value::Null]);
    assert_eq!(
        times(&rewritten),
        [Value::from(1_700_000_000), Value::from(1_700_003_600)]
    );
}
