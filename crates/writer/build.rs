//! Records the build's identity for the history entries of the images the
//! writer makes (whichever program it is built into: the `hoard` command
//! or the Python package): `HOARD_COMPILER_ID` (`rustc 1.83.0`), and from
//! a checkout `HOARD_GIT_REV`, `HOARD_GIT_BRANCH` and `HOARD_GIT_RELEASE`
//! (set when HEAD is the tag `v<version>`). Outside a git checkout (a
//! source tarball, or without `git`) the git fields are left out.
//!
//! The git queries are those of `build/git.rs`, shared with hoard-cli's
//! build script.

#[path = "build/git.rs"]
mod git;

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/git.rs");
    compiler_id();
    if git::in_checkout() {
        git_fields(env!("CARGO_PKG_VERSION"));
        git::watch_head();
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
    let Some(rev) = git::run(&["rev-parse", "--short=10", "HEAD"]) else {
        return;
    };
    let branch = git::run(&["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_else(|| "HEAD".into());
    let tag = format!("v{version}");
    let is_release =
        git::run(&["describe", "--tags", "--exact-match", "HEAD"]).as_deref() == Some(&*tag);
    println!("cargo:rustc-env=HOARD_GIT_REV={rev}");
    println!("cargo:rustc-env=HOARD_GIT_BRANCH={branch}");
    if is_release {
        println!("cargo:rustc-env=HOARD_GIT_RELEASE=1");
    }
}
