//! Container images for the tests: OCI layouts made with umoci (layers
//! tarred by GNU tar and added as they are), and layouts written by hand
//! for bad input.

use super::{output_ok, sh};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether umoci and skopeo are here and the tests run as root (the
/// images hold a device and files of other owners); the skip recorded
/// when not.
pub fn tools_available() -> bool {
    let ok = super::has_tool("umoci") && super::has_tool("skopeo") && super::is_root();
    if !ok {
        super::skipped("umoci or skopeo missing, or not root: no container image tests");
    }
    ok
}

/// Runs `program ARGS` in `dir`, asserting that it succeeds.
pub fn tool_in(dir: &Path, program: &str, args: &[&str]) {
    output_ok(Command::new(program).args(args).current_dir(dir));
}

/// Tars the tree `dir/name` into `dir/name.tar` (pax, with extended
/// attributes) and adds it to the image `dir/layout:t` as a layer.
fn add_layer(dir: &Path, name: &str) {
    sh(
        dir,
        &format!("tar --xattrs --format=pax -C {name} -cf {name}.tar . && umoci raw add-layer --image layout:t {name}.tar"),
    );
}

/// The image `dir/layout:t` of two layers and a config, as umoci makes
/// it, and its rootfs as `umoci unpack` gives it (`dir/bundle/rootfs`).
/// Layer 1: a small tree, `/bin/sh` and the libraries it loads. Layer 2:
/// deletes a file and a directory (`.wh.`), makes `opq` opaque
/// (`.wh..wh..opq`) with a new entry, adds a hard link, a symlink, a
/// device, a fifo and a file with an extended attribute and an owner.
pub fn umoci_image(dir: &Path) -> (PathBuf, PathBuf) {
    tool_in(dir, "umoci", &["init", "--layout", "layout"]);
    tool_in(dir, "umoci", &["new", "--image", "layout:t"]);
    sh(
        dir,
        r#"mkdir -p l1/etc l1/gone/sub l1/opq/old l1/keep
        echo hello > l1/etc/hello; echo bye > l1/gone/sub/f; echo old > l1/opq/old/x
        echo o2 > l1/opq/y; echo k > l1/keep/k; echo del > l1/keep/del
        for f in /bin/sh $(ldd /bin/sh | grep -o '/[^ ]*'); do
            mkdir -p "l1$(dirname "$f")"; cp -L "$f" "l1$f"
        done
        chmod 0750 l1/opq; touch -d @1500000000 l1/etc/hello"#,
    );
    add_layer(dir, "l1");
    sh(
        dir,
        r#"mkdir -p l2/opq/new l2/keep
        touch l2/.wh.gone l2/keep/.wh.del l2/opq/.wh..wh..opq
        echo n > l2/opq/new/z; echo data > l2/keep/file; ln l2/keep/file l2/keep/link
        ln -s ../etc/hello l2/keep/sym; setfattr -n user.test -v val l2/keep/file
        mknod l2/keep/null c 1 3; mkfifo l2/keep/fifo
        chown 1000:100 l2/keep/file; touch -d @1000000000 l2/keep/file"#,
    );
    add_layer(dir, "l2");
    tool_in(
        dir,
        "umoci",
        &[
            "config",
            "--image",
            "layout:t",
            "--config.env",
            "GREETING=hi",
            "--config.entrypoint",
            "/bin/sh",
            "--config.cmd",
            "-c",
            "--config.cmd",
            "true",
            "--config.user",
            "1000",
            "--config.workingdir",
            "/etc",
            "--config.label",
            "k=v",
        ],
    );
    tool_in(dir, "umoci", &["unpack", "--image", "layout:t", "bundle"]);
    (dir.join("layout"), dir.join("bundle/rootfs"))
}

/// The sha256 digest of `bytes`, as OCI writes it.
pub fn digest(bytes: &[u8]) -> String {
    hoard_oci::Digest::sha256_of(bytes).to_string()
}

/// Writes `bytes` as a blob of the layout `dir`; returns its descriptor
/// (as JSON) of media type `media_type`.
fn blob(dir: &Path, media_type: &str, bytes: &[u8]) -> serde_json::Value {
    let d = digest(bytes);
    let path = dir.join("blobs/sha256").join(&d[7..]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    serde_json::json!({"mediaType": media_type, "digest": d, "size": bytes.len()})
}

/// Writes a layout at `dir` of one image tagged `t`: the `layers`
/// (media type and bytes, bottom first), an empty config, the manifest
/// listed in the index as `manifest_type`.
pub fn layout_of(dir: &Path, layers: &[(&str, Vec<u8>)], manifest_type: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let config = serde_json::json!({"architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": []}});
    let config = blob(
        dir,
        "application/vnd.oci.image.config.v1+json",
        config.to_string().as_bytes(),
    );
    let layers: Vec<_> = layers.iter().map(|(t, b)| blob(dir, t, b)).collect();
    let manifest = serde_json::json!({"schemaVersion": 2, "config": config, "layers": layers});
    let mut listed = blob(dir, manifest_type, manifest.to_string().as_bytes());
    listed["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": "t"});
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [listed]});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    dir.to_path_buf()
}

/// A tar of `members`: (name, type flag, contents; a symlink's or hard
/// link's target for types `2` and `1`).
pub fn tar_of(members: &[(&str, u8, &[u8])]) -> Vec<u8> {
    let mut tar = Vec::new();
    for &(name, kind, data) in members {
        let linked = matches!(kind, b'1' | b'2');
        let size = if linked { 0 } else { data.len() as u64 };
        let mut header = super::ustar_header(name, kind, size);
        if linked {
            header[157..157 + data.len()].copy_from_slice(data);
            header[148..156].copy_from_slice(b"        ");
            let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
            header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        }
        tar.extend_from_slice(&header);
        if !linked {
            tar.extend_from_slice(data);
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
    }
    tar.resize(tar.len() + 1024, 0);
    tar
}
