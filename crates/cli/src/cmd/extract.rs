//! `hoard extract`: recreate the tree of an image in a directory.
//!
//! Directories are made first, then file contents are written in parallel in
//! the order their data is stored (so each block is decompressed about
//! once), then links and special files, and last the owners, modes,
//! extended attributes and times, deepest directories first so that
//! nothing touches a directory after its time is set. Extended attributes
//! come after the owner (a chown clears `security.capability`); `user.*`
//! ones before the mode (a read-only file takes none from a user other
//! than root), the others after it (an ACL sets the group bits). As
//! another user than root only `user.*` ones are restored.
//!
//! Nothing is written outside the output directory: names were checked by
//! the tree walk, entries are created without following symlinks (an
//! existing symlink in the way is replaced, never written through), and an
//! existing non-directory where a directory belongs is an error.

use crate::args::ExtractArgs;
use anyhow::{anyhow, bail, Context, Result};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use hoard_reader::{ContentPiece, FileKind, Stat, View, ViewExt, ViewNode as Node};
use rayon::prelude::*;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Extracts the image into the output directory.
pub fn run(args: &ExtractArgs) -> Result<u8> {
    let fs = super::open_view(&args.image, &args.layers)?;
    let patterns: Vec<&String> = args.patterns.iter().chain(&args.more_patterns).collect();
    let filter = build_filter(&patterns)?;
    let nodes = select(fs.walk(fs.root(), b"")?, filter.as_ref());
    if let Some(format) = args.format {
        return write_archive(&fs, &nodes, format, args);
    }
    let extractor = Extractor {
        fs: &fs,
        root: args.output.clone(),
        restore_owners: args.owners || is_root(),
        can_make_devices: is_root() && !args.skip_devices,
        skip_devices: args.skip_devices,
        skip_specials: args.skip_specials,
        xattrs: match (args.no_xattrs, is_root()) {
            (true, _) => XattrRestore::None,
            (false, true) => XattrRestore::All,
            (false, false) => XattrRestore::User,
        },
        continue_on_error: args.continue_on_error,
        errors: Mutex::new(Vec::new()),
    };
    super::with_workers(args.workers, || extractor.extract(&nodes))??;
    let errors = extractor.errors.into_inner().unwrap_or_default();
    for e in &errors {
        eprintln!("hoard: {e}");
    }
    Ok(if errors.is_empty() { 0 } else { 2 })
}

/// Writes `nodes` as one archive to the output file (through a temporary
/// file renamed into place when complete) or to standard output (`-`).
fn write_archive(
    fs: &dyn View,
    nodes: &[Node],
    format: crate::archive::Format,
    args: &ExtractArgs,
) -> Result<u8> {
    let with_xattrs = !args.no_xattrs;
    let notes = if args.output.as_os_str() == "-" {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        let notes = crate::archive::write(fs, nodes, format, with_xattrs, &mut out)?;
        out.flush().context("standard output")?;
        notes
    } else {
        let path = &args.output;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let context = || format!("cannot write archive '{}'", path.display());
        let tmp = tempfile::Builder::new()
            .prefix(".hoard-")
            .tempfile_in(dir)
            .with_context(context)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
        let notes = crate::archive::write(fs, nodes, format, with_xattrs, &mut out)
            .with_context(context)?;
        out.flush().with_context(context)?;
        drop(out);
        // A temporary file is private; the archive gets the usual mode.
        // SAFETY: umask has no preconditions; it is set back at once.
        let umask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o666 & !umask))
            .with_context(context)?;
        tmp.persist(path).with_context(context)?;
        notes
    };
    for n in &notes {
        eprintln!("hoard: {n}");
    }
    Ok(0)
}

fn build_filter(patterns: &[&String]) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let (glob, case_insensitive) = match p.strip_prefix("i:") {
            Some(rest) => (rest, true),
            None => (p.strip_prefix(':').unwrap_or(p), false),
        };
        let glob = glob.trim_start_matches('/');
        set.add(
            GlobBuilder::new(glob)
                .literal_separator(true)
                .case_insensitive(case_insensitive)
                .build()
                .with_context(|| format!("invalid pattern '{p}'"))?,
        );
    }
    Ok(Some(set.build()?))
}

/// Keeps the nodes matching `filter` (all without one) plus the directories
/// leading to them.
fn select(nodes: Vec<Node>, filter: Option<&GlobSet>) -> Vec<Node> {
    let Some(filter) = filter else {
        return nodes;
    };
    let mut keep: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    for n in &nodes {
        if filter.is_match(OsStr::from_bytes(&n.path)) {
            let mut p = n.path.as_slice();
            keep.insert(p.to_vec());
            while let Some(i) = p.iter().rposition(|&b| b == b'/') {
                p = &p[..i];
                keep.insert(p.to_vec());
            }
            keep.insert(Vec::new());
        }
    }
    nodes
        .into_iter()
        .filter(|n| keep.contains(&n.path))
        .collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct Extractor<'a> {
    fs: &'a dyn View,
    root: PathBuf,
    restore_owners: bool,
    can_make_devices: bool,
    skip_devices: bool,
    skip_specials: bool,
    xattrs: XattrRestore,
    continue_on_error: bool,
    errors: Mutex<Vec<String>>,
}

/// Which extended attributes `extract` restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XattrRestore {
    None,
    /// Only `user.*` (what a user other than root may set).
    User,
    All,
}

impl Extractor<'_> {
    fn target(&self, node: &Node) -> PathBuf {
        if node.path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(OsStr::from_bytes(&node.path))
        }
    }

    /// Records a failure to `what` (e.g. "write file") an entry, or returns
    /// it when not continuing on errors.
    fn handle(&self, node: &Node, what: &str, result: Result<()>) -> Result<()> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let msg = format!(
                    "cannot {what} '{}': {}",
                    self.target(node).display(),
                    crate::one_line(&e)
                );
                if self.continue_on_error {
                    self.errors
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(msg);
                    Ok(())
                } else {
                    Err(anyhow!(msg))
                }
            }
        }
    }

    fn extract(&self, nodes: &[Node]) -> Result<()> {
        fs::create_dir_all(&self.root)
            .with_context(|| format!("cannot create output directory '{}'", self.root.display()))?;
        for node in nodes.iter().filter(|n| n.kind == FileKind::Directory) {
            self.handle(node, "create directory", self.make_dir(node))?;
        }
        // Regular files: content once per inode, hard links for the rest.
        let mut by_inode: HashMap<u64, Vec<&Node>> = HashMap::new();
        for n in nodes.iter().filter(|n| n.kind == FileKind::Regular) {
            by_inode.entry(n.ino).or_default().push(n);
        }
        let files: Vec<u64> = by_inode.keys().copied().collect();
        let order = self.fs.files_in_data_order(&files)?;
        let firsts: Vec<&Node> = order
            .iter()
            .filter_map(|ino| by_inode.get(ino).map(|v| v[0]))
            .collect();
        firsts
            .par_iter()
            .try_for_each(|node| self.handle(node, "write file", self.write_file(node)))?;
        for links in by_inode.values() {
            for node in &links[1..] {
                self.handle(node, "create hard link", self.hard_link(links[0], node))?;
            }
        }
        for node in nodes {
            let (what, r) = match node.kind {
                FileKind::Directory | FileKind::Regular => continue,
                FileKind::Symlink => ("create symlink", self.symlink(node)),
                FileKind::Fifo => ("create fifo", self.special(node)),
                FileKind::Socket => ("create socket", self.special(node)),
                _ => ("create device", self.special(node)),
            };
            self.handle(node, what, r)?;
        }
        // Attributes: everything but directories, then directories deepest first.
        let attributes = "restore attributes of";
        for node in nodes.iter().filter(|n| n.kind != FileKind::Directory) {
            self.handle(node, attributes, self.set_attributes(node))?;
        }
        for node in nodes.iter().rev().filter(|n| n.kind == FileKind::Directory) {
            self.handle(node, attributes, self.set_attributes(node))?;
        }
        Ok(())
    }

    fn make_dir(&self, node: &Node) -> Result<()> {
        let path = self.target(node);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => bail!("exists and is not a directory"),
            Err(_) => Ok(fs::create_dir(&path)?),
        }
    }

    /// Removes a non-directory in the way of a new entry (never following it).
    fn clear(&self, path: &Path) -> Result<()> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => bail!("exists and is a directory"),
            Ok(_) => Ok(fs::remove_file(path)?),
            Err(_) => Ok(()),
        }
    }

    fn write_file(&self, node: &Node) -> Result<()> {
        let path = self.target(node);
        self.clear(&path)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut file);
        let mut size = 0u64;
        let at = self.fs.locate(node.ino)?;
        at.fs.read_all(at.ino, |piece| {
            let r = match piece {
                ContentPiece::Data(d) => {
                    size += d.len() as u64;
                    out.write_all(d)
                }
                ContentPiece::Hole(n) => {
                    size += n;
                    i64::try_from(n)
                        .map_err(std::io::Error::other)
                        .and_then(|n| out.seek(SeekFrom::Current(n)).map(drop))
                }
            };
            r.map_err(|e| hoard_reader::Error::Io(e.to_string()))
        })?;
        out.flush()?;
        drop(out);
        // A trailing hole leaves the file short until its length is set.
        file.set_len(size)?;
        Ok(())
    }

    fn hard_link(&self, first: &Node, node: &Node) -> Result<()> {
        let path = self.target(node);
        self.clear(&path)?;
        Ok(fs::hard_link(self.target(first), &path)?)
    }

    fn symlink(&self, node: &Node) -> Result<()> {
        let path = self.target(node);
        self.clear(&path)?;
        let target = self.fs.readlink(node.ino)?;
        let target = OsStr::from_bytes(&target);
        Ok(std::os::unix::fs::symlink(target, &path)?)
    }

    fn special(&self, node: &Node) -> Result<()> {
        let is_device = matches!(node.kind, FileKind::CharDevice | FileKind::BlockDevice);
        if (is_device && (self.skip_devices || !self.can_make_devices))
            || (!is_device && self.skip_specials)
        {
            return Ok(());
        }
        let st = self.fs.stat(node.ino)?;
        let path = self.target(node);
        self.clear(&path)?;
        let c = cstring(&path)?;
        // SAFETY: `c` is a valid NUL-terminated path.
        let rc =
            unsafe { libc::mknod(c.as_ptr(), st.mode as libc::mode_t, st.rdev as libc::dev_t) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(())
    }

    fn set_attributes(&self, node: &Node) -> Result<()> {
        let is_device = matches!(node.kind, FileKind::CharDevice | FileKind::BlockDevice);
        let is_special = matches!(node.kind, FileKind::Fifo | FileKind::Socket);
        if (is_device && (self.skip_devices || !self.can_make_devices))
            || (is_special && self.skip_specials)
        {
            return Ok(());
        }
        let st = self.fs.stat(node.ino)?;
        let path = self.target(node);
        if self.restore_owners {
            std::os::unix::fs::lchown(&path, Some(st.uid), Some(st.gid)).context("chown")?;
        }
        // `user.*` ones while the entry is still writable (a user other
        // than root cannot set them on a read-only file).
        self.set_xattrs(node, &path, true)?;
        if node.kind != FileKind::Symlink {
            fs::set_permissions(&path, fs::Permissions::from_mode(st.permissions()))
                .context("chmod")?;
        }
        self.set_xattrs(node, &path, false)?;
        set_times(&path, &st).context("set times")
    }

    /// Restores the `user.*` attributes of `node` (`user`), or the others.
    fn set_xattrs(&self, node: &Node, path: &Path, user: bool) -> Result<()> {
        if self.xattrs == XattrRestore::None || (!user && self.xattrs == XattrRestore::User) {
            return Ok(());
        }
        for (name, value) in self.fs.xattrs(node.ino)? {
            if name.starts_with(b"user.") != user {
                continue;
            }
            let name = OsStr::from_bytes(&name);
            xattr::set(path, name, &value)
                .with_context(|| format!("extended attribute {}", name.to_string_lossy()))?;
        }
        Ok(())
    }
}

fn cstring(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("path contains a NUL byte"))
}

fn set_times(path: &Path, st: &Stat) -> Result<()> {
    let ts = |t: hoard_reader::Time| libc::timespec {
        tv_sec: t.sec as libc::time_t,
        tv_nsec: t.nsec as libc::c_long,
    };
    let times = [ts(st.atime), ts(st.mtime)];
    let c = cstring(path)?;
    // SAFETY: `c` is a valid path and `times` holds two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}
