//! The subcommands, one module each.

mod cat;
mod check;
pub mod create;
pub mod create_args;
mod diff;
mod extract;
mod info;
mod info_history;
mod ls;
mod manifest;
mod mount;
mod progress;
mod repair;
mod rewrite;
pub(crate) mod time;

use crate::args::{Command, ImageArgs};
use anyhow::{Context, Result};
use hoard_reader::{Filesystem, FsOptions, OpenOptions};
use std::process::ExitCode;

/// Runs `commands` in order, stopping at the first that fails; returns the
/// exit code of the last one run.
pub fn run(commands: Vec<Command>) -> Result<ExitCode> {
    let mut code = 0u8;
    for command in commands {
        code = match command {
            Command::Generate(a) => crate::generate::run(&a)?,
            Command::Create(a) => match &a.recompress {
                Some(what) => rewrite::run(&a.as_rewrite(what))?,
                None => create::run(&a)?,
            },
            Command::Rewrite(a) => rewrite::run(&a)?,
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
        };
        if code != 0 {
            break;
        }
    }
    Ok(ExitCode::from(code))
}

/// Opens the image named by `args`.
pub fn open(args: &ImageArgs) -> Result<Filesystem> {
    let options = FsOptions {
        open: OpenOptions {
            offset: args.offset,
            no_mmap: false,
            image_size: None,
        },
        cache_size: args.cache_size,
        ..FsOptions::default()
    };
    Filesystem::open(&args.image, &options)
        .with_context(|| format!("cannot open image '{}'", args.image.display()))
}

/// Runs `f` on a thread pool of `workers` threads (default: one per core).
pub fn with_workers<T: Send>(workers: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers.unwrap_or(0))
        .build()?;
    Ok(pool.install(f))
}
