//! Records the versions of the pure-Rust codec crates from the workspace's
//! Cargo.lock, for the history entries images record.

use std::path::Path;

fn main() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let Ok(text) = std::fs::read_to_string(&lock) else {
        return;
    };
    for (krate, var) in [
        ("brotli", "HOARD_VERSION_BROTLI"),
        ("lz4_flex", "HOARD_VERSION_LZ4_FLEX"),
    ] {
        if let Some(version) = locked_version(&text, krate) {
            println!("cargo:rustc-env={var}={version}");
        }
    }
}

/// The version Cargo.lock records for `krate` (the first, if several).
fn locked_version(lock: &str, krate: &str) -> Option<String> {
    let name = format!("name = \"{krate}\"");
    let mut lines = lock.lines();
    lines.find(|l| *l == name)?;
    let version = lines.next()?.strip_prefix("version = \"")?;
    Some(version.trim_end_matches('"').to_string())
}
