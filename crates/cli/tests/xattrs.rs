//! Extended attributes: a tree with `user.*` attributes (one set shared by
//! several files, a binary value, a hard link), a POSIX ACL and a default
//! ACL, a file capability, a SELinux-like `security.*` label and a
//! `trusted.*` attribute on a symlink is packed; `getfattr`, `getfacl` and
//! `getcap` show the same on the mount, on the extracted tree and after
//! `hoard rewrite`; `--no-xattrs` and `--xattr-filter` leave attributes out;
//! `hoard ls -l` and `hoard info` show them; DwarFS 0.15.3 and the `dwarfs`
//! crate read the image (without the attributes) with equal contents.
//!
//! Setting `trusted.*`, `security.*` and capabilities needs root and a
//! file system that stores them: without either the test records why it
//! skipped.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `program` with `args` in `dir`; its stdout, asserting success.
fn output_in(dir: &Path, program: &str, args: &[&str]) -> String {
    let o = output_ok(Command::new(program).args(args).current_dir(dir));
    String::from_utf8(o.stdout).unwrap()
}

/// A temporary directory on a file system that stores `user.*`,
/// `trusted.*` and `security.*` attributes: the system's temporary
/// directory (a tmpfs may lack some), else the build's.
fn xattr_capable_dir() -> Option<tempfile::TempDir> {
    let candidates = [
        std::env::temp_dir(),
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    ];
    for base in candidates {
        let Ok(dir) = tempfile::tempdir_in(&base) else {
            continue;
        };
        let probe = dir.path().join("probe");
        std::fs::write(&probe, b"").unwrap();
        let stores = ["user.p", "trusted.p", "security.p"]
            .iter()
            .all(|n| xattr::set(&probe, n, b"1").is_ok());
        std::fs::remove_file(&probe).unwrap();
        if stores {
            return Some(dir);
        }
    }
    None
}

/// Builds the tree: returns how many inodes carry attributes.
fn attributed_tree(root: &Path) -> usize {
    std::fs::create_dir_all(root.join("dir/sub")).unwrap();
    std::fs::write(root.join("acl.txt"), b"an ACL\n").unwrap();
    std::fs::write(root.join("dir/ping"), noise(5000, 7)).unwrap();
    std::fs::write(root.join("dir/sub/plain"), b"nothing here\n").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let big = format!("0x{}", "ab".repeat(1500));
    let r = root.to_str().unwrap();
    let set = |program: &str, args: &[&str]| output_in(root, program, args);
    set("setfattr", &["-n", "user.root", "-v", "top", r]);
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(root.join(f), format!("{f}: one set of attributes\n")).unwrap();
        set("setfattr", &["-n", "user.color", "-v", "blue", f]);
        set("setfattr", &["-n", "user.bin", "-v", "0x00ff00fe", f]);
    }
    std::fs::hard_link(root.join("b.txt"), root.join("b-link")).unwrap();
    set(
        "setfattr",
        &[
            "-n",
            "security.selinux",
            "-v",
            "system_u:object_r:bin_t:s0",
            "a.txt",
        ],
    );
    set("setfattr", &["-n", "user.big", "-v", &big, "dir/sub"]);
    set(
        "setfattr",
        &["-h", "-n", "trusted.on-link", "-v", "1", "link"],
    );
    set("setfacl", &["-m", "u:1234:rwx,g:55:r", "acl.txt"]);
    set("setfacl", &["-d", "-m", "g:55:rx", "dir"]);
    set("setcap", &["cap_net_raw+ep", "dir/ping"]);
    // Whole seconds, which the default time resolution keeps.
    set(
        "find",
        &[".", "-exec", "touch", "-h", "-d", "@1699999200", "{}", "+"],
    );
    // root, a.txt, b.txt (+ b-link), c.txt, acl.txt, dir, dir/ping,
    // dir/sub, link; b.txt and c.txt share a set.
    9
}

/// Blocks of `getfattr`-style output (`# file: ...` and its lines), each
/// sorted, without hoard's own `user.dwarfs.*` attributes; blocks left
/// empty are dropped.
fn normalized_blocks(text: &str) -> Vec<String> {
    let mut blocks: Vec<String> = text
        .split("\n\n")
        .filter_map(|block| {
            let mut lines: Vec<&str> = block
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with("user.dwarfs."))
                .collect();
            (lines.len() > 1).then(|| {
                lines[1..].sort_unstable();
                lines.join("\n")
            })
        })
        .collect();
    blocks.sort();
    blocks
}

/// What `getfattr`, `getfacl` and `getcap` say about the tree at `root`,
/// in an order that does not depend on the directory order.
fn attribute_report(root: &Path) -> String {
    let xattrs = output_in(
        root,
        "getfattr",
        &["-h", "-R", "-d", "-m", "-", "-e", "hex", "."],
    );
    let acls = output_in(root, "getfacl", &["-R", "-P", "-n", "."]);
    let mut caps: Vec<String> = output_in(root, "getcap", &["-r", "."])
        .lines()
        .map(str::to_string)
        .collect();
    caps.sort();
    format!(
        "{}\n--- ACLs\n{}\n--- capabilities\n{}",
        normalized_blocks(&xattrs).join("\n\n"),
        normalized_blocks(&acls).join("\n\n"),
        caps.join("\n")
    )
}

fn assert_same_report(expected: &str, root: &Path, what: &str) {
    let got = attribute_report(root);
    assert!(
        got == expected,
        "{what}: attributes differ\n--- expected\n{expected}\n--- got\n{got}"
    );
}

/// The tree and its report, or `None` (recorded) when this machine cannot
/// hold such a tree.
fn setup() -> Option<(tempfile::TempDir, PathBuf, String, usize)> {
    if !is_root() {
        skipped("trusted.*, security.* and capabilities can only be set as root");
        return None;
    }
    let missing: Vec<&str> = [
        "setfattr", "getfattr", "setfacl", "getfacl", "setcap", "getcap",
    ]
    .into_iter()
    .filter(|t| !has_tool(t))
    .collect();
    if !missing.is_empty() {
        skipped(&format!(
            "{} missing (scripts/install-deps.sh installs them)",
            missing.join(", ")
        ));
        return None;
    }
    let Some(dir) = xattr_capable_dir() else {
        skipped("no temporary directory stores user, trusted and security attributes");
        return None;
    };
    let tree = dir.path().join("tree");
    let with_attrs = attributed_tree(&tree);
    let report = attribute_report(&tree);
    for needle in [
        "user.bin=0x00ff00fe",
        "system.posix_acl_access",
        "cap_net_raw",
    ] {
        assert!(report.contains(needle), "{needle} not set: {report}");
    }
    Some((dir, tree, report, with_attrs))
}

#[test]
fn attributes_survive_pack_mount_extract_and_rewrite() {
    let Some((dir, tree, report, with_attrs)) = setup() else {
        return;
    };
    let image = create_image(&tree, &dir.path().join("x.dwarfs"), &[]);
    let img = image.to_str().unwrap();

    let listing = hoard_ok(&["ls", "-lR", img]);
    // Every entry but dir/sub/plain (the root is not listed).
    for line in listing.lines() {
        let mode = line.split_whitespace().next().unwrap();
        assert_eq!(mode.ends_with('@'), !line.ends_with("plain"), "{listing}");
    }
    assert_eq!(listing.lines().count(), 10, "{listing}");

    let info: serde_json::Value =
        serde_json::from_str(&hoard_ok(&["info", "--json", img])).unwrap();
    // The root counts as an inode with attributes; b.txt and b-link share one.
    assert_eq!(info["xattrs"]["inodes"], with_attrs, "{info}");
    assert!(info["xattrs"]["sets"].as_u64().unwrap() < with_attrs as u64);

    let out = dir.path().join("out");
    extract_ok(&[s(&image)], &out);
    assert_same_report(&report, &out, "extracted");
    assert_same_manifest(&manifest_of(&tree), &manifest_of(&out), Compare::Extracted);

    for (name, args) in [
        ("recompressed", &["-l", "1"][..]),
        ("rebuilt", &["--rebuild-metadata", "-P", "all"][..]),
    ] {
        let rewritten = rewrite_image(&[img], &dir.path().join(format!("{name}.dwarfs")), args);
        let out = dir.path().join(name);
        extract_ok(&[s(&rewritten)], &out);
        assert_same_report(&report, &out, name);
    }

    if fuse_available() {
        let mnt = dir.path().join("mnt");
        let guard = mount_ok(&[img], &mnt, &[]);
        assert_same_report(&report, &mnt, "mounted");
        // hoard's own attributes are still there.
        let own = output_in(&mnt, "getfattr", &["-n", "user.dwarfs.inodeinfo", "a.txt"]);
        assert!(own.contains("chunks"), "{own}");
        drop(guard);
    }
}

#[test]
fn attributes_can_be_left_out_or_filtered() {
    let Some((dir, tree, report, _)) = setup() else {
        return;
    };
    let none = create_image(&tree, &dir.path().join("none.dwarfs"), &["--no-xattrs"]);
    let listing = hoard_ok(&["ls", "-lR", none.to_str().unwrap()]);
    assert!(!listing.contains('@'), "{listing}");
    let info: serde_json::Value =
        serde_json::from_str(&hoard_ok(&["info", "--json", none.to_str().unwrap()])).unwrap();
    assert!(info["xattrs"].is_null(), "{info}");

    let image = create_image(&tree, &dir.path().join("all.dwarfs"), &[]);
    let skipped_out = dir.path().join("skipped");
    extract_ok(&[s(&image), "--no-xattrs"], &skipped_out);
    let bare = attribute_report(&skipped_out);
    assert!(!bare.contains("user.") && !bare.contains("cap_"), "{bare}");

    let users = create_image(
        &tree,
        &dir.path().join("user.dwarfs"),
        &["--xattr-filter", r"^user\."],
    );
    let out = dir.path().join("users");
    extract_ok(&[s(&users)], &out);
    let got = attribute_report(&out);
    let wanted: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("user.") || l.starts_with("# file:"))
        .collect();
    for l in wanted.iter().filter(|l| l.starts_with("user.")) {
        assert!(got.contains(l), "{l} missing: {got}");
    }
    for absent in ["security.", "trusted.", "system.", "cap_"] {
        assert!(!got.contains(absent), "{absent} kept: {got}");
    }

    let bad = dir.path().join("bad.dwarfs");
    one_line_error(&create_args(&tree, &bad, &["--xattr-filter", "("]));
    assert!(!dir.path().join("bad.dwarfs").exists());
}

#[test]
fn dwarfs_reads_images_with_attributes() {
    let Some((dir, tree, _, _)) = setup() else {
        return;
    };
    let image = create_image(&tree, &dir.path().join("x.dwarfs"), &[]);
    let file = std::fs::File::open(&image).unwrap();
    let (index, mut archive) = dwarfs::Archive::new(file)
        .unwrap_or_else(|e| panic!("the dwarfs crate refuses the image: {e}"));
    oracle_compare(&tree, &[], &index, &mut archive);

    if dwarfs_bin().is_none() {
        skipped("../shared/anchors/dwarfs-0.15.3 missing: DwarFS 0.15.3 not run");
        return;
    }
    let img = image.to_str().unwrap();
    for args in [
        &["-i", img, "--check-integrity"][..],
        &["-i", img, "-d", "7"][..],
        &["-i", img, "-j"][..],
    ] {
        output_ok(tool("dwarfsck").args(args));
    }
    // DwarFS extracts the tree without its attributes.
    let expected = without_xattrs(&manifest_of(&tree));
    let out = dir.path().join("dwarfsextract");
    std::fs::create_dir(&out).unwrap();
    output_ok(tool("dwarfsextract").args(["-i", img, "-o", s(&out)]));
    // dwarfsextract leaves the time of the output directory as it is.
    let below_root = |m: &str| -> String {
        m.lines()
            .filter(|l| !l.contains(r#""path": ".""#) && !l.contains(r#""path":".""#))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_same_manifest(
        &below_root(&expected),
        &below_root(&manifest_of(&out)),
        Compare::Extracted,
    );
    if fuse_available() {
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        output_ok(tool("dwarfs").args([img, s(&mnt), "-o", "ro"]));
        let guard = FuseMount(mnt.clone());
        assert_same_manifest(&expected, &manifest_of(&mnt), Compare::Mounted);
        drop(guard);
    }
}

#[test]
fn acls_are_enforced_on_a_mount_with_default_permissions() {
    let Some((dir, _, _, _)) = setup() else {
        return;
    };
    if !fuse_available() {
        skipped("FUSE is not available");
        return;
    }
    let src = dir.path().join("acl");
    std::fs::create_dir(&src).unwrap();
    for f in ["granted", "denied"] {
        std::fs::write(src.join(f), format!("{f}\n")).unwrap();
        output_in(&src, "chmod", &["600", f]);
    }
    // User 1234 may read `granted` through its ACL only.
    output_in(&src, "setfacl", &["-m", "u:1234:r", "granted"]);
    let image = create_image(&src, &dir.path().join("acl.dwarfs"), &[]);
    let mnt = dir.path().join("mnt");
    let guard = mount_ok(
        &[s(&image)],
        &mnt,
        &["-o", "allow_other,default_permissions"],
    );
    let read_as_1234 = |f: &str| as_user_in(1234, &mnt, "cat").arg(f).output().unwrap();
    let granted = read_as_1234("granted");
    assert!(
        granted.status.success() && granted.stdout == b"granted\n",
        "{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    assert!(!read_as_1234("denied").status.success());
    drop(guard);
}

#[test]
fn another_user_extracts_the_user_attributes() {
    let Some((dir, tree, _, _)) = setup() else {
        return;
    };
    // Read-only, with user and security attributes.
    output_in(&tree, "chmod", &["444", "a.txt"]);
    create_image(&tree, &dir.path().join("x.dwarfs"), &[]);
    let out = dir.path().join("user");
    std::fs::create_dir(&out).unwrap();
    output_in(dir.path(), "chown", &["1234:1234", "user"]);
    // User 1234 reaches the image, the output and hoard from `dir` only.
    output_in(dir.path(), "chmod", &["755", "."]);
    hoard_copy_in(dir.path());
    output_ok(as_user_in(1234, dir.path(), "./hoard").args([
        "extract",
        "x.dwarfs",
        "-o",
        "user/tree",
    ]));
    let a = out.join("tree/a.txt");
    assert_eq!(
        xattr::get(&a, "user.color").unwrap().as_deref(),
        Some(&b"blue"[..])
    );
    assert_eq!(xattr::get(&a, "security.selinux").unwrap(), None);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&a).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o444);
}
