//! The build of an image from a tree: [`create`] runs every stage in
//! turn, reading what [`crate::input`] gives and writing through
//! [`crate::output`].

use crate::blocks::{compress_blocks, compressor_memory, PoolLimits, StreamCodec};
use crate::categorize::{categorize, Category, Fragments, DEFAULT_CATEGORY};
use crate::dedupe::{dedupe, Content, DedupeOptions, DedupeProgress, Deduped};
use crate::delta::DeltaCounts;
use crate::metadata::Inputs;
use crate::options::CreateOptions;
use crate::order::Order;
use crate::output::ImageFile;
use crate::path_list::RankedLists;
use crate::progress::{Phase, Progress};
use crate::reference::References;
use crate::scan::{ScanProgress, Scanned};
use crate::sections::{build_metadata, write_history, write_metadata};
use crate::streams::{self, segment_streams, Layout, Segmented, StreamPlan};
use crate::summary::Summary;
use crate::tree::Tree;
use crate::{check_cancel, compressor, Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
    check_cancel(&cancel)?;
    // Spooled archive contents stay until the image is written.
    let _spool = scanned.spool;
    let container_config = scanned.container_config;
    let Subtracted {
        mut tree,
        counts: delta,
        holes: _holes,
        base,
    } = subtract_base(options, scanned.tree, progress)?;
    check_cancel(&cancel)?;
    let mut summary = Summary {
        counts: tree.counts(),
        warnings: scanned.warnings,
        delta,
        ..Summary::default()
    };
    progress.set(Phase::Hashing);
    let deduped = hash_contents(options, &tree, &progress.dedupe);
    check_cancel(&cancel)?;
    summary.count_contents(&tree, &deduped);
    progress.to_segment.store(
        deduped.contents.iter().map(|c| c.size).sum(),
        Ordering::Relaxed,
    );
    let mut lists = RankedLists::default();
    let fragments = categorize_contents(
        options,
        &tree,
        &deduped.contents,
        &mut lists,
        progress,
        &cancel,
    )?;
    let mut streams = streams::plan(options, &tree, &deduped.contents, &fragments, &mut lists)?;
    summary.lists = lists.reports();
    drop(lists);
    let references = match (&base, streams.plans.first()) {
        (Some(base), Some(plan)) => {
            progress.set(Phase::Comparing);
            // Half the memory limit: the other half is the build's.
            let budget = options.memory_limit / 2;
            Some(References::load(
                &base.stack,
                &base.names,
                plan.config.window,
                plan.config.step,
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
    check_cancel(&cancel)?;
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
    meta.container_config = container_config;
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
    check_cancel(&cancel)?;
    summary.image_bytes = image.finish(options.section_index)?;
    progress.set(Phase::Done);
    Ok(summary)
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
    crate::input::scan(options, &scan_options, progress)
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
    let cache = crate::input::images::block_cache()?;
    let base = crate::input::images::open_stack(&delta.bases, options, &cache, delta.force_stack)?;
    let mut layer = crate::delta::subtract(tree, &base, delta, &options.attrs, &progress.compared)?;
    if !delta.refer_to_base {
        return Ok(Subtracted {
            tree: layer.tree,
            counts: Some(layer.counts),
            holes: layer.holes,
            base: None,
        });
    }
    let names: Vec<String> = delta
        .bases
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
/// category), ranking the hotness list in `lists`.
#[inline(never)]
fn categorize_contents(
    options: &CreateOptions,
    tree: &Tree,
    contents: &[Content],
    lists: &mut RankedLists,
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
    let hot = c
        .hotness
        .as_ref()
        .map(|list| lists.get(list, tree, contents).of_content.as_slice());
    let fragments = categorize(
        tree,
        contents,
        options.sparse,
        c,
        hot,
        &progress.categorized,
    );
    check_cancel(cancel)?;
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
    if let Some(c) = &options.categorize {
        c.check().map_err(Error::Input)?;
    }
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
