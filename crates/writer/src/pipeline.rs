//! The whole build: options, the run of every stage, live progress
//! counters and the final summary.

use crate::blocks::{compress_blocks, compressor_memory, BlockProgress, PoolLimits, StreamCodec};
use crate::categorize::{categorize, CategorizeOptions, Category, Fragments, DEFAULT_CATEGORY};
use crate::dedupe::{dedupe, Content, DedupeOptions, DedupeProgress, Deduped};
use crate::delta::{DeltaCounts, DeltaOptions};
use crate::filter::Filter;
use crate::level::Level;
use crate::metadata::{build, AttrOptions, Inputs};
use crate::order::Order;
use crate::output::{ImageFile, OutputOptions};
use crate::reference::References;
use crate::scan::{scan, ScanOptions, ScanProgress, Scanned};
use crate::segment::SegmentStats;
use crate::streams::{self, record_categories, segment_streams, Layout, Segmented, StreamPlan};
use crate::tree::{Counts, Tree};
use crate::{Error, Result};
use hoard_codec::compressor_from_spec;
use hoard_format::history::HistoryEntry;
use hoard_format::metadata::Metadata;
use hoard_format::section::{Compression, SectionType};
use hoard_format::write::{encode_metadata, FieldWidths, PackOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Everything `hoard create` can be told.
#[derive(Debug)]
pub struct CreateOptions {
    /// The directory to pack, or a tar or cpio archive (`-`: standard
    /// input).
    pub input: PathBuf,
    /// The image to write, and what is added to it.
    pub output: OutputOptions,
    /// Block size, as a power of two.
    pub block_size_bits: u32,
    /// Block compression spec (`zstd:level=19`, ...).
    pub data_compression: String,
    /// Metadata compression spec.
    pub metadata_compression: String,
    /// Metadata compression spec for encoded metadata of at most
    /// [`crate::level::SMALL_METADATA`] bytes, where a slower codec's
    /// smaller output costs a mount milliseconds; None uses
    /// `metadata_compression` whatever the size.
    pub small_metadata_compression: Option<String>,
    /// Schema and history compression spec.
    pub schema_compression: String,
    /// Segmenter window, as a power of two; 0 turns segmenting off.
    pub window_bits: u32,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: u32,
    /// Finished blocks searched for repeats.
    pub lookback: usize,
    /// Content order.
    pub order: Order,
    /// Compression threads.
    pub workers: usize,
    /// Memory for blocks in flight, in bytes.
    pub memory_limit: u64,
    /// What to include.
    pub scan: ScanOptions,
    /// Filter rules.
    pub filter: Option<Filter>,
    /// Owner, time and permission handling.
    pub attrs: AttrOptions,
    /// Store holes of sparse files as holes.
    pub sparse: bool,
    /// Metadata packing.
    pub pack: PackOptions,
    /// The history entry to record, if any.
    pub history: Option<HistoryEntry>,
    /// Write a section index.
    pub section_index: bool,
    /// Read images (bases, layers to flatten, parts to merge) only if
    /// signed by one of these keys, every section checked against the
    /// signature before use (see [`crate::inputs`]).
    pub trust: Option<hoard_trust::TrustedKeys>,
    /// Open encrypted images read (bases, layers to flatten, parts to
    /// merge) with these (see [`crate::inputs`]).
    pub identities: Option<Arc<hoard_trust::encrypt::Identities>>,
    /// Write a plain image though images read are encrypted.
    pub decrypt: bool,
    /// Categorizers to run (`--categorize`); None runs none.
    pub categorize: Option<CategorizeOptions>,
    /// Per-category settings (`-C cat::spec`, `--order cat::...`, ...).
    pub per_category: BTreeMap<String, CategorySettings>,
    /// Store category names (and so the categories of blocks).
    pub category_names: bool,
    /// Store category metadata (the sample layouts FLAC and RICEPP need
    /// to recompress blocks).
    pub category_metadata: bool,
    /// Write a layer: only what differs from these base images.
    pub delta: Option<DeltaOptions>,
    /// Read the merged tree of these images (a stack, bottom first)
    /// instead of `input`.
    pub flatten: Vec<PathBuf>,
    /// Read the merged tree of these images instead of `input` (`hoard
    /// merge --recompress`).
    pub merge: Option<crate::merge::Parts>,
}

/// Settings that one category overrides; None keeps the general setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CategorySettings {
    /// Block compression spec.
    pub compression: Option<String>,
    /// Content order.
    pub order: Option<Order>,
    /// Segmenter window, as a power of two; 0 turns segmenting off.
    pub window_bits: Option<u32>,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: Option<u32>,
    /// Finished blocks searched for repeats.
    pub lookback: Option<usize>,
}

impl CreateOptions {
    /// Compresses the metadata with `spec` whatever its size (an explicit
    /// `--metadata-compression`).
    pub fn set_metadata_compression(&mut self, spec: String) {
        self.metadata_compression = spec;
        self.small_metadata_compression = None;
    }

    /// The options of compression level `level` (0 to 9).
    pub fn at_level(input: PathBuf, output: PathBuf, level: Level) -> Self {
        CreateOptions {
            input,
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
            }),
            per_category: BTreeMap::new(),
            category_names: true,
            category_metadata: true,
            delta: None,
            flatten: Vec::new(),
            merge: None,
        }
    }
}

/// A quarter of the machine's memory, at least 1 GiB.
pub fn default_memory_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024);
    (total / 4).max(1 << 30)
}

/// The stage a build is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Walking the input.
    Scanning = 0,
    /// Reading and hashing files.
    Hashing = 1,
    /// Running the categorizers.
    Categorizing = 2,
    /// Segmenting and compressing.
    Writing = 3,
    /// Building the metadata.
    Metadata = 4,
    /// Finished.
    Done = 5,
    /// Comparing the input with base images (`--base`).
    Comparing = 6,
}

/// Live counters of a build, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Scan counters.
    pub scan: ScanProgress,
    /// Bytes compared with base images so far (`--base`).
    pub compared: AtomicU64,
    /// Hashing counters.
    pub dedupe: DedupeProgress,
    /// Bytes of distinct contents categorized so far.
    pub categorized: AtomicU64,
    /// Bytes of distinct contents to segment.
    pub to_segment: AtomicU64,
    /// Bytes segmented so far.
    pub segmented: AtomicU64,
    /// Block counters.
    pub blocks: BlockProgress,
}

impl Progress {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Scanning,
            1 => Phase::Hashing,
            2 => Phase::Categorizing,
            3 => Phase::Writing,
            4 => Phase::Metadata,
            6 => Phase::Comparing,
            _ => Phase::Done,
        }
    }

    fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Entries by kind.
    pub counts: Counts,
    /// Bytes in regular files (hard links counted once).
    pub original_bytes: u64,
    /// Files whose content another file already had.
    pub duplicate_files: u64,
    /// Bytes those duplicates would have taken.
    pub duplicate_bytes: u64,
    /// What segmenting stored, matched and left as holes.
    pub segments: SegmentStats,
    /// Data blocks written.
    pub blocks: u64,
    /// Compressed size of the data blocks.
    pub block_bytes: u64,
    /// Size of the metadata section.
    pub metadata_bytes: u64,
    /// Size of the image file.
    pub image_bytes: u64,
    /// Problems that left entries out (unreadable files, ...).
    pub warnings: Vec<String>,
    /// For a layer (`--base`): how the tree was cut.
    pub delta: Option<DeltaCounts>,
}

/// Fails with [`Error::Interrupted`] once `cancel` is set.
pub(crate) fn check(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// The compressor of `spec`.
pub(crate) fn compressor(spec: &str) -> Result<Box<dyn hoard_codec::Compressor>> {
    compressor_from_spec(spec).map_err(|e| Error::Input(e.to_string()))
}

/// Compresses a non-block section, keeping it uncompressed when that is
/// not larger.
pub(crate) fn pack_section(spec: &str, data: &[u8]) -> Result<(Compression, Vec<u8>)> {
    let c = compressor(spec)?;
    let payload = c
        .compress(data, None)
        .map_err(|e| Error::Input(e.to_string()))?;
    Ok(if payload.len() < data.len() {
        (c.algo(), payload)
    } else {
        (Compression::NONE, data.to_vec())
    })
}

/// The field widths for metadata compressed with `spec`: whole bytes,
/// which compress smaller, unless it is stored as is.
pub(crate) fn metadata_widths(spec: &str) -> Result<FieldWidths> {
    Ok(if compressor(spec)?.algo() == Compression::NONE {
        FieldWidths::Bits
    } else {
        FieldWidths::Bytes
    })
}

/// Builds an image as `options` say; `cancel` stops it (the partial image
/// is removed).
///
/// The stages run in turn, each a function of its own (so that a profile
/// shows them by name): `scan_input`, `hash_contents`,
/// `categorize_contents`, `streams::plan` (streams and content order),
/// `write_blocks` (segmenting and compression), `build_metadata`,
/// `write_metadata`, `write_history`.
pub fn create(
    options: &CreateOptions,
    progress: &Progress,
    cancel: Arc<AtomicBool>,
) -> Result<Summary> {
    validate(options)?;
    let mut image = ImageFile::create(&options.output)?;
    progress.set(Phase::Scanning);
    let scanned = scan_input(options, &image, &progress.scan)?;
    check(&cancel)?;
    // Spooled archive contents stay until the image is written.
    let _spool = scanned.spool;
    let Subtracted {
        mut tree,
        counts: delta,
        holes: _holes,
        base,
    } = subtract_base(options, scanned.tree, progress)?;
    check(&cancel)?;
    let mut summary = Summary {
        counts: tree.counts(),
        warnings: scanned.warnings,
        delta,
        ..Summary::default()
    };
    progress.set(Phase::Hashing);
    let deduped = hash_contents(options, &tree, &progress.dedupe);
    check(&cancel)?;
    summary.count_contents(&tree, &deduped);
    progress.to_segment.store(
        deduped.contents.iter().map(|c| c.size).sum(),
        Ordering::Relaxed,
    );
    let fragments = categorize_contents(options, &tree, &deduped.contents, progress, &cancel)?;
    let mut streams = streams::plan(options, &tree, &deduped.contents, &fragments)?;
    let references = match (&base, streams.plans.first()) {
        (Some(base), Some(plan)) => {
            progress.set(Phase::Comparing);
            // Half the memory limit: the other half is the build's.
            let budget = options.memory_limit / 2;
            Some(References::load(
                &base.stack,
                &base.names,
                &plan.config,
                budget,
            )?)
        }
        _ => None,
    };
    drop(base);
    progress.set(Phase::Writing);
    let layout = Layout {
        tree: &tree,
        contents: &deduped.contents,
        fragments: &fragments,
        streams: &streams,
        references: references.as_ref(),
    };
    let segmented = write_blocks(&mut image, options, &layout, progress, &cancel)?;
    image.sync_in_background()?;
    // What only the data needed goes before the metadata is built.
    drop(fragments);
    streams.orders = Default::default();
    tree.drop_paths();
    summary.count_blocks(&segmented, &progress.blocks);
    check(&cancel)?;
    progress.set(Phase::Metadata);
    let inputs = Inputs {
        tree: &tree,
        deduped,
        pieces: segmented.pieces,
        // A delta layer's chunks number the base blocks past its own.
        blocks: segmented.blocks + references.as_ref().map_or(0, References::len),
        block_size: 1 << options.block_size_bits,
    };
    // Categories are named when the categorizers found any: an image of
    // the default category alone says nothing more with them.
    let categorized = streams
        .plans
        .iter()
        .any(|p| p.category.name != DEFAULT_CATEGORY);
    let categories = (options.categorize.is_some() && options.category_names && categorized)
        .then_some((streams.plans.as_slice(), segmented.block_streams.as_slice()));
    let mut meta = build_metadata(options, inputs, categories);
    if references.is_some() {
        let features = meta.features.get_or_insert_with(Default::default);
        features.insert(hoard_reader::delta::DELTA_FEATURE.to_string());
    }
    drop(references);
    // The tree is in the metadata now: gone before it is encoded, it
    // leaves room for the encoder's tables.
    drop((tree, streams, segmented.block_streams));
    summary.metadata_bytes = write_metadata(&mut image, options, &meta)?;
    drop(meta);
    write_history(&mut image, options)?;
    check(&cancel)?;
    summary.image_bytes = image.finish(options.section_index)?;
    progress.set(Phase::Done);
    Ok(summary)
}

impl Summary {
    /// Counts the bytes and duplicates of `deduped`'s contents and warns
    /// of the files that could not be read.
    pub(crate) fn count_contents(&mut self, tree: &Tree, deduped: &Deduped) {
        for (file, e) in &deduped.unreadable {
            self.warnings
                .push(format!("{}: {e}", tree.source(*file).display()));
        }
        for c in &deduped.contents {
            let dups = c.files.len() as u64 - 1;
            self.duplicate_files += dups;
            self.duplicate_bytes += dups * c.size;
            self.original_bytes += c.files.len() as u64 * c.size;
        }
    }

    /// Records what segmenting and compression did.
    fn count_blocks(&mut self, segmented: &Segmented, progress: &BlockProgress) {
        self.warnings.extend(segmented.warnings.iter().cloned());
        self.segments = segmented.stats;
        self.blocks = u64::from(segmented.blocks);
        self.block_bytes = progress.compressed_bytes.load(Ordering::Relaxed);
    }
}

/// Walks the input, leaving out the image being written.
#[inline(never)]
fn scan_input(
    options: &CreateOptions,
    image: &ImageFile,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let mut scan_options = options.scan.clone();
    scan_options.exclude.extend(image.identity());
    // Beside the output, unless it goes to S3 ($TMPDIR then).
    if scan_options.spool_dir.is_none() && crate::objects::s3_output(&options.output.path).is_none()
    {
        let dir = crate::scratch::directory_of(&options.output.path);
        scan_options.spool_dir = Some(dir.to_path_buf());
    }
    if let Ok(m) = std::fs::metadata(&options.output.path) {
        use std::os::unix::fs::MetadataExt;
        scan_options.exclude.push((m.dev(), m.ino()));
    }
    if let Some(parts) = &options.merge {
        return crate::merge::scan_parts(parts, options, &scan_options, progress);
    }
    if !options.flatten.is_empty() {
        return crate::flatten::scan_stack(options, &scan_options, progress);
    }
    if let Some(url) = crate::objects::remote_archive(&options.input) {
        return crate::archive::scan_remote_archive(
            url,
            &scan_options,
            options.filter.as_ref(),
            progress,
        );
    }
    if crate::objects::is_objects(&options.input) {
        return crate::objects::scan_objects(
            &options.input,
            &scan_options,
            options.filter.as_ref(),
            progress,
        );
    }
    if crate::archive::is_archive(&options.input) {
        return crate::archive::scan_archive(
            &options.input,
            &scan_options,
            options.filter.as_ref(),
            progress,
        );
    }
    scan(
        &options.input,
        &scan_options,
        options.filter.as_ref(),
        progress,
    )
}

/// The base images of a delta layer, kept open until their blocks are
/// read (see [`References`]).
struct DeltaBase {
    stack: hoard_reader::Stack,
    /// Their file names, bottom first.
    names: Vec<String>,
}

/// The tree to write, with base images cut down to what differs from
/// them.
struct Subtracted {
    tree: Tree,
    counts: Option<DeltaCounts>,
    /// The directory of metacopy files' stand-in contents, to keep while
    /// building.
    holes: Option<crate::scratch::ScratchDir>,
    /// For a delta layer, the bases.
    base: Option<DeltaBase>,
}

/// With base images, the tree cut down to what differs from them.
#[inline(never)]
fn subtract_base(options: &CreateOptions, tree: Tree, progress: &Progress) -> Result<Subtracted> {
    let Some(delta) = &options.delta else {
        return Ok(Subtracted {
            tree,
            counts: None,
            holes: None,
            base: None,
        });
    };
    progress.set(Phase::Comparing);
    let paths: Vec<&Path> = delta.bases.iter().map(PathBuf::as_path).collect();
    let cache = crate::inputs::block_cache()?;
    let base = crate::inputs::open_stack(&delta.bases, options, &cache, delta.force_stack)?;
    let mut layer = crate::delta::subtract(tree, &base, delta, &options.attrs, &progress.compared)?;
    if !delta.refer_to_base {
        return Ok(Subtracted {
            tree: layer.tree,
            counts: Some(layer.counts),
            holes: layer.holes,
            base: None,
        });
    }
    let names: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let depends = crate::reference::depends_xattr(&base, &names);
    let root = &mut layer.tree.entries[0].xattrs;
    root.retain(|(n, _)| n != &depends.0);
    root.push(depends);
    let base = DeltaBase { stack: base, names };
    Ok(Subtracted {
        tree: layer.tree,
        counts: Some(layer.counts),
        holes: layer.holes,
        base: Some(base),
    })
}

/// Groups equal contents, reading the files that may have a duplicate
/// (every file when an order needs nilsimsa digests).
#[inline(never)]
fn hash_contents(options: &CreateOptions, tree: &Tree, progress: &DedupeProgress) -> Deduped {
    let orders = || {
        let per_category = options.per_category.values().filter_map(|s| s.order);
        std::iter::once(options.order).chain(per_category)
    };
    let digests = DedupeOptions {
        nilsimsa: orders().any(Order::needs_nilsimsa),
    };
    dedupe(tree, progress, digests)
}

/// Splits each content into fragments of categories (with
/// `--categorize`; otherwise each is one fragment of the default
/// category).
#[inline(never)]
fn categorize_contents(
    options: &CreateOptions,
    tree: &Tree,
    contents: &[Content],
    progress: &Progress,
    cancel: &AtomicBool,
) -> Result<Fragments> {
    let Some(c) = &options.categorize else {
        return Ok(Fragments::whole(
            Category::plain(DEFAULT_CATEGORY),
            contents.iter().map(|c| c.size),
        ));
    };
    progress.set(Phase::Categorizing);
    let fragments = categorize(tree, contents, options.sparse, c, &progress.categorized);
    check(cancel)?;
    Ok(fragments)
}

/// Segments the streams into blocks while a pool compresses them
/// and writes them to `image`, in order, with bounded memory.
#[inline(never)]
fn write_blocks(
    image: &mut ImageFile,
    options: &CreateOptions,
    layout: &Layout<'_>,
    progress: &Progress,
    cancel: &Arc<AtomicBool>,
) -> Result<Segmented> {
    let plans = &layout.streams.plans;
    let codecs: Vec<StreamCodec<'_>> = plans
        .iter()
        .map(|p| StreamCodec {
            compressor: p.compressor.as_ref(),
            metadata: p.category.metadata.clone(),
        })
        .collect();
    let limits = PoolLimits {
        workers: options.workers,
        in_flight: blocks_in_flight(options, plans),
        compressor_memory: compressor_memory(expected_blocks(layout, options), options.workers),
    };
    compress_blocks(
        image,
        &codecs,
        layout.streams.default.as_ref(),
        limits,
        &progress.blocks,
        Arc::clone(cancel),
        |dispatch| {
            segment_streams(
                layout,
                dispatch,
                options.sparse,
                &progress.segmented,
                cancel,
            )
        },
    )
}

/// The largest block size of any stream.
fn largest_block(options: &CreateOptions, plans: &[StreamPlan]) -> u64 {
    plans
        .iter()
        .map(|p| p.config.block_size)
        .max()
        .unwrap_or(1 << options.block_size_bits)
        .max(1) as u64
}

/// About how many blocks the data will fill: its bytes after file
/// dedupe (before segmenting) over the largest block size.
fn expected_blocks(layout: &Layout<'_>, options: &CreateOptions) -> u64 {
    let bytes: u64 = layout.contents.iter().map(|c| c.size).sum();
    bytes.div_ceil(largest_block(options, &layout.streams.plans))
}

/// Block bytes in flight that keep the workers fed: more only costs
/// memory, since a block queued behind a busy worker waits either way.
const ENOUGH_IN_FLIGHT: u64 = 256 << 20;

/// How many blocks may be in memory at once: as many as the memory limit
/// holds besides the lookback, but no more than [`ENOUGH_IN_FLIGHT`] bytes
/// (or one per worker and one more, for large blocks); at least 1, at
/// most two per worker and one more (one being compressed and one queued
/// per worker, one being filled: 1 MiB blocks at `-l1` peaked 3 MiB
/// higher with 4 per worker, in the same time).
fn blocks_in_flight(options: &CreateOptions, plans: &[StreamPlan]) -> usize {
    let max_block = largest_block(options, plans);
    let max_lookback = plans.iter().map(|p| p.config.lookback).max().unwrap_or(0);
    let workers = options.workers.max(1) as u64;
    let by_memory = (options.memory_limit / max_block).saturating_sub(max_lookback as u64 + 1);
    let enough = (ENOUGH_IN_FLIGHT / max_block).max(workers + 1);
    by_memory.min(enough).clamp(1, 2 * workers + 1) as usize
}

/// Builds the metadata, recording each block's category when
/// `categories` holds the plans and the stream of each block.
#[inline(never)]
pub(crate) fn build_metadata(
    options: &CreateOptions,
    inputs: Inputs<'_>,
    categories: Option<(&[StreamPlan], &[usize])>,
) -> Metadata {
    let mut meta = build(inputs, &options.attrs);
    if let Some((plans, block_streams)) = categories {
        record_categories(&mut meta, plans, block_streams, options.category_metadata);
    }
    meta
}

/// Encodes `meta` and writes its schema and data sections. Returns the
/// size of the data section.
#[inline(never)]
pub(crate) fn write_metadata(
    image: &mut ImageFile,
    options: &CreateOptions,
    meta: &Metadata,
) -> Result<u64> {
    let widths = metadata_widths(&options.metadata_compression)?;
    let encoded =
        encode_metadata(meta, &options.pack, widths).map_err(|e| Error::Input(e.to_string()))?;
    let (algo, payload) = pack_section(&options.schema_compression, &encoded.schema)?;
    image.section(SectionType::METADATA_V2_SCHEMA, algo, &payload)?;
    let spec = match &options.small_metadata_compression {
        Some(small) if encoded.data.len() <= crate::level::SMALL_METADATA => small,
        _ => &options.metadata_compression,
    };
    let (algo, payload) = pack_section(spec, &encoded.data)?;
    image.section(SectionType::METADATA_V2, algo, &payload)?;
    Ok(payload.len() as u64)
}

/// Writes the history section, if there is an entry to record.
pub(crate) fn write_history(image: &mut ImageFile, options: &CreateOptions) -> Result<()> {
    if let Some(entry) = &options.history {
        let history = hoard_format::write::encode_history(std::slice::from_ref(entry));
        let (algo, payload) = pack_section(&options.schema_compression, &history)?;
        image.section(SectionType::HISTORY, algo, &payload)?;
    }
    Ok(())
}

/// Checks the block size, windows and compression specs before any work.
fn validate(options: &CreateOptions) -> Result<()> {
    if !(10..=30).contains(&options.block_size_bits) {
        return Err(Error::Input(format!(
            "block size bits {} out of range (10 to 30)",
            options.block_size_bits
        )));
    }
    let block_size = 1u64 << options.block_size_bits;
    let check_window = |bits: u32, what: &str| {
        if bits > 0 && 1u64 << bits > block_size {
            return Err(Error::Input(format!(
                "window size {}{what} is larger than the block size {block_size}",
                1u64 << bits
            )));
        }
        Ok(())
    };
    check_window(options.window_bits, "")?;
    for spec in [
        &options.data_compression,
        &options.metadata_compression,
        &options.schema_compression,
    ]
    .into_iter()
    .chain(&options.small_metadata_compression)
    {
        compressor(spec)?;
    }
    let known = crate::categorize::all_category_names();
    for (name, s) in &options.per_category {
        if !known.contains(&name.as_str()) {
            return Err(Error::Input(format!(
                "unknown category '{name}' (known: {})",
                known.join(", ")
            )));
        }
        if let Some(spec) = &s.compression {
            compressor(spec)?;
        }
        check_window(s.window_bits.unwrap_or(0), &format!(" (category {name})"))?;
    }
    Ok(())
}
