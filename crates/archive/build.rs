//! Links the distribution's libarchive (Debian: libarchive-dev, whose
//! runtime is libarchive13), found through pkg-config.
fn main() {
    if let Err(e) = pkg_config::Config::new()
        .atleast_version("3.6")
        .probe("libarchive")
    {
        panic!("libarchive 3.6 or newer was not found ({e}); install libarchive-dev (scripts/install-deps.sh does)");
    }
}
