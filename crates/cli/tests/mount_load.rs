//! `hoard mount` under load and its extras: 16 concurrent readers with
//! mixed read sizes get exactly the manifest's contents while the driver's
//! memory stays bounded; sparse files answer SEEK_DATA/SEEK_HOLE; perfmon
//! reports latencies; lean and full listings show the tree; walks repeat
//! from the kernel's caches and writes are refused.

mod common;

use common::*;
use hoard_testdata::Rng;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A mount in a directory of its own, both undone on drop.
struct Mount {
    // Declared first, dropped first: unmounted, then removed.
    _mounted: FuseMount,
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Mount {
    fn new(image: &Path, options: &str) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mnt");
        let _mounted = mount_ok(&[s(image)], &path, &["-o", options]);
        Mount {
            _mounted,
            _dir: dir,
            path,
        }
    }

    fn driver_pid(&self) -> u32 {
        let pid = xattr(&self.path, "user.dwarfs.driver.pid").unwrap();
        String::from_utf8(pid).unwrap().parse().unwrap()
    }
}

/// Reads extended attribute `name` of `path`.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = std::ffi::CString::new(path.to_str()?).ok()?;
    let n = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (len >= 0).then(|| {
        buf.truncate(len as usize);
        buf
    })
}

fn vm_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

/// Reads all of `f` (of `size` bytes) in random pieces: sizes from 1 byte
/// to 1 MiB, at shuffled offsets.
fn read_in_pieces(f: &mut std::fs::File, size: u64, rng: &mut Rng) -> Vec<u8> {
    let mut out = vec![0u8; size as usize];
    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < size {
        let len = [1u64, 7, 512, 4096, 65536, 1 << 20][rng.below(6) as usize].min(size - pos);
        pieces.push((pos, len));
        pos += len;
    }
    for i in (1..pieces.len()).rev() {
        pieces.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (pos, len) in pieces {
        f.seek(SeekFrom::Start(pos)).unwrap();
        f.read_exact(&mut out[pos as usize..(pos + len) as usize])
            .unwrap();
    }
    out
}

/// Packs `tree` into `image` at level 1 (lz4, 1 MiB blocks).
fn pack(tree: &Path, image: &Path) -> PathBuf {
    create_image(tree, image, &["-l", "1"])
}

/// Pseudo-random bytes, some of them repeated, so blocks compress a little.
fn contents(i: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(i.wrapping_mul(0x1234_5678_9abc_def1) | 1);
    (0..len)
        .map(|j| {
            if j % 64 < 16 {
                b'x'
            } else {
                rng.below(256) as u8
            }
        })
        .collect()
}

#[test]
fn sixteen_readers_get_every_byte_within_bounded_memory() {
    // 48 MiB in 1 MiB blocks, read through a 8 MiB cache.
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let tree = dir.path().join("tree");
    let mut files = Vec::new();
    for i in 0..1200u64 {
        let len = if i % 8 == 0 {
            300_000
        } else {
            1 + (i as usize * 7919) % 9000
        };
        let data = contents(i, len);
        let path = format!("d{}/f{i}", i % 13);
        std::fs::create_dir_all(tree.join(format!("d{}", i % 13))).unwrap();
        std::fs::write(tree.join(&path), &data).unwrap();
        files.push((path, len as u64, format!("{:x}", Sha256::digest(&data))));
    }
    let image = pack(&tree, &dir.path().join("load.dwarfs"));
    let cache_mib = 8;
    let mount = Mount::new(&image, &format!("cachesize={cache_mib}m,workers=4"));
    let pid = mount.driver_pid();
    // Anonymous memory only: pages of the mapped image file are page
    // cache, which the kernel reclaims at will.
    let done = std::sync::atomic::AtomicBool::new(false);
    let (failures, peak_kib) = std::thread::scope(|s| {
        let monitor = s.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(vm_kib(pid, "RssAnon:"));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak
        });
        let handles: Vec<_> = (0..16u64)
            .map(|t| {
                let (files, root) = (&files, &mount.path);
                s.spawn(move || {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                    let mut order: Vec<usize> = (0..files.len()).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    let mut bad = Vec::new();
                    for i in order {
                        let (path, size, sha) = &files[i];
                        let mut f = std::fs::File::open(root.join(path)).unwrap();
                        let data = read_in_pieces(&mut f, *size, &mut rng);
                        if format!("{:x}", Sha256::digest(&data)) != *sha {
                            bad.push(format!("reader {t}: {path}: wrong contents"));
                        }
                    }
                    bad
                })
            })
            .collect();
        let failures: Vec<String> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (failures, monitor.join().unwrap())
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cache holds at most `cachesize`; the rest is the decoded
    // metadata, thread stacks, read buffers and blocks being decompressed.
    let peak_mib = peak_kib / 1024;
    let bound = cache_mib + 24;
    eprintln!("driver peak anonymous RSS: {peak_mib} MiB (bound {bound} MiB)");
    assert!(
        peak_mib <= bound,
        "driver peak RSS {peak_mib} MiB > {bound} MiB"
    );
}

#[test]
fn sparse_files_answer_seek_data_and_seek_hole() {
    if !fuse_available() {
        return;
    }
    let image = image("upstream", "default.dwarfs").unwrap();
    let mount = Mount::new(&image, "ro");
    let f = std::fs::File::open(mount.path.join("misc/sparse")).unwrap();
    let seek = |offset: i64, whence: i32| unsafe { libc::lseek(f.as_raw_fd(), offset, whence) };
    // 32 MiB hole, 4 KiB data, hole, 4 KiB data at the end (64 MiB).
    assert_eq!(seek(0, libc::SEEK_DATA), 32 << 20);
    assert_eq!(seek(0, libc::SEEK_HOLE), 0);
    assert_eq!(seek(32 << 20, libc::SEEK_HOLE), (32 << 20) + 4096);
    assert_eq!(seek((32 << 20) + 4096, libc::SEEK_DATA), (64 << 20) - 4096);
    assert_eq!(seek((64 << 20) - 4096, libc::SEEK_HOLE), 64 << 20);
    assert_eq!(seek(64 << 20, libc::SEEK_DATA), -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENXIO)
    );
}

#[test]
fn perfmon_reports_latencies() {
    let Some((_dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let Some(image) = image("upstream", "default.dwarfs") else {
        return;
    };
    // In the foreground, to see the report printed at unmount.
    let child = hoard()
        .args(["mount", "-f", "-o", "perfmon=fuse+reader"])
        .arg(&image)
        .arg(&mnt)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A failed assertion unmounts, so the driver ends too.
    let _mounted = FuseMount(mnt.clone());
    for _ in 0..500 {
        if xattr(&mnt, "user.dwarfs.driver.pid").is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The report's size is asked for (as getfattr does) before the files
    // are read; the report then grows (read requests), and still fits.
    let path = std::ffi::CString::new(s(&mnt)).unwrap();
    let name = std::ffi::CString::new("user.dwarfs.perfmon").unwrap();
    // SAFETY: NUL-terminated strings; a size query writes nothing.
    let size = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    assert!(size > 0, "{}", std::io::Error::last_os_error());
    let mut sizes = HashMap::new();
    for e in std::fs::read_dir(mnt.join("misc")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            sizes.insert(p.clone(), std::fs::read(&p).unwrap().len());
        }
    }
    assert!(!sizes.is_empty());
    let mut live = vec![0u8; size as usize];
    // SAFETY: `live` has room for the `size` bytes the call may write.
    let got = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            live.as_mut_ptr().cast(),
            live.len(),
        )
    };
    assert!(got > 0, "{}", std::io::Error::last_os_error());
    live.truncate(got as usize);
    let live = String::from_utf8(live).unwrap();
    assert!(
        live.contains("fuse.lookup") && live.contains("reader.read"),
        "{live}"
    );
    hoard_ok(&["umount", s(&mnt)]);
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        report.contains("p99") && report.contains("fuse.read"),
        "{report}"
    );
}

#[test]
fn tidying_releases_unused_blocks() {
    let Some((dir, tree)) = fuse_tempdir_with("tree") else {
        return;
    };
    for i in 0..24u64 {
        std::fs::write(tree.join(format!("f{i}")), contents(i, 1 << 20)).unwrap();
    }
    let image = pack(&tree, &dir.path().join("tidy.dwarfs"));
    let mount = Mount::new(
        &image,
        "cachesize=64m,tidy_strategy=time,tidy_interval=100ms,tidy_max_age=200ms",
    );
    let pid = mount.driver_pid();
    let before = vm_kib(pid, "RssAnon:");
    for i in 0..24u64 {
        std::fs::read(mount.path.join(format!("f{i}"))).unwrap();
    }
    // The 24 one-MiB blocks read stay in the 64 MiB cache unless tidying
    // drops them (unused for 200 ms; it runs every 100 ms). Wait for the
    // driver's memory to fall back (bounded), not for a time: on a loaded
    // machine tidying may drop blocks while the reads go on, or get its
    // turn only long after them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let tidied = loop {
        let now = vm_kib(pid, "RssAnon:");
        if now < before + (8 << 10) || std::time::Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        tidied < before + (8 << 10),
        "driver anonymous RSS {before} KiB before reading 24 MiB, still {tidied} KiB a minute after"
    );
}

#[test]
fn an_image_inside_a_larger_file_mounts_with_offset_and_imagesize() {
    if !fuse_available() {
        return;
    }
    let Some(original) = image("compat", "compat-v0.9.10.dwarfs") else {
        return;
    };
    let manifest = std::fs::read_to_string(original.with_extension("manifest")).unwrap();
    let image = std::fs::read(&original).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = dir.path().join("bundle.bin");
    let mut bytes = vec![0x55u8; 4096];
    bytes.extend_from_slice(&image);
    bytes.extend_from_slice(&[0xaa; 10_000]);
    std::fs::write(&embedded, &bytes).unwrap();
    let mount = Mount::new(&embedded, &format!("offset=4096,imagesize={}", image.len()));
    assert_same_manifest(&manifest, &manifest_of(&mount.path), Compare::Mounted);
}

/// The request counts of the `fuse.*` operations named in `ops`, in a
/// perfmon report.
fn fuse_request_counts(report: &str, ops: &[&str]) -> Vec<(String, u64)> {
    report
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let op = words.next()?;
            let count = words.next()?.parse().ok()?;
            ops.contains(&op).then(|| (op.to_string(), count))
        })
        .collect()
}

/// Every entry of a mounted tree held so that the kernel cannot drop it:
/// an `O_PATH` descriptor for each (its dentry and inode stay in memory)
/// and each regular file's pages mapped and locked in the page cache.
struct Pinned {
    _fds: Vec<std::fs::File>,
    maps: Vec<(*mut libc::c_void, usize)>,
}

impl Pinned {
    fn tree(root: &Path, manifest: &str) -> Pinned {
        use std::os::unix::fs::OpenOptionsExt;
        let mut pinned = Pinned {
            _fds: Vec::new(),
            maps: Vec::new(),
        };
        for line in manifest.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let path = root.join(v["path"].as_str().expect("UTF-8 paths"));
            let fd = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
                .open(&path)
                .unwrap();
            pinned._fds.push(fd);
            let size = v["size"].as_u64().unwrap() as usize;
            if v["type"] == "f" && size > 0 {
                let file = std::fs::File::open(&path).unwrap();
                // SAFETY: a fresh read-only shared mapping of a whole file,
                // unmapped in `drop` and never dereferenced here.
                let addr = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        size,
                        libc::PROT_READ,
                        libc::MAP_SHARED,
                        file.as_raw_fd(),
                        0,
                    )
                };
                assert_ne!(addr, libc::MAP_FAILED, "mmap {}", path.display());
                // SAFETY: `addr..addr + size` is the mapping made above.
                let locked = unsafe { libc::mlock(addr, size) };
                assert_eq!(locked, 0, "mlock {}", path.display());
                pinned.maps.push((addr, size));
            }
        }
        pinned
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for &(addr, size) in &self.maps {
            // SAFETY: each mapping was made by `Pinned::tree` and is
            // unmapped once.
            unsafe { libc::munmap(addr, size) };
        }
    }
}

/// Names and kinds under `dir`, walked without a stat: what `find` asks.
fn names_and_kinds(dir: &Path, prefix: &str, out: &mut Vec<(String, bool)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let is_dir = e.file_type().unwrap().is_dir();
        let name = format!("{prefix}{}", e.file_name().to_str().unwrap());
        if is_dir {
            names_and_kinds(&e.path(), &format!("{name}/"), out);
        }
        out.push((name, is_dir));
    }
}

#[test]
fn lean_and_full_listings_show_the_tree_and_a_names_walk_looks_up_no_file() {
    // Directories listed in full at first (few files, or many
    // subdirectories) and lean ones (many files): a walk for names alone
    // sees every entry and makes no lookup of a file; stat after it sees
    // every attribute.
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let tree = dir.path().join("tree");
    for d in ["small/a", "small/b", "many", "dirs"] {
        std::fs::create_dir_all(tree.join(d)).unwrap();
    }
    std::fs::write(tree.join("small/x"), b"x").unwrap();
    std::os::unix::fs::symlink("x", tree.join("small/link")).unwrap();
    std::fs::write(tree.join("small/a/y"), b"yy").unwrap();
    for i in 0..200u64 {
        std::fs::write(tree.join(format!("many/f{i:03}")), contents(i, 10)).unwrap();
    }
    for i in 0..40 {
        std::fs::create_dir(tree.join(format!("dirs/d{i:02}"))).unwrap();
    }
    let image = create_image(
        &tree,
        &dir.path().join("listings.dwarfs"),
        &["-l", "1", "--time-resolution", "ns"],
    );
    let m = Mount::new(&image, "perfmon=fuse");
    let (mut want, mut got) = (Vec::new(), Vec::new());
    names_and_kinds(&tree, "", &mut want);
    names_and_kinds(&m.path, "", &mut got);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let report = String::from_utf8(xattr(&m.path, "user.dwarfs.perfmon").unwrap()).unwrap();
    // The first listings of `small`, `dirs` and the root carried their
    // subdirectories' attributes: walking into most of them took no lookup
    // (a lean listing would need one per subdirectory, 45 here; how many
    // entries one listing reply holds is the kernel's choice).
    let dirs = want.iter().filter(|(_, is_dir)| *is_dir).count() as u64;
    let lookups = fuse_request_counts(&report, &["fuse.lookup"]);
    assert!(
        lookups.iter().all(|&(_, n)| n < dirs / 2),
        "lookups of {dirs} directories: {report}"
    );
    assert_same_manifest(&manifest_of(&tree), &manifest_of(&m.path), Compare::Mounted);
}

#[test]
fn repeated_walks_are_served_by_the_kernel_and_writes_refused() {
    if !fuse_available() {
        return;
    }
    let image = image("upstream", "default.dwarfs").unwrap();
    let expected = std::fs::read_to_string(image.with_extension("manifest")).unwrap();
    let m = Mount::new(&image, "perfmon=fuse");
    let first = manifest_of(&m.path);
    assert_same_manifest(&expected, &first, Compare::Mounted);
    let missing = m.path.join("audio/no-such-file");
    let not_found = |p: &Path| std::fs::metadata(p).unwrap_err().kind();
    assert_eq!(not_found(&missing), std::io::ErrorKind::NotFound);
    assert_eq!(not_found(&missing), std::io::ErrorKind::NotFound);
    // With every entry and page held in memory (so that memory pressure
    // cannot make the kernel forget them), walking and reading the tree
    // again (stat, open, read) sends the driver no lookup, attribute,
    // open or read request: the driver lets the kernel keep all of them.
    // Listings and symlink targets are kept too, but in caches a test
    // cannot pin, so they are not counted.
    let _pinned = Pinned::tree(&m.path, &first);
    let ops = ["fuse.lookup", "fuse.getattr", "fuse.open", "fuse.read"];
    let report = || String::from_utf8(xattr(&m.path, "user.dwarfs.perfmon").unwrap()).unwrap();
    let before = fuse_request_counts(&report(), &ops);
    assert!(
        before.iter().any(|(op, n)| op == "fuse.read" && *n > 0),
        "{}",
        report()
    );
    assert_eq!(manifest_of(&m.path), first);
    assert_eq!(fuse_request_counts(&report(), &ops), before, "{}", report());

    let file = first
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "f")
        .map(|v| m.path.join(v["path"].as_str().unwrap()))
        .expect("a regular file");
    let erofs = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    let write_open = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .map(drop);
    assert_eq!(erofs(write_open), Some(libc::EROFS));
    assert_eq!(
        erofs(std::fs::write(m.path.join("new"), b"x")),
        Some(libc::EROFS)
    );
    assert_eq!(
        erofs(std::fs::create_dir(m.path.join("newdir"))),
        Some(libc::EROFS)
    );
    assert_eq!(erofs(std::fs::remove_file(&file)), Some(libc::EROFS));
}
