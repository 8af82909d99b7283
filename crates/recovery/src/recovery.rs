//! The recovery data of one image: which bytes are damaged, and those
//! bytes repaired.

use crate::encode::{build_section, rs_error};
use crate::layout::{decode_table, Layout, DESCRIPTOR_SIZE, SECTION_HEADER_SIZE, TABLE_PAGE};
use crate::{locate, read_shard, Error, Protected, ReadAt, Result, SECTION_TYPE};
use hoard_format::section::{self, MAGIC, MAJOR_VERSION, MAX_MINOR_VERSION};
use rayon::prelude::*;
use reed_solomon_simd::ReedSolomonDecoder;
use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use xxhash_rust::xxh3::xxh3_64;

/// The recovery data of an image, ready to check and repair it.
#[derive(Debug)]
pub struct Recovery {
    layout: Layout,
    /// Expected checksum of each data shard, then each parity shard;
    /// `None` where both copies of the table lost it.
    sums: Vec<Option<u64>>,
    /// Stripes repaired so far (for reads), or why they cannot be.
    fixed: Mutex<HashMap<u32, Arc<StripeFix>>>,
}

/// The repaired data shards of a stripe, or why it cannot be repaired.
type StripeFix = std::result::Result<HashMap<u64, Vec<u8>>, String>;

/// What a scan of an image with recovery data found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Damaged data shards (protected bytes), in order.
    pub data_shards: Vec<u64>,
    /// Damaged parity shards.
    pub parity_shards: Vec<u64>,
    /// Stripes with more damage than their parity can repair.
    pub lost_stripes: Vec<u32>,
    /// Damage to the recovery section's own header, descriptors and
    /// checksum tables (rebuilt by a repair).
    pub recovery_parts: Vec<String>,
    /// Data shards whose checksum is lost in both table copies, so their
    /// state is unknown (they are taken as sound).
    pub unverifiable_shards: u64,
    /// See [`Damage::ranges`].
    byte_ranges: Vec<Range<u64>>,
}

impl Damage {
    /// Whether nothing is damaged.
    pub fn is_empty(&self) -> bool {
        self.data_shards.is_empty()
            && self.parity_shards.is_empty()
            && self.recovery_parts.is_empty()
    }

    /// Whether the recovery data can repair all of it.
    pub fn repairable(&self) -> bool {
        self.lost_stripes.is_empty()
    }

    /// File byte ranges of the damaged protected bytes, merged: exact
    /// where the stripe can be repaired (the bytes that differ from the
    /// repair), whole shards where it cannot.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.byte_ranges
    }

    /// File byte ranges of the damaged protected bytes that cannot be
    /// repaired, merged.
    pub fn lost_ranges(&self, layout: &Layout) -> Vec<Range<u64>> {
        shard_ranges(
            layout,
            self.data_shards.iter().copied().filter(|&j| {
                self.lost_stripes
                    .binary_search(&layout.stripe_of(j))
                    .is_ok()
            }),
        )
    }
}

/// Merged file ranges of protected shards.
fn shard_ranges(layout: &Layout, shards: impl Iterator<Item = u64>) -> Vec<Range<u64>> {
    let size = layout.shard_size as u64;
    let protected: Vec<Range<u64>> = shards
        .map(|j| j * size..((j + 1) * size).min(layout.protected_len()))
        .collect();
    merged(protected)
}

/// Byte ranges, sorted and merged.
fn merged(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Protected ranges where shard `j` (`raw`) differs from its repair.
fn differences(j: u64, raw: &[u8], good: &[u8], protected_len: u64) -> Vec<Range<u64>> {
    let base = j * raw.len() as u64;
    let mut out: Vec<Range<u64>> = Vec::new();
    for (k, _) in raw
        .iter()
        .zip(good)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
    {
        let at = base + k as u64;
        if at >= protected_len {
            break;
        }
        // Bytes a damage left as they were (a zero zeroed) do not split
        // a range.
        match out.last_mut() {
            Some(last) if last.end + MERGE_GAP >= at => last.end = at + 1,
            _ => out.push(at..at + 1),
        }
    }
    out
}

/// Differing bytes this close together are reported as one range.
const MERGE_GAP: u64 = 64;

impl Recovery {
    /// The recovery data at the end of a file, found with one small
    /// read; `None` without it (or when its last descriptor is damaged).
    pub fn find(file: &dyn ReadAt) -> Option<Self> {
        Self::load(file, locate::at_end(file)?)
    }

    /// The recovery data of the recovery section whose header is at `pos`.
    pub fn at_section(file: &dyn ReadAt, pos: u64) -> Option<Self> {
        Self::load(file, locate::at_section(file, pos)?)
    }

    /// The recovery data found by reading the whole file, for an image
    /// too damaged to lead to it.
    pub fn search(file: &dyn ReadAt) -> Option<Self> {
        Self::load(file, locate::search(file)?)
    }

    fn load(file: &dyn ReadAt, layout: Layout) -> Option<Self> {
        let count = layout.shard_count() + layout.parity_count();
        let mut copies = [Vec::new(), Vec::new()];
        for (copy, start) in copies.iter_mut().zip(layout.table_starts()) {
            let mut buf = vec![0u8; layout.table_len() as usize];
            if file.read_at(start, &mut buf).is_ok() {
                *copy = buf;
            }
        }
        let sums = decode_table([&copies[0], &copies[1]], count);
        Some(Recovery {
            layout,
            sums,
            fixed: Mutex::new(HashMap::new()),
        })
    }

    /// The layout of the recovery data.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn sound(&self, e: u64, shard: &[u8]) -> bool {
        self.sums[e as usize].is_none_or(|s| s == xxh3_64(shard))
    }

    fn read_parity(&self, file: &dyn ReadAt, q: u64) -> Result<Vec<u8>> {
        let mut shard = vec![0u8; self.layout.shard_size as usize];
        file.read_at(self.layout.parity_offset(q), &mut shard)?;
        Ok(shard)
    }

    /// Checks every shard of the image (in parallel) and the recovery
    /// data's own parts.
    pub fn damage(&self, file: &dyn ReadAt) -> Result<Damage> {
        let l = &self.layout;
        let protected = Protected { file, layout: l };
        let shards = l.shard_count();
        let data_shards: Vec<u64> = (0..shards)
            .into_par_iter()
            .map(|j| Ok((!self.sound(j, &read_shard(&protected, l, j)?)).then_some(j)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let parity_shards: Vec<u64> = (0..l.parity_count())
            .into_par_iter()
            .map(|q| Ok((!self.sound(shards + q, &self.read_parity(file, q)?)).then_some(q)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let mut bad = vec![(0u32, 0u32); l.stripes as usize];
        for &j in &data_shards {
            bad[l.stripe_of(j) as usize].0 += 1;
        }
        for &q in &parity_shards {
            bad[(q % l.stripes as u64) as usize].1 += 1;
        }
        let lost_stripes: Vec<u32> = (0..l.stripes)
            .filter(|&g| {
                let (d, p) = bad[g as usize];
                d > 0 && d + p > l.parity_shards
            })
            .collect();
        let byte_ranges = self.byte_ranges(file, &data_shards, &lost_stripes)?;
        Ok(Damage {
            byte_ranges,
            unverifiable_shards: self.sums[..shards as usize]
                .iter()
                .filter(|s| s.is_none())
                .count() as u64,
            data_shards,
            parity_shards,
            lost_stripes,
            recovery_parts: self.damaged_parts(file)?,
        })
    }

    /// The file ranges of damaged data shards: the bytes that differ
    /// from the repair where their stripe can be repaired, else the whole
    /// shards.
    fn byte_ranges(
        &self,
        file: &dyn ReadAt,
        shards: &[u64],
        lost: &[u32],
    ) -> Result<Vec<Range<u64>>> {
        let l = &self.layout;
        let protected = Protected { file, layout: l };
        let mut stripes: Vec<u32> = shards.iter().map(|&j| l.stripe_of(j)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let fixes: Vec<HashMap<u64, Vec<u8>>> = stripes
            .par_iter()
            .filter(|g| lost.binary_search(g).is_err())
            .map(|&g| self.repair_stripe(file, g))
            .collect::<Result<_>>()?;
        let mut ranges = Vec::new();
        for &j in shards {
            match fixes.iter().find_map(|f| f.get(&j)) {
                Some(good) => {
                    let raw = read_shard(&protected, l, j)?;
                    ranges.extend(differences(j, &raw, good, l.protected_len()));
                }
                None => {
                    let size = l.shard_size as u64;
                    ranges.push(j * size..((j + 1) * size).min(l.protected_len()));
                }
            }
        }
        Ok(merged(ranges))
    }

    /// The recovery section's header, descriptors and table pages that
    /// are damaged.
    fn damaged_parts(&self, file: &dyn ReadAt) -> Result<Vec<String>> {
        let l = &self.layout;
        let mut parts = Vec::new();
        let mut header = [0u8; SECTION_HEADER_SIZE as usize];
        file.read_at(l.section_start(), &mut header)?;
        let mut expected = header;
        overlay_header(l, &mut expected, 0);
        let mut payload = vec![0u8; l.payload_len() as usize];
        file.read_at(l.payload_start(), &mut payload)?;
        let hashes_hold = section::parse_version(&header)
            .and_then(|v| section::parse_header(&header, v))
            .and_then(|h| section::verify_xxh3(&h, &header, &payload))
            .is_ok();
        if header != expected || !hashes_hold {
            parts.push(format!(
                "recovery section header at offset {}",
                l.section_start()
            ));
        }
        for (n, start) in l.descriptor_starts().into_iter().enumerate() {
            let d = &payload[(start - l.payload_start()) as usize..][..DESCRIPTOR_SIZE as usize];
            if Layout::decode(d) != Some(*l) {
                parts.push(format!("recovery descriptor copy {}", n + 1));
            }
        }
        for (n, start) in l.table_starts().into_iter().enumerate() {
            let table = &payload[(start - l.payload_start()) as usize..][..l.table_len() as usize];
            let bad = table
                .chunks_exact(TABLE_PAGE as usize)
                .filter(|page| {
                    let (body, own) = page.split_at(TABLE_PAGE as usize - 8);
                    xxh3_64(body).to_le_bytes() != own
                })
                .count();
            if bad > 0 {
                parts.push(format!("{bad} page(s) of checksum table copy {}", n + 1));
            }
        }
        Ok(parts)
    }

    /// Repairs stripe `g` from the file: its damaged data shards, rebuilt.
    fn repair_stripe(&self, file: &dyn ReadAt, g: u32) -> Result<HashMap<u64, Vec<u8>>> {
        let l = &self.layout;
        let protected = Protected { file, layout: l };
        let size = l.shard_size as usize;
        let mut decoder =
            ReedSolomonDecoder::new(l.data_shards as usize, l.parity_shards as usize, size)
                .map_err(rs_error)?;
        let zeros = vec![0u8; size];
        let mut missing = Vec::new();
        for i in 0..l.data_shards {
            match l.data_shard(g, i) {
                Some(j) => {
                    let shard = read_shard(&protected, l, j)?;
                    if self.sound(j, &shard) {
                        decoder
                            .add_original_shard(i as usize, &shard)
                            .map_err(rs_error)?;
                    } else {
                        missing.push((i, j));
                    }
                }
                None => decoder
                    .add_original_shard(i as usize, &zeros)
                    .map_err(rs_error)?,
            }
        }
        if missing.is_empty() {
            return Ok(HashMap::new());
        }
        let mut parity = 0;
        for r in 0..l.parity_shards {
            let q = r as u64 * l.stripes as u64 + g as u64;
            let shard = self.read_parity(file, q)?;
            if self.sound(l.shard_count() + q, &shard) {
                decoder
                    .add_recovery_shard(r as usize, &shard)
                    .map_err(rs_error)?;
                parity += 1;
            }
        }
        if missing.len() > parity {
            return Err(Error::BeyondRepair(format!(
                "stripe {g}: {} damaged shards, {parity} sound parity shards",
                missing.len()
            )));
        }
        let result = decoder.decode().map_err(rs_error)?;
        let restored: HashMap<usize, &[u8]> = result.restored_original_iter().collect();
        let mut fixed = HashMap::new();
        for (i, j) in missing {
            let shard = restored
                .get(&(i as usize))
                .ok_or_else(|| Error::Invalid(format!("stripe {g}: shard {i} not restored")))?;
            if !self.sound(j, shard) {
                return Err(Error::BeyondRepair(format!(
                    "stripe {g}: the repaired shard {j} does not match its checksum"
                )));
            }
            fixed.insert(j, shard.to_vec());
        }
        Ok(fixed)
    }

    /// The repair of stripe `g`, made once and kept; also whether this
    /// call made it.
    fn stripe_fix(&self, file: &dyn ReadAt, g: u32) -> Result<(Arc<StripeFix>, bool)> {
        if let Some(fix) = self.fixed.lock().unwrap().get(&g) {
            return Ok((Arc::clone(fix), false));
        }
        let fix = match self.repair_stripe(file, g) {
            Ok(f) => Ok(f),
            Err(Error::Io(e)) => return Err(Error::Io(e)),
            Err(e) => Err(e.to_string()),
        };
        // Another reader may have repaired it meanwhile: keep the first.
        let mut fixed = self.fixed.lock().unwrap();
        if let Some(first) = fixed.get(&g) {
            return Ok((Arc::clone(first), false));
        }
        let fix = Arc::new(fix);
        fixed.insert(g, Arc::clone(&fix));
        Ok((fix, true))
    }

    /// Reads `buf.len()` bytes at file offset `offset` as they were
    /// written: every protected shard the read touches is checked, and a
    /// damaged one is taken from its repaired stripe. Returns the stripes
    /// this call repaired (each stripe is repaired once, then kept).
    pub fn read(&self, file: &dyn ReadAt, offset: u64, buf: &mut [u8]) -> Result<Vec<u32>> {
        file.read_at(offset, buf)?;
        let l = &self.layout;
        let end = offset + buf.len() as u64;
        overlay_header(l, buf, offset);
        let mut repaired = Vec::new();
        // The recovery section's own bytes (but for the fixed fields of its
        // header, laid over above) are read as they are.
        let part = offset..end.min(l.protected_len());
        if part.start < part.end {
            let p = part.start;
            let p_end = part.end;
            let size = l.shard_size as u64;
            let protected = Protected { file, layout: l };
            for j in p / size..p_end.div_ceil(size) {
                let shard = read_shard(&protected, l, j)?;
                if self.sound(j, &shard) {
                    continue;
                }
                let g = l.stripe_of(j);
                let (fix, new) = self.stripe_fix(file, g)?;
                let good = match fix.as_ref() {
                    Ok(shards) => shards.get(&j).ok_or_else(|| {
                        Error::BeyondRepair(format!("shard {j} changed while being repaired"))
                    })?,
                    Err(why) => {
                        return Err(Error::BeyondRepair(format!(
                            "damaged beyond repair at offset {}: {why}",
                            j * size
                        )))
                    }
                };
                if new {
                    repaired.push(g);
                }
                // The overlap of shard j with this part, in buf.
                let from = (j * size).max(p);
                let to = ((j + 1) * size).min(p_end);
                let in_buf = (from - offset) as usize;
                let in_shard = (from - j * size) as usize;
                let n = (to - from) as usize;
                buf[in_buf..in_buf + n].copy_from_slice(&good[in_shard..in_shard + n]);
            }
        }
        Ok(repaired)
    }

    /// Writes the whole file, repaired, to `out`: the protected bytes with
    /// every damaged stripe rebuilt, and the recovery section made anew
    /// from them (so its own damage is gone too). Refuses, writing
    /// nothing, when the damage is beyond repair.
    pub fn write_repaired(
        &self,
        file: &dyn ReadAt,
        damage: &Damage,
        out: &mut dyn Write,
    ) -> Result<()> {
        let l = &self.layout;
        if !damage.repairable() {
            return Err(Error::BeyondRepair(format!(
                "{} of {} stripes have more damage than their parity",
                damage.lost_stripes.len(),
                l.stripes
            )));
        }
        let mut stripes: Vec<u32> = damage.data_shards.iter().map(|&j| l.stripe_of(j)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let fixes: HashMap<u64, Vec<u8>> = stripes
            .par_iter()
            .map(|&g| self.repair_stripe(file, g))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let repaired = Repaired {
            protected: Protected { file, layout: l },
            fixes: &fixes,
            shard_size: l.shard_size as u64,
        };
        let section = build_section(l, &repaired)?;
        let differs = section
            .checksums
            .iter()
            .zip(&self.sums)
            .any(|(made, stored)| stored.is_some_and(|s| s != *made));
        if differs {
            return Err(Error::BeyondRepair(
                "the repaired image does not match the stored checksums".into(),
            ));
        }
        copy(&repaired, 0..l.protected_len(), out)?;
        out.write_all(&section.bytes)?;
        Ok(())
    }
}

/// Writes protected bytes `range` of `from` to `out`.
fn copy(from: &dyn ReadAt, range: Range<u64>, out: &mut dyn Write) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = range.start;
    while pos < range.end {
        let n = (range.end - pos).min(buf.len() as u64) as usize;
        from.read_at(pos, &mut buf[..n])?;
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
    Ok(())
}

/// Protected bytes with repaired shards laid over them.
struct Repaired<'a> {
    protected: Protected<'a>,
    fixes: &'a HashMap<u64, Vec<u8>>,
    shard_size: u64,
}

impl ReadAt for Repaired<'_> {
    fn size(&self) -> u64 {
        self.protected.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.protected.read_at(offset, buf)?;
        let end = offset + buf.len() as u64;
        for j in offset / self.shard_size..end.div_ceil(self.shard_size) {
            if let Some(good) = self.fixes.get(&j) {
                let from = (j * self.shard_size).max(offset);
                let to = ((j + 1) * self.shard_size).min(end);
                let n = (to - from) as usize;
                let at = (from - j * self.shard_size) as usize;
                buf[(from - offset) as usize..][..n].copy_from_slice(&good[at..at + n]);
            }
        }
        Ok(())
    }
}

/// Lays the fixed fields of the recovery section's header (all but its
/// hashes) over `buf`, which holds file bytes from `offset` on.
fn overlay_header(l: &Layout, buf: &mut [u8], offset: u64) {
    let mut fixed = [0u8; SECTION_HEADER_SIZE as usize];
    fixed[..6].copy_from_slice(MAGIC);
    fixed[6] = MAJOR_VERSION;
    fixed[7] = MAX_MINOR_VERSION;
    fixed[48..52].copy_from_slice(&l.section_number.to_le_bytes());
    fixed[52..54].copy_from_slice(&SECTION_TYPE.0.to_le_bytes());
    fixed[56..64].copy_from_slice(&l.payload_len().to_le_bytes());
    for (k, &b) in fixed.iter().enumerate() {
        if (8..48).contains(&k) {
            continue;
        }
        let pos = l.section_start() + k as u64;
        if pos >= offset && pos < offset + buf.len() as u64 {
            buf[(pos - offset) as usize] = b;
        }
    }
}
