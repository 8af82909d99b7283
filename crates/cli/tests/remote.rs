//! Remote images: the same commands over HTTP (a small range server in
//! Python, tests/remote/range_server.py) and S3 (moto in server mode) as
//! over the local file, and faults of the server. Servers listen on
//! 127.0.0.1 only, are started and stopped here, and exit by themselves
//! after a while; every client retry loop is bounded by the
//! `remote_retries`/`remote_timeout` options set here.

mod common;

use common::*;
use hoard_format::section::SectionType;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Client options for the tests: fast timeouts, few retries.
const REMOTE: &str = "remote_timeout=2,remote_retries=3,remote_backoff=20ms";
/// Client options for uploads: parts of 8 MiB to a loaded moto need
/// more time than a range read.
const UPLOAD_REMOTE: &str = "remote_timeout=30,remote_retries=3,remote_backoff=20ms";
/// Block size of the test image (-S 16).
const BLOCK: u64 = 64 << 10;

/// A running range server, killed when dropped.
struct RangeServer {
    child: Child,
    port: u16,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote/range_server.py")
}

/// The first line `child` prints, waiting at most 20 s.
fn first_line(child: &mut Child) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(20)).ok()
}

impl RangeServer {
    fn start(file: &Path) -> Option<Self> {
        let mut child = Command::new("python3")
            .arg(script())
            .arg(file)
            .args(["--lifetime", "300"])
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let port = first_line(&mut child).and_then(|l| l.trim().parse().ok());
        match port {
            Some(port) => Some(RangeServer { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/image.dwarfs", self.port)
    }

    /// A control request (`/__set?...`, `/__stats`, `/__reset`).
    fn control(&self, path: &str) -> String {
        http_get(self.port, path)
    }

    fn set(&self, query: &str) {
        self.control(&format!("/__set?{query}"));
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&self.control("/__stats")).unwrap()
    }
}

impl Drop for RangeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of a plain GET to 127.0.0.1:`port`.
fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// A `hoard` command with the tests' remote options.
fn remote_hoard(args: &[&str]) -> Output {
    hoard()
        .env("HOARD_REMOTE", REMOTE)
        .args(args)
        .output()
        .unwrap()
}

/// [`remote_hoard`], asserting that it succeeds; returns its standard
/// output as text.
fn remote_ok(args: &[&str]) -> String {
    let out = output_ok(hoard().env("HOARD_REMOTE", REMOTE).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A test tree of about 2.5 MiB of incompressible files (so blocks stay
/// 64 KiB), with a directory, a symlink, a hard link and an empty file.
fn test_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    for i in 0..24u64 {
        let dir = if i % 3 == 0 { "sub" } else { "" };
        let size = 20_000 + (i as usize * 37_000) % 180_000;
        std::fs::write(root.join(dir).join(format!("f{i:02}")), noise(size, i + 1)).unwrap();
    }
    std::fs::write(root.join("sub/deeper/small"), b"hello remote\n").unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
    std::os::unix::fs::symlink("sub/deeper/small", root.join("link")).unwrap();
    std::fs::hard_link(root.join("f01"), root.join("sub/f01-again")).unwrap();
}

/// A temporary directory with the test tree and its image.
struct Fixture {
    dir: tempfile::TempDir,
    image: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        test_tree(&tree);
        let image = create_image(&tree, &dir.path().join("image.dwarfs"), &["-S", "16"]);
        Fixture { dir, image }
    }

    fn size(&self) -> u64 {
        std::fs::metadata(&self.image).unwrap().len()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn python_ok() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        common::skipped("python3 missing");
    }
    ok
}

/// The fixture and a server of its image; `None` without python3 (or,
/// when the test `mounts`, without FUSE), said so.
fn served(mounts: bool) -> Option<(Fixture, RangeServer)> {
    if !python_ok() || (mounts && !fuse_available()) {
        return None;
    }
    let fx = Fixture::new();
    let server = RangeServer::start(&fx.image).expect("range server starts");
    Some((fx, server))
}

/// `ls -R`, `cat`, `extract`, `check --full`, `info` and `manifest` over
/// the URL give what they give over the file.
fn commands_match_local(url: &str, fx: &Fixture) {
    let local = fx.image.to_str().unwrap();
    let ls = |image: &str| remote_ok(&["ls", "-R", image]);
    assert_eq!(ls(url), ls(local));
    let cat = |image: &str| remote_ok(&["cat", image, "sub/deeper/small", "f05"]);
    assert_eq!(cat(url), cat(local));
    remote_ok(&["check", "--full", url]);
    let expected = manifest_of(&fx.image);
    assert_same_manifest(&expected, &manifest_of_url(url), Compare::Mounted);
    let out = fx.path("extracted");
    let _ = std::fs::remove_dir_all(&out);
    remote_ok(&["extract", url, "-o", out.to_str().unwrap()]);
    assert_same_manifest(&expected, &manifest_of(&out), Compare::Extracted);
    let info = remote_ok(&["info", "--verbose", "--json", url]);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert!(info["remote"]["requests"].as_u64().unwrap() >= 1, "{info}");
    assert!(
        info["remote"]["bytes"].as_u64().unwrap() < fx.size(),
        "{info}"
    );
}

fn manifest_of_url(url: &str) -> String {
    remote_ok(&["manifest", url])
}

#[test]
fn http_commands_equal_local_results() {
    let Some((fx, server)) = served(false) else {
        return;
    };
    commands_match_local(&server.url(), &fx);
}

#[test]
fn a_stack_with_a_delta_layer_reads_over_http() {
    if !python_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = common::versioned_trees(dir.path());
    let base = create_image(&old, &dir.path().join("base.dwarfs"), &["-S", "16"]);
    let layer = create_image(
        &new,
        &dir.path().join("layer.dwarfs"),
        &["-S", "16", "--base", base.to_str().unwrap(), "--delta"],
    );
    let (base, layer) = (
        RangeServer::start(&base).expect("range server starts"),
        RangeServer::start(&layer).expect("range server starts"),
    );
    let into = dir.path().join("extracted");
    let (base, layer) = (base.url(), layer.url());
    remote_ok(&[
        "extract",
        &base,
        "--layer",
        &layer,
        "-o",
        into.to_str().unwrap(),
    ]);
    common::assert_same_files(&new, &into);
}

#[test]
fn opening_takes_a_few_requests_whatever_the_number_of_blocks() {
    if !python_ok() {
        return;
    }
    let fx = Fixture::new();
    let blocks = hoard_ok(&["info", "--json", fx.image.to_str().unwrap()]);
    let blocks: serde_json::Value = serde_json::from_str(&blocks).unwrap();
    let blocks = blocks["blocks"].as_u64().unwrap();
    assert!(blocks >= 20, "the image has {blocks} blocks");
    let server = RangeServer::start(&fx.image).expect("range server starts");
    let url = server.url();
    // Opening and listing reads no block: the block headers wait for
    // their blocks.
    let listing = remote_ok(&["ls", "-R", &url]);
    assert!(listing.contains("sub/deeper/small"), "{listing}");
    let requests = server.stats()["requests"].as_u64().unwrap();
    assert!(
        requests <= 4,
        "{requests} requests to open and list {blocks} blocks"
    );
    // Reading one small file fetches its block, header and all, at once.
    server.control("/__reset");
    let small = remote_ok(&["cat", &url, "sub/deeper/small"]);
    assert_eq!(small, "hello remote\n");
    let requests = server.stats()["requests"].as_u64().unwrap();
    assert!(
        requests <= 5,
        "{requests} requests to open and read one block"
    );
    // What needs every header still has them: check and info.
    remote_ok(&["check", "--full", &url]);
    let info = remote_ok(&["info", "--json", &url]);
    let local = hoard_ok(&["info", "--json", fx.image.to_str().unwrap()]);
    let strip = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v.as_object_mut().unwrap().remove("remote");
        v.as_object_mut().unwrap().remove("image");
        v
    };
    assert_eq!(strip(&info), strip(&local));
}

/// Mounts `url` with extra `-o` options; the guard unmounts.
fn mount(url: &str, mnt: &Path, extra: &str) -> common::FuseMount {
    mount_ok(
        &[url],
        mnt,
        &["-o", &format!("{REMOTE},perfmon=fuse{extra}")],
    )
}

/// The "remote:" line of a mount's perfmon report.
fn perfmon_remote(mnt: &Path) -> String {
    let out = Command::new("getfattr")
        .args(["--only-values", "-n", "user.dwarfs.perfmon"])
        .arg(mnt)
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("remote:"))
        .unwrap_or("")
        .to_string()
}

#[test]
fn http_mount_reads_the_tree_fetching_each_block_once() {
    let Some((fx, server)) = served(true) else {
        return;
    };
    let cache = fx.path("cache");
    let cache_opt = format!(",remote_cache={}", cache.display());
    let expected = manifest_of(&fx.image);
    {
        let mnt = fx.path("mnt1");
        let _m = mount(&server.url(), &mnt, &cache_opt);
        // A random 4 KiB read fetches about one block, not the image
        // (the kernel reads ahead up to 128 KiB: at most 3 blocks).
        server.control("/__reset");
        let f = std::fs::File::open(mnt.join("f13")).unwrap();
        let mut buf = vec![0u8; 4096];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 70_000).unwrap();
        let original = std::fs::read(fx.dir.path().join("tree/f13")).unwrap();
        assert_eq!(buf, original[70_000..74_096]);
        let bytes = server.stats()["bytes"].as_u64().unwrap();
        assert!(bytes <= 3 * BLOCK + 4096, "a 4k read fetched {bytes} bytes");
        // The whole tree, read, equals the local image's.
        assert_same_manifest(&expected, &manifest_of(&mnt), Compare::Mounted);
        let remote = perfmon_remote(&mnt);
        assert!(remote.contains("requests"), "perfmon: {remote:?}");
    }
    let stats = server.stats();
    let total: u64 = stats["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[1].as_u64().unwrap() - r[0].as_u64().unwrap())
        .sum();
    // Everything fetched since the reset, plus at most the open's probes.
    assert!(
        total as f64 <= 1.1 * fx.size() as f64,
        "full read fetched {total} of {} bytes",
        fx.size()
    );
    // A second mount with the same cache fetches nothing.
    server.control("/__reset");
    {
        let mnt = fx.path("mnt2");
        let _m = mount(&server.url(), &mnt, &cache_opt);
        assert_same_manifest(&expected, &manifest_of(&mnt), Compare::Mounted);
    }
    let stats = server.stats();
    assert_eq!(stats["bytes"], 0, "the second mount fetched: {stats}");
}

#[test]
fn full_cold_read_fetches_at_most_1_1x_the_image() {
    let Some((fx, server)) = served(true) else {
        return;
    };
    let mnt = fx.path("mnt");
    let m = mount(&server.url(), &mnt, "");
    assert_same_manifest(
        &manifest_of(&fx.image),
        &manifest_of(&mnt),
        Compare::Mounted,
    );
    drop(m);
    let bytes = server.stats()["bytes"].as_u64().unwrap();
    assert!(
        bytes as f64 <= 1.1 * fx.size() as f64,
        "fetched {bytes} of {} bytes",
        fx.size()
    );
}

#[test]
fn retried_faults_give_correct_results() {
    let Some((fx, server)) = served(false) else {
        return;
    };
    let expected = manifest_of(&fx.image);
    // Every 5th request dropped.
    server.set("drop_every=5");
    assert_same_manifest(&expected, &manifest_of_url(&server.url()), Compare::Mounted);
    // 503 twice, then answers.
    server.set("drop_every=0&fail_503=2");
    let info = remote_ok(&["info", "-v", "-j", &server.url()]);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["remote"]["failures"], 2, "{info}");
    let out = fx.path("x");
    remote_ok(&["extract", &server.url(), "-o", out.to_str().unwrap()]);
    assert_same_manifest(&expected, &manifest_of(&out), Compare::Extracted);
}

/// Each file through `hoard cat` over the URL: exactly right, or a failure
/// with one line on stderr (its output a prefix of the right bytes).
fn cat_each(url: &str, fx: &Fixture) -> (usize, usize) {
    let (mut good, mut failed) = (0, 0);
    for i in 0..24u64 {
        let name = if i % 3 == 0 {
            format!("sub/f{i:02}")
        } else {
            format!("f{i:02}")
        };
        let want = std::fs::read(fx.dir.path().join("tree").join(&name)).unwrap();
        let out = remote_hoard(&["cat", url, &name]);
        if out.status.success() {
            assert_eq!(out.stdout, want, "{name}: wrong bytes");
            good += 1;
        } else {
            assert!(
                want.starts_with(&out.stdout),
                "{name}: wrong bytes before the error"
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
            failed += 1;
        }
    }
    (good, failed)
}

#[test]
fn corrupted_bytes_are_never_served() {
    let Some((fx, server)) = served(false) else {
        return;
    };
    server.set(&format!("corrupt_at={}", fx.size() / 3));
    let (good, failed) = cat_each(&server.url(), &fx);
    assert!(failed >= 1, "no read hit the corrupted byte");
    assert!(good >= 10, "only {good} files read");
    let out = remote_hoard(&["check", "--full", &server.url()]);
    assert!(!out.status.success(), "check passes a corrupted image");
    // Served right again, everything reads.
    server.set("corrupt_at=-1");
    assert_eq!(cat_each(&server.url(), &fx), (24, 0));
}

#[test]
fn a_signed_image_tampered_on_the_server_or_in_the_cache_is_refused() {
    if !python_ok() {
        return;
    }
    let fx = Fixture::new();
    let key = fx.path("k");
    remote_ok(&["keygen", "-o", key.to_str().unwrap()]);
    let public = fx.path("k.pub");
    let public = public.to_str().unwrap();
    remote_ok(&[
        "sign",
        fx.image.to_str().unwrap(),
        "--key",
        fx.path("k.key").to_str().unwrap(),
    ]);
    // A block changed with its header hashes made to match: its files
    // fail, the others read right; changed metadata fails the open.
    let block = 3;
    let bad_block = common::tampered(
        &fx.image,
        &fx.path("block.dwarfs"),
        SectionType::BLOCK,
        block,
    );
    let bad_meta = common::tampered(
        &fx.image,
        &fx.path("meta.dwarfs"),
        SectionType::METADATA_V2,
        0,
    );
    let names: Vec<String> = (0..24)
        .map(|i| format!("{}f{i:02}", if i % 3 == 0 { "sub/" } else { "" }))
        .collect();
    let hit = common::files_using_block(&fx.image, &names, block as u32);
    assert!(!hit.is_empty());
    let server = RangeServer::start(&bad_block).expect("range server starts");
    let url = server.url();
    assert_eq!(
        remote_hoard(&["verify", &url, "--trust", public])
            .status
            .code(),
        Some(1)
    );
    for name in &names {
        let out = remote_hoard(&["cat", &url, name, "--trust", public]);
        if hit.contains(name) {
            assert!(!out.status.success(), "{name}: read from a tampered block");
        } else {
            let want = std::fs::read(fx.path("tree").join(name)).unwrap();
            assert!(out.status.success() && out.stdout == want, "{name}");
        }
    }
    drop(server);
    // A poisoned on-disk cache: its blocks are fetched again.
    let server = RangeServer::start(&fx.image).expect("range server starts");
    let cache = fx.path("cache");
    let cached = |trust: bool| {
        let mut cmd = hoard();
        cmd.env(
            "HOARD_REMOTE",
            format!("{REMOTE},remote_cache={}", cache.display()),
        )
        .args(["cat", &server.url()])
        .args(&names);
        if trust {
            cmd.args(["--trust", public]);
        }
        cmd.output().unwrap()
    };
    let want: Vec<u8> = names
        .iter()
        .flat_map(|n| std::fs::read(fx.path("tree").join(n)).unwrap())
        .collect();
    assert!(cached(true).stdout == want);
    let mut poisoned = 0;
    for dir in std::fs::read_dir(&cache).unwrap() {
        for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            let mut bytes = std::fs::read(&path).unwrap();
            if bytes.len() > 64 << 10 {
                common::tamper_section(&mut bytes);
                std::fs::write(&path, bytes).unwrap();
                poisoned += 1;
            }
        }
    }
    assert!(poisoned > 0, "no block in the cache");
    assert!(
        cached(false).stdout != want,
        "the poisoned cache was not used"
    );
    let out = cached(true);
    assert!(
        out.status.success() && out.stdout == want,
        "poisoned cache served"
    );
    drop(server);
    let server = RangeServer::start(&bad_meta).expect("range server starts");
    let out = remote_hoard(&["ls", &server.url(), "--trust", public]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not match the image signature"), "{err}");
}

#[test]
fn a_server_away_or_stopping_mid_answer_fails_cleanly_and_recovers() {
    let Some((fx, server)) = served(true) else {
        return;
    };
    let mnt = fx.path("mnt");
    let _m = mount(&server.url(), &mnt, ",remote_readahead=0");
    let read = |name: &str| std::fs::read(mnt.join(name));
    let want = |name: &str| std::fs::read(fx.dir.path().join("tree").join(name)).unwrap();
    for (fault, file) in [("truncate=1", "f04"), ("down=1", "f07")] {
        server.set(fault);
        let started = Instant::now();
        let err = read(file).expect_err("read while the server fails");
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{fault}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{fault}: too slow"
        );
        server.set("truncate=0&down=0");
        assert_eq!(read(file).unwrap(), want(file), "{fault}: after recovery");
    }
    // The server process itself stops: reads fail with EIO, bounded.
    drop(server);
    let started = Instant::now();
    let err = read("f10").expect_err("read from a stopped server");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn an_image_changed_on_the_server_is_reported() {
    if !python_ok() || !fuse_available() {
        return;
    }
    let fx = Fixture::new();
    let served = fx.path("served.dwarfs");
    std::fs::copy(&fx.image, &served).unwrap();
    let server = RangeServer::start(&served).expect("range server starts");
    let mnt = fx.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mut driver = hoard()
        .env("HOARD_REMOTE", REMOTE)
        .args(["mount", "-f", &server.url(), mnt.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = common::FuseMount(mnt.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_dir(&mnt).map_or(true, |mut d| d.next().is_none()) {
        assert!(Instant::now() < deadline, "mount did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // New bytes (and so a new ETag) on the server.
    let mut other = std::fs::read(&fx.image).unwrap();
    other.reverse();
    std::fs::write(&served, other).unwrap();
    let err = std::fs::read(mnt.join("f16")).expect_err("read of a changed image");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    drop(guard);
    let mut stderr = String::new();
    driver
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let _ = driver.wait();
    assert!(stderr.contains("changed on the server"), "{stderr}");
}

/// Held by a test while it points this process's S3 client at its own
/// moto server (the environment is process-wide).
static S3_ENV_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Points this process's S3 client at `moto`, with test credentials.
fn use_moto(moto: &Moto) {
    std::env::set_var("AWS_ENDPOINT_URL", moto.endpoint());
    for (k, v) in S3_ENV {
        std::env::set_var(k, v);
    }
}

/// A moto S3 server on a free port, killed when dropped.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const S3_ENV: [(&str, &str); 4] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_REGION", "us-east-1"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
];

impl Moto {
    /// Starts moto (None, said on stderr, when it is not installed).
    fn start() -> Option<Self> {
        let have = Command::new("python3")
            .args(["-c", "import moto.server, boto3"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            eprintln!(
                "note: moto missing (scripts/install-deps.sh installs it), skipping S3 tests"
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(moto)
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs the Python `code` (boto3 calls on this server; `file`, if
    /// given, is its `sys.argv[1]`), asserting that it succeeds; returns
    /// its standard output.
    fn boto(&self, code: &str, file: Option<&Path>) -> String {
        let mut python = Command::new("python3");
        python.args(["-c", code]).args(file).envs(S3_ENV);
        String::from_utf8_lossy(&output_ok(&mut python).stdout).into_owned()
    }

    /// The keys in `bucket` (sorted, on one line), and whether any
    /// multipart upload is pending there.
    fn contents(&self, bucket: &str) -> String {
        let code = format!(
            "import boto3\n\
             s3 = boto3.client('s3', endpoint_url='{}')\n\
             keys = [o['Key'] for o in s3.list_objects_v2(Bucket='{bucket}').get('Contents', [])]\n\
             print(' '.join(sorted(keys)))\n\
             pending = s3.list_multipart_uploads(Bucket='{bucket}').get('Uploads', [])\n\
             print('uploads pending' if pending else 'no uploads pending')\n",
            self.endpoint()
        );
        self.boto(&code, None)
    }

    /// Deletes s3://bucket/key.
    fn delete(&self, bucket: &str, key: &str) {
        let code = format!(
            "import boto3\n\
             boto3.client('s3',endpoint_url='{}').delete_object(Bucket='{bucket}',Key='{key}')\n",
            self.endpoint()
        );
        self.boto(&code, None);
    }

    /// Puts `file` at s3://bucket/key.
    fn put(&self, bucket: &str, key: &str, file: &Path) {
        let code = format!(
            "import boto3,sys\n\
             s3=boto3.client('s3',endpoint_url='{}')\n\
             s3.create_bucket(Bucket='{bucket}')\n\
             s3.upload_file(sys.argv[1],'{bucket}','{key}')\n",
            self.endpoint()
        );
        self.boto(&code, Some(file));
    }
}

impl Moto {
    /// Fetches s3://bucket/key into `file`.
    fn get(&self, bucket: &str, key: &str, file: &Path) {
        let code = format!(
            "import boto3,sys\n\
             boto3.client('s3',endpoint_url='{}').download_file('{bucket}','{key}',sys.argv[1])\n",
            self.endpoint()
        );
        self.boto(&code, Some(file));
    }

    /// Waits (2 minutes at most) until `bucket` has an upload pending.
    fn wait_for_upload(&self, bucket: &str) {
        let started = Instant::now();
        while self.contents(bucket).contains("no uploads pending") {
            assert!(started.elapsed().as_secs() < 120, "no upload started");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn s3_commands_and_mount_equal_local_results() {
    if !python_ok() {
        return;
    }
    let _env = S3_ENV_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(moto) = Moto::start() else { return };
    let fx = Fixture::new();
    moto.put("images", "dir/image.dwarfs", &fx.image);
    let url = "s3://images/dir/image.dwarfs";
    use_moto(&moto);
    commands_match_local(url, &fx);
    if fuse_available() {
        let mnt = fx.path("mnt");
        let _m = mount(url, &mnt, "");
        assert_same_manifest(
            &manifest_of(&fx.image),
            &manifest_of(&mnt),
            Compare::Mounted,
        );
    }
    let out = remote_hoard(&["ls", "s3://images/missing.dwarfs"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr)
            .trim_end()
            .lines()
            .count(),
        1
    );
}

/// Objects changed (same size, new ETag) or deleted after the listing
/// and before their fetch, as during a build (`create -i s3://…/` lists
/// once, then fetches): each fetch fails with one line naming the
/// object, never giving bytes of another version. A failed fetch fails
/// the build before any output is written, as the missing prefix in
/// `a_tree_of_s3_objects_packs_as_that_tree` shows for both outputs.
#[test]
fn objects_changed_or_gone_after_the_listing_fail_their_fetch() {
    if !python_ok() {
        return;
    }
    let _env = S3_ENV_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body");
    std::fs::write(&file, b"first version\n").unwrap();
    for key in ["p/changed", "p/gone", "p/kept"] {
        moto.put("data", key, &file);
    }
    use_moto(&moto);
    let options = hoard_remote::Options::parse(REMOTE).unwrap();
    let bucket = hoard_remote::objects::Bucket::new("data", &options).unwrap();
    let listed = bucket.list("p/").unwrap();
    assert_eq!(listed.len(), 3);
    std::fs::write(&file, b"other version\n").unwrap();
    moto.put("data", "p/changed", &file);
    moto.delete("data", "p/gone");

    let fetch = |i: usize| {
        let mut bytes = Vec::new();
        let got = bucket.fetch(&listed[i], &mut |piece| {
            bytes.extend_from_slice(piece);
            Ok(())
        });
        (got, bytes)
    };
    let (changed, bytes) = fetch(0);
    let err = changed.unwrap_err();
    assert_eq!(
        err,
        "s3://data/p/changed: changed during the build (its ETag)"
    );
    assert!(bytes.is_empty());
    let (gone, _) = fetch(1);
    assert_eq!(
        gone.unwrap_err(),
        "s3://data/p/gone: vanished during the build"
    );
    let (kept, bytes) = fetch(2);
    assert!(kept.is_ok());
    assert_eq!(bytes, b"first version\n");
}

/// Uploads every file below `root` to s3://`bucket`/`prefix`/ (a
/// symlink as s3fs stores one); the files of `meta/` and the symlink
/// carry s3fs's metadata (mode, uid 1234, gid 4321, mtime 1500000000),
/// and `empty/` is a directory marker.
fn upload_tree(moto: &Moto, root: &Path, bucket: &str, prefix: &str) {
    let code = format!(
        "import boto3, os, sys\n\
         s3 = boto3.client('s3', endpoint_url='{}')\n\
         s3.create_bucket(Bucket='{bucket}')\n\
         root = sys.argv[1]\n\
         s3.put_object(Bucket='{bucket}', Key='{prefix}/empty/', Body=b'')\n\
         for d, dirs, files in os.walk(root):\n\
         \x20   for name in files:\n\
         \x20       path = os.path.join(d, name)\n\
         \x20       key = '{prefix}/' + os.path.relpath(path, root)\n\
         \x20       st = os.lstat(path)\n\
         \x20       meta = dict(mode=str(st.st_mode), uid='1234', gid='4321', mtime='1500000000')\n\
         \x20       body = os.readlink(path).encode() if os.path.islink(path) else open(path, 'rb').read()\n\
         \x20       extra = meta if '/meta/' in path or os.path.islink(path) else dict()\n\
         \x20       s3.put_object(Bucket='{bucket}', Key=key, Body=body, Metadata=extra)\n",
        moto.endpoint()
    );
    moto.boto(&code, Some(root));
}

/// A `hoard` command with the moto server's endpoint, test credentials
/// and `remote` options.
fn s3_command(moto: &Moto, remote: &str) -> Command {
    let mut command = hoard();
    command
        .env("HOARD_REMOTE", remote)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .envs(S3_ENV);
    command
}

/// `hoard ARGS` with the moto server's endpoint and test credentials.
fn s3_hoard(moto: &Moto, args: &[&str]) -> Output {
    s3_command(moto, REMOTE).args(args).output().unwrap()
}

/// [`s3_hoard`], asserting that it succeeds; returns its standard output
/// as text.
fn s3_ok(moto: &Moto, args: &[&str]) -> String {
    let out = output_ok(s3_command(moto, REMOTE).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`s3_ok`] with upload options and `TMPDIR` set to `tmp`.
fn s3_upload_ok(moto: &Moto, tmp: &Path, args: &[&str]) {
    output_ok(
        s3_command(moto, UPLOAD_REMOTE)
            .env("TMPDIR", tmp)
            .args(args),
    );
}

#[test]
fn a_tree_of_s3_objects_packs_as_that_tree() {
    if !python_ok() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(tree.join("meta")).unwrap();
    std::fs::create_dir_all(tree.join("empty")).unwrap();
    // Larger than one piece (8 MiB): fetched in two.
    std::fs::write(tree.join("big"), noise(9 << 20, 7)).unwrap();
    std::fs::write(tree.join("sub/deeper/small"), b"hello objects\n").unwrap();
    std::fs::write(tree.join("sub/zero"), b"").unwrap();
    std::fs::write(tree.join("meta/tool"), b"#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(
        tree.join("meta/tool"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    std::os::unix::fs::symlink("../sub/deeper/small", tree.join("meta/link")).unwrap();
    upload_tree(&moto, &tree, "data", "trees/one");

    let image = dir.path().join("objects.dwarfs");
    s3_ok(
        &moto,
        &[
            "create",
            "-i",
            "s3://data/trees/one/",
            "-o",
            image.to_str().unwrap(),
            "--no-progress",
        ],
    );
    // Every path, kind, mode and byte as the tree has them (owners and
    // times only where the metadata gives them).
    assert_same_tree(&tree, &image, "mtime,mtime_ns,uid,gid");
    let manifest = manifest_of(&image);
    for path in ["meta/tool", "meta/link"] {
        let line = manifest
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["path"] == path)
            .unwrap();
        assert_eq!(
            (&line["uid"], &line["gid"], &line["mtime"]),
            (&1234.into(), &4321.into(), &1_500_000_000.into()),
            "{path}"
        );
    }

    // Built from S3 into S3 (a multipart upload) and mounted from there,
    // the image is the tree again.
    moto.put("images", "placeholder", &image);
    s3_ok(
        &moto,
        &[
            "create",
            "-i",
            "s3://data/trees/one/",
            "-o",
            "s3://images/objects.dwarfs",
            "--no-progress",
        ],
    );
    if fuse_available() {
        let mnt = dir.path().join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        s3_ok(
            &moto,
            &["mount", "s3://images/objects.dwarfs", mnt.to_str().unwrap()],
        );
        let _m = common::FuseMount(mnt.clone());
        assert_same_tree(&tree, &mnt, "mtime,mtime_ns,uid,gid");
    }

    // An archive in S3, and one over HTTP, streamed into an image.
    common::sh(dir.path(), "tar -czf tree.tar.gz -C tree .");
    let archive = dir.path().join("tree.tar.gz");
    moto.put("data", "archives/tree.tar.gz", &archive);
    let server = RangeServer::start(&archive).expect("range server");
    for url in ["s3://data/archives/tree.tar.gz".to_string(), server.url()] {
        let image = dir.path().join("from-archive.dwarfs");
        s3_ok(
            &moto,
            &["create", "-i", &url, "-o", image.to_str().unwrap(), "-f"],
        );
        assert_same_tree(&tree, &image, "mtime_ns");
    }

    // Parts in S3 and on disk merged into S3.
    s3_ok(
        &moto,
        &[
            "merge",
            "s3://images/objects.dwarfs",
            image.to_str().unwrap(),
            "--as",
            "a",
            "--as",
            "b",
            "-o",
            "s3://images/merged.dwarfs",
        ],
    );
    for path in ["a/sub/deeper/small", "b/sub/deeper/small"] {
        assert_eq!(
            s3_ok(&moto, &["cat", "s3://images/merged.dwarfs", path]),
            "hello objects\n"
        );
    }

    // A prefix with nothing under it: one line, no image (local or in
    // S3, where no upload is left pending either).
    let missing = dir.path().join("missing.dwarfs");
    for output in [missing.to_str().unwrap(), "s3://images/missing.dwarfs"] {
        let out = s3_hoard(&moto, &["create", "-i", "s3://data/nothing/", "-o", output]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("s3://data/nothing/: no objects under this prefix"),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert!(!missing.exists());
    assert_eq!(
        moto.contents("images"),
        "merged.dwarfs objects.dwarfs placeholder\nno uploads pending\n"
    );
    // An existing object is not overwritten without -f.
    let out = s3_hoard(
        &moto,
        &[
            "create",
            "-i",
            tree.to_str().unwrap(),
            "-o",
            "s3://images/placeholder",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s3://images/placeholder: already exists"),
        "{err}"
    );
    // Nor by a merge, which says so before reading any part (this one
    // does not exist).
    let out = s3_hoard(
        &moto,
        &[
            "merge",
            dir.path().join("no-such-part").to_str().unwrap(),
            "--as",
            "a",
            "-o",
            "s3://images/placeholder",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("s3://images/placeholder: already exists"),
        "{err}"
    );
}

#[test]
fn an_encrypted_image_over_http_fetches_only_the_blocks_read() {
    if !python_ok() {
        return;
    }
    let fx = Fixture::new();
    let (identity, recipient) = common::age_identity(fx.dir.path(), "id.txt");
    let image = create_image(
        &fx.path("tree"),
        &fx.path("encrypted.dwarfs"),
        &["-S", "16", "--encrypt-to", &recipient],
    );
    let server = RangeServer::start(&image).expect("range server starts");
    let url = server.url();
    let id = identity.to_str().unwrap();
    let listing = remote_ok(&["ls", "-R", &url, "--identity", id]);
    assert!(listing.contains("sub/deeper/small"), "{listing}");
    let requests = server.stats()["requests"].as_u64().unwrap();
    assert!(requests <= 4, "{requests} requests to open and list");
    server.control("/__reset");
    let small = remote_ok(&["cat", &url, "sub/deeper/small", "--identity", id]);
    assert_eq!(small, "hello remote\n");
    let bytes = server.stats()["bytes"].as_u64().unwrap();
    let size = std::fs::metadata(&image).unwrap().len();
    assert!(
        bytes < size / 4,
        "{bytes} of {size} bytes fetched to read one small file"
    );
    // `info` with the key reads the metadata and block headers, no block.
    server.control("/__reset");
    let info = remote_ok(&["info", "--json", &url, "--identity", id]);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert!(info["blocks"].as_u64().unwrap() >= 20, "{info}");
    let bytes = server.stats()["bytes"].as_u64().unwrap();
    assert!(bytes < size / 4, "{bytes} of {size} bytes fetched for info");
    let out = remote_hoard(&["cat", &url, "sub/deeper/small"]);
    assert_eq!(out.status.code(), Some(1), "cat without the identity");
}

/// A tree of 20 MiB that does not compress (an image of three 8 MiB
/// parts), and the signing key `key` beside it.
fn upload_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    for i in 0..5u64 {
        std::fs::write(tree.join(format!("f{i}")), noise(4 << 20, i + 40)).unwrap();
    }
    std::fs::write(tree.join("sub/small"), b"small\n").unwrap();
    let key = dir.path().join("key");
    hoard_ok(&["keygen", "-o", key.to_str().unwrap(), "-C", "tests"]);
    (dir, tree)
}

/// `create -o s3://…` and `merge -o s3://…` send the image as it is
/// written: the object is byte for byte the image built locally (signed
/// too: its digest is hashed as the sections go out), and not a byte is
/// written locally (TMPDIR names no directory, a merge's is left empty).
/// Only recovery data, planned for the whole file, needs a temporary
/// file (in TMPDIR, removed after the upload).
#[test]
fn images_stream_to_s3_byte_for_byte_without_a_local_copy() {
    if !python_ok() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let (dir, tree) = upload_fixture();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    moto.put("images", "placeholder", &tree.join("sub/small"));
    let reproducible = ["--no-progress", "--no-history", "--no-create-timestamp"];
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let nowhere = dir.path().join("no-such-dir");
    for (name, extra, tmpdir) in [
        ("plain", vec![], &nowhere),
        ("signed", vec!["--sign", &path("key.key")], &nowhere),
        ("recovered", vec!["--recovery", "5"], &tmp),
    ] {
        let local = path(&format!("{name}.dwarfs"));
        let url = format!("s3://images/{name}.dwarfs");
        for output in [local.as_str(), url.as_str()] {
            s3_upload_ok(
                &moto,
                tmpdir,
                &[
                    &["create", "-i", s(&tree), "-o", output][..],
                    &reproducible,
                    &extra,
                ]
                .concat(),
            );
        }
        let fetched = dir.path().join(format!("{name}.fetched"));
        moto.get("images", &format!("{name}.dwarfs"), &fetched);
        assert!(
            std::fs::read(&fetched).unwrap() == std::fs::read(&local).unwrap(),
            "{name}"
        );
    }
    let merge = |output: &str| {
        let parts = [path("plain.dwarfs"), path("signed.dwarfs")];
        let args = [
            "merge",
            &parts[0],
            &parts[1],
            "--as",
            "a",
            "--as",
            "b",
            "--no-history",
            "-o",
            output,
        ];
        s3_upload_ok(&moto, &tmp, &args);
    };
    merge(&path("merged.dwarfs"));
    merge("s3://images/merged.dwarfs");
    let fetched = dir.path().join("merged.fetched");
    moto.get("images", "merged.dwarfs", &fetched);
    assert!(std::fs::read(&fetched).unwrap() == std::fs::read(path("merged.dwarfs")).unwrap());
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    assert_eq!(
        moto.contents("images"),
        "merged.dwarfs placeholder plain.dwarfs recovered.dwarfs signed.dwarfs\nno uploads pending\n"
    );
}

/// A build to S3 that fails once parts are stored (the object appeared
/// meanwhile: it is not overwritten), or that SIGINT or SIGTERM stops
/// (here while it waits for its archive on standard input, its spool
/// made): one line, and the upload aborted, leaving no object, no part
/// and no local file.
#[test]
fn a_failed_or_interrupted_upload_leaves_no_object_and_no_parts() {
    if !python_ok() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let (dir, tree) = upload_fixture();
    common::sh(dir.path(), "tar -cf tree.tar -C tree .");
    let small = tree.join("sub/small");
    moto.put("images", "placeholder", &small);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let archive = std::fs::read(dir.path().join("tree.tar")).unwrap();
    let start = |key: &str| {
        s3_command(&moto, UPLOAD_REMOTE)
            .env("TMPDIR", &tmp)
            .args([
                "create",
                "-i",
                "-",
                "-o",
                &format!("s3://images/{key}"),
                "--no-progress",
            ])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let mut child = start("cut.dwarfs");
        moto.wait_for_upload("images");
        // The archive's spool in $TMPDIR is made once its start is read.
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&archive[..archive.len() / 2]).unwrap();
        let started = Instant::now();
        while std::fs::read_dir(&tmp).unwrap().count() == 0 {
            assert!(started.elapsed().as_secs() < 120, "no spool made");
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        drop(stdin);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + signal), "{err}");
        let contents = moto.contents("images");
        assert_eq!(contents, "placeholder\nno uploads pending\n", "{err}");
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    }
    let mut child = start("late.dwarfs");
    moto.wait_for_upload("images");
    moto.put("images", "late.dwarfs", &small);
    child.stdin.take().unwrap().write_all(&archive).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("s3://images/late.dwarfs: already exists"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(
        moto.contents("images"),
        "late.dwarfs placeholder\nno uploads pending\n"
    );
    let fetched = dir.path().join("late.fetched");
    moto.get("images", "late.dwarfs", &fetched);
    assert_eq!(std::fs::read(&fetched).unwrap(), b"small\n");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

/// A real `create -i s3://…/` build whose objects change (a new ETag,
/// same size) or vanish (an empty one too, which is not taken for a
/// directory marker) between the listing and their fetch (the test hook
/// HOARD_TEST_AFTER_LISTING holds the build there): one line naming the
/// object, exit 1, and no image, locally or in S3 (no pending upload).
/// The directory marker `p/empty/` packs as a directory.
#[test]
fn objects_changed_or_gone_during_a_build_fail_it_with_one_line() {
    if !python_ok() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for name in ["kept", "changed", "gone"] {
        std::fs::write(tree.join(name), b"first version\n").unwrap();
    }
    std::fs::write(tree.join("void"), b"").unwrap();
    let other = dir.path().join("other");
    std::fs::write(&other, b"other version\n").unwrap();
    moto.put("images", "placeholder", &other);
    let fifo = dir.path().join("listed");
    common::sh(dir.path(), "mkfifo listed");
    let local = dir.path().join("out.dwarfs");
    for (key, change) in [
        ("changed", "changed during the build (its ETag)"),
        ("gone", "vanished during the build"),
        ("void", "vanished during the build"),
    ] {
        for output in [local.to_str().unwrap(), "s3://images/out.dwarfs"] {
            upload_tree(&moto, &tree, "data", "p");
            let child = s3_command(&moto, REMOTE)
                .env("HOARD_TEST_AFTER_LISTING", &fifo)
                .args([
                    "create",
                    "-i",
                    "s3://data/p/",
                    "-o",
                    output,
                    "--no-progress",
                ])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Opened once the build, having listed, waits to read it.
            let started = Instant::now();
            let held = loop {
                use std::os::unix::fs::OpenOptionsExt;
                match std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo)
                {
                    Ok(f) => break f,
                    Err(_) => {
                        assert!(started.elapsed().as_secs() < 120, "no listing");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            };
            if key == "changed" {
                moto.put("data", "p/changed", &other);
            } else {
                moto.delete("data", &format!("p/{key}"));
            }
            drop(held);
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(
                err.contains(&format!("s3://data/p/{key}: {change}")),
                "{err}"
            );
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(!local.exists());
            assert_eq!(moto.contents("images"), "placeholder\nno uploads pending\n");
        }
    }
    upload_tree(&moto, &tree, "data", "p");
    s3_ok(
        &moto,
        &[
            "create",
            "-i",
            "s3://data/p/",
            "-o",
            local.to_str().unwrap(),
        ],
    );
    let listing = hoard_ok(&["ls", "-l", local.to_str().unwrap()]);
    let empty = listing.lines().find(|l| l.ends_with(" empty")).unwrap();
    assert!(empty.starts_with('d'), "{listing}");
}
