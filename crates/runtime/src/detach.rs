//! Serving in the background, as `hoard mount` and `hoard-mount` do by
//! default: the process forks before doing anything else, the child
//! opens and mounts, and reports success or its one-line error through a
//! pipe, so the parent returns only once the mount is ready (or failed).

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

/// Runs `serve` in a child process of its own session and returns once
/// it is ready: `Ok` when `serve` has called its `ready` (which also
/// points the child's standard streams at /dev/null), else the child's
/// one-line error. The child exits when `serve` returns. Call it before
/// any thread starts.
pub fn detached(serve: impl FnOnce(&mut dyn FnMut()) -> Result<(), String>) -> Result<(), String> {
    let (read_end, write_end) = pipe()?;
    // A thread running now could leave the child a lock held forever.
    let threads = std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count());
    if threads > 1 {
        return Err(format!(
            "internal error: {threads} threads run before the mount forks"
        ));
    }
    // SAFETY: no other thread exists in this process (checked above), so
    // the child may run arbitrary code after fork.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(read_end);
            let mut status = Some(std::fs::File::from(write_end));
            // SAFETY: setsid has no preconditions.
            unsafe { libc::setsid() };
            let result = serve(&mut || {
                if let Some(mut w) = status.take() {
                    let _ = w.write_all(b"ok");
                }
                detach_stdio();
            });
            if let (Err(e), Some(mut w)) = (&result, status.take()) {
                let _ = w.write_all(e.as_bytes());
            }
            std::process::exit(if result.is_ok() { 0 } else { 1 });
        }
        _child => {
            drop(write_end);
            let mut msg = String::new();
            std::fs::File::from(read_end)
                .read_to_string(&mut msg)
                .map_err(|e| e.to_string())?;
            match msg.as_str() {
                "ok" => Ok(()),
                "" => Err("the driver exited before the mount was ready".into()),
                _ => Err(msg),
            }
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Points stdin, stdout and stderr at /dev/null once detached.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
