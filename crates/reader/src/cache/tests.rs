//! The cache's bound, sharing, tidying and partial decoding.

use super::*;
use hoard_format::section::Compression;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts the bytes decoded through it.
struct Counting {
    inner: Box<dyn PartialDecoder>,
    decoded: Arc<AtomicUsize>,
}

impl PartialDecoder for Counting {
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn produced(&self) -> usize {
        self.inner.produced()
    }
    fn streams(&self) -> bool {
        self.inner.streams()
    }
    fn decode(&mut self, out: &mut [u8]) -> std::result::Result<(), CodecError> {
        self.decoded.fetch_add(out.len(), Ordering::SeqCst);
        self.inner.decode(out)
    }
    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }
}

fn stored(data: Vec<u8>) -> Result<Box<dyn PartialDecoder>> {
    let len = data.len();
    Ok(hoard_codec::partial_decoder(Compression::NONE, &data, len).unwrap())
}

fn describe(e: CodecError) -> Error {
    Error::Corrupt(e.to_string())
}

/// Text-like data that zstd shrinks but does not trivialise.
fn sample(len: usize) -> Vec<u8> {
    let phrase = b"pack my box with five dozen liquor jugs ";
    hoard_testdata::text_like(len, 0x2545_f491, phrase, (600, 1000), 16)
}

fn zstd(data: &[u8]) -> Vec<u8> {
    hoard_codec::compressor_from_spec("zstd:level=3")
        .unwrap()
        .compress(data, None)
        .unwrap()
}

/// A zstd decoder for `payload`, counting its decoded bytes in `decoded`.
fn counting_zstd(payload: &[u8], decoded: &Arc<AtomicUsize>) -> Result<Box<dyn PartialDecoder>> {
    Ok(Box::new(Counting {
        inner: hoard_codec::partial_decoder(Compression::ZSTD, payload, 1 << 30).unwrap(),
        decoded: decoded.clone(),
    }))
}

/// A zstd block of a little over 4 MiB, and the bytes decoded from it.
struct Big {
    data: Vec<u8>,
    payload: Vec<u8>,
    decoded: Arc<AtomicUsize>,
}

impl Big {
    fn new() -> Self {
        let data = sample((4 << 20) + 1000);
        let payload = zstd(&data);
        let decoded = Arc::new(AtomicUsize::new(0));
        Big {
            data,
            payload,
            decoded,
        }
    }

    /// A decoder for the block, counting what it decodes.
    fn open(&self) -> Result<Box<dyn PartialDecoder>> {
        counting_zstd(&self.payload, &self.decoded)
    }

    /// The bytes decoded so far.
    fn decoded(&self) -> usize {
        self.decoded.load(Ordering::SeqCst)
    }
}

#[test]
fn evicts_least_recently_used_beyond_capacity() {
    let cache = BlockCache::new(250, DEFAULT_DECRATIO);
    for n in 0..3 {
        cache
            .get(n, usize::MAX, || stored(vec![n as u8; 100]), describe)
            .unwrap();
    }
    assert_eq!(cache.bytes(), 200);
    let loads = AtomicUsize::new(0);
    let load = || {
        loads.fetch_add(1, Ordering::SeqCst);
        stored(vec![0; 100])
    };
    cache.get(2, usize::MAX, load, describe).unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 0, "block 2 stays cached");
    cache.get(0, usize::MAX, load, describe).unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 1, "block 0 was evicted");
}

#[test]
fn concurrent_readers_share_one_load() {
    let cache = Arc::new(BlockCache::new(1 << 20, DEFAULT_DECRATIO));
    let loads = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cache, loads) = (cache.clone(), loads.clone());
            std::thread::spawn(move || {
                let open = || {
                    loads.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(50));
                    stored(vec![7; 1000])
                };
                cache.get(7, usize::MAX, open, describe).unwrap()[999]
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 7);
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
}

#[test]
fn tidying_drops_blocks_unused_for_a_while() {
    let cache = BlockCache::new(1 << 20, DEFAULT_DECRATIO);
    cache
        .get(1, usize::MAX, || stored(vec![1; 100]), describe)
        .unwrap();
    std::thread::sleep(Duration::from_millis(60));
    cache
        .get(2, usize::MAX, || stored(vec![2; 100]), describe)
        .unwrap();
    assert_eq!(cache.evict_unused(Duration::from_millis(30)), 1);
    assert_eq!(cache.bytes(), 100);
    // Resident blocks are not "swapped".
    assert_eq!(cache.evict_swapped(), 0);
    assert_eq!(cache.evict_unused(Duration::ZERO), 1);
    assert_eq!(cache.bytes(), 0);
}

#[test]
fn errors_are_returned_and_not_kept() {
    let cache = BlockCache::new(1000, DEFAULT_DECRATIO);
    let bad = || Err(Error::Corrupt("bad".into()));
    assert!(cache.get(1, usize::MAX, bad, describe).is_err());
    assert!(cache
        .get(1, usize::MAX, || stored(vec![1]), describe)
        .is_ok());
    // A payload that fails halfway: the error, then a fresh try.
    let data = sample(1 << 20);
    let mut payload = zstd(&data);
    let n = payload.len();
    payload[n / 2..].fill(0xa5);
    let open = || Ok(hoard_codec::partial_decoder(Compression::ZSTD, &payload, 1 << 20).unwrap());
    assert!(
        cache.get(2, 1000, open, describe).is_ok(),
        "the start decodes"
    );
    assert!(cache.get(2, usize::MAX, open, describe).is_err());
    assert_eq!(cache.progress(2), None, "a failed block is not kept");
    assert!(cache.get(2, usize::MAX, open, describe).is_err());
}

#[test]
fn reads_near_the_start_decode_only_the_start() {
    let big = Big::new();
    let (size, data) = (big.data.len(), &big.data);
    let cache = BlockCache::new(64 << 20, DEFAULT_DECRATIO);
    let open = || big.open();

    let block = cache.get(0, 10, open, describe).unwrap();
    assert_eq!(&block[..], &data[..10]);
    let p = cache.progress(0).unwrap();
    assert_eq!((p.decoded, p.size, p.complete), (STEP, size, false));
    assert_eq!(big.decoded(), STEP);
    assert!(cache.bytes() > STEP, "decoder state is counted");

    // More, still below 80%: decoded in steps as far as asked.
    let end = 2 * STEP + 5;
    assert_eq!(
        &cache.get(0, end, open, describe).unwrap()[..],
        &data[..end]
    );
    assert_eq!(cache.progress(0).unwrap().decoded, 3 * STEP);

    // Reading the end completes the block and drops the decoder.
    let all = cache.get(0, usize::MAX, open, describe).unwrap();
    assert!(all[..] == data[..]);
    let p = cache.progress(0).unwrap();
    assert_eq!((p.decoded, p.complete), (size, true));
    assert_eq!(cache.bytes(), size, "only the data is left");
    assert_eq!(big.decoded(), size, "no byte decoded twice");
    // The early view still shows its bytes.
    assert_eq!(&block[..], &data[..10]);
}

#[test]
fn decratio_decides_when_blocks_are_decoded_whole() {
    let big = Big::new();
    let size = big.data.len();
    let open = || big.open();
    let complete_after = |ratio: f64, end: usize| {
        let cache = BlockCache::new(64 << 20, ratio);
        cache.get(0, end, open, describe).unwrap();
        cache.progress(0).unwrap().complete
    };
    // Past 80% of the block: all of it.
    assert!(complete_after(0.8, size * 9 / 10));
    assert!(!complete_after(0.8, size * 7 / 10));
    // 0: every block whole at its first read; 1: only as far as asked.
    assert!(complete_after(0.0, 1));
    assert!(!complete_after(1.0, size - 1000));
    // Algorithms that do not stream are always decoded whole.
    let cache = BlockCache::new(1 << 20, 1.0);
    cache.get(0, 1, || stored(vec![3; 5000]), describe).unwrap();
    assert!(cache.progress(0).unwrap().complete);
}

#[test]
fn concurrent_partial_readers_get_the_right_bytes_decoded_once() {
    let size = 3 << 20;
    let data = Arc::new(sample(size));
    let payload = Arc::new(zstd(&data));
    let decoded = Arc::new(AtomicUsize::new(0));
    let cache = Arc::new(BlockCache::new(64 << 20, 1.0));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (cache, data, payload, decoded) = (
                cache.clone(),
                data.clone(),
                payload.clone(),
                decoded.clone(),
            );
            std::thread::spawn(move || {
                let mut x = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let start = (x % size as u64) as usize;
                    let end = (start + 1 + (x >> 40) as usize % 100_000).min(size);
                    let open = || counting_zstd(&payload, &decoded);
                    let block = cache.get(0, end, open, describe).unwrap();
                    assert!(block[start..end] == data[start..end]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let done = cache.progress(0).unwrap().decoded;
    assert_eq!(
        decoded.load(Ordering::SeqCst),
        done,
        "no byte decoded twice"
    );
}

#[test]
fn images_sharing_a_store_keep_their_blocks_apart_and_drop_them_when_closed() {
    let first = BlockCache::new(1 << 20, 1.0);
    let second = first.for_another_image();
    let a = first
        .get(0, usize::MAX, || stored(vec![1; 100]), describe)
        .unwrap();
    let b = second
        .get(0, usize::MAX, || stored(vec![2; 200]), describe)
        .unwrap();
    assert_eq!((a[0], a.len(), b[0], b.len()), (1, 100, 2, 200));
    assert!(first.progress(0).is_some() && second.progress(0).is_some());
    let shared = first.bytes();
    assert!(shared >= 300);
    drop(second);
    assert!(first.bytes() < shared);
    assert!(first.progress(0).is_some());
}

#[test]
fn get_decoded_answers_only_from_what_is_decoded() {
    let big = Big::new();
    let cache = BlockCache::new(64 << 20, DEFAULT_DECRATIO);
    let open = || big.open();

    assert!(cache.get_decoded(0, 10).is_none(), "nothing cached yet");
    cache.get(0, 10, open, describe).unwrap();
    let block = cache
        .get_decoded(0, STEP)
        .expect("the first step is decoded");
    assert_eq!(&block[..], &big.data[..STEP]);
    assert!(
        cache.get_decoded(0, STEP + 1).is_none(),
        "past what is decoded"
    );
    assert_eq!(big.decoded(), STEP, "get_decoded decodes nothing");
    cache.get(0, usize::MAX, open, describe).unwrap();
    assert!(cache.get_decoded(0, usize::MAX).unwrap()[..] == big.data[..]);
}
