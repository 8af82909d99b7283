//! Inode attributes: the owner, group and mode tables, the times, the
//! inode table and the file-system options that say how times are stored.

use super::inodes::Inodes;
use crate::tree::{Attrs, Kind, Time, Tree};
use hoard_format::metadata::{FsOptions, InodeData, InodeTable};
use std::collections::{BTreeMap, BTreeSet};

/// How owners, permissions and times are stored.
#[derive(Debug, Clone, Default)]
pub struct AttrOptions {
    /// Owner of every entry.
    pub set_owner: Option<u32>,
    /// Group of every entry.
    pub set_group: Option<u32>,
    /// Time of every entry (seconds).
    pub set_time: Option<i64>,
    /// Keep atime and ctime, not only mtime.
    pub keep_all_times: bool,
    /// Resolution of stored times in nanoseconds (1 s if `None`).
    pub time_resolution_ns: Option<u64>,
    /// Permission changes (`--chmod`).
    pub chmod: Option<crate::chmod::Chmod>,
    /// No time later than this is stored (`SOURCE_DATE_EPOCH`).
    pub clamp_time: Option<i64>,
    /// Creation time to record, if any.
    pub create_timestamp: Option<u64>,
}

/// The attribute tables.
pub(super) struct AttrTables {
    /// Distinct owners, sorted.
    pub(super) uids: Vec<u32>,
    /// Distinct groups, sorted.
    pub(super) gids: Vec<u32>,
    /// Distinct modes, sorted.
    pub(super) modes: Vec<u32>,
    /// Every inode's attributes, by inode number.
    pub(super) inodes: InodeTable,
    /// The time offsets' base.
    pub(super) timestamp_base: u64,
    /// How times are stored.
    pub(super) fs_options: FsOptions,
}

impl AttrTables {
    /// Builds the tables of `inodes`, with the overrides of `options`.
    pub(super) fn build(tree: &Tree, inodes: &Inodes, options: &AttrOptions) -> Self {
        // Adjusted anew on each pass: a copy of every inode's attributes
        // would cost 64 bytes per inode at the build's peak.
        let attrs = || {
            inodes
                .entries
                .iter()
                .map(|&e| adjust(&tree.entries[e].attrs, options))
        };
        let (uids, uid_index) = table(attrs().map(|a| a.uid));
        let (gids, gid_index) = table(attrs().map(|a| a.gid));
        let (modes, mode_index) = table(attrs().map(|a| a.mode));
        let times = Times::new(attrs(), options);
        let inodes = attrs()
            .zip(&inodes.entries)
            .map(|(a, &e)| {
                let nlink = match tree.entries[e].kind {
                    Kind::File { file } => tree.files[file].links,
                    _ => 1,
                };
                let (mtime_offset, mtime_subsec) = times.encode(a.mtime);
                let ((atime_offset, atime_subsec), (ctime_offset, ctime_subsec)) =
                    if options.keep_all_times {
                        (times.encode(a.atime), times.encode(a.ctime))
                    } else {
                        ((0, 0), (0, 0))
                    };
                InodeData {
                    mode_index: mode_index[&a.mode],
                    owner_index: uid_index[&a.uid],
                    group_index: gid_index[&a.gid],
                    atime_offset,
                    mtime_offset,
                    ctime_offset,
                    atime_subsec,
                    mtime_subsec,
                    ctime_subsec,
                    nlink_minus_one: nlink - 1,
                    ..InodeData::default()
                }
            })
            .collect();
        AttrTables {
            uids,
            gids,
            modes,
            inodes,
            timestamp_base: times.base as u64,
            fs_options: FsOptions {
                mtime_only: !options.keep_all_times,
                time_resolution_sec: times.resolution_sec,
                subsecond_resolution_nsec_multiplier: times.subsec_ns,
                inodes_have_nlink: true,
                ..FsOptions::default()
            },
        }
    }
}

/// Interns values into a sorted table of distinct values.
fn table<T: Ord + Copy>(values: impl Iterator<Item = T>) -> (Vec<T>, BTreeMap<T, u32>) {
    let set: BTreeSet<T> = values.collect();
    let list: Vec<T> = set.into_iter().collect();
    let index = list
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, i as u32))
        .collect();
    (list, index)
}

/// Applies owner, group, time and permission overrides.
pub(crate) fn adjust(a: &Attrs, options: &AttrOptions) -> Attrs {
    let mut a = *a;
    if let Some(uid) = options.set_owner {
        a.uid = uid;
    }
    if let Some(gid) = options.set_group {
        a.gid = gid;
    }
    if let Some(t) = options.set_time {
        let t = Time { sec: t, nsec: 0 };
        (a.atime, a.mtime, a.ctime) = (t, t, t);
    }
    if let Some(limit) = options.clamp_time {
        for t in [&mut a.atime, &mut a.mtime, &mut a.ctime] {
            if t.sec >= limit {
                *t = Time {
                    sec: limit,
                    nsec: 0,
                };
            }
        }
    }
    if let Some(chmod) = &options.chmod {
        a.mode = chmod.apply(a.mode);
    }
    a
}

/// How times are stored, as DwarFS reads them: `(base + offset) *
/// resolution` seconds, plus optional sub-second units. A time before
/// 1970 makes the base negative, stored in two's complement: the sum
/// wraps to the signed time DwarFS and hoard read.
struct Times {
    /// The earliest time, in units of the resolution.
    base: i64,
    /// Seconds per unit, when not 1.
    resolution_sec: Option<u32>,
    /// Nanoseconds per sub-second unit, when sub-seconds are stored.
    subsec_ns: Option<u32>,
}

impl Times {
    fn new(attrs: impl Iterator<Item = Attrs>, options: &AttrOptions) -> Self {
        let res = options.time_resolution_ns.unwrap_or(1_000_000_000).max(1);
        let (resolution_sec, subsec_ns) = if res >= 1_000_000_000 {
            let s = (res / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
            ((s > 1).then_some(s), None)
        } else {
            (None, Some(res as u32))
        };
        let step = u64::from(resolution_sec.unwrap_or(1));
        let times = attrs.flat_map(|a| {
            let mut v = vec![a.mtime];
            if options.keep_all_times {
                v.extend([a.atime, a.ctime]);
            }
            v
        });
        let min = times.map(|t| t.sec).min().unwrap_or(0);
        Times {
            base: min.div_euclid(step as i64),
            resolution_sec,
            subsec_ns,
        }
    }

    fn encode(&self, t: Time) -> (u64, u64) {
        let units = t
            .sec
            .div_euclid(i64::from(self.resolution_sec.unwrap_or(1)));
        let offset = units.saturating_sub(self.base).max(0) as u64;
        let subsec = self
            .subsec_ns
            .map_or(0, |ns| u64::from(t.nsec) / u64::from(ns));
        (offset, subsec)
    }
}
