//! `hoard verify`: is the image signed by a trusted key, and is every
//! byte as signed?
//!
//! The image is opened with the keys trusted (which checks the signature,
//! its claims against `--expect-name` and `--min-version` and its expiry,
//! the section index and the metadata), then every block is read and
//! checked against the signature. Recovery data, which the signature does
//! not cover, must find no damage: a file it would repair in reads is
//! not the file that was signed.

use crate::args::VerifyArgs;
use crate::target::of_paths;
use crate::trust::ReadKeys;
use anyhow::{anyhow, bail, Result};
use hoard_reader::open::{open, Form};
use rayon::prelude::*;

/// What `verify` found.
#[derive(Debug, serde::Serialize)]
struct Verdict {
    image: String,
    signed_by: String,
    /// What the signature claims: name, version, expiry.
    claims: serde_json::Value,
    sections: usize,
    problems: Vec<String>,
}

/// Verifies the image; returns the exit code (0 only when every byte is
/// as signed by a trusted key).
pub fn run(args: &VerifyArgs) -> Result<u8> {
    let keys = ReadKeys {
        trust: args.trust.clone(),
        expect: args.expect.expectations(),
        ..ReadKeys::default()
    };
    let target = of_paths(vec![args.image.clone()], Form::Sections, args.offset, &keys)?;
    if target.options.open.trust.is_none() {
        bail!("verify needs the keys to trust: --trust PUB (or HOARD_TRUST)");
    }
    let name = args.image.display().to_string();
    let image = open(&target)?.into_sections()?;
    let signed = image
        .signed()
        .ok_or_else(|| anyhow!("internal error: image '{name}' opened trusted is not signed"))?;
    let signed_by = signed.key().fingerprint();
    let claims = signed.claims().clone();
    let sections = image.listed_sections();
    let mut problems: Vec<String> = sections
        .par_iter()
        .filter(|s| s.header.kind != hoard_recovery::SECTION_TYPE)
        .filter_map(|s| image.verified_payload(s).err().map(|e| e.to_string()))
        .collect();
    if let Some((recovery, raw)) = image.recovery() {
        match recovery.damage(raw) {
            Ok(damage) if damage.is_empty() => {}
            Ok(_) => problems.push(
                "damaged bytes, which its recovery data repairs in reads (`hoard repair` fixes the file)"
                    .into(),
            ),
            Err(e) => problems.push(format!("recovery data: {e}")),
        }
    }
    let verdict = Verdict {
        image: name,
        signed_by,
        claims: crate::trust::claims_json(&claims),
        sections: sections.len(),
        problems,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else if verdict.problems.is_empty() {
        println!(
            "{}: signed by {}{}; all {} sections verified",
            verdict.image,
            verdict.signed_by,
            crate::trust::claims_suffix(&claims),
            verdict.sections
        );
    } else {
        for p in &verdict.problems {
            eprintln!("{}: {p}", verdict.image);
        }
    }
    Ok(u8::from(!verdict.problems.is_empty()))
}
