//! The `incompressible` categorizer: data that a fast zstd pass cannot
//! shrink (already compressed archives, media, random bytes) goes to
//! `incompressible`, which by default is stored without compression — the
//! build skips the slow compressor where it would gain nothing.

use super::{Category, Fragment, DEFAULT_CATEGORY};
use std::io::Read;

/// The category.
pub const INCOMPRESSIBLE: &str = "incompressible";

/// Settings, with DwarFS's option names and defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IncompressibleOptions {
    /// Smaller files are not checked (`--incompressible-min-input-size`).
    pub min_input_size: u64,
    /// Bytes compressed at a time (`--incompressible-block-size`).
    pub block_size: usize,
    /// Categorize each block on its own rather than the whole file
    /// (`--incompressible-fragments`).
    pub fragments: bool,
    /// Compressed/original ratio at or above which data counts as
    /// incompressible (`--incompressible-ratio`).
    pub ratio: f64,
    /// zstd level of the trial (`--incompressible-zstd-level`).
    pub zstd_level: i32,
}

impl Default for IncompressibleOptions {
    fn default() -> Self {
        IncompressibleOptions {
            min_input_size: 256,
            block_size: 1 << 20,
            fragments: false,
            ratio: 0.99,
            zstd_level: -1,
        }
    }
}

/// Compresses `input` (`size` bytes) block by block; returns the fragments
/// when some of it is incompressible, None when all of it compresses (or
/// it is too small to check).
pub fn categorize(
    mut input: impl Read,
    size: u64,
    opts: &IncompressibleOptions,
) -> std::io::Result<Option<Vec<Fragment>>> {
    if size < opts.min_input_size || size == 0 {
        return Ok(None);
    }
    let mut zstd = zstd::bulk::Compressor::new(opts.zstd_level)?;
    let mut buf = vec![
        0u8;
        opts.block_size
            .clamp(1, size.try_into().unwrap_or(usize::MAX))
    ];
    let mut fragments: Vec<Fragment> = Vec::new();
    let (mut total_in, mut total_out) = (0u64, 0u64);
    loop {
        let n = read_full(&mut input, &mut buf)?;
        if n == 0 {
            break;
        }
        let out = zstd.compress(&buf[..n])?.len() as u64;
        total_in += n as u64;
        total_out += out;
        let name = if out as f64 >= opts.ratio * n as f64 {
            INCOMPRESSIBLE
        } else {
            DEFAULT_CATEGORY
        };
        match fragments.last_mut() {
            Some(last) if last.category.name == name => last.size += n as u64,
            _ => fragments.push(Fragment {
                category: Category::plain(name),
                size: n as u64,
            }),
        }
    }
    if opts.fragments {
        let any = fragments.iter().any(|f| f.category.name == INCOMPRESSIBLE);
        return Ok(any.then_some(fragments));
    }
    let whole = total_in > 0 && total_out as f64 >= opts.ratio * total_in as f64;
    Ok(whole.then(|| {
        vec![Fragment {
            category: Category::plain(INCOMPRESSIBLE),
            size: total_in,
        }]
    }))
}

/// Reads until `buf` is full or the input ends.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize) -> Vec<u8> {
        hoard_testdata::noise(n, 0x2545_f491_4f6c_dd1d)
    }

    #[test]
    fn random_bytes_are_incompressible_text_is_not() {
        let o = IncompressibleOptions::default();
        let r = noise(3 << 20);
        let f = categorize(&r[..], r.len() as u64, &o).unwrap().unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].category.name, f[0].size), (INCOMPRESSIBLE, 3 << 20));
        let text = b"all work and no play ".repeat(10_000);
        assert!(categorize(&text[..], text.len() as u64, &o)
            .unwrap()
            .is_none());
        assert!(categorize(&r[..100], 100, &o).unwrap().is_none());
    }

    #[test]
    fn fragments_split_a_mixed_file() {
        let o = IncompressibleOptions {
            fragments: true,
            block_size: 64 << 10,
            ..Default::default()
        };
        let mut data = vec![0u8; 128 << 10];
        data.extend(noise(192 << 10));
        data.extend(vec![1u8; 64 << 10]);
        let f = categorize(&data[..], data.len() as u64, &o)
            .unwrap()
            .unwrap();
        let got: Vec<_> = f.iter().map(|f| (f.category.name, f.size)).collect();
        assert_eq!(
            got,
            [
                (DEFAULT_CATEGORY, 128 << 10),
                (INCOMPRESSIBLE, 192 << 10),
                (DEFAULT_CATEGORY, 64 << 10)
            ]
        );
    }
}
