//! The part of libarchive's C interface (`archive.h`, `archive_entry.h`,
//! libarchive 3.6) that this crate calls, declared by hand: a few dozen
//! functions do not warrant a generated binding.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_long, c_uint, c_void, dev_t, mode_t, size_t, ssize_t, time_t};

/// An open archive handle (`struct archive`).
#[repr(C)]
pub struct archive {
    _opaque: [u8; 0],
}

/// One entry's header (`struct archive_entry`).
#[repr(C)]
pub struct archive_entry {
    _opaque: [u8; 0],
}

pub const ARCHIVE_EOF: c_int = 1;
pub const ARCHIVE_OK: c_int = 0;
pub const ARCHIVE_WARN: c_int = -20;
pub const ARCHIVE_FAILED: c_int = -25;
pub const ARCHIVE_FATAL: c_int = -30;

/// `archive_format()` of an input with no entries at all.
pub const ARCHIVE_FORMAT_EMPTY: c_int = 0x60000;

pub const ARCHIVE_ENTRY_ACL_TYPE_ACCESS: c_int = 0x100;
pub const ARCHIVE_ENTRY_ACL_TYPE_DEFAULT: c_int = 0x200;
pub const ARCHIVE_ENTRY_ACL_TYPE_NFS4: c_int = 0x3c00;
/// ACL text with each named entry's numeric id as a fourth field.
pub const ARCHIVE_ENTRY_ACL_STYLE_EXTRA_ID: c_int = 0x1;

pub type archive_read_callback =
    unsafe extern "C" fn(*mut archive, *mut c_void, *mut *const c_void) -> ssize_t;
pub type archive_write_callback =
    unsafe extern "C" fn(*mut archive, *mut c_void, *const c_void, size_t) -> ssize_t;
pub type archive_open_callback = unsafe extern "C" fn(*mut archive, *mut c_void) -> c_int;
pub type archive_close_callback = unsafe extern "C" fn(*mut archive, *mut c_void) -> c_int;

#[link(name = "archive")]
extern "C" {
    pub fn archive_error_string(a: *mut archive) -> *const c_char;
    pub fn archive_format(a: *mut archive) -> c_int;
    pub fn archive_format_name(a: *mut archive) -> *const c_char;
    pub fn archive_filter_count(a: *mut archive) -> c_int;
    pub fn archive_filter_name(a: *mut archive, n: c_int) -> *const c_char;

    pub fn archive_read_new() -> *mut archive;
    pub fn archive_read_support_filter_all(a: *mut archive) -> c_int;
    pub fn archive_read_support_format_all(a: *mut archive) -> c_int;
    pub fn archive_read_open(
        a: *mut archive,
        client_data: *mut c_void,
        open: Option<archive_open_callback>,
        read: Option<archive_read_callback>,
        close: Option<archive_close_callback>,
    ) -> c_int;
    pub fn archive_read_open_filename(
        a: *mut archive,
        filename: *const c_char,
        block_size: size_t,
    ) -> c_int;
    pub fn archive_read_next_header(a: *mut archive, entry: *mut *mut archive_entry) -> c_int;
    pub fn archive_read_data_block(
        a: *mut archive,
        buff: *mut *const c_void,
        size: *mut size_t,
        offset: *mut i64,
    ) -> c_int;
    pub fn archive_read_free(a: *mut archive) -> c_int;

    pub fn archive_write_new() -> *mut archive;
    pub fn archive_write_set_format_pax(a: *mut archive) -> c_int;
    pub fn archive_write_set_format_gnutar(a: *mut archive) -> c_int;
    pub fn archive_write_set_format_cpio_newc(a: *mut archive) -> c_int;
    pub fn archive_write_set_format_zip(a: *mut archive) -> c_int;
    pub fn archive_write_set_options(a: *mut archive, options: *const c_char) -> c_int;
    pub fn archive_write_set_bytes_in_last_block(a: *mut archive, bytes: c_int) -> c_int;
    pub fn archive_write_open(
        a: *mut archive,
        client_data: *mut c_void,
        open: Option<archive_open_callback>,
        write: Option<archive_write_callback>,
        close: Option<archive_close_callback>,
    ) -> c_int;
    pub fn archive_write_header(a: *mut archive, entry: *mut archive_entry) -> c_int;
    pub fn archive_write_data(a: *mut archive, buff: *const c_void, size: size_t) -> ssize_t;
    pub fn archive_write_finish_entry(a: *mut archive) -> c_int;
    pub fn archive_write_close(a: *mut archive) -> c_int;
    pub fn archive_write_free(a: *mut archive) -> c_int;

    pub fn archive_entry_new() -> *mut archive_entry;
    pub fn archive_entry_clear(e: *mut archive_entry) -> *mut archive_entry;
    pub fn archive_entry_free(e: *mut archive_entry);
    pub fn archive_entry_pathname(e: *mut archive_entry) -> *const c_char;
    pub fn archive_entry_symlink(e: *mut archive_entry) -> *const c_char;
    pub fn archive_entry_hardlink(e: *mut archive_entry) -> *const c_char;
    pub fn archive_entry_filetype(e: *mut archive_entry) -> mode_t;
    pub fn archive_entry_perm(e: *mut archive_entry) -> mode_t;
    pub fn archive_entry_uid(e: *mut archive_entry) -> i64;
    pub fn archive_entry_gid(e: *mut archive_entry) -> i64;
    pub fn archive_entry_size(e: *mut archive_entry) -> i64;
    pub fn archive_entry_rdev(e: *mut archive_entry) -> dev_t;
    pub fn archive_entry_mtime(e: *mut archive_entry) -> time_t;
    pub fn archive_entry_mtime_nsec(e: *mut archive_entry) -> c_long;
    pub fn archive_entry_atime(e: *mut archive_entry) -> time_t;
    pub fn archive_entry_atime_nsec(e: *mut archive_entry) -> c_long;
    pub fn archive_entry_atime_is_set(e: *mut archive_entry) -> c_int;
    pub fn archive_entry_ctime(e: *mut archive_entry) -> time_t;
    pub fn archive_entry_ctime_nsec(e: *mut archive_entry) -> c_long;
    pub fn archive_entry_ctime_is_set(e: *mut archive_entry) -> c_int;
    pub fn archive_entry_is_encrypted(e: *mut archive_entry) -> c_int;
    pub fn archive_entry_xattr_reset(e: *mut archive_entry) -> c_int;
    pub fn archive_entry_xattr_next(
        e: *mut archive_entry,
        name: *mut *const c_char,
        value: *mut *const c_void,
        size: *mut size_t,
    ) -> c_int;
    pub fn archive_entry_acl_types(e: *mut archive_entry) -> c_int;
    pub fn archive_entry_acl_to_text(
        e: *mut archive_entry,
        len: *mut ssize_t,
        flags: c_int,
    ) -> *mut c_char;

    pub fn archive_entry_copy_pathname(e: *mut archive_entry, name: *const c_char);
    pub fn archive_entry_copy_symlink(e: *mut archive_entry, target: *const c_char);
    pub fn archive_entry_copy_hardlink(e: *mut archive_entry, target: *const c_char);
    pub fn archive_entry_set_filetype(e: *mut archive_entry, kind: c_uint);
    pub fn archive_entry_set_perm(e: *mut archive_entry, perm: mode_t);
    pub fn archive_entry_set_uid(e: *mut archive_entry, uid: i64);
    pub fn archive_entry_set_gid(e: *mut archive_entry, gid: i64);
    pub fn archive_entry_set_size(e: *mut archive_entry, size: i64);
    pub fn archive_entry_set_rdev(e: *mut archive_entry, rdev: dev_t);
    pub fn archive_entry_set_ino64(e: *mut archive_entry, ino: i64);
    pub fn archive_entry_set_nlink(e: *mut archive_entry, nlink: c_uint);
    pub fn archive_entry_set_mtime(e: *mut archive_entry, sec: time_t, nsec: c_long);
    pub fn archive_entry_set_atime(e: *mut archive_entry, sec: time_t, nsec: c_long);
    pub fn archive_entry_set_ctime(e: *mut archive_entry, sec: time_t, nsec: c_long);
    pub fn archive_entry_xattr_add_entry(
        e: *mut archive_entry,
        name: *const c_char,
        value: *const c_void,
        size: size_t,
    );
    pub fn archive_entry_sparse_add_entry(e: *mut archive_entry, offset: i64, length: i64);
}
