//! Mounting through `fusermount3`, the setuid helper of every FUSE
//! installation: it mounts and hands the `/dev/fuse` connection back over
//! a socket. With `auto_unmount` among the options it then stays,
//! watching that socket: when the process holding it ends, however it
//! ends (SIGKILL included), it unmounts. Without, it exits once the
//! connection is handed over.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The helper program.
const FUSERMOUNT: &str = "fusermount3";

/// The `fusermount3` that mounted: with `auto_unmount`, its watch over
/// the mount. Dropping it closes the socket, which makes a watching
/// helper unmount (if the mount is still there), and waits for the
/// helper to exit.
pub struct Helper {
    socket: Option<UnixStream>,
    child: Child,
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.socket.take());
        let _ = self.child.wait();
    }
}

/// `fusermount3` as found in `PATH`, if `/dev/fuse` exists too: whether a
/// mount can be tried at all.
pub fn helper() -> Option<PathBuf> {
    if !Path::new("/dev/fuse").exists() {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|dir| dir.join(FUSERMOUNT))
        .find(|p| p.is_file())
}

/// `fsname` made fit for a `-o` list: commas separate options, so none
/// may be in the name.
pub fn option_value(fsname: &str) -> String {
    fsname.replace([',', '\\'], "_")
}

/// Mounts a FUSE file system on `mountpoint` with `helper` and the mount
/// `options` (a `-o` list); returns the connection to serve and the
/// helper.
pub fn mount(helper: &Path, mountpoint: &Path, options: &str) -> Result<(OwnedFd, Helper), String> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    let fd = theirs.as_raw_fd();
    let mut command = Command::new(helper);
    command
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", fd.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only fcntl between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    };
    let mut child = command
        .spawn()
        .map_err(|e| format!("{}: {e}", helper.display()))?;
    drop(theirs);
    match receive_fd(&ours) {
        Some(fuse) => Ok((
            fuse,
            Helper {
                socket: Some(ours),
                child,
            },
        )),
        None => {
            drop(ours);
            let mut said = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut said);
            }
            let _ = child.wait();
            let said = said.trim();
            Err(if said.is_empty() {
                format!("{FUSERMOUNT} failed")
            } else {
                said.replace('\n', "; ")
            })
        }
    }
}

/// Unmounts `mountpoint` lazily (`fusermount3 -u -z`): it leaves the
/// tree at once, and the driver serves the files still open until they
/// are closed.
pub fn unmount_lazily(helper: &Path, mountpoint: &Path) {
    let _ = Command::new(helper)
        .args([
            OsStr::new("-u"),
            OsStr::new("-z"),
            OsStr::new("-q"),
            OsStr::new("--"),
        ])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Unmounts `mountpoint` (`fusermount3 -u`), for a user who may not
/// call umount(2); its complaint, on one line, is the error.
pub fn unmount(helper: &Path, mountpoint: &Path) -> std::io::Result<()> {
    let out = Command::new(helper)
        .args([OsStr::new("-u"), OsStr::new("--")])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr)
        .trim()
        .replace('\n', "; ");
    Err(std::io::Error::other(if said.is_empty() {
        format!("{FUSERMOUNT} -u failed ({})", out.status)
    } else {
        said
    }))
}

/// The descriptor `fusermount3` sends over `socket`, if any.
fn receive_fd(socket: &UnixStream) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: `msg` points at live buffers of the sizes it gives.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break n;
        }
    };
    if n <= 0 {
        return None;
    }
    // SAFETY: `msg` was filled by recvmsg; the header, if any, lies in
    // `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || ((*cmsg).cmsg_len as usize)
                < libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}
