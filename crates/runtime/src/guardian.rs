//! Guardians: detached processes that clean up after the entry.
//!
//! The runtime replaces itself with the entry (`exec`), so the entry keeps
//! the runtime's process id, parent, terminal and signals, and its exit
//! status is the bundle's. What must outlive that exec (the FUSE driver, or
//! the removal of an extracted tree) runs in a guardian: a grandchild in a
//! session of its own (so the terminal's signals do not reach it), with
//! standard input and output on `/dev/null`. It holds a pidfd of the
//! runtime's process ([`Watched`]), inherited across the fork, and acts
//! once that process (by then the entry) has exited, however it ended.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pidfd of the runtime's own process, made before any fork.
pub struct Watched(OwnedFd);

impl Watched {
    /// A pidfd of this process (close-on-exec: the entry does not get it).
    pub fn this_process() -> Result<Watched, String> {
        // SAFETY: pidfd_open takes a pid and flags, and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("pidfd_open (Linux 5.3 or later): {e}"));
        }
        // SAFETY: the descriptor was just made and is owned by nobody else.
        Ok(Watched(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Another descriptor of the same process.
    pub fn try_clone(&self) -> Result<Watched, String> {
        self.0.try_clone().map(Watched).map_err(|e| e.to_string())
    }

    /// Waits until the watched process has exited.
    pub fn wait(&self) {
        let mut poll = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut poll, 1, -1) };
            if n > 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return;
            }
        }
    }
}

/// How a guardian tells the runtime that it is ready (or why it failed).
pub struct Report(Option<File>);

impl Report {
    /// Tells the runtime that the guardian is ready; from then on its
    /// standard error goes to `/dev/null` too.
    pub fn ready(&mut self) {
        if let Some(mut pipe) = self.0.take() {
            let _ = pipe.write_all(b"ok");
            to_dev_null(&[2]);
        }
    }

    fn fail(&mut self, why: &str) {
        if let Some(mut pipe) = self.0.take() {
            let _ = pipe.write_all(why.as_bytes());
        }
    }
}

/// Starts a guardian running `job`, and returns once the job has called
/// [`Report::ready`] (`Ok`) or failed (its error). The calling process
/// must have one thread only.
pub fn spawn(job: impl FnOnce(&mut Report) -> Result<(), String>) -> Result<(), String> {
    let (read_end, write_end) = pipe()?;
    // SAFETY: the runtime forks before it starts any thread (see above).
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(read_end);
            // SAFETY: setsid and fork in the single-threaded child.
            unsafe { libc::setsid() };
            if unsafe { libc::fork() } != 0 {
                // The middle process: its parent reaps it at once, and the
                // guardian goes to init (or the nearest subreaper).
                unsafe { libc::_exit(0) };
            }
            let _ = std::env::set_current_dir("/");
            to_dev_null(&[0, 1]);
            let mut report = Report(Some(File::from(write_end)));
            let status = match job(&mut report) {
                Ok(()) => 0,
                Err(e) => {
                    report.fail(&e);
                    1
                }
            };
            // SAFETY: leaves without running the runtime's exit handlers.
            unsafe { libc::_exit(status) }
        }
        middle => {
            drop(write_end);
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            unsafe { libc::waitpid(middle, &mut status, 0) };
            let mut said = String::new();
            File::from(read_end)
                .read_to_string(&mut said)
                .map_err(|e| e.to_string())?;
            match said.as_str() {
                "ok" => Ok(()),
                "" => Err("the helper process exited before it was ready".into()),
                why => Err(why.to_string()),
            }
        }
    }
}

/// A pipe, both ends close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just made and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Points the standard descriptors `fds` at `/dev/null`.
fn to_dev_null(fds: &[i32]) {
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        for &fd in fds {
            // SAFETY: dup2 onto a standard descriptor.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
