//! `hoard mount` and `hoard umount`.
//!
//! By default the driver detaches once the kernel has accepted the mount
//! (`hoard_runtime::detach`, as `hoard-mount` does): the parent exits 0
//! only when the mount is ready and 1 with the child's error otherwise.
//! SIGINT, SIGTERM and SIGHUP unmount cleanly.

use crate::args::{MountArgs, UmountArgs};
use anyhow::{Context, Result};
use hoard_fuse::options::MountOptions;
use hoard_reader::open::{open, Target};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Mounts an image (or several); returns the exit code.
pub fn run(args: &MountArgs) -> Result<u8> {
    // Made (its keys read) before the fork, so a bad key file fails the
    // command.
    let (rest, remote) = remote_options(&args.options)?;
    let (target, options) = crate::target::of_mount(args, &rest, &remote)?;
    if args.foreground {
        return serve(args, &options, &target, || {});
    }
    hoard_runtime::detach::detached(|ready| {
        serve(args, &options, &target, ready)
            .map(|_| ())
            .map_err(|e| crate::one_line(&e))
    })
    .map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// Takes the `remote_*` options out of `-o` options (they set how remote
/// images are fetched, over `HOARD_REMOTE`) and installs them; returns
/// the others and them.
fn remote_options(options: &[String]) -> Result<(String, hoard_remote::Options)> {
    let mut remote = hoard_remote::Options::from_env().map_err(anyhow::Error::msg)?;
    let mut rest = Vec::new();
    for item in options.iter().flat_map(|o| o.split(',')) {
        let (key, value) = item.split_once('=').unwrap_or((item, ""));
        if hoard_remote::is_remote_option(key) {
            remote
                .set(key, value)
                .map_err(|e| anyhow::anyhow!("mount {e}"))?;
        } else {
            rest.push(item);
        }
    }
    hoard_remote::install(remote.clone());
    Ok((rest.join(","), remote))
}

/// Mounts and serves until unmounted or signalled.
fn serve(
    args: &MountArgs,
    options: &MountOptions,
    target: &Target,
    ready: impl FnOnce(),
) -> Result<u8> {
    crate::pool::build_global_pool();
    let mounted: Arc<Mutex<Option<hoard_fuse::Mounted>>> = Arc::new(Mutex::new(None));
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])?;
    let on_signal = mounted.clone();
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            if let Some(m) = on_signal.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                let _ = m.unmount();
            }
        }
    });
    hoard_fuse::driver::check_mountpoint(args.mountpoint()).map_err(anyhow::Error::msg)?;
    let view = open(target)?.into_view()?;
    let fsname = mount_source(args.images());
    hoard_fuse::serve(view, &fsname, args.mountpoint(), options, |m| {
        *mounted.lock().unwrap_or_else(|p| p.into_inner()) = Some(m);
        ready();
    })
    .map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// The longest source name handed to mount(2): the kernel takes the
/// source and the options together in one page, so the images' paths
/// joined must not grow with their number.
const MOUNT_SOURCE_MAX: usize = 256;

/// The source shown in the mount table for `images`: their paths joined
/// with `:` while short, else the first image's file name and how many
/// more (the driver holds the images itself; nothing else needs the list).
fn mount_source(images: &[PathBuf]) -> String {
    let joined = images
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    if joined.len() <= MOUNT_SOURCE_MAX {
        return joined;
    }
    let first = images
        .first()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.len() <= MOUNT_SOURCE_MAX / 2)
        .unwrap_or_else(|| "hoard".to_string());
    match images.len() {
        0 | 1 => first,
        n => format!("{first}+{}", n - 1),
    }
}

/// Unmounts a mount point (`hoard_fuse::mounting::unmount`: umount(2),
/// or `fusermount3 -u` for a user).
pub fn umount(args: &UmountArgs) -> Result<u8> {
    hoard_fuse::mounting::unmount(&args.mountpoint)
        .with_context(|| format!("cannot unmount '{}'", args.mountpoint.display()))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_source_stays_short_whatever_the_images() {
        let few = [PathBuf::from("/a/b.dwarfs"), PathBuf::from("/c.dwarfs")];
        assert_eq!(mount_source(&few), "/a/b.dwarfs:/c.dwarfs");
        let many: Vec<PathBuf> = (0..1000)
            .map(|i| PathBuf::from(format!("/data/images/img{i:04}.dwarfs")))
            .collect();
        assert_eq!(mount_source(&many), "img0000.dwarfs+999");
        let long = [PathBuf::from(format!("/{}", "x".repeat(300)))];
        assert_eq!(mount_source(&long), "hoard");
        let long_dir = [PathBuf::from(format!("/{}/i.dwarfs", "d".repeat(300)))];
        assert_eq!(mount_source(&long_dir), "i.dwarfs");
    }
}
