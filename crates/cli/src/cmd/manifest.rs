//! `hoard manifest`: print the manifest of a tree, an image or a manifest.

use crate::args::ManifestArgs;
use crate::manifest;
use anyhow::{Context, Result};
use std::io::Write;

/// Prints the manifest of `args.path` to standard output.
pub fn run(args: &ManifestArgs) -> Result<u8> {
    let image = &args.image;
    let entries = manifest::load(&args.path, &image.layers, image.force_stack, image.offset)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    manifest::write(&entries, &mut out).context("cannot write to standard output")?;
    out.flush().context("cannot write to standard output")?;
    Ok(0)
}
