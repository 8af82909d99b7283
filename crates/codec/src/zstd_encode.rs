//! zstd encoding with the encoder's working memory in transparent huge
//! pages ([`huge_pages`]): at the levels hoard builds images with (19 to
//! 22) zstd's match finder walks a binary tree and a hash table of up to
//! 128 MiB each, and the same frame comes out in about 7% less time
//! (about 5% of a whole `-l7` build).

use crate::{failed, huge_pages, CodecError};
use std::ffi::{c_int, c_void, CStr};
use std::ptr::{self, NonNull};
use std::sync::Mutex;
use zstd::zstd_safe::zstd_sys as sys;

const ALGO: &str = "zstd";

/// zstd's allocation callback.
unsafe extern "C" fn allocate(_opaque: *mut c_void, size: usize) -> *mut c_void {
    huge_pages::allocate(size)
}

/// zstd's free callback, for what [`allocate`] returned.
unsafe extern "C" fn release(_opaque: *mut c_void, address: *mut c_void) {
    // SAFETY: zstd frees only what it allocated through `allocate`.
    unsafe { huge_pages::release(address) }
}

/// One zstd compression context whose memory [`allocate`] provides.
struct Context(NonNull<sys::ZSTD_CCtx>);

// SAFETY: a zstd context may be used from any thread, one at a time;
// `Pool` hands each to one caller at a time.
unsafe impl Send for Context {}

impl Context {
    fn new() -> Result<Self, CodecError> {
        let memory = sys::ZSTD_customMem {
            customAlloc: Some(allocate),
            customFree: Some(release),
            opaque: ptr::null_mut(),
        };
        // SAFETY: both callbacks are safe for any size and pointer zstd
        // passes; zstd keeps `memory` by value.
        let cctx = unsafe { sys::ZSTD_createCCtx_advanced(memory) };
        NonNull::new(cctx)
            .map(Context)
            .ok_or_else(|| failed(ALGO, "cannot allocate a compression context"))
    }

    fn set(&mut self, parameter: sys::ZSTD_cParameter, value: i64) -> Result<(), CodecError> {
        let value = c_int::try_from(value)
            .map_err(|_| failed(ALGO, format!("{parameter:?} {value} is out of range")))?;
        // SAFETY: a live context; zstd checks the parameter's range.
        check(unsafe { sys::ZSTD_CCtx_setParameter(self.0.as_ptr(), parameter, value) }).map(drop)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context is ours and used by no one after this.
        unsafe { sys::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

/// zstd's result code as a `Result`.
fn check(code: usize) -> Result<usize, CodecError> {
    // SAFETY: takes any code.
    if unsafe { sys::ZSTD_isError(code) } == 0 {
        return Ok(code);
    }
    // SAFETY: zstd's error names are static C strings.
    let name = unsafe { CStr::from_ptr(sys::ZSTD_getErrorName(code)) };
    Err(failed(ALGO, name.to_string_lossy()))
}

/// The lowest level whose match finder hashes 3-byte prefixes (its
/// minimum match length on inputs above 256 KiB).
const FIRST_MIN_MATCH_3_LEVEL: i32 = 18;
/// Bits per byte above which a block's bytes are spread nearly evenly:
/// compressed or encrypted data (deflate streams measure 7.99, machine
/// code 5.3-6.1, text less).
const SPREAD_ENTROPY: f64 = 7.5;
/// The hash table size, as a power of two, for such a block: room for
/// every 3-byte prefix.
const SPREAD_HASH_LOG: i64 = 25;
/// The binary tree's size, as a power of two, for such a block: it
/// reaches 4 MiB back.
const SPREAD_CHAIN_LOG: i64 = 23;
/// The shortest match looked for in such a block.
const SPREAD_MIN_MATCH: i64 = 4;

/// The parameters to compress `data` with at `level` where it is spread
/// nearly evenly (compressed data: deflate streams in zip archives, media),
/// in place of the level's own; none elsewhere.
///
/// zstd's binary-tree match finder keeps one tree per hash slot. In
/// bytes spread nearly evenly nearly all 16.7 million 3-byte prefixes
/// occur, and in the 2^22 to 2^23 slots of levels 18 to 21 the trees of
/// two or more prefixes share a slot and grow deeper: with a slot for
/// each prefix the 3 near-incompressible 16 MiB blocks of the quick
/// `rootfs` corpus compress in about a quarter less time, to frames
/// within a byte of the same size. The matches the optimal parser finds
/// in such data are short and near: a tree reaching 4 MiB back (the
/// level's reaches the whole 16 MiB block) that skips 3-byte matches
/// takes another quarter off for 0.12-0.18% more bytes on those blocks
/// (see doc/writer-history.md, "zstd in huge pages"). The smaller tree
/// also takes 192 MiB less memory.
pub(crate) fn spread_parameters(data: &[u8], level: i32) -> &'static [(sys::ZSTD_cParameter, i64)] {
    if level < FIRST_MIN_MATCH_3_LEVEL || byte_entropy(data) < SPREAD_ENTROPY {
        return &[];
    }
    &[
        (sys::ZSTD_cParameter::ZSTD_c_hashLog, SPREAD_HASH_LOG),
        (sys::ZSTD_cParameter::ZSTD_c_chainLog, SPREAD_CHAIN_LOG),
        (sys::ZSTD_cParameter::ZSTD_c_minMatch, SPREAD_MIN_MATCH),
    ]
}

/// Samples of a block compressed at [`REDUNDANT_TRIAL_LEVEL`] by
/// [`is_redundant`]: this many, spread over the block.
const REDUNDANT_SAMPLES: usize = 4;
/// The bytes of each such sample.
const REDUNDANT_SAMPLE: usize = 1 << 20;
/// The zstd level of that trial: about 5 ms a sample.
const REDUNDANT_TRIAL_LEVEL: i32 = 3;
/// The compressed share, in thousandths, under which a block counts as
/// redundant: the blocks of 40 releases of a tree, laid out by the
/// `similarity` order, measure 85-182 (the compiled catalogues' 347);
/// those of a root file system 159 and more.
const REDUNDANT_PER_MILLE: usize = 150;

/// Whether `data` is redundant, as the many versions of a file side by
/// side are: its samples (4 of 1 MiB, evenly placed) compressed at zstd
/// level 3 come to less than 15% of their size. Blocks under 4 MiB are
/// not. The compressors of the high levels spend more time on such a
/// block, where it pays most.
pub(crate) fn is_redundant(data: &[u8]) -> Result<bool, CodecError> {
    if data.len() < REDUNDANT_SAMPLES * REDUNDANT_SAMPLE {
        return Ok(false);
    }
    let mut compressed = 0;
    for k in 0..REDUNDANT_SAMPLES {
        let start = k * data.len() / REDUNDANT_SAMPLES;
        let sample = &data[start..start + REDUNDANT_SAMPLE];
        compressed += zstd::bulk::compress(sample, REDUNDANT_TRIAL_LEVEL)
            .map_err(|e| failed(ALGO, e))?
            .len();
    }
    Ok(compressed * 1000 < REDUNDANT_SAMPLES * REDUNDANT_SAMPLE * REDUNDANT_PER_MILLE)
}

/// The entropy of `data`'s byte histogram, in bits per byte (0 to 8).
fn byte_entropy(data: &[u8]) -> f64 {
    let mut counts = [0u64; 256];
    for &byte in data {
        counts[usize::from(byte)] += 1;
    }
    let total = data.len() as f64;
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum()
}

/// zstd compression contexts that no compression is using, kept for the
/// next one while any [`Encoder`] exists: a context's tables (hundreds
/// of MiB at the high levels) are then mapped and faulted in once per
/// concurrent compression, not once per block, and the compressors of
/// several streams (categories, metadata) share them instead of each
/// keeping its own.
struct Pool {
    idle: Vec<Context>,
    encoders: usize,
}

impl Pool {
    const fn new() -> Self {
        Pool {
            idle: Vec::new(),
            encoders: 0,
        }
    }

    /// An idle context, or a new one.
    fn take(this: &Mutex<Pool>) -> Result<Context, CodecError> {
        let idle = lock(this).idle.pop();
        match idle {
            Some(context) => Ok(context),
            None => Context::new(),
        }
    }

    /// Keeps `context` for later, or frees it when no encoder is left.
    fn put(this: &Mutex<Pool>, context: Context) {
        let mut pool = lock(this);
        if pool.encoders > 0 {
            pool.idle.push(context);
        } else {
            drop(pool);
            drop(context);
        }
    }

    fn register(this: &Mutex<Pool>) {
        lock(this).encoders += 1;
    }

    /// Counts one encoder less; with the last, frees the idle contexts.
    fn unregister(this: &Mutex<Pool>) {
        let freed = {
            let mut pool = lock(this);
            pool.encoders -= 1;
            if pool.encoders == 0 {
                std::mem::take(&mut pool.idle)
            } else {
                Vec::new()
            }
        };
        drop(freed);
    }
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(|e| e.into_inner())
}

/// The contexts every [`Encoder`] shares.
static POOL: Mutex<Pool> = Mutex::new(Pool::new());

/// A zstd compressor's hold on the shared contexts.
pub(crate) struct Encoder(());

impl Default for Encoder {
    fn default() -> Self {
        Pool::register(&POOL);
        Encoder(())
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        Pool::unregister(&POOL);
    }
}

/// Samples of a spread block compressed on trial by
/// [`Encoder::finds_nothing`]: this many, spread over the block.
const TRIAL_SAMPLES: usize = 4;
/// The bytes of each trial sample.
const TRIAL_SAMPLE: usize = 256 << 10;
/// The smallest block given a trial: four times the samples' bytes.
const TRIAL_MIN_BLOCK: usize = 4 * TRIAL_SAMPLES * TRIAL_SAMPLE;

impl Encoder {
    /// Compresses `data` into one zstd frame that records its content
    /// size, with the compression level and then each of `parameters`
    /// set. The frame is the same as a new context would make.
    pub(crate) fn compress(
        &self,
        data: &[u8],
        level: i32,
        parameters: &[(sys::ZSTD_cParameter, i64)],
    ) -> Result<Vec<u8>, CodecError> {
        let mut context = Pool::take(&POOL)?;
        let frame = compress(&mut context, data, level, parameters);
        Pool::put(&POOL, context);
        frame
    }

    /// Whether compressing the spread block `data` at `level` with
    /// `parameters` would find nothing: its samples (4 of 256 KiB,
    /// evenly placed) compressed on their own shrink by less than 0.1%.
    /// Random bytes do not shrink at all (a 16 MiB block takes about 2 s
    /// at level 20 to find that out); deflate streams in the quick
    /// `rootfs` corpus's zip archives shrink by 0.4-9% in the samples.
    /// Blocks under 4 MiB get no trial.
    pub(crate) fn finds_nothing(
        &self,
        data: &[u8],
        level: i32,
        parameters: &[(sys::ZSTD_cParameter, i64)],
    ) -> Result<bool, CodecError> {
        if data.len() < TRIAL_MIN_BLOCK {
            return Ok(false);
        }
        let mut compressed = 0;
        for k in 0..TRIAL_SAMPLES {
            let start = k * data.len() / TRIAL_SAMPLES;
            let sample = &data[start..start + TRIAL_SAMPLE];
            compressed += self.compress(sample, level, parameters)?.len();
        }
        let sampled = TRIAL_SAMPLES * TRIAL_SAMPLE;
        Ok(compressed * 1000 >= sampled * 999)
    }
}

fn compress(
    context: &mut Context,
    data: &[u8],
    level: i32,
    parameters: &[(sys::ZSTD_cParameter, i64)],
) -> Result<Vec<u8>, CodecError> {
    // SAFETY: a live context, between frames.
    check(unsafe {
        sys::ZSTD_CCtx_reset(
            context.0.as_ptr(),
            sys::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters,
        )
    })?;
    context.set(
        sys::ZSTD_cParameter::ZSTD_c_compressionLevel,
        i64::from(level),
    )?;
    for &(parameter, value) in parameters {
        context.set(parameter, value)?;
    }
    // SAFETY: takes any size.
    let bound = unsafe { sys::ZSTD_compressBound(data.len()) };
    let mut out = Vec::<u8>::with_capacity(check(bound)?);
    // SAFETY: `out` has room for `bound` bytes, the most zstd writes; a
    // one-shot call writes the frame's content size into its header.
    let written = check(unsafe {
        sys::ZSTD_compress2(
            context.0.as_ptr(),
            out.as_mut_ptr().cast(),
            out.capacity(),
            data.as_ptr().cast(),
            data.len(),
        )
    })?;
    // SAFETY: zstd initialized the first `written` bytes.
    unsafe { out.set_len(written) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample_data;

    /// Bytes spread evenly, as compressed data is.
    fn spread_data(len: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    fn decode(frame: &[u8], len: usize) -> Vec<u8> {
        crate::decompress(hoard_format::section::Compression::ZSTD, frame, len).unwrap()
    }

    #[test]
    fn a_reused_context_makes_the_frames_a_new_one_makes() {
        // Large enough for tables in huge-page mappings, then small ones
        // (malloc) and large again, in one encoder and in new ones.
        let blocks = [
            sample_data(3 << 20),
            sample_data(70_000),
            spread_data(1 << 20),
            sample_data(5 << 20),
        ];
        let mut kept = Context::new().unwrap();
        for (level, parameters) in [
            (19, vec![]),
            (3, vec![]),
            (20, vec![(sys::ZSTD_cParameter::ZSTD_c_hashLog, 25)]),
        ] {
            for block in &blocks {
                let again = compress(&mut kept, block, level, &parameters).unwrap();
                let mut fresh = Context::new().unwrap();
                let new = compress(&mut fresh, block, level, &parameters).unwrap();
                assert_eq!(again, new, "level {level}, {} bytes", block.len());
                assert_eq!(decode(&again, block.len()), *block);
            }
        }
    }

    #[test]
    fn random_bytes_are_found_to_hold_nothing_and_text_is_not() {
        let encoder = Encoder::default();
        let spread = spread_data(TRIAL_MIN_BLOCK);
        let params = spread_parameters(&spread, 20);
        assert!(encoder.finds_nothing(&spread, 20, params).unwrap());
        // Too small for a trial.
        let small = &spread[..TRIAL_MIN_BLOCK - 1];
        assert!(!encoder.finds_nothing(small, 20, params).unwrap());
        // Spread bytes with repeats a little way back.
        let mut repeats = spread.clone();
        for chunk in (0..repeats.len() - 4096).step_by(64 << 10) {
            repeats.copy_within(chunk..chunk + 2048, chunk + 2048);
        }
        assert!(!encoder.finds_nothing(&repeats, 20, params).unwrap());
        let text = sample_data(TRIAL_MIN_BLOCK);
        assert!(!encoder.finds_nothing(&text, 20, &[]).unwrap());
    }

    #[test]
    fn encoders_in_parallel_each_get_a_context() {
        let encoder = Encoder::default();
        let block = sample_data(1 << 20);
        let expected = Encoder::default().compress(&block, 9, &[]).unwrap();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..3 {
                        assert_eq!(encoder.compress(&block, 9, &[]).unwrap(), expected);
                    }
                });
            }
        });
    }

    #[test]
    fn a_pool_keeps_contexts_while_it_has_encoders() {
        let pool = Mutex::new(Pool::new());
        Pool::register(&pool);
        Pool::register(&pool);
        let first = Pool::take(&pool).unwrap();
        let second = Pool::take(&pool).unwrap();
        let kept = first.0;
        Pool::put(&pool, first);
        Pool::put(&pool, second);
        assert_eq!(lock(&pool).idle.len(), 2);
        let again = Pool::take(&pool).unwrap();
        assert!(again.0 == kept || lock(&pool).idle[0].0 == kept);
        Pool::put(&pool, again);
        Pool::unregister(&pool);
        assert_eq!(lock(&pool).idle.len(), 2, "one encoder is left");
        Pool::unregister(&pool);
        assert!(lock(&pool).idle.is_empty(), "the last encoder frees them");
        // A compression that ends after the last encoder frees its context.
        Pool::register(&pool);
        let late = Pool::take(&pool).unwrap();
        Pool::unregister(&pool);
        Pool::put(&pool, late);
        assert!(lock(&pool).idle.is_empty());
    }

    #[test]
    fn spread_bytes_get_their_own_match_finder_at_the_high_levels() {
        let spread = spread_data(1 << 20);
        assert!(byte_entropy(&spread) > 7.99);
        let hash_log = |p: &[(sys::ZSTD_cParameter, i64)]| {
            p.iter()
                .find(|(k, _)| *k == sys::ZSTD_cParameter::ZSTD_c_hashLog)
                .map(|&(_, v)| v)
        };
        assert_eq!(
            hash_log(spread_parameters(&spread, 20)),
            Some(SPREAD_HASH_LOG)
        );
        assert_eq!(
            hash_log(spread_parameters(&spread, 22)),
            Some(SPREAD_HASH_LOG)
        );
        assert_eq!(spread_parameters(&spread, 20).len(), 3);
        assert!(spread_parameters(&spread, 17).is_empty());
        let text = sample_data(1 << 20);
        assert!(byte_entropy(&text) < SPREAD_ENTROPY);
        assert!(spread_parameters(&text, 20).is_empty());
        assert_eq!(byte_entropy(&[7; 100]), 0.0);
        assert_eq!(byte_entropy(&[]), 0.0);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let e = Encoder::default()
            .compress(b"x", 3, &[(sys::ZSTD_cParameter::ZSTD_c_hashLog, 99)])
            .unwrap_err();
        assert!(e.to_string().contains("zstd"), "{e}");
        let e = Encoder::default()
            .compress(b"x", 3, &[(sys::ZSTD_cParameter::ZSTD_c_minMatch, 1 << 40)])
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
