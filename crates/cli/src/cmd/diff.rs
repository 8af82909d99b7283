//! `hoard diff`: compare two trees, images or manifests entry by entry.

use crate::args::DiffArgs;
use crate::manifest::{self, diff};
use anyhow::{bail, Result};

/// Prints the differences; exit code 0 when there are none, 1 when there
/// are (an error, returned, exits 2: see `main`).
pub fn run(args: &DiffArgs) -> Result<u8> {
    let ignore: Vec<String> = args
        .ignore
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = ignore.iter().find(|f| !diff::FIELDS.contains(&f.as_str())) {
        bail!(
            "--ignore: unknown field '{bad}' (fields: {})",
            diff::FIELDS.join(", ")
        );
    }
    let image = &args.image;
    let (a, b) = rayon::join(
        || manifest::load(&args.first, &image.layers, image.force_stack, image.offset),
        || manifest::load(&args.second, &[], false, image.offset),
    );
    let (a, b) = (a?, b?);
    let differences = diff::compare(&a, &b, &ignore);
    for d in &differences {
        println!("{d}");
    }
    if !args.quiet {
        let verdict = if differences.is_empty() {
            "the same"
        } else {
            "different"
        };
        eprintln!(
            "{} and {}: {verdict} ({} and {} entries, {} differences)",
            args.first.display(),
            args.second.display(),
            a.len(),
            b.len(),
            differences.len()
        );
    }
    Ok(u8::from(!differences.is_empty()))
}
