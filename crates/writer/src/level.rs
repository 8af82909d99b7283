//! The `-l 0..9` presets: block size, codecs, segmenter window and order per
//! level, as DwarFS's `mkdwarfs -H` table defines them (with zstd, lzma and
//! lz4 all available), except for choices measured to give smaller
//! images in less time (see the writer's README):
//!
//! * where DwarFS orders by `nilsimsa` (levels 6 to 9) or `path` (levels 1
//!   and 2), hoard orders by `similarity` (extension, then path, the
//!   versions of a file side by side in release order), which needs no
//!   digest and puts files that look alike side by side, where even lz4's
//!   64 KiB window finds them (at level 9, since the release order, 1.9%
//!   smaller than `name-nilsimsa` on 40 releases of a tree and 0.16% on a
//!   root file system);
//! * where DwarFS segments with 4 KiB windows (levels 3 to 9), hoard uses
//!   1 KiB windows, with a step of a quarter window at levels 4 to 7 and
//!   an eighth at 8 and 9 (at level 9 the repeats they find leave lzma a
//!   third less data on many versions of a tree, for a smaller image);
//! * where DwarFS compresses blocks with zstd level 22 (levels 6 and 7),
//!   hoard uses level 20: on 16 MiB blocks both search the whole block,
//!   and level 20 costs less than half the time for 0.4% more bytes;
//!   its optimal parser takes a match of 128 bytes as it comes (level
//!   20's own target is 256), which takes about an eighth off its time
//!   for 0.07-0.12% more bytes;
//! * at levels 6, 7 and 9, a block whose samples compress to under 15% at
//!   zstd level 3 (many versions of a file side by side) gets a longer
//!   search: zstd's target length of 256, or lzma's extreme preset;
//! * at level 7, metadata of at most [`SMALL_METADATA`] bytes is
//!   compressed with lzma (5-40% smaller than with zstd level 22; a mount
//!   decodes it in at most about 20 ms), larger metadata with zstd;
//! * at levels 7 to 9 the `zip` categorizer puts the headers of zip
//!   archives (jars, wheels, ...) in blocks of their own, where the
//!   names they hold compress together.
//!
//! Level 7 is the default. [`CreateOptions::at_level`] makes the options
//! of a level.

use crate::categorize::{CategorizeOptions, Categorizer};
use crate::metadata::AttrOptions;
use crate::options::{default_memory_limit, CategorySettings, CreateOptions, Input};
use crate::order::Order;
use crate::output::OutputOptions;
use crate::scan::ScanOptions;
use hoard_format::write::PackOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The settings one level stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Block size, as a power of two.
    pub block_size_bits: u32,
    /// Block compression.
    pub data: &'static str,
    /// Schema and history compression.
    pub schema: &'static str,
    /// Metadata compression.
    pub metadata: &'static str,
    /// Metadata compression for metadata of at most [`SMALL_METADATA`]
    /// bytes, if not `metadata`.
    pub small_metadata: Option<&'static str>,
    /// Segmenter window size, as a power of two; 0 turns segmenting off.
    pub window_bits: u32,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: u32,
    /// File order.
    pub order: Order,
    /// Categorizers run unless `--categorize` names others.
    pub categorizers: &'static [Categorizer],
}

/// The default level.
pub const DEFAULT_LEVEL: u8 = 7;

const SCHEMA: &str = "zstd:level=16";

/// Metadata compression at levels 8 and 9. Metadata fields are whole
/// bytes wide, in rows: literals are told by their place in a 4-byte
/// word (`lp=2`) rather than by the byte before them (`lc=0`), which
/// made the quick corpora's metadata 1-12% smaller than the preset's
/// `lc=3:lp=0`.
const METADATA_LZMA: &str = "lzma:level=9:lc=0:lp=2:pb=2";

/// The categorizers of levels 7 to 9: zip archives' headers in blocks of
/// their own. Each member then takes two chunks in the metadata, which
/// these levels compress (levels 1 to 6 store it as it is, and there
/// the chunks cost more than the headers gain).
const ZIP: &[Categorizer] = &[Categorizer::Zip];

/// Block compression at levels 6 and 7: zstd level 20 that takes a match
/// of 128 bytes without weighing the others (level 20's own target is
/// 256), which took 0.87 of zstd's time for 0.07-0.12% more bytes, and
/// tries 32 candidates a position, not 128, which took 0.94 of a quick
/// `rootfs` build's time (0.96 on `versions`) for 0.03% (0.13%) more
/// bytes. A redundant block (samples that compress to under 15% at
/// level 3: many versions of a file side by side) gets level 20's own
/// target of 256, which on 40 releases of a tree took 0.3% off the
/// image for about a fifth more of zstd's time there; a root file
/// system's blocks do not qualify. The writer's README has the
/// measurements.
const DATA_L6_L7: &str = "zstd:level=20:target_length=128:search_log=5:redundant_target_length=256";

/// Block compression at level 9: lzma level 9, with the extreme preset
/// (matches weighed up to 273 bytes, a search 512 deep) for a redundant
/// block, which took 2.6% off 40 releases of a tree for 1.5 times
/// lzma's time there; a root file system's blocks do not qualify.
const DATA_L9: &str = "lzma:level=9:redundant_extreme";

/// The largest encoded metadata that [`Level::small_metadata`] applies to:
/// lzma decodes 1 MiB of it in about 20 ms on one core.
pub const SMALL_METADATA: usize = 1 << 20;

const LEVELS: [Level; 10] = [
    level(20, "null", "null", "null", 0, 0, Order::None),
    level(20, "lz4", SCHEMA, "null", 0, 0, Order::Similarity),
    level(20, "lz4hc:level=9", SCHEMA, "null", 0, 0, Order::Similarity),
    level(
        21,
        "lz4hc:level=9",
        SCHEMA,
        "null",
        10,
        1,
        Order::Similarity,
    ),
    level(
        22,
        "zstd:level=11",
        SCHEMA,
        "null",
        10,
        2,
        Order::Similarity,
    ),
    level(
        23,
        "zstd:level=19",
        SCHEMA,
        "null",
        10,
        2,
        Order::Similarity,
    ),
    level(24, DATA_L6_L7, SCHEMA, "null", 10, 2, Order::Similarity),
    Level {
        // A dictionary of SMALL_METADATA bytes holds all of it, and
        // sets up in a quarter of the time a 64 MiB one takes; lc, lp
        // and pb as in METADATA_LZMA.
        small_metadata: Some("lzma:level=9:extreme:dict_size=20:lc=0:lp=2:pb=2"),
        categorizers: ZIP,
        ..level(
            24,
            DATA_L6_L7,
            SCHEMA,
            "zstd:level=22",
            10,
            2,
            Order::Similarity,
        )
    },
    Level {
        categorizers: ZIP,
        ..level(
            24,
            "lzma:level=9",
            SCHEMA,
            METADATA_LZMA,
            10,
            3,
            Order::Similarity,
        )
    },
    Level {
        categorizers: ZIP,
        ..level(26, DATA_L9, SCHEMA, METADATA_LZMA, 10, 3, Order::Similarity)
    },
];

const fn level(
    block_size_bits: u32,
    data: &'static str,
    schema: &'static str,
    metadata: &'static str,
    window_bits: u32,
    window_step_shift: u32,
    order: Order,
) -> Level {
    Level {
        block_size_bits,
        data,
        schema,
        metadata,
        small_metadata: None,
        window_bits,
        window_step_shift,
        order,
        categorizers: &[],
    }
}

impl Level {
    /// The settings of level `n` (0 to 9).
    pub fn get(n: u8) -> Option<Level> {
        LEVELS.get(n as usize).copied()
    }
}

impl CreateOptions {
    /// The options of compression level `level` (0 to 9), reading
    /// `input` (a path: see [`Input::Path`]) and writing `output`.
    pub fn at_level(input: impl Into<Input>, output: PathBuf, level: Level) -> Self {
        CreateOptions {
            input: input.into(),
            output: OutputOptions::to(output),
            block_size_bits: level.block_size_bits,
            data_compression: level.data.into(),
            metadata_compression: level.metadata.into(),
            small_metadata_compression: level.small_metadata.map(Into::into),
            schema_compression: level.schema.into(),
            window_bits: level.window_bits,
            window_step_shift: level.window_step_shift,
            lookback: 1,
            order: level.order,
            explicit_order: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_limit: default_memory_limit(),
            scan: ScanOptions::default(),
            filter: None,
            attrs: AttrOptions::default(),
            sparse: true,
            pack: PackOptions::default(),
            history: None,
            section_index: true,
            trust: None,
            identities: None,
            decrypt: false,
            categorize: (!level.categorizers.is_empty()).then(|| CategorizeOptions {
                categorizers: level.categorizers.to_vec(),
                incompressible: Default::default(),
                hotness: None,
            }),
            per_category: BTreeMap::new(),
            category_names: true,
            category_metadata: true,
            delta: None,
            platform: None,
            container_layers: None,
            registry: hoard_oci::registry::Options::default(),
        }
    }
}

/// What `--categorize` sets per category at level `n` unless told
/// otherwise, as DwarFS does: incompressible data is stored as is; audio
/// goes to FLAC and FITS images to RICEPP (levels 1 and up), in reverse
/// path order, with the audio window DwarFS picks (which our writer turns
/// off anyway for FLAC's frame-aligned blocks). Hot data (the `hotness`
/// category) goes to LZ4 HC at levels 1 and up, for fast decoding (DwarFS
/// leaves it to the general codec).
pub fn category_defaults(n: u8) -> BTreeMap<String, CategorySettings> {
    let mut m = BTreeMap::new();
    m.insert(
        crate::categorize::incompressible::INCOMPRESSIBLE.to_string(),
        CategorySettings {
            compression: Some("null".into()),
            ..Default::default()
        },
    );
    if n == 0 {
        return m;
    }
    m.insert(
        crate::categorize::hotness::HOTNESS.to_string(),
        CategorySettings {
            compression: Some(crate::categorize::hotness::DEFAULT_COMPRESSION.into()),
            ..Default::default()
        },
    );
    let (flac_level, audio_window, audio_order) = match n {
        ..=4 => (3, 0, Some(Order::RevPath)),
        5..=7 => (5, 20, Some(Order::RevPath)),
        _ => (8, 16, None),
    };
    m.insert(
        crate::categorize::pcmaudio::WAVEFORM.to_string(),
        CategorySettings {
            compression: Some(format!("flac:level={flac_level}")),
            order: audio_order,
            window_bits: Some(audio_window),
            ..Default::default()
        },
    );
    m.insert(
        crate::categorize::fits::IMAGE.to_string(),
        CategorySettings {
            compression: Some("ricepp".into()),
            order: Some(Order::RevPath),
            window_bits: Some(0),
            ..Default::default()
        },
    );
    m
}
