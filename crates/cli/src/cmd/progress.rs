//! The live progress display of `hoard create`: phase, counts, bytes,
//! rates and ETA, redrawn a few times a second on standard error.

use hoard_writer::progress::Phase;
use hoard_writer::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// Formats a byte count with a binary unit.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// This process's resident memory (0 where /proc is not available).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Runs `work`, showing `progress` meanwhile when `show` is set.
pub fn with_display<T>(progress: &Progress, show: bool, work: impl FnOnce() -> T) -> T {
    if !show {
        return work();
    }
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || draw(progress, &stopped));
        let result = work();
        // Wakes the display at once: a build does not wait for its tick.
        drop(stop);
        result
    })
}

/// Redraws the display every 100 ms until `stop`'s sender is dropped.
fn draw(p: &Progress, stop: &Receiver<()>) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(5));
    let spinner = ProgressStyle::with_template("{spinner} {prefix:>12} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bytes = ProgressStyle::with_template(
        "{spinner} {prefix:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    let mut shown = None;
    loop {
        let phase = p.phase();
        if shown != Some(phase) {
            shown = Some(phase);
            bar.reset();
            match phase {
                Phase::Scanning | Phase::Metadata | Phase::Done => {
                    bar.set_style(spinner.clone());
                    bar.set_length(0);
                }
                Phase::Hashing | Phase::Comparing => {
                    bar.set_style(bytes.clone());
                    bar.set_length(p.scan.bytes.load(Ordering::Relaxed));
                }
                Phase::Categorizing | Phase::Writing => {
                    bar.set_style(bytes.clone());
                    bar.set_length(p.to_segment.load(Ordering::Relaxed));
                }
            }
        }
        match phase {
            Phase::Scanning => {
                bar.set_prefix("scanning");
                bar.set_message(format!(
                    "{} entries, {}",
                    p.scan.entries.load(Ordering::Relaxed),
                    human_bytes(p.scan.bytes.load(Ordering::Relaxed))
                ));
            }
            Phase::Hashing => {
                bar.set_prefix("hashing");
                bar.set_position(p.dedupe.bytes.load(Ordering::Relaxed));
                bar.set_message(format!("{} files", p.dedupe.files.load(Ordering::Relaxed)));
            }
            Phase::Comparing => {
                bar.set_prefix("comparing");
                bar.set_position(p.compared.load(Ordering::Relaxed));
                bar.set_message("with the base images");
            }
            Phase::Categorizing => {
                bar.set_prefix("categorizing");
                bar.set_position(p.categorized.load(Ordering::Relaxed));
            }
            Phase::Writing => {
                bar.set_prefix("writing");
                bar.set_position(p.segmented.load(Ordering::Relaxed));
                let raw = p.blocks.raw_bytes.load(Ordering::Relaxed);
                let packed = p.blocks.compressed_bytes.load(Ordering::Relaxed);
                bar.set_message(format!(
                    "{} blocks, {} -> {}, {} in memory",
                    p.blocks.blocks.load(Ordering::Relaxed),
                    human_bytes(raw),
                    human_bytes(packed),
                    human_bytes(resident_bytes())
                ));
            }
            Phase::Metadata | Phase::Done => {
                bar.set_prefix("metadata");
                bar.set_message("building and compressing");
            }
        }
        bar.tick();
        if stop.recv_timeout(Duration::from_millis(100)) != Err(RecvTimeoutError::Timeout) {
            break;
        }
    }
    bar.finish_and_clear();
}
