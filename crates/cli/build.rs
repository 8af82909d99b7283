//! Records what the binary says about its build:
//! - `HOARD_VERSION`: the version and git commit (`0.1.0 (84a5946)`), for
//!   `hoard --version` and the man pages; `HOARD_DATE`, the commit's date,
//!   for the man pages;
//!
//! (What the history entries of images record about the build comes from
//! hoard-writer's build script.)
//!
//! Built outside a git checkout (a source tarball, or without `git`) the
//! version is the package version alone and the git fields are left out.
//!
//! The git queries are those of hoard-writer's `build/git.rs`, shared
//! with its build script.

#[path = "../writer/build/git.rs"]
mod git;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../writer/build/git.rs");
    let version = env!("CARGO_PKG_VERSION");
    let commit = git::in_checkout()
        .then(|| git::run(&["rev-parse", "--short", "HEAD"]))
        .flatten();
    let full = match &commit {
        Some(commit) => format!("{version} ({commit})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=HOARD_VERSION={full}");
    // The date the man pages carry: the commit's, else SOURCE_DATE_EPOCH's
    // (set by reproducible package builds), else today's.
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let date = commit
        .and_then(|_| git::run(&["log", "-1", "--format=%cs", "HEAD"]))
        .unwrap_or_else(|| {
            let secs = std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs())
                });
            civil_date(secs / 86_400)
        });
    println!("cargo:rustc-env=HOARD_DATE={date}");
    git::watch_head();
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (proleptic Gregorian).
fn civil_date(days: u64) -> String {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
