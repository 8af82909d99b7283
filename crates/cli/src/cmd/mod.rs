//! The subcommands, one module each.

mod bundle;
mod cat;
mod check;
pub mod create;
mod create_layers;
mod diff;
mod extract;
mod info;
mod info_history;
mod interrupt;
mod keygen;
mod ls;
mod manifest;
mod merge;
mod mount;
pub(crate) mod progress;
mod push;
mod repair;
mod rewrite;
mod sign;
pub(crate) mod time;
mod verify;

use crate::args::Command;
use anyhow::Result;
use std::process::ExitCode;

/// Runs `commands` in order, stopping at the first that fails; returns the
/// exit code of the last one run.
pub fn run(commands: Vec<Command>) -> Result<ExitCode> {
    // Images may be URLs; `mount -o remote_...` sets its own options.
    hoard_remote::install(hoard_remote::Options::from_env().map_err(anyhow::Error::msg)?);
    // `mount` forks first and builds the pool in the driver's process.
    if !matches!(commands.as_slice(), [Command::Mount(_)]) {
        crate::pool::build_global_pool();
    }
    let mut code = 0u8;
    for command in commands {
        code = match command {
            Command::Generate(a) => crate::generate::run(&a)?,
            Command::Create(a) => match (&a.recompress, &a.layers) {
                (Some(what), _) => rewrite::run(&a.as_rewrite(what))?,
                (None, Some(dir)) => create_layers::run(&a, dir)?,
                (None, None) => create::run(&a)?,
            },
            Command::Bundle(a) => bundle::run(&a)?,
            Command::Rewrite(a) => rewrite::run(&a)?,
            Command::Merge(a) => merge::run(&a)?,
            Command::Check(a) => check::run(&a)?,
            Command::Repair(a) => repair::run(&a)?,
            Command::Ls(a) => ls::run(&a)?,
            Command::Cat(a) => cat::run(&a)?,
            Command::Info(a) => info::run(&a)?,
            Command::Extract(a) => extract::run(&a)?,
            Command::Mount(a) => mount::run(&a)?,
            Command::Umount(a) => mount::umount(&a)?,
            Command::Manifest(a) => manifest::run(&a)?,
            Command::Diff(a) => diff::run(&a)?,
            Command::Keygen(a) => keygen::run(&a)?,
            Command::Sign(a) => sign::run(&a)?,
            Command::Verify(a) => verify::run(&a)?,
            Command::Push(a) => push::run(&a)?,
        };
        if code != 0 {
            break;
        }
    }
    Ok(ExitCode::from(code))
}
