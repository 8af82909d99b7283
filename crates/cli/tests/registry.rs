//! hoard images in OCI registries: `hoard push`, then `mount`, `ls`,
//! `cat`, `extract` and `info` of `docker://…` by range requests on the
//! pushed blob, against Debian's docker-registry on 127.0.0.1; signed
//! images checked per block; the bytes one small file costs, counted by a
//! proxy; a container image copied there by skopeo, read as a Store and
//! mounted (converted once into the archive cache); a registry that wants
//! credentials (htpasswd); and a registry that fails.

mod common;

use common::oci::{tool_in, tools_available, umoci_image};
use common::*;
use hoard_format::section::SectionType;
use hoard_oci::registry::{Options, Registry};
use hoard_oci::{Digest, Store};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fast, bounded client options for every command here.
const REMOTE: &str = "remote_timeout=5,remote_retries=2,remote_backoff=20ms";

/// `hoard ARGS` with the test's remote options.
fn hoard_remote(args: &[&str]) -> std::process::Output {
    hoard()
        .args(args)
        .env("HOARD_REMOTE", REMOTE)
        .env_remove("HOARD_TRUST")
        .output()
        .expect("run hoard")
}

/// `hoard push IMAGE URL --json`, asserting success; the JSON it printed.
fn push(image: &Path, url: &str) -> serde_json::Value {
    let out = hoard_remote(&["push", s(image), url, "--json", "-q"]);
    serde_json::from_str(&ok(&out, "push")).expect("push --json prints JSON")
}

/// A small tree: noise files, a text file, a symlink, a subdirectory;
/// and an image of it (64 KiB blocks), with `extra` options.
fn tree_and_image(extra: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, tree) = noise_tree(12, |i| {
        format!("{}f{i:02}", if i % 4 == 0 { "sub/" } else { "" })
    });
    std::fs::write(tree.join("notes.txt"), b"pushed notes\n").unwrap();
    std::os::unix::fs::symlink("notes.txt", tree.join("link")).unwrap();
    let image = dir.path().join("image.dwarfs");
    let mut args = vec!["-S", "16", "-l1"];
    args.extend_from_slice(extra);
    create_image(&tree, &image, &args);
    (dir, tree, image)
}

#[test]
fn push_then_read_lazily_as_the_image() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    let (dir, tree, image) = tree_and_image(&[]);
    let url = registry.url("hoard/small:v1");
    let pushed = push(&image, &url);
    let blob = pushed["blob"].as_str().unwrap();
    assert_eq!(
        blob,
        Digest::sha256_of(&std::fs::read(&image).unwrap()).to_string()
    );
    assert!(pushed["signer"].is_null());
    assert_eq!(
        std::fs::read(registry.blob_file(blob)).unwrap(),
        std::fs::read(&image).unwrap()
    );

    // ls, cat and info read it by ranges; so does a digest reference.
    let listed = ok(&hoard_remote(&["ls", &url]), "ls");
    assert_eq!(
        listed,
        ok(&hoard_remote(&["ls", s(&image)]), "ls of the file")
    );
    let by_digest = registry.url(&format!(
        "hoard/small@{}",
        pushed["digest"].as_str().unwrap()
    ));
    let notes = hoard_remote(&["cat", &by_digest, "notes.txt"]);
    assert_eq!(ok(&notes, "cat"), "pushed notes\n");
    ok(&hoard_remote(&["info", &url]), "info");

    // extract gives the tree, and a mount shows it, byte for byte.
    let out = dir.path().join("out");
    let extracted = hoard_remote(&["extract", &url, "-o", s(&out)]);
    ok(&extracted, "extract");
    // Images keep whole seconds.
    assert_same_tree(&tree, &out, "mtime_ns");
    if let Some((_mnt_dir, mnt)) = fuse_tempdir_with("mnt") {
        let mounted = hoard_remote(&["mount", &url, s(&mnt)]);
        ok(&mounted, "mount");
        let _guard = FuseMount(mnt.clone());
        assert_same_tree(&image, &mnt, "");
        assert_same_tree(&tree, &mnt, "mtime_ns");
    }
}

#[test]
fn signed_push_reads_verified_and_refuses_a_tampered_blob() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    let (dir, tree, _) = tree_and_image(&[]);
    let keys = dir.path().join("key");
    let said = ok(&run(&["keygen", "-o", s(&keys), "-C", "tests"]), "keygen");
    let key = dir.path().join("key.key");
    let public = dir.path().join("key.pub");
    let image = create_image(
        &tree,
        &dir.path().join("signed.dwarfs"),
        &["-S", "16", "-l1", "--sign", s(&key)],
    );
    let url = registry.url("hoard/signed:v1");
    let pushed = push(&image, &url);
    let signer = pushed["signer"].as_str().expect("the signer is named");
    assert!(said.contains(signer), "{said} does not name {signer}");

    let out = dir.path().join("out");
    ok(
        &hoard_remote(&["extract", "--trust", s(&public), &url, "-o", s(&out)]),
        "extract --trust",
    );
    assert_same_tree(&tree, &out, "mtime_ns");

    // A block changed in the registry's storage as an attacker would
    // (its checksums made to match): only the signature tells, and the
    // reads that need the block are refused.
    let file = registry.blob_file(pushed["blob"].as_str().unwrap());
    let changed = tampered(&image, &dir.path().join("t.dwarfs"), SectionType::BLOCK, 1);
    std::fs::copy(&changed, &file).unwrap();
    let tampered = hoard_remote(&[
        "extract",
        "--trust",
        s(&public),
        &url,
        "-o",
        s(&dir.path().join("bad")),
    ]);
    let err = refused(&tampered, "extract --trust of a tampered blob");
    assert!(err.contains("does not match the image signature"), "{err}");
    eprintln!("note: tampered blob: {err}");
}

#[test]
fn one_small_file_of_a_large_pushed_image_transfers_little() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..100u64 {
        std::fs::write(tree.join(format!("noise{i:03}")), noise(1 << 20, i * 2 + 2)).unwrap();
    }
    std::fs::write(tree.join("small.txt"), b"one small file\n").unwrap();
    let image = create_image(&tree, &dir.path().join("big.dwarfs"), &["-S", "20", "-l1"]);
    let size = std::fs::metadata(&image).unwrap().len();
    assert!(
        size > 100 << 20,
        "the image is {size} bytes, not incompressible"
    );
    push(&image, &registry.url("hoard/big:v1"));

    let proxy = CountingProxy::start(registry.port);
    let url = format!("docker://127.0.0.1:{}/hoard/big:v1", proxy.port);
    let small = hoard_remote(&["cat", &url, "small.txt"]);
    assert_eq!(ok(&small, "cat through the proxy"), "one small file\n");
    let served = proxy.served();
    eprintln!("note: one small file of a {size}-byte pushed image: {served} bytes served");
    assert!(
        served * 20 < size,
        "reading one small file transferred {served} of {size} bytes"
    );
}

/// An OCI layout of one small layer, made by umoci; `None` without umoci.
fn umoci_layout(dir: &Path) -> Option<PathBuf> {
    if !has_tool("umoci") {
        skipped("umoci is not installed (scripts/install-deps.sh)");
        return None;
    }
    let layout = dir.join("layout");
    let bundle = dir.join("bundle");
    let layout_tag = format!("{}:t", layout.display());
    output_ok(
        Command::new("umoci")
            .args(["init", "--layout"])
            .arg(&layout),
    );
    output_ok(Command::new("umoci").args(["new", "--image", &layout_tag]));
    output_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image", &layout_tag])
            .arg(&bundle),
    );
    std::fs::write(bundle.join("rootfs/hello.txt"), b"hello from a layer\n").unwrap();
    output_ok(
        Command::new("umoci")
            .args(["repack", "--image", &layout_tag])
            .arg(&bundle),
    );
    Some(layout)
}

#[test]
fn a_container_image_pushed_by_skopeo_reads_as_a_store() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    if !has_tool("skopeo") {
        skipped("skopeo is not installed (scripts/install-deps.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(layout) = umoci_layout(dir.path()) else {
        return;
    };
    let url = registry.url("x:y");
    output_ok(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        &format!("oci:{}:t", layout.display()),
        &url,
    ]));

    let store = Registry::open(&url, &Options::default()).unwrap();
    let fetched = store.manifest(&store.reference()).unwrap();
    assert!(
        fetched.media_type.contains("manifest"),
        "{}",
        fetched.media_type
    );
    let manifest: serde_json::Value = serde_json::from_slice(&fetched.bytes).unwrap();
    // By digest, the same bytes, checked.
    let again = store.manifest(&fetched.digest.to_string()).unwrap();
    assert_eq!(again.bytes, fetched.bytes);
    // Every blob streams through its digest.
    let mut descriptors = vec![manifest["config"].clone()];
    descriptors.extend(manifest["layers"].as_array().unwrap().iter().cloned());
    for d in &descriptors {
        let digest = Digest::parse(d["digest"].as_str().unwrap()).unwrap();
        let size = d["size"].as_u64().unwrap();
        let mut bytes = Vec::new();
        store
            .blob(&digest, size)
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        assert_eq!(bytes.len() as u64, size);
        // A wrong size is refused, never handed out as the blob.
        let mut short = Vec::new();
        let wrong = store
            .blob(&digest, size + 1)
            .and_then(|mut r| r.read_to_end(&mut short).map_err(Into::into));
        assert!(wrong.is_err(), "a blob of the wrong size was accepted");
    }
    // A range of a layer is its bytes.
    let layer = &descriptors[1];
    let digest = Digest::parse(layer["digest"].as_str().unwrap()).unwrap();
    let whole = std::fs::read(registry.blob_file(&digest.to_string())).unwrap();
    assert_eq!(store.blob_range(&digest, 3..40).unwrap(), whole[3..40]);

    // `ls` converts it into the archive cache, as `mount` does.
    let listed = hoard()
        .args(["ls", &url])
        .env("HOARD_REMOTE", REMOTE)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(ok(&listed, "ls of a container image").contains("hello.txt"));

    // Packed from the registry, it is the layout's image.
    let from_registry = dir.path().join("registry.dwarfs");
    let from_layout = dir.path().join("layout.dwarfs");
    hoard_ok(&["create", "-i", &url, "-o", s(&from_registry)]);
    let layout_name = format!("oci:{}:t", layout.display());
    hoard_ok(&["create", "-i", &layout_name, "-o", s(&from_layout)]);
    hoard_ok(&["diff", s(&from_layout), s(&from_registry)]);
    let hello = hoard_ok(&["cat", s(&from_registry), "hello.txt"]);
    assert_eq!(hello, "hello from a layer\n");
}

/// umoci's two-layer image (deletions, an opaque directory, links,
/// devices, xattrs, owners), copied to the registry by skopeo, mounts as
/// umoci's rootfs, converted on the first mount only; a changed layer
/// fails the conversion and leaves the cache empty.
#[test]
fn a_container_image_mounts_from_the_registry_converted_once() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    if !tools_available() {
        return;
    }
    let Some((dir, mnt)) = fuse_tempdir_with("mnt") else {
        return;
    };
    let (layout, rootfs) = umoci_image(dir.path());
    let layout_name = format!("oci:{}:t", layout.display());
    tool_in(
        dir.path(),
        "skopeo",
        &[
            "copy",
            "-q",
            "--dest-tls-verify=false",
            &layout_name,
            &registry.url("app:t"),
        ],
    );
    let proxy = CountingProxy::start(registry.port);
    let url = format!("docker://127.0.0.1:{}/app:t", proxy.port);
    let cache = dir.path().join("cache");
    let cache_option = format!("archive_cache={}", s(&cache));
    let mount = || {
        hoard()
            .args(["mount", &url, s(&mnt), "-o", &cache_option])
            .env("HOARD_REMOTE", REMOTE)
            .output()
            .unwrap()
    };
    // A mount that must succeed: what it said on standard error.
    let mount_ok = || {
        let out = mount();
        ok(&out, "mount of a container image");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // The cache's files: name, inode and modification time.
    let cached = || -> Vec<(String, u64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let entries = std::fs::read_dir(&cache).into_iter().flatten().flatten();
        let mut files: Vec<_> = entries
            .map(|e| {
                let m = e.metadata().unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, m.ino(), m.mtime_nsec())
            })
            .collect();
        files.sort();
        files
    };

    // A layer changed in the registry's storage fails the conversion in
    // one line, and leaves nothing in the cache.
    let store = Registry::open(&registry.url("app:t"), &Options::default()).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&store.manifest("t").unwrap().bytes).unwrap();
    let top = manifest["layers"][1]["digest"].as_str().unwrap();
    let blob = registry.blob_file(top);
    let good = std::fs::read(&blob).unwrap();
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x55;
    std::fs::write(&blob, &bad).unwrap();
    let out = mount();
    assert_eq!(out.status.code(), Some(1), "a changed layer was packed");
    // The line saying it packs, then the error's.
    let said = String::from_utf8_lossy(&out.stderr);
    let err = said.lines().last().unwrap_or_default();
    assert!(err.contains("cannot pack container image"), "{said}");
    assert!(err.contains("digest mismatch"), "{said}");
    assert_eq!(cached(), vec![], "a failed conversion left files");
    std::fs::write(&blob, &good).unwrap();

    // Converted on the first mount, the tree is umoci's (at the cache's
    // resolution of seconds).
    let said = mount_ok();
    let guard = FuseMount(mnt.clone());
    assert!(said.contains("packing"), "{said}");
    let d = differences_below_root(&mnt, &rootfs, "mtime_ns");
    assert!(d.is_empty(), "{d}");
    drop(guard);
    let packed = cached();
    assert_eq!(packed.len(), 1, "{packed:?}");

    // The second mount converts nothing: the image in the cache is the
    // same file, and the registry serves the manifest and config only.
    let before = proxy.served();
    let said = mount_ok();
    let guard = FuseMount(mnt.clone());
    assert!(!said.contains("packing"), "{said}");
    let served = proxy.served() - before;
    assert!(served < 8 << 10, "the second mount fetched {served} bytes");
    assert_eq!(cached(), packed);
    let d = differences_below_root(&mnt, &rootfs, "mtime_ns");
    assert!(d.is_empty(), "{d}");
    drop(guard);

    // `create --layers` fetches each blob once (not the lower layer again
    // for the layer above it), and leaves only the layers behind; they
    // stack as umoci's rootfs.
    let layers = dir.path().join("layers");
    let before = proxy.served();
    let made = hoard()
        .args(["create", "-i", &url, "--layers", s(&layers), "--json"])
        .env("HOARD_REMOTE", REMOTE)
        .output()
        .unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&ok(&made, "create --layers from a registry")).unwrap();
    let served = proxy.served() - before;
    let size = |d: &serde_json::Value| d["size"].as_u64().unwrap();
    let blobs: u64 = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(size)
        .sum();
    let lower = size(&manifest["layers"][0]);
    assert!(
        served < blobs + lower / 2,
        "fetched {served} bytes for {blobs} bytes of layers"
    );
    let paths: Vec<&str> = listed["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    let mut left: Vec<_> = std::fs::read_dir(&layers)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    left.sort();
    let mut expected: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    expected.sort();
    assert_eq!(left, expected);
    let mounted = common::mount_ok(&paths, &mnt, &[]);
    let d = differences_below_root(&mnt, &rootfs, "mtime_ns");
    assert!(d.is_empty(), "{d}");
    drop(mounted);
}

/// The htpasswd line of user `hoard` with password [`PASSWORD`] (bcrypt,
/// cost 4: quick to check), as `htpasswd -B` writes it.
const HTPASSWD: &str = "hoard:$2b$04$xnE5o/bwIcd3My0CnNTYzuJsunAVC/l.E5cVuzPJIKTH9miMt8kNy";
/// The test registry's password (a test value, no secret).
const PASSWORD: &str = "hoard-test-password";

/// `hoard ARGS` with the test's remote options, no auth file, and
/// `credentials` (user, password) in the environment if given.
fn hoard_as(args: &[&str], credentials: Option<(&str, &str)>, home: &Path) -> std::process::Output {
    let mut command = hoard();
    command
        .args(args)
        .env("HOARD_REMOTE", REMOTE)
        .env("HOME", home)
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("DOCKER_CONFIG")
        .env_remove("HOARD_REGISTRY_USER")
        .env_remove("HOARD_REGISTRY_PASSWORD");
    if let Some((user, password)) = credentials {
        command
            .env("HOARD_REGISTRY_USER", user)
            .env("HOARD_REGISTRY_PASSWORD", password);
    }
    command.output().expect("run hoard")
}

#[test]
fn a_registry_that_wants_credentials_gets_them_from_the_environment() {
    let Some(registry) = RegistryServer::start_with_htpasswd(HTPASSWD) else {
        return;
    };
    let (dir, _tree, image) = tree_and_image(&[]);
    let url = registry.url("hoard/private:v1");
    let push = [&["push", "-q"], &[s(&image), url.as_str()][..]].concat();

    // No credentials: one line saying what to set.
    let err = refused(
        &hoard_as(&push, None, dir.path()),
        "push without credentials",
    );
    assert!(err.contains("401"), "{err}");
    assert!(err.contains("HOARD_REGISTRY_USER"), "{err}");
    // Wrong ones: refused, and the password is nowhere in what is said.
    let wrong = Some(("hoard", "not-the-password-x7"));
    let out = hoard_as(&push, wrong, dir.path());
    let err = refused(&out, "push with a wrong password");
    assert!(err.contains("credentials were refused"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not-the-password-x7"));

    // The right ones: pushed, and read back; a reader without them is
    // refused in one line.
    let right = Some(("hoard", PASSWORD));
    let out = hoard_as(&push, right, dir.path());
    ok(&out, "push with the credentials");
    let listed = hoard_as(&["cat", &url, "notes.txt"], right, dir.path());
    assert_eq!(ok(&listed, "cat with the credentials"), "pushed notes\n");
    for out in [&out, &listed] {
        assert!(!String::from_utf8_lossy(&out.stderr).contains(PASSWORD));
    }
    let err = refused(
        &hoard_as(&["ls", &url], None, dir.path()),
        "ls without credentials",
    );
    assert!(err.contains("401") && !err.contains(PASSWORD), "{err}");
}

#[test]
fn registry_failures_are_one_line_errors() {
    let Some(registry) = RegistryServer::start() else {
        return;
    };
    // No such repository or tag: 404.
    let err = refused(
        &hoard_remote(&["ls", &registry.url("no/such:tag")]),
        "ls of a missing image",
    );
    assert!(err.contains("404"), "{err}");
    // Bad names.
    refused(
        &hoard_remote(&["ls", "docker://127.0.0.1/UPPER:x"]),
        "ls of a bad name",
    );
    // Plain HTTP is refused for a host that is not loopback (nothing
    // listens on this TEST-NET address; the refusal comes first or the
    // connection fails: either way one line).
    refused(
        &hoard()
            .args(["ls", "docker://192.0.2.1:1/x:y"])
            .env("HOARD_REMOTE", "remote_timeout=1,remote_retries=0")
            .output()
            .unwrap(),
        "ls of an unreachable registry",
    );
}
