//! `hoard mount --each`: many images in one mount, one directory each,
//! opened at first use and closed when idle; with `-o watch` images
//! added to and removed from the directory appear and vanish.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A mount of `--each`, unmounted on drop.
struct Mounted(FuseMount);

impl Mounted {
    fn driver_pid(&self) -> u32 {
        let pid = xattr::get(&self.0 .0, "user.dwarfs.driver.pid")
            .unwrap()
            .unwrap();
        String::from_utf8(pid).unwrap().parse().unwrap()
    }

    /// How many images of `dir` the driver has open now.
    fn open_images(&self, dir: &Path) -> usize {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.driver_pid())).unwrap();
        let open: std::collections::BTreeSet<PathBuf> = fds
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|e| e == "dwarfs"))
            .collect();
        open.len()
    }

    /// The driver's resident memory in bytes.
    fn rss(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.driver_pid())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        kb << 10
    }
}

/// `count` copies of a small image in `dir`, named `img0000.dwarfs`...;
/// each holds `hello` (its contents) and `sub/data` (4 KiB of noise).
fn images(dir: &Path, count: usize) -> Vec<u8> {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("hello"), b"hello\n").unwrap();
    let data = noise(4096, 7);
    std::fs::write(tree.join("sub/data"), &data).unwrap();
    let images = dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    let first = create_image(&tree, &images.join("img0000.dwarfs"), &[]);
    for i in 1..count {
        std::fs::copy(&first, images.join(format!("img{i:04}.dwarfs"))).unwrap();
    }
    data
}

/// A temporary directory for a test that mounts (`None` where FUSE mounts
/// cannot be made) with `count` [`images`] in it: the directory, the
/// images' directory and the noise they hold.
fn fuse_images(count: usize) -> Option<(tempfile::TempDir, PathBuf, Vec<u8>)> {
    let dir = fuse_tempdir()?;
    let data = images(dir.path(), count);
    let images = dir.path().join("images");
    Some((dir, images, data))
}

fn mount_each(what: &[&Path], mnt: &Path, options: &str) -> Mounted {
    let mut args = vec!["--each"];
    args.extend(what.iter().map(|p| s(p)));
    Mounted(mount_ok(&args, mnt, &["-o", options]))
}

/// Waits (generously) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: timed out"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_thousand_images_mount_lazily_in_one_bounded_process() {
    let Some((dir, images, data)) = fuse_images(1000) else {
        return;
    };
    let mnt = dir.path().join("mnt");
    let started = Instant::now();
    let m = mount_each(&[&images], &mnt, "cachesize=8m");
    // Generous: the bench measures it (well under a second).
    assert!(started.elapsed() < Duration::from_secs(30));
    let names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1000);
    assert!(names.contains(&"img0999".to_string()));
    assert_eq!(m.open_images(&images), 0, "listing the root opens no image");

    assert_eq!(
        std::fs::read(mnt.join("img0007/hello")).unwrap(),
        b"hello\n"
    );
    assert_eq!(m.open_images(&images), 1);
    let before = m.rss();
    for i in 0..1000 {
        let sub = mnt.join(format!("img{i:04}"));
        assert_eq!(std::fs::read(sub.join("hello")).unwrap(), b"hello\n");
        assert!(
            std::fs::read(sub.join("sub/data")).unwrap() == data,
            "img{i:04}"
        );
    }
    assert_eq!(m.open_images(&images), 1000);
    // Loose: the 8 MiB cache plus a small cost per open image (the bench
    // measures it: some KiB).
    let grown = m.rss().saturating_sub(before);
    assert!(
        grown < (8 << 20) + 1000 * (96 << 10),
        "RSS grew by {grown} bytes"
    );
}

#[test]
fn a_thousand_images_named_one_by_one_at_long_paths_mount() {
    let Some((dir, images, data)) = fuse_images(1) else {
        return;
    };
    let first = images.join("img0000.dwarfs");
    // Paths of 60 characters: 60,000 bytes joined, far past the page
    // mount(2) takes.
    let pad = 60 - images.join("0000.dwarfs").to_str().unwrap().len();
    let paths: Vec<PathBuf> = (0..1000)
        .map(|i| images.join(format!("{}{i:04}.dwarfs", "l".repeat(pad))))
        .collect();
    for p in &paths {
        assert_eq!(p.to_str().unwrap().len(), 60);
        std::fs::hard_link(&first, p).unwrap();
    }
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let mnt = dir.path().join("mnt");
    let _m = mount_each(&refs, &mnt, "cachesize=8m");
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 1000);
    for i in [0, 499, 999] {
        let sub = mnt.join(format!("{}{i:04}", "l".repeat(pad)));
        assert_eq!(std::fs::read(sub.join("hello")).unwrap(), b"hello\n");
        assert!(std::fs::read(sub.join("sub/data")).unwrap() == data);
    }
}

#[test]
fn idle_images_are_closed_and_reopened() {
    let Some((dir, images, data)) = fuse_images(3) else {
        return;
    };
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| images.join(format!("img{i:04}.dwarfs")))
        .collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let mnt = dir.path().join("mnt");
    let m = mount_each(&refs, &mnt, "idle=200ms");
    let file = mnt.join("img0001/sub/data");
    assert!(std::fs::read(&file).unwrap() == data);
    eventually("idle image closed", || m.open_images(&images) == 0);
    let inode = std::fs::metadata(&file).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert!(std::fs::read(&file).unwrap() == data);
    // Inode numbers stay the same across closing and reopening.
    eventually("closed again", || m.open_images(&images) == 0);
    let again = std::fs::metadata(&file).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert_eq!(inode.unwrap(), again.unwrap());
}

#[test]
fn a_watched_directory_shows_images_as_they_come_and_go() {
    let Some((dir, images, _)) = fuse_images(2) else {
        return;
    };
    let mnt = dir.path().join("mnt");
    let _m = mount_each(&[&images], &mnt, "watch");
    assert!(mnt.join("img0001/hello").exists());
    std::fs::copy(images.join("img0000.dwarfs"), images.join("late.dwarfs")).unwrap();
    eventually("new image shown", || mnt.join("late/hello").exists());
    std::fs::remove_file(images.join("img0001.dwarfs")).unwrap();
    eventually("removed image gone", || !mnt.join("img0001").exists());
    let mut names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["img0000", "late"]);
}

#[test]
fn two_images_of_one_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    images(dir.path(), 1);
    let one = dir.path().join("images/img0000.dwarfs");
    let other = dir.path().join("img0000.dwarfs");
    std::fs::copy(&one, &other).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let err = hoard_fails(&["mount", "--each", s(&one), s(&other), s(&mnt)]);
    assert!(err.contains("two images named 'img0000'"), "{err}");
}
