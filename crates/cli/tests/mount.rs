//! `hoard mount`: every good image, mounted with FUSE, shows exactly the tree
//! of its manifest; bad images and bad mount points fail before detaching.
//! The cold-start options: `analysis_file` lists the files opened, in
//! first-open order; `preload_all` and `preload_category` fill the cache
//! in block order up to its size, while the mount serves reads.

mod common;

use common::*;
use hoard_fuse::options::Preload;
use hoard_fuse::preload::{blocks_to_preload, preload, Ended};
use hoard_reader::{Filesystem, FsOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Unmounts on drop, so a failing assertion leaves no mount behind.
struct MountGuard<'a>(&'a Path);

impl Drop for MountGuard<'_> {
    fn drop(&mut self) {
        let _ = run(&["umount", self.0.to_str().unwrap()]);
    }
}

fn mount_and_compare(group: &str) {
    if !fuse_available() {
        return;
    }
    on_every_image(group, |image, expected| {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = run(&["mount", s(image), s(&mnt)]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return vec![format!("mount failed: {err}")];
        }
        let guard = MountGuard(&mnt);
        let diff = manifest_diff(expected, &manifest_of(&mnt), Compare::Mounted);
        drop(guard);
        let left = std::fs::read_dir(&mnt).unwrap().count();
        assert_eq!(left, 0, "{}: still mounted after umount", image.display());
        match diff.is_empty() {
            true => vec![],
            false => vec![format!("mounted tree differs from manifest:\n{diff}")],
        }
    });
}

#[test]
fn compat_images_mount_exactly() {
    mount_and_compare("compat");
}

#[test]
fn upstream_images_mount_exactly() {
    mount_and_compare("upstream");
}

#[test]
fn misc_images_mount_exactly() {
    mount_and_compare("misc");
}

#[test]
fn bad_image_fails_before_detaching() {
    let Some((dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let image = image("misc", "future-features.dwarfs").unwrap();
    let err = one_line_error(&["mount", s(&image), s(&mnt)]);
    assert!(err.contains("this-feature-will-never-exist"), "{err}");
    let missing = dir.path().join("missing");
    let image = common::image("compat", "compat-v0.9.10.dwarfs").unwrap();
    let err = hoard_fails(&["mount", s(&image), s(&missing)]);
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn busy_mount_point_is_refused() {
    let Some((_dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let image = image("compat", "compat-v0.9.10.dwarfs").unwrap();
    hoard_ok(&["mount", image.to_str().unwrap(), mnt.to_str().unwrap()]);
    let _guard = MountGuard(&mnt);
    let err = hoard_fails(&["mount", s(&image), s(&mnt)]);
    assert!(err.contains("already a mount point"), "{err}");
}

/// A tree of 12 text files and 12 noise files of 40 KiB, packed in 64 KiB
/// blocks with `--categorize=incompressible` (the noise in blocks of its
/// own): the tree and the image.
fn mixed_image(dir: &Path) -> (PathBuf, PathBuf) {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("noise")).unwrap();
    std::fs::create_dir_all(tree.join("text")).unwrap();
    for i in 0..12u32 {
        std::fs::write(
            tree.join(format!("noise/n{i:02}")),
            noise(40 << 10, i.into()),
        )
        .unwrap();
        let text = hoard_testdata::text_like(40 << 10, i | 1, b"judge my vow ", (300, 512), 64);
        std::fs::write(tree.join(format!("text/t{i:02}")), text).unwrap();
    }
    // The audio categorizer's window does not fit 64 KiB blocks.
    let options = [
        "-S",
        "16",
        "--categorize=incompressible",
        "-W",
        "pcmaudio/waveform::12",
    ];
    let image = create_image(&tree, &dir.join("mixed.dwarfs"), &options);
    (tree, image)
}

/// The blocks of `fs` decompressed whole in its cache.
fn cached_blocks(fs: &Filesystem) -> Vec<u32> {
    (0..fs.block_count() as u32)
        .filter(|&b| fs.cache().progress(b).is_some_and(|p| p.complete))
        .collect()
}

#[test]
fn preload_fills_the_cache_in_block_order_up_to_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let (_, image) = mixed_image(dir.path());
    let open = |cache_size| {
        let options = FsOptions {
            cache_size,
            ..FsOptions::default()
        };
        Filesystem::open(&image, &options).unwrap()
    };
    let go_on = AtomicBool::new(false);

    // Room for a few blocks: a first run of them, nothing evicted.
    let fs = open(200 << 10);
    let all = blocks_to_preload(&fs, &Preload::All);
    assert_eq!(all, (0..fs.block_count() as u32).collect::<Vec<_>>());
    assert_eq!(preload(&fs, &all, &go_on), Ended::CacheFull);
    let cached = cached_blocks(&fs);
    assert!(!cached.is_empty() && cached.len() < all.len(), "{cached:?}");
    assert_eq!(cached, all[..cached.len()]);
    let room = fs.cache().capacity() - fs.cache().bytes();
    assert!(fs.decoded_size(all[cached.len()]) > room as u64);

    // Room for all.
    let fs = open(64 << 20);
    assert_eq!(preload(&fs, &all, &go_on), Ended::Done);
    assert_eq!(cached_blocks(&fs), all);

    // One category: its blocks, and only them.
    let category = Preload::Category("incompressible".into());
    let fs = open(64 << 20);
    let noise = blocks_to_preload(&fs, &category);
    assert!(!noise.is_empty() && noise.len() < all.len(), "{noise:?}");
    for b in &all {
        let is_noise = fs.block_category(*b) == Some("incompressible");
        assert_eq!(noise.contains(b), is_noise, "block {b}");
    }
    assert_eq!(preload(&fs, &noise, &go_on), Ended::Done);
    assert_eq!(cached_blocks(&fs), noise);
    assert!(blocks_to_preload(&fs, &Preload::Category("hotness".into())).is_empty());

    // Stopped before it starts: nothing.
    let fs = open(64 << 20);
    assert_eq!(preload(&fs, &all, &AtomicBool::new(true)), Ended::Stopped);
    assert_eq!(fs.cache().bytes(), 0);
}

#[test]
fn a_preloading_mount_serves_reads_at_once_byte_for_byte() {
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let (tree, image) = mixed_image(dir.path());
    for (i, options) in [
        "preload_all,cachesize=256k",
        "preload_all",
        "preload_category=incompressible,cachesize=1m",
    ]
    .into_iter()
    .enumerate()
    {
        let mnt = dir.path().join(format!("mnt{i}"));
        let _mounted = mount_ok(&[s(&image)], &mnt, &["-o", options]);
        // Read as soon as the mount is there, the preload likely running:
        // the last blocks first.
        for name in ["noise/n11", "text/t11", "noise/n00"] {
            let read = std::fs::read(mnt.join(name)).unwrap();
            assert!(
                read == std::fs::read(tree.join(name)).unwrap(),
                "{options}: {name}"
            );
        }
        assert_same_tree(&tree, &mnt, "mtime_ns");
    }
}

#[test]
fn preloading_a_category_no_block_has_warns_and_mounts() {
    let Some((_dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let image = image("compat", "compat-v0.9.10.dwarfs").unwrap();
    let out = run(&[
        "mount",
        s(&image),
        s(&mnt),
        "-o",
        "preload_category=hotness",
    ]);
    let _mounted = FuseMount(mnt.clone());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("preload_category=hotness") && err.contains("no block categories"),
        "{err}"
    );
    assert!(std::fs::read_dir(&mnt).unwrap().count() > 0);
}

#[test]
fn analysis_file_lists_the_files_opened_in_first_open_order() {
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    for name in ["top", "a/one", "a/unread", "a/b/two", "a/b/three"] {
        std::fs::write(tree.join(name), name).unwrap();
    }
    std::fs::hard_link(tree.join("top"), tree.join("a/hard")).unwrap();
    let image = create_image(&tree, &dir.path().join("t.dwarfs"), &[]);
    let profile = dir.path().join("profile.txt");
    let mnt = dir.path().join("mnt");
    let option = format!("analysis_file={}", s(&profile));
    let mounted = mount_ok(&[s(&image)], &mnt, &["-o", &option]);
    // Looked at but not opened: not listed. Listed with attributes, then
    // opened: listed.
    std::fs::metadata(mnt.join("a/unread")).unwrap();
    for entry in std::fs::read_dir(mnt.join("a/b")).unwrap() {
        entry.unwrap().metadata().unwrap();
    }
    for name in [
        "a/b/two",
        "top",
        "a/one",
        "a/b/two",
        "a/hard",
        "a/b/three",
        "top",
    ] {
        let read = std::fs::read(mnt.join(name)).unwrap();
        assert_eq!(read, std::fs::read(tree.join(name)).unwrap(), "{name}");
    }
    let expected = "a/b/two\ntop\na/one\na/b/three\n";
    // Written as the files are opened, and the same once unmounted.
    assert_eq!(std::fs::read_to_string(&profile).unwrap(), expected);
    drop(mounted);
    assert_eq!(std::fs::read_to_string(&profile).unwrap(), expected);

    let err = one_line_error(&[
        "mount",
        s(&image),
        s(&mnt),
        "-o",
        &format!("analysis_file={}", s(&dir.path().join("no/such/dir"))),
    ]);
    assert!(
        err.contains("analysis_file") && err.contains("no/such/dir"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0, "not mounted");
}

/// `hoard-mount`, the driver alone: `hoard-mount IMAGE MNT -o OPTIONS`.
fn hoard_mount() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_hoard-mount"))
}

#[test]
fn hoard_mount_serves_the_tree_and_unmounts_on_a_signal() {
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let (tree, image) = mixed_image(dir.path());
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();

    // Detached, preloading: ready when it returns.
    let out = hoard_mount()
        .args([s(&image), s(&mnt), "-o", "preload_all,cachesize=1m"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mounted = FuseMount(mnt.clone());
    assert_same_tree(&tree, &mnt, "mtime_ns");
    // The same errors as `hoard mount`, on one line.
    let free = dir.path().join("free");
    std::fs::create_dir(&free).unwrap();
    for (args, expected) in [
        (vec![s(&image), s(&mnt)], "already a mount point"),
        (vec![s(&tree), s(&free)], "is a directory"),
        (
            vec![s(&image), s(&mnt), "-o", "trust=k"],
            "unknown mount option",
        ),
        (vec![s(&image)], "needs an image and a mount point"),
    ] {
        let out = hoard_mount().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // Keys it cannot apply are refused, not ignored.
    for var in ["HOARD_TRUST", "HOARD_IDENTITY"] {
        let out = hoard_mount()
            .args([s(&image), s(&free)])
            .env(var, "key")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{var}: {err}");
        assert!(
            err.contains(var) && err.lines().count() == 1,
            "{var}: {err}"
        );
    }
    assert!(mounts_under(&free).is_empty());
    drop(mounted);
    assert!(mounts_under(&mnt).is_empty());

    // In the foreground: SIGTERM unmounts, and it exits 0.
    let mnt = dir.path().join("mnt2");
    std::fs::create_dir(&mnt).unwrap();
    let mut child = hoard_mount()
        .args([s(&image), s(&mnt), "-f"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the foreground mount", || {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("hoard-mount -f exited ({status}) before mounting: {err}");
        }
        !mounts_under(&mnt).is_empty()
    });
    let _guard = FuseMount(mnt.clone());
    assert_same_tree(&tree, &mnt, "mtime_ns");
    // SAFETY: kill only sends a signal to the child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(mounts_under(&mnt).is_empty());
}

#[test]
fn a_driver_unmounted_from_outside_leaves_the_next_mount_alone() {
    let Some(dir) = fuse_tempdir() else {
        return;
    };
    let (tree, image) = mixed_image(dir.path());
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mount = || {
        let out = hoard_mount().args([s(&image), s(&mnt)]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let pid = xattr::get(&mnt, "user.dwarfs.driver.pid").unwrap().unwrap();
        String::from_utf8(pid).unwrap().parse::<i32>().unwrap()
    };
    let first = mount();
    let _guard = FuseMount(mnt.clone());
    // The first driver is held still while its mount is taken away and
    // another takes its place; then it sees its mount gone and exits.
    // SAFETY: kill only sends signals.
    unsafe { libc::kill(first, libc::SIGSTOP) };
    let out = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(&mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let second = mount();
    unsafe { libc::kill(first, libc::SIGCONT) };
    eventually("the first driver exits", || {
        // Gone, or a zombie its new parent has not reaped yet.
        std::fs::read_to_string(format!("/proc/{first}/stat")).map_or(true, |stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|rest| rest.starts_with('Z'))
        })
    });
    assert_eq!(mounts_under(&mnt).len(), 1, "the second mount is gone");
    assert_same_tree(&tree, &mnt, "mtime_ns");
    // Asked to, the second driver unmounts its own mount.
    unsafe { libc::kill(second, libc::SIGTERM) };
    eventually("the second mount ends", || mounts_under(&mnt).is_empty());
}
