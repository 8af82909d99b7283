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
use anyhow::{anyhow, Context, Result};
use hoard_reader::{Image, OpenOptions};
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
    let trusted = crate::trust::trusted_keys(&args.trust)?
        .ok_or_else(|| anyhow!("verify needs the keys to trust: --trust PUB (or HOARD_TRUST)"))?;
    let options = OpenOptions {
        offset: args.offset,
        trust: Some(trusted),
        expect: args.expect.expectations(),
        ..OpenOptions::default()
    };
    let name = args.image.display().to_string();
    let image = Image::open(&args.image, &options).with_context(|| format!("image '{name}'"))?;
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
        let claimed = if claims.is_empty() {
            String::new()
        } else {
            format!(" ({claims})")
        };
        println!(
            "{}: signed by {}{claimed}; all {} sections verified",
            verdict.image, verdict.signed_by, verdict.sections
        );
    } else {
        for p in &verdict.problems {
            eprintln!("{}: {p}", verdict.image);
        }
    }
    Ok(u8::from(!verdict.problems.is_empty()))
}
