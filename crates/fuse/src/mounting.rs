//! Mounting a FUSE connection on a directory, and unmounting it when
//! asked.
//!
//! As root the driver calls mount(2) itself; otherwise (`EPERM`, or
//! `/dev/fuse` closed to the user) `fusermount3` mounts and hands the connection back. The driver then
//! holds only the connection, so nothing unmounts when serving ends. A
//! mount taken away from outside (`umount`, `fusermount3 -u`) ends the
//! serving, and the driver's exit never unmounts that path again: that
//! would take down whatever was mounted there since. An unmount asked of
//! the driver (a signal, [`Attached::detach`]) first checks in the mount
//! table that the mount on the directory is still this one.

use crate::fusermount;
use crate::options::MountOptions;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file system type, as the mount table shows it.
const FSTYPE: &str = "fuse.hoard";

/// A mount made by [`attach`].
pub struct Attached {
    mountpoint: PathBuf,
    /// The mount's device (major, minor), if the mount table showed it.
    device: Option<(u32, u32)>,
}

impl Attached {
    /// Unmounts, unless the mount on the directory is no longer this one
    /// (then there is nothing to do).
    pub fn detach(&self) -> std::io::Result<()> {
        if self.device.is_some() && mounted_device(&self.mountpoint) != self.device {
            return Ok(());
        }
        unmount(&self.mountpoint)
    }
}

/// Unmounts whatever is mounted on `mountpoint`: umount(2), or, for a
/// user who may not call it, `fusermount3 -u` (a FUSE mount of the
/// user's own). A symlink as the last component is not followed (as
/// `fusermount3 -u` does not): only the mount on that very path goes.
pub fn unmount(mountpoint: &Path) -> std::io::Result<()> {
    let path = c_path(mountpoint)?;
    // SAFETY: `path` is a NUL-terminated path.
    if unsafe { libc::umount2(path.as_ptr(), libc::UMOUNT_NOFOLLOW) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match (err.raw_os_error(), fusermount::helper()) {
        (Some(libc::EPERM), Some(helper)) => fusermount::unmount(&helper, mountpoint),
        _ => Err(err),
    }
}

/// The error of a mount on `mountpoint` that cannot be made.
pub fn cannot_mount(mountpoint: &Path, why: &dyn std::fmt::Display) -> String {
    format!("cannot mount on '{}': {why}", mountpoint.display())
}

/// Mounts a new FUSE connection read-only on `mountpoint`, named `fsname`
/// in the mount table, with `options`' kernel options; `allow_other`
/// lets other users through to the driver (which checks them itself).
/// Returns the connection to serve.
pub fn attach(
    mountpoint: &Path,
    fsname: &str,
    options: &MountOptions,
    allow_other: bool,
) -> Result<(OwnedFd, Attached), String> {
    let cannot_mount = |why: &dyn std::fmt::Display| cannot_mount(mountpoint, why);
    let mountpoint = std::fs::canonicalize(mountpoint).map_err(|e| cannot_mount(&e))?;
    let kernel = KernelOptions::new(options, allow_other);
    let fuse = match mount_directly(&mountpoint, fsname, &kernel) {
        Ok(fuse) => fuse,
        // Not root, or `/dev/fuse` closed to this user: the setuid helper
        // opens and mounts.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
            let helper =
                fusermount::helper().ok_or_else(|| cannot_mount(&"no fusermount3 in PATH"))?;
            let list = kernel.option_list(&fusermount::option_value(fsname));
            // Without `auto_unmount` the helper exits once it has handed
            // the connection over; dropping it reaps it.
            let (fuse, _helper) =
                fusermount::mount(&helper, &mountpoint, &list).map_err(|e| cannot_mount(&e))?;
            fuse
        }
        Err(e) => return Err(cannot_mount(&e)),
    };
    let device = mounted_device(&mountpoint);
    Ok((fuse, Attached { mountpoint, device }))
}

/// The kernel's share of the mount options: flags of mount(2), and the
/// options FUSE reads itself.
struct KernelOptions {
    flags: libc::c_ulong,
    /// Flag names, for `fusermount3`.
    flag_names: Vec<&'static str>,
    /// Options passed on as they are (`default_permissions`,
    /// `allow_other`, others the kernel knows).
    passed: Vec<String>,
}

impl KernelOptions {
    /// Read-only, and `nosuid`/`nodev` unless `suid`/`dev` is asked for.
    fn new(options: &MountOptions, allow_other: bool) -> Self {
        let mut flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        let mut flag_names = Vec::new();
        let mut passed = Vec::new();
        if options.default_permissions {
            passed.push("default_permissions".to_string());
        }
        if allow_other {
            passed.push("allow_other".to_string());
        }
        for option in &options.kernel {
            match FLAGS.iter().find(|(name, _, _)| name == option) {
                Some((name, bit, set)) => {
                    flags = if *set { flags | bit } else { flags & !bit };
                    flag_names.push(*name);
                }
                None => passed.push(option.clone()),
            }
        }
        let defaults = [
            ("ro", libc::MS_RDONLY),
            ("nosuid", libc::MS_NOSUID),
            ("nodev", libc::MS_NODEV),
        ];
        let kept = defaults
            .into_iter()
            .filter(|(name, bit)| flags & bit != 0 && !flag_names.contains(name))
            .map(|(name, _)| name);
        flag_names.splice(0..0, kept.collect::<Vec<_>>());
        KernelOptions {
            flags,
            flag_names,
            passed,
        }
    }

    /// The whole list, as `fusermount3 -o` takes it.
    fn option_list(&self, fsname: &str) -> String {
        let mut list = vec![format!("fsname={fsname}"), "subtype=hoard".to_string()];
        list.extend(self.flag_names.iter().map(|n| n.to_string()));
        list.extend(self.passed.iter().cloned());
        list.join(",")
    }
}

/// Mount flags by name: the bit, and whether the name sets it (`true`)
/// or clears it.
const FLAGS: [(&str, libc::c_ulong, bool); 13] = [
    ("ro", libc::MS_RDONLY, true),
    ("nosuid", libc::MS_NOSUID, true),
    ("suid", libc::MS_NOSUID, false),
    ("nodev", libc::MS_NODEV, true),
    ("dev", libc::MS_NODEV, false),
    ("noexec", libc::MS_NOEXEC, true),
    ("exec", libc::MS_NOEXEC, false),
    ("noatime", libc::MS_NOATIME, true),
    ("atime", libc::MS_NOATIME, false),
    ("sync", libc::MS_SYNCHRONOUS, true),
    ("async", libc::MS_SYNCHRONOUS, false),
    ("dirsync", libc::MS_DIRSYNC, true),
    ("nodiratime", libc::MS_NODIRATIME, true),
];

/// Opens `/dev/fuse` and mounts it on `mountpoint` with mount(2).
fn mount_directly(
    mountpoint: &Path,
    fsname: &str,
    kernel: &KernelOptions,
) -> std::io::Result<OwnedFd> {
    let fuse = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let fuse = OwnedFd::from(fuse);
    let root_type = std::fs::metadata(mountpoint)?.mode() & libc::S_IFMT;
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut data = vec![
        format!("fd={}", fuse.as_raw_fd()),
        format!("rootmode={root_type:o}"),
        format!("user_id={uid}"),
        format!("group_id={gid}"),
    ];
    data.extend(kernel.passed.iter().cloned());
    let source = CString::new(fsname.replace('\0', "_")).map_err(std::io::Error::other)?;
    let target = c_path(mountpoint)?;
    let fstype = CString::new(FSTYPE).map_err(std::io::Error::other)?;
    let data = CString::new(data.join(",")).map_err(std::io::Error::other)?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // call.
    let done = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            kernel.flags,
            data.as_ptr().cast(),
        )
    };
    if done == 0 {
        Ok(fuse)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `path` for a system call.
fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

/// The device of the topmost mount on `path` (absolute, without
/// symbolic links), from `/proc/self/mountinfo`.
fn mounted_device(path: &Path) -> Option<(u32, u32)> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = path.as_os_str().as_bytes();
    table
        .lines()
        .rev()
        .find_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?;
            let point = fields.nth(1)?;
            (unescape(point) == wanted).then_some(device)
        })
        .and_then(|device| {
            let (major, minor) = device.split_once(':')?;
            Some((major.parse().ok()?, minor.parse().ok()?))
        })
}

/// A mount table path with its `\ooo` escapes (space, tab, newline,
/// backslash) decoded.
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_table_escapes_are_decoded() {
        assert_eq!(unescape(r"/tmp/a\040b\134c"), b"/tmp/a b\\c");
        assert_eq!(unescape(r"/plain\0"), b"/plain\\0");
    }

    #[test]
    fn kernel_options_keep_read_only_and_safe_defaults() {
        let mut options = MountOptions::parse("").unwrap();
        options.kernel = vec!["dev".into(), "noatime".into(), "max_read=4096".into()];
        let kernel = KernelOptions::new(&options, true);
        assert_eq!(
            kernel.flags,
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOATIME
        );
        assert_eq!(
            kernel.option_list("img"),
            "fsname=img,subtype=hoard,ro,nosuid,dev,noatime,allow_other,max_read=4096"
        );
    }
}
