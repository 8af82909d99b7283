//! Writing an archive stream: [`ArchiveWriter`] takes members in order,
//! each with its contents, and hands libarchive's output to a
//! [`std::io::Write`] as it comes.

use crate::ffi::{self, archive, archive_entry};
use crate::{Error, Kind, Member, Result};
use hoard_format::mode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFREG, S_IFSOCK};
use libc::{c_void, size_t, ssize_t};
use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An archive format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// POSIX tar with pax records: long names, nanosecond times, large
    /// sizes and ids, sparse files, extended attributes.
    Pax,
    /// GNU tar: long names as GNU records, whole-second times, no
    /// extended attributes.
    Gnutar,
    /// cpio "new ASCII" (newc): whole-second times, files under 4 GiB.
    Cpio,
    /// zip: Unix modes and times; no owners, devices, fifos or sockets.
    Zip,
}

impl Format {
    /// Why this format cannot hold a member of `kind`, if it cannot.
    pub fn cannot_hold(self, kind: &Kind) -> Option<&'static str> {
        match (self, kind) {
            (Format::Pax | Format::Gnutar, Kind::Socket) => Some("tar has no sockets"),
            (
                Format::Zip,
                Kind::CharDevice(_) | Kind::BlockDevice(_) | Kind::Fifo | Kind::Socket,
            ) => Some("zip holds only directories, files and symlinks"),
            _ => None,
        }
    }
}

/// How a regular file shares its contents with other members.
#[derive(Debug, Clone, Copy)]
pub struct Links<'a> {
    /// A number for the file, the same for all its names.
    pub ino: u64,
    /// How many names it has in the archive.
    pub count: u32,
    /// The first of its names written, when this is not it.
    pub first: Option<&'a [u8]>,
    /// Whether this is the last of its names.
    pub last: bool,
}

/// Where libarchive's output goes.
struct Sink<'w> {
    out: &'w mut dyn Write,
    error: Option<std::io::Error>,
}

/// libarchive's write callback: all of `len` bytes to the sink.
unsafe extern "C" fn write_sink(
    _a: *mut archive,
    data: *mut c_void,
    buf: *const c_void,
    len: size_t,
) -> ssize_t {
    // SAFETY: `data` is the `Sink` boxed in `ArchiveWriter::sink`, alive as
    // long as the handle; `buf` holds `len` bytes.
    let (sink, bytes) = unsafe {
        (
            &mut *data.cast::<Sink<'_>>(),
            std::slice::from_raw_parts(buf.cast::<u8>(), len),
        )
    };
    match catch_unwind(AssertUnwindSafe(|| sink.out.write_all(bytes))) {
        Ok(Ok(())) => len as ssize_t,
        Ok(Err(e)) => {
            sink.error = Some(e);
            -1
        }
        Err(_) => {
            sink.error = Some(std::io::Error::other("the output panicked"));
            -1
        }
    }
}

/// An archive being written.
pub struct ArchiveWriter<'w> {
    raw: *mut archive,
    entry: *mut archive_entry,
    format: Format,
    sink: Box<Sink<'w>>,
    buf: Vec<u8>,
}

impl<'w> ArchiveWriter<'w> {
    /// A `format` archive written to `out`, with libarchive's format
    /// `options` (`key=value,…`, as bsdtar's `--options`).
    pub fn new(format: Format, options: Option<&str>, out: &'w mut dyn Write) -> Result<Self> {
        ffi::load().map_err(Error::Fatal)?;
        // SAFETY: constructor calls; null results are checked.
        let (raw, entry) = unsafe { (ffi::archive_write_new(), ffi::archive_entry_new()) };
        if raw.is_null() || entry.is_null() {
            // SAFETY: whichever was made is freed once.
            unsafe {
                if !raw.is_null() {
                    ffi::archive_write_free(raw);
                }
                if !entry.is_null() {
                    ffi::archive_entry_free(entry);
                }
            }
            return Err(Error::Fatal("out of memory".into()));
        }
        let mut writer = ArchiveWriter {
            raw,
            entry,
            format,
            sink: Box::new(Sink { out, error: None }),
            buf: vec![0; 1 << 20],
        };
        // SAFETY: `raw` is a fresh write handle.
        let rc = unsafe {
            match format {
                Format::Pax => ffi::archive_write_set_format_pax(raw),
                Format::Gnutar => ffi::archive_write_set_format_gnutar(raw),
                Format::Cpio => ffi::archive_write_set_format_cpio_newc(raw),
                Format::Zip => ffi::archive_write_set_format_zip(raw),
            }
        };
        writer.check(rc, "")?;
        if let Some(options) = options {
            let c = CString::new(options)
                .map_err(|_| Error::Fatal("format options hold a NUL byte".into()))?;
            // SAFETY: `raw` is valid and `c` a C string.
            let rc = unsafe { ffi::archive_write_set_options(raw, c.as_ptr()) };
            writer.check(rc, "format options")?;
        }
        let data: *mut Sink<'w> = &mut *writer.sink;
        // SAFETY: `raw` is valid; the sink outlives the handle (freed in
        // `drop` before the box). A stream gets no padding to a block.
        let rc = unsafe {
            ffi::archive_write_set_bytes_in_last_block(raw, 1);
            ffi::archive_write_open(raw, data.cast(), None, Some(write_sink), None)
        };
        writer.check(rc, "")?;
        Ok(writer)
    }

    /// An error for `rc` when it is one, with libarchive's or the
    /// output's message.
    fn check(&mut self, rc: libc::c_int, what: &str) -> Result<()> {
        if rc == ffi::ARCHIVE_OK || rc == ffi::ARCHIVE_WARN {
            return Ok(());
        }
        let message = if let Some(e) = self.sink.error.take() {
            format!("cannot write the archive: {e}")
        } else {
            // SAFETY: `raw` is valid; the text is copied at once.
            let text = unsafe { ffi::archive_error_string(self.raw) };
            if text.is_null() {
                "unknown error".into()
            } else {
                // SAFETY: a NUL-terminated string from libarchive.
                unsafe { CStr::from_ptr(text) }
                    .to_string_lossy()
                    .into_owned()
            }
        };
        Err(Error::Fatal(if what.is_empty() {
            message
        } else {
            format!("{what}: {message}")
        }))
    }

    /// Writes `member`; a regular file's `size` bytes come from
    /// `contents`, with the holes outside `data_ranges` (offset, length)
    /// when the file is sparse. `links` says how a regular file shares
    /// its contents with other members.
    pub fn add(
        &mut self,
        member: &Member,
        links: Option<Links<'_>>,
        contents: Option<&mut dyn Read>,
        data_ranges: Option<&[(u64, u64)]>,
    ) -> Result<()> {
        let what = String::from_utf8_lossy(&member.path).into_owned();
        let carries_data = self.set_entry(member, links, data_ranges)?;
        // SAFETY: `raw` is an open write handle and `entry` set above.
        let rc = unsafe { ffi::archive_write_header(self.raw, self.entry) };
        self.check(rc, &what)?;
        if carries_data && member.size > 0 {
            let contents = contents.ok_or_else(|| {
                Error::Fatal(format!("{what}: no contents given for a regular file"))
            })?;
            self.copy_data(member.size, contents, data_ranges)
                .map_err(|e| Error::Fatal(format!("{what}: {e}")))?;
        }
        // SAFETY: as above.
        let rc = unsafe { ffi::archive_write_finish_entry(self.raw) };
        self.check(rc, &what)
    }

    /// Fills the reused entry from `member`; returns whether it carries the
    /// file's contents.
    fn set_entry(
        &mut self,
        m: &Member,
        links: Option<Links<'_>>,
        data_ranges: Option<&[(u64, u64)]>,
    ) -> Result<bool> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                Error::Fatal(format!(
                    "{}: a name holds a NUL byte",
                    String::from_utf8_lossy(&m.path)
                ))
            })
        };
        let path = c(if m.path.is_empty() { b"." } else { &m.path })?;
        let e = self.entry;
        let (kind, rdev) = match &m.kind {
            Kind::File => (S_IFREG, 0),
            Kind::Dir => (S_IFDIR, 0),
            Kind::Symlink(_) => (S_IFLNK, 0),
            Kind::CharDevice(d) => (S_IFCHR, *d),
            Kind::BlockDevice(d) => (S_IFBLK, *d),
            Kind::Fifo => (S_IFIFO, 0),
            Kind::Socket => (S_IFSOCK, 0),
        };
        // cpio keeps a file's contents with its last name, tar with its
        // first; zip stores each name as a copy.
        let (hardlink, carries_data, nlink) = match (links, self.format) {
            (Some(l), Format::Cpio) => (None, l.last, l.count),
            (Some(_), Format::Zip) => (None, true, 1),
            (Some(l), _) => (l.first, l.first.is_none(), l.count),
            (None, _) => (None, m.kind == Kind::File, 1),
        };
        // SAFETY: `e` is this writer's entry; strings are copied by
        // libarchive.
        unsafe {
            ffi::archive_entry_clear(e);
            ffi::archive_entry_copy_pathname(e, path.as_ptr());
            ffi::archive_entry_set_filetype(e, kind);
            ffi::archive_entry_set_perm(e, m.perm & 0o7777);
            ffi::archive_entry_set_uid(e, m.uid);
            ffi::archive_entry_set_gid(e, m.gid);
            ffi::archive_entry_set_rdev(e, rdev);
            ffi::archive_entry_set_mtime(e, m.mtime.sec, m.mtime.nsec.into());
            ffi::archive_entry_set_atime(e, m.atime.sec, m.atime.nsec.into());
            ffi::archive_entry_set_ctime(e, m.ctime.sec, m.ctime.nsec.into());
            ffi::archive_entry_set_nlink(e, nlink);
            if let Some(l) = links {
                // Inode 0 is left unused.
                ffi::archive_entry_set_ino64(e, l.ino as i64 + 1);
            }
            if let Kind::Symlink(target) = &m.kind {
                ffi::archive_entry_copy_symlink(e, c(target)?.as_ptr());
            }
            if let Some(first) = hardlink {
                ffi::archive_entry_copy_hardlink(e, c(first)?.as_ptr());
            }
            let size = if carries_data { m.size } else { 0 };
            ffi::archive_entry_set_size(e, size as i64);
            if carries_data && self.format == Format::Pax {
                for &(offset, len) in data_ranges.unwrap_or_default() {
                    ffi::archive_entry_sparse_add_entry(e, offset as i64, len as i64);
                }
            }
            if self.format == Format::Pax {
                for (name, value) in &m.xattrs {
                    ffi::archive_entry_xattr_add_entry(
                        e,
                        c(name)?.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                    );
                }
            }
        }
        Ok(carries_data)
    }

    /// Writes `size` bytes of contents: the data ranges from `contents`
    /// (which reads only them, back to back when `data_ranges` is given)
    /// and zeros for the holes, which a sparse-aware format skips.
    fn copy_data(
        &mut self,
        size: u64,
        contents: &mut dyn Read,
        data_ranges: Option<&[(u64, u64)]>,
    ) -> std::result::Result<(), String> {
        let whole = [(0, size)];
        let ranges = data_ranges.unwrap_or(&whole);
        let mut pos = 0u64;
        for &(offset, len) in ranges.iter().chain([(size, 0)].iter()) {
            if offset < pos || offset > size {
                return Err("data ranges out of order".into());
            }
            self.write_zeros(offset - pos)?;
            let mut left = len;
            while left > 0 {
                let want = self
                    .buf
                    .len()
                    .min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = contents
                    .read(&mut self.buf[..want])
                    .map_err(|e| format!("cannot read the contents: {e}"))?;
                if n == 0 {
                    return Err("the contents end early".into());
                }
                self.write_buf(n)?;
                left -= n as u64;
            }
            pos = offset + len;
        }
        Ok(())
    }

    fn write_zeros(&mut self, mut len: u64) -> std::result::Result<(), String> {
        if len > 0 {
            self.buf.fill(0);
        }
        while len > 0 {
            let n = self
                .buf
                .len()
                .min(usize::try_from(len).unwrap_or(usize::MAX));
            self.write_buf(n)?;
            len -= n as u64;
        }
        Ok(())
    }

    /// Hands the first `n` bytes of the buffer to libarchive.
    fn write_buf(&mut self, n: usize) -> std::result::Result<(), String> {
        // SAFETY: `raw` is open with a header written; `buf` holds `n` bytes.
        let written = unsafe { ffi::archive_write_data(self.raw, self.buf.as_ptr().cast(), n) };
        if written < 0 {
            return Err(match self.check(ffi::ARCHIVE_FATAL, "") {
                Err(e) => e.to_string(),
                Ok(()) => "write failed".into(),
            });
        }
        Ok(())
    }

    /// Writes the end of the archive and flushes the output.
    pub fn finish(mut self) -> Result<()> {
        // SAFETY: `raw` is an open write handle.
        let rc = unsafe { ffi::archive_write_close(self.raw) };
        self.check(rc, "")?;
        self.sink
            .out
            .flush()
            .map_err(|e| Error::Fatal(format!("cannot write the archive: {e}")))
    }
}

impl Drop for ArchiveWriter<'_> {
    fn drop(&mut self) {
        // SAFETY: both were made in `new` and are freed once; the sink is
        // dropped after the handle.
        unsafe {
            ffi::archive_write_free(self.raw);
            ffi::archive_entry_free(self.entry);
        }
    }
}
