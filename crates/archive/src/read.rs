//! Reading an archive member by member: [`ArchiveReader`] opens a file or
//! a stream, libarchive tells its filters and format from the first bytes,
//! and each [`Member`] comes with its data as blocks at their offsets
//! (gaps between blocks are holes).

use crate::ffi::{self, archive, archive_entry};
use crate::{acl, Error, Kind, Member, Result, Time};
use hoard_format::mode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFSOCK};
use libc::{c_char, c_void};
use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

/// Bytes asked of the input at a time.
const BLOCK: usize = 1 << 20;

/// The calling thread in the C.UTF-8 locale while it lives. libarchive
/// converts names between an archive's character set and the locale's;
/// in a UTF-8 locale pax names (UTF-8 by definition) come out as they are
/// and names in other formats keep their bytes, as bsdtar gives them in
/// such a locale. `uselocale` changes only this thread.
struct Utf8Locale(libc::locale_t);

impl Utf8Locale {
    fn enter() -> Option<Self> {
        static LOCALE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let locale = *LOCALE.get_or_init(|| {
            // SAFETY: a constant locale name; a null result is checked.
            let locale = unsafe {
                libc::newlocale(libc::LC_CTYPE_MASK, c"C.UTF-8".as_ptr(), ptr::null_mut())
            };
            locale as usize
        });
        if locale == 0 {
            return None;
        }
        // SAFETY: `locale` is a valid locale object that is never freed.
        Some(Utf8Locale(unsafe {
            libc::uselocale(locale as libc::locale_t)
        }))
    }
}

impl Drop for Utf8Locale {
    fn drop(&mut self) {
        // SAFETY: the thread's previous locale, as `uselocale` returned it.
        unsafe { libc::uselocale(self.0) };
    }
}

/// An archive being read, in order, once.
pub struct ArchiveReader {
    raw: *mut archive,
    entry: *mut archive_entry,
    /// The source of a stream, which the read callback borrows; it must
    /// outlive `raw`.
    stream: Option<Box<Stream>>,
    /// The archive's name, for messages.
    name: String,
    /// The current member's path, for messages.
    member: Vec<u8>,
    /// Whether the archive can be read no further.
    done: bool,
}

// SAFETY: the handle is used by one thread at a time (every method takes
// `&mut self`) and libarchive keeps no thread-local state for it.
unsafe impl Send for ArchiveReader {}

/// A stream the read callback pulls from.
struct Stream {
    input: Box<dyn Read + Send>,
    buf: Vec<u8>,
    error: Option<std::io::Error>,
}

/// libarchive's read callback: the next bytes of the stream.
unsafe extern "C" fn read_stream(
    _a: *mut archive,
    data: *mut c_void,
    out: *mut *const c_void,
) -> libc::ssize_t {
    // SAFETY: `data` is the `Stream` boxed in `ArchiveReader::stream`,
    // alive as long as the handle, and libarchive calls this from the
    // thread that called into it.
    let stream = unsafe { &mut *data.cast::<Stream>() };
    let result = catch_unwind(AssertUnwindSafe(|| loop {
        match stream.input.read(&mut stream.buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }));
    match result {
        Ok(Ok(n)) => {
            // SAFETY: `out` is libarchive's pointer to fill.
            unsafe { *out = stream.buf.as_ptr().cast() };
            n as libc::ssize_t
        }
        Ok(Err(e)) => {
            stream.error = Some(e);
            -1
        }
        Err(_) => {
            stream.error = Some(std::io::Error::other("the input panicked"));
            -1
        }
    }
}

impl ArchiveReader {
    /// Opens the archive file at `path`, which libarchive may seek in (as
    /// zip's central directory and 7z need).
    pub fn open_file(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Fatal(format!("{name}: the path holds a NUL byte")))?;
        let _locale = Utf8Locale::enter();
        let mut reader = Self::new(name, None)?;
        // SAFETY: `raw` is a fresh read handle and `cpath` a C string.
        let rc = unsafe { ffi::archive_read_open_filename(reader.raw, cpath.as_ptr(), BLOCK) };
        reader.check_open(rc)?;
        Ok(reader)
    }

    /// Opens the archive read from `input` in one pass (standard input, a
    /// pipe, a remote stream), named `name` in messages.
    pub fn open_stream(input: Box<dyn Read + Send>, name: &str) -> Result<Self> {
        let stream = Box::new(Stream {
            input,
            buf: vec![0; BLOCK],
            error: None,
        });
        let _locale = Utf8Locale::enter();
        let mut reader = Self::new(name.to_string(), Some(stream))?;
        let data: *mut Stream = &mut **reader.stream.as_mut().expect("just set");
        // SAFETY: `raw` is a fresh read handle; `data` stays valid while the
        // handle lives (it is freed after the handle in `drop`).
        let rc = unsafe {
            ffi::archive_read_open(reader.raw, data.cast(), None, Some(read_stream), None)
        };
        reader.check_open(rc)?;
        Ok(reader)
    }

    fn new(name: String, stream: Option<Box<Stream>>) -> Result<Self> {
        ffi::load().map_err(|e| Error::Fatal(format!("{name}: {e}")))?;
        // SAFETY: plain constructor calls; a null handle is checked.
        let raw = unsafe { ffi::archive_read_new() };
        if raw.is_null() {
            return Err(Error::Fatal(format!("{name}: out of memory")));
        }
        // SAFETY: `raw` is a valid, unopened read handle.
        unsafe {
            ffi::archive_read_support_filter_all(raw);
            ffi::archive_read_support_format_all(raw);
        }
        Ok(ArchiveReader {
            raw,
            entry: ptr::null_mut(),
            stream,
            name,
            member: Vec::new(),
            done: false,
        })
    }

    fn check_open(&mut self, rc: libc::c_int) -> Result<()> {
        if rc == ffi::ARCHIVE_OK || rc == ffi::ARCHIVE_WARN {
            return Ok(());
        }
        self.done = true;
        let what = self.error_text();
        Err(Error::Fatal(format!("{}: {what}", self.name)))
    }

    /// libarchive's last error, or the input's own error when reading it
    /// failed.
    fn error_text(&mut self) -> String {
        if let Some(e) = self.stream.as_mut().and_then(|s| s.error.take()) {
            return format!("cannot read the input: {e}");
        }
        // SAFETY: `raw` is valid; the string, when there is one, lives
        // until the next call on the handle and is copied at once.
        let text = unsafe { ffi::archive_error_string(self.raw) };
        if text.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: a NUL-terminated string from libarchive.
            one_line(&unsafe { CStr::from_ptr(text) }.to_string_lossy())
        }
    }

    /// The error for the current member, fatal or not.
    fn member_error(&mut self, fatal: bool, what: &str) -> Error {
        let text = format!(
            "{}: '{}': {what}",
            self.name,
            String::from_utf8_lossy(&self.member)
        );
        if fatal {
            self.done = true;
            Error::Fatal(text)
        } else {
            Error::Member(text)
        }
    }

    /// The archive's format and filters, as libarchive names them (known
    /// once the first member has been read).
    pub fn format(&self) -> String {
        // SAFETY: `raw` is valid; the names are static C strings.
        unsafe {
            let mut parts = vec![text_of(ffi::archive_format_name(self.raw))];
            for i in 0..ffi::archive_filter_count(self.raw) {
                let filter = text_of(ffi::archive_filter_name(self.raw, i));
                if !filter.is_empty() && filter != "none" {
                    parts.push(filter);
                }
            }
            parts.join(", ")
        }
    }

    /// The next member's header, `None` at the end of the archive. An
    /// [`Error::Member`] leaves out this member only; reading may go on.
    pub fn next_member(&mut self) -> Result<Option<Member>> {
        if self.done {
            return Ok(None);
        }
        let _locale = Utf8Locale::enter();
        let rc = loop {
            // SAFETY: `raw` is an open read handle; `entry` is set by the
            // call and owned by the handle.
            let rc = unsafe { ffi::archive_read_next_header(self.raw, &mut self.entry) };
            if rc != -10 {
                break rc; // not ARCHIVE_RETRY
            }
        };
        if rc == ffi::ARCHIVE_EOF {
            self.done = true;
            // SAFETY: `raw` is valid.
            if unsafe { ffi::archive_format(self.raw) } == ffi::ARCHIVE_FORMAT_EMPTY {
                return Err(Error::Fatal(format!(
                    "{}: empty input: not an archive",
                    self.name
                )));
            }
            return Ok(None);
        }
        if rc == ffi::ARCHIVE_FATAL || self.entry.is_null() {
            self.done = true;
            let what = self.error_text();
            return Err(Error::Fatal(if self.member.is_empty() {
                format!("{}: {what}", self.name)
            } else {
                format!(
                    "{}: after '{}': {what}",
                    self.name,
                    String::from_utf8_lossy(&self.member)
                )
            }));
        }
        // SAFETY: `entry` is the header just read, valid until the next one.
        let member = unsafe { self.member_of(self.entry) };
        self.member = member.path.clone();
        if rc == ffi::ARCHIVE_FAILED {
            let what = self.error_text();
            return Err(self.member_error(false, &what));
        }
        let mut member = member;
        if rc == ffi::ARCHIVE_WARN {
            let text = self.error_text();
            // A name that is not valid UTF-8 where the format says it is
            // keeps its bytes: nothing is lost.
            if !text.contains("can't be converted") {
                member.notes.push(text);
            }
        }
        // SAFETY: as above.
        if unsafe { ffi::archive_entry_is_encrypted(self.entry) } != 0 {
            return Err(self.member_error(
                false,
                "the member is encrypted, and hoard does not decrypt archive members",
            ));
        }
        Ok(Some(member))
    }

    /// The next block of the current member's data and its offset in the
    /// file, `None` after the last. Offsets grow; gaps are holes.
    pub fn read_block(&mut self) -> Result<Option<(u64, &[u8])>> {
        let mut buf: *const c_void = ptr::null();
        let mut len = 0usize;
        let mut offset = 0i64;
        let _locale = Utf8Locale::enter();
        // SAFETY: `raw` is an open read handle positioned at a member; the
        // block returned stays valid until the next call on the handle,
        // which the borrow of `self` ensures.
        let rc = unsafe { ffi::archive_read_data_block(self.raw, &mut buf, &mut len, &mut offset) };
        match rc {
            ffi::ARCHIVE_EOF => Ok(None),
            ffi::ARCHIVE_OK | ffi::ARCHIVE_WARN => {
                let offset = u64::try_from(offset)
                    .map_err(|_| self.member_error(true, "a data block at a negative offset"))?;
                if len == 0 {
                    return Ok(Some((offset, &[])));
                }
                // SAFETY: libarchive hands out `len` readable bytes at `buf`.
                let block = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
                Ok(Some((offset, block)))
            }
            _ => {
                let what = self.error_text();
                Err(self.member_error(rc == ffi::ARCHIVE_FATAL, &what))
            }
        }
    }

    /// The member `e` describes.
    ///
    /// # Safety
    /// `e` must be a valid entry.
    unsafe fn member_of(&self, e: *mut archive_entry) -> Member {
        // SAFETY: the caller's promise; every string is copied at once.
        unsafe {
            let path = bytes_of(ffi::archive_entry_pathname(e)).unwrap_or_default();
            let rdev = ffi::archive_entry_rdev(e);
            let kind = match ffi::archive_entry_filetype(e) & S_IFMT {
                S_IFDIR => Kind::Dir,
                S_IFLNK => {
                    Kind::Symlink(bytes_of(ffi::archive_entry_symlink(e)).unwrap_or_default())
                }
                S_IFCHR => Kind::CharDevice(rdev),
                S_IFBLK => Kind::BlockDevice(rdev),
                S_IFIFO => Kind::Fifo,
                S_IFSOCK => Kind::Socket,
                _ => Kind::File,
            };
            let time = |sec: libc::time_t, nsec: libc::c_long| Time {
                sec,
                nsec: u32::try_from(nsec).unwrap_or(0).min(999_999_999),
            };
            let mtime = time(
                ffi::archive_entry_mtime(e),
                ffi::archive_entry_mtime_nsec(e),
            );
            // The archive's atime and ctime where it has them, else mtime.
            let or_mtime =
                |set: libc::c_int, sec, nsec| if set != 0 { time(sec, nsec) } else { mtime };
            let atime = or_mtime(
                ffi::archive_entry_atime_is_set(e),
                ffi::archive_entry_atime(e),
                ffi::archive_entry_atime_nsec(e),
            );
            let ctime = or_mtime(
                ffi::archive_entry_ctime_is_set(e),
                ffi::archive_entry_ctime(e),
                ffi::archive_entry_ctime_nsec(e),
            );
            let mut member = Member {
                hardlink: bytes_of(ffi::archive_entry_hardlink(e)),
                kind,
                perm: ffi::archive_entry_perm(e) & 0o7777,
                uid: ffi::archive_entry_uid(e),
                gid: ffi::archive_entry_gid(e),
                mtime,
                atime,
                ctime,
                size: u64::try_from(ffi::archive_entry_size(e)).unwrap_or(0),
                xattrs: xattrs_of(e),
                notes: Vec::new(),
                path,
            };
            acls_of(e, &mut member);
            // libarchive sets the group bits from the ACL's owning group
            // entry; with a mask, a file's group bits are the mask's.
            let access = member
                .xattrs
                .iter()
                .find(|(n, _)| n == b"system.posix_acl_access");
            if let Some(mask) = access.and_then(|(_, v)| acl::mask_of(v)) {
                member.perm = (member.perm & !0o070) | (u32::from(mask & 7) << 3);
            }
            member
        }
    }
}

impl Drop for ArchiveReader {
    fn drop(&mut self) {
        // SAFETY: `raw` is the handle made in `new`, freed once; the
        // stream it reads from is dropped after it.
        unsafe { ffi::archive_read_free(self.raw) };
    }
}

/// The extended attributes of `e`.
///
/// # Safety
/// `e` must be a valid entry.
unsafe fn xattrs_of(e: *mut archive_entry) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut xattrs = Vec::new();
    // SAFETY: the caller's promise; names and values are copied at once.
    unsafe {
        ffi::archive_entry_xattr_reset(e);
        let (mut name, mut value, mut size) = (ptr::null(), ptr::null(), 0usize);
        while ffi::archive_entry_xattr_next(e, &mut name, &mut value, &mut size) == ffi::ARCHIVE_OK
        {
            let Some(name) = bytes_of(name) else { continue };
            let value = if value.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec()
            };
            xattrs.push((name, value));
        }
    }
    xattrs
}

/// Adds the POSIX ACLs of `e` to `member` as the attributes Linux keeps
/// them in (`system.posix_acl_access`, `system.posix_acl_default`), unless
/// the archive stored those attributes too; NFSv4 ACLs, which Linux file
/// systems do not keep, are noted and left out.
///
/// # Safety
/// `e` must be a valid entry.
unsafe fn acls_of(e: *mut archive_entry, member: &mut Member) {
    // SAFETY: the caller's promise; the text is copied and freed.
    let types = unsafe { ffi::archive_entry_acl_types(e) };
    if types & ffi::ARCHIVE_ENTRY_ACL_TYPE_NFS4 != 0 {
        member
            .notes
            .push("its NFSv4 ACL was left out (Linux keeps POSIX ACLs only)".into());
    }
    let kinds = [
        (
            ffi::ARCHIVE_ENTRY_ACL_TYPE_ACCESS,
            &b"system.posix_acl_access"[..],
            false,
        ),
        (
            ffi::ARCHIVE_ENTRY_ACL_TYPE_DEFAULT,
            b"system.posix_acl_default",
            true,
        ),
    ];
    for (kind, name, default) in kinds {
        if types & kind == 0 || member.xattrs.iter().any(|(n, _)| n == name) {
            continue;
        }
        // SAFETY: as above; the returned string is malloc'd by libarchive.
        let text = unsafe {
            let raw = ffi::archive_entry_acl_to_text(
                e,
                ptr::null_mut(),
                kind | ffi::ARCHIVE_ENTRY_ACL_STYLE_EXTRA_ID,
            );
            let text = bytes_of(raw);
            libc::free(raw.cast());
            text
        };
        let Some(text) = text else { continue };
        match acl::to_xattr(&text, default) {
            Ok(Some(value)) => member.xattrs.push((name.to_vec(), value)),
            Ok(None) => {}
            Err(why) => member.notes.push(format!(
                "its {} ACL was left out: {why}",
                if default { "default" } else { "access" }
            )),
        }
    }
}

/// A C string's bytes, `None` for a null pointer.
///
/// # Safety
/// `p` must be null or a NUL-terminated string.
unsafe fn bytes_of(p: *const c_char) -> Option<Vec<u8>> {
    // SAFETY: the caller's promise.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
}

/// A static C string as text.
///
/// # Safety
/// `p` must be null or a NUL-terminated string.
unsafe fn text_of(p: *const c_char) -> String {
    // SAFETY: the caller's promise.
    unsafe { bytes_of(p) }
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
