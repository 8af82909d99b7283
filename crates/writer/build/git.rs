//! The git queries of the build scripts of hoard-writer and hoard-cli
//! (each includes this file as a module of its own by path: build scripts
//! cannot share a crate of the workspace).
//!
//! Cargo runs build scripts in the package's directory, so the git
//! commands look at the checkout that package is in.

use std::path::Path;
use std::process::Command;

/// Whether the package is built from a git checkout of hoard. A tarball
/// unpacked inside some other repository is not one: git is trusted only
/// when it tracks the package's own build script.
pub fn in_checkout() -> bool {
    run(&["ls-files", "--full-name", "build.rs"]).is_some()
}

/// Rebuilds when HEAD moves: a checkout (`HEAD`), a commit on the current
/// branch (its ref file) or a `git pack-refs` (`packed-refs`).
pub fn watch_head() {
    let mut files = vec![run(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = run(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(run(&["rev-parse", "--git-path", &branch]));
    }
    files.push(run(&["rev-parse", "--git-path", "packed-refs"]));
    for file in files.into_iter().flatten() {
        // Cargo reruns a build script on every build while a watched file
        // is missing, so only existing ones are named.
        if Path::new(&file).exists() {
            println!("cargo:rerun-if-changed={file}");
        }
    }
}

/// Runs git; its trimmed output when it succeeds and prints something.
pub fn run(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
