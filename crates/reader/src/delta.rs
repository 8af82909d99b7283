//! Delta layers (`hoard create --base ... --delta`): images whose chunks
//! may point into the blocks of the images below them.
//!
//! A delta layer has [`DELTA_FEATURE`] in its metadata's feature set, so
//! that DwarFS (and any reader that does not know it) refuses to open it
//! alone, and records on its root, in [`DEPENDS_XATTR`], every image it
//! depends on, bottom first: one line `IDENTITY NAME` each, the hex
//! [`Filesystem::delta_identity`] and the file name it had when the layer
//! was made. Its chunks with a block number at or past its own block
//! count refer to block `number - own blocks` of its dependencies' blocks
//! counted one after the other, bottom first. A stack checks the
//! identities of the images below a delta layer before reading it (see
//! [`crate::Stack`]) and gives the layer their blocks.

use crate::error::{Error, Result};
use crate::Filesystem;
use std::sync::Arc;

/// The metadata feature of a delta layer.
pub const DELTA_FEATURE: &str = "hoard-delta";

/// The extended attribute on a delta layer's root listing the images it
/// depends on. In overlayfs's private namespace, like
/// [`crate::stack::BASE_XATTR`], so merged trees do not show it.
pub const DEPENDS_XATTR: &[u8] = b"trusted.overlay.hoard.depends";

/// An image a delta layer depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// Its [`Filesystem::delta_identity`], as hex.
    pub identity: String,
    /// Its file name when the layer was made (for messages only).
    pub name: String,
}

/// Encodes `deps` as the value of [`DEPENDS_XATTR`].
pub fn encode_dependencies(deps: &[Dependency]) -> Vec<u8> {
    let mut out = String::new();
    for d in deps {
        out.push_str(&d.identity);
        out.push(' ');
        out.push_str(&d.name);
        out.push('\n');
    }
    out.into_bytes()
}

/// Decodes the value of [`DEPENDS_XATTR`].
pub fn decode_dependencies(value: &[u8]) -> Result<Vec<Dependency>> {
    let text = std::str::from_utf8(value)
        .map_err(|_| Error::Corrupt("delta layer: dependency list is not UTF-8".into()))?;
    text.lines()
        .map(|line| {
            let (id, name) = line.split_once(' ').unwrap_or((line, ""));
            if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::Corrupt(format!(
                    "delta layer: bad dependency identity '{id}'"
                )));
            }
            Ok(Dependency {
                identity: id.to_ascii_lowercase(),
                name: name.to_string(),
            })
        })
        .collect()
}

/// The images below a delta layer, whose blocks its chunks may name.
#[derive(Debug)]
pub(crate) struct Lower {
    images: Vec<Arc<Filesystem>>,
    /// The number, in the layer's chunks, of each image's first block
    /// (counted from the layer's own block count).
    starts: Vec<u64>,
}

impl Lower {
    /// The images `images` (bottom first) below a layer of `own` blocks.
    pub(crate) fn new(images: Vec<Arc<Filesystem>>, own: usize) -> Lower {
        let mut starts = Vec::with_capacity(images.len());
        let mut next = own as u64;
        for fs in &images {
            starts.push(next);
            next += fs.block_count() as u64;
        }
        Lower { images, starts }
    }

    /// The dependency (its index, bottom first) and its own block that
    /// block `number` of the layer is, if any.
    pub(crate) fn locate(&self, number: u32) -> Option<(usize, &Filesystem, u32)> {
        let number = u64::from(number);
        let i = self
            .starts
            .partition_point(|&s| s <= number)
            .checked_sub(1)?;
        let block = number - self.starts[i];
        let fs = &self.images[i];
        (block < fs.block_count() as u64).then(|| (i, fs.as_ref(), block as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_lists_round_trip_and_bad_ones_are_refused() {
        let deps = vec![
            Dependency {
                identity: "ab".repeat(32),
                name: "base one.dwarfs".into(),
            },
            Dependency {
                identity: "0f".repeat(32),
                name: String::new(),
            },
        ];
        assert_eq!(
            decode_dependencies(&encode_dependencies(&deps)).unwrap(),
            deps
        );
        assert!(decode_dependencies(b"xyz name\n").is_err());
        assert!(decode_dependencies(&[0xff, 0xfe]).is_err());
    }
}
