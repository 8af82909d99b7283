//! One cached block, decompressed front to back as far as readers need it.
//!
//! The output lives in one buffer of the block's full size, allocated
//! zeroed: when the allocator maps it fresh (as it does for large buffers,
//! and always in the FUSE driver), the pages past the decoded prefix cost
//! nothing until they are written. One thread at a time extends the
//! prefix, holding the decoder's lock; bytes once decoded never change, so
//! any number of threads read the prefix meanwhile without any lock.

use crate::error::{Error, Result};
use hoard_codec::{CodecError, PartialDecoder};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where the decoder of a block stands.
enum Decoding {
    /// More output to come.
    Active(Box<dyn PartialDecoder>),
    /// The block is complete; the decoder is gone.
    Done,
    /// Decoding failed; every later request gets this error.
    Failed(Error),
}

/// A block and as much of its output as has been decoded.
pub(crate) struct PartialBlock {
    /// The output buffer, `size` bytes, owned (see `Drop`).
    buf: NonNull<u8>,
    size: usize,
    /// Bytes of `buf` decoded; they never change again.
    filled: AtomicUsize,
    /// Whether the decoder finished, end checks included.
    complete: AtomicBool,
    /// The decoder's estimated memory (zero once complete).
    state: AtomicUsize,
    decoder: Mutex<Decoding>,
}

// SAFETY: the buffer is owned; bytes below `filled` are only read, bytes
// above it only written, by the one thread holding `decoder`'s lock.
unsafe impl Send for PartialBlock {}
// SAFETY: as above.
unsafe impl Sync for PartialBlock {}

impl std::fmt::Debug for PartialBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartialBlock")
            .field("size", &self.size)
            .field("filled", &self.filled())
            .field("complete", &self.is_complete())
            .finish()
    }
}

impl PartialBlock {
    /// A block about to be decoded by `decoder`.
    pub fn new(decoder: Box<dyn PartialDecoder>) -> Self {
        let size = decoder.size();
        let state = decoder.state_bytes();
        let buf: Box<[u8]> = vec![0u8; size].into_boxed_slice();
        let buf = NonNull::new(Box::into_raw(buf).cast::<u8>()).expect("a box is not null");
        PartialBlock {
            buf,
            size,
            filled: AtomicUsize::new(0),
            complete: AtomicBool::new(false),
            state: AtomicUsize::new(state),
            decoder: Mutex::new(Decoding::Active(decoder)),
        }
    }

    /// The block's full size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes decoded so far.
    pub fn filled(&self) -> usize {
        self.filled.load(Ordering::Acquire)
    }

    /// Whether the whole block is decoded and its decoder dropped.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// Memory to count for this block: its decoded bytes and its decoder.
    pub fn charge(&self) -> usize {
        self.filled() + self.state.load(Ordering::Relaxed)
    }

    /// The first `len` bytes, of which no more than are decoded.
    pub fn prefix(&self, len: usize) -> &[u8] {
        let len = len.min(self.filled());
        // SAFETY: the first `filled` bytes are initialised and never
        // written again while `self` lives.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), len) }
    }

    /// Whether the first `end` bytes (`end <= size`) can be read now; the
    /// last byte only counts once the decoder's end checks have passed.
    pub fn covers(&self, end: usize) -> bool {
        end <= self.filled() && (end < self.size || self.is_complete())
    }

    /// Decodes at least the first `end` bytes (`end <= size`): up to `end`
    /// rounded up to `step`, or the whole block when `end` is more than
    /// `decratio` of it or the decoder does not stream. Returns whether
    /// anything changed. Several callers decode one after another, each
    /// continuing where the last stopped.
    pub fn extend(
        &self,
        end: usize,
        decratio: f64,
        step: usize,
        describe: impl Fn(CodecError) -> Error,
    ) -> Result<bool> {
        let mut guard = self.decoder.lock().unwrap_or_else(|p| p.into_inner());
        if self.covers(end) {
            return Ok(false);
        }
        let decoder = match &mut *guard {
            Decoding::Active(d) => d,
            Decoding::Done => return Ok(false),
            Decoding::Failed(e) => return Err(e.clone()),
        };
        let from = self.filled.load(Ordering::Relaxed);
        let whole = !decoder.streams() || end as f64 > decratio * self.size as f64;
        let target = if whole {
            self.size
        } else {
            end.div_ceil(step).saturating_mul(step).min(self.size)
        }
        .max(from);
        // SAFETY: `from..target` lies in the buffer, past every byte any
        // reader may see, and this thread alone writes (it holds the lock).
        let out =
            unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(from), target - from) };
        if let Err(e) = decoder.decode(out) {
            let e = describe(e);
            *guard = Decoding::Failed(e.clone());
            self.state.store(0, Ordering::Relaxed);
            return Err(e);
        }
        self.state.store(decoder.state_bytes(), Ordering::Relaxed);
        self.filled.store(target, Ordering::Release);
        if target == self.size {
            *guard = Decoding::Done;
            self.state.store(0, Ordering::Relaxed);
            self.complete.store(true, Ordering::Release);
        }
        Ok(true)
    }
}

impl Drop for PartialBlock {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.buf.as_ptr(), self.size);
        // SAFETY: `buf` came from `Box::into_raw` of a slice of `size`
        // bytes in `new`, and is freed only here.
        drop(unsafe { Box::from_raw(slice) });
    }
}
