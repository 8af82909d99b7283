//! The FUSE operations over a [`View`]: one image, a stack of layers or a
//! set of images, all read the same way.
//!
//! FUSE inode numbers are the view's inode numbers plus one (FUSE reserves
//! 1 for the root, a single image numbers it 0); a view whose root has
//! another number has it swapped with 0, which such a view never hands
//! out. Everything is read-only, so the kernel may keep attributes,
//! entries and page-cache data for a long time (except in a directory
//! whose entries may change: a watched set's root).
//! Reads run on a worker pool so that a slow block decompression never
//! holds up other requests.

use crate::analysis::Analysis;
use crate::mounting::{self, Attached};
use crate::options::{Mlock, MountOptions, Tidy};
use crate::perfmon::{Op, PerfMon};
use crate::preload::{self, Preloader};
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyXattr, Request, SessionACL,
};
use hoard_reader::{Error, FileKind, Filesystem, Stat, View};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the kernel may cache attributes and entries: the image never changes.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// Extended attribute holding the driver's process id (on the root).
const XATTR_PID: &str = "user.dwarfs.driver.pid";
/// Extended attribute describing an inode and its chunks (on regular files).
const XATTR_INODEINFO: &str = "user.dwarfs.inodeinfo";
/// Extended attribute with the latency report (on the root, with perfmon).
const XATTR_PERFMON: &str = "user.dwarfs.perfmon";
/// Room beyond the latency report's length given to a size query.
const PERFMON_ROOM: usize = 4096;
/// The largest extended attribute value Linux passes on.
const XATTR_SIZE_MAX: usize = 65536;
/// `lseek` whence values the kernel forwards to FUSE.
const SEEK_DATA: i32 = 3;
const SEEK_HOLE: i32 = 4;

/// A mounted image, handed to the caller once the mount is ready.
pub struct Mounted {
    attached: Attached,
}

impl Mounted {
    /// Unmounts (unless the mount on the directory is no longer this
    /// one); the serving loop then returns.
    pub fn unmount(&mut self) -> std::io::Result<()> {
        self.attached.detach()
    }
}

/// Checks that `mountpoint` is a directory where a file system can be
/// mounted.
pub fn check_mountpoint(mountpoint: &Path) -> Result<(), String> {
    let cannot_mount = |why: &dyn std::fmt::Display| mounting::cannot_mount(mountpoint, why);
    let meta = std::fs::metadata(mountpoint).map_err(|e| cannot_mount(&e))?;
    if !meta.is_dir() {
        return Err(cannot_mount(&"not a directory"));
    }
    if is_mount_point(mountpoint, &meta) {
        return Err(cannot_mount(&"already a mount point"));
    }
    Ok(())
}

/// What the remote images of `view` fetched, summed; `None` when none is
/// remote (or none is open).
fn remote_stats(view: &dyn View) -> Option<hoard_reader::source::FetchStats> {
    view.images()
        .iter()
        .filter_map(|fs| fs.image().fetch_stats())
        .reduce(|a, b| hoard_reader::source::FetchStats {
            requests: a.requests + b.requests,
            bytes: a.bytes + b.bytes,
            failures: a.failures + b.failures,
            cache_bytes: a.cache_bytes + b.cache_bytes,
            latency_us: a.latency_us + b.latency_us,
            max_latency_us: a.max_latency_us.max(b.max_latency_us),
        })
}

/// Mounts `view` (named `fsname` in the mount table) on `mountpoint`,
/// calls `ready` once the kernel has accepted the mount, and serves
/// requests until it is unmounted. Ending never unmounts by itself (see
/// [`crate::mounting`]).
///
/// Every error that can be detected before mounting (bad mount point, no
/// FUSE, an `analysis_file` that cannot be created) is returned before
/// `ready` is called; the caller opens the view (and reports a bad image)
/// first. Preloading (`preload_all`, `preload_category`) starts once the
/// kernel has accepted the mount, in the background, and stops when it
/// ends. With `perfmon`, the latency report is printed to standard error
/// at the end.
pub fn serve(
    view: Arc<dyn View>,
    fsname: &str,
    mountpoint: &Path,
    options: &MountOptions,
    ready: impl FnOnce(Mounted),
) -> Result<(), String> {
    check_mountpoint(mountpoint)?;
    let (driver, config) = prepare(view, options)?;
    let (stats_view, perf) = (driver.view.clone(), driver.perf.clone());
    let allow_other = config.acl != SessionACL::Owner;
    let (fuse, attached) = mounting::attach(mountpoint, fsname, options, allow_other)?;
    let session = match fuser::Session::from_fd(driver, fuse, config.acl, config.clone()) {
        Ok(session) => session,
        Err(e) => {
            let _ = attached.detach();
            return Err(format!("cannot serve the mount: {e}"));
        }
    };
    run_session(session, (stats_view, perf), options, || {
        ready(Mounted { attached })
    })
}

/// Serves `view` over `fuse`, a `/dev/fuse` connection the caller has
/// already mounted (as `fusermount3 -o auto_unmount` hands one back), and
/// calls `ready` once the connection is set up. Serving ends when the
/// kernel ends the connection: once the mount is gone and no file on it
/// is still open. The caller unmounts; otherwise as [`serve`].
pub fn serve_connection(
    view: Arc<dyn View>,
    fuse: std::os::fd::OwnedFd,
    options: &MountOptions,
    ready: impl FnOnce(),
) -> Result<(), String> {
    let (driver, config) = prepare(view, options)?;
    let (stats_view, perf) = (driver.view.clone(), driver.perf.clone());
    let session = fuser::Session::from_fd(driver, fuse, config.acl, config.clone())
        .map_err(|e| format!("cannot serve the mount: {e}"))?;
    run_session(session, (stats_view, perf), options, ready)
}

/// The driver over `view` and the session's configuration (without mount
/// options), after the checks that can fail before mounting.
fn prepare(view: Arc<dyn View>, options: &MountOptions) -> Result<(Driver, Config), String> {
    lock_memory(options.mlock)?;
    bound_malloc();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.workers)
        .thread_name(|i| format!("hoard-read-{i}"))
        .build()
        .map_err(|e| e.to_string())?;
    let analysis = options
        .analysis_file
        .as_deref()
        .map(|path| Analysis::create(path, view.root()))
        .transpose()?;
    if let Some(warning) = preload::unknown_category(view.as_ref(), &options.preload) {
        eprintln!("hoard: warning: {warning}");
    }
    start_tidying(&view, options);
    start_following(&view, options);
    let perf = Arc::new(PerfMon::parse(&options.perfmon)?);
    let driver = Driver {
        root: view.root(),
        view,
        options: options.clone(),
        pool,
        perf,
        no_open: false,
        file_lookups: AtomicU64::new(0),
        read_failures: Arc::default(),
        analysis,
    };
    let mut config = Config::default();
    config.acl = if options.allow_other {
        SessionACL::All
    } else if options.allow_root {
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(options.workers);
    config.clone_fd = true;
    Ok((driver, config))
}

/// Starts preloading, calls `ready`, and serves until the session ends;
/// with perfmon, prints the latency report (of the driver's view and
/// monitor, `watched`) then.
fn run_session(
    session: fuser::Session<Driver>,
    watched: (Arc<dyn View>, Arc<PerfMon>),
    options: &MountOptions,
    ready: impl FnOnce(),
) -> Result<(), String> {
    let (stats_view, perf) = watched;
    // Stopped (and waited for) when serving ends.
    let _preloader = Preloader::start(stats_view.as_ref(), &options.preload);
    ready();
    let served = session.run().map_err(|e| e.to_string());
    if !options.perfmon.is_empty() {
        eprint!("{}", perf.report_with(remote_stats(stats_view.as_ref())));
    }
    served
}

/// Whether `path` is the root of a mounted file system.
fn is_mount_point(path: &Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let parent = path.join("..");
    std::fs::metadata(parent).is_ok_and(|p| p.dev() != meta.dev() || p.ino() == meta.ino())
}

/// Starts the thread that tidies the block cache every `tidy_interval`
/// (`tidy_strategy`). It lives as long as the process: the driver exits
/// when the mount ends.
fn start_tidying(view: &Arc<dyn View>, options: &MountOptions) {
    if options.tidy == Tidy::None {
        return;
    }
    let (fs, o) = (Arc::downgrade(view), options.clone());
    std::thread::Builder::new()
        .name("hoard-tidy".into())
        .spawn(move || loop {
            std::thread::sleep(o.tidy_interval);
            let Some(fs) = fs.upgrade() else { return };
            match o.tidy {
                Tidy::Time => fs.cache().evict_unused(o.tidy_max_age),
                Tidy::Swap => fs.cache().evict_swapped(),
                Tidy::None => return,
            };
        })
        .map(drop)
        .unwrap_or_else(|e| eprintln!("hoard: warning: no cache tidying: {e}"));
}

/// Starts the thread that closes the images of a set unused for
/// `image_idle` and, with `watch`, picks up images added to or removed
/// from its directory; it checks every second at most.
fn start_following(view: &Arc<dyn View>, options: &MountOptions) {
    if !view.opens_on_demand() {
        return;
    }
    let (view, o) = (Arc::downgrade(view), options.clone());
    let every = o
        .image_idle
        .clamp(Duration::from_millis(100), Duration::from_secs(1));
    std::thread::Builder::new()
        .name("hoard-follow".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let Some(view) = view.upgrade() else { return };
            view.close_idle(o.image_idle);
            if o.watch {
                if let Err(e) = view.refresh() {
                    eprintln!("hoard: warning: {e}");
                }
            }
        })
        .map(drop)
        .unwrap_or_else(|e| eprintln!("hoard: warning: images stay open: {e}"));
}

/// Keeps freed block and read buffers from lingering in malloc's per-thread
/// arenas: buffers of 128 KiB and more are mapped and unmapped each time
/// (glibc otherwise raises this threshold after the first free, and keeps
/// the memory), and threads share a few arenas.
fn bound_malloc() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only tunes the allocator; called before any of our
    // threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

fn lock_memory(mlock: Mlock) -> Result<(), String> {
    if mlock == Mlock::None {
        return Ok(());
    }
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        let e = std::io::Error::last_os_error();
        if mlock == Mlock::Must {
            return Err(format!("mlock=must: cannot lock memory: {e}"));
        }
        eprintln!("hoard: warning: mlock=try: cannot lock memory: {e}");
    }
    Ok(())
}

struct Driver {
    view: Arc<dyn View>,
    /// The view's root, FUSE's inode 1.
    root: u64,
    options: MountOptions,
    pool: rayon::ThreadPool,
    perf: Arc<PerfMon>,
    /// The kernel can open files and directories without asking us: `open`
    /// and `opendir` then answer `ENOSYS` once, and the kernel keeps their
    /// page cache (`FOPEN_KEEP_CACHE`, `FOPEN_CACHE_DIR`) from then on.
    no_open: bool,
    /// Lookups that found something other than a directory: programs that
    /// open or stat what they list (see `readdirplus`).
    file_lookups: AtomicU64,
    /// What failed reads of the image's data have logged.
    read_failures: Arc<ReadFailures>,
    /// The access profile being recorded (`analysis_file`).
    analysis: Option<Analysis>,
}

/// The failures of reads logged so far, by message: a block that fails
/// (damaged, or not matching the image's signature) fails every read that
/// needs it, and is logged once, on the mount's standard error. The
/// reader only returns the error; reporting it is the front end's.
#[derive(Default)]
struct ReadFailures(Mutex<HashSet<String>>);

/// Distinct read failures logged at most: a hostile image may fail in
/// as many ways as it has blocks, and the set of those seen stays small.
const MAX_LOGGED_FAILURES: usize = 1000;

impl ReadFailures {
    /// The `errno` a failed read answers; an image at fault (its bytes
    /// corrupt) is logged the first time that failure is seen.
    fn errno(&self, e: &Error) -> Errno {
        if let Error::Corrupt(what) = e {
            let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if seen.len() < MAX_LOGGED_FAILURES && seen.insert(what.clone()) {
                eprintln!("hoard: error: {what}: reads that need it fail");
                if seen.len() == MAX_LOGGED_FAILURES {
                    eprintln!("hoard: error: more reads fail; they are not logged");
                }
            }
        }
        errno(e)
    }
}

/// Lookups of files after which listings carry every entry's attributes
/// (`readdirplus` in full): from then on programs are taken to stat or
/// open what they list (`ls -l`, `tar`, `cp`), and one reply saves a lookup
/// per entry. Before, a walk that only wants names and types (`find`)
/// makes the kernel build no inode for the files it passes.
const FULL_LISTINGS_AFTER: u64 = 256;

/// Files a directory's first listing carries in full per round trip it
/// saves. Before programs are seen looking files up, a first listing is
/// lean (`.` and `..` only, then names without attributes) unless the
/// directory holds at most this many files per subdirectory plus one:
/// a lean listing costs one more round trip to the driver, and a walk
/// into each subdirectory one lookup, where a full one costs the kernel
/// an inode for each file (about a round trip's time for 16 of them, on
/// the machines measured; see the fuse crate's README).
const FILES_PER_ROUND_TRIP: usize = 16;

/// Entries counted to decide how a first listing is made; a larger
/// directory gets a lean one.
const MAX_FULL_LISTING: usize = 512;

/// Whether a directory of `entries` entries, `dirs` of them directories,
/// is listed for less in full than lean, before programs are seen
/// looking files up.
fn full_listing_pays(entries: usize, dirs: usize) -> bool {
    entries <= MAX_FULL_LISTING && entries.saturating_sub(dirs) <= FILES_PER_ROUND_TRIP * (dirs + 1)
}

/// What the driver asks of the kernel, where it offers it, to save round
/// trips on a tree that never changes: `readdirplus` (names and attributes
/// in one reply, so `find` and `ls -l` need no lookups), symlink targets in
/// the page cache, concurrent lookups and listings in one directory, and
/// opens without a request.
const WANTED: InitFlags = InitFlags::FUSE_DO_READDIRPLUS
    .union(InitFlags::FUSE_READDIRPLUS_AUTO)
    .union(InitFlags::FUSE_CACHE_SYMLINKS)
    .union(InitFlags::FUSE_PARALLEL_DIROPS)
    .union(InitFlags::FUSE_NO_OPEN_SUPPORT)
    .union(InitFlags::FUSE_NO_OPENDIR_SUPPORT);

fn errno(e: &Error) -> Errno {
    match e {
        Error::NotFound(_) => Errno::ENOENT,
        Error::WrongType(_) => Errno::EINVAL,
        Error::Io(_) | Error::Corrupt(_) | Error::Unsupported(_) => Errno::EIO,
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Regular => FileType::RegularFile,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
    }
}

fn system_time(t: hoard_reader::Time) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec));
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nsec
    }
}

/// The attributes of a lookup answer saying "no such entry" (inode 0).
fn missing_entry() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

/// The kernel's 32-bit device number encoding.
fn kernel_rdev(dev: u64) -> u32 {
    let major = hoard_reader::inode::dev_major(dev);
    let minor = hoard_reader::inode::dev_minor(dev);
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

impl Driver {
    /// The view's inode number of FUSE's `ino`.
    fn view_ino(&self, ino: INodeNo) -> u64 {
        match ino.0.saturating_sub(1) {
            0 => self.root,
            v if v == self.root => 0,
            v => v,
        }
    }

    /// FUSE's inode number of the view's `ino`.
    fn fuse_ino(&self, ino: u64) -> INodeNo {
        match ino {
            v if v == self.root => INodeNo(1),
            0 => INodeNo(self.root + 1),
            v => INodeNo(v + 1),
        }
    }

    /// How long the kernel may keep what it learns of `dir`'s entries.
    fn ttl(&self, dir: u64) -> Duration {
        if self.view.is_volatile(dir) {
            Duration::ZERO
        } else {
            TTL
        }
    }

    fn attr(&self, ino: u64, st: &Stat) -> FileAttr {
        FileAttr {
            ino: self.fuse_ino(ino),
            size: st.size,
            blocks: st.allocated_size.div_ceil(512),
            atime: system_time(st.atime),
            mtime: system_time(st.mtime),
            ctime: system_time(st.ctime),
            crtime: system_time(st.mtime),
            kind: file_type(st.kind),
            perm: (st.mode & 0o7777) as u16,
            nlink: st.nlink,
            uid: self.options.uid.unwrap_or(st.uid),
            gid: self.options.gid.unwrap_or(st.gid),
            rdev: kernel_rdev(st.rdev),
            blksize: self.options.block_size,
            flags: 0,
        }
    }

    fn lookup_name(&self, dir: u64, name: &[u8]) -> hoard_reader::Result<Option<u64>> {
        if let Some(ino) = self.view.lookup(dir, name)? {
            return Ok(Some(ino));
        }
        if !self.options.case_insensitive {
            return Ok(None);
        }
        let mut found = None;
        self.view.list(dir, 0, &mut |n, ino, _| {
            if n.eq_ignore_ascii_case(name) {
                found = Some(ino);
            }
            Ok(found.is_some())
        })?;
        Ok(found)
    }

    /// Calls `add` with each entry of a directory listing from `offset`
    /// on — `.`, `..`, then the stored entries — and the offset of the next
    /// one, until `add` says the reply is full (returns true).
    fn list(
        &self,
        dir: u64,
        offset: u64,
        mut add: impl FnMut(u64, u64, &[u8], Option<FileKind>) -> hoard_reader::Result<bool>,
    ) -> hoard_reader::Result<()> {
        if offset == 0 && add(1, dir, b".", Some(FileKind::Directory))? {
            return Ok(());
        }
        if offset <= 1 && add(2, self.view.parent(dir)?, b"..", Some(FileKind::Directory))? {
            return Ok(());
        }
        let skip = offset.saturating_sub(2) as usize;
        let mut next = skip as u64 + 3;
        self.view.list(dir, skip, &mut |name, ino, kind| {
            next += 1;
            add(next - 1, ino, name, Some(kind))
        })
    }

    /// Tells the access profile, if one is recorded, that the kernel now
    /// knows `ino` (a directory or a regular file) as `name` in `dir`.
    fn note_entry(&self, dir: u64, name: &[u8], ino: u64, kind: FileKind) {
        if let Some(analysis) = &self.analysis {
            if matches!(kind, FileKind::Directory | FileKind::Regular) {
                analysis.seen(dir, name, ino);
            }
        }
    }

    /// Whether directory `dir`'s first listing costs less with every
    /// entry's attributes than lean (see [`full_listing_pays`]).
    fn cheaper_in_full(&self, dir: u64) -> hoard_reader::Result<bool> {
        let (mut entries, mut dirs) = (0usize, 0usize);
        self.view.list(dir, 0, &mut |_, _, kind| {
            entries += 1;
            dirs += usize::from(kind == FileKind::Directory);
            Ok(entries > MAX_FULL_LISTING)
        })?;
        Ok(full_listing_pays(entries, dirs))
    }

    fn inode_info(&self, ino: u64) -> hoard_reader::Result<String> {
        let at = self.view.locate(ino)?;
        let st = at.fs.stat(at.ino)?;
        let mut info = serde_json::json!({
            "mode": st.mode,
            "modestring": format!("{:o}", st.mode),
            "uid": st.uid,
            "gid": st.gid,
        });
        if st.kind == FileKind::Regular {
            let chunks: Vec<serde_json::Value> = at
                .fs
                .extents(at.ino)?
                .into_iter()
                .map(|e| match e {
                    hoard_reader::Extent::Data { block, offset, size } => {
                        let category = at.fs.block_category(block);
                        serde_json::json!({"block": block, "offset": offset, "size": size, "category": category})
                    }
                    hoard_reader::Extent::Hole { size } => serde_json::json!({"hole": size}),
                })
                .collect();
            info["chunks"] = chunks.into();
        }
        Ok(info.to_string())
    }

    fn xattr_names(&self, ino: u64) -> Vec<&'static str> {
        let mut names = Vec::new();
        if ino == self.root {
            names.push(XATTR_PID);
            if !self.options.perfmon.is_empty() {
                names.push(XATTR_PERFMON);
            }
        }
        if self
            .view
            .stat(ino)
            .is_ok_and(|s| s.kind == FileKind::Regular)
        {
            names.push(XATTR_INODEINFO);
        }
        names
    }
}

fn reply_xattr(reply: ReplyXattr, size: u32, value: &[u8]) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

impl fuser::Filesystem for Driver {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // With default_permissions the kernel checks access; with POSIX
        // ACLs it also honours the stored system.posix_acl_* attributes.
        let mut wanted = if self.options.default_permissions {
            WANTED.union(InitFlags::FUSE_POSIX_ACL)
        } else {
            WANTED
        };
        // An access profile records opens: the kernel must send them.
        if self.analysis.is_some() {
            wanted.remove(InitFlags::FUSE_NO_OPEN_SUPPORT);
        }
        let offered = config.capabilities() & wanted;
        // Only flags the kernel offers are asked for, so this cannot fail.
        let _ = config.add_capabilities(offered);
        self.no_open =
            offered.contains(InitFlags::FUSE_NO_OPEN_SUPPORT | InitFlags::FUSE_NO_OPENDIR_SUPPORT);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _t = Timer::new(&self.perf, Op::Lookup);
        let dir = self.view_ino(parent);
        let ttl = self.ttl(dir);
        let result = self
            .lookup_name(dir, name.as_bytes())
            .and_then(|found| found.map(|ino| Ok((ino, self.view.stat(ino)?))).transpose());
        match result {
            Ok(Some((ino, st))) => {
                if st.kind != FileKind::Directory {
                    self.file_lookups.fetch_add(1, Ordering::Relaxed);
                }
                self.note_entry(dir, name.as_bytes(), ino, st.kind);
                reply.entry(&ttl, &self.attr(ino, &st), Generation(0))
            }
            // Inode 0 is "no such entry", which the kernel then remembers
            // (programs probe many missing paths: search paths, imports).
            Ok(None) if !ttl.is_zero() => reply.entry(&TTL, &missing_entry(), Generation(0)),
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _t = Timer::new(&self.perf, Op::Getattr);
        let ino = self.view_ino(ino);
        match self.view.stat(ino) {
            Ok(st) => reply.attr(&self.ttl(ino), &self.attr(ino, &st)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _t = Timer::new(&self.perf, Op::Readlink);
        match self.view.readlink(self.view_ino(ino)) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _t = Timer::new(&self.perf, Op::Open);
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        let ino = self.view_ino(ino);
        match self.view.stat(ino) {
            Ok(st) if st.kind == FileKind::Directory => reply.error(Errno::EISDIR),
            Ok(_) => {
                if let Some(analysis) = &self.analysis {
                    analysis.opened(ino);
                }
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let at = match self.view.locate(self.view_ino(ino)) {
            Ok(at) => at,
            Err(e) => return reply.error(errno(&e)),
        };
        let (fs, ino) = (at.fs, at.ino);
        let readahead = self.options.readahead;
        let (perf, failures) = (self.perf.clone(), self.read_failures.clone());
        let started = Instant::now();
        // From blocks already decoded, the read is a copy: answered here,
        // without a hop to the pool (which costs more than the copy).
        let missing = with_read_buf(size as usize, |buf| {
            match fs.read_cached(ino, offset, buf) {
                Ok(Some(n)) => {
                    perf.record(Op::ReaderRead, started.elapsed());
                    reply.data(&buf[..n]);
                    perf.record(Op::Read, started.elapsed());
                    Ok(None)
                }
                Ok(None) => Ok(Some(reply)),
                Err(e) => {
                    reply.error(failures.errno(&e));
                    Err(())
                }
            }
        });
        let reply = match missing {
            Ok(Some(reply)) => reply,
            Ok(None) => {
                if readahead > 0 {
                    self.pool
                        .spawn(move || prefetch(&fs, ino, offset + u64::from(size), readahead));
                }
                return;
            }
            Err(()) => return,
        };
        self.pool.spawn(move || {
            let reading = Instant::now();
            with_read_buf(size as usize, |buf| {
                let result = fs.read(ino, offset, buf);
                perf.record(Op::ReaderRead, reading.elapsed());
                match result {
                    Ok(n) => reply.data(&buf[..n]),
                    Err(e) => reply.error(failures.errno(&e)),
                }
            });
            perf.record(Op::Read, started.elapsed());
            if readahead > 0 {
                prefetch(&fs, ino, offset + u64::from(size), readahead);
            }
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        let ino = self.view_ino(ino);
        match self.view.stat(ino) {
            Ok(st) if st.kind != FileKind::Directory => reply.error(Errno::ENOTDIR),
            Ok(_) if self.view.is_volatile(ino) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Ok(_) => reply.opened(
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _t = Timer::new(&self.perf, Op::Readdir);
        let listed = self.list(self.view_ino(ino), offset, |next, child, name, kind| {
            let kind = match kind {
                Some(k) => k,
                None => self.view.stat(child)?.kind,
            };
            let ino = self.fuse_ino(child);
            Ok(reply.add(ino, next, file_type(kind), OsStr::from_bytes(name)))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _t = Timer::new(&self.perf, Op::Readdir);
        // A listing's first reply carries only `.` and `..` until programs
        // are seen looking files up, unless it is cheaper in full: the
        // kernel then asks for the rest with plain readdir, and makes no
        // inode for entries nobody looks at.
        let dir = self.view_ino(ino);
        let lean = offset == 0
            && self.file_lookups.load(Ordering::Relaxed) < FULL_LISTINGS_AFTER
            && !matches!(self.cheaper_in_full(dir), Ok(true));
        let ttl = self.ttl(dir);
        let listed = self.list(dir, offset, |next, child, name, _| {
            if lean && next > 2 {
                return Ok(true);
            }
            let st = self.view.stat(child)?;
            if next > 2 {
                self.note_entry(dir, name, child, st.kind);
            }
            let attr = self.attr(child, &st);
            Ok(reply.add(
                self.fuse_ino(child),
                next,
                OsStr::from_bytes(name),
                &ttl,
                &attr,
                Generation(0),
            ))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _t = Timer::new(&self.perf, Op::Statfs);
        let bsize = self.options.block_size;
        let (size, inodes) = self.view.totals();
        let blocks = size.div_ceil(u64::from(bsize));
        reply.statfs(blocks, 0, 0, inodes, 0, bsize, 255, bsize);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _t = Timer::new(&self.perf, Op::Xattr);
        let ino = self.view_ino(ino);
        if !self.xattr_names(ino).iter().any(|n| OsStr::new(n) == name) {
            // Not one of hoard's own: a stored attribute, if any.
            return match self.view.xattrs(ino) {
                Ok(stored) => match stored.iter().find(|(n, _)| n == name.as_bytes()) {
                    Some((_, value)) => reply_xattr(reply, size, value),
                    None => reply.error(Errno::ENODATA),
                },
                Err(e) => reply.error(errno(&e)),
            };
        }
        let value = if name == XATTR_PID {
            Ok(std::process::id().to_string())
        } else if name == XATTR_PERFMON {
            let report = self.perf.report_with(remote_stats(self.view.as_ref()));
            if size == 0 {
                // The report grows between a size query and the read that
                // follows (both are counted in it): room to spare, so that
                // the read fits.
                let room = (report.len() + PERFMON_ROOM).min(XATTR_SIZE_MAX);
                return reply.size(room as u32);
            }
            Ok(report)
        } else {
            self.inode_info(ino)
        };
        match value {
            Ok(v) => reply_xattr(reply, size, v.as_bytes()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let _t = Timer::new(&self.perf, Op::Lseek);
        if whence != SEEK_DATA && whence != SEEK_HOLE {
            return reply.error(Errno::EINVAL);
        }
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(Errno::ENXIO);
        };
        let extents = self
            .view
            .locate(self.view_ino(ino))
            .and_then(|at| at.fs.extents(at.ino));
        match extents {
            Ok(extents) => match seek(&extents, offset, whence == SEEK_DATA) {
                Some(pos) => reply.offset(pos as i64),
                None => reply.error(Errno::ENXIO),
            },
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _t = Timer::new(&self.perf, Op::Xattr);
        let ino = self.view_ino(ino);
        let own = self.xattr_names(ino);
        let stored = match self.view.xattrs(ino) {
            Ok(s) => s,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut list = Vec::new();
        // Stored attributes first; hoard's own win over a stored namesake.
        let stored_names = stored
            .iter()
            .map(|(n, _)| n.as_slice())
            .filter(|n| !own.iter().any(|o| o.as_bytes() == *n));
        for n in stored_names.chain(own.iter().map(|o| o.as_bytes())) {
            list.extend_from_slice(n);
            list.push(0);
        }
        reply_xattr(reply, size, &list);
    }
}

/// Records the time from its creation to its drop.
struct Timer<'a> {
    perf: &'a PerfMon,
    op: Op,
    start: Instant,
}

impl<'a> Timer<'a> {
    fn new(perf: &'a PerfMon, op: Op) -> Self {
        Timer {
            perf,
            op,
            start: Instant::now(),
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.perf.record(self.op, self.start.elapsed());
    }
}

/// Where `SEEK_DATA` (`data` true) or `SEEK_HOLE` from `offset` lands in
/// a file of the given extents; `None` when there is no such place
/// (`ENXIO`). The end of a file counts as a hole.
fn seek(extents: &[hoard_reader::Extent], offset: u64, data: bool) -> Option<u64> {
    let size: u64 = extents.iter().map(|e| e.len()).sum();
    if offset >= size {
        return None;
    }
    let mut pos = 0u64;
    for e in extents {
        let end = pos + e.len();
        let is_data = matches!(e, hoard_reader::Extent::Data { .. });
        if end > offset && is_data == data {
            return Some(pos.max(offset));
        }
        pos = end;
    }
    (!data).then_some(size)
}

thread_local! {
    /// The buffer each thread reads file data into before replying, kept
    /// for the next read: a fresh one of 128 KiB (a read's usual size) is
    /// mapped, faulted in page by page and unmapped (with a TLB flush on
    /// the other cores) every time, since `bound_malloc` maps allocations
    /// from 128 KiB on. At most a read's size (1 MiB) a thread.
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's read buffer, `size` bytes of it (what a
/// read before left in it included: `f` writes what it uses); on a new
/// buffer if this thread's is in use (a read inside a read).
fn with_read_buf<R>(size: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    READ_BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < size {
                buf.resize(size, 0);
            }
            f(&mut buf[..size])
        }
        Err(_) => f(&mut vec![0; size]),
    })
}

/// Decompresses the blocks holding the next `len` bytes of `ino` from `from`.
fn prefetch(fs: &Filesystem, ino: u32, from: u64, len: u64) {
    let Ok(extents) = fs.extents(ino) else {
        return;
    };
    let mut pos = 0u64;
    for e in extents {
        let end = pos + e.len();
        if end > from && pos < from + len {
            if let hoard_reader::Extent::Data { block, .. } = e {
                let _ = fs.block(block);
            }
        }
        if pos >= from + len {
            break;
        }
        pos = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoard_reader::Extent;

    #[test]
    fn small_or_directory_heavy_listings_are_made_in_full() {
        assert!(full_listing_pays(0, 0), "an empty directory");
        assert!(full_listing_pays(FILES_PER_ROUND_TRIP, 0));
        assert!(!full_listing_pays(FILES_PER_ROUND_TRIP + 1, 0));
        // Each subdirectory saves a lookup: room for more files.
        assert!(full_listing_pays(3 * FILES_PER_ROUND_TRIP + 2, 2));
        assert!(!full_listing_pays(3 * FILES_PER_ROUND_TRIP + 3, 2));
        assert!(full_listing_pays(MAX_FULL_LISTING, MAX_FULL_LISTING));
        assert!(!full_listing_pays(
            MAX_FULL_LISTING + 1,
            MAX_FULL_LISTING + 1
        ));
    }

    #[test]
    fn seek_data_and_hole() {
        let data = |size| Extent::Data {
            block: 0,
            offset: 0,
            size,
        };
        // 100 bytes of data, a 1000-byte hole, 50 bytes of data.
        let e = [data(100), Extent::Hole { size: 1000 }, data(50)];
        assert_eq!(seek(&e, 0, true), Some(0));
        assert_eq!(seek(&e, 0, false), Some(100));
        assert_eq!(seek(&e, 150, true), Some(1100));
        assert_eq!(seek(&e, 150, false), Some(150));
        assert_eq!(seek(&e, 1120, false), Some(1150));
        assert_eq!(seek(&e, 1150, true), None);
        let holes = [Extent::Hole { size: 10 }];
        assert_eq!(seek(&holes, 3, true), None);
        assert_eq!(seek(&holes, 3, false), Some(3));
        assert_eq!(seek(&[], 0, false), None);
    }
}
