//! The subcommands, one module each.

mod cat;
mod check;
pub mod create;
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
mod progress;
mod repair;
mod rewrite;
mod sign;
pub(crate) mod time;
mod verify;

use crate::args::{Command, ImageArgs, LayerArgs};
use anyhow::{Context, Result};
use hoard_reader::{Filesystem, FsOptions, OpenOptions, Stack};
use hoard_writer::archive::cache::{is_packable_archive, may_be_archive, ArchiveCache, Cached};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs `commands` in order, stopping at the first that fails; returns the
/// exit code of the last one run.
pub fn run(commands: Vec<Command>) -> Result<ExitCode> {
    // Images may be URLs; `mount -o remote_...` sets its own options.
    hoard_remote::install(hoard_remote::Options::from_env().map_err(anyhow::Error::msg)?);
    // `mount` forks first and builds the pool in the driver's process.
    if !matches!(commands.as_slice(), [Command::Mount(_)]) {
        build_global_pool();
    }
    let mut code = 0u8;
    for command in commands {
        code = match command {
            Command::Generate(a) => crate::generate::run(&a)?,
            Command::Create(a) => match &a.recompress {
                Some(what) => rewrite::run(&a.as_rewrite(what))?,
                None => create::run(&a)?,
            },
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
        };
        if code != 0 {
            break;
        }
    }
    Ok(ExitCode::from(code))
}

/// How to open the image named by `args`: its offset, cache size,
/// trusted keys and identities.
fn fs_options(args: &ImageArgs) -> Result<FsOptions> {
    Ok(FsOptions {
        open: OpenOptions {
            offset: args.offset,
            no_mmap: false,
            image_size: None,
            trust: crate::trust::trusted_keys(&args.trust)?,
            identities: crate::trust::identities(&args.identity, args.passphrase_file.as_deref())?,
        },
        cache_size: args.cache_size,
        ..FsOptions::default()
    })
}

/// Opens the image named by `args` (an archive through the archive
/// cache).
pub fn open(args: &ImageArgs) -> Result<Filesystem> {
    let image = image_path(&args.image, &ArchiveCache::default())?;
    Filesystem::open(&image, &fs_options(args)?)
        .with_context(|| format!("cannot open image '{}'", args.image.display()))
}

/// An image opened as far as its keys allow.
pub enum Opened {
    /// Its file system.
    Readable(Box<Filesystem>),
    /// Its sections only: it is encrypted and no identity given opens it.
    Locked(Box<hoard_reader::Image>),
}

/// Opens the image named by `args` as [`open`] does, unless it is
/// encrypted and no identity given opens it.
pub fn open_unless_locked(args: &ImageArgs) -> Result<Opened> {
    let context = || format!("cannot open image '{}'", args.image.display());
    let options = fs_options(args)?;
    let path = image_path(&args.image, &ArchiveCache::default())?;
    let image = hoard_reader::Image::open(&path, &options.open).with_context(context)?;
    if image.encryption().is_some_and(|e| !e.is_unlocked()) {
        return Ok(Opened::Locked(Box::new(image)));
    }
    let cache = Filesystem::check_options(&options)?;
    Filesystem::from_image_with_cache(image, cache)
        .map(|fs| Opened::Readable(Box::new(fs)))
        .with_context(context)
}

/// The image to open for `path`: for an archive, its image in `cache`,
/// packed first (with a progress display) when it is not there yet;
/// anything else as it is.
pub fn image_path(path: &Path, cache: &ArchiveCache) -> Result<PathBuf> {
    if !may_be_archive(path) {
        return Ok(path.to_path_buf());
    }
    // The cache first: telling an archive (a zip's central directory,
    // say) takes longer than finding its image.
    let pack = match cache.lookup(path) {
        Ok(Cached::Ready(image)) => return Ok(image),
        Ok(Cached::ToPack(pack)) if is_packable_archive(path) => pack,
        _ => return Ok(path.to_path_buf()),
    };
    let context = || format!("cannot pack archive '{}'", path.display());
    eprintln!(
        "hoard: packing '{}' into '{}' (level {}; once per archive)",
        path.display(),
        pack.image().display(),
        cache.level
    );
    let progress = hoard_writer::Progress::default();
    let show = std::io::stderr().is_terminal();
    // A pool of its own: a mount packs in the process forked off, where
    // the global pool's threads do not exist.
    let (image, summary) = with_workers(None, || {
        progress::with_display(&progress, show, || pack.run(&progress))
    })?
    .with_context(context)?;
    for w in &summary.warnings {
        eprintln!("hoard: {w}");
    }
    Ok(image)
}

/// Opens the image named by `args` with the `layers` on it, as one
/// stack (a stack of one without layers).
pub fn open_view(args: &ImageArgs, layers: &LayerArgs) -> Result<Stack> {
    let mut images = vec![args.image.clone()];
    images.extend(layers.layers.iter().cloned());
    open_stack(
        &images,
        &fs_options(args)?,
        layers.force_stack,
        &ArchiveCache::default(),
    )
}

/// Opens `images` as a stack, bottom layer first (one image is a stack
/// of one; archives through the `archives` cache), naming the image that cannot be opened. A layer that is not
/// on the images below it is refused unless `force`.
pub fn open_stack(
    images: &[PathBuf],
    options: &FsOptions,
    force: bool,
    archives: &ArchiveCache,
) -> Result<Stack> {
    let cache = Filesystem::check_options(options)?;
    let mut layers = Vec::with_capacity(images.len());
    for image in images {
        let path = image_path(image, archives)?;
        let fs = Filesystem::open_sharing(&path, &options.open, &cache)
            .with_context(|| format!("cannot open image '{}'", image.display()))?;
        layers.push(std::sync::Arc::new(fs));
    }
    let stack = Stack::from_layers(layers)?;
    if let (Err((i, why)), false) = (stack.check_bases(), force) {
        anyhow::bail!(
            "cannot stack '{}': it {why} (--force-stack stacks it anyway)",
            images[i].display()
        );
    }
    Ok(stack)
}

/// The stack of each pool thread: the scan recurses once a directory
/// level, and 2 MiB (Rust's default) held 3,000 levels but not 5,000 in a
/// release build; 64 MiB gives 32 times the room. Only the pages a
/// thread touches take memory.
const WORKER_STACK: usize = 64 << 20;

/// A thread pool builder with [`WORKER_STACK`]-sized stacks.
pub fn pool_builder() -> rayon::ThreadPoolBuilder {
    rayon::ThreadPoolBuilder::new().stack_size(WORKER_STACK)
}

/// Builds rayon's global pool with [`pool_builder`]'s stacks. A process
/// that forks must call this after the fork, never before: its workers
/// start at once, and a child forked while one of them held a lock (such
/// as crossbeam-epoch's half-made global collector) inherits that lock
/// held forever, so its own pool threads hang at their first job.
pub fn build_global_pool() {
    // Fails only when the pool exists already, which is then kept.
    let _ = pool_builder().build_global();
}

/// Runs `f` on a thread pool of `workers` threads (default: one per core).
pub fn with_workers<T: Send>(workers: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T> {
    let pool = pool_builder().num_threads(workers.unwrap_or(0)).build()?;
    Ok(pool.install(f))
}
