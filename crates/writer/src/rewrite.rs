//! `hoard rewrite` (`mkdwarfs --recompress`): write an existing image again
//! with other codecs or metadata options, without reading the original
//! tree. Blocks are recompressed in parallel (or copied as they are), the
//! metadata is re-encoded (or copied), and a history entry is added.
//!
//! `--rebuild-metadata` re-applies owner, group, time and permission
//! overrides and the packing options to the stored metadata.

use crate::blocks::{compress_blocks, compressor_memory, BlockProgress, PoolLimits, StreamCodec};
use crate::chmod::Chmod;
use crate::output::{ImageFile, OutputOptions};
use crate::sections::{metadata_widths, pack_section};
use crate::{compressor, Error, Result};
use hoard_format::history::{decode_history, HistoryEntry};
use hoard_format::metadata::Metadata;
use hoard_format::section::SectionType;
use hoard_format::write::{encode_metadata, PackOptions};
use hoard_reader::open::{open, Opened, Target};
use hoard_reader::ImageOffset;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Overrides applied when the metadata is rebuilt.
#[derive(Debug, Clone, Default)]
pub struct Rebuild {
    /// Owner of every entry.
    pub set_owner: Option<u32>,
    /// Group of every entry.
    pub set_group: Option<u32>,
    /// Time of every entry (seconds since the epoch).
    pub set_time: Option<u64>,
    /// Permission changes.
    pub chmod: Option<Chmod>,
}

/// What `rewrite` does.
#[derive(Debug)]
pub struct RewriteOptions {
    /// The image to read.
    pub input: PathBuf,
    /// Where it starts in its file.
    pub offset: ImageOffset,
    /// The image to write, and what is added to it.
    pub output: OutputOptions,
    /// New block compression; `None` copies blocks as they are.
    pub data_compression: Option<String>,
    /// New block compression of the blocks of some categories (by
    /// category name), when blocks are recompressed.
    pub per_category: std::collections::BTreeMap<String, String>,
    /// New metadata compression; `None` keeps the metadata as it is,
    /// unless `rebuild` is set.
    pub metadata_compression: Option<String>,
    /// Schema and history compression, used whenever they are rewritten.
    pub schema_compression: String,
    /// Re-apply these overrides and `pack` to the metadata.
    pub rebuild: Option<Rebuild>,
    /// Metadata packing, when the metadata is rewritten.
    pub pack: PackOptions,
    /// Compression threads.
    pub workers: usize,
    /// Memory for blocks in flight.
    pub memory_limit: u64,
    /// History entry to append, if any.
    pub history: Option<HistoryEntry>,
    /// Write a section index.
    pub section_index: bool,
    /// Open the input only if signed by one of these keys.
    pub trust: Option<hoard_trust::TrustedKeys>,
    /// Open an encrypted input with one of these.
    pub identities: Option<Arc<hoard_trust::encrypt::Identities>>,
    /// Write an encrypted input as a plain image. Without it (or
    /// `output.encrypt`), an encrypted input is refused: its data key is never
    /// reused for other bytes.
    pub decrypt: bool,
}

/// Sizes before and after.
#[derive(Debug, Clone, Copy, Default)]
pub struct RewriteSummary {
    /// Blocks written.
    pub blocks: u64,
    /// Size of the input image.
    pub input_bytes: u64,
    /// Size of the output image.
    pub output_bytes: u64,
}

fn reader_error(e: hoard_reader::Error) -> Error {
    Error::Input(e.to_string())
}

/// Applies `rebuild` to the decoded metadata.
fn apply(meta: &mut Metadata, r: &Rebuild) {
    if let Some(uid) = r.set_owner {
        meta.uids = vec![uid];
        meta.inodes.update(|i| i.owner_index = 0);
    }
    if let Some(gid) = r.set_group {
        meta.gids = vec![gid];
        meta.inodes.update(|i| i.group_index = 0);
    }
    if let Some(t) = r.set_time {
        // Stored times are (base + offset) units of the resolution.
        let resolution = meta
            .options
            .as_ref()
            .and_then(|o| o.time_resolution_sec)
            .unwrap_or(1)
            .max(1);
        meta.timestamp_base = t / u64::from(resolution);
        meta.inodes.update(|i| {
            (
                i.atime_offset,
                i.mtime_offset,
                i.ctime_offset,
                i.btime_offset,
            ) = (0, 0, 0, 0);
            (
                i.atime_subsec,
                i.mtime_subsec,
                i.ctime_subsec,
                i.btime_subsec,
            ) = (0, 0, 0, 0);
        });
    }
    if let Some(chmod) = &r.chmod {
        let new: Vec<u32> = meta.modes.iter().map(|&m| chmod.apply(m)).collect();
        let mut distinct = new.clone();
        distinct.sort_unstable();
        distinct.dedup();
        meta.inodes.update(|i| {
            let m = new[i.mode_index as usize];
            i.mode_index = distinct.partition_point(|&x| x < m) as u32;
        });
        meta.modes = distinct;
    }
}

/// The distinct (category name, category metadata) pairs of an image's
/// blocks; one `(None, None)` stream when it has no categories.
fn block_streams(meta: &Metadata, blocks: usize) -> Vec<(Option<&str>, Option<&str>)> {
    let mut streams = vec![(None, None)];
    for n in 0..blocks {
        let s = block_category(meta, n);
        if !streams.contains(&s) {
            streams.push(s);
        }
    }
    streams
}

/// The category name and metadata of block `n`, where the image has them.
pub(crate) fn block_category(meta: &Metadata, n: usize) -> (Option<&str>, Option<&str>) {
    let name = meta
        .block_categories
        .as_ref()
        .and_then(|c| c.get(n))
        .zip(meta.category_names.as_ref())
        .and_then(|(&i, names)| names.get(i as usize))
        .map(String::as_str);
    let json = meta
        .block_category_metadata
        .as_ref()
        .and_then(|m| m.get(&(n as u32)))
        .zip(meta.category_metadata_json.as_ref())
        .and_then(|(&i, all)| all.get(i as usize))
        .map(String::as_str);
    (name, json)
}

/// Index in `streams` of block `n`'s stream.
fn stream_of_block(meta: &Metadata, streams: &[(Option<&str>, Option<&str>)], n: usize) -> usize {
    let s = block_category(meta, n);
    streams.iter().position(|x| *x == s).unwrap_or(0)
}

/// Rewrites an image.
pub fn rewrite(
    options: &RewriteOptions,
    progress: &BlockProgress,
    cancel: Arc<AtomicBool>,
) -> Result<RewriteSummary> {
    let mut target = Target::new(vec![options.input.clone()]);
    target.options.open.offset = options.offset;
    target.options.open.trust = options.trust.clone();
    target.options.open.identities = options.identities.clone();
    // Blocks are loaded straight from the image, not through a cache.
    target.options.cache_size = 0;
    let stack = open(&target)
        .and_then(Opened::into_stack)
        .map_err(reader_error)?;
    let fs = stack.layers()[0].clone();
    let image = fs.image();
    if image.encryption().is_some() && options.output.encrypt.is_none() && !options.decrypt {
        return Err(Error::Input(
            "the image is encrypted: say how to write it, --decrypt or --encrypt-to/--passphrase-file".into(),
        ));
    }
    let input_bytes = image.file_size();
    let metadata = fs.metadata().map_err(reader_error)?;
    let block_size = metadata.block_size as usize;
    let mut out = ImageFile::create(&options.output)?;

    let blocks: Vec<_> = image
        .sections()
        .iter()
        .filter(|s| s.header.kind == SectionType::BLOCK)
        .cloned()
        .collect();
    match &options.data_compression {
        Some(spec) => {
            let streams = block_streams(metadata, blocks.len());
            let compressors = streams
                .iter()
                .map(|(name, _)| {
                    let spec = name
                        .and_then(|n| options.per_category.get(n))
                        .unwrap_or(spec);
                    compressor(spec)
                })
                .collect::<Result<Vec<_>>>()?;
            let codecs: Vec<StreamCodec<'_>> = streams
                .iter()
                .zip(&compressors)
                .map(|((_, metadata), c)| StreamCodec {
                    compressor: c.as_ref(),
                    metadata: metadata.map(String::from),
                })
                .collect();
            let fallback = compressor(spec)?;
            let in_flight = (options.memory_limit / block_size.max(1) as u64)
                .clamp(1, 4 * options.workers.max(1) as u64) as usize;
            let limits = PoolLimits {
                workers: options.workers,
                in_flight,
                compressor_memory: compressor_memory(blocks.len() as u64, options.workers),
            };
            compress_blocks(
                &mut out,
                &codecs,
                fallback.as_ref(),
                limits,
                progress,
                Arc::clone(&cancel),
                |dispatch| {
                    use crate::segment::BlockSink;
                    for (n, s) in blocks.iter().enumerate() {
                        let data = image.load(s, block_size).map_err(reader_error)?;
                        let stream = stream_of_block(metadata, &streams, n);
                        dispatch.stream(stream).finished(n as u32, Arc::new(data))?;
                    }
                    Ok(())
                },
            )?;
        }
        None => {
            for s in &blocks {
                let payload = image.plain_payload(s).map_err(reader_error)?;
                out.section(SectionType::BLOCK, s.header.compression, &payload)?;
            }
        }
    }

    let rewrite_meta = options.metadata_compression.is_some() || options.rebuild.is_some();
    let find = |kind| {
        image.find(kind).ok_or_else(|| {
            Error::Input(format!(
                "{}: no {} section",
                options.input.display(),
                kind.name()
            ))
        })
    };
    if rewrite_meta {
        let mut meta = metadata.clone();
        if let Some(r) = &options.rebuild {
            apply(&mut meta, r);
        }
        let spec = options
            .metadata_compression
            .clone()
            .unwrap_or_else(|| "zstd:level=22".into());
        let encoded = encode_metadata(&meta, &options.pack, metadata_widths(&spec)?)
            .map_err(|e| Error::Input(e.to_string()))?;
        let (algo, payload) = pack_section(&options.schema_compression, &encoded.schema)?;
        out.section(SectionType::METADATA_V2_SCHEMA, algo, &payload)?;
        let (algo, payload) = pack_section(&spec, &encoded.data)?;
        out.section(SectionType::METADATA_V2, algo, &payload)?;
    } else {
        for kind in [SectionType::METADATA_V2_SCHEMA, SectionType::METADATA_V2] {
            let s = find(kind)?;
            let payload = image.plain_payload(s).map_err(reader_error)?;
            out.section(kind, s.header.compression, &payload)?;
        }
    }

    let mut history = match image.find(SectionType::HISTORY) {
        Some(s) => {
            let raw = image.load(s, 16 << 20).map_err(reader_error)?;
            decode_history(&raw).map_err(|e| Error::Input(e.to_string()))?
        }
        None => Vec::new(),
    };
    if let Some(entry) = &options.history {
        history.push(entry.clone());
    }
    for entry in &mut history {
        entry.version.complete();
    }
    if !history.is_empty() {
        let encoded = hoard_format::write::encode_history(&history);
        let (algo, payload) = pack_section(&options.schema_compression, &encoded)?;
        out.section(SectionType::HISTORY, algo, &payload)?;
    }
    let output_bytes = out.finish(options.section_index)?;
    Ok(RewriteSummary {
        blocks: blocks.len() as u64,
        input_bytes,
        output_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoard_format::metadata::FsOptions;

    #[test]
    fn set_time_is_stored_in_units_of_the_resolution() {
        let mut meta = Metadata {
            options: Some(FsOptions {
                time_resolution_sec: Some(60),
                ..Default::default()
            }),
            inodes: std::iter::once(Default::default()).collect(),
            ..Default::default()
        };
        let rebuild = Rebuild {
            set_time: Some(1_700_013_600),
            ..Default::default()
        };
        apply(&mut meta, &rebuild);
        assert_eq!(meta.timestamp_base * 60, 1_700_013_600);
    }
}
