//! Layers: `hoard create --base` writes only what changed, and the layer
//! stacked on its base — by `hoard mount BASE LAYER`, by the kernel's
//! overlayfs over separate mounts (hoard's and DwarFS's), and flattened
//! by `hoard rewrite BASE LAYER` — is the new tree.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Unmounts on drop (FUSE or kernel mounts), lazily if busy.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).output();
        }
    }
}

fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// The base tree: some bulk (incompressible, so sizes tell what a layer
/// holds) and one of each thing the new tree changes.
fn base_tree(root: &Path) {
    for i in 0..8 {
        write(&root.join(format!("keep/bulk{i}")), &noise(32 << 10, i + 1));
    }
    write(&root.join("keep/deep/small"), b"small\n");
    for name in [
        "change_me",
        "chmod_me",
        "chown_me",
        "touch_me",
        "delete_me",
        "f2d",
    ] {
        write(&root.join(name), name.as_bytes());
    }
    write(&root.join("gone/a"), b"a");
    write(&root.join("gone/sub/b"), b"b");
    write(&root.join("again/old1"), b"old1");
    write(&root.join("again/old2"), b"old2");
    write(&root.join("d2f/inner"), b"inner");
    write(&root.join("link_target"), &noise(1000, 99));
    std::os::unix::fs::symlink("keep/deep/small", root.join("sym")).unwrap();
}

/// The new tree: the base changed in every way a layer must carry.
fn change(root: &Path) {
    write(&root.join("new_file"), b"new");
    write(&root.join("keep/deep/added"), b"added");
    write(&root.join("change_me"), b"changed contents");
    std::fs::set_permissions(
        root.join("chmod_me"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    if is_root() {
        std::os::unix::fs::chown(root.join("chown_me"), Some(1234), Some(5678)).unwrap();
    }
    output_ok(
        Command::new("touch")
            .args(["-d", "@1000000000"])
            .arg(root.join("touch_me")),
    );
    std::fs::remove_file(root.join("delete_me")).unwrap();
    std::fs::remove_dir_all(root.join("gone")).unwrap();
    std::fs::remove_dir_all(root.join("again")).unwrap();
    write(&root.join("again/fresh"), b"fresh");
    std::fs::remove_file(root.join("f2d")).unwrap();
    write(&root.join("f2d/inside"), b"inside");
    std::fs::remove_dir_all(root.join("d2f")).unwrap();
    write(&root.join("d2f"), b"now a file");
    std::fs::hard_link(root.join("link_target"), root.join("keep/hard_link")).unwrap();
}

/// Stacks `upper` on `lower` with the kernel's overlayfs; None (said on
/// stderr) when the kernel refuses.
fn overlay(lower: &Path, upper: &Path, mnt: &Path) -> Option<Mounted> {
    overlay_with(lower, upper, mnt, "")
}

/// [`overlay`] with more mount options (`opt,`).
fn overlay_with(lower: &Path, upper: &Path, mnt: &Path, options: &str) -> Option<Mounted> {
    std::fs::create_dir_all(mnt).unwrap();
    let dirs = format!("{options}lowerdir={}:{}", upper.display(), lower.display());
    let out = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &dirs])
        .arg(mnt)
        .output()
        .unwrap();
    if !out.status.success() {
        skipped(&format!(
            "the kernel overlayfs check: this kernel refuses overlayfs over FUSE mounts ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return None;
    }
    Some(Mounted(mnt.to_path_buf()))
}

struct Layered {
    dir: tempfile::TempDir,
    base: PathBuf,
    layer: PathBuf,
    new: PathBuf,
}

impl Layered {
    /// Asserts that `hoard diff` of the base with the layer on it finds
    /// the new tree.
    fn assert_diff_finds_the_new_tree(&self) {
        let (base, layer, new) = (s(&self.base), s(&self.layer), s(&self.new));
        hoard_ok(&["diff", base, "--layer", layer, new, "--ignore", "mtime_ns"]);
    }

    /// Asserts that the base and layer mounted as one stack, and mounted
    /// apart and stacked by the kernel's overlayfs (with more `options`,
    /// `opt,`), are the new tree; returns the guard of the first, still
    /// mounted at `union`.
    fn assert_mounts_stack(&self, options: &str) -> FuseMount {
        let at = |name: &str| self.dir.path().join(name);
        let (base, layer) = (s(&self.base), s(&self.layer));
        let union = assert_mounts_as(&[base, layer], &at("union"), &self.new, "mtime_ns");
        let _lower = mount_ok(&[base], &at("lower"), &[]);
        let _upper = mount_ok(&[layer], &at("upper"), &[]);
        if let Some(_kernel) = overlay_with(&at("lower"), &at("upper"), &at("kernel"), options) {
            assert_same_tree(&self.new, &at("kernel"), "mtime_ns");
        }
        union
    }
}

/// A base tree and image, the changed tree, and its layer made with
/// `extra` options.
fn layered(extra: &[&str]) -> Layered {
    layered_with(extra, |_| {})
}

/// [`layered`], the new tree also changed by `more`.
fn layered_with(extra: &[&str], more: impl Fn(&Path)) -> Layered {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    base_tree(&old);
    let base = create_image(&old, &dir.path().join("base.dwarfs"), &[]);
    copy_tree(&old, &new);
    change(&new);
    more(&new);
    let mut args = vec!["--base", base.to_str().unwrap()];
    args.extend_from_slice(extra);
    let layer = create_image(&new, &dir.path().join("layer.dwarfs"), &args);
    Layered {
        dir,
        base,
        layer,
        new,
    }
}

#[test]
fn a_layer_holds_only_the_changes_and_stacks_to_the_new_tree() {
    let l = layered(&[]);
    let (base_size, layer_size) = (
        std::fs::metadata(&l.base).unwrap().len(),
        std::fs::metadata(&l.layer).unwrap().len(),
    );
    assert!(
        layer_size * 8 < base_size,
        "layer of {layer_size} bytes for a base of {base_size}"
    );
    // Deletions are whiteouts, unchanged files are not in the layer.
    let listing = hoard_ok(&["ls", "-l", "-R", s(&l.layer)]);
    for whiteout in ["delete_me", "gone", "again/old1", "again/old2"] {
        let line = listing
            .lines()
            .find(|line| line.ends_with(&format!(" {whiteout}")))
            .unwrap_or_else(|| panic!("no whiteout for {whiteout} in\n{listing}"));
        assert!(line.starts_with('c') && line.contains(" 0, 0 "), "{line}");
    }
    assert!(!listing.contains("bulk"), "{listing}");

    // The tools read the stack: diff, ls, cat, extract.
    l.assert_diff_finds_the_new_tree();
    let (base, layer) = (s(&l.base), s(&l.layer));
    let names = hoard_ok(&["ls", base, "--layer", layer]);
    assert!(
        names.contains("new_file") && !names.contains("delete_me"),
        "{names}"
    );
    let out = run(&[
        "cat",
        base,
        "--layer",
        layer,
        "change_me",
        "keep/deep/small",
    ]);
    assert_eq!(out.stdout, b"changed contentssmall\n");
    let stacked = l.dir.path().join("stacked");
    extract_ok(&[base, "--layer", layer], &stacked);
    assert_eq!(same_to_the_second(&l.new, &stacked), "");

    // Flattened: one image, extracted exactly.
    let flat = l.dir.path().join("flat.dwarfs");
    hoard_ok(&[
        "rewrite",
        l.base.to_str().unwrap(),
        l.layer.to_str().unwrap(),
        "-o",
        flat.to_str().unwrap(),
    ]);
    assert_eq!(same_to_the_second(&l.new, &flat), "");
    let flat_manifest = manifest_of(&flat);
    assert_extracts_as(&[s(&flat)], &l.dir.path().join("extracted"), &flat_manifest);
    // Flattened reusing the layers' blocks: smaller than base and layer,
    // the same tree, and DwarFS reads it.
    let reused = l.dir.path().join("reused.dwarfs");
    hoard_ok(&[
        "rewrite",
        base,
        layer,
        "-o",
        reused.to_str().unwrap(),
        "--recompress",
        "metadata",
    ]);
    assert_eq!(same_to_the_second(&l.new, &reused), "");
    assert!(
        std::fs::metadata(&reused).unwrap().len() < base_size + layer_size,
        "reused blocks"
    );
    let again = l.dir.path().join("reused-extracted");
    assert_extracts_as(&[s(&reused)], &again, &flat_manifest);
    if dwarfs_bin().is_some() {
        let dwarfs_out = l.dir.path().join("dwarfs-extracted");
        dwarfs_check_and_extract(&reused, &dwarfs_out);
        // dwarfsextract leaves its target directory's time alone.
        output_ok(Command::new("touch").arg("-r").arg(&l.new).arg(&dwarfs_out));
        assert_eq!(same_to_the_second(&l.new, &dwarfs_out), "");
    } else {
        skipped("DwarFS 0.15.3 tools missing: flattened image not read by DwarFS");
    }

    if fuse_available() {
        let union = l.assert_mounts_stack("");
        let content = std::fs::read(union.0.join("keep/hard_link")).unwrap();
        assert_eq!(content, std::fs::read(l.new.join("link_target")).unwrap());
    }
}

#[test]
fn layers_mounted_by_dwarfs_stack_with_the_kernel_overlayfs() {
    if !fuse_available() {
        return;
    }
    if dwarfs_bin().is_none() {
        skipped("DwarFS 0.15.3 tools missing: layers not mounted with dwarfs");
        return;
    }
    let l = layered(&[]);
    let mut mounts = Vec::new();
    for (image, name) in [(&l.base, "lower"), (&l.layer, "upper")] {
        let mnt = l.dir.path().join(name);
        std::fs::create_dir_all(&mnt).unwrap();
        output_ok(tool("dwarfs").arg(image).arg(&mnt));
        mounts.push(Mounted(mnt));
    }
    let kernel = l.dir.path().join("kernel");
    if let Some(_k) = overlay(&mounts[0].0, &mounts[1].0, &kernel) {
        assert_eq!(same_to_the_second(&l.new, &kernel), "");
    }
}

#[test]
fn opaque_directories_hide_what_lies_below() {
    let l = layered(&["--opaque-dirs"]);
    let listing = hoard_ok(&["ls", "-l", "-R", s(&l.layer)]);
    assert!(!listing.contains("old1"), "{listing}");
    let again = listing
        .lines()
        .find(|line| line.ends_with(" again"))
        .unwrap();
    assert!(again.starts_with("drwxr-xr-x@"), "{again}");
    if fuse_available() {
        l.assert_mounts_stack("");
    }
}

/// Two bulk files (of equal contents: noise seeds 4 and 5 are one) get a
/// new mode and time, their contents unchanged.
fn retouch(root: &Path) {
    std::fs::set_permissions(
        root.join("keep/bulk3"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    output_ok(
        Command::new("touch")
            .args(["-d", "@1500000000"])
            .arg(root.join("keep/bulk4")),
    );
}

#[test]
fn metacopy_layers_store_changed_attributes_alone() {
    let whole = layered_with(&[], retouch);
    let l = layered_with(&["--metacopy"], retouch);
    let (whole_size, size) = (
        std::fs::metadata(&whole.layer).unwrap().len(),
        std::fs::metadata(&l.layer).unwrap().len(),
    );
    assert!(
        size + (24 << 10) < whole_size,
        "{size} against {whole_size} bytes"
    );
    let listing = hoard_ok(&["ls", "-l", "-R", s(&l.layer)]);
    let bulk3 = listing
        .lines()
        .find(|l| l.ends_with(" keep/bulk3"))
        .unwrap();
    assert!(bulk3.starts_with("-rw-------@"), "{bulk3}");
    l.assert_diff_finds_the_new_tree();
    let (base, layer) = (s(&l.base), s(&l.layer));
    let flat = l.dir.path().join("flat.dwarfs");
    hoard_ok(&["rewrite", base, layer, "-o", flat.to_str().unwrap()]);
    assert_eq!(same_to_the_second(&l.new, &flat), "");
    if fuse_available() {
        l.assert_mounts_stack("metacopy=on,");
    }
}

#[test]
fn trusting_mtimes_skips_reading_unchanged_files() {
    let l = layered(&["--trust-mtime"]);
    let listing = hoard_ok(&["ls", "-R", s(&l.layer)]);
    assert!(!listing.contains("bulk"), "{listing}");
    assert!(listing.contains("change_me"), "{listing}");
}

#[test]
fn bad_stacks_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    write(&tree.join("f"), b"f");
    let missing = dir.path().join("missing.dwarfs");
    let err = hoard_fails(&[
        "create",
        "-i",
        s(&tree),
        "-o",
        s(&dir.path().join("l.dwarfs")),
        "--base",
        s(&missing),
        "--no-progress",
    ]);
    assert!(
        err.contains("missing.dwarfs") && err.trim().lines().count() == 1,
        "{err}"
    );

    let image = create_image(&tree, &dir.path().join("i.dwarfs"), &[]);
    let flat = dir.path().join("flat.dwarfs");
    let err = hoard_fails(&["rewrite", s(&image), s(&missing), "-o", s(&flat)]);
    assert!(err.contains("missing.dwarfs"), "{err}");
    assert!(!flat.exists());

    if fuse_available() {
        let mnt = dir.path().join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let err = hoard_fails(&["mount", s(&image), s(&missing), s(&mnt)]);
        assert!(err.contains("missing.dwarfs"), "{err}");
    }
}

#[test]
fn a_layer_stacks_only_on_its_base() {
    let l = layered(&[]);
    let dir = l.dir.path();
    let other_tree = dir.join("other");
    write(&other_tree.join("f"), b"other");
    let other = create_image(&other_tree, &dir.join("other.dwarfs"), &[]);
    let (base, layer, other) = (
        l.base.to_str().unwrap(),
        l.layer.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    for (first, layers) in [
        (other, vec![layer]),
        (layer, vec![base]),
        (base, vec![layer, layer]),
    ] {
        let mut args = vec!["ls", first];
        for l in &layers {
            args.extend(["--layer", l]);
        }
        let err = hoard_fails(&args);
        assert!(
            err.contains("cannot stack") && err.contains("layer.dwarfs"),
            "{err}"
        );
        args.push("--force-stack");
        hoard_ok(&args);
    }
    // A layer alone is an ordinary image; a layer on a layer records both.
    hoard_ok(&["ls", layer]);
    let newer = dir.join("newer");
    copy_tree(&l.new, &newer);
    write(&newer.join("newer_file"), b"newer");
    let top = create_image(
        &newer,
        &dir.join("top.dwarfs"),
        &["--base", base, "--base", layer],
    );
    let top = top.to_str().unwrap();
    hoard_ok(&[
        "diff",
        base,
        "--layer",
        layer,
        "--layer",
        top,
        newer.to_str().unwrap(),
        "--ignore",
        "mtime_ns",
    ]);
    let out = run(&["ls", base, "--layer", top]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("top.dwarfs"));
    hoard_fails(&["rewrite", base, top, "-o", s(&dir.join("flat.dwarfs"))]);
}

#[test]
fn five_hundred_layers_stack() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    write(&tree.join("shared/file"), b"file");
    let first = create_image(&tree, &dir.path().join("l000.dwarfs"), &[]);
    let mut args = vec![first.to_str().unwrap().to_string()];
    for i in 1..500 {
        let copy = dir.path().join(format!("l{i:03}.dwarfs"));
        std::fs::copy(&first, &copy).unwrap();
        args.push("--layer".into());
        args.push(copy.to_str().unwrap().into());
    }
    let mut cat = vec!["cat".to_string()];
    cat.extend(args.iter().cloned());
    cat.push("shared/file".into());
    let cat: Vec<&str> = cat.iter().map(String::as_str).collect();
    assert_eq!(hoard_ok(&cat), "file");
}
