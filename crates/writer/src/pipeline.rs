//! The whole build: options, the run of every stage, live progress
//! counters and the final summary.

use crate::blocks::{compress_blocks, BlockProgress, StreamCodec};
use crate::categorize::{categorize, CategorizeOptions, Category, Fragment, DEFAULT_CATEGORY};
use crate::dedupe::{dedupe, DedupeOptions, DedupeProgress};
use crate::filter::Filter;
use crate::level::Level;
use crate::metadata::{build, AttrOptions, Inputs};
use crate::order::{order, Order};
use crate::output::ImageFile;
use crate::scan::{scan, ScanOptions, ScanProgress};
use crate::segment::{Piece, SegmentConfig, SegmentStats, Segmenter};
use crate::tree::Counts;
use crate::{Error, Result};
use hoard_codec::compressor_from_spec;
use hoard_format::history::HistoryEntry;
use hoard_format::section::{Compression, SectionType};
use hoard_format::write::{encode_metadata, PackOptions};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Everything `hoard create` can be told.
#[derive(Debug)]
pub struct CreateOptions {
    /// The directory to pack.
    pub input: PathBuf,
    /// The image to write.
    pub output: PathBuf,
    /// Overwrite an existing image.
    pub force: bool,
    /// Block size, as a power of two.
    pub block_size_bits: u32,
    /// Block compression spec (`zstd:level=19`, ...).
    pub data_compression: String,
    /// Metadata compression spec.
    pub metadata_compression: String,
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
    /// Bytes to put before the image (`--header`).
    pub header: Option<Vec<u8>>,
    /// Categorizers to run (`--categorize`); None runs none.
    pub categorize: Option<CategorizeOptions>,
    /// Per-category settings (`-C cat::spec`, `--order cat::...`, ...).
    pub per_category: BTreeMap<String, CategorySettings>,
    /// Store category names (and so the categories of blocks).
    pub category_names: bool,
    /// Store category metadata (the sample layouts FLAC and RICEPP need
    /// to recompress blocks).
    pub category_metadata: bool,
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
    /// The options of compression level `level` (0 to 9).
    pub fn at_level(input: PathBuf, output: PathBuf, level: Level) -> Self {
        CreateOptions {
            input,
            output,
            force: false,
            block_size_bits: level.block_size_bits,
            data_compression: level.data.into(),
            metadata_compression: level.metadata.into(),
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
            header: None,
            categorize: None,
            per_category: BTreeMap::new(),
            category_names: true,
            category_metadata: true,
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
}

/// Live counters of a build, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Scan counters.
    pub scan: ScanProgress,
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
}

fn check(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

fn compressor(spec: &str) -> Result<Box<dyn hoard_codec::Compressor>> {
    compressor_from_spec(spec).map_err(|e| Error::Input(e.to_string()))
}

/// Compresses a non-block section, keeping it uncompressed when that is
/// not larger.
fn pack_section(spec: &str, data: &[u8]) -> Result<(Compression, Vec<u8>)> {
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

/// Builds an image as `options` say; `cancel` stops it (the partial image
/// is removed).
pub fn create(
    options: &CreateOptions,
    progress: &Progress,
    cancel: Arc<AtomicBool>,
) -> Result<Summary> {
    if !(10..=30).contains(&options.block_size_bits) {
        return Err(Error::Input(format!(
            "block size bits {} out of range (10 to 30)",
            options.block_size_bits
        )));
    }
    let block_size = 1usize << options.block_size_bits;
    validate(options)?;
    let mut image = ImageFile::create(&options.output, options.force, options.header.as_deref())?;
    let mut scan_options = options.scan.clone();
    scan_options.exclude.extend(image.identity());
    if let Ok(m) = std::fs::metadata(&options.output) {
        use std::os::unix::fs::MetadataExt;
        scan_options.exclude.push((m.dev(), m.ino()));
    }

    progress.set(Phase::Scanning);
    let scanned = scan(
        &options.input,
        &scan_options,
        options.filter.as_ref(),
        &progress.scan,
    )?;
    check(&cancel)?;
    let tree = scanned.tree;
    let mut summary = Summary {
        counts: tree.counts(),
        warnings: scanned.warnings,
        ..Summary::default()
    };

    progress.set(Phase::Hashing);
    let needs_nilsimsa = options.order.needs_nilsimsa()
        || options
            .per_category
            .values()
            .any(|s| s.order.is_some_and(Order::needs_nilsimsa));
    let deduped = dedupe(
        &tree,
        &progress.dedupe,
        DedupeOptions {
            nilsimsa: needs_nilsimsa,
        },
    );
    check(&cancel)?;
    for (file, e) in &deduped.unreadable {
        summary
            .warnings
            .push(format!("{}: {e}", tree.files[*file].source.display()));
    }
    for c in &deduped.contents {
        let dups = c.files.len() as u64 - 1;
        summary.duplicate_files += dups;
        summary.duplicate_bytes += dups * c.size;
        summary.original_bytes += c.files.len() as u64 * c.size;
    }
    progress.to_segment.store(
        deduped.contents.iter().map(|c| c.size).sum(),
        Ordering::Relaxed,
    );
    let fragments: Vec<Vec<Fragment>> = match &options.categorize {
        Some(c) => {
            progress.set(Phase::Categorizing);
            let f = categorize(
                &tree,
                &deduped.contents,
                options.sparse,
                c,
                &progress.categorized,
            );
            check(&cancel)?;
            f
        }
        None => deduped
            .contents
            .iter()
            .map(|c| Fragment::whole(Category::plain(DEFAULT_CATEGORY), c.size))
            .collect(),
    };
    let default_compressor = compressor(&options.data_compression)?;
    let plans = plan_streams(options, &fragments, default_compressor.as_ref())?;
    let mut orders: HashMap<Order, Vec<usize>> = HashMap::new();
    for p in &plans {
        orders
            .entry(p.order)
            .or_insert_with(|| order(&tree, &deduped.contents, p.order));
    }

    progress.set(Phase::Writing);
    let max_block = plans
        .iter()
        .map(|p| p.config.block_size)
        .max()
        .unwrap_or(block_size);
    let max_lookback = plans.iter().map(|p| p.config.lookback).max().unwrap_or(0);
    let in_flight = (options.memory_limit / max_block as u64)
        .saturating_sub(max_lookback as u64 + 1)
        .clamp(1, 4 * options.workers.max(1) as u64) as usize;
    let codecs: Vec<StreamCodec<'_>> = plans
        .iter()
        .map(|p| StreamCodec {
            compressor: p.compressor.as_ref(),
            metadata: p.category.metadata.clone(),
        })
        .collect();
    let mut read_warnings = Vec::new();
    let (pieces, blocks, stats, block_streams) = compress_blocks(
        &mut image,
        &codecs,
        default_compressor.as_ref(),
        options.workers,
        in_flight,
        &progress.blocks,
        Arc::clone(&cancel),
        |dispatch| {
            let mut pieces: Vec<Vec<Vec<Piece>>> = fragments
                .iter()
                .map(|f| vec![Vec::new(); f.len()])
                .collect();
            let mut buf = vec![0u8; 16 << 20];
            let mut next_block = 0u32;
            let mut stats = SegmentStats::default();
            for (stream, plan) in plans.iter().enumerate() {
                let mut sink = dispatch.stream(stream);
                let mut segmenter = Segmenter::new(plan.config, next_block, &mut sink);
                for &c in &orders[&plan.order] {
                    let content = &deduped.contents[c];
                    let file = &tree.files[content.files[0]];
                    let mut start = 0u64;
                    for (f, fragment) in fragments[c].iter().enumerate() {
                        if fragment.category == plan.category {
                            check(&cancel)?;
                            let range = Range {
                                start,
                                len: fragment.size,
                                whole: fragment.size == content.size,
                            };
                            let read = feed(
                                &mut segmenter,
                                &file.source,
                                range,
                                options.sparse,
                                &mut buf,
                                &mut pieces[c][f],
                                &progress.segmented,
                            );
                            match read {
                                Ok(n) if n != range.len => read_warnings.push(format!(
                                    "{}: changed while being read ({} bytes, then {})",
                                    file.source.display(),
                                    content.size,
                                    if range.whole { n } else { start + n }
                                )),
                                Ok(_) => {}
                                Err(e) => {
                                    read_warnings.push(format!("{}: {e}", file.source.display()))
                                }
                            }
                        }
                        start += fragment.size;
                    }
                }
                let (next, s) = segmenter.finish()?;
                next_block = next;
                stats.add(&s);
            }
            let pieces: Vec<Vec<Piece>> = pieces.into_iter().map(|p| p.concat()).collect();
            Ok((pieces, next_block, stats, dispatch.block_streams().to_vec()))
        },
    )?;
    summary.warnings.extend(read_warnings);
    summary.segments = stats;
    summary.blocks = u64::from(blocks);
    summary.block_bytes = progress.blocks.compressed_bytes.load(Ordering::Relaxed);
    check(&cancel)?;

    progress.set(Phase::Metadata);
    let mut meta = build(
        &Inputs {
            tree: &tree,
            deduped: &deduped,
            pieces: &pieces,
            blocks,
            block_size: block_size as u32,
        },
        &options.attrs,
    );
    if options.categorize.is_some() && options.category_names {
        record_categories(&mut meta, &plans, &block_streams, options.category_metadata);
    }
    let encoded = encode_metadata(&meta, &options.pack).map_err(|e| Error::Input(e.to_string()))?;
    let (algo, payload) = pack_section(&options.schema_compression, &encoded.schema)?;
    image.section(SectionType::METADATA_V2_SCHEMA, algo, &payload)?;
    let (algo, payload) = pack_section(&options.metadata_compression, &encoded.data)?;
    summary.metadata_bytes = payload.len() as u64;
    image.section(SectionType::METADATA_V2, algo, &payload)?;
    if let Some(entry) = &options.history {
        let history = hoard_format::write::encode_history(std::slice::from_ref(entry));
        let (algo, payload) = pack_section(&options.schema_compression, &history)?;
        image.section(SectionType::HISTORY, algo, &payload)?;
    }
    check(&cancel)?;
    summary.image_bytes = image.finish(options.section_index)?;
    progress.set(Phase::Done);
    Ok(summary)
}

/// The part of a file one fragment covers.
#[derive(Debug, Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
    /// The fragment is the whole file: holes may be kept, and a file that
    /// grew since the scan is noticed.
    whole: bool,
}

/// Feeds `range` of the file at `path` to the segmenter, holes as holes
/// when `sparse` and the range is the whole file; returns the number of
/// bytes (holes included) fed.
fn feed<S: crate::segment::BlockSink>(
    segmenter: &mut Segmenter<'_, S>,
    path: &Path,
    range: Range,
    sparse: bool,
    buf: &mut [u8],
    out: &mut Vec<Piece>,
    progress: &AtomicU64,
) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let (first, len) = (range.start, range.start + range.len);
    let regions = if sparse && range.whole {
        data_regions(&file, len)
    } else {
        vec![(first, len)]
    };
    let mut pos = first;
    for (start, end) in regions {
        if start > pos {
            segmenter.hole(start - pos, out);
            progress.fetch_add(start - pos, Ordering::Relaxed);
        }
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(start))?;
        let mut left = end - start;
        let mut region = (&mut file).take(left);
        while left > 0 {
            let n = match region.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            segmenter
                .add(&buf[..n], out)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            progress.fetch_add(n as u64, Ordering::Relaxed);
            left -= n as u64;
        }
        pos = end - left;
        if left > 0 {
            // The file shrank: stop here.
            return Ok(pos - first);
        }
    }
    if len > pos {
        segmenter.hole(len - pos, out);
        progress.fetch_add(len - pos, Ordering::Relaxed);
    }
    if range.whole {
        // Anything appended after the scan is left out; a file that grew
        // is reported by its size.
        use std::os::unix::fs::FileExt;
        let mut probe = [0u8; 1];
        if file.read_at(&mut probe, len)? > 0 {
            return Ok(len + 1);
        }
    }
    Ok(range.len)
}

/// The data regions (start, end) of an open file of length `len`, from
/// SEEK_DATA / SEEK_HOLE; the whole file where those are not supported.
fn data_regions(file: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    let fd = file.as_raw_fd();
    let mut regions = Vec::new();
    let mut pos = 0i64;
    let len = len as i64;
    while pos < len {
        // SAFETY: lseek on an open descriptor has no memory effects.
        let data = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if data < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole remains
            }
            return vec![(0, len as u64)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return vec![(0, len as u64)];
        }
        let end = hole.min(len);
        if end > data {
            regions.push((data as u64, end as u64));
        }
        pos = end.max(data + 1);
    }
    regions
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
    ] {
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

/// One stream of data: the fragments of one category (with one metadata),
/// segmented into blocks of their own and compressed alike.
struct StreamPlan {
    category: Category,
    compressor: Box<dyn hoard_codec::Compressor>,
    config: SegmentConfig,
    order: Order,
}

/// A plan per distinct category among `fragments`, the default category
/// first, then in the order the categorizers list their categories.
///
/// A category whose compressor works on units (FLAC: one frame of
/// samples) gets blocks of whole units and no segmenting, so that every
/// block holds whole units; one whose metadata its compressor cannot use
/// falls back to `default`'s spec.
fn plan_streams(
    options: &CreateOptions,
    fragments: &[Vec<Fragment>],
    default: &dyn hoard_codec::Compressor,
) -> Result<Vec<StreamPlan>> {
    let rank: Vec<&str> = crate::categorize::all_category_names();
    let mut categories: Vec<&Category> = fragments.iter().flatten().map(|f| &f.category).collect();
    categories.sort_by(|a, b| {
        let pos = |c: &Category| rank.iter().position(|n| *n == c.name);
        (pos(a), &a.metadata).cmp(&(pos(b), &b.metadata))
    });
    categories.dedup();
    let block_size = 1usize << options.block_size_bits;
    categories
        .into_iter()
        .map(|category| {
            let s = options
                .per_category
                .get(category.name)
                .cloned()
                .unwrap_or_default();
            let spec = s
                .compression
                .as_deref()
                .unwrap_or(&options.data_compression);
            let mut c = compressor(spec)?;
            let granularity = match c.granularity(category.metadata.as_deref()) {
                Ok(g) => g.max(1),
                Err(_) => {
                    c = compressor(&default.describe())?;
                    1
                }
            };
            let bits = s.window_bits.unwrap_or(options.window_bits);
            let window = if bits == 0 || granularity > 1 {
                0
            } else {
                1usize << bits
            };
            let shift = s.window_step_shift.unwrap_or(options.window_step_shift);
            Ok(StreamPlan {
                category: category.clone(),
                compressor: c,
                config: SegmentConfig {
                    block_size: (block_size / granularity).max(1) * granularity,
                    window,
                    step: (window >> shift).max(1),
                    lookback: s.lookback.unwrap_or(options.lookback),
                },
                order: s.order.unwrap_or(options.order),
            })
        })
        .collect()
}

/// Records the category of every block (and, when `with_metadata`, the
/// category metadata of the blocks that have one) in `meta`.
fn record_categories(
    meta: &mut hoard_format::metadata::Metadata,
    plans: &[StreamPlan],
    block_streams: &[usize],
    with_metadata: bool,
) {
    let mut names: Vec<&str> = Vec::new();
    let mut jsons: Vec<&str> = Vec::new();
    let mut block_categories = Vec::with_capacity(block_streams.len());
    let mut block_metadata = std::collections::BTreeMap::new();
    for (block, &stream) in block_streams.iter().enumerate() {
        let category = &plans[stream].category;
        let index = names
            .iter()
            .position(|n| *n == category.name)
            .unwrap_or_else(|| {
                names.push(category.name);
                names.len() - 1
            });
        block_categories.push(index as u32);
        if let (true, Some(json)) = (with_metadata, category.metadata.as_deref()) {
            let j = jsons.iter().position(|m| *m == json).unwrap_or_else(|| {
                jsons.push(json);
                jsons.len() - 1
            });
            block_metadata.insert(block as u32, j as u32);
        }
    }
    meta.category_names = Some(names.into_iter().map(String::from).collect());
    meta.block_categories = Some(block_categories);
    if !jsons.is_empty() {
        meta.category_metadata_json = Some(jsons.into_iter().map(String::from).collect());
        meta.block_category_metadata = Some(block_metadata);
    }
}
