//! Memory for zstd's match finder, in transparent huge pages.
//!
//! zstd's binary-tree match finder walks tables of tens to hundreds of
//! MiB one random step after another. In 4 KiB pages nearly
//! every step also misses the TLB; in 2 MiB pages most do not. The memory
//! is the same, only its pages are larger: zstd at level 20 on 16 MiB
//! blocks takes about 7% less time (see doc/writer-history.md, "zstd in
//! huge pages"). Where the kernel gives no huge pages, a mapping works
//! as an ordinary one. (7-Zip's lzma encoder in huge pages took 4% less
//! user time at `-l9` but as much more system time faulting them in, on
//! the machines measured, so it keeps `malloc`.)

use std::ffi::c_void;
use std::ptr;

/// The size of a huge page on x86-64 and most 64-bit ARM kernels.
const HUGE_PAGE: usize = 2 << 20;
/// Bytes in front of every allocation that say how it was made: the
/// mapping's start and length, or a zero length for `malloc`. 64 keeps
/// zstd's data on the cache-line alignment it aligns its tables to.
const HEADER: usize = 64;

/// Allocates `size` bytes, aligned to 16, or returns null. Blocks of at
/// least a huge page are mapped on their own, starting at a huge-page
/// boundary, and marked for huge pages; smaller ones come from `malloc`.
/// Free them with [`release`].
pub(crate) fn allocate(size: usize) -> *mut c_void {
    let Some(total) = size.checked_add(HEADER) else {
        return ptr::null_mut();
    };
    if total < HUGE_PAGE {
        // SAFETY: malloc takes any size; the header fits in `total`.
        unsafe {
            let base = libc::malloc(total);
            if base.is_null() {
                return base;
            }
            base.cast::<[usize; 2]>().write([0, 0]);
            return base.cast::<u8>().add(HEADER).cast();
        }
    }
    let Some(length) = total.checked_add(HUGE_PAGE) else {
        return ptr::null_mut();
    };
    // SAFETY: a new private anonymous mapping, aligned up inside itself
    // (the extra huge page leaves room); only its first `total` bytes
    // from `start` on are used, and its untouched rest costs no memory.
    unsafe {
        let map = libc::mmap(
            ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if map == libc::MAP_FAILED {
            return ptr::null_mut();
        }
        let start = (map as usize).next_multiple_of(HUGE_PAGE) as *mut u8;
        // Advice only: without huge pages the mapping works as it is.
        libc::madvise(start.cast(), total, libc::MADV_HUGEPAGE);
        start.cast::<[usize; 2]>().write([map as usize, length]);
        start.add(HEADER).cast()
    }
}

/// Frees what [`allocate`] returned (null is ignored).
///
/// # Safety
/// `address` is null or came from [`allocate`] and is not used after.
pub(crate) unsafe fn release(address: *mut c_void) {
    if address.is_null() {
        return;
    }
    // SAFETY: `address` came from `allocate`, which wrote the header in
    // front of it.
    unsafe {
        let base = address.cast::<u8>().sub(HEADER);
        match base.cast::<[usize; 2]>().read() {
            [_, 0] => libc::free(base.cast()),
            [map, length] => {
                libc::munmap(map as *mut c_void, length);
            }
        }
    }
}
