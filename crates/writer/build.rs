//! Records the build's identity for the history entries of the images the
//! writer makes (whichever program it is built into: the `hoard` command
//! or the Python package): `HOARD_COMPILER_ID` (`rustc 1.83.0`), and from
//! a checkout `HOARD_GIT_REV`, `HOARD_GIT_BRANCH` and `HOARD_GIT_RELEASE`
//! (set when HEAD is the tag `v<version>`). Outside a git checkout (a
//! source tarball, or without `git`) the git fields are left out.
//!
//! Cargo runs build scripts in the package's directory, so the git commands
//! below look at the checkout this crate is in.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    compiler_id();
    // A tarball unpacked inside some other repository is not a checkout of
    // hoard: only trust git when it tracks this very file.
    if git(&["ls-files", "--full-name", "build.rs"]).is_some() {
        git_fields(env!("CARGO_PKG_VERSION"));
        watch_head();
    }
}

/// `HOARD_COMPILER_ID`: "rustc 1.83.0 (90b35a623 2024-11-26)" -> "rustc 1.83.0".
fn compiler_id() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("--version").output();
    if let Some(v) = out.ok().and_then(|o| String::from_utf8(o.stdout).ok()) {
        let short: Vec<&str> = v.split_whitespace().take(2).collect();
        println!("cargo:rustc-env=HOARD_COMPILER_ID={}", short.join(" "));
    }
}

/// `HOARD_GIT_REV`, `HOARD_GIT_BRANCH` and `HOARD_GIT_RELEASE`.
fn git_fields(version: &str) {
    let Some(rev) = git(&["rev-parse", "--short=10", "HEAD"]) else {
        return;
    };
    let branch = git(&["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_else(|| "HEAD".into());
    let tag = format!("v{version}");
    let is_release =
        git(&["describe", "--tags", "--exact-match", "HEAD"]).as_deref() == Some(&*tag);
    println!("cargo:rustc-env=HOARD_GIT_REV={rev}");
    println!("cargo:rustc-env=HOARD_GIT_BRANCH={branch}");
    if is_release {
        println!("cargo:rustc-env=HOARD_GIT_RELEASE=1");
    }
}

/// Rebuilds when HEAD moves: a checkout (`HEAD`), a commit on the current
/// branch (its ref file) or a `git pack-refs` (`packed-refs`).
fn watch_head() {
    let mut files = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(git(&["rev-parse", "--git-path", &branch]));
    }
    files.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for file in files.into_iter().flatten() {
        // Cargo reruns a build script on every build while a watched file
        // is missing, so only existing ones are named.
        if Path::new(&file).exists() {
            println!("cargo:rerun-if-changed={file}");
        }
    }
}

/// Runs git; its trimmed output when it succeeds and prints something.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
