//! The whole build: options, the run of every stage, live progress
//! counters and the final summary.

use crate::blocks::{compress_blocks, BlockProgress};
use crate::dedupe::{dedupe, DedupeProgress};
use crate::filter::Filter;
use crate::level::Level;
use crate::metadata::{build, AttrOptions, Inputs};
use crate::order::{order, Order};
use crate::output::ImageFile;
use crate::scan::{scan, ScanOptions, ScanProgress};
use crate::segment::{Piece, SegmentConfig, SegmentStats, Segmenter};
use crate::tree::Counts;
use crate::{Error, Result};
use hoard_codec::compressor_from_spec;
use hoard_format::history::HistoryEntry;
use hoard_format::section::{Compression, SectionType};
use hoard_format::write::{encode_metadata, PackOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Everything `hoard create` can be told.
#[derive(Debug)]
pub struct CreateOptions {
    /// The directory to pack.
    pub input: PathBuf,
    /// The image to write.
    pub output: PathBuf,
    /// Overwrite an existing image.
    pub force: bool,
    /// Block size, as a power of two.
    pub block_size_bits: u32,
    /// Block compression spec (`zstd:level=19`, ...).
    pub data_compression: String,
    /// Metadata compression spec.
    pub metadata_compression: String,
    /// Schema and history compression spec.
    pub schema_compression: String,
    /// Segmenter window, as a power of two; 0 turns segmenting off.
    pub window_bits: u32,
    /// Window step, as a right shift of the window size.
    pub window_step_shift: u32,
    /// Finished blocks searched for repeats.
    pub lookback: usize,
    /// Content order.
    pub order: Order,
    /// Compression threads.
    pub workers: usize,
    /// Memory for blocks in flight, in bytes.
    pub memory_limit: u64,
    /// What to include.
    pub scan: ScanOptions,
    /// Filter rules.
    pub filter: Option<Filter>,
    /// Owner, time and permission handling.
    pub attrs: AttrOptions,
    /// Store holes of sparse files as holes.
    pub sparse: bool,
    /// Metadata packing.
    pub pack: PackOptions,
    /// The history entry to record, if any.
    pub history: Option<HistoryEntry>,
    /// Write a section index.
    pub section_index: bool,
    /// Bytes to put before the image (`--header`).
    pub header: Option<Vec<u8>>,
}

impl CreateOptions {
    /// The options of compression level `level` (0 to 9).
    pub fn at_level(input: PathBuf, output: PathBuf, level: Level) -> Self {
        CreateOptions {
            input,
            output,
            force: false,
            block_size_bits: level.block_size_bits,
            data_compression: level.data.into(),
            metadata_compression: level.metadata.into(),
            schema_compression: level.schema.into(),
            window_bits: level.window_bits,
            window_step_shift: level.window_step_shift,
            lookback: 1,
            order: level.order,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_limit: default_memory_limit(),
            scan: ScanOptions::default(),
            filter: None,
            attrs: AttrOptions::default(),
            sparse: true,
            pack: PackOptions::default(),
            history: None,
            section_index: true,
            header: None,
        }
    }
}

/// A quarter of the machine's memory, at least 1 GiB.
pub fn default_memory_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024);
    (total / 4).max(1 << 30)
}

/// The stage a build is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Walking the input.
    Scanning = 0,
    /// Reading and hashing files.
    Hashing = 1,
    /// Segmenting and compressing.
    Writing = 2,
    /// Building the metadata.
    Metadata = 3,
    /// Finished.
    Done = 4,
}

/// Live counters of a build, for progress display.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    /// Scan counters.
    pub scan: ScanProgress,
    /// Hashing counters.
    pub dedupe: DedupeProgress,
    /// Bytes of distinct contents to segment.
    pub to_segment: AtomicU64,
    /// Bytes segmented so far.
    pub segmented: AtomicU64,
    /// Block counters.
    pub blocks: BlockProgress,
}

impl Progress {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Scanning,
            1 => Phase::Hashing,
            2 => Phase::Writing,
            3 => Phase::Metadata,
            _ => Phase::Done,
        }
    }

    fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Entries by kind.
    pub counts: Counts,
    /// Bytes in regular files (hard links counted once).
    pub original_bytes: u64,
    /// Files whose content another file already had.
    pub duplicate_files: u64,
    /// Bytes those duplicates would have taken.
    pub duplicate_bytes: u64,
    /// What segmenting stored, matched and left as holes.
    pub segments: SegmentStats,
    /// Data blocks written.
    pub blocks: u64,
    /// Compressed size of the data blocks.
    pub block_bytes: u64,
    /// Size of the metadata section.
    pub metadata_bytes: u64,
    /// Size of the image file.
    pub image_bytes: u64,
    /// Problems that left entries out (unreadable files, ...).
    pub warnings: Vec<String>,
}

fn check(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

fn compressor(spec: &str) -> Result<Box<dyn hoard_codec::Compressor>> {
    compressor_from_spec(spec).map_err(|e| Error::Input(e.to_string()))
}

/// Compresses a non-block section, keeping it uncompressed when that is
/// not larger.
fn pack_section(spec: &str, data: &[u8]) -> Result<(Compression, Vec<u8>)> {
    let c = compressor(spec)?;
    let payload = c.compress(data, None).map_err(|e| Error::Input(e.to_string()))?;
    Ok(if payload.len() < data.len() {
        (c.algo(), payload)
    } else {
        (Compression::NONE, data.to_vec())
    })
}

/// Builds an image as `options` say; `cancel` stops it (the partial image
/// is removed).
pub fn create(
    options: &CreateOptions,
    progress: &Progress,
    cancel: Arc<AtomicBool>,
) -> Result<Summary> {
    if !(10..=30).contains(&options.block_size_bits) {
        return Err(Error::Input(format!(
            "block size bits {} out of range (10 to 30)",
            options.block_size_bits
        )));
    }
    let block_size = 1usize << options.block_size_bits;
    let window = if options.window_bits == 0 {
        0
    } else {
        1usize << options.window_bits
    };
    if window > block_size {
        return Err(Error::Input(format!(
            "window size {window} is larger than the block size {block_size}"
        )));
    }
    let data_compressor = compressor(&options.data_compression)?;
    compressor(&options.metadata_compression)?;
    compressor(&options.schema_compression)?;

    let mut image = ImageFile::create(&options.output, options.force, options.header.as_deref())?;
    let mut scan_options = options.scan.clone();
    scan_options.exclude.extend(image.identity());
    if let Ok(m) = std::fs::metadata(&options.output) {
        use std::os::unix::fs::MetadataExt;
        scan_options.exclude.push((m.dev(), m.ino()));
    }

    progress.set(Phase::Scanning);
    let scanned = scan(
        &options.input,
        &scan_options,
        options.filter.as_ref(),
        &progress.scan,
    )?;
    check(&cancel)?;
    let tree = scanned.tree;
    let mut summary = Summary {
        counts: tree.counts(),
        warnings: scanned.warnings,
        ..Summary::default()
    };

    progress.set(Phase::Hashing);
    let deduped = dedupe(&tree, &progress.dedupe);
    check(&cancel)?;
    for (file, e) in &deduped.unreadable {
        summary
            .warnings
            .push(format!("{}: {e}", tree.files[*file].source.display()));
    }
    for c in &deduped.contents {
        let dups = c.files.len() as u64 - 1;
        summary.duplicate_files += dups;
        summary.duplicate_bytes += dups * c.size;
        summary.original_bytes += c.files.len() as u64 * c.size;
    }
    let data_order = order(&tree, &deduped.contents, options.order);
    progress.to_segment.store(
        deduped.contents.iter().map(|c| c.size).sum(),
        Ordering::Relaxed,
    );

    progress.set(Phase::Writing);
    let config = SegmentConfig {
        block_size,
        window,
        step: (window >> options.window_step_shift).max(1),
        lookback: options.lookback,
    };
    let in_flight = (options.memory_limit / block_size as u64)
        .saturating_sub(options.lookback as u64 + 1)
        .clamp(1, 4 * options.workers.max(1) as u64) as usize;
    let mut read_warnings = Vec::new();
    let (pieces, blocks, stats) = compress_blocks(
        &mut image,
        data_compressor.as_ref(),
        options.workers,
        in_flight,
        &progress.blocks,
        Arc::clone(&cancel),
        |dispatch| {
            let mut segmenter = Segmenter::new(config, dispatch);
            let mut pieces = vec![Vec::new(); deduped.contents.len()];
            let mut buf = vec![0u8; 16 << 20];
            for &c in &data_order {
                check(&cancel)?;
                let content = &deduped.contents[c];
                let file = &tree.files[content.files[0]];
                let read = feed(
                    &mut segmenter,
                    &file.source,
                    options.sparse,
                    &mut buf,
                    &mut pieces[c],
                    &progress.segmented,
                );
                match read {
                    Ok(n) if n != content.size => read_warnings.push(format!(
                        "{}: changed while being read ({} bytes, then {n})",
                        file.source.display(),
                        content.size
                    )),
                    Ok(_) => {}
                    Err(e) => read_warnings.push(format!("{}: {e}", file.source.display())),
                }
            }
            let (blocks, stats) = segmenter.finish()?;
            Ok((pieces, blocks, stats))
        },
    )?;
    summary.warnings.extend(read_warnings);
    summary.segments = stats;
    summary.blocks = u64::from(blocks);
    summary.block_bytes = progress.blocks.compressed_bytes.load(Ordering::Relaxed);
    check(&cancel)?;

    progress.set(Phase::Metadata);
    let meta = build(
        &Inputs {
            tree: &tree,
            deduped: &deduped,
            pieces: &pieces,
            blocks,
            block_size: block_size as u32,
        },
        &options.attrs,
    );
    let encoded = encode_metadata(&meta, &options.pack).map_err(|e| Error::Input(e.to_string()))?;
    let (algo, payload) = pack_section(&options.schema_compression, &encoded.schema)?;
    image.section(SectionType::METADATA_V2_SCHEMA, algo, &payload)?;
    let (algo, payload) = pack_section(&options.metadata_compression, &encoded.data)?;
    summary.metadata_bytes = payload.len() as u64;
    image.section(SectionType::METADATA_V2, algo, &payload)?;
    if let Some(entry) = &options.history {
        let history = hoard_format::write::encode_history(std::slice::from_ref(entry));
        let (algo, payload) = pack_section(&options.schema_compression, &history)?;
        image.section(SectionType::HISTORY, algo, &payload)?;
    }
    check(&cancel)?;
    summary.image_bytes = image.finish(options.section_index)?;
    progress.set(Phase::Done);
    Ok(summary)
}

/// Feeds the file at `path` to the segmenter, holes as holes when
/// `sparse`; returns the number of bytes (holes included) fed.
fn feed<S: crate::segment::BlockSink>(
    segmenter: &mut Segmenter<'_, S>,
    path: &Path,
    sparse: bool,
    buf: &mut [u8],
    out: &mut Vec<Piece>,
    progress: &AtomicU64,
) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let regions = if sparse {
        data_regions(&file, len)
    } else {
        vec![(0, len)]
    };
    let mut pos = 0u64;
    for (start, end) in regions {
        if start > pos {
            segmenter.hole(start - pos, out);
            progress.fetch_add(start - pos, Ordering::Relaxed);
        }
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(start))?;
        let mut left = end - start;
        let mut region = (&mut file).take(left);
        while left > 0 {
            let n = match region.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            segmenter
                .add(&buf[..n], out)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            progress.fetch_add(n as u64, Ordering::Relaxed);
            left -= n as u64;
        }
        pos = end - left;
        if left > 0 {
            // The file shrank: stop here.
            return Ok(pos);
        }
    }
    if len > pos {
        segmenter.hole(len - pos, out);
        progress.fetch_add(len - pos, Ordering::Relaxed);
    }
    // Anything appended after the scan is left out; a file that grew is
    // reported by its size.
    use std::os::unix::fs::FileExt;
    let mut probe = [0u8; 1];
    if file.read_at(&mut probe, len)? > 0 {
        return Ok(len + 1);
    }
    Ok(len)
}

/// The data regions (start, end) of an open file of length `len`, from
/// SEEK_DATA / SEEK_HOLE; the whole file where those are not supported.
fn data_regions(file: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    let fd = file.as_raw_fd();
    let mut regions = Vec::new();
    let mut pos = 0i64;
    let len = len as i64;
    while pos < len {
        // SAFETY: lseek on an open descriptor has no memory effects.
        let data = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if data < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole remains
            }
            return vec![(0, len as u64)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return vec![(0, len as u64)];
        }
        let end = hole.min(len);
        if end > data {
            regions.push((data as u64, end as u64));
        }
        pos = end.max(data + 1);
    }
    regions
}
