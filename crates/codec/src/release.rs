//! Giving the pages of input a compressor has copied back to the kernel.
//!
//! lzma copies its input into a window of its own, so once a block has
//! been read in, the caller's copy is only memory: at level 9, with one
//! encoder per core, the blocks being read were about 70 MB of a build's
//! peak (see doc/writer-history.md, "Memory of the lzma levels").

use std::sync::{Arc, OnceLock};

/// Input is read in steps of this many bytes, each released once read.
pub(crate) const STEP: usize = 4 << 20;

/// The size of a memory page, as the kernel reports it.
fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(n).unwrap_or(4096).max(1)
    })
}

/// Releases the whole pages of `data[..to]` that hold bytes from `from`
/// on (an earlier call released those before, up to `from`) when `data`
/// is held by no one else: their memory goes back to the kernel and they
/// read as zeros from then on. Returns whether it did (false while
/// others may still read the block, who then keep it whole).
pub(crate) fn release(data: &mut Arc<Vec<u8>>, from: usize, to: usize) -> bool {
    let Some(bytes) = Arc::get_mut(data) else {
        return false;
    };
    let read = &mut bytes[..to];
    let page = page_size();
    let start = read.as_mut_ptr() as usize;
    // The page holding byte `from` also holds bytes before it, which an
    // earlier call could not release on their own.
    let first = start
        .next_multiple_of(page)
        .max((start + from) / page * page);
    let last = (start + read.len()) / page * page;
    if last > first {
        // SAFETY: the pages lie inside `read`, which we borrow mutably
        // (no other reference to the block exists); MADV_DONTNEED on
        // private anonymous memory only makes them read as zeros, as if
        // we had written zeros, and the allocator keeps nothing inside
        // an allocation's bytes while it is in use.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_DONTNEED,
            );
        }
    }
    true
}
