//! Damage to an image with recovery data: which bytes, which sections and
//! files they belong to, and whether the recovery data can repair it.

use crate::walk;
use crate::{Extent, FileKind, Filesystem, Image};
use std::collections::BTreeSet;
use std::ops::Range;

/// What the recovery data of an image says about its damage.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DamageReport {
    /// The recovery data's size, in percent of the image.
    pub percent: u32,
    /// Damaged byte ranges `[start, end)` of the file.
    pub damaged: Vec<[u64; 2]>,
    /// Damaged ranges that cannot be repaired.
    pub lost: Vec<[u64; 2]>,
    /// Damaged shards of the recovery data itself.
    pub damaged_parity_shards: usize,
    /// Damaged parts of the recovery section's header, descriptors and
    /// checksum tables.
    pub damaged_recovery_parts: Vec<String>,
    /// Data shards (4 KiB) whose checksums are lost in both copies of the
    /// table, so their damage cannot be told (they are taken as sound).
    pub unverifiable_shards: u64,
    /// Whether `hoard repair` can restore the original bytes.
    pub repairable: bool,
    /// The sections the damage touches, e.g. `BLOCK 3`, `METADATA_V2`.
    pub sections: Vec<String>,
    /// Files with data in damaged bytes.
    pub affected_files: Vec<String>,
    /// Files with data in bytes that cannot be repaired; `["*"]` when the
    /// metadata itself is lost, so no file can be read.
    pub lost_files: Vec<String>,
}

impl DamageReport {
    /// Whether nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty()
            && self.damaged_parity_shards == 0
            && self.damaged_recovery_parts.is_empty()
    }

    /// One line per finding, for `hoard check`.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .damaged
            .iter()
            .map(|[a, b]| format!("damaged bytes {a}..{b} ({} bytes)", b - a))
            .collect();
        if self.damaged_parity_shards > 0 {
            out.push(format!(
                "{} damaged shards of recovery data",
                self.damaged_parity_shards
            ));
        }
        out.extend(
            self.damaged_recovery_parts
                .iter()
                .map(|p| format!("damaged {p}")),
        );
        if self.unverifiable_shards > 0 {
            out.push(format!(
                "{} shards cannot be verified: their checksums are lost",
                self.unverifiable_shards
            ));
        }
        if !self.sections.is_empty() {
            out.push(format!("damaged sections: {}", self.sections.join(", ")));
        }
        if !self.affected_files.is_empty() {
            out.push(format!(
                "affected files: {}",
                self.affected_files.join(", ")
            ));
        }
        if self.repairable {
            out.push("the recovery data can repair all damage: run `hoard repair`".into());
        } else {
            out.push(format!(
                "damage exceeds the recovery data ({}%): it cannot be repaired",
                self.percent
            ));
            if self.lost_files == ["*"] {
                out.push("lost: image structure (headers or metadata), so every file".into());
            } else {
                out.extend(self.lost_files.iter().map(|f| format!("lost file: {f}")));
            }
        }
        out
    }
}

/// The damage report of an image read through recovery data (`None`
/// without it). `fs` is the file system if it opened, to name files.
pub fn damage_report(
    image: &Image,
    fs: Option<&Filesystem>,
) -> Option<Result<DamageReport, String>> {
    let (recovery, raw) = image.recovery()?;
    let damage = match recovery.damage(raw) {
        Ok(d) => d,
        Err(e) => return Some(Err(format!("recovery data: {e}"))),
    };
    let layout = recovery.layout();
    let damaged = damage.ranges();
    let lost = damage.lost_ranges(layout);
    let (sections, damaged_blocks) = touched(image, damaged);
    let (lost_sections, lost_blocks) = touched(image, &lost);
    let metadata_lost = lost_sections.iter().any(|s| !s.starts_with("BLOCK"));
    let (affected_files, lost_files) = match fs {
        Some(fs) => (
            files_in(fs, &damaged_blocks),
            if metadata_lost {
                vec!["*".to_string()]
            } else {
                files_in(fs, &lost_blocks)
            },
        ),
        None if !lost.is_empty() => (Vec::new(), vec!["*".to_string()]),
        None => (Vec::new(), Vec::new()),
    };
    let pair = |r: &Range<u64>| [r.start, r.end];
    Some(Ok(DamageReport {
        percent: layout.percent,
        damaged: damaged.iter().map(pair).collect(),
        lost: lost.iter().map(pair).collect(),
        damaged_parity_shards: damage.parity_shards.len(),
        damaged_recovery_parts: damage.recovery_parts.clone(),
        unverifiable_shards: damage.unverifiable_shards,
        repairable: damage.repairable(),
        sections,
        affected_files,
        lost_files,
    }))
}

/// The sections (by name) and blocks (by number) that byte ranges touch.
fn touched(image: &Image, ranges: &[Range<u64>]) -> (Vec<String>, BTreeSet<u32>) {
    let mut names = Vec::new();
    let mut blocks = BTreeSet::new();
    let mut block = 0u32;
    for s in image.sections() {
        let is_block = s.header.kind == hoard_format::section::SectionType::BLOCK;
        if ranges.iter().any(|r| r.start < s.end() && s.offset < r.end) {
            if is_block {
                names.push(format!("BLOCK {block}"));
                blocks.insert(block);
            } else {
                names.push(s.header.kind.name());
            }
        }
        if is_block {
            block += 1;
        }
    }
    (names, blocks)
}

/// Paths of the regular files with data in `blocks`.
fn files_in(fs: &Filesystem, blocks: &BTreeSet<u32>) -> Vec<String> {
    if blocks.is_empty() {
        return Vec::new();
    }
    let Ok(nodes) = walk::walk(fs, fs.root(), b"") else {
        return vec!["*".to_string()];
    };
    nodes
        .iter()
        .filter(|n| n.kind == FileKind::Regular)
        .filter(|n| {
            fs.extents(n.ino).map_or(true, |extents| {
                extents
                    .iter()
                    .any(|e| matches!(e, Extent::Data { block, .. } if blocks.contains(block)))
            })
        })
        .map(|n| String::from_utf8_lossy(&n.path).into_owned())
        .collect()
}

/// The damage report of a file whose image cannot be opened, from its
/// recovery data alone (`None` without any): no file can be named, so
/// lost damage loses them all.
pub fn report_for_file(file: &crate::source::Source) -> Option<Result<DamageReport, String>> {
    let recovery = hoard_recovery::Recovery::search(file)?;
    let damage = match recovery.damage(file) {
        Ok(d) => d,
        Err(e) => return Some(Err(format!("recovery data: {e}"))),
    };
    let layout = recovery.layout();
    let pair = |r: &Range<u64>| [r.start, r.end];
    let lost = damage.lost_ranges(layout);
    Some(Ok(DamageReport {
        percent: layout.percent,
        damaged: damage.ranges().iter().map(pair).collect(),
        damaged_parity_shards: damage.parity_shards.len(),
        damaged_recovery_parts: damage.recovery_parts.clone(),
        unverifiable_shards: damage.unverifiable_shards,
        repairable: damage.repairable(),
        lost_files: if lost.is_empty() {
            Vec::new()
        } else {
            vec!["*".to_string()]
        },
        lost: lost.iter().map(pair).collect(),
        sections: Vec::new(),
        affected_files: Vec::new(),
    }))
}
