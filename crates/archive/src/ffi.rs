//! The part of libarchive's C interface (`archive.h`, `archive_entry.h`,
//! libarchive 3.6) that this crate calls, declared by hand: a few dozen
//! functions do not warrant a generated binding.
//!
//! The library is loaded when an archive is first opened, not linked: a
//! program that reads no archive (a mount of an image, above all) then
//! starts without loading libarchive and the dozen libraries it needs
//! (libxml2, ICU's 30 MB of data, libstdc++, …), which took about 50 ms
//! of a cold start. [`load`] must succeed before any function here is
//! called; every handle comes from `archive_read_new`,
//! `archive_write_new` or `archive_entry_new`, which the reader and the
//! writer call only after it.
#![allow(non_camel_case_types)]

use std::sync::OnceLock;

use libc::{c_char, c_int, c_long, c_uint, c_void, dev_t, mode_t, size_t, ssize_t, time_t};
use libloading::Library;

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

/// Declares libarchive's functions: a table of pointers looked up in the
/// loaded library, and for each function a wrapper of the same name and
/// signature that calls through the table.
macro_rules! libarchive_functions {
    ($(pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        /// libarchive's functions, looked up in the loaded library.
        struct Functions {
            $($name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        impl Functions {
            /// Looks up every function in `library` (loaded as `name`).
            fn find(library: &Library, name: &str) -> Result<Functions, String> {
                Ok(Functions {
                    $($name: {
                        let symbol = concat!(stringify!($name), "\0").as_bytes();
                        // SAFETY: the type is the function's C signature above.
                        let found = unsafe {
                            library.get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(symbol)
                        };
                        *found.map_err(|e| format!("{name} lacks {}: {e}", stringify!($name)))?
                    },)*
                })
            }
        }

        $(
            /// libarchive's function of this name.
            ///
            /// # Safety
            /// As in C; and [`load`] has succeeded.
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                (functions().$name)($($arg),*)
            }
        )*
    };
}

libarchive_functions! {
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

/// The names the library is looked up by: the soname every distribution
/// ships since libarchive 3.0, then the development link.
const LIBRARY_NAMES: [&str; 2] = ["libarchive.so.13", "libarchive.so"];

/// The loaded library and its functions, kept for the life of the process.
struct Loaded {
    functions: Functions,
    _library: Library,
}

static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();

/// Loads libarchive once; the error names the library and why it failed.
pub fn load() -> Result<(), String> {
    match LOADED.get_or_init(load_library) {
        Ok(_) => Ok(()),
        Err(e) => Err(e.clone()),
    }
}

fn load_library() -> Result<Loaded, String> {
    let mut failures = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: libarchive's initializers have no preconditions.
        match unsafe { Library::new(name) } {
            Ok(library) => {
                let functions = Functions::find(&library, name)?;
                return Ok(Loaded {
                    functions,
                    _library: library,
                });
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    Err(format!(
        "libarchive is not installed (Debian: libarchive13): {}",
        failures.join("; ")
    ))
}

fn functions() -> &'static Functions {
    match LOADED.get() {
        Some(Ok(loaded)) => &loaded.functions,
        _ => unreachable!("a libarchive function was called before ffi::load succeeded"),
    }
}
