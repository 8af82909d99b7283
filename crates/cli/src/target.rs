//! What a command opens, built once from its arguments, its options and
//! the environment: the reader's [`Target`], opened by the reader's one
//! opener (`hoard_reader::open`). Every command that reads images gets
//! its target here (`ls`, `cat`, `info`, `extract`, `check`, `verify`,
//! `diff`, `manifest`, `mount`); those that build from images (`create
//! --base`, `rewrite`, `merge`) hand the writer the keys of
//! [`crate::trust::InputKeyArgs`], and the writer opens through the same
//! opener. Keys are loaded by [`ReadKeys::load`] alone.

use crate::args::{ImageArgs, LayerArgs, MountArgs};
use crate::trust::ReadKeys;
use anyhow::{bail, Context, Result};
use hoard_fuse::options::MountOptions;
use hoard_reader::open::{ArchiveImages, Form, Target};
use hoard_reader::{ImageOffset, OpenOptions};
use hoard_writer::archive::cache::{ArchiveCache, Pack};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

/// The target of `images` (bottom first) opened as `form`, at `offset`,
/// with `keys`; archives and container images are packed into the
/// default cache (registries reached as HOARD_REMOTE says).
pub fn of_paths(
    images: Vec<PathBuf>,
    form: Form,
    offset: ImageOffset,
    keys: &ReadKeys,
) -> Result<Target> {
    let mut target = Target::new(images);
    target.form = form;
    target.options.open = OpenOptions {
        offset,
        ..keys.load()?
    };
    let remote = hoard_remote::Options::from_env().map_err(anyhow::Error::msg)?;
    target.archives = Some(archives(ArchiveCache::default(), &remote));
    Ok(target)
}

/// The target of the image `args` name with `layers` on it (bottom
/// first), opened as `form`, with the keys and cache size `args` give.
pub fn of_image(args: &ImageArgs, layers: &[PathBuf], form: Form) -> Result<Target> {
    let mut images = vec![args.image.clone()];
    images.extend(layers.iter().cloned());
    let keys = ReadKeys {
        trust: args.trust.clone(),
        identity: args.identity.clone(),
        passphrase_file: args.passphrase_file.clone(),
        expect: args.expect.expectations(),
    };
    let mut target = of_paths(images, form, args.offset, &keys)?;
    target.options.cache_size = args.cache_size;
    Ok(target)
}

/// The target of the image `args` name with the layers `layers` give
/// stacked on it.
pub fn of_stack(args: &ImageArgs, layers: &LayerArgs) -> Result<Target> {
    let form = Form::Stack {
        force: layers.force_stack,
    };
    of_image(args, &layers.layers, form)
}

/// The target of `hoard mount`: its images stacked, or with `--each`
/// side by side, with the `-o` options `options` gives (the remote ones
/// taken out before): the keys (`trust=`, `identity=`,
/// `passphrase_file=`, `expect_name=`, `min_version=`), where and how archives are packed
/// (`archive_cache=`, `archive_level=`) and the reader's own (offset,
/// image size, cache size, decratio); registries are reached as `remote`
/// says. Returns it with the options.
pub fn of_mount(
    args: &MountArgs,
    options: &str,
    remote: &hoard_remote::Options,
) -> Result<(Target, MountOptions)> {
    let (rest, keys) = key_options(options)?;
    let (rest, cache) = archive_options(&rest)?;
    let mount = MountOptions::parse(&rest).map_err(anyhow::Error::msg)?;
    if mount.watch && !args.each {
        bail!("mount option 'watch' needs --each DIR");
    }
    let mut target = Target::new(args.images().to_vec());
    target.form = match args.each {
        true => Form::Set { watch: mount.watch },
        false => Form::Stack { force: args.force },
    };
    target.options = mount.fs_options();
    let defaults = target.options.open.clone();
    target.options.open = OpenOptions {
        offset: defaults.offset,
        image_size: defaults.image_size,
        ..keys.load()?
    };
    target.archives = Some(archives(cache, remote));
    Ok((target, mount))
}

/// Takes the `trust=PUB`, `identity=FILE` and `passphrase_file=FILE`
/// options, and what the signature must claim (`expect_name=NAME`,
/// `min_version=N`), out of `-o` options; returns the others and these.
fn key_options(options: &str) -> Result<(String, ReadKeys)> {
    let mut rest = Vec::new();
    let mut keys = ReadKeys::default();
    for item in options.split(',').filter(|o| !o.is_empty()) {
        match item.split_once('=') {
            Some((name @ ("trust" | "identity" | "passphrase_file"), "")) => {
                bail!("mount option '{name}' needs a file")
            }
            Some(("expect_name", "")) => bail!("mount option 'expect_name' needs a name"),
            Some(("expect_name", name)) => keys.expect.name = Some(name.to_string()),
            Some(("min_version", n)) => {
                keys.expect.min_version = Some(n.parse().with_context(|| {
                    format!("mount option 'min_version': '{n}' is not an unsigned integer")
                })?)
            }
            Some(("trust", file)) => keys.trust.push(PathBuf::from(file)),
            Some(("identity", file)) => keys.identity.push(PathBuf::from(file)),
            Some(("passphrase_file", file)) => keys.passphrase_file = Some(PathBuf::from(file)),
            _ => rest.push(item),
        }
    }
    Ok((rest.join(","), keys))
}

/// Takes the archive options out of `-o` options: `archive_cache=DIR`
/// (where archives mounted directly are packed) and `archive_level=N`
/// (how); returns the others and the cache.
fn archive_options(options: &str) -> Result<(String, ArchiveCache)> {
    let mut cache = ArchiveCache::default();
    let mut rest = Vec::new();
    for item in options.split(',').filter(|o| !o.is_empty()) {
        match item.split_once('=') {
            Some(("archive_cache", dir)) => cache.dir = PathBuf::from(dir),
            Some(("archive_level", n)) => {
                cache.level = n.parse().ok().filter(|&l| l <= 9).with_context(|| {
                    format!("mount option 'archive_level': '{n}' is not 0 to 9")
                })?;
            }
            _ => rest.push(item),
        }
    }
    Ok((rest.join(","), cache))
}

/// Archives and container images opened as images through `cache`
/// (registries reached as `remote` says), each packed once with a line
/// saying so and, on a terminal, the progress display.
fn archives(mut cache: ArchiveCache, remote: &hoard_remote::Options) -> Arc<dyn ArchiveImages> {
    cache.registry = hoard_remote::registry::transfer_options(remote);
    let level = cache.level;
    cache.runner = Some(Arc::new(move |pack: Box<Pack>| {
        eprintln!(
            "hoard: packing '{}' into '{}' (level {level}; once per archive)",
            pack.archive().display(),
            pack.image().display()
        );
        let progress = hoard_writer::Progress::default();
        let show = std::io::stderr().is_terminal();
        // A pool of its own: a mount packs in the process forked off,
        // where the global pool's threads do not exist.
        let (image, summary) = crate::pool::with_workers(None, || {
            crate::cmd::progress::with_display(&progress, show, || pack.run(&progress))
        })
        .map_err(|e| hoard_writer::Error::Input(e.to_string()))??;
        for w in &summary.warnings {
            eprintln!("hoard: {w}");
        }
        Ok(image)
    }));
    Arc::new(cache)
}
