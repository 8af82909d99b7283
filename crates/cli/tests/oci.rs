//! Container images in: OCI layouts made with umoci and docker archives
//! made from them with skopeo, packed (`hoard create -i oci:…`,
//! `-i docker-archive:…`) and mounted; each compared with `umoci
//! unpack`'s rootfs, and bad images refused with one line, nothing
//! written.

mod common;

use common::oci::{layout_of, tar_of, tool_in, tools_available, umoci_image};
use common::*;
use std::path::Path;

const TAR: &str = "application/vnd.oci.image.layer.v1.tar";
const TAR_GZ: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Times kept to the nanosecond.
const EXACT_TIMES: &[&str] = &["--time-resolution", "ns"];

/// The differences between the rootfs umoci unpacked and `image` (an
/// image or a mount) but for the fields in `ignore` and the root's own
/// attributes (umoci's bundle decides them).
fn differences_from_rootfs(rootfs: &Path, image: &Path, ignore: &str) -> String {
    differences_below_root(image, rootfs, ignore)
}

#[test]
fn layout_and_docker_archive_give_umocis_rootfs() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (layout, rootfs) = umoci_image(dir.path());
    let image = dir.path().join("image.dwarfs");
    let source = format!("oci:{}:t", s(&layout));
    hoard_ok(&create_args(Path::new(&source), &image, EXACT_TIMES));
    let d = differences_from_rootfs(&rootfs, &image, "");
    assert!(d.is_empty(), "{d}");

    // The config is kept, and shown.
    let info: serde_json::Value =
        serde_json::from_str(&hoard_ok(&["info", s(&image), "--json"])).unwrap();
    let container = &info["container"];
    assert_eq!(
        container["env"],
        serde_json::json!(["GREETING=hi"]),
        "{container}"
    );
    assert_eq!(container["entrypoint"][0], "/bin/sh");
    assert_eq!(container["cmd"], serde_json::json!(["-c", "true"]));
    assert_eq!(container["user"], "1000");
    assert_eq!(container["working_dir"], "/etc");
    assert_eq!(container["labels"]["k"], "v");
    assert!(hoard_ok(&["info", s(&image)]).contains("GREETING=hi"));

    // DwarFS 0.15 reads the image, config and all (where ../shared has it).
    if dwarfs_bin().is_some() {
        dwarfs_check_and_extract(&image, &dir.path().join("by-dwarfs"));
    }

    // The same image through skopeo's docker archive.
    let archive = dir.path().join("image.tar");
    tool_in(
        dir.path(),
        "skopeo",
        &[
            "copy",
            "-q",
            &source,
            &format!("docker-archive:{}:test/image:t", s(&archive)),
        ],
    );
    let from_archive = dir.path().join("archive.dwarfs");
    let source = format!("docker-archive:{}", s(&archive));
    hoard_ok(&create_args(Path::new(&source), &from_archive, EXACT_TIMES));
    let d = differences_from_rootfs(&rootfs, &from_archive, "");
    assert!(d.is_empty(), "{d}");
}

#[test]
fn mounts_convert_once_and_run_a_program() {
    if !tools_available() {
        return;
    }
    let Some((dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let (layout, rootfs) = umoci_image(dir.path());
    let cache = dir.path().join("cache");
    let source = format!("oci:{}:t", s(&layout));
    let cache_option = format!("archive_cache={}", s(&cache));
    let mount = |what: &str| {
        std::fs::create_dir_all(&mnt).unwrap();
        let out = output_ok(hoard().args(["mount", what, s(&mnt), "-o", &cache_option]));
        (
            FuseMount(mnt.clone()),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (mounted, said) = mount(&source);
    assert!(said.contains("packing"), "{said}");
    // Packed into the cache at a resolution of seconds.
    let d = differences_from_rootfs(&rootfs, &mnt, "mtime_ns");
    assert!(d.is_empty(), "{d}");
    let run = output_ok(std::process::Command::new("chroot").args([
        s(&mnt),
        "/bin/sh",
        "-c",
        "read line < /etc/hello && echo \"$line from the mount\"",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "hello from the mount\n"
    );
    drop(mounted);
    let packed = std::fs::read_dir(&cache).unwrap().count();

    // The second mount of the same manifest converts nothing.
    let (mounted, said) = mount(&source);
    assert!(!said.contains("packing"), "{said}");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), packed);
    let d = differences_from_rootfs(&rootfs, &mnt, "mtime_ns");
    assert!(d.is_empty(), "{d}");
    drop(mounted);
}

#[test]
fn layers_stack_as_the_flat_image() {
    if !tools_available() {
        return;
    }
    let Some((dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let (layout, rootfs) = umoci_image(dir.path());
    let layers = dir.path().join("layers");
    let source = format!("oci:{}:t", s(&layout));
    let args = [
        "create",
        "-i",
        &source,
        "--layers",
        s(&layers),
        "--json",
        "--time-resolution",
        "ns",
    ];
    let listed: serde_json::Value = serde_json::from_str(&hoard_ok(&args)).unwrap();
    let paths: Vec<&str> = listed["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            assert_eq!(l["made"], true, "{listed}");
            l["path"].as_str().unwrap()
        })
        .collect();
    assert_eq!(paths.len(), 2, "{listed}");
    let mounted = mount_ok(&paths, &mnt, &[]);
    let d = differences_from_rootfs(&rootfs, &mnt, "");
    assert!(d.is_empty(), "{d}");
    drop(mounted);

    // Made again (another image on the same layers, say): nothing to do.
    let again: serde_json::Value = serde_json::from_str(&hoard_ok(&args)).unwrap();
    assert!(
        again["layers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["made"] == false),
        "{again}"
    );
}

/// `hoard create -i SOURCE` fails with one line naming `why`, writing
/// nothing: no image, and nothing else in `dir` but `keep`.
fn refused_cleanly(dir: &Path, source: &str, why: &str) {
    let before = std::fs::read_dir(dir).unwrap().count();
    let image = dir.join("out.dwarfs");
    let err = one_line_error(&create_args(Path::new(source), &image, &[]));
    assert!(err.contains(why), "{source}: {err}");
    assert!(!image.exists());
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), before, "{source}");
}

#[test]
fn bad_layers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let layout = |name: &str, layers: &[(&str, Vec<u8>)]| {
        let path = layout_of(&dir.path().join(name), layers, MANIFEST);
        format!("oci:{}:t", s(&path))
    };
    let file = tar_of(&[("a/b", b'0', b"contents")]);

    let truncated = layout("truncated", &[(TAR, file[..600].to_vec())]);
    refused_cleanly(dir.path(), &truncated, "layer 1");
    let garbage = layout(
        "garbage",
        &[(TAR_GZ, vec![0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5])],
    );
    refused_cleanly(dir.path(), &garbage, "layer 1");

    let mismatch = layout("mismatch", &[(TAR, file.clone())]);
    let blob = std::fs::read_dir(dir.path().join("mismatch/blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::metadata(p).unwrap().len() == file.len() as u64)
        .unwrap();
    let mut bytes = file.clone();
    bytes[600] ^= 1;
    std::fs::write(&blob, bytes).unwrap();
    refused_cleanly(dir.path(), &mismatch, "digest mismatch");

    let wrong_type = layout_of(
        &dir.path().join("wrong-type"),
        &[(TAR, file.clone())],
        "application/vnd.oci.image.config.v1+json",
    );
    refused_cleanly(
        dir.path(),
        &format!("oci:{}:t", s(&wrong_type)),
        "is not an image manifest or index",
    );

    for (name, tar, why) in [
        (
            "dotdot",
            tar_of(&[("a/../../x", b'0', b"x")]),
            "goes up out of the tree",
        ),
        (
            "absolute",
            tar_of(&[("/etc/x", b'0', b"x")]),
            "is an absolute path",
        ),
        (
            "whiteout-up",
            tar_of(&[("a/.wh..", b'0', b"")]),
            "names nothing inside the tree",
        ),
    ] {
        let source = layout(name, &[(TAR, tar)]);
        refused_cleanly(dir.path(), &source, why);
    }

    // A symlink out of the tree is never followed: not by a whiteout,
    // not by an entry under it.
    let escape = tar_of(&[("esc", b'2', b"../../../..")]);
    for (name, upper) in [
        (
            "whiteout-through-symlink",
            tar_of(&[("esc/.wh.passwd", b'0', b"")]),
        ),
        ("entry-through-symlink", tar_of(&[("esc/x", b'0', b"x")])),
    ] {
        let source = layout(name, &[(TAR, escape.clone()), (TAR, upper)]);
        refused_cleanly(
            dir.path(),
            &source,
            "is used as a directory but is a symlink",
        );
    }
}

#[test]
fn layouts_of_several_images_need_a_tag() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (layout, _) = umoci_image(dir.path());
    tool_in(
        dir.path(),
        "umoci",
        &["tag", "--image", "layout:t", "other"],
    );
    let err = one_line_error(&create_args(
        Path::new(&format!("oci:{}", s(&layout))),
        &dir.path().join("x.dwarfs"),
        &[],
    ));
    assert!(
        err.contains("name one of the tags") && err.contains("other"),
        "{err}"
    );
}
