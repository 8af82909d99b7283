//! Stage 5: blocks are compressed on a pool of workers and written to the
//! image in order. The segmenter hands over each finished block; a fixed
//! number of tickets bounds how many blocks are in flight (queued, being
//! compressed, or waiting for an earlier block to be written), so memory
//! stays bounded however large the input is.

use crate::output::ImageFile;
use crate::segment::BlockSink;
use crate::{Error, Result};
use crossbeam_channel::{bounded, Receiver, Sender};
use hoard_codec::Compressor;
use hoard_format::section::{encode_header_v2, Compression, SectionType, V2_HEADER_SIZE};
use hoard_trust::encrypt::cipher::SectionPlace;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Live counters, for progress display.
#[derive(Debug, Default)]
pub struct BlockProgress {
    /// Blocks written.
    pub blocks: AtomicU64,
    /// Uncompressed bytes of the written blocks.
    pub raw_bytes: AtomicU64,
    /// Compressed bytes written.
    pub compressed_bytes: AtomicU64,
}

/// How the blocks of one stream of data (one category, with its
/// metadata) are compressed.
pub struct StreamCodec<'c> {
    /// The stream's compressor.
    pub compressor: &'c dyn Compressor,
    /// The category metadata handed to it.
    pub metadata: Option<String>,
}

/// A block on its way to a worker: number, stream, data.
type Job = (u32, usize, Arc<Vec<u8>>);

/// Blocks of at most this many bytes have their buffers filled again once
/// compressed. At `-l1` (1 MiB blocks, lz4) the page faults of touching a
/// new buffer for every block were about a tenth of a build's CPU time;
/// larger blocks go to codecs that spend far longer on them, and a spare
/// held between blocks would add to the peak.
const RECYCLED_BLOCK_MAX: usize = 4 << 20;

/// Sends finished blocks to the compression workers.
pub struct Dispatch {
    todo: Sender<Job>,
    tickets: Receiver<()>,
    /// Buffers of compressed blocks, for the segmenter to fill again.
    spares: Receiver<Vec<u8>>,
    cancel: Arc<AtomicBool>,
    streams: Vec<usize>,
}

impl Dispatch {
    /// A sink for the blocks of stream `stream`.
    pub fn stream(&mut self, stream: usize) -> StreamSink<'_> {
        StreamSink {
            dispatch: self,
            stream,
        }
    }

    /// The stream of each block sent so far, by block number.
    pub fn block_streams(&self) -> &[usize] {
        &self.streams
    }
}

/// The blocks of one stream, handed to the [`Dispatch`].
pub struct StreamSink<'d> {
    dispatch: &'d mut Dispatch,
    stream: usize,
}

impl BlockSink for StreamSink<'_> {
    fn finished(&mut self, number: u32, data: Arc<Vec<u8>>) -> Result<()> {
        let d = &mut *self.dispatch;
        if d.cancel.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        if number as usize != d.streams.len() {
            return Err(Error::Input(format!(
                "internal error: block {number} out of order"
            )));
        }
        d.streams.push(self.stream);
        // A ticket is returned when the block has been written.
        d.tickets.recv().map_err(|_| Error::Interrupted)?;
        d.todo
            .send((number, self.stream, data))
            .map_err(|_| Error::Interrupted)
    }

    fn spare_buffer(&mut self) -> Option<Vec<u8>> {
        self.dispatch.spares.try_recv().ok()
    }
}

/// Compresses one block; a block that does not shrink is stored as is.
/// When a compressor that needs metadata fails on it (audio it cannot
/// code), `fallback` compresses the block instead. The compressor may
/// give back the block's memory as it reads it, once the segmenter no
/// longer holds it.
fn compress(
    codec: &StreamCodec<'_>,
    fallback: &dyn Compressor,
    data: &mut Arc<Vec<u8>>,
) -> Result<(Compression, Vec<u8>)> {
    let c = codec.compressor;
    let len = data.len();
    let (algo, payload, released) = match c.compress_shared(data, codec.metadata.as_deref()) {
        Ok((payload, released)) => (c.algo(), payload, released),
        Err(_) if c.needs_metadata() => (
            fallback.algo(),
            fallback
                .compress(data, None)
                .map_err(|e| Error::Input(e.to_string()))?,
            false,
        ),
        Err(e) => return Err(Error::Input(e.to_string())),
    };
    if payload.len() < len {
        return Ok((algo, payload));
    }
    let raw = if released {
        hoard_codec::decompress(algo, &payload, len).map_err(|e| Error::Input(e.to_string()))?
    } else {
        data.to_vec()
    };
    Ok((Compression::NONE, raw))
}

/// Working memory the compressors of blocks being compressed side by side
/// may hold between them on a tree of few blocks (see
/// [`compressor_memory`]). Two level-9 lzma encoders of 64 MiB blocks
/// take about 1.3 GiB: side by side on the quick `rootfs` corpus (two
/// blocks) they made the peak 40% higher (1,063 against 762 MB) for a
/// build 8% shorter, since each already keeps two cores busy (7-Zip's
/// encoder with its match finder thread). Two 16 MiB ones (level 8,
/// about 190 MiB each) still run side by side.
const FEW_BLOCKS_COMPRESSOR_MEMORY: u64 = 1 << 30;

/// The working memory compressors side by side may hold between them,
/// for about `blocks` blocks on `workers` workers. On a tree of few
/// blocks the last block decides the time, and one large encoder at a
/// time finishes nearly as soon as two for far less memory; on a tree
/// of more than two blocks a worker, every worker stays busy to the
/// end, and two encoders (as `mkdwarfs` runs) pay: the full `rootfs`
/// corpus at `-l9` took 332 s instead of 420 s, its peak 1,539 instead
/// of 1,044 MiB (`mkdwarfs`: 438 s, 1,752 MiB).
pub fn compressor_memory(blocks: u64, workers: usize) -> u64 {
    if blocks > 2 * workers.max(1) as u64 {
        u64::MAX
    } else {
        FEW_BLOCKS_COMPRESSOR_MEMORY
    }
}

/// How much the compression stage may run and hold at once.
#[derive(Debug, Clone, Copy)]
pub struct PoolLimits {
    /// Compression threads.
    pub workers: usize,
    /// Blocks in memory, from being sent until written.
    pub in_flight: usize,
    /// Working memory of the compressors side by side
    /// ([`compressor_memory`]).
    pub compressor_memory: u64,
}

/// The compressors' working memory in use, counted against a limit.
struct MemoryBudget {
    limit: u64,
    /// Bytes in use and the number of compressors holding them.
    used: Mutex<(u64, usize)>,
    freed: Condvar,
}

impl MemoryBudget {
    fn new(limit: u64) -> Self {
        MemoryBudget {
            limit,
            used: Mutex::new((0, 0)),
            freed: Condvar::new(),
        }
    }

    /// Whether `bytes` more may be taken when `used` is held.
    fn fits(&self, (bytes_used, holders): (u64, usize), bytes: u64) -> bool {
        holders == 0 || bytes_used.saturating_add(bytes) <= self.limit
    }

    /// Waits until `bytes` more fit and takes them.
    fn take(&self, bytes: u64) -> TakenMemory<'_> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while !self.fits(*used, bytes) {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        used.0 += bytes;
        used.1 += 1;
        TakenMemory {
            budget: self,
            bytes,
        }
    }
}

/// Memory taken from a [`MemoryBudget`], given back when dropped.
struct TakenMemory<'b> {
    budget: &'b MemoryBudget,
    bytes: u64,
}

impl Drop for TakenMemory<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        used.0 -= self.bytes;
        used.1 -= 1;
        drop(used);
        self.budget.freed.notify_all();
    }
}

/// Runs `produce` (the segmenters) with a [`Dispatch`] while
/// `limits.workers` threads compress its blocks, each with the codec of
/// its stream (an index into `codecs`), and one thread writes them to
/// `image` in order, with at most `limits.in_flight` blocks in memory.
/// Returns what `produce` returned.
pub fn compress_blocks<T: Send>(
    image: &mut ImageFile,
    codecs: &[StreamCodec<'_>],
    fallback: &dyn Compressor,
    limits: PoolLimits,
    progress: &BlockProgress,
    cancel: Arc<AtomicBool>,
    produce: impl FnOnce(&mut Dispatch) -> Result<T> + Send,
) -> Result<T> {
    let in_flight = limits.in_flight.max(1);
    let (todo_tx, todo_rx) = bounded::<Job>(in_flight);
    type Done = (u32, Result<([u8; V2_HEADER_SIZE], Vec<u8>)>, u64);
    let (done_tx, done_rx) = bounded::<Done>(in_flight);
    // Block n is section `first + n`: each worker hashes its own blocks'
    // headers, so the writer thread only writes.
    let first = image.next_section_number()?;
    // In an encrypted image each worker seals its blocks too, each bound
    // to its block number (block n is block `first_block + n`).
    let first_block = image.blocks_written();
    let cipher = image.cipher();
    let (ticket_tx, ticket_rx) = bounded::<()>(in_flight);
    for _ in 0..in_flight {
        ticket_tx
            .send(())
            .expect("the channel has room for every ticket");
    }
    let budget = MemoryBudget::new(limits.compressor_memory);
    let (spare_tx, spare_rx) = bounded::<Vec<u8>>(limits.workers.max(1));
    std::thread::scope(|s| {
        for _ in 0..limits.workers.max(1) {
            let todo_rx = todo_rx.clone();
            let done_tx = done_tx.clone();
            let spare_tx = spare_tx.clone();
            let budget = &budget;
            let cipher = cipher.clone();
            s.spawn(move || {
                for (number, stream, mut data) in todo_rx {
                    let result = match codecs.get(stream) {
                        Some(codec) => {
                            let _memory = budget.take(codec.compressor.memory(data.len()));
                            compress(codec, fallback, &mut data)
                        }
                        None => Err(Error::Input(format!(
                            "internal error: no codec for stream {stream}"
                        ))),
                    }
                    .map(|(algo, mut payload)| {
                        let section = first.saturating_add(number);
                        if let Some(cipher) = &cipher {
                            let place = SectionPlace {
                                number: section,
                                kind: SectionType::BLOCK,
                                compression: algo,
                                blocks_before: first_block.saturating_add(number),
                            };
                            cipher.seal(place, &mut payload);
                        }
                        let header = encode_header_v2(section, SectionType::BLOCK, algo, &payload);
                        (header, payload)
                    });
                    let raw = data.len();
                    if raw <= RECYCLED_BLOCK_MAX {
                        // Unless the segmenter still holds it (to find
                        // repeats in it), or is done and wants no more.
                        if let Ok(buffer) = Arc::try_unwrap(data) {
                            let _ = spare_tx.try_send(buffer);
                        }
                    }
                    if done_tx.send((number, result, raw as u64)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        drop(todo_rx);
        drop(spare_tx);
        let cancel_writer = Arc::clone(&cancel);
        let writer = s.spawn(move || -> Result<()> {
            let mut waiting = BTreeMap::new();
            let mut next = 0u32;
            for (number, result, raw) in done_rx {
                waiting.insert(number, (result, raw));
                while let Some((result, raw)) = waiting.remove(&next) {
                    let (header, payload) = result?;
                    image.section_with_header(SectionType::BLOCK, header, &payload)?;
                    progress.blocks.fetch_add(1, Ordering::Relaxed);
                    progress.raw_bytes.fetch_add(raw, Ordering::Relaxed);
                    progress
                        .compressed_bytes
                        .fetch_add(payload.len() as u64, Ordering::Relaxed);
                    next += 1;
                    // The segmenter may be gone after an error; that's fine.
                    let _ = ticket_tx.send(());
                }
            }
            if cancel_writer.load(Ordering::Relaxed) {
                return Err(Error::Interrupted);
            }
            Ok(())
        });
        let mut dispatch = Dispatch {
            todo: todo_tx,
            tickets: ticket_rx,
            cancel: Arc::clone(&cancel),
            streams: Vec::new(),
            spares: spare_rx,
        };
        let produced = produce(&mut dispatch);
        if produced.is_err() {
            cancel.store(true, Ordering::Relaxed);
        }
        drop(dispatch);
        let written = writer.join().unwrap_or(Err(Error::Interrupted));
        let value = produced?;
        written?;
        Ok(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressors_share_the_memory_budget() {
        const MIB: u64 = 1 << 20;
        // Few blocks: one level-9 lzma encoder (about 674 MiB) leaves no
        // room for a second, but does for a level-8 one, and zstd (0)
        // always fits.
        let budget = MemoryBudget::new(compressor_memory(2, 2));
        assert!(budget.fits((0, 0), 674 * MIB));
        assert!(!budget.fits((674 * MIB, 1), 674 * MIB));
        assert!(budget.fits((674 * MIB, 1), 190 * MIB));
        assert!(budget.fits((674 * MIB, 1), 0));
        // Nothing held: even more than the budget goes ahead.
        assert!(budget.fits((0, 0), 4 * FEW_BLOCKS_COMPRESSOR_MEMORY));
        // Many blocks: every worker runs whatever its compressor takes.
        let many = MemoryBudget::new(compressor_memory(5, 2));
        assert!(many.fits((674 * MIB, 1), 674 * MIB));
        assert_eq!(compressor_memory(4, 2), FEW_BLOCKS_COMPRESSOR_MEMORY);
        let first = budget.take(674 * MIB);
        let second = budget.take(190 * MIB);
        assert_eq!(*budget.used.lock().unwrap(), (864 * MIB, 2));
        drop(first);
        drop(second);
        assert_eq!(*budget.used.lock().unwrap(), (0, 0));
        // A compressor waiting for room goes ahead once the other is done.
        let held = budget.take(674 * MIB);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _taken = budget.take(674 * MIB);
            });
            drop(held);
            waiter.join().unwrap();
        });
        assert_eq!(*budget.used.lock().unwrap(), (0, 0));
    }
}
