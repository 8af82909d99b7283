//! Extracting an image, or the entries matching some patterns, into a
//! directory: the code behind `hoard extract` and the bindings' `extract`.
//!
//! Directories are made first, then file contents are written in parallel
//! (on the current rayon pool) in the order their data is stored, so each
//! block is decompressed about once (with `disk_writers`, the pool only
//! reads and decompresses, and threads of their own write the files:
//! `writers`); then links and special files, and
//! last the owners, modes, extended attributes and times, deepest
//! directories first so that nothing touches a directory after its time
//! is set. Extended attributes come after the owner (a chown clears
//! `security.capability`); `user.*` ones before the mode (a read-only file
//! takes none from a user other than root), the others after it (an ACL
//! sets the group bits).
//!
//! Nothing is written outside the output directory: names were checked by
//! the [`walk`](crate::walk), entries are created without following
//! symlinks (an existing symlink in the way is replaced, never written
//! through), and an existing non-directory where a directory belongs is an
//! error.

use crate::view::{View, ViewExt, ViewNode as Node};
use crate::{ContentPiece, FileKind, Stat};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod writers;

/// Why an extraction (or one entry of it) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// A pattern is not a valid glob.
    #[error("invalid pattern '{pattern}': {reason}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The image could not be read (walking its tree).
    #[error(transparent)]
    Image(#[from] crate::Error),
    /// An entry (or the output directory) could not be written.
    #[error("{message}")]
    Output {
        /// `cannot WHAT 'PATH': CAUSE`, on one line.
        message: String,
        /// The system's error number when the system refused; none when
        /// the cause was reading the image.
        errno: Option<i32>,
    },
}

/// Glob patterns choosing what to extract, matched against paths relative
/// to the image's root: `*` stays within one path component, `**` crosses
/// them, a leading `/` is ignored, an `i:` prefix matches case
/// insensitively (a leading `:` escapes a pattern starting with `i:`).
/// No patterns select everything.
#[derive(Debug, Clone, Default)]
pub struct Patterns(Option<GlobSet>);

impl Patterns {
    /// Compiles `patterns`.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, ExtractError> {
        if patterns.is_empty() {
            return Ok(Patterns(None));
        }
        let invalid = |p: &str, e: globset::Error| ExtractError::Pattern {
            pattern: p.to_string(),
            reason: e.to_string(),
        };
        let mut set = GlobSetBuilder::new();
        for p in patterns {
            let p = p.as_ref();
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
                    .map_err(|e| invalid(p, e))?,
            );
        }
        let set = set.build().map_err(|e| invalid("", e))?;
        Ok(Patterns(Some(set)))
    }

    /// Keeps the nodes matching (all of them without patterns) plus the
    /// directories leading to them, in their order.
    pub fn select(&self, nodes: Vec<Node>) -> Vec<Node> {
        let Some(set) = &self.0 else {
            return nodes;
        };
        let mut keep: HashSet<Vec<u8>> = HashSet::new();
        for n in &nodes {
            if set.is_match(OsStr::from_bytes(&n.path)) {
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
}

/// Which extended attributes are restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrRestore {
    /// None.
    None,
    /// Only `user.*` (what a user other than root may set).
    User,
    /// All of them.
    All,
}

/// What [`extract`] restores besides contents, and how it meets errors.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// Set owners and groups.
    pub owners: bool,
    /// Create character and block devices (else they are skipped).
    pub devices: bool,
    /// Create fifos and sockets (else they are skipped).
    pub specials: bool,
    /// Which extended attributes to restore.
    pub xattrs: XattrRestore,
    /// Go on past entries that cannot be written, returning their errors.
    pub continue_on_error: bool,
    /// Write file contents on this many threads of their own plus one,
    /// the pool's threads only reading and decompressing (DwarFS's
    /// `--num-disk-writers`); `None`: each pool thread writes the files it
    /// reads.
    pub disk_writers: Option<usize>,
}

impl ExtractOptions {
    /// What the current user can restore: as root owners, devices and
    /// every extended attribute; otherwise only `user.*` attributes.
    pub fn for_current_user() -> Self {
        let root = is_root();
        ExtractOptions {
            owners: root,
            devices: root,
            specials: true,
            xattrs: if root {
                XattrRestore::All
            } else {
                XattrRestore::User
            },
            continue_on_error: false,
            disk_writers: None,
        }
    }
}

/// Whether the process runs as root (may set owners and make devices).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Extracts the entries of `fs` that `patterns` select into `dest`
/// (created if missing). Returns the errors passed over with
/// `continue_on_error` (none otherwise: the first one is returned).
pub fn extract(
    fs: &dyn View,
    dest: &Path,
    patterns: &Patterns,
    options: &ExtractOptions,
) -> Result<Vec<ExtractError>, ExtractError> {
    let nodes = patterns.select(fs.walk(fs.root(), b"")?);
    extract_nodes(fs, &nodes, dest, options)
}

/// Extracts `nodes` (from [`ViewExt::walk`], parents before children) into
/// `dest`; see [`extract`].
pub fn extract_nodes(
    fs: &dyn View,
    nodes: &[Node],
    dest: &Path,
    options: &ExtractOptions,
) -> Result<Vec<ExtractError>, ExtractError> {
    let extractor = Extractor {
        fs,
        root: dest.to_path_buf(),
        options,
        errors: Mutex::new(Vec::new()),
    };
    extractor.extract(nodes)?;
    Ok(extractor.errors.into_inner().unwrap_or_default())
}

/// Why one step failed: text for the message, and the system's error
/// number when it was a system error.
#[derive(Debug)]
struct Cause {
    text: String,
    errno: Option<i32>,
}

impl Cause {
    fn new(text: &str, errno: i32) -> Self {
        Cause {
            text: text.to_string(),
            errno: Some(errno),
        }
    }

    /// Puts `what` before the text (`chmod: Operation not permitted`).
    fn context(self, what: &str) -> Self {
        Cause {
            text: format!("{what}: {}", self.text),
            ..self
        }
    }
}

impl From<std::io::Error> for Cause {
    fn from(e: std::io::Error) -> Self {
        Cause {
            text: without_os_error(&e.to_string()),
            errno: e.raw_os_error(),
        }
    }
}

impl From<crate::Error> for Cause {
    fn from(e: crate::Error) -> Self {
        Cause {
            text: e.to_string(),
            errno: None,
        }
    }
}

/// A system error's text without the ` (os error N)` Rust adds.
fn without_os_error(text: &str) -> String {
    let mut line = text.replace('\n', " ");
    while let Some(start) = line.find(" (os error ") {
        let Some(len) = line[start..].find(')') else {
            break;
        };
        line.replace_range(start..=start + len, "");
    }
    line
}

type Step = Result<(), Cause>;

struct Extractor<'a> {
    fs: &'a dyn View,
    root: PathBuf,
    options: &'a ExtractOptions,
    errors: Mutex<Vec<ExtractError>>,
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
    fn handle(&self, node: &Node, what: &str, result: Step) -> Result<(), ExtractError> {
        let Err(cause) = result else {
            return Ok(());
        };
        let error = ExtractError::Output {
            message: format!(
                "cannot {what} '{}': {}",
                self.target(node).display(),
                cause.text
            ),
            errno: cause.errno,
        };
        if self.options.continue_on_error {
            self.errors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(error);
            Ok(())
        } else {
            Err(error)
        }
    }

    /// Whether `node` is a device or special file left out.
    fn skipped(&self, node: &Node) -> bool {
        match node.kind {
            FileKind::CharDevice | FileKind::BlockDevice => !self.options.devices,
            FileKind::Fifo | FileKind::Socket => !self.options.specials,
            _ => false,
        }
    }

    fn extract(&self, nodes: &[Node]) -> Result<(), ExtractError> {
        fs::create_dir_all(&self.root).map_err(|e| {
            let cause = Cause::from(e);
            ExtractError::Output {
                message: format!(
                    "cannot create output directory '{}': {}",
                    self.root.display(),
                    cause.text
                ),
                errno: cause.errno,
            }
        })?;
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
        match self.options.disk_writers {
            None => firsts
                .par_iter()
                .try_for_each(|node| self.handle(node, "write file", self.write_file(node)))?,
            Some(extra) => writers::write_files(self, &firsts, extra.saturating_add(1))?,
        }
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

    fn make_dir(&self, node: &Node) -> Step {
        let path = self.target(node);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(Cause::new("exists and is not a directory", libc::ENOTDIR)),
            Err(_) => Ok(fs::create_dir(&path)?),
        }
    }

    /// Removes a non-directory in the way of a new entry (never following it).
    fn clear(&self, path: &Path) -> Step {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => Err(Cause::new("exists and is a directory", libc::EISDIR)),
            Ok(_) => Ok(fs::remove_file(path)?),
            Err(_) => Ok(()),
        }
    }

    /// Creates the file of `node`, empty and private until its attributes
    /// are set.
    fn create_file(&self, node: &Node) -> Result<fs::File, Cause> {
        let path = self.target(node);
        self.clear(&path)?;
        Ok(fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)?)
    }

    fn write_file(&self, node: &Node) -> Step {
        let mut file = self.create_file(node)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut file);
        let mut size = 0u64;
        // A failed write is kept as it is, to report its error number.
        let mut write_error = None;
        let at = self.fs.locate(node.ino)?;
        let read = at.fs.read_all(at.ino, |piece| {
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
            r.map_err(|e| {
                let text = e.to_string();
                write_error = Some(e);
                crate::Error::Io(text)
            })
        });
        if let Some(e) = write_error {
            return Err(e.into());
        }
        read?;
        out.flush()?;
        drop(out);
        // A trailing hole leaves the file short until its length is set.
        file.set_len(size)?;
        Ok(())
    }

    fn hard_link(&self, first: &Node, node: &Node) -> Step {
        let path = self.target(node);
        self.clear(&path)?;
        Ok(fs::hard_link(self.target(first), &path)?)
    }

    fn symlink(&self, node: &Node) -> Step {
        let path = self.target(node);
        self.clear(&path)?;
        let target = self.fs.readlink(node.ino)?;
        Ok(std::os::unix::fs::symlink(
            OsStr::from_bytes(&target),
            &path,
        )?)
    }

    fn special(&self, node: &Node) -> Step {
        if self.skipped(node) {
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

    fn set_attributes(&self, node: &Node) -> Step {
        if self.skipped(node) {
            return Ok(());
        }
        let st = self.fs.stat(node.ino)?;
        let path = self.target(node);
        if self.options.owners {
            std::os::unix::fs::lchown(&path, Some(st.uid), Some(st.gid))
                .map_err(|e| Cause::from(e).context("chown"))?;
        }
        // `user.*` ones while the entry is still writable (a user other
        // than root cannot set them on a read-only file).
        self.set_xattrs(node, &path, true)?;
        if node.kind != FileKind::Symlink {
            fs::set_permissions(&path, fs::Permissions::from_mode(st.permissions()))
                .map_err(|e| Cause::from(e).context("chmod"))?;
        }
        self.set_xattrs(node, &path, false)?;
        set_times(&path, &st).map_err(|e| e.context("set times"))
    }

    /// Restores the `user.*` attributes of `node` (`user`), or the others.
    fn set_xattrs(&self, node: &Node, path: &Path, user: bool) -> Step {
        let restore = self.options.xattrs;
        if restore == XattrRestore::None || (!user && restore == XattrRestore::User) {
            return Ok(());
        }
        for (name, value) in self.fs.xattrs(node.ino)? {
            if name.starts_with(b"user.") != user {
                continue;
            }
            let name = OsStr::from_bytes(&name);
            xattr::set(path, name, &value).map_err(|e| {
                Cause::from(e).context(&format!("extended attribute {}", name.to_string_lossy()))
            })?;
        }
        Ok(())
    }
}

fn cstring(path: &Path) -> Result<CString, Cause> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Cause::new("path contains a NUL byte", libc::EINVAL))
}

fn set_times(path: &Path, st: &Stat) -> Step {
    let ts = |t: crate::Time| libc::timespec {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str, kind: FileKind) -> Node {
        Node {
            path: path.as_bytes().to_vec(),
            ino: 0,
            kind,
        }
    }

    #[test]
    fn patterns_select_matches_and_their_parents() {
        let nodes = vec![
            node("", FileKind::Directory),
            node("a", FileKind::Directory),
            node("a/x.txt", FileKind::Regular),
            node("a/y.bin", FileKind::Regular),
            node("b", FileKind::Directory),
            node("b/X.TXT", FileKind::Regular),
        ];
        let paths = |p: &Patterns| -> Vec<String> {
            p.select(nodes.clone())
                .iter()
                .map(|n| String::from_utf8_lossy(&n.path).into_owned())
                .collect()
        };
        assert_eq!(paths(&Patterns::new::<&str>(&[]).unwrap()).len(), 6);
        assert_eq!(
            paths(&Patterns::new(&["/*/*.txt"]).unwrap()),
            ["", "a", "a/x.txt"]
        );
        assert_eq!(
            paths(&Patterns::new(&["i:**/*.txt"]).unwrap()),
            ["", "a", "a/x.txt", "b", "b/X.TXT"]
        );
        assert!(paths(&Patterns::new(&["*.txt"]).unwrap()).is_empty());
        let e = Patterns::new(&["a/[x"]).unwrap_err();
        assert!(e.to_string().starts_with("invalid pattern 'a/[x': "), "{e}");
    }

    #[test]
    fn system_errors_lose_their_number_in_the_text() {
        let c = Cause::from(std::io::Error::from_raw_os_error(libc::EPERM)).context("chown");
        assert_eq!(c.text, "chown: Operation not permitted");
        assert_eq!(c.errno, Some(libc::EPERM));
    }
}
