//! What the runtime does with its command line: run the entry (from a
//! private mount, else from an extracted copy), or one of the
//! `--bundle-*` commands, taken only as the exact first argument.

use crate::guardian::{self, Watched};
use crate::note::Note;
use hoard_fuse::fusermount;
use hoard_fuse::options::{MountOptions, Preload};
use hoard_reader::extract::{extract, ExtractOptions, Patterns};
use hoard_reader::{open, ImageOffset, Target, View};
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The category whose blocks are preloaded as the image mounts, when the
/// image has it (`hoard create --categorize=hotness`).
const HOT: &str = "hotness";

/// Exit status when the runtime cannot start the entry (as a shell's for
/// a command not found).
pub const CANNOT_START: i32 = 127;

const HELP: &str = "\
A self-running bundle: a hoard runtime followed by a DwarFS image.

Usage: BUNDLE [ARGS...]            run the entry with ARGS
       BUNDLE --bundle-extract DIR extract the image into DIR
       BUNDLE --bundle-mount       mount the image, print the mount point,
                                   stay until interrupted or unmounted
       BUNDLE --bundle-offset      print where the image starts (for
                                   `dwarfs BUNDLE MNT -o offset=N`)
       BUNDLE --bundle-help        this text

Only these exact first arguments are taken; any other argument goes to the
entry. The entry runs from a private read-only FUSE mount (from a copy
extracted to a temporary directory where FUSE is missing), with
HOARD_BUNDLE (this file), HOARD_BUNDLE_DIR (the mount or copy) and
HOARD_BUNDLE_ARGV0 (how the bundle was called) set.
";

/// The bundle this runtime is part of.
struct Bundle {
    /// Where the bundle lies, as the kernel knows it.
    path: PathBuf,
    /// What its note says.
    note: Note,
}

/// The path every process of the runtime opens the image by: the
/// bundle's own executable (the runtime never execs before it opens).
const SELF: &str = "/proc/self/exe";

/// Runs the runtime with its command line `args`; returns the exit status
/// when it does not become the entry.
pub fn run(args: Vec<OsString>) -> i32 {
    match start(args) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("hoard-runtime: {e}");
            CANNOT_START
        }
    }
}

fn start(args: Vec<OsString>) -> Result<i32, String> {
    let file = File::open(SELF).map_err(|e| format!("{SELF}: {e}"))?;
    let bundle = Bundle {
        path: std::fs::read_link(SELF).map_err(|e| format!("{SELF}: {e}"))?,
        note: Note::read(&file)?,
    };
    drop(file);
    match args.get(1).and_then(|a| a.to_str()) {
        Some("--bundle-help") => {
            print!("{HELP}");
            Ok(0)
        }
        Some("--bundle-offset") => {
            println!("{}", bundle.note.image_offset);
            Ok(0)
        }
        Some("--bundle-extract") => {
            let [_, _, dir] = &args[..] else {
                return Err("usage: BUNDLE --bundle-extract DIR".into());
            };
            extract_into(&bundle, Path::new(dir))?;
            Ok(0)
        }
        Some("--bundle-mount") if args.len() == 2 => mount_until_signalled(&bundle),
        _ => launch(&bundle, &args),
    }
}

/// Runs the entry from a private mount, else from an extracted copy;
/// returns only on failure.
fn launch(bundle: &Bundle, args: &[OsString]) -> Result<i32, String> {
    let watched = Watched::this_process()?;
    if let Some(helper) = fusermount::helper() {
        match mount_privately(bundle, &helper, &watched) {
            Ok(dir) => return Err(exec_entry(bundle, &dir, args)),
            Err(e) => eprintln!("hoard-runtime: cannot mount the bundle ({e}); extracting it"),
        }
    }
    let dir = temp_dir()?;
    guardian::spawn(|report| {
        report.ready();
        watched.wait();
        remove_tree(&dir);
        Ok(())
    })?;
    extract_into(bundle, &dir)?;
    Err(exec_entry(bundle, &dir, args))
}

/// Mounts the image on a new temporary directory, served by a guardian
/// until the entry has exited; returns the directory.
fn mount_privately(bundle: &Bundle, helper: &Path, watched: &Watched) -> Result<PathBuf, String> {
    let dir = temp_dir()?;
    let served = guardian::spawn(|report| {
        let watched = watched.try_clone()?;
        let watch = |mounted: Mounted| {
            std::thread::spawn(move || {
                watched.wait();
                mounted.unmount();
            });
        };
        let result = serve(bundle, helper, &dir, watch, || report.ready());
        let _ = std::fs::remove_dir(&dir);
        result
    });
    match served {
        Ok(()) => Ok(dir),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            Err(e)
        }
    }
}

/// `--bundle-mount`: mounts on a new temporary directory, prints it, and
/// serves until SIGINT, SIGTERM or SIGHUP, or until unmounted.
fn mount_until_signalled(bundle: &Bundle) -> Result<i32, String> {
    let helper = fusermount::helper().ok_or("FUSE is missing (/dev/fuse or fusermount3)")?;
    let dir = temp_dir()?;
    // Blocked before any thread starts, so every thread has them blocked
    // and only `sigwait` below takes them.
    let signals = blocked_signals(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let watch = |mounted: Mounted| {
        std::thread::spawn(move || {
            let mut signal = 0;
            // SAFETY: waits for one of the blocked signals.
            unsafe { libc::sigwait(&signals, &mut signal) };
            mounted.unmount();
        });
    };
    let result = serve(bundle, &helper, &dir, watch, || {
        println!("{}", dir.display())
    });
    let _ = std::fs::remove_dir(&dir);
    result.map(|()| 0)
}

/// A mount to unmount (lazily) when its time comes.
struct Mounted {
    helper: PathBuf,
    dir: PathBuf,
}

impl Mounted {
    /// Unmounts lazily, and removes the mount point.
    fn unmount(&self) {
        fusermount::unmount_lazily(&self.helper, &self.dir);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Opens the image, mounts it on `dir`, hands `watch` what unmounts it,
/// calls `ready` once served, and serves until the kernel ends the
/// connection (unmounted, and no file left open).
fn serve(
    bundle: &Bundle,
    helper: &Path,
    dir: &Path,
    watch: impl FnOnce(Mounted),
    ready: impl FnOnce(),
) -> Result<(), String> {
    let view = open_image(bundle)?;
    let mut options = MountOptions::parse("")?;
    let has_hot = view
        .images()
        .iter()
        .any(|fs| fs.category_names().iter().any(|c| c == HOT));
    if has_hot {
        options.preload = Preload::Category(HOT.into());
    }
    let fsname = bundle.path.to_string_lossy();
    let list = format!(
        "ro,nosuid,nodev,auto_unmount,subtype=hoard,fsname={}",
        fusermount::option_value(&fsname)
    );
    // Its watch unmounts if this process is killed.
    let (fuse, auto_unmount) = fusermount::mount(helper, dir, &list)?;
    watch(Mounted {
        helper: helper.to_path_buf(),
        dir: dir.to_path_buf(),
    });
    let served = hoard_fuse::serve_connection(view, fuse, &options, ready);
    drop(auto_unmount);
    served
}

/// Extracts the whole image into `dir` (made if missing).
fn extract_into(bundle: &Bundle, dir: &Path) -> Result<(), String> {
    let view = open_image(bundle)?;
    let everything = Patterns::new::<&str>(&[]).map_err(|e| e.to_string())?;
    extract(
        view.as_ref(),
        dir,
        &everything,
        &ExtractOptions::for_current_user(),
    )
    .map_err(|e| format!("cannot extract into '{}': {e}", dir.display()))?;
    Ok(())
}

/// The image behind the runtime.
fn open_image(bundle: &Bundle) -> Result<Arc<dyn View>, String> {
    let mut target = Target::new(vec![PathBuf::from(SELF)]);
    target.options.open.offset = ImageOffset::At(bundle.note.image_offset);
    open::open(&target)
        .and_then(|o| o.into_view())
        .map_err(|e| format!("the bundle's image: {e}"))
}

/// Replaces the runtime with the entry of the tree at `dir`; returns why
/// it could not.
fn exec_entry(bundle: &Bundle, dir: &Path, args: &[OsString]) -> String {
    let program = dir.join(&bundle.note.entry);
    let argv0 = args.first().cloned().unwrap_or_default();
    let e = std::process::Command::new(&program)
        .arg0(&program)
        .args(args.iter().skip(1))
        .env("HOARD_BUNDLE", &bundle.path)
        .env("HOARD_BUNDLE_DIR", dir)
        .env("HOARD_BUNDLE_ARGV0", argv0)
        .exec();
    format!(
        "cannot run the entry '{}': {e}",
        bundle.note.entry.display()
    )
}

/// A new private directory under the temporary directory (`$TMPDIR`).
fn temp_dir() -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStringExt;
    let mut template = std::env::temp_dir()
        .join("hoard-bundle-XXXXXX")
        .into_os_string()
        .into_vec();
    template.push(0);
    // SAFETY: a NUL-terminated template that mkdtemp fills in place.
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "cannot make a directory in {}: {e}",
            std::env::temp_dir().display()
        ));
    }
    template.pop();
    Ok(PathBuf::from(OsString::from_vec(template)))
}

/// Removes the tree at `dir`, making its directories writable first (an
/// image may hold read-only ones).
fn remove_tree(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => remove_tree(&path),
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Blocks `signals` in this thread (and the threads it starts); returns
/// the set for `sigwait`.
pub(crate) fn blocked_signals(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, set up by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}
