//! The sections after the blocks: the metadata (built from the tree and
//! the pieces, encoded, then written as its schema and its data) and the
//! history, each compressed with its spec unless that is not smaller.

use crate::level::SMALL_METADATA;
use crate::metadata::{build, Inputs};
use crate::options::CreateOptions;
use crate::output::ImageFile;
use crate::streams::{record_categories, StreamPlan};
use crate::{compressor, Error, Result};
use hoard_format::metadata::Metadata;
use hoard_format::section::{Compression, SectionType};
use hoard_format::write::{encode_metadata, FieldWidths};

/// Compresses a non-block section, keeping it uncompressed when that is
/// not larger.
pub(crate) fn pack_section(spec: &str, data: &[u8]) -> Result<(Compression, Vec<u8>)> {
    let c = compressor(spec)?;
    let payload = c
        .compress(data, None)
        .map_err(|e| Error::Input(e.to_string()))?;
    Ok(if payload.len() < data.len() {
        (c.algo(), payload)
    } else {
        (Compression::NONE, data.to_vec())
    })
}

/// The field widths for metadata compressed with `spec`: whole bytes,
/// which compress smaller, unless it is stored as is.
pub(crate) fn metadata_widths(spec: &str) -> Result<FieldWidths> {
    Ok(if compressor(spec)?.algo() == Compression::NONE {
        FieldWidths::Bits
    } else {
        FieldWidths::Bytes
    })
}

/// Builds the metadata, recording each block's category when
/// `categories` holds the plans and the stream of each block.
#[inline(never)]
pub(crate) fn build_metadata(
    options: &CreateOptions,
    inputs: Inputs<'_>,
    categories: Option<(&[StreamPlan], &[usize])>,
) -> Metadata {
    let mut meta = build(inputs, &options.attrs);
    if let Some((plans, block_streams)) = categories {
        record_categories(&mut meta, plans, block_streams, options.category_metadata);
    }
    meta
}

/// Encodes `meta` and writes its schema and data sections. Returns the
/// size of the data section.
#[inline(never)]
pub(crate) fn write_metadata(
    image: &mut ImageFile,
    options: &CreateOptions,
    meta: &Metadata,
) -> Result<u64> {
    let widths = metadata_widths(&options.metadata_compression)?;
    let encoded =
        encode_metadata(meta, &options.pack, widths).map_err(|e| Error::Input(e.to_string()))?;
    let (algo, payload) = pack_section(&options.schema_compression, &encoded.schema)?;
    image.section(SectionType::METADATA_V2_SCHEMA, algo, &payload)?;
    let spec = match &options.small_metadata_compression {
        Some(small) if encoded.data.len() <= SMALL_METADATA => small,
        _ => &options.metadata_compression,
    };
    let (algo, payload) = pack_section(spec, &encoded.data)?;
    image.section(SectionType::METADATA_V2, algo, &payload)?;
    Ok(payload.len() as u64)
}

/// Writes the history section, if there is an entry to record.
pub(crate) fn write_history(image: &mut ImageFile, options: &CreateOptions) -> Result<()> {
    if let Some(entry) = &options.history {
        let history = hoard_format::write::encode_history(std::slice::from_ref(entry));
        let (algo, payload) = pack_section(&options.schema_compression, &history)?;
        image.section(SectionType::HISTORY, algo, &payload)?;
    }
    Ok(())
}
