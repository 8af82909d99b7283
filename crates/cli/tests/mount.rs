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
    let images = images_with_manifest(group);
    let mut failures = Vec::new();
    for (image, manifest) in &images {
        let name = image.file_name().unwrap().to_string_lossy().to_string();
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = run(&["mount", image.to_str().unwrap(), mnt.to_str().unwrap()]);
        if !out.status.success() {
            failures.push(format!(
                "{name}: mount failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let guard = MountGuard(&mnt);
        let expected = std::fs::read_to_string(manifest).unwrap();
        let diff = manifest_diff(&expected, &manifest_of(&mnt), Compare::Mounted);
        if !diff.is_empty() {
            failures.push(format!(
                "{name}: mounted tree differs from manifest:\n{diff}"
            ));
        }
        drop(guard);
        let left = std::fs::read_dir(&mnt).unwrap().count();
        assert_eq!(left, 0, "{name}: still mounted after umount");
    }
    assert!(
        failures.is_empty(),
        "{} of {} images failed:\n{}",
        failures.len(),
        images.len(),
        failures.join("\n")
    );
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
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let image = image("misc", "future-features.dwarfs").unwrap();
    let out = run(&["mount", image.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("this-feature-will-never-exist"), "{err}");
    let missing = dir.path().join("missing");
    let image = common::image("compat", "compat-v0.9.10.dwarfs").unwrap();
    let out = run(&["mount", image.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
}

#[test]
fn busy_mount_point_is_refused() {
    if !fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let image = image("compat", "compat-v0.9.10.dwarfs").unwrap();
    let first = run(&["mount", image.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let _guard = MountGuard(&mnt);
    let second = run(&["mount", image.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("already a mount point"));
}
