//! `hoard-mount`: the FUSE driver alone (see `hoard_runtime::mount`), for
//! mounts that start apps: it pages in a quarter of what `hoard mount`
//! does from a cold cache.

fn main() {
    std::process::exit(hoard_runtime::mount::run(std::env::args_os().collect()));
}
