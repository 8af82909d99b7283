//! `-o perfmon=fuse+reader`: latency histograms per operation, reported as
//! percentiles at unmount and live in the root's `user.dwarfs.perfmon`
//! attribute. DwarFS's component names `filesystem_v2`, `inode_reader_v2`
//! and `block_cache` are accepted as `reader`.
//!
//! Each histogram has 8 buckets per power of two of nanoseconds (about 9%
//! wide), kept in atomic counters, so recording costs two relaxed adds.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two.
const SUB: usize = 8;
/// Powers of two of nanoseconds covered (up to about 73 minutes).
const POWERS: usize = 42;

/// The operations measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// FUSE `lookup`.
    Lookup,
    /// FUSE `getattr`.
    Getattr,
    /// FUSE `readlink`.
    Readlink,
    /// FUSE `open`.
    Open,
    /// FUSE `read`, from request to reply.
    Read,
    /// FUSE `readdir` and `readdirplus`.
    Readdir,
    /// FUSE `statfs`.
    Statfs,
    /// FUSE `getxattr` and `listxattr`.
    Xattr,
    /// FUSE `lseek`.
    Lseek,
    /// Reader: reading file data (block lookup and decompression).
    ReaderRead,
    /// Reader: listing a directory.
    ReaderReaddir,
}

const OPS: [(Op, &str); 11] = [
    (Op::Lookup, "fuse.lookup"),
    (Op::Getattr, "fuse.getattr"),
    (Op::Readlink, "fuse.readlink"),
    (Op::Open, "fuse.open"),
    (Op::Read, "fuse.read"),
    (Op::Readdir, "fuse.readdir"),
    (Op::Statfs, "fuse.statfs"),
    (Op::Xattr, "fuse.xattr"),
    (Op::Lseek, "fuse.lseek"),
    (Op::ReaderRead, "reader.read"),
    (Op::ReaderReaddir, "reader.readdir"),
];

impl Op {
    fn is_reader(self) -> bool {
        matches!(self, Op::ReaderRead | Op::ReaderReaddir)
    }
}

struct Histogram {
    buckets: Vec<AtomicU64>,
    max: AtomicU64,
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros() as usize; // >= 3
    let sub = ((ns >> (power - 3)) & (SUB as u64 - 1)) as usize;
    ((power - 2) * SUB + sub).min(POWERS * SUB - 1)
}

/// The upper bound (ns) of bucket `b`.
fn bucket_bound(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let power = b / SUB + 2;
    let sub = (b % SUB) as u64;
    ((SUB as u64 + sub + 1) << (power - 3)) - 1
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: (0..POWERS * SUB).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }

    fn record(&self, ns: u64) {
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
    }

    /// Count, then the latencies at each quantile of `qs`.
    fn quantiles(&self, qs: &[f64]) -> (u64, Vec<u64>) {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let out = qs
            .iter()
            .map(|q| {
                let rank = ((total as f64) * q).ceil().max(1.0) as u64;
                let mut seen = 0;
                counts
                    .iter()
                    .position(|&c| {
                        seen += c;
                        seen >= rank
                    })
                    .map_or(0, bucket_bound)
                    .min(self.max.load(Ordering::Relaxed))
            })
            .collect();
        (total, out)
    }
}

/// The latency recorder of a mount.
pub struct PerfMon {
    fuse: bool,
    reader: bool,
    histograms: Vec<Histogram>,
}

fn human(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=9_999_999 => format!("{:.1}us", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

impl PerfMon {
    /// A recorder for the `+`-separated components (`fuse`, `reader`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut p = PerfMon {
            fuse: false,
            reader: false,
            histograms: OPS.iter().map(|_| Histogram::new()).collect(),
        };
        for c in spec.split('+').filter(|c| !c.is_empty()) {
            match c {
                "fuse" => p.fuse = true,
                "reader" | "filesystem_v2" | "inode_reader_v2" | "block_cache" => p.reader = true,
                other => {
                    return Err(format!(
                        "mount option 'perfmon': unknown component '{other}' (fuse, reader)"
                    ))
                }
            }
        }
        Ok(p)
    }

    /// Whether `op` is being recorded.
    pub fn enabled(&self, op: Op) -> bool {
        if op.is_reader() {
            self.reader
        } else {
            self.fuse
        }
    }

    /// Records one operation's latency.
    pub fn record(&self, op: Op, took: Duration) {
        if self.enabled(op) {
            let i = OPS.iter().position(|(o, _)| *o == op).unwrap_or(0);
            self.histograms[i].record(took.as_nanos().min(u128::from(u64::MAX)) as u64);
        }
    }

    /// The report, and for a remote image a line of what was fetched:
    /// requests (retries included), bytes, failed requests, bytes from the
    /// on-disk cache, and the requests' mean and longest latency.
    pub fn report_with(&self, remote: Option<hoard_reader::source::FetchStats>) -> String {
        let mut out = self.report();
        if let Some(r) = remote {
            let mean = (r.latency_us * 1000).checked_div(r.requests).unwrap_or(0);
            let _ = writeln!(
                out,
                "remote: {} requests, {} bytes fetched, {} failed, {} bytes from cache, latency mean {} max {}",
                r.requests,
                r.bytes,
                r.failures,
                r.cache_bytes,
                human(mean),
                human(r.max_latency_us * 1000)
            );
        }
        out
    }

    /// The report: one line per operation seen, with count and latency
    /// percentiles.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "operation", "count", "p50", "p90", "p99", "p99.9", "max"
        );
        for ((op, name), h) in OPS.iter().zip(&self.histograms) {
            if !self.enabled(*op) {
                continue;
            }
            let (count, q) = h.quantiles(&[0.5, 0.9, 0.99, 0.999]);
            if count == 0 {
                continue;
            }
            let _ = writeln!(
                out,
                "{name:<16} {count:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
                human(q[0]),
                human(q[1]),
                human(q[2]),
                human(q[3]),
                human(h.max.load(Ordering::Relaxed))
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bound_their_values() {
        let mut last = 0;
        for ns in (0..5000).chain([1 << 20, 123_456_789, 1 << 40]) {
            let b = bucket(ns);
            assert!(b >= last || ns < 5000, "{ns}");
            assert!(bucket_bound(b) >= ns, "{ns}: bound {}", bucket_bound(b));
            assert!(
                bucket_bound(b) <= ns + ns / 8 + 1,
                "{ns}: bound {}",
                bucket_bound(b)
            );
            last = b;
        }
    }

    #[test]
    fn percentiles_come_out_of_the_recorded_latencies() {
        let p = PerfMon::parse("fuse").unwrap();
        for i in 1..=1000u64 {
            p.record(Op::Read, Duration::from_micros(i));
        }
        p.record(Op::ReaderRead, Duration::from_millis(1)); // not enabled
        let report = p.report();
        assert!(report.contains("fuse.read"), "{report}");
        assert!(!report.contains("reader.read"), "{report}");
        let line = report.lines().find(|l| l.starts_with("fuse.read")).unwrap();
        assert!(line.contains("1000"), "{line}");
        let (_, q) = p.histograms[4].quantiles(&[0.5, 0.99]);
        assert!((480_000..=570_000).contains(&q[0]), "{q:?}");
        assert!((970_000..=1_000_000).contains(&q[1]), "{q:?}");
        assert!(PerfMon::parse("fuse+bogus").is_err());
        assert!(PerfMon::parse("fuse+block_cache")
            .unwrap()
            .enabled(Op::ReaderRead));
    }
}
