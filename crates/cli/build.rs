//! Puts the git commit the binary is built from into `HOARD_VERSION`
//! (`0.1.0 (84a5946)`), for `hoard --version` and the man pages. Built
//! outside a git checkout (a source tarball, or without `git`) it is the
//! package version alone.
//!
//! Cargo runs build scripts in the package's directory, so the git commands
//! below look at the checkout this crate is in.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let version = env!("CARGO_PKG_VERSION");
    // A tarball unpacked inside some other repository is not a checkout of
    // hoard: only trust git when it tracks this very file.
    let tracked = git(&["ls-files", "--full-name", "build.rs"]).is_some();
    let commit = tracked
        .then(|| git(&["rev-parse", "--short", "HEAD"]))
        .flatten();
    let full = match commit {
        Some(commit) => format!("{version} ({commit})"),
        None => version.to_string(),
    };
    watch_head();
    println!("cargo:rustc-env=HOARD_VERSION={full}");
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
