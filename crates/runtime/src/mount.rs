//! `hoard-mount IMAGE MOUNTPOINT [-o OPTIONS]... [-f]`: mounts one image
//! with the FUSE driver alone, as DwarFS's `dwarfs` does apart from
//! `mkdwarfs`. It links only the reader and the driver (a quarter of the
//! `hoard` binary), so a cold mount pages in less. The `-o` options are
//! the driver's (`hoard_fuse::options::MountOptions`); keys, archives and
//! remote images are `hoard mount`'s, and with `HOARD_TRUST` or
//! `HOARD_IDENTITY` set it refuses to mount rather than ignore them.

use crate::detach::detached;
use hoard_fuse::options::MountOptions;
use hoard_reader::{open, Target};
use std::ffi::OsString;
use std::path::PathBuf;

const USAGE: &str = "\
Usage: hoard-mount IMAGE MOUNTPOINT [-o OPTIONS]... [-f]

Mounts a DwarFS image read-only with FUSE, and returns once the mount is
ready (with -f, serves in the foreground). OPTIONS are `hoard mount`'s
driver options (cachesize=, preload_category=, analysis_file=, ...);
signed, encrypted and remote images and archives take `hoard mount`.
";

/// What the command line asks for.
struct Args {
    image: PathBuf,
    mountpoint: PathBuf,
    options: MountOptions,
    foreground: bool,
}

/// Runs `hoard-mount` with its command line `args`; returns the exit
/// status.
pub fn run(args: Vec<OsString>) -> i32 {
    let result = match parse(args) {
        Ok(None) => {
            print!("{USAGE}");
            Ok(())
        }
        Ok(Some(args)) if args.foreground => serve(&args, &mut || {}),
        Ok(Some(args)) => detached(|ready| serve(&args, ready)),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("hoard-mount: {e}");
            1
        }
    }
}

/// The command line's image, mount point and options; `None` for help.
fn parse(args: Vec<OsString>) -> Result<Option<Args>, String> {
    let mut paths = Vec::new();
    let mut options = Vec::new();
    let mut foreground = false;
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-h" | "--help") => return Ok(None),
            Some("-f" | "--foreground") => foreground = true,
            Some("-o") => {
                let list = args.next().ok_or("-o needs a list of options")?;
                options.push(
                    list.into_string()
                        .map_err(|_| "-o: options are not UTF-8")?,
                );
            }
            Some(o) if o.starts_with("-o") => options.push(o[2..].to_string()),
            Some(o) if o.starts_with('-') && o.len() > 1 => {
                return Err(format!("unknown argument '{o}'\n{USAGE}"))
            }
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    if let Some(name) = [open::TRUST_ENV, open::IDENTITY_ENV]
        .into_iter()
        .find(|name| std::env::var_os(name).is_some())
    {
        return Err(format!(
            "{name} is set, and hoard-mount applies no keys: mount with `hoard mount`"
        ));
    }
    let [image, mountpoint] = <[PathBuf; 2]>::try_from(paths)
        .map_err(|_| format!("needs an image and a mount point\n{USAGE}"))?;
    Ok(Some(Args {
        image,
        mountpoint,
        options: MountOptions::parse(&options.join(","))?,
        foreground,
    }))
}

/// Opens the image, mounts it and serves until unmounted, or until
/// SIGINT, SIGTERM or SIGHUP (which unmount); calls `ready` once mounted.
fn serve(args: &Args, ready: &mut dyn FnMut()) -> Result<(), String> {
    // Blocked before any thread starts, so every thread has them blocked
    // and only `sigwait` below takes them.
    let signals = crate::launch::blocked_signals(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    hoard_fuse::driver::check_mountpoint(&args.mountpoint)?;
    let mut target = Target::new(vec![args.image.clone()]);
    target.options = args.options.fs_options();
    let view = open::open(&target)
        .and_then(|o| o.into_view())
        .map_err(|e| e.to_string())?;
    let fsname = args.image.to_string_lossy();
    hoard_fuse::serve(view, &fsname, &args.mountpoint, &args.options, |mut m| {
        std::thread::spawn(move || {
            let mut signal = 0;
            // SAFETY: waits for one of the blocked signals.
            unsafe { libc::sigwait(&signals, &mut signal) };
            let _ = m.unmount();
        });
        ready();
    })
}
