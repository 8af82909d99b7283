//! `hoard-runtime`: the program at the start of every bundle that
//! `hoard bundle` writes (see the `hoard-runtime` crate). It uses nothing
//! of the `hoard` command, so only the runtime's crates are linked in.

fn main() {
    std::process::exit(hoard_runtime::launch::run(std::env::args_os().collect()));
}
