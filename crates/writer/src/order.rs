//! Stage 3: the order in which file contents are laid out in blocks.
//! Similar contents placed close together land in the same block, where the
//! segmenter and the block compressor find their shared bytes.
//!
//! * `none` — scan order (directory by directory, names sorted);
//! * `path` — by path;
//! * `revpath` — by path read backwards, name first, then the directories
//!   from the innermost out (all `Makefile`s together, …);
//! * `similarity` (also accepted as DwarFS's `nilsimsa`) — by extension, then
//!   name, then content fingerprint, then path: the same file from many
//!   versions of a tree ends up side by side, and within a name, contents
//!   that share their rarest 8-byte sequence sit together.

use crate::dedupe::Content;
use crate::tree::Tree;

/// How to order file contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Scan order.
    None,
    /// By path.
    Path,
    /// By reversed path.
    RevPath,
    /// By extension, name and content similarity.
    Similarity,
}

impl Order {
    /// Parses `none`, `path`, `revpath`, `similarity` or `nilsimsa`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, opts) = s.split_once(':').unwrap_or((s, ""));
        let order = match name {
            "none" => Order::None,
            "path" => Order::Path,
            "revpath" => Order::RevPath,
            "similarity" | "nilsimsa" => Order::Similarity,
            _ => {
                return Err(format!(
                    "unknown order '{name}' (none, path, revpath, similarity, nilsimsa)"
                ))
            }
        };
        if !opts.is_empty() {
            return Err(format!("order '{name}' takes no options (got '{opts}')"));
        }
        Ok(order)
    }

    /// The name of this order.
    pub fn name(self) -> &'static str {
        match self {
            Order::None => "none",
            Order::Path => "path",
            Order::RevPath => "revpath",
            Order::Similarity => "similarity",
        }
    }
}

/// A content's similarity fingerprint: the smallest hash over all its
/// 8-byte sequences (a min-hash), so near-identical contents likely share it.
pub type Fingerprint = u64;

/// Computes a [`Fingerprint`] over data given in pieces.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    window: u64,
    seen: u64,
    min: u64,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Fingerprinter {
            window: 0,
            seen: 0,
            min: u64::MAX,
        }
    }
}

/// A 64-bit mixing function (the finalizer of SplitMix64).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Fingerprinter {
    /// Feeds the next piece of the content.
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.window = (self.window << 8) | u64::from(b);
            self.seen += 1;
            if self.seen >= 8 {
                self.min = self.min.min(mix(self.window));
            }
        }
    }

    /// The fingerprint of everything fed.
    pub fn finish(&self) -> Fingerprint {
        if self.seen < 8 {
            mix(self.window ^ (self.seen << 56))
        } else {
            self.min
        }
    }
}

/// The extension of a name (after its last dot), or empty.
fn extension(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b'.') {
        Some(p) if p > 0 => &name[p + 1..],
        _ => b"",
    }
}

fn base_name(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').next().unwrap_or(path)
}

/// The contents (indices into `contents`) in the order their data is
/// written. Each content is placed by its first file.
pub fn order(tree: &Tree, contents: &[Content], order: Order) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..contents.len()).collect();
    let path = |c: usize| tree.files[contents[c].files[0]].path.as_slice();
    match order {
        Order::None => {}
        Order::Path => ids.sort_by(|&a, &b| path(a).cmp(path(b))),
        Order::RevPath => ids.sort_by(|&a, &b| {
            path(a)
                .rsplit(|&c| c == b'/')
                .cmp(path(b).rsplit(|&c| c == b'/'))
        }),
        Order::Similarity => ids.sort_by(|&a, &b| {
            let key = |c: usize| {
                let name = base_name(path(c));
                (extension(name), name, contents[c].fingerprint, path(c))
            };
            key(a).cmp(&key(b))
        }),
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(data: &[u8]) -> Fingerprint {
        let mut f = Fingerprinter::default();
        for piece in data.chunks(7) {
            f.update(piece);
        }
        f.finish()
    }

    #[test]
    fn fingerprints_do_not_depend_on_pieces() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut whole = Fingerprinter::default();
        whole.update(&data);
        assert_eq!(whole.finish(), fp(&data));
    }

    #[test]
    fn near_identical_contents_usually_share_a_fingerprint() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("line {} of the file\n", i * 31 % 977).into_bytes())
            .collect();
        let mut edited = text.clone();
        edited[100] = b'X';
        assert_eq!(fp(&text), fp(&edited));
        assert_ne!(fp(&text), fp(b"something else entirely, nothing alike"));
        assert_ne!(fp(b"ab"), fp(b"abc"));
    }

    #[test]
    fn orders_parse() {
        assert_eq!(Order::parse("nilsimsa").unwrap(), Order::Similarity);
        assert_eq!(Order::parse("revpath").unwrap(), Order::RevPath);
        assert!(Order::parse("random").is_err());
        assert!(Order::parse("path:x=1").is_err());
    }
}
