//! Signed images: keys (hoard's and OpenSSH's), `sign`, `verify`, and
//! reads checked against the signature (`--trust`) that refuse what an
//! attacker changed, even with the section hashes made to match again.

mod common;

use common::{
    assert_refused_never_wrong, create_image, dwarfs_bin, dwarfs_check_and_extract,
    files_using_block, fuse_available, hoard, hoard_fails, hoard_ok, noise_tree, ok,
    one_line_error, refused, rehash, run, s, skipped, tamper_section, tampered, with_recovery_of,
    SectionList,
};
use hoard_format::section::SectionType;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Files in the test tree, 40 KiB of noise each ([`noise_tree`]).
const FILES: usize = 12;

/// The path of noise file `i` in the test tree.
fn noise_file(i: usize) -> String {
    format!("{}f{i:02}", if i.is_multiple_of(4) { "sub/" } else { "" })
}

struct Fixture {
    dir: tempfile::TempDir,
    tree: PathBuf,
    /// hoard's key pair.
    key: PathBuf,
    public: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let (dir, tree) = noise_tree(FILES, noise_file);
        std::fs::write(tree.join("notes.txt"), b"signed notes\n").unwrap();
        std::os::unix::fs::symlink("notes.txt", tree.join("link")).unwrap();
        let name = dir.path().join("hoard");
        ok(
            &run(&["keygen", "-o", name.to_str().unwrap(), "-C", "tests"]),
            "keygen",
        );
        Fixture {
            key: dir.path().join("hoard.key"),
            public: dir.path().join("hoard.pub"),
            tree,
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An image of the tree, 64 KiB blocks, with `extra` options.
    fn image(&self, name: &str, extra: &[&str]) -> PathBuf {
        let mut args = vec!["-S", "16", "-l1"];
        args.extend_from_slice(extra);
        create_image(&self.tree, &self.path(name), &args)
    }

    /// `hoard COMMAND INPUT -o NAME` (a file of the fixture) with `args`,
    /// which must succeed; the path of what it wrote.
    fn made(&self, command: &str, input: &Path, name: &str, args: &[&str]) -> PathBuf {
        let out = self.path(name);
        let mut all = vec![command, s(input), "-o", s(&out)];
        all.extend_from_slice(args);
        ok(&run(&all), &format!("{command} {args:?}"));
        out
    }
}

/// `hoard verify IMAGE --trust PUB`.
fn verify(image: &Path, public: &Path) -> Output {
    run(&["verify", s(image), "--trust", s(public)])
}

/// The test tree's files of noise, as paths in the image.
fn noise_files() -> Vec<String> {
    (0..FILES).map(noise_file).collect()
}

/// The files of the test tree with data in block `block` of `image`.
fn files_in_block(image: &Path, block: u32) -> BTreeSet<String> {
    files_using_block(image, &noise_files(), block)
}

#[test]
fn keygen_sign_and_verify_with_hoard_and_openssh_keys() {
    let fx = Fixture::new();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fx.key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let secret_line = std::fs::read_to_string(&fx.key).unwrap();
    let secret = secret_line
        .lines()
        .last()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string();

    // `hoard sign` of an unsigned image, in place.
    let image = fx.image("plain.dwarfs", &[]);
    let unsigned = fx.path("unsigned.dwarfs");
    std::fs::copy(&image, &unsigned).unwrap();
    let out = run(&["sign", s(&image), "--key", s(&fx.key)]);
    let said = ok(&out, "sign");
    assert!(!said.contains(&secret) && !String::from_utf8_lossy(&out.stderr).contains(&secret));
    ok(&verify(&image, &fx.public), "verify");
    ok(
        &run(&["check", "--full", s(&image)]),
        "check of a signed image",
    );

    // `create --sign` with an OpenSSH key, as ssh-keygen makes it.
    let ssh = fx.path("id_ed25519");
    let made = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "tests",
            "-f",
            s(&ssh),
        ])
        .output()
        .unwrap();
    ok(&made, "ssh-keygen");
    let ssh_image = fx.image("ssh.dwarfs", &["--sign", s(&ssh)]);
    let ssh_pub = fx.path("id_ed25519.pub");
    ok(&verify(&ssh_image, &ssh_pub), "verify with the OpenSSH key");
    let with_ssh = ["--sign", s(&ssh), "--recovery", "5"];
    let rewritten = fx.made("rewrite", &unsigned, "rewritten.dwarfs", &with_ssh);
    ok(&verify(&rewritten, &ssh_pub), "verify of a rewritten image");
    let listed = ok(
        &run(&["ls", "-R", s(&ssh_image), "--trust", s(&ssh_pub)]),
        "ls --trust",
    );
    assert!(listed.contains("f05"), "{listed}");

    // A wrong key, an unsigned image: one-line refusals.
    let err = refused(&verify(&ssh_image, &fx.public), "verify with the wrong key");
    assert!(err.contains("not trusted"), "{err}");
    let err = refused(
        &verify(&unsigned, &fx.public),
        "verify of an unsigned image",
    );
    assert!(err.contains("not signed"), "{err}");
    let out = hoard()
        .args(["cat", s(&unsigned), "notes.txt"])
        .env("HOARD_TRUST", &fx.public)
        .output()
        .unwrap();
    refused(&out, "cat of an unsigned image with HOARD_TRUST");
    let out = hoard()
        .args(["cat", s(&image), "notes.txt"])
        .env("HOARD_TRUST", &fx.public)
        .output()
        .unwrap();
    assert_eq!(ok(&out, "cat with HOARD_TRUST"), "signed notes\n");

    // A secret key others may read is used, with a warning.
    std::fs::set_permissions(&fx.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&[
        "sign",
        s(&unsigned),
        "-o",
        s(&fx.path("again.dwarfs")),
        "--key",
        s(&fx.key),
    ]);
    ok(&out, "sign with a shared key");
    assert!(String::from_utf8_lossy(&out.stderr).contains("accessible by others"));
}

/// Signatures of layout version 1 (SHA-512/256 section hashes, before
/// BLAKE3) still verify and read: the fuzz seed `s1.dwarfs` was signed
/// by such a hoard; signing it again writes layout version 2.
#[test]
fn a_signature_of_layout_version_1_still_verifies() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/signed_image");
    let (v1, public) = (seeds.join("s1.dwarfs"), seeds.join("key.pub"));
    let layout = |image: &Path| {
        let bytes = std::fs::read(image).unwrap();
        let at = bytes.windows(8).position(|w| w == b"HOARDSIG").unwrap();
        bytes[at + 8]
    };
    assert_eq!(layout(&v1), 1);
    assert!(ok(&verify(&v1, &public), "verify").contains("all 6 sections verified"));
    let out = run(&["cat", s(&v1), "a", "--trust", s(&public)]);
    assert_eq!(ok(&out, "cat with --trust"), "hello\n");

    let fx = Fixture::new();
    let v2 = fx.made("sign", &v1, "v2.dwarfs", &["--key", s(&fx.key)]);
    assert_eq!(layout(&v2), 2);
    let again = verify(&v2, &fx.public);
    ok(&again, "verify of the signature made again");
}

#[test]
fn a_tampered_block_fails_verify_and_only_the_reads_of_its_files() {
    let fx = Fixture::new();
    let image = fx.image("signed.dwarfs", &["--sign", s(&fx.key)]);
    let block = 2;
    let bad = tampered(
        &image,
        &fx.path("bad.dwarfs"),
        SectionType::BLOCK,
        block as usize,
    );
    let hit = files_in_block(&image, block);
    assert!(!hit.is_empty() && hit.len() < FILES);

    let err = String::from_utf8_lossy(&verify(&bad, &fx.public).stderr).into_owned();
    assert!(err.contains("does not match the image signature"), "{err}");
    assert_eq!(verify(&bad, &fx.public).status.code(), Some(1));

    let original = |path: &str| std::fs::read(fx.tree.join(path)).unwrap();
    let some_hit = hit.iter().next().unwrap();
    let out = run(&["cat", s(&bad), some_hit, "--trust", s(&fx.public)]);
    assert!(out.stdout.len() < original(some_hit).len());
    // The refusal is the command's one line: the reader prints nothing.
    let err = refused(&out, "cat of a file in the tampered block");
    assert!(err.contains("does not match the image signature"), "{err}");
    if !fuse_available() {
        skipped("FUSE is not available");
        return;
    }
    // In the foreground, to see its log.
    let mnt = fx.path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let trust = format!("trust={}", s(&fx.public));
    let mut driver = hoard()
        .args(["mount", "-f", s(&bad), s(&mnt), "-o", &trust])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mount = common::FuseMount(mnt.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_dir(&mnt).map_or(true, |mut d| d.next().is_none()) {
        assert!(
            std::time::Instant::now() < deadline,
            "mount did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for _ in 0..2 {
        for path in noise_files() {
            match std::fs::read(mnt.join(&path)) {
                Ok(bytes) => {
                    assert!(
                        !hit.contains(&path),
                        "{path}: read despite its tampered block"
                    );
                    assert!(bytes == original(&path), "{path}: wrong bytes");
                }
                Err(e) => {
                    assert!(hit.contains(&path), "{path}: {e}");
                    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{path}");
                }
            }
        }
    }
    assert_eq!(
        std::fs::read(mnt.join("notes.txt")).unwrap(),
        b"signed notes\n"
    );
    drop(mount);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut driver.stderr.take().unwrap(), &mut log).unwrap();
    let _ = driver.wait();
    let lines = log.lines().filter(|l| l.contains("does not match")).count();
    assert_eq!(lines, 1, "one log line for the block: {log}");
}

#[test]
fn tampered_metadata_or_index_refuses_the_open() {
    let fx = Fixture::new();
    let image = fx.image("signed.dwarfs", &["--sign", s(&fx.key)]);
    let metadata = tampered(&image, &fx.path("meta.dwarfs"), SectionType::METADATA_V2, 0);
    // The index's own stored SHA-512/256 changed: its XXH3-64 still
    // matches, so only the signature tells.
    let mut bytes = std::fs::read(&image).unwrap();
    let img = hoard_reader::Image::open(&image, &Default::default()).unwrap();
    let index = img.find(SectionType::SECTION_INDEX).unwrap().offset as usize;
    bytes[index + 20] ^= 0x01;
    let index_image = fx.path("index.dwarfs");
    std::fs::write(&index_image, bytes).unwrap();
    ok(
        &run(&["ls", s(&index_image)]),
        "ls of the changed index without --trust",
    );
    for bad in [&metadata, &index_image] {
        let err = refused(
            &run(&["ls", s(bad), "--trust", s(&fx.public)]),
            "ls --trust of tampered metadata",
        );
        assert!(err.contains("does not match the image signature"), "{err}");
        refused(&verify(bad, &fx.public), "verify");
    }
}

/// The files of the test tree, as paths in the image.
fn all_files() -> Vec<String> {
    let mut files = noise_files();
    files.push("notes.txt".into());
    files
}

/// Changes around the signed sections, with every hash that is not the
/// signature's made to match again, are refused by `verify` and by
/// reads with `--trust`: no read gives other bytes than the file's.
#[test]
fn changes_around_the_signed_sections_are_refused_and_no_read_gives_other_bytes() {
    let fx = Fixture::new();
    let header = fx.path("header.sh");
    std::fs::write(&header, "#!/bin/sh\nexec hoard mount \"$0\" \"$@\"\n").unwrap();
    let with_header = ["--sign", s(&fx.key), "--header", s(&header)];
    let image = fx.image("signed.dwarfs", &with_header);
    // Another image signed with the same key: other blocks (32 KiB).
    let other_image = create_image(
        &fx.tree,
        &fx.path("other.dwarfs"),
        &[&["-S", "15", "-l1"][..], &with_header[..]].concat(),
    );
    let other = SectionList::read(&other_image);
    let list = SectionList::read(&image);
    let block = list.nth(SectionType::BLOCK, 1);
    let changed = |change: &dyn Fn(&mut SectionList)| {
        let mut l = list.clone();
        change(&mut l);
        l
    };
    let signature_length =
        |tail: &[u8]| 64 + u64::from_le_bytes(tail[56..64].try_into().unwrap()) as usize;
    let cases: Vec<(&str, SectionList)> = vec![
        (
            "appended",
            changed(&|l| l.tail.extend_from_slice(b"appended data\n")),
        ),
        (
            "spliced-block",
            changed(&|l| {
                l.sections[block] = other.sections[other.nth(SectionType::BLOCK, 1)].clone()
            }),
        ),
        (
            "spliced-signature",
            changed(&|l| l.tail = other.tail.clone()),
        ),
        (
            "spliced-image",
            changed(&|l| {
                l.sections = other.sections.clone();
            }),
        ),
        ("prefix-changed", changed(&|l| l.prefix[12] ^= 0x20)),
        (
            "prefix-replaced",
            changed(&|l| l.prefix = b"#!/bin/false\n".to_vec()),
        ),
        ("prefix-dropped", changed(&|l| l.prefix.clear())),
        (
            "signature-header",
            changed(&|l| {
                let end = signature_length(&l.tail);
                // Compressed, it says: its hashes made to match.
                l.tail[54] = 2;
                rehash(&mut l.tail[..end]);
            }),
        ),
        (
            "signature-number",
            changed(&|l| {
                let end = signature_length(&l.tail);
                l.tail[48] ^= 0x01;
                rehash(&mut l.tail[..end]);
            }),
        ),
        (
            "signature-payload",
            changed(&|l| {
                let end = signature_length(&l.tail);
                tamper_section(&mut l.tail[..end]);
            }),
        ),
    ];
    let trust = ["--trust", s(&fx.public)];
    for (what, l) in cases {
        let bad = l.write(&fx.path(&format!("{what}.dwarfs")));
        refused(&verify(&bad, &fx.public), what);
        let err = assert_refused_never_wrong(&bad, &all_files(), &fx.tree, &trust);
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    }
    // The image as it was written passes all this.
    let same = list.write(&fx.path("same.dwarfs"));
    ok(
        &verify(&same, &fx.public),
        "verify of the image written back",
    );
}

/// Recovery data is not signed: recovery data built over changed bytes
/// "repairs" genuine ones into them, and reads with `--trust` then take
/// the genuine bytes as they are.
#[test]
fn malicious_recovery_data_leaves_genuine_bytes_readable() {
    let fx = Fixture::new();
    let image = fx.image("signed.dwarfs", &["--sign", s(&fx.key), "--recovery", "5"]);
    let img = hoard_reader::Image::open(&image, &Default::default()).unwrap();
    let blocks: Vec<(usize, usize)> = img
        .sections()
        .iter()
        .filter(|s| s.header.kind == SectionType::BLOCK)
        .map(|s| (s.offset as usize, s.end() as usize))
        .collect();
    let metadata = img.find(SectionType::METADATA_V2).unwrap();
    let metadata = (metadata.offset as usize, metadata.end() as usize);
    let signature = img.find(SectionType::HOARD_SIGNATURE).unwrap();
    let signature = (signature.offset as usize, signature.end() as usize);
    drop(img);
    type Change<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "a block",
            Box::new(|b: &mut Vec<u8>| tamper_section(&mut b[blocks[1].0..blocks[1].1])),
        ),
        (
            "every block",
            Box::new(|b: &mut Vec<u8>| {
                for &(start, end) in &blocks {
                    tamper_section(&mut b[start..end]);
                }
            }),
        ),
        (
            "the metadata",
            Box::new(|b: &mut Vec<u8>| tamper_section(&mut b[metadata.0..metadata.1])),
        ),
        (
            "the signature",
            Box::new(|b: &mut Vec<u8>| tamper_section(&mut b[signature.0..signature.1])),
        ),
    ];
    for (what, change) in cases {
        let forged = with_recovery_of(&image, &fx.path("forged.dwarfs"), change);
        for file in all_files() {
            let out = run(&["cat", s(&forged), &file, "--trust", s(&fx.public)]);
            ok(
                &out,
                &format!("cat {file}, recovery data forged over {what}"),
            );
            assert!(
                out.stdout == std::fs::read(fx.tree.join(&file)).unwrap(),
                "{what}: {file}"
            );
        }
    }
}

#[test]
fn a_signed_stack_with_an_unsigned_layer_is_refused() {
    let fx = Fixture::new();
    let base = fx.image("base.dwarfs", &["--sign", s(&fx.key)]);
    std::fs::write(fx.tree.join("notes.txt"), b"changed notes\n").unwrap();
    let unsigned = fx.image("layer.dwarfs", &["--base", s(&base)]);
    let signed = fx.image(
        "signed-layer.dwarfs",
        &["--base", s(&base), "--sign", s(&fx.key)],
    );
    let cat = |layer: &Path| {
        run(&[
            "cat",
            s(&base),
            "--layer",
            s(layer),
            "notes.txt",
            "--trust",
            s(&fx.public),
        ])
    };
    assert_eq!(
        ok(&cat(&signed), "cat of a signed stack"),
        "changed notes\n"
    );
    let err = refused(&cat(&unsigned), "cat of a stack with an unsigned layer");
    assert!(
        err.contains("layer.dwarfs") && err.contains("not signed"),
        "{err}"
    );
}

#[test]
fn signatures_and_recovery_data_work_together_and_dwarfs_reads_signed_images() {
    let fx = Fixture::new();
    let image = fx.image("both.dwarfs", &["--sign", s(&fx.key), "--recovery", "5"]);
    ok(&verify(&image, &fx.public), "verify");
    ok(&run(&["check", "--full", s(&image)]), "check");
    // Damage the recovery data repairs: reads go on, verify says so.
    let mut bytes = std::fs::read(&image).unwrap();
    for b in &mut bytes[4000..4100] {
        *b ^= 0x5a;
    }
    let damaged = fx.path("damaged.dwarfs");
    std::fs::write(&damaged, bytes).unwrap();
    let out = run(&["cat", s(&damaged), "sub/f00", "--trust", s(&fx.public)]);
    assert!(out.status.success(), "cat through the recovery data");
    assert!(out.stdout == std::fs::read(fx.tree.join("sub/f00")).unwrap());
    let out = verify(&damaged, &fx.public);
    assert_eq!(out.status.code(), Some(1), "verify of a repairable image");
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged bytes"));
    // `hoard sign` keeps the recovery data, rebuilt over the signature.
    let resigned = fx.made("sign", &image, "resigned.dwarfs", &["--key", s(&fx.key)]);
    ok(&verify(&resigned, &fx.public), "verify again");
    ok(&run(&["check", "--full", s(&resigned)]), "check again");
    // `merge` signs and adds recovery data as `create` does.
    let recovery = ["--sign", s(&fx.key), "--recovery", "5"];
    let merged = fx.made("merge", &image, "merged.dwarfs", &recovery);
    ok(&verify(&merged, &fx.public), "verify the merge");
    ok(&run(&["check", "--full", s(&merged)]), "check the merge");

    // The dwarfs crate, an independent reader, reads a signed image.
    let file = std::fs::File::open(&image).unwrap();
    let (index, mut archive) = dwarfs::Archive::new(file).expect("the dwarfs crate opens it");
    let inode = index.get_path(["sub", "f04"]).unwrap();
    let dwarfs::InodeKind::File(f) = inode.classify() else {
        panic!("not a file");
    };
    let data = dwarfs::AsChunks::read_to_vec(&f, &mut archive).unwrap();
    assert!(data == std::fs::read(fx.tree.join("sub/f04")).unwrap());
    if dwarfs_bin().is_none() {
        skipped("DwarFS 0.15.3 tools are not in ../shared");
        return;
    }
    let signed_only = fx.image("signed.dwarfs", &["--sign", s(&fx.key)]);
    for img in [&image, &signed_only] {
        let x = fx.path(&format!("x-{}", img.file_name().unwrap().to_str().unwrap()));
        dwarfs_check_and_extract(img, &x);
        for path in noise_files() {
            assert!(
                std::fs::read(x.join(&path)).unwrap()
                    == std::fs::read(fx.tree.join(&path)).unwrap(),
                "{path}"
            );
        }
    }
}

#[test]
fn sign_refuses_a_damaged_image_and_leaves_nothing() {
    let fx = Fixture::new();
    let image = fx.image("plain.dwarfs", &[]);
    let img = hoard_reader::Image::open(&image, &Default::default()).unwrap();
    let block = img.find(SectionType::BLOCK).unwrap().clone();
    let mut bytes = std::fs::read(&image).unwrap();
    bytes[(block.payload_offset() + block.header.length / 2) as usize] ^= 0x01;
    let damaged = fx.path("damaged.dwarfs");
    std::fs::write(&damaged, &bytes).unwrap();
    let signed = fx.path("signed.dwarfs");
    let out = run(&["sign", s(&damaged), "-o", s(&signed), "--key", s(&fx.key)]);
    let err = refused(&out, "sign of a damaged image");
    assert!(err.contains("damaged") && err.contains("XXH3"), "{err}");
    assert!(!signed.exists());
    let left: Vec<_> = std::fs::read_dir(fx.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Signed in place, the sound image verifies.
    ok(
        &run(&["sign", s(&image), "--key", s(&fx.key)]),
        "sign in place",
    );
    ok(&verify(&image, &fx.public), "verify");
}

// Signed claims (a name, a version, an expiry) against rollback.

/// `hoard verify IMAGE --trust PUB` with more options.
fn verify_with(image: &Path, public: &Path, more: &[&str]) -> Output {
    let mut args = vec!["verify", s(image), "--trust", s(public)];
    args.extend_from_slice(more);
    run(&args)
}

#[test]
fn expected_names_and_versions_and_expiry_are_checked_at_open() {
    let fx = Fixture::new();
    let claims = [
        "--sign-name",
        "app",
        "--sign-version",
        "3",
        "--sign-expires",
        "2099-01-31",
    ];
    let mut args = vec!["--sign", s(&fx.key)];
    args.extend_from_slice(&claims);
    let image = fx.image("app-3.dwarfs", &args);

    let said = ok(
        &verify_with(
            &image,
            &fx.public,
            &["--expect-name", "app", "--min-version", "3"],
        ),
        "verify with what the image claims",
    );
    assert!(
        said.contains("name 'app', version 3, expires 2099-01-31"),
        "{said}"
    );
    let err = refused(
        &verify_with(&image, &fx.public, &["--expect-name", "other"]),
        "verify under another name",
    );
    assert!(
        err.contains("image '") && err.contains("signed as 'app' version 3, expected name 'other'"),
        "{err}"
    );
    let out = run(&[
        "cat",
        s(&image),
        "notes.txt",
        "--trust",
        s(&fx.public),
        "--min-version",
        "4",
    ]);
    let err = refused(&out, "cat of an older version");
    assert!(
        err.contains("version 3, which is older than --min-version 4"),
        "{err}"
    );
    let out = run(&["cat", s(&image), "notes.txt", "--min-version", "1"]);
    let err = refused(&out, "an expected version without --trust");
    assert!(err.contains("--trust"), "{err}");

    // info shows the claims, as text and JSON.
    let text = ok(&run(&["info", s(&image)]), "info");
    assert!(
        text.contains("signature claims:") && text.contains("2099-01-31"),
        "{text}"
    );
    let json = ok(
        &run(&["info", "--json", s(&image), "--trust", s(&fx.public)]),
        "info --json",
    );
    let info: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        info["signature_claims"],
        serde_json::json!({"name": "app", "version": 3, "expires": "2099-01-31"})
    );

    // An image signed without claims verifies as before, and is refused
    // when a name is expected.
    let plain = fx.image("plain.dwarfs", &["--sign", s(&fx.key)]);
    ok(&verify(&plain, &fx.public), "verify without claims");
    let err = refused(
        &verify_with(&plain, &fx.public, &["--expect-name", "app"]),
        "an image without claims, a name expected",
    );
    assert!(err.contains("signed without a name or version"), "{err}");
    let info = ok(&run(&["info", "--json", s(&plain)]), "info");
    assert!(info.contains("\"signature_claims\": null"), "{info}");

    // An expiry in the past: signed (as a test may), refused on open.
    let expiry = [
        "--key",
        s(&fx.key),
        "--sign-expires",
        "2020-01-01T00:00:00Z",
    ];
    let expired = fx.made("sign", &plain, "expired.dwarfs", &expiry);
    let err = refused(&verify(&expired, &fx.public), "verify of an expired image");
    assert!(err.contains("its signature expired on 2020-01-01"), "{err}");
    let out = run(&["ls", s(&expired), "--trust", s(&fx.public)]);
    refused(&out, "ls of an expired image");

    // Claims need a key; a bad date is refused.
    let err = refused(
        &run(&[
            "rewrite",
            s(&plain),
            "-o",
            s(&fx.path("x.dwarfs")),
            "--sign-name",
            "app",
        ]),
        "a name without a key",
    );
    assert!(err.contains("--sign KEY"), "{err}");
    let out = run(&[
        "sign",
        s(&plain),
        "--key",
        s(&fx.key),
        "--sign-expires",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2), "clap refuses a bad date");

    // merge and rewrite sign claims too; the mount checks them.
    let builds = [
        ("merge", ["--sign-version", "5"], ["--min-version", "5"]),
        (
            "rewrite",
            ["--sign-name", "app2"],
            ["--expect-name", "app2"],
        ),
    ];
    for (command, [flag, value], expect) in builds {
        let args = ["--sign", s(&fx.key), flag, value];
        let out = fx.made(command, &image, &format!("{command}.dwarfs"), &args);
        let verified = verify_with(&out, &fx.public, &expect);
        ok(&verified, &format!("verify the {command}"));
    }
    if fuse_available() {
        let mnt = fx.path("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let o = format!("trust={},expect_name=other", s(&fx.public));
        let err = refused(
            &run(&["mount", s(&image), s(&mnt), "-o", &o]),
            "mount under another name",
        );
        assert!(err.contains("expected name 'other'"), "{err}");
    }
}

#[test]
fn builds_from_a_tampered_signed_image_fail_and_write_nothing() {
    let fx = Fixture::new();
    let image = fx.image("signed.dwarfs", &["--sign", s(&fx.key)]);
    let bad = tampered(&image, &fx.path("bad.dwarfs"), SectionType::BLOCK, 2);
    std::fs::write(fx.tree.join("notes.txt"), b"changed notes\n").unwrap();
    let layer = fx.image("layer.dwarfs", &["--base", s(&image), "--sign", s(&fx.key)]);
    let out = fx.path("out.dwarfs");
    let (tree, layer, out_s, key) = (s(&fx.tree), s(&layer), s(&out), s(&fx.key));
    // Each build with its input, signing its output: the key trusted
    // from the environment, or with --trust.
    let build = |args: &[&str], by_flag: bool| {
        let mut cmd = hoard();
        cmd.args(args)
            .args(["-o", out_s, "--sign", key, "--no-progress"]);
        if by_flag {
            cmd.args(["--trust", s(&fx.public)]);
        } else {
            cmd.env("HOARD_TRUST", &fx.public);
        }
        cmd.output().unwrap()
    };
    fn builds<'a>(input: &'a str, layer: &'a str, tree: &'a str) -> [Vec<&'a str>; 4] {
        [
            vec!["rewrite", input],
            vec!["rewrite", input, layer],
            vec!["merge", input],
            vec!["create", "-i", tree, "--base", input],
        ]
    }
    let (bad_builds, good_builds) = (builds(s(&bad), layer, tree), builds(s(&image), layer, tree));
    for (bad_args, good_args) in bad_builds.iter().zip(&good_builds) {
        for by_flag in [false, true] {
            let err = refused(&build(bad_args, by_flag), &format!("{bad_args:?}"));
            assert!(
                err.contains("does not match the image signature"),
                "{bad_args:?}: {err}"
            );
            assert!(!out.exists(), "{bad_args:?} left {out_s}");
        }
        ok(&build(good_args, true), &format!("{good_args:?}"));
        ok(&verify(&out, &fx.public), "verify of the build's image");
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn signed_claims_cannot_be_changed() {
    let fx = Fixture::new();
    let image = fx.image(
        "v3.dwarfs",
        &[
            "--sign",
            s(&fx.key),
            "--sign-name",
            "app",
            "--sign-version",
            "3",
        ],
    );
    // The version claim (tag 2, 8 bytes: 3) made 4, the section's
    // checksums made to match again.
    let img = hoard_reader::Image::open(&image, &Default::default()).unwrap();
    let section = img.find(hoard_trust::SECTION_TYPE).unwrap().clone();
    let mut bytes = std::fs::read(&image).unwrap();
    let signature = &mut bytes[section.offset as usize..section.end() as usize];
    let claim = [2, 8, 0, 3, 0, 0, 0, 0, 0, 0, 0];
    let at = signature
        .windows(claim.len())
        .position(|w| w == claim)
        .unwrap();
    signature[at + 3] = 4;
    common::rehash(signature);
    let bumped = fx.path("v4.dwarfs");
    std::fs::write(&bumped, bytes).unwrap();
    ok(&run(&["ls", s(&bumped)]), "ls without --trust");
    let err = refused(&verify(&bumped, &fx.public), "verify of a changed claim");
    assert!(err.contains("does not verify"), "{err}");
}

#[test]
fn trusted_keys_refuse_an_archive_which_carries_no_signature() {
    let fx = Fixture::new();
    let zip = fx.path("x.zip");
    std::fs::write(&zip, common::zip_archive(3, 1)).unwrap();
    let err = refused(
        &run(&["ls", s(&zip), "--trust", s(&fx.public)]),
        "ls of an archive with --trust",
    );
    assert!(
        err.contains("'x.zip'") || err.contains(s(&zip)),
        "names the archive: {err}"
    );
    assert!(
        err.contains("is an archive, which carries no signature"),
        "{err}"
    );
}

/// Signing in place appends the signature to the image: the same file,
/// its bytes kept. A signature cut short there (a kill during the
/// append) leaves the image readable as unsigned, `check` names it, and
/// signing again completes it.
#[test]
fn signing_in_place_appends_and_a_signature_cut_short_is_signed_again() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fixture::new();
    let image = fx.image("plain.dwarfs", &[]);
    let unsigned = std::fs::read(&image).unwrap();
    let listing = hoard_ok(&["ls", s(&image)]);
    let inode = std::fs::metadata(&image).unwrap().ino();
    ok(
        &run(&["sign", s(&image), "--key", s(&fx.key)]),
        "sign in place",
    );
    assert_eq!(
        std::fs::metadata(&image).unwrap().ino(),
        inode,
        "not replaced"
    );
    let signed = std::fs::read(&image).unwrap();
    assert_eq!(
        signed[..unsigned.len()],
        unsigned[..],
        "the image's bytes are kept"
    );
    ok(&verify(&image, &fx.public), "verify");

    let tail = signed.len() - unsigned.len();
    let torn = fx.path("torn.dwarfs");
    for cut in [1, 7, 63, 64, 65, tail / 2, tail - 1] {
        std::fs::write(&torn, &signed[..unsigned.len() + cut]).unwrap();
        assert_eq!(
            hoard_ok(&["ls", s(&torn)]),
            listing,
            "cut at {cut}: reads as unsigned"
        );
        let error = one_line_error(&["verify", s(&torn), "--trust", s(&fx.public)]);
        assert!(error.contains("not signed"), "cut at {cut}: {error}");
        let check = hoard_fails(&["check", s(&torn)]);
        assert!(check.contains("cut short"), "cut at {cut}: {check}");
        ok(&run(&["sign", s(&torn), "--key", s(&fx.key)]), "sign again");
        assert!(
            std::fs::read(&torn).unwrap() == signed,
            "cut at {cut}: signed as before"
        );
    }
}
