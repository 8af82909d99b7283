//! Self-running bundles (#46): `hoard bundle` writes the runtime, a note
//! and the image in one executable file. Run, it mounts the image
//! privately (FUSE) and runs its entry with its arguments, in place: exit
//! status and signals are the entry's; the guardian unmounts once the
//! entry has exited, also when it is killed, and `auto_unmount` when the
//! guardian is. Without FUSE it extracts to a temporary directory and
//! removes it afterwards. The image behind the runtime reads with `hoard`
//! and DwarFS's tools (`-O auto`).

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The entry of the tests: prints its arguments and the bundle's
/// variables, reads a file of the tree, says `ready`, and exits 3; with
/// `wait` as its first argument it waits for SIGTERM (sleeping in the
/// background, so the trap runs at once) and exits 42 then. Otherwise it
/// uses only the shell's builtins, so it runs with any `PATH`.
const ENTRY: &str = r#"#!/bin/sh
trap 'exit 42' TERM
echo "args: $*"
echo "zero: $0"
echo "argv0: $HOARD_BUNDLE_ARGV0"
echo "bundle: $HOARD_BUNDLE"
echo "dir: $HOARD_BUNDLE_DIR"
read -r line < "$HOARD_BUNDLE_DIR/share/data.txt"
echo "data: $line"
echo ready
if [ "$1" = wait ]; then
  while :; do sleep 1 & wait $!; done
fi
exit 3
"#;

/// A tree with the entry `bin/app`, a data file and a read-only
/// directory; its bundle `APP`; and an empty temporary directory for
/// the bundle's mount or copy (`TMPDIR`).
fn bundled() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("bin")).unwrap();
    std::fs::create_dir_all(tree.join("share/ro")).unwrap();
    std::fs::write(tree.join("bin/app"), ENTRY).unwrap();
    std::fs::write(tree.join("share/data.txt"), "hello from the image\n").unwrap();
    std::fs::write(tree.join("share/ro/f"), "x").unwrap();
    sh(&tree, "chmod 755 bin/app && chmod 555 share/ro");
    let app = make_bundle(&tree, "bin/app", &dir.path().join("APP"));
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    (dir, tree, app)
}

/// The bundle `app` as a command, with its own `TMPDIR` (`tmp` beside it).
fn bundle_command(app: &Path) -> Command {
    let mut command = Command::new(app);
    command.env("TMPDIR", app.with_file_name("tmp"));
    command
}

/// Checks what the entry printed when run as `app` with `args` from a
/// mount or copy under `tmp`.
fn assert_ran(stdout: &str, app: &Path, args: &str) {
    let tmp = app.with_file_name("tmp");
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("dir: "))
        .unwrap_or_else(|| panic!("no dir in {stdout}"));
    assert!(dir.starts_with(tmp.to_str().unwrap()), "{dir}");
    let expected = format!(
        "args: {args}\nzero: {dir}/bin/app\nargv0: {}\nbundle: {}\ndir: {dir}\ndata: hello from the image\nready\n",
        app.display(),
        app.display()
    );
    assert!(stdout.starts_with(&expected), "{stdout}");
}

#[test]
fn a_bundle_runs_its_entry_with_its_arguments_and_exit_status() {
    if !fuse_available() {
        return;
    }
    let (_dir, _tree, app) = bundled();
    let out = bundle_command(&app)
        .args(["one", "two three"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ran(&stdout, &app, "one two three");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_cleaned_up(&app.with_file_name("tmp"));
}

/// Starts `app wait` and returns it once the entry says it is ready.
fn started(app: &Path) -> std::process::Child {
    let mut child = bundle_command(app)
        .arg("wait")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    while !seen.ends_with("ready\n") {
        let line = lines
            .next()
            .expect("the entry ended before it was ready")
            .unwrap();
        seen.push_str(&line);
        seen.push('\n');
    }
    assert_ran(&seen, app, "wait");
    assert_eq!(mounts_under(&app.with_file_name("tmp")).len(), 1);
    child
}

#[test]
fn a_signal_to_the_bundle_reaches_the_entry_and_the_mount_goes() {
    if !fuse_available() {
        return;
    }
    let (_dir, _tree, app) = bundled();
    let child = started(&app);
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(42));
    assert_cleaned_up(&app.with_file_name("tmp"));
}

#[test]
fn a_killed_entry_or_driver_leaves_no_mount() {
    use std::os::unix::process::ExitStatusExt;
    if !fuse_available() {
        return;
    }
    let (_dir, _tree, app) = bundled();
    let tmp = app.with_file_name("tmp");
    let mut child = started(&app);
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_cleaned_up(&tmp);

    // The driver (the guardian) killed: fusermount3's auto_unmount
    // unmounts; its empty mount point stays.
    let mut child = started(&app);
    let driver = guardian_of(&app, child.id());
    // SAFETY: kill on the guardian's pid, found just above.
    unsafe { libc::kill(driver, libc::SIGKILL) };
    eventually("the mount gone", || mounts_under(&tmp).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The process other than `entry` whose executable is `app`.
fn guardian_of(app: &Path, entry: u32) -> i32 {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|&pid| {
            pid != entry as i32
                && std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == app)
        })
        .expect("the bundle's guardian")
}

#[test]
fn without_fuse_a_bundle_runs_from_a_copy_it_removes() {
    let (_dir, _tree, app) = bundled();
    // No fusermount3 on PATH (the entry needs nothing from it).
    let out = bundle_command(&app)
        .env("PATH", "/nonexistent")
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ran(&String::from_utf8_lossy(&out.stdout), &app, "x");
    assert_cleaned_up(&app.with_file_name("tmp"));

    // /dev/fuse not a FUSE device: the mount fails, the copy is used.
    if !(is_root() && has_tool("unshare")) {
        skipped("a mount that fails needs root and unshare");
        return;
    }
    let out = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --bind /dev/null /dev/fuse && exec \"$0\" y",
        ])
        .arg(&app)
        .env("TMPDIR", app.with_file_name("tmp"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot mount the bundle"), "{stderr}");
    assert_ran(&String::from_utf8_lossy(&out.stdout), &app, "y");
    assert_cleaned_up(&app.with_file_name("tmp"));
}

#[test]
fn the_image_behind_the_runtime_reads_as_the_tree() {
    let (dir, tree, app) = bundled();
    let out = dir.path().join("out");
    let status = Command::new(&app)
        .args(["--bundle-extract".as_ref(), out.as_os_str()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(differences(&app, &out, ""), "");
    assert_eq!(same_to_the_second(&tree, &out), "");
    assert_eq!(hoard_ok(&["ls", s(&app)]), "bin\nshare\n");
    if dwarfs_bin().is_none() {
        return;
    }
    let by_dwarfs = dir.path().join("dwarfs");
    std::fs::create_dir(&by_dwarfs).unwrap();
    let o = tool("dwarfsextract")
        .args(["-O", "auto", "-i", s(&app), "-o", s(&by_dwarfs)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(differences_below_root(&app, &by_dwarfs, ""), "");
}

#[test]
fn bundle_mount_prints_its_mount_and_unmounts_when_signalled() {
    if !fuse_available() {
        return;
    }
    let (_dir, tree, app) = bundled();
    let mut child = bundle_command(&app)
        .arg("--bundle-mount")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mnt = PathBuf::from(line.trim_end());
    assert_eq!(same_to_the_second(&tree, &mnt), "");
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert_cleaned_up(&app.with_file_name("tmp"));
}

#[test]
fn bundle_refuses_entries_that_cannot_run() {
    let (dir, tree, _app) = bundled();
    let out = dir.path().join("B");
    for (entry, says) in [
        ("bin/missing", "not in the image"),
        ("share/data.txt", "not executable"),
        ("share", "not a file"),
        ("../bin/app", "relative path"),
        ("/bin/app", "relative path"),
    ] {
        let err = hoard_fails(&[
            "bundle",
            "-i",
            s(&tree),
            "--entry",
            entry,
            "-o",
            s(&out),
            "--runtime",
            env!("CARGO_BIN_EXE_hoard-runtime"),
        ]);
        assert!(err.contains(says), "{entry}: {err}");
        assert!(!out.exists());
    }
    let err = hoard_fails(&[
        "bundle",
        "-i",
        s(&tree),
        "--entry",
        "bin/app",
        "-o",
        s(&out),
        "--runtime",
        s(&tree.join("bin/app")),
    ]);
    assert!(err.contains("ELF"), "{err}");
}
