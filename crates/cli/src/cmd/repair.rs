//! `hoard repair`: restore the original bytes of a damaged image from its
//! recovery data (see the hoard-recovery crate).

use crate::args::RepairArgs;
use anyhow::{Context, Result};

/// What a repair did, for `--json`.
#[derive(Debug, serde::Serialize)]
struct Report {
    image: String,
    output: String,
    damaged_shards: usize,
    damaged_parity_shards: usize,
    damaged_recovery_parts: Vec<String>,
    damaged: Vec<[u64; 2]>,
    written: bool,
}

/// Repairs the image; returns the exit code.
pub fn run(args: &RepairArgs) -> Result<u8> {
    let output = args.output.as_deref().unwrap_or(&args.image);
    let repair = hoard_recovery::repair_file(&args.image, output)
        .with_context(|| format!("cannot repair image '{}'", args.image.display()))?;
    let damage = &repair.damage;
    let report = Report {
        image: args.image.display().to_string(),
        output: output.display().to_string(),
        damaged_shards: damage.data_shards.len(),
        damaged_parity_shards: damage.parity_shards.len(),
        damaged_recovery_parts: damage.recovery_parts.clone(),
        damaged: damage.ranges().iter().map(|r| [r.start, r.end]).collect(),
        written: repair.written,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if damage.is_empty() {
        println!("{}: no damage found", report.image);
    } else {
        for [a, b] in &report.damaged {
            println!("repaired bytes {a}..{b}");
        }
        if report.damaged_parity_shards > 0 || !report.damaged_recovery_parts.is_empty() {
            println!("rebuilt the damaged recovery data");
        }
        println!("{}: repaired, written to {}", report.image, report.output);
    }
    Ok(0)
}
