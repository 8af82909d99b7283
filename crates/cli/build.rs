//! Records what this build's history entries say about it: the compiler,
//! and, when built from a git checkout, the revision, branch and whether
//! the checkout is the release tag `v<version>`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    if let Some(v) = output(&rustc, &["--version"]) {
        // "rustc 1.83.0 (90b35a623 2024-11-26)" -> "rustc 1.83.0"
        let short: Vec<&str> = v.split_whitespace().take(2).collect();
        println!("cargo:rustc-env=HOARD_COMPILER_ID={}", short.join(" "));
    }
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        let mut all = vec!["-C", dir];
        all.extend_from_slice(args);
        output("git", &all)
    };
    let Some(rev) = git(&["rev-parse", "--short=10", "HEAD"]) else {
        return;
    };
    // Rebuild when HEAD moves: HEAD itself, the branch it points to, and
    // packed refs.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(r);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    let branch = git(&["rev-parse", "--abbrev-ref", "HEAD"]).unwrap_or_else(|| "HEAD".into());
    let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
    let is_release =
        git(&["describe", "--tags", "--exact-match", "HEAD"]).as_deref() == Some(&*tag);
    println!("cargo:rustc-env=HOARD_GIT_REV={rev}");
    println!("cargo:rustc-env=HOARD_GIT_BRANCH={branch}");
    if is_release {
        println!("cargo:rustc-env=HOARD_GIT_RELEASE=1");
    }
}

/// The trimmed standard output of a command that succeeded.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
