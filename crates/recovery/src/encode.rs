//! Building the recovery section of an image.

use crate::layout::{encode_table, Layout, TRAILER_SIZE};
use crate::{read_shard, Error, ReadAt, Result, SECTION_TYPE};
use hoard_format::section::{encode_header_v2, Compression};
use rayon::prelude::*;
use reed_solomon_simd::ReedSolomonEncoder;
use xxhash_rust::xxh3::xxh3_64;

/// A recovery section ready to be written.
pub struct BuiltSection {
    /// Header and payload.
    pub bytes: Vec<u8>,
    /// The checksum of every data shard, then of every parity shard.
    pub checksums: Vec<u64>,
}

/// The parity and checksums of one stripe.
struct Stripe {
    data_sums: Vec<(u64, u64)>,
    parity: Vec<Vec<u8>>,
}

/// Builds the recovery section described by `layout` over the protected
/// bytes `protected` (which must be `layout.protected_len()` long).
/// Stripes are encoded in parallel.
pub fn build_section(layout: &Layout, protected: &dyn ReadAt) -> Result<BuiltSection> {
    if protected.size() != layout.protected_len() {
        return Err(Error::Invalid(format!(
            "{} bytes to protect, the layout is for {}",
            protected.size(),
            layout.protected_len()
        )));
    }
    let stripes: Vec<Stripe> = (0..layout.stripes)
        .into_par_iter()
        .map(|g| encode_stripe(layout, protected, g))
        .collect::<Result<_>>()?;
    let shards = layout.shard_count();
    let mut checksums = vec![0u64; (shards + layout.parity_count()) as usize];
    let size = layout.shard_size as usize;
    let mut parity = vec![0u8; layout.parity_count() as usize * size];
    for (g, stripe) in stripes.iter().enumerate() {
        for &(j, sum) in &stripe.data_sums {
            checksums[j as usize] = sum;
        }
        for (r, shard) in stripe.parity.iter().enumerate() {
            let q = r * layout.stripes as usize + g;
            parity[q * size..(q + 1) * size].copy_from_slice(shard);
            checksums[shards as usize + q] = xxh3_64(shard);
        }
    }
    let descriptor = layout.encode();
    let table = encode_table(&checksums, layout.table_len());
    let mut payload = Vec::with_capacity(layout.payload_len() as usize);
    payload.extend_from_slice(&descriptor);
    payload.extend_from_slice(&table);
    payload.extend_from_slice(&parity);
    payload.extend_from_slice(&table);
    payload.extend_from_slice(&descriptor);
    payload.extend_from_slice(&[0u8; TRAILER_SIZE as usize]);
    debug_assert_eq!(payload.len() as u64, layout.payload_len());
    let header = encode_header_v2(
        layout.section_number,
        SECTION_TYPE,
        Compression::NONE,
        &payload,
    );
    let mut bytes = header.to_vec();
    bytes.append(&mut payload);
    Ok(BuiltSection { bytes, checksums })
}

fn encode_stripe(layout: &Layout, protected: &dyn ReadAt, g: u32) -> Result<Stripe> {
    let size = layout.shard_size as usize;
    let mut encoder = ReedSolomonEncoder::new(
        layout.data_shards as usize,
        layout.parity_shards as usize,
        size,
    )
    .map_err(rs_error)?;
    let zeros = vec![0u8; size];
    let mut data_sums = Vec::with_capacity(layout.data_shards as usize);
    for i in 0..layout.data_shards {
        match layout.data_shard(g, i) {
            Some(j) => {
                let shard = read_shard(protected, layout, j)?;
                data_sums.push((j, xxh3_64(&shard)));
                encoder.add_original_shard(&shard).map_err(rs_error)?;
            }
            None => encoder.add_original_shard(&zeros).map_err(rs_error)?,
        }
    }
    let result = encoder.encode().map_err(rs_error)?;
    let parity = result.recovery_iter().map(<[u8]>::to_vec).collect();
    Ok(Stripe { data_sums, parity })
}

/// The erasure coder's errors, which only a bad layout can cause.
pub(crate) fn rs_error(e: reed_solomon_simd::Error) -> Error {
    Error::Invalid(format!("erasure coding: {e}"))
}
