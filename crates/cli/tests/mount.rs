//! `hoard mount`: every good image, mounted with FUSE, shows exactly the tree
//! of its manifest; bad images and bad mount points fail before detaching.

mod common;

use common::*;
use std::path::Path;

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
