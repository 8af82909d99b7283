//! `hoard rewrite` and `mkdwarfs --recompress`: recompress an image's
//! blocks and/or metadata, optionally rebuilding the metadata with new
//! owner, time, permission and packing options. Several images (layers)
//! are flattened into one; `--hotness-list` lays one image out again,
//! the same way, with its hot files first.

use super::progress::human_bytes;
use crate::args::create::RewriteArgs;
use anyhow::{anyhow, bail, Context, Result};
use hoard_format::write::PackOptions;
use hoard_writer::categorize::{CategorizeOptions, Categorizer};
use hoard_writer::chmod::Chmod;
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::parse::{parse_time, split};
use hoard_writer::path_list::PathList;
use hoard_writer::rewrite::{rewrite, Rebuild, RewriteOptions};
use hoard_writer::{CreateOptions, Input};
use std::sync::Arc;

/// Rewrites an image (or flattens a stack of them); returns the exit
/// code.
pub fn run(args: &RewriteArgs) -> Result<u8> {
    let level =
        Level::get(args.level).ok_or_else(|| anyhow!("level {} out of range", args.level))?;
    if args.inputs.len() > 1 || args.hotness_list.is_some() {
        return flatten(args, level);
    }
    let input = &args.inputs[0];
    let (blocks, metadata) = match args.recompress.as_str() {
        "all" => (true, true),
        "block" => (true, false),
        "metadata" => (false, true),
        "none" => (false, false),
        other => bail!("--recompress '{other}': expected all, block, metadata or none"),
    };
    let now = history::now().map_err(anyhow::Error::msg)?;
    let rebuild = args
        .rebuild_metadata
        .then(|| -> Result<Rebuild> {
            Ok(Rebuild {
                set_owner: args.set_owner,
                set_group: args.set_group,
                set_time: args
                    .set_time
                    .as_deref()
                    .map(|t| parse_time(t, now).map(|t| t.max(0) as u64))
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                chmod: args
                    .chmod
                    .as_deref()
                    .map(Chmod::parse)
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
            })
        })
        .transpose()?;
    let compression =
        split("-C", &args.codecs.compression, |s| Ok(s.to_string())).map_err(anyhow::Error::msg)?;
    let keys = args.keys.load()?;
    let options = RewriteOptions {
        input: input.clone(),
        offset: args.offset,
        output: args.protect.options(&args.output, args.force, args.fsync)?,
        data_compression: blocks.then(|| {
            compression
                .general
                .clone()
                .unwrap_or_else(|| level.data.into())
        }),
        per_category: compression.per_category,
        metadata_compression: metadata.then(|| {
            args.codecs
                .metadata_compression
                .clone()
                .unwrap_or_else(|| level.metadata.into())
        }),
        schema_compression: args
            .codecs
            .schema_compression
            .clone()
            .unwrap_or_else(|| level.schema.into()),
        rebuild,
        pack: PackOptions::parse(&args.pack_metadata).map_err(anyhow::Error::msg)?,
        workers: args
            .resources
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        memory_limit: args
            .resources
            .memory_limit
            .map_or_else(hoard_writer::options::default_memory_limit, |l| l as u64),
        history: args.history.entry(now),
        section_index: !args.no_section_index,
        trust: keys.trust,
        identities: keys.identities,
        decrypt: args.keys.decrypt,
    };
    let cancel = super::interrupt::exit_on_signals()?;
    let progress = Default::default();
    let summary = rewrite(&options, &progress, cancel)
        .with_context(|| format!("cannot rewrite image '{}'", input.display()))?;
    if !args.no_progress {
        println!(
            "rewrote {} blocks: {} -> {}",
            summary.blocks,
            human_bytes(summary.input_bytes),
            human_bytes(summary.output_bytes)
        );
    }
    Ok(0)
}

/// Writes the merged tree of a stack of images (or one image, with
/// `--hotness-list`) as one image, with the codecs of `level` where the
/// options name none.
fn flatten(args: &RewriteArgs, level: Level) -> Result<u8> {
    if args.rebuild_metadata {
        bail!("the metadata is written anew: --rebuild-metadata does not apply");
    }
    // Blocks are reused as they are unless they are to be recompressed.
    let reuse_blocks = match args.recompress.as_str() {
        "all" | "block" => false,
        "metadata" | "none" => true,
        other => bail!("--recompress '{other}': expected all, block, metadata or none"),
    };
    let hotness = args
        .hotness_list
        .as_deref()
        .map(PathList::read)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if reuse_blocks && hotness.is_some() {
        bail!("--hotness-list lays the data out again: it takes --recompress all or block");
    }
    let input = Input::Stack(args.inputs.clone());
    let mut o = CreateOptions::at_level(input, args.output.clone(), level);
    o.output = args.protect.options(&args.output, args.force, args.fsync)?;
    args.keys.apply(&mut o)?;
    // Checked here: the writer reads the stack as it is.
    let cache = hoard_writer::input::images::block_cache()?;
    drop(hoard_writer::input::images::open_stack(
        &args.inputs,
        &o,
        &cache,
        args.force_stack,
    )?);
    // The layers' contents are read from their images, where the
    // categorizers, which read files, have nothing to look at; the
    // hotness categorizer goes by path.
    o.categorize = hotness.map(|list| CategorizeOptions {
        categorizers: vec![Categorizer::Hotness],
        incompressible: Default::default(),
        hotness: Some(Arc::new(list)),
    });
    if o.categorize.is_some() {
        o.per_category = hoard_writer::level::category_defaults(args.level);
    }
    let compression =
        split("-C", &args.codecs.compression, |s| Ok(s.to_string())).map_err(anyhow::Error::msg)?;
    if let Some(c) = compression.general {
        o.data_compression = c;
    }
    for (name, c) in compression.per_category {
        o.per_category.entry(name).or_default().compression = Some(c);
    }
    if let Some(c) = &args.codecs.metadata_compression {
        o.metadata_compression = c.clone();
    }
    if let Some(c) = &args.codecs.schema_compression {
        o.schema_compression = c.clone();
    }
    args.resources.apply(&mut o);
    o.pack = PackOptions::parse(&args.pack_metadata).map_err(anyhow::Error::msg)?;
    o.section_index = !args.no_section_index;
    o.history = args
        .history
        .entry(history::now().map_err(anyhow::Error::msg)?);
    let cancel = super::interrupt::exit_on_signals()?;
    let summary = if reuse_blocks {
        hoard_writer::flatten::flatten_reusing_blocks(&o)
    } else {
        hoard_writer::create(&o, &Default::default(), cancel)
    }
    .context("cannot flatten the layers")?;
    for w in &summary.warnings {
        eprintln!("hoard: warning: {w}");
    }
    for l in &summary.lists {
        if l.unmatched > 0 {
            eprintln!(
                "hoard: {}: {} of {} paths are not files of the image",
                l.file.display(),
                l.unmatched,
                l.listed
            );
        }
    }
    if !args.no_progress {
        let what = match args.inputs.len() {
            1 => "laid the image out again".to_string(),
            n => format!("flattened {n} layers"),
        };
        println!(
            "{what}: {} entries, {} in {} blocks, image {}",
            summary.counts.dirs
                + summary.counts.symlinks
                + summary.counts.file_entries
                + summary.counts.devices
                + summary.counts.specials,
            human_bytes(summary.original_bytes),
            summary.blocks,
            human_bytes(summary.image_bytes)
        );
    }
    Ok(if summary.warnings.is_empty() { 0 } else { 2 })
}
