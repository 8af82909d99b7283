//! SIGINT and SIGTERM during a build: the partial image is removed (its
//! upload aborted, for one going to S3) and hoard exits at once (128 +
//! the signal's number), whatever the build is doing. Waiting for it to
//! notice a flag could take minutes: one large block at a high level
//! compresses that long, and a codec cannot be stopped in the middle of
//! a block.

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Watches for SIGINT and SIGTERM from now on; the flag returned is the
/// build's cancel flag, set before the partial image is removed and the
/// process exits.
pub fn exit_on_signals() -> Result<Arc<AtomicBool>> {
    let cancel = Arc::new(AtomicBool::new(false));
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("signal handler")?;
    let flag = Arc::clone(&cancel);
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            flag.store(true, Ordering::Relaxed);
            hoard_writer::output::remove_partial_images();
            eprintln!("hoard: interrupted; the partial image was removed");
            std::process::exit(128 + signal);
        }
    });
    Ok(cancel)
}
