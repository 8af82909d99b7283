//! Verifying an image: what `hoard check` reports.
//!
//! Every section's XXH3-64 and SHA-512/256 hashes are checked, then the
//! metadata: it decodes in full and its tables agree, a sound directory tree (valid, sorted, unique names; each
//! directory entered once with the right parent), every inode reachable,
//! every chunk inside its block. A full check also decompresses every block
//! and reads every file, naming each file that cannot be read (not for a
//! delta layer alone, whose files read only on its bases). An image with recovery data is read through it,
//! and the damage it finds is reported (see [`crate::damage`]). Problems
//! are collected as one-line messages. Of an encrypted image opened
//! without its key, only the sections (their hashes, and the signature
//! when keys are trusted) and the recovery data are checked, and the
//! report says that the contents were not.

use crate::damage::{damage_report, DamageReport};
use crate::walk;
use crate::{FileKind, Filesystem, Image, Result};
use rayon::prelude::*;
use std::collections::HashMap;

/// What a check found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Report {
    /// Number of sections.
    pub sections: usize,
    /// Number of blocks.
    pub blocks: usize,
    /// Number of inodes.
    pub inodes: usize,
    /// One line per problem; empty when the image is sound.
    pub problems: Vec<String>,
    /// What was not checked, and why (the contents of an encrypted image
    /// opened without its key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
    /// For an image with recovery data: its damage, and whether it can
    /// be repaired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<DamageReport>,
}

/// Adds what the recovery data of `image` says about its damage.
fn add_damage(report: &mut Report, image: &Image, fs: Option<&Filesystem>) {
    match damage_report(image, fs) {
        Some(Ok(damage)) => {
            if !damage.is_clean() {
                report.problems.extend(damage.problems());
            }
            report.recovery = Some(damage);
        }
        Some(Err(e)) => report.problems.push(e),
        None => {}
    }
}

/// Checks the sections of an image whose metadata may not load.
pub fn check_sections(image: &Image, report: &mut Report) {
    report.sections = image.sections().len();
    if let Some(p) = image.index_problem() {
        report.problems.push(format!("section index: {p}"));
    }
    if let Some(p) = image.cut_short() {
        report.problems.push(p.to_string());
    }
    let problems: Vec<String> = image
        .sections()
        .par_iter()
        .filter_map(|s| {
            image
                .verified_payload(s)
                .and_then(|_| image.verify_sha(s))
                .err()
                .map(|e| e.to_string())
        })
        .collect();
    report.problems.extend(problems);
}

/// Checks the image that `open` opens, as `hoard check` does: everything
/// when its metadata loads; otherwise its sections, or, when those are
/// sound, the error that kept the metadata from loading (`open` is then
/// called a second time). Of an encrypted image opened without its key,
/// only what can be checked without it. `full` also reads all data.
pub fn check_image(open: impl Fn() -> Result<Image>, cache_size: usize, full: bool) -> Report {
    // `Err(image)`: an encrypted image without its key.
    let opened = open().and_then(|image| match image.encryption() {
        Some(e) if !e.is_unlocked() => Ok(Err(image)),
        _ => Filesystem::from_image(image, cache_size).map(Ok),
    });
    let error = match opened {
        Ok(Err(locked)) => return check_locked(&locked),
        Ok(Ok(fs)) => {
            let mut report = check_filesystem(&fs, full);
            add_damage(&mut report, fs.image(), Some(&fs));
            return report;
        }
        Err(e) => e,
    };
    // The sections are checked too, since their damage is usually the cause.
    let mut report = Report::default();
    if let Ok(image) = open() {
        check_sections(&image, &mut report);
        add_damage(&mut report, &image, None);
    }
    if report.problems.is_empty() {
        report.problems.push(error.to_string());
    }
    report
}

/// Checks what can be checked of an encrypted image without its key:
/// its sections (against their hashes, and the signature if keys are
/// trusted) and its recovery data.
fn check_locked(image: &Image) -> Report {
    let mut report = Report::default();
    check_sections(image, &mut report);
    add_damage(&mut report, image, None);
    report.blocks = image
        .sections()
        .iter()
        .filter(|s| s.header.kind == hoard_format::section::SectionType::BLOCK)
        .count();
    if let Some(e) = image.encryption() {
        report.not_checked = Some(format!(
            "the contents (metadata, files) were not checked: the image is encrypted ({}) and no key was given",
            e.wrapping()
        ));
    }
    report
}

/// Adds the damage report of a file whose image did not open, from its
/// recovery data alone (see [`crate::damage::report_for_file`]).
pub fn add_file_damage(report: &mut Report, file: &crate::source::Source) {
    if report.recovery.is_some() {
        return;
    }
    match crate::damage::report_for_file(file) {
        Some(Ok(damage)) => {
            report.problems.extend(damage.problems());
            report.recovery = Some(damage);
        }
        Some(Err(e)) => report.problems.push(e),
        None => {}
    }
}

/// Checks an opened file system; `full` also reads all data.
pub fn check_filesystem(fs: &Filesystem, full: bool) -> Report {
    let mut report = Report::default();
    check_sections(fs.image(), &mut report);
    let before = report.problems.len();
    match fs.validate() {
        Ok(()) => check_metadata(fs, &mut report),
        Err(e) => report.problems.push(e.to_string()),
    }
    // Damaged blocks do not stop the data check: it names the files
    // they take with them.
    if full && report.problems.len() == before {
        check_data(fs, &mut report);
    }
    report.blocks = fs.block_count();
    report.inodes = fs.layout().count as usize;
    report
}

fn check_metadata(fs: &Filesystem, report: &mut Report) {
    let nodes = match walk::walk(fs, fs.root(), b"") {
        Ok(n) => n,
        Err(e) => {
            report.problems.push(e.to_string());
            return;
        }
    };
    let mut reached = vec![false; fs.layout().count as usize];
    let dir_paths: HashMap<u32, &[u8]> = nodes
        .iter()
        .filter(|n| n.kind == FileKind::Directory)
        .map(|n| (n.ino, n.path.as_slice()))
        .collect();
    for n in &nodes {
        reached[n.ino as usize] = true;
        if n.kind == FileKind::Directory && n.ino != fs.root() {
            match fs.parent(n.ino) {
                Ok(parent) if dir_paths.get(&parent) == Some(&parent_path(&n.path)) => {}
                Ok(parent) => report.problems.push(format!(
                    "directory '{}' has the wrong parent (inode {parent})",
                    String::from_utf8_lossy(&n.path)
                )),
                Err(e) => report.problems.push(e.to_string()),
            }
        }
        if let Err(e) = fs.stat(n.ino) {
            report
                .problems
                .push(format!("'{}': {e}", String::from_utf8_lossy(&n.path)));
        }
    }
    if let Some(ino) = reached.iter().position(|r| !r) {
        report
            .problems
            .push(format!("inode {ino} is not reachable from the root"));
    }
    for i in 0..fs.chunk_count() {
        if let Err(e) = fs.extent(i) {
            report.problems.push(e.to_string());
        }
    }
}

fn parent_path(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// Decompresses every block and reads every regular file completely.
fn check_data(fs: &Filesystem, report: &mut Report) {
    let problems: Vec<String> = (0..fs.block_count() as u32)
        .into_par_iter()
        .filter_map(|b| fs.block(b).err().map(|e| e.to_string()))
        .collect();
    report.problems.extend(problems);
    if fs.needs_bases() {
        return;
    }
    let files = match fs.files_in_data_order() {
        Ok(f) => f,
        Err(e) => {
            report.problems.push(e.to_string());
            return;
        }
    };
    let paths: HashMap<u32, Vec<u8>> = walk::walk(fs, fs.root(), b"")
        .map(|nodes| nodes.into_iter().map(|n| (n.ino, n.path)).collect())
        .unwrap_or_default();
    let problems: Vec<String> = files
        .par_iter()
        .filter_map(|&ino| {
            let e = fs.read_all(ino, |_| Ok(())).err()?;
            Some(match paths.get(&ino) {
                Some(path) => format!("cannot read '{}': {e}", String::from_utf8_lossy(path)),
                None => e.to_string(),
            })
        })
        .collect();
    report.problems.extend(problems);
}
