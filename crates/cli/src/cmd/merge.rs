//! `hoard merge`: join images into one (see `hoard_writer::merge`); parts
//! may be URLs, and the output an `s3://` URL (uploaded as it is written,
//! completed when the merge succeeds).

use super::progress::human_bytes;
use crate::args::MergeArgs;
use anyhow::{anyhow, Context, Result};
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::merge::merge_reusing_blocks;
use hoard_writer::options::{Input, Parts};
use hoard_writer::CreateOptions;

/// Merges the parts; returns the exit code.
pub fn run(args: &MergeArgs) -> Result<u8> {
    let level =
        Level::get(args.level).ok_or_else(|| anyhow!("level {} out of range", args.level))?;
    let images = args.parts.clone();
    let mut parts = if args.union {
        Parts {
            images,
            names: None,
            dedupe: true,
        }
    } else if args.names.is_empty() {
        Parts::under_own_names(images)?
    } else {
        Parts {
            images,
            names: Some(args.names.clone()),
            dedupe: true,
        }
    };
    parts.dedupe = !args.no_dedupe;
    super::create::refuse_existing_object(&args.output, args.force)?;
    let mut o = CreateOptions::at_level(Input::Parts(parts), args.output.clone(), level);
    // Contents are read from the images, where the categorizers, which
    // read files, have nothing to look at.
    o.categorize = None;
    o.output = args.protect.options(&args.output, args.force, false)?;
    args.keys.apply(&mut o)?;
    if let Some(c) = &args.compression {
        o.data_compression = c.clone();
    }
    if let Some(b) = args.block_size_bits {
        o.block_size_bits = b;
    }
    if let Some(c) = &args.metadata_compression {
        o.set_metadata_compression(c.clone());
    }
    if let Some(n) = args.workers {
        o.workers = n.max(1);
    }
    if !args.no_history {
        let now = history::now().map_err(anyhow::Error::msg)?;
        o.history = Some(history::this_run(
            std::env::args().collect(),
            Some(now.max(0) as u64),
        ));
    }
    let cancel = super::interrupt::exit_on_signals()?;
    let summary = if args.recompress {
        hoard_writer::create(&o, &Default::default(), cancel)
    } else {
        merge_reusing_blocks(&o)
    }
    .context("cannot merge the images")?;
    for w in &summary.warnings {
        eprintln!("hoard: warning: {w}");
    }
    if !args.no_progress {
        let c = &summary.counts;
        println!(
            "merged {} images: {} entries, {} in {} blocks ({} duplicate files, {}), image {}",
            args.parts.len(),
            c.dirs + c.symlinks + c.file_entries + c.devices + c.specials,
            human_bytes(summary.original_bytes),
            summary.blocks,
            summary.duplicate_files,
            human_bytes(summary.duplicate_bytes),
            human_bytes(summary.image_bytes)
        );
    }
    Ok(if summary.warnings.is_empty() { 0 } else { 2 })
}
