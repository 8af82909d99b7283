//! `hoard`: inspect, verify and extract DwarFS images.
//!
//! Invoked as `dwarfsck` or `dwarfsextract` (through a symlink or copy of
//! that name) it accepts those tools' common options instead.

mod args;
mod checksum;
mod cmd;
mod compat;
mod manifest;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Like other Unix tools, stop quietly when the reader of our output
    // goes away (`hoard ls IMAGE | head`) instead of failing to print.
    // SAFETY: setting a signal's disposition to the default is always sound.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = match compat::parse(&argv) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cmd::run(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hoard: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// Formats an error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
        .replace('\n', " ")
}
