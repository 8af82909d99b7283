//! `hoard`: pack directory trees into DwarFS images, and mount, inspect,
//! verify and extract them.
//!
//! Invoked as `mkdwarfs`, `dwarfs`, `dwarfsck` or `dwarfsextract` (through
//! a symlink or copy of that name) it accepts those tools' common options
//! instead.

mod archive;
mod args;
mod checksum;
mod cmd;
mod compat;
mod generate;
mod manifest;
mod pool;
mod section_hash;
mod size;
mod target;
mod trust;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Like other Unix tools, stop quietly when the reader of our output
    // goes away (`hoard ls IMAGE | head`) instead of failing to print.
    // SAFETY: setting a signal's disposition to the default is always sound.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    limit_malloc_arenas();
    section_hash::install();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = match compat::parse(&argv) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // `hoard diff` follows diff(1): 1 says the trees differ, so trouble
    // (a missing path, a bad manifest) is 2.
    let trouble = if matches!(command.as_slice(), [args::Command::Diff(_)]) {
        2
    } else {
        1
    };
    match cmd::run(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hoard: {}", one_line(&e));
            ExitCode::from(trouble)
        }
    }
}

/// Caps glibc's malloc arenas at one per core (its default is eight per
/// core): each thread's arena keeps memory freed by an earlier stage, and
/// with one per core an `-l1` build peaked 7-12 MiB lower (45 to 37 MiB on
/// a 64 MiB tree) in the same time.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: called before any other thread starts; mallopt only
        // sets a limit for arenas made from now on.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }
}

/// Formats an error and its causes on one line, without the
/// ` (os error N)` that Rust adds to system errors, and without a cause
/// its error's message already ends with.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if !parts.last().is_some_and(|last| last.ends_with(&cause)) {
            parts.push(cause);
        }
    }
    let mut line = parts.join(": ").replace('\n', " ");
    while let Some(start) = line.find(" (os error ") {
        let Some(len) = line[start..].find(')') else {
            break;
        };
        line.replace_range(start..=start + len, "");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_on_one_line_without_repeats() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = anyhow::Error::new(io).context("x: No such file or directory (os error 2)");
        let e = e.context("cannot open image 'x'");
        assert_eq!(
            one_line(&e),
            "cannot open image 'x': x: No such file or directory"
        );
    }
}
