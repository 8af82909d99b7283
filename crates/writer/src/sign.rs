//! Signing an image that exists (`hoard sign`): its bytes up to any
//! earlier signature or recovery data are copied to a temporary file
//! beside the output, the signature (and new recovery data of the same
//! percent, when the image had some) appended, and the file renamed into
//! place when complete.

use crate::{Error, Result};
use hoard_format::section::{HeaderLayout, SectionType};
use hoard_reader::{Image, OpenOptions};
use hoard_trust::{SecretKey, Signature};
use rayon::prelude::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Signs the image at `input` with `key` and writes it to `output` (which
/// may be `input`; another existing file only when `force`). Returns the
/// size of the signed image.
pub fn sign_image(input: &Path, output: &Path, key: &SecretKey, force: bool) -> Result<u64> {
    let image =
        Image::open(input, &OpenOptions::default()).map_err(|e| Error::Input(e.to_string()))?;
    if image.version().layout() != HeaderLayout::V2 {
        return Err(Error::Input(format!(
            "format {} has no section hashes and cannot be signed (`hoard rewrite` it first)",
            image.version()
        )));
    }
    let same = output == input
        || output
            .canonicalize()
            .ok()
            .is_some_and(|o| input.canonicalize().ok() == Some(o));
    if !same && !force && output.symlink_metadata().is_ok() {
        return Err(Error::Input(format!(
            "{}: already exists (use -f to overwrite)",
            output.display()
        )));
    }
    let listed = image.listed_sections();
    let count = listed
        .iter()
        .position(|s| is_appended(s.header.kind))
        .unwrap_or(listed.len());
    let signed = &listed[..count];
    let end = signed.last().map_or(image.offset(), |s| s.end());
    check_sound(&image, signed)?;

    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".hoard-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    let io = |e| Error::io(output, e);
    let source = std::fs::File::open(input).map_err(|e| Error::io(input, e))?;
    let copied = std::io::copy(&mut source.take(end), tmp.as_file_mut()).map_err(io)?;
    if copied != end {
        return Err(Error::Input(format!(
            "{}: changed while it was read",
            input.display()
        )));
    }
    let ranges: Vec<_> = signed.iter().map(|s| s.offset..s.end()).collect();
    let digest =
        hoard_trust::digest::of_file(tmp.as_file(), image.offset(), &ranges).map_err(io)?;
    let number = u32::try_from(count).map_err(|_| Error::Input("too many sections".into()))?;
    let section = Signature::sign(digest, key).section(number, image.version());
    let file = tmp.as_file_mut();
    file.seek(SeekFrom::End(0))
        .and_then(|_| file.write_all(&section))
        .map_err(io)?;
    if let Some((recovery, _)) = image.recovery() {
        let layout = hoard_recovery::Layout::plan(
            end + section.len() as u64,
            number + 1,
            recovery.layout().percent,
        )
        .map_err(|e| Error::Input(e.to_string()))?;
        let built = hoard_recovery::build_section(&layout, tmp.as_file())
            .map_err(|e| Error::Input(e.to_string()))?;
        tmp.as_file_mut().write_all(&built.bytes).map_err(io)?;
    }
    let mode = std::fs::metadata(input)
        .map_err(|e| Error::io(input, e))?
        .permissions();
    tmp.as_file().set_permissions(mode).map_err(io)?;
    let size = tmp.as_file().metadata().map_err(io)?.len();
    tmp.persist(output).map_err(|e| io(e.error))?;
    Ok(size)
}

/// Whether sections of `kind` are appended after the signed ones.
fn is_appended(kind: SectionType) -> bool {
    kind == hoard_trust::SECTION_TYPE || kind == hoard_recovery::SECTION_TYPE
}

/// Refuses to sign damaged bytes: the sections to sign must pass their
/// hashes, and an image with recovery data must have no damage at all.
fn check_sound(image: &Image, signed: &[hoard_reader::Section]) -> Result<()> {
    let damaged =
        |why: String| Error::Input(format!("the image is damaged ({why}); `hoard check` it"));
    if let Some((recovery, raw)) = image.recovery() {
        let damage = recovery.damage(raw).map_err(|e| damaged(e.to_string()))?;
        if !damage.is_empty() {
            return Err(damaged("its recovery data finds damage".into()));
        }
    }
    signed
        .par_iter()
        .try_for_each(|s| image.verified_payload(s).map(drop))
        .map_err(|e| damaged(e.to_string()))
}
