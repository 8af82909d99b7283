//! `include/hoard.h` is what cbindgen makes of the current source. Run
//! with `HOARD_BLESS=1` to rewrite it after changing the API.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let committed_path = dir.join("include/hoard.h");
    if std::env::var_os("HOARD_BLESS").is_some() {
        std::fs::write(&committed_path, &generated).unwrap();
    }
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "crates/capi/include/hoard.h is out of date: run `HOARD_BLESS=1 cargo test -p hoard-capi --test header` and commit it"
    );
}
