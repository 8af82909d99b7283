//! The SHA-512/256 of image sections by the system's OpenSSL libcrypto,
//! plugged into `hoard-format` at start: about 1.5x the speed of the
//! built-in `sha2` on machines with AVX2, which matters when blocks
//! compress fast (`-l1`).
//!
//! libcrypto is loaded (`dlopen`) at the first hash, not linked: loading
//! it and libssl at start cost every command about 7 ms with a cold page
//! cache (a mount is mostly start-up), the binary runs where libcrypto is
//! missing (hashing with `sha2` then), and building needs no OpenSSL
//! headers. Only a few functions of OpenSSL's stable EVP interface
//! (1.1.1 and 3.x) are used.
//!
//! Everything libcrypto sets up lazily is set up once, on one thread,
//! before any digest: its initialisation (without an `atexit` cleanup,
//! which would free its tables under threads still hashing at exit), the
//! method fetched once (OpenSSL 3), and a first digest checked against
//! `sha2`'s. Threads then share only the immutable method.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

/// Makes libcrypto, when the system has it, hash the sections this
/// process writes and checks.
pub fn install() {
    hoard_format::section::use_sha512_256(sha512_256);
}

/// SHA-512/256 of `a` then `b`, or `None` without a usable libcrypto
/// (the caller then hashes with `sha2`).
fn sha512_256(a: &[u8], b: &[u8]) -> Option<[u8; 32]> {
    static LIBCRYPTO: OnceLock<Option<LibCrypto>> = OnceLock::new();
    LIBCRYPTO
        .get_or_init(LibCrypto::load)
        .as_ref()?
        .digest(a, b)
}

type MdCtxNew = unsafe extern "C" fn() -> *mut c_void;
type MdCtxFree = unsafe extern "C" fn(*mut c_void);
type DigestInitEx = unsafe extern "C" fn(*mut c_void, *const c_void, *mut c_void) -> c_int;
type DigestUpdate = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int;
type DigestFinalEx = unsafe extern "C" fn(*mut c_void, *mut u8, *mut c_uint) -> c_int;
type Sha512_256 = unsafe extern "C" fn() -> *const c_void;
type InitCrypto = unsafe extern "C" fn(u64, *const c_void) -> c_int;
type MdFetch = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char) -> *const c_void;

/// `OPENSSL_INIT_NO_ATEXIT` (OpenSSL 1.1.1b and later).
const INIT_NO_ATEXIT: u64 = 0x0008_0000;

/// The EVP functions hashing takes, from a loaded libcrypto.
struct LibCrypto {
    ctx_new: MdCtxNew,
    ctx_free: MdCtxFree,
    init: DigestInitEx,
    update: DigestUpdate,
    finish: DigestFinalEx,
    /// SHA-512/256's method: fetched once (OpenSSL 3), or the static
    /// table of `EVP_sha512_256()` (1.1.1); immutable and never freed.
    md: *const c_void,
    /// Keeps the functions above loaded.
    _library: Library,
}

// SAFETY: the EVP functions are thread-safe on distinct contexts (each
// digest makes its own), and `md` points at a constant table libcrypto
// never frees while loaded.
unsafe impl Send for LibCrypto {}
unsafe impl Sync for LibCrypto {}

impl LibCrypto {
    /// libcrypto 3 or 1.1 with every function hashing takes, initialised
    /// and checked, if present.
    fn load() -> Option<Self> {
        let library = ["libcrypto.so.3", "libcrypto.so.1.1"]
            .iter()
            // SAFETY: libcrypto's initialisers only set up its own state.
            .find_map(|name| unsafe { Library::new(name) }.ok())?;
        // SAFETY: the types are those of OpenSSL's declarations; the
        // name passed to `EVP_MD_fetch` is NUL-terminated.
        let loaded = unsafe {
            let init = *library.get::<InitCrypto>(b"OPENSSL_init_crypto\0").ok()?;
            if init(INIT_NO_ATEXIT, std::ptr::null()) != 1 {
                return None;
            }
            let md = match library.get::<MdFetch>(b"EVP_MD_fetch\0") {
                Ok(fetch) => fetch(
                    std::ptr::null_mut(),
                    c"SHA512-256".as_ptr(),
                    std::ptr::null(),
                ),
                Err(_) => (*library.get::<Sha512_256>(b"EVP_sha512_256\0").ok()?)(),
            };
            Self {
                ctx_new: *library.get(b"EVP_MD_CTX_new\0").ok()?,
                ctx_free: *library.get(b"EVP_MD_CTX_free\0").ok()?,
                init: *library.get(b"EVP_DigestInit_ex\0").ok()?,
                update: *library.get(b"EVP_DigestUpdate\0").ok()?,
                finish: *library.get(b"EVP_DigestFinal_ex\0").ok()?,
                md: (!md.is_null()).then_some(md)?,
                _library: library,
            }
        };
        let probe = b"hoard section hash";
        (loaded.digest(probe, b"")? == sha2_digest(probe)).then_some(loaded)
    }

    /// SHA-512/256 of `a` then `b`; `None` if libcrypto fails.
    fn digest(&self, a: &[u8], b: &[u8]) -> Option<[u8; 32]> {
        let mut out = [0u8; 64];
        let mut len: c_uint = 0;
        // SAFETY: `ctx` is made, used and freed here only; the buffers
        // outlive the calls, and `out` holds any digest (64 bytes at most).
        let ok = unsafe {
            let ctx = (self.ctx_new)();
            if ctx.is_null() {
                return None;
            }
            let ok = (self.init)(ctx, self.md, std::ptr::null_mut()) == 1
                && (self.update)(ctx, a.as_ptr().cast(), a.len()) == 1
                && (self.update)(ctx, b.as_ptr().cast(), b.len()) == 1
                && (self.finish)(ctx, out.as_mut_ptr(), &mut len) == 1;
            (self.ctx_free)(ctx);
            ok
        };
        (ok && len == 32).then(|| out[..32].try_into().expect("32 bytes"))
    }
}

/// SHA-512/256 of `data` by `sha2`, the reference a loaded libcrypto
/// must agree with.
fn sha2_digest(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha512_256::digest(data).into()
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    #[test]
    fn libcrypto_and_sha2_agree() {
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expected: [u8; 32] = sha2::Sha512_256::new()
            .chain_update(b"tail")
            .chain_update(&payload)
            .finalize()
            .into();
        match super::LibCrypto::load() {
            Some(_) => assert_eq!(super::sha512_256(b"tail", &payload), Some(expected)),
            // Without libcrypto the format's own `sha2` hashes.
            None => assert_eq!(super::sha512_256(b"tail", &payload), None),
        }
    }

    #[test]
    fn threads_hashing_at_once_agree() {
        let expected = super::sha2_digest(b"same bytes");
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..100 {
                        let got = super::sha512_256(b"same ", b"bytes");
                        assert!(got.is_none_or(|d| d == expected));
                    }
                });
            }
        });
    }
}
