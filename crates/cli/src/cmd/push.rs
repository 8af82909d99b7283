//! `hoard push`: stores an image in a registry as an OCI artifact, which
//! `hoard mount docker://…` (and `ls`, `cat`, `extract`, `info`) then read
//! by byte ranges.
//!
//! The image's blob goes first, then the empty config, then the manifest,
//! so the tag appears only when everything it names is there.

use crate::args::PushArgs;
use crate::target::of_paths;
use crate::trust::ReadKeys;
use anyhow::{anyhow, bail, Context, Result};
use hoard_oci::registry::{artifact, ImageRef, Registry, Target};
use hoard_oci::Digest;
use hoard_reader::open::{open, Form};
use hoard_reader::ImageOffset;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::Digest as _;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Pushes the image; returns the exit code.
pub fn run(args: &PushArgs) -> Result<u8> {
    let destination = ImageRef::parse(&args.destination)?;
    let Target::Tag(tag) = &destination.target else {
        bail!("push needs a tag (docker://HOST/REPO:TAG), not a digest");
    };
    let signer = signer_of(&args.image)?;
    let name = args.image.display().to_string();
    let (digest, size) =
        sha256_of(&args.image).with_context(|| format!("cannot read image '{name}'"))?;
    let registry = Registry::new(&destination, &args.registry.options()?)?;
    let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr_with_hz(5));
    if !args.quiet {
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix("pushing");
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let path = args.image.clone();
    let open_image = move || File::open(&path).map(|f| Box::new(f) as Box<dyn Read + Send>);
    registry.push_blob(&digest, size, &open_image, &|sent| bar.set_position(sent))?;
    bar.finish_and_clear();
    let config = Digest::sha256_of(artifact::EMPTY_CONFIG);
    let empty = || Ok(Box::new(artifact::EMPTY_CONFIG) as Box<dyn Read + Send>);
    registry.push_blob(
        &config,
        artifact::EMPTY_CONFIG.len() as u64,
        &empty,
        &|_| {},
    )?;
    let image = artifact::HoardImage {
        digest: digest.clone(),
        size,
        signer: signer.clone(),
    };
    let title = args
        .image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let manifest = artifact::manifest(&image, &title);
    let pushed = registry.push_manifest(tag, artifact::MANIFEST_TYPE, &manifest)?;
    if args.json {
        let out = serde_json::json!({
            "image": name,
            "destination": destination.to_string(),
            "digest": pushed.to_string(),
            "blob": digest.to_string(),
            "size": size,
            "signer": signer,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let signed = signer
            .map(|s| format!(", signed by {s}"))
            .unwrap_or_default();
        println!(
            "{name}: pushed to {destination} ({pushed}, {}{signed})",
            super::progress::human_bytes(size)
        );
    }
    Ok(0)
}

/// The fingerprint of the key the image says signed it (checked when
/// HOARD_TRUST names keys; a reader with `--trust` checks it anyway).
/// Opening the image also refuses a file that is not a hoard image.
fn signer_of(image: &Path) -> Result<Option<String>> {
    let mut target = of_paths(
        vec![image.to_path_buf()],
        Form::Sections,
        ImageOffset::Auto,
        &ReadKeys::default(),
    )?;
    // The file is pushed as it is: an archive is not converted.
    target.archives = None;
    let opened = open(&target)
        .and_then(|o| o.into_sections())
        .with_context(|| format!("cannot open image '{}'", image.display()))?;
    if let Some(signed) = opened.signed() {
        return Ok(Some(signed.key().fingerprint()));
    }
    let Some(section) = opened.find(hoard_trust::SECTION_TYPE) else {
        return Ok(None);
    };
    let payload = opened
        .verified_payload(section)
        .map_err(|e| anyhow!("image '{}': its signature: {e}", image.display()))?;
    let signature = hoard_trust::Signature::parse(&payload)
        .map_err(|e| anyhow!("image '{}': its signature: {e}", image.display()))?;
    Ok(Some(signature.key.fingerprint()))
}

/// The SHA-256 digest and size of a file.
fn sha256_of(path: &Path) -> std::io::Result<(Digest, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let digest = Digest::parse(&format!("sha256:{hex}")).map_err(std::io::Error::other)?;
    Ok((digest, size))
}
