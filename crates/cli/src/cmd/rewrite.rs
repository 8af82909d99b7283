//! `hoard rewrite` and `mkdwarfs --recompress`: recompress an image's
//! blocks and/or metadata, optionally rebuilding the metadata with new
//! owner, time, permission and packing options.

use super::create_args::RewriteArgs;
use super::progress::human_bytes;
use anyhow::{anyhow, bail, Context, Result};
use hoard_format::write::PackOptions;
use hoard_writer::chmod::Chmod;
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::parse::{parse_time, split};
use hoard_writer::rewrite::{rewrite, Rebuild, RewriteOptions};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Rewrites an image; returns the exit code.
pub fn run(args: &RewriteArgs) -> Result<u8> {
    let level =
        Level::get(args.level).ok_or_else(|| anyhow!("level {} out of range", args.level))?;
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
        split("-C", &args.compression, |s| Ok(s.to_string())).map_err(anyhow::Error::msg)?;
    let options = RewriteOptions {
        input: args.input.clone(),
        offset: args.offset,
        output: args.output.clone(),
        force: args.force,
        data_compression: blocks.then(|| {
            compression
                .general
                .clone()
                .unwrap_or_else(|| level.data.into())
        }),
        per_category: compression.per_category,
        metadata_compression: metadata.then(|| {
            args.metadata_compression
                .clone()
                .unwrap_or_else(|| level.metadata.into())
        }),
        schema_compression: args
            .schema_compression
            .clone()
            .unwrap_or_else(|| level.schema.into()),
        rebuild,
        pack: PackOptions::parse(&args.pack_metadata).map_err(anyhow::Error::msg)?,
        workers: args
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        memory_limit: args
            .memory_limit
            .map_or_else(hoard_writer::pipeline::default_memory_limit, |l| l as u64),
        history: (!args.no_history).then(|| {
            history::this_run(
                std::env::args().collect(),
                (!args.no_history_timestamps).then_some(now.max(0) as u64),
            )
        }),
        section_index: !args.no_section_index,
        recovery: args.recovery,
        header: args
            .header
            .as_ref()
            .map(|h| {
                std::fs::read(h)
                    .with_context(|| format!("cannot read header file '{}'", h.display()))
            })
            .transpose()?,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&cancel)).context("signal handler")?;
    }
    let progress = Default::default();
    let summary = rewrite(&options, &progress, cancel)
        .with_context(|| format!("cannot rewrite image '{}'", args.input.display()))?;
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
