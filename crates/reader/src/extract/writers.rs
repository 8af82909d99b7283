//! File contents written by threads of their own: the pool's threads read
//! and decompress each file (in data order, as without writers) and pass
//! its pieces, in order, to the writer that owns the file (file `i` to
//! writer `i % writers`), over a bounded channel, so at most
//! [`QUEUED`] pieces of [`PIECE`] bytes wait per writer.

use super::{Cause, Extractor, Node};
use crate::extract::ExtractError;
use crate::ContentPiece;
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// The most bytes of one piece of contents sent to a writer.
const PIECE: usize = 1 << 20;

/// How many pieces may wait for one writer.
const QUEUED: usize = 16;

/// What a reader tells a writer about file `usize` (an index into the
/// files), in order.
enum Job {
    /// Create the file.
    Start(usize),
    /// Append bytes.
    Data(usize, Vec<u8>),
    /// Append a hole of this many bytes.
    Hole(usize, u64),
    /// All of it was read: finish the file.
    End(usize),
    /// Reading it failed: give up the file.
    Failed(usize, Cause),
}

/// A file being written: its writer and its length so far.
struct Open {
    out: BufWriter<File>,
    size: u64,
}

/// Writes the contents of `files` on `writers` threads while the current
/// rayon pool reads them; returns the first error (or records each, when
/// continuing on errors).
pub(super) fn write_files(
    x: &Extractor<'_>,
    files: &[&Node],
    writers: usize,
) -> Result<(), ExtractError> {
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<ExtractError>> = Mutex::new(None);
    // Records an error; the first one stops the readers (unless the
    // extraction continues on errors, when `handle` keeps it and says Ok).
    let fail = |r: Result<(), ExtractError>| {
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            first_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    };
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(writers);
        for _ in 0..writers {
            let (tx, rx) = sync_channel::<Job>(QUEUED);
            senders.push(tx);
            let fail = &fail;
            scope.spawn(move || write_jobs(x, files, rx, fail));
        }
        files.par_iter().enumerate().for_each(|(i, node)| {
            if !stop.load(Ordering::Relaxed) {
                read_file(x, i, node, &senders[i % writers]);
            }
        });
        // Dropping the senders ends the writers' loops.
        drop(senders);
    });
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Reads file `i` and sends it to its writer. A writer only goes away by
/// panicking, which the scope passes on: a failed send is left at that.
fn read_file(x: &Extractor<'_>, i: usize, node: &Node, to: &SyncSender<Job>) {
    if to.send(Job::Start(i)).is_err() {
        return;
    }
    let read = x.fs.locate(node.ino).and_then(|at| {
        at.fs.read_all(at.ino, |piece| {
            let sent = match piece {
                ContentPiece::Data(d) => d
                    .chunks(PIECE)
                    .try_for_each(|c| to.send(Job::Data(i, c.to_vec()))),
                ContentPiece::Hole(n) => to.send(Job::Hole(i, n)),
            };
            sent.map_err(|_| crate::Error::Io("the file writer stopped".into()))
        })
    });
    let _ = to.send(match read {
        Ok(()) => Job::End(i),
        Err(e) => Job::Failed(i, Cause::from(e)),
    });
}

/// One writer's loop: carries out the jobs until the readers are done,
/// handing each file's outcome to `fail`.
fn write_jobs(
    x: &Extractor<'_>,
    files: &[&Node],
    jobs: Receiver<Job>,
    fail: &(dyn Fn(Result<(), ExtractError>) + Sync),
) {
    let mut open: HashMap<usize, Open> = HashMap::new();
    // Files given up: the cause, reported when their reader is done.
    let mut failed: HashMap<usize, Cause> = HashMap::new();
    for job in jobs {
        let (i, step) = match job {
            Job::Start(i) => match x.create_file(files[i]) {
                Ok(file) => {
                    let out = BufWriter::with_capacity(PIECE, file);
                    open.insert(i, Open { out, size: 0 });
                    continue;
                }
                Err(cause) => (i, Err(cause)),
            },
            Job::Data(i, bytes) => match open.get_mut(&i) {
                Some(f) => {
                    f.size += bytes.len() as u64;
                    (i, f.out.write_all(&bytes).map_err(Cause::from))
                }
                None => continue,
            },
            Job::Hole(i, n) => match open.get_mut(&i) {
                Some(f) => {
                    f.size += n;
                    let skipped = i64::try_from(n)
                        .map_err(std::io::Error::other)
                        .and_then(|n| f.out.seek(SeekFrom::Current(n)));
                    (i, skipped.map(drop).map_err(Cause::from))
                }
                None => continue,
            },
            Job::End(i) => {
                let result = match (open.remove(&i), failed.remove(&i)) {
                    (_, Some(cause)) => Err(cause),
                    (Some(f), None) => finish(f),
                    (None, None) => Ok(()),
                };
                fail(x.handle(files[i], "write file", result));
                continue;
            }
            Job::Failed(i, cause) => {
                open.remove(&i);
                let cause = failed.remove(&i).unwrap_or(cause);
                fail(x.handle(files[i], "write file", Err(cause)));
                continue;
            }
        };
        // A step that failed gives the file up; its reader goes on to the
        // end, and the first cause is reported then.
        if let Err(cause) = step {
            open.remove(&i);
            failed.entry(i).or_insert(cause);
        }
    }
}

/// Flushes a file and sets its length (a trailing hole leaves it short).
fn finish(f: Open) -> Result<(), Cause> {
    let file = f.out.into_inner().map_err(|e| e.into_error())?;
    file.set_len(f.size)?;
    Ok(())
}
