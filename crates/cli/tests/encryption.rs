//! Encrypted images: written to an age recipient, an SSH key or a
//! passphrase; nothing of the tree shows in the image bytes; read back
//! (mount, cat, info, rewrite --decrypt) only with the right secret;
//! encrypted and signed together.

mod common;

use common::{
    age_identity, assert_refused_never_wrong, create_image, dwarfs_bin, files_using_block,
    fuse_available, hoard, manifest_diff, manifest_of, noise_tree, ok, refused, run, s, skipped,
    ssh_key_pair, tampered, tool, Compare, FuseMount, SectionList,
};
use hoard_format::section::SectionType;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Files in the test tree, 40 KiB of noise each ([`noise_tree`]), and a
/// text file.
const FILES: usize = 6;

/// The path of noise file `i` in the test tree.
fn secret_file(i: usize) -> String {
    let sub = if i.is_multiple_of(3) {
        "quarterly-plans/"
    } else {
        ""
    };
    format!("{sub}confidential-{i:02}.bin")
}

struct Fixture {
    dir: tempfile::TempDir,
    tree: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let (dir, tree) = noise_tree(FILES, secret_file);
        let text: String = (0..400)
            .map(|i| format!("line {i} of the merger memo, do not share\n"))
            .collect();
        std::fs::write(tree.join("merger-memo.txt"), text).unwrap();
        std::os::unix::fs::symlink("merger-memo.txt", tree.join("memo-link")).unwrap();
        Fixture { tree, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An image of the tree, 64 KiB blocks, with `extra` options.
    fn image(&self, name: &str, extra: &[&str]) -> PathBuf {
        let mut args = vec!["-S", "16", "-l3", "--time-resolution=ns"];
        args.extend_from_slice(extra);
        create_image(&self.tree, &self.path(name), &args)
    }

    /// The regular files of the tree, relative paths.
    fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = (0..FILES).map(secret_file).collect();
        files.push("merger-memo.txt".into());
        files
    }
}

/// The name of the user and group owning the tree (as `id` gives them).
fn owner_names() -> Vec<String> {
    ["-un", "-gn"]
        .iter()
        .map(|flag| {
            let out = std::process::Command::new("id").arg(flag).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect()
}

/// Fails if the image bytes hold a file name of the tree, any 16-byte
/// run of any file's contents, or the name of the tree's owner.
fn assert_hides_the_tree(fx: &Fixture, image: &Path) {
    let bytes = std::fs::read(image).unwrap();
    let runs: HashSet<&[u8]> = bytes.windows(16).collect();
    for path in fx.files() {
        let contents = std::fs::read(fx.tree.join(&path)).unwrap();
        let leaked = contents.windows(16).position(|w| runs.contains(w));
        assert_eq!(leaked, None, "{path}: a 16-byte run shows in the image");
    }
    let mut names: Vec<String> = fx
        .files()
        .iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    names.extend(["quarterly-plans".into(), "memo-link".into()]);
    for name in owner_names() {
        if name.len() >= 4 {
            names.push(name);
        } else {
            skipped("owner names shorter than 4 bytes are not searched for");
        }
    }
    for name in names {
        let found = bytes.windows(name.len()).any(|w| w == name.as_bytes());
        assert!(!found, "'{name}' shows in the image");
    }
}

/// The payload of the image's key section: hoard's 16-byte head, then an
/// age file.
fn key_section_age_file(image: &Path) -> Vec<u8> {
    let img = hoard_reader::Image::open(image, &Default::default()).unwrap();
    let section = img.find(SectionType::HOARD_KEY).expect("a key section");
    img.verified_payload(section).unwrap()[16..].to_vec()
}

#[test]
fn an_image_encrypted_to_an_age_recipient_hides_the_tree_and_mounts_with_the_identity() {
    let fx = Fixture::new();
    let (identity, recipient) = age_identity(fx.dir.path(), "id.txt");
    let (wrong, _) = age_identity(fx.dir.path(), "wrong.txt");
    let image = fx.image("enc.dwarfs", &["--encrypt-to", &recipient]);
    assert_hides_the_tree(&fx, &image);

    // The wrapped key is a genuine age file: `age -d` opens it.
    let wrapped = fx.path("wrapped.age");
    std::fs::write(&wrapped, key_section_age_file(&image)).unwrap();
    let out = std::process::Command::new("age")
        .args(["-d", "-i", s(&identity), s(&wrapped)])
        .output()
        .unwrap();
    ok(&out, "age -d");
    assert_eq!(out.stdout.len(), 32, "a 32-byte data key");

    // Without a key: info says only how it is encrypted; reads refuse.
    let info = ok(&run(&["info", s(&image)]), "info without a key");
    assert_eq!(
        info.trim(),
        "encrypted for 1 recipient (--identity FILE or --passphrase-file FILE opens it)"
    );
    let err = refused(&run(&["ls", s(&image)]), "ls without a key");
    assert!(err.contains("is encrypted (for 1 recipient)"), "{err}");
    let err = refused(
        &run(&["ls", s(&image), "--identity", s(&wrong)]),
        "ls with a wrong key",
    );
    assert!(err.contains("no identity given opens this image"), "{err}");
    let info = ok(
        &run(&["info", s(&image), "--identity", s(&identity)]),
        "info with the key",
    );
    assert!(
        info.contains("encrypted") && info.contains("blocks"),
        "{info}"
    );
    let memo = hoard()
        .args(["cat", s(&image), "merger-memo.txt"])
        .env("HOARD_IDENTITY", &identity)
        .output()
        .unwrap();
    assert!(
        ok(&memo, "cat with HOARD_IDENTITY").as_bytes()
            == std::fs::read(fx.tree.join("merger-memo.txt")).unwrap()
    );

    if !fuse_available() {
        return;
    }
    let mnt = fx.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let option = format!("identity={}", s(&identity));
    ok(&run(&["mount", s(&image), s(&mnt), "-o", &option]), "mount");
    let mount = FuseMount(mnt.clone());
    let diff = manifest_diff(&manifest_of(&fx.tree), &manifest_of(&mnt), Compare::Mounted);
    drop(mount);
    assert!(diff.is_empty(), "mounted tree differs:\n{diff}");
    let err = refused(&run(&["mount", s(&image), s(&mnt)]), "mount without a key");
    assert!(err.contains("is encrypted"), "{err}");
}

#[test]
fn ssh_key_and_passphrase_images_open_with_their_secret_only() {
    let fx = Fixture::new();
    let original = std::fs::read(fx.tree.join("merger-memo.txt")).unwrap();
    let (key, public) = ssh_key_pair(fx.dir.path(), "ssh", "ed25519");
    let (other, _) = ssh_key_pair(fx.dir.path(), "other", "ed25519");
    let image = fx.image("ssh.dwarfs", &["--encrypt-to", s(&public)]);
    assert_hides_the_tree(&fx, &image);
    let cat = |image: &Path, extra: &[&str]| {
        let mut args = vec!["cat", s(image), "merger-memo.txt"];
        args.extend_from_slice(extra);
        run(&args)
    };
    assert!(ok(&cat(&image, &["--identity", s(&key)]), "cat, SSH key").as_bytes() == original);
    let err = refused(&cat(&image, &["--identity", s(&other)]), "another SSH key");
    assert!(err.contains("no identity given opens"), "{err}");
    // An ssh-rsa recipient, and its private key as the identity.
    let (rsa, rsa_public) = ssh_key_pair(fx.dir.path(), "rsa", "rsa");
    let rsa_image = fx.image("rsa.dwarfs", &["--encrypt-to", s(&rsa_public)]);
    assert_hides_the_tree(&fx, &rsa_image);
    let read = cat(&rsa_image, &["--identity", s(&rsa)]);
    assert!(ok(&read, "cat, RSA key").as_bytes() == original);
    let err = refused(
        &cat(&rsa_image, &["--identity", s(&key)]),
        "the ed25519 key",
    );
    assert!(err.contains("no identity given opens"), "{err}");

    let secret = fx.path("passphrase");
    std::fs::write(&secret, "correct horse battery staple\n").unwrap();
    let wrong = fx.path("wrong-passphrase");
    std::fs::write(&wrong, "incorrect horse\n").unwrap();
    for f in [&secret, &wrong] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let image = fx.image("pass.dwarfs", &["--passphrase-file", s(&secret)]);
    assert_hides_the_tree(&fx, &image);
    let info = ok(&run(&["info", s(&image)]), "info without the passphrase");
    assert!(info.starts_with("encrypted with a passphrase"), "{info}");
    let read = cat(&image, &["--passphrase-file", s(&secret)]);
    assert!(ok(&read, "cat with the passphrase").as_bytes() == original);
    let err = refused(
        &cat(&image, &["--passphrase-file", s(&wrong)]),
        "a wrong passphrase",
    );
    assert!(err.contains("wrong passphrase"), "{err}");
    assert!(
        !err.contains("horse"),
        "the error shows the passphrase: {err}"
    );
    if !fuse_available() {
        return;
    }
    let mnt = fx.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let option = format!("passphrase_file={}", s(&secret));
    ok(&run(&["mount", s(&image), s(&mnt), "-o", &option]), "mount");
    let mount = FuseMount(mnt.clone());
    let diff = manifest_diff(&manifest_of(&fx.tree), &manifest_of(&mnt), Compare::Mounted);
    drop(mount);
    assert!(diff.is_empty(), "mounted tree differs:\n{diff}");
    let option = format!("passphrase_file={}", s(&wrong));
    let err = refused(
        &run(&["mount", s(&image), s(&mnt), "-o", &option]),
        "mount with a wrong passphrase",
    );
    assert!(
        err.contains("wrong passphrase") && !err.contains("horse"),
        "{err}"
    );
}

#[test]
fn rewrite_decrypt_gives_an_image_dwarfs_reads() {
    let fx = Fixture::new();
    let (identity, recipient) = age_identity(fx.dir.path(), "id.txt");
    let image = fx.image("enc.dwarfs", &["--encrypt-to", &recipient]);
    let plain = fx.path("plain.dwarfs");
    let err = refused(
        &run(&[
            "rewrite",
            s(&image),
            "-o",
            s(&plain),
            "--identity",
            s(&identity),
        ]),
        "rewrite of an encrypted image without --decrypt",
    );
    assert!(err.contains("--decrypt"), "{err}");
    ok(
        &run(&[
            "rewrite",
            s(&image),
            "-o",
            s(&plain),
            "--decrypt",
            "--identity",
            s(&identity),
            "--no-progress",
        ]),
        "rewrite --decrypt",
    );
    let diff = manifest_diff(
        &manifest_of(&fx.tree),
        &manifest_of(&plain),
        Compare::Extracted,
    );
    assert!(diff.is_empty(), "decrypted image differs:\n{diff}");
    if dwarfs_bin().is_none() {
        return;
    }
    let out = tool("dwarfsck")
        .args(["-i", s(&plain), "--check-integrity"])
        .output()
        .unwrap();
    ok(&out, "dwarfsck --check-integrity");
}

/// Every change to an encrypted image's structure, its sections
/// renumbered, their hashes and the section index made to match again,
/// is refused: no read gives other bytes than the file's.
#[test]
fn a_changed_structure_is_refused_and_no_read_gives_other_bytes() {
    let fx = Fixture::new();
    let (identity, recipient) = age_identity(fx.dir.path(), "id.txt");
    let image = fx.image("enc.dwarfs", &["--encrypt-to", &recipient]);
    // Another image to the same recipient: another data key.
    let other = SectionList::read(&fx.image("other.dwarfs", &["--encrypt-to", &recipient]));
    let list = SectionList::read(&image);
    let blocks = (0..list.sections.len())
        .filter(|&i| list.kind(i) == SectionType::BLOCK)
        .count();
    assert!(blocks >= 3, "{blocks} blocks");
    let block = |n: usize| list.nth(SectionType::BLOCK, n);
    let changed = |change: &dyn Fn(&mut SectionList)| {
        let mut l = list.clone();
        change(&mut l);
        l
    };
    let cases: Vec<(&str, SectionList)> = vec![
        // The attack of issue 45: block 1 becomes a section of a type no
        // reader knows, and block 2 would be read as block 1.
        (
            "retyped-unknown",
            changed(&|l| l.retype(block(1), SectionType(0x7777))),
        ),
        (
            "retyped-history",
            changed(&|l| l.retype(block(1), SectionType::HISTORY)),
        ),
        (
            "retyped-recovery",
            changed(&|l| l.retype(block(1), SectionType::HOARD_RECOVERY)),
        ),
        (
            "retyped-last",
            changed(&|l| l.retype(block(blocks - 1), SectionType::HISTORY)),
        ),
        ("dropped", changed(&|l| drop(l.sections.remove(block(1))))),
        (
            "dropped-last",
            changed(&|l| drop(l.sections.remove(block(blocks - 1)))),
        ),
        (
            "reordered",
            changed(&|l| l.sections.swap(block(1), block(2))),
        ),
        (
            "duplicated",
            changed(&|l| {
                let copy = l.sections[block(1)].clone();
                l.sections.insert(block(1), copy);
            }),
        ),
        (
            "spliced",
            changed(&|l| {
                l.sections[block(1)] = other.sections[other.nth(SectionType::BLOCK, 1)].clone()
            }),
        ),
        (
            "spliced-metadata",
            changed(&|l| {
                let at = l.nth(SectionType::METADATA_V2, 0);
                l.sections[at] = other.sections[other.nth(SectionType::METADATA_V2, 0)].clone();
            }),
        ),
        // The key section hidden, so that the image would read as plain.
        (
            "key-unknown",
            changed(&|l| l.retype(0, SectionType(0x7777))),
        ),
        ("key-block", changed(&|l| l.retype(0, SectionType::BLOCK))),
        ("key-dropped", changed(&|l| drop(l.sections.remove(0)))),
    ];
    for (what, l) in cases {
        let bad = l.write(&fx.path(&format!("{what}.dwarfs")));
        let err =
            assert_refused_never_wrong(&bad, &fx.files(), &fx.tree, &["--identity", s(&identity)]);
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert_refused_never_wrong(&bad, &fx.files(), &fx.tree, &[]);
    }
    let err = refused(
        &run(&["ls", s(&fx.path("key-unknown.dwarfs"))]),
        "a hidden key section",
    );
    assert!(err.contains("key section was given another type"), "{err}");
}

#[test]
fn an_encrypted_and_signed_image_verifies_without_the_key_and_refuses_a_changed_block() {
    let fx = Fixture::new();
    let (identity, recipient) = age_identity(fx.dir.path(), "id.txt");
    let name = fx.path("signer");
    ok(&run(&["keygen", "-o", s(&name)]), "keygen");
    let (key, public) = (fx.path("signer.key"), fx.path("signer.pub"));
    let image = fx.image(
        "both.dwarfs",
        &["--encrypt-to", &recipient, "--sign", s(&key)],
    );
    ok(
        &run(&["verify", s(&image), "--trust", s(&public)]),
        "verify",
    );
    let plain = fx.path("plain.dwarfs");
    ok(
        &run(&[
            "rewrite",
            s(&image),
            "-o",
            s(&plain),
            "--decrypt",
            "--recompress",
            "none",
            "--identity",
            s(&identity),
            "--no-progress",
        ]),
        "rewrite --decrypt",
    );
    let block = 1;
    let hit = files_using_block(&plain, &fx.files(), block);
    let missed: Vec<String> = fx
        .files()
        .into_iter()
        .filter(|f| !hit.contains(f))
        .collect();
    assert!(!hit.is_empty() && !missed.is_empty());

    let bad = tampered(
        &image,
        &fx.path("bad.dwarfs"),
        SectionType::BLOCK,
        block as usize,
    );
    let out = run(&["verify", s(&bad), "--trust", s(&public)]);
    assert_eq!(out.status.code(), Some(1), "verify of a changed block");

    // `check` without the key checks the sections and the signature, and
    // says in one line that the contents were not checked; with the key,
    // everything.
    for trust in [vec![], vec!["--trust", s(&public)]] {
        let mut args = vec!["check", s(&image)];
        args.extend_from_slice(&trust);
        let said = ok(&run(&args), "check without the key");
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(
            said.contains("no problems found in its sections")
                && said.contains("contents (metadata, files) were not checked"),
            "{said}"
        );
    }
    let out = run(&["check", s(&bad), "--trust", s(&public)]);
    assert_eq!(out.status.code(), Some(1), "check of a changed block");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match the image signature"));
    let mut bytes = std::fs::read(&image).unwrap();
    let img = hoard_reader::Image::open(&image, &Default::default()).unwrap();
    let section = img.find(SectionType::BLOCK).unwrap().clone();
    bytes[(section.payload_offset() + 100) as usize] ^= 0x01;
    let damaged = fx.path("damaged.dwarfs");
    std::fs::write(&damaged, bytes).unwrap();
    let out = run(&["check", s(&damaged)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "check of a damaged block without the key"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("mismatch"));
    let said = ok(
        &run(&["check", "--full", s(&image), "--identity", s(&identity)]),
        "check --full with the key",
    );
    assert_eq!(said.trim(), format!("{}: no problems found", s(&image)));
    for keys in [
        vec!["--identity", s(&identity), "--trust", s(&public)],
        vec!["--identity", s(&identity)],
    ] {
        let read = |path: &str| {
            let mut args = vec!["cat", s(&bad), path];
            args.extend_from_slice(&keys);
            run(&args)
        };
        let some_hit = hit.iter().next().unwrap();
        assert!(
            !read(some_hit).status.success(),
            "{some_hit} read with {keys:?}"
        );
        let out = read(&missed[0]);
        ok(&out, "cat of an untouched file");
        assert!(out.stdout == std::fs::read(fx.tree.join(&missed[0])).unwrap());
    }
    if !fuse_available() {
        skipped("FUSE is not available");
        return;
    }
    let mnt = fx.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let option = format!("identity={},trust={}", s(&identity), s(&public));
    ok(&run(&["mount", s(&bad), s(&mnt), "-o", &option]), "mount");
    let mount = FuseMount(mnt.clone());
    let some_hit = hit.iter().next().unwrap();
    let err = std::fs::read(mnt.join(some_hit)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{some_hit}: {err}");
    assert!(
        std::fs::read(mnt.join(&missed[0])).unwrap()
            == std::fs::read(fx.tree.join(&missed[0])).unwrap()
    );
    drop(mount);
}

#[test]
fn encrypted_bases_and_parts_open_with_the_identity_in_create_rewrite_and_merge() {
    let fx = Fixture::new();
    let (identity, recipient) = age_identity(fx.dir.path(), "id.txt");
    let base = fx.image("base.dwarfs", &["--encrypt-to", &recipient]);
    // The next version of the tree: a file changed, one gone, one new.
    let next = fx.path("next");
    let out = std::process::Command::new("cp")
        .args(["-a", s(&fx.tree), s(&next)])
        .output()
        .unwrap();
    ok(&out, "cp -a");
    let mut memo = std::fs::read(next.join("merger-memo.txt")).unwrap();
    memo.extend_from_slice(b"one more line\n");
    std::fs::write(next.join("merger-memo.txt"), memo).unwrap();
    std::fs::remove_file(next.join("confidential-01.bin")).unwrap();
    std::fs::write(next.join("new.txt"), b"new in the layer\n").unwrap();

    let layer = fx.path("layer.dwarfs");
    let create = |extra: &[&str]| {
        let mut args = vec![
            "create",
            "-i",
            s(&next),
            "-o",
            s(&layer),
            "--base",
            s(&base),
            "--delta",
            "-S",
            "16",
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let err = refused(&create(&[]), "a layer on an encrypted base without a key");
    assert!(err.contains("--identity FILE"), "{err}");
    let err = refused(
        &create(&["--identity", s(&identity)]),
        "a plain layer on an encrypted base",
    );
    assert!(err.contains("--decrypt"), "{err}");
    ok(
        &create(&["--identity", s(&identity), "--encrypt-to", &recipient]),
        "an encrypted delta layer on an encrypted base",
    );
    assert_hides_the_tree(&fx, &layer);

    // Flattened (blocks reused, then recompressed) and merged, decrypted;
    // times compared to the second (the layer and merge keep no more).
    let seconds = |manifest: String| -> String {
        let lines = manifest.lines().map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("mtime_ns");
            v.to_string() + "\n"
        });
        lines.collect()
    };
    for recompress in ["none", "all"] {
        let flat = fx.path(&format!("flat-{recompress}.dwarfs"));
        ok(
            &run(&[
                "rewrite",
                s(&base),
                s(&layer),
                "-o",
                s(&flat),
                "--recompress",
                recompress,
                "--identity",
                s(&identity),
                "--decrypt",
                "--no-progress",
            ]),
            "rewrite BASE LAYER -o FLAT",
        );
        let diff = manifest_diff(
            &seconds(manifest_of(&next)),
            &seconds(manifest_of(&flat)),
            Compare::Extracted,
        );
        assert!(diff.is_empty(), "flattened ({recompress}) differs:\n{diff}");
    }
    let merged = fx.path("merged.dwarfs");
    let out = hoard()
        .args(["merge", s(&base), "--union", "-o", s(&merged), "--decrypt"])
        .args(["--no-progress"])
        .env("HOARD_IDENTITY", &identity)
        .output()
        .unwrap();
    ok(&out, "merge of an encrypted part with HOARD_IDENTITY");
    let diff = manifest_diff(
        &seconds(manifest_of(&fx.tree)),
        &seconds(manifest_of(&merged)),
        Compare::Extracted,
    );
    assert!(diff.is_empty(), "merged differs:\n{diff}");
}
