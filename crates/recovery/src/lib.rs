//! Reed-Solomon recovery data for DwarFS images: one extra section,
//! appended after the section index, that lets an image survive damage
//! anywhere before it (damage to the section itself is found and rebuilt
//! from the repaired image, of which it is a function).
//!
//! * [`layout`] — shards, stripes and where each part of the recovery
//!   data lives (the design is described there and in the README).
//! * [`encode`] — building the recovery section for an image.
//! * [`Recovery`] — finding the recovery data of an image, telling which
//!   bytes are damaged, and reading or rewriting them repaired.
//! * [`repair_file`] — repairing an image file (temporary file, checked,
//!   then renamed).
//!
//! Damage is found by checksums (XXH3-64 per 4 KiB shard), so a damaged
//! shard becomes an erasure: a stripe of `k` data and `m` parity shards
//! survives any `m` damaged shards.

pub mod encode;
pub mod layout;
mod locate;
mod recovery;
mod repair;

pub use encode::{build_section, BuiltSection};
pub use layout::Layout;
pub use recovery::{Damage, Recovery};
pub use repair::{repair_file, Repair};

/// The section type of the recovery data.
pub const SECTION_TYPE: hoard_format::section::SectionType =
    hoard_format::section::SectionType::HOARD_RECOVERY;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the image failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A request or an image the recovery data cannot serve.
    #[error("{0}")]
    Invalid(String),
    /// More damage than the recovery data can repair.
    #[error("{0}")]
    BeyondRepair(String),
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Random-access reads of an image (or of its protected bytes).
pub trait ReadAt: Sync {
    /// Total length in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl ReadAt for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| past_end())?;
        let end = start.checked_add(buf.len()).ok_or_else(past_end)?;
        buf.copy_from_slice(self.get(start..end).ok_or_else(past_end)?);
        Ok(())
    }
}

impl ReadAt for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

fn past_end() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end")
}

/// The protected bytes of a file with recovery data: all before the
/// recovery section.
pub(crate) struct Protected<'a> {
    /// The whole file.
    pub(crate) file: &'a dyn ReadAt,
    /// Its recovery layout.
    pub(crate) layout: &'a Layout,
}

impl ReadAt for Protected<'_> {
    fn size(&self) -> u64 {
        self.layout.protected_len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if offset + buf.len() as u64 > self.size() {
            return Err(past_end());
        }
        self.file.read_at(offset, buf)
    }
}

/// Reads shard `j` of the protected bytes, zero-padded to the shard size.
pub(crate) fn read_shard(protected: &dyn ReadAt, layout: &Layout, j: u64) -> Result<Vec<u8>> {
    let size = layout.shard_size as u64;
    let start = j * size;
    let mut shard = vec![0u8; size as usize];
    let len = size.min(protected.size().saturating_sub(start)) as usize;
    protected.read_at(start, &mut shard[..len])?;
    Ok(shard)
}

#[cfg(test)]
mod tests;
