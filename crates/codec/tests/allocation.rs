//! A payload that declares more than the caller's limit is refused before
//! any buffer for it is allocated. A counting allocator records the largest
//! single allocation made on the test's thread.

mod common;

use hoard_codec::{decompress, CodecError};
use hoard_format::section::Compression;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest allocation `f` makes on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let r = f();
    (r, LARGEST.with(|l| l.get()))
}

#[test]
fn oversized_declarations_allocate_nothing_large() {
    let huge = 1u64 << 40;
    let mut varint = Vec::new();
    common::varint(&mut varint, huge);
    varint.extend_from_slice(&[0x15, 0x02, 0x00]);
    let mut zstd = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    zstd.extend_from_slice(&huge.to_le_bytes());
    let lz4 = [0xff, 0xff, 0xff, 0x7f, 0x00];
    let flac = common::flac_payload(1 << 30, 2, 16, 0x41, b"fLaC");
    let ricepp = common::ricepp_payload(1 << 30, 128, 1, 0, false, &[0; 16]);
    let cases: [(Compression, &[u8]); 7] = [
        (Compression::ZSTD, &zstd),
        (Compression::LZ4, &lz4),
        (Compression::LZ4HC, &lz4),
        (Compression::BROTLI, &varint),
        (Compression::FLAC, &flac),
        (Compression::RICEPP, &ricepp),
        (Compression::FLAC, &varint),
    ];
    for (algo, payload) in cases {
        let (r, largest) = largest_allocation(|| decompress(algo, payload, 1 << 20));
        assert!(
            matches!(r, Err(CodecError::DeclaredTooLarge { .. })),
            "{}: {r:?}",
            algo.name()
        );
        assert!(
            largest < 64 << 10,
            "{}: allocated {largest} bytes",
            algo.name()
        );
    }
}

/// The output buffer is sized by the payload's declaration, not by the
/// caller's (here very large) limit. Brotli also allocates its window,
/// whose size the stream header gives (2^18 bytes here: brotli's encoder
/// uses at least that window at quality 1).
#[test]
fn output_buffers_are_sized_by_the_declaration() {
    let data = vec![7u8; 100_000];
    for (spec, extra) in [
        ("zstd:level=1", 0),
        ("lz4", 0),
        ("lz4hc:level=3", 0),
        ("lzma:level=0", 0),
        ("brotli:quality=1:lgwin=16", 1 << 18),
        ("null", 0),
    ] {
        let c = hoard_codec::compressor_from_spec(spec).unwrap();
        let payload = c.compress(&data, None).unwrap();
        let (r, largest) = largest_allocation(|| decompress(c.algo(), &payload, 1 << 30));
        assert_eq!(r.unwrap().len(), data.len());
        assert!(
            largest <= data.len().max(extra) + (64 << 10),
            "{spec}: allocated {largest} bytes"
        );
    }
}
