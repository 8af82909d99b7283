//! `hoard create` (and `mkdwarfs`): pack a directory into an image, with a
//! live progress display and a summary at the end. Exit status 2 when some
//! entries could not be read (the image is still valid without them).

use super::progress::{human_bytes, with_display};
use crate::args::create::CreateArgs;
use anyhow::{anyhow, bail, Context, Result};
use hoard_format::write::PackOptions;
use hoard_writer::categorize::{CategorizeOptions, Categorizer, IncompressibleOptions};
use hoard_writer::chmod::Chmod;
use hoard_writer::filter::Filter;
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::parse::{parse_resolution, parse_time, Given, StreamOptions};
use hoard_writer::path_list::PathList;
use hoard_writer::{create, CreateOptions, Progress, Summary};
use std::sync::Arc;
use std::time::Instant;

/// Builds an image; returns the exit code. (`--layers` is
/// `create_layers::run`.)
pub fn run(args: &CreateArgs) -> Result<u8> {
    let options = options(args)?;
    if args.debug_filter {
        return debug_filter(args, options);
    }
    refuse_existing_object(args.image(), args.force)?;
    let cancel = super::interrupt::exit_on_signals()?;
    let progress = Progress::default();
    let quiet = args.no_progress || args.progress.as_deref() == Some("none") || args.json;
    let started = Instant::now();
    let summary = with_display(&progress, !quiet, || {
        create(&options, &progress, Arc::clone(&cancel))
    })
    .context("cannot create image")?;
    let elapsed = started.elapsed().as_secs_f64();
    if args.log_level != "error" {
        for w in &summary.warnings {
            eprintln!("warning: {w}");
        }
    }
    if args.json {
        println!("{}", json(&summary, elapsed));
    } else if !matches!(args.log_level.as_str(), "error" | "warn") {
        print_summary(&summary, elapsed);
    }
    Ok(if summary.warnings.is_empty() { 0 } else { 2 })
}

/// Refuses an `s3://bucket/key` output that exists (unless `force`),
/// before any work (the writer asks again when it starts the upload).
pub(super) fn refuse_existing_object(output: &std::path::Path, force: bool) -> Result<()> {
    match hoard_writer::objects::s3_output(output) {
        Some((bucket, key)) if !force => Ok(hoard_writer::objects::refuse_existing(bucket, key)?),
        _ => Ok(()),
    }
}

/// Turns the command line into writer options.
pub(super) fn options(args: &CreateArgs) -> Result<CreateOptions> {
    let level =
        Level::get(args.level).ok_or_else(|| anyhow!("level {} out of range", args.level))?;
    let mut o = CreateOptions::at_level(args.input.clone(), args.image().to_path_buf(), level);
    o.output = args.protect.options(args.image(), args.force, args.fsync)?;
    if let Some(b) = args.block_size_bits {
        o.block_size_bits = b;
    }
    if let Some(c) = &args.codecs.metadata_compression {
        o.set_metadata_compression(c.clone());
    }
    if let Some(c) = &args.codecs.schema_compression {
        o.schema_compression = c.clone();
    }
    let hotness = args
        .hotness_list
        .as_deref()
        .map(PathList::read)
        .transpose()
        .map_err(anyhow::Error::msg)?
        .map(Arc::new);
    if let Some(list) = &args.categorize {
        let categorizers = Categorizer::parse_list(list).map_err(anyhow::Error::msg)?;
        o.categorize = (!categorizers.is_empty()).then_some(CategorizeOptions {
            categorizers,
            incompressible: IncompressibleOptions {
                min_input_size: args.incompressible_min_input_size as u64,
                block_size: args.incompressible_block_size.max(1),
                fragments: args.incompressible_fragments,
                ratio: args.incompressible_ratio,
                zstd_level: args.incompressible_zstd_level,
            },
            hotness: hotness.clone(),
        });
        o.per_category = hoard_writer::level::category_defaults(args.level);
    }
    if let Some(list) = hotness {
        // Checked here: a level's own categorizers do not take the list.
        let runs_hotness = o.categorize.as_ref().is_some_and(|c| c.hotness.is_some());
        if !runs_hotness {
            bail!(
                "--hotness-list {} is for the hotness categorizer: add --categorize=hotness",
                list.file().display()
            );
        }
    }
    let given = |option, values| Given { option, values };
    let (window_size, window_step) = delta_windows(args);
    StreamOptions {
        compression: given("-C", &args.codecs.compression),
        window_size: given("-W", &window_size),
        window_step: given("-w", &window_step),
        lookback: given("-B", &args.lookback),
        order: given("--order", &args.order),
    }
    .apply(&mut o)
    .map_err(anyhow::Error::msg)?;
    o.category_names = !args.no_category_names;
    o.category_metadata = !args.no_category_names && !args.no_category_metadata;
    args.resources.apply(&mut o);
    o.scan.with_devices = args.with_devices;
    o.scan.with_specials = args.with_specials;
    o.scan.remove_empty_dirs = args.remove_empty_dirs;
    o.scan.no_xattrs = args.no_xattrs;
    o.scan.continue_on_error = args.continue_on_error;
    o.scan.xattr_filter = args
        .xattr_filter
        .as_deref()
        .map(hoard_writer::scan::xattr_filter)
        .transpose()?;
    o.sparse = !args.no_sparse_files;
    if let Some(list) = &args.input_list {
        let text = if list.as_os_str() == "-" {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
                .context("standard input")?;
            buf
        } else {
            std::fs::read(list)
                .with_context(|| format!("cannot read input list '{}'", list.display()))?
        };
        o.scan.only = Some(hoard_writer::scan::InputList::parse(&text));
    }
    if !args.filters.is_empty() {
        o.filter = Some(Filter::parse(&args.filters)?);
    }
    let source_date_epoch = history::source_date_epoch().map_err(anyhow::Error::msg)?;
    let now = history::now().map_err(anyhow::Error::msg)?;
    o.attrs.set_owner = args.set_owner;
    o.attrs.set_group = args.set_group;
    o.attrs.set_time = args
        .set_time
        .as_deref()
        .map(|t| parse_time(t, now))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    o.attrs.keep_all_times = args.keep_all_times;
    o.attrs.time_resolution_ns = args
        .time_resolution
        .as_deref()
        .map(parse_resolution)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    o.attrs.chmod = args
        .chmod
        .as_deref()
        .map(Chmod::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    o.attrs.clamp_time = source_date_epoch;
    o.attrs.create_timestamp = (!args.no_create_timestamp).then_some(now.max(0) as u64);
    o.pack = PackOptions::parse(&args.pack_metadata).map_err(anyhow::Error::msg)?;
    o.section_index = !args.no_section_index;
    if !args.base.is_empty() {
        args.keys.apply(&mut o)?;
        o.delta = Some(hoard_writer::delta::DeltaOptions {
            bases: args.base.clone(),
            trust_mtime: args.trust_mtime,
            opaque_dirs: args.opaque_dirs,
            force_stack: args.force_stack,
            metacopy: args.metacopy,
            refer_to_base: args.delta,
        });
    }
    o.platform = args
        .platform
        .as_deref()
        .map(hoard_oci::Platform::parse)
        .transpose()?;
    o.registry = args.registry.options()?;
    o.history = args.history.entry(now);
    Ok(o)
}

/// `--debug-filter`: shows what the filters decide, builds nothing.
fn debug_filter(args: &CreateArgs, mut options: CreateOptions) -> Result<u8> {
    let mut filter = options.filter.take().unwrap_or_default();
    filter.record();
    options.filter = Some(filter);
    let scan_options = hoard_writer::scan::ScanOptions {
        with_devices: args.with_devices,
        with_specials: args.with_specials,
        no_xattrs: true,
        ..Default::default()
    };
    hoard_writer::input::scan(&options, &scan_options, &Default::default())?;
    for d in options.filter.iter().flat_map(Filter::decisions) {
        let slash = if d.is_dir { "/" } else { "" };
        let sign = if d.included { '+' } else { '-' };
        println!("{sign} /{}{slash}", String::from_utf8_lossy(&d.path));
    }
    Ok(0)
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

pub(super) fn print_summary(s: &Summary, secs: f64) {
    let c = &s.counts;
    println!(
        "scanned {} directories, {} symlinks, {} files ({} hard links), {} devices, {} fifos/sockets",
        c.dirs,
        c.symlinks,
        c.files,
        c.file_entries - c.files,
        c.devices,
        c.specials
    );
    println!(
        "original size: {}, {} duplicate files (saved {})",
        human_bytes(s.original_bytes),
        s.duplicate_files,
        human_bytes(s.duplicate_bytes)
    );
    println!(
        "segmenting: {} stored, {} found in earlier data{}",
        human_bytes(s.segments.stored),
        human_bytes(s.segments.matched),
        if s.segments.holes > 0 {
            format!(", {} in holes", human_bytes(s.segments.holes))
        } else {
            String::new()
        }
    );
    println!(
        "{} blocks, {} compressed ({:.1}% of stored); metadata {}",
        s.blocks,
        human_bytes(s.block_bytes),
        percent(s.block_bytes, s.segments.stored),
        human_bytes(s.metadata_bytes)
    );
    for l in &s.lists {
        println!(
            "list {}: {} paths, {} not files of the tree",
            l.file.display(),
            l.listed,
            l.unmatched
        );
    }
    if let Some(d) = &s.delta {
        println!(
            "layer: {} entries kept ({} as attributes only), {} unchanged left out, {} whiteouts, {} opaque directories",
            d.kept, d.metacopy, d.unchanged, d.whiteouts, d.opaque
        );
    }
    println!(
        "image: {} ({:.2}% of the original), built in {secs:.2} s",
        human_bytes(s.image_bytes),
        percent(s.image_bytes, s.original_bytes)
    );
}

fn json(s: &Summary, secs: f64) -> serde_json::Value {
    let c = &s.counts;
    serde_json::json!({
        "directories": c.dirs,
        "symlinks": c.symlinks,
        "files": c.files,
        "file_entries": c.file_entries,
        "devices": c.devices,
        "specials": c.specials,
        "original_bytes": s.original_bytes,
        "duplicate_files": s.duplicate_files,
        "duplicate_bytes": s.duplicate_bytes,
        "stored_bytes": s.segments.stored,
        "matched_bytes": s.segments.matched,
        "hole_bytes": s.segments.holes,
        "blocks": s.blocks,
        "block_bytes": s.block_bytes,
        "metadata_bytes": s.metadata_bytes,
        "image_bytes": s.image_bytes,
        "seconds": secs,
        "warnings": s.warnings,
        "layer": s.delta.map(|d| serde_json::json!({
            "kept": d.kept,
            "unchanged": d.unchanged,
            "whiteouts": d.whiteouts,
            "opaque": d.opaque,
            "metacopy": d.metacopy,
        })),
        "lists": s.lists.iter().map(|l| serde_json::json!({
            "file": l.file.to_string_lossy(),
            "listed": l.listed,
            "unmatched": l.unmatched,
        })).collect::<Vec<_>>(),
    })
}

/// The segmenter window size and step options: as given, except that a
/// delta layer defaults to 256-byte windows every 64 bytes, which find
/// the short runs edits leave between changes (0.36x instead of 0.46x of
/// a plain layer on 10 zstd releases; see crates/writer/README.md).
fn delta_windows(args: &CreateArgs) -> (Vec<String>, Vec<String>) {
    let default = |given: &Vec<String>, value: &str| {
        if args.delta && given.is_empty() {
            vec![value.to_string()]
        } else {
            given.clone()
        }
    };
    (
        default(&args.window_size, "8"),
        default(&args.window_step, "2"),
    )
}
