//! The `hotness` categorizer (DwarFS's name): the files of a list, such
//! as the files an application opens as it starts (recorded with `hoard
//! mount -o analysis_file=FILE`), go to the `hotness` category. It is
//! decided by path alone, reading no data. Hot data is laid out before
//! any other, in the list's order (see `streams`), and a mount with `-o
//! preload_category=hotness` reads its blocks ahead.

/// The category of the listed files.
pub const HOTNESS: &str = "hotness";

/// The block compression hot data gets unless told otherwise (`-C
/// hotness::SPEC` overrides it): LZ4 HC, since hot data is decoded while
/// an application waits. On Python's standard library (40 MB of source,
/// `zstd -b`/`lz4 -b`, one run each on a busy 2-core machine) it decoded
/// at 2.4 GB/s to 3.14x, against zstd's 0.76 GB/s at level 3 (3.80x) and
/// 0.54 GB/s at level 19 (5.04x): 1.6 times the bytes of level 19 to read,
/// a quarter of the time to decode them.
pub const DEFAULT_COMPRESSION: &str = "lz4hc:level=9";

/// The largest block of hot data (smaller when the image's block size
/// is): a read of a hot file waits for its whole block to be read and
/// decoded (LZ4 decodes whole blocks), so small blocks let the first
/// reads start early, while the preload decodes the rest behind them.
/// LZ4 finds repeats within 64 KiB only, so they cost it almost nothing.
pub const MAX_BLOCK_SIZE: usize = 1 << 20;
