//! The `fits` categorizer: FITS astronomical images with 16-bit pixels in
//! a 2-D primary array. The pixels become a `fits/image` fragment whose
//! metadata gives their layout (what RICEPP needs); the header and what
//! follows the array become `fits/metadata`. Recognized as DwarFS does:
//! `SIMPLE = T`, `BITPIX = 16`, `NAXIS = 2`, a `BAYERPAT` key meaning two
//! interleaved colour components, a file size that is a whole number of
//! 2880-byte FITS records.

use super::{Category, Fragment};

/// Category of the pixel data.
pub const IMAGE: &str = "fits/image";
/// Category of headers and other bytes.
pub const METADATA: &str = "fits/metadata";

/// FITS files are made of records of this size.
const RECORD: usize = 2880;
/// Header cards are lines of this width.
const CARD: usize = 80;

/// Whether `head` (the start of a file) looks like a FITS file.
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(b"SIMPLE  =")
}

/// What the header says.
#[derive(Debug, Default)]
struct Header {
    simple: bool,
    bits: Option<i64>,
    width: Option<i64>,
    height: Option<i64>,
    components: u32,
    /// Bytes of header records.
    size: usize,
}

/// Reads header cards until `END`; None when the header is not one of a
/// 16-bit 2-D image.
fn parse_header(data: &[u8]) -> Option<Header> {
    let mut h = Header {
        components: 1,
        ..Header::default()
    };
    let mut values = 0usize;
    for (i, card) in data.chunks_exact(CARD).enumerate() {
        if card.iter().any(|&c| !(32..=126).contains(&c)) {
            return None;
        }
        let card = std::str::from_utf8(card).ok()?;
        let keyword = card[..8].trim();
        if matches!(keyword, "COMMENT" | "HISTORY" | "CONTINUE") {
            continue;
        }
        if i * CARD >= 2 * RECORD && values == 0 {
            return None;
        }
        if keyword.is_empty() {
            continue;
        }
        if keyword == "END" {
            if !h.simple || h.bits.is_none() || h.width.is_none() || h.height.is_none() {
                return None;
            }
            h.size = (i * CARD).div_ceil(RECORD) * RECORD;
            return Some(h);
        }
        if &card[8..10] != "= " {
            continue;
        }
        values += 1;
        let value = card[9..].split('/').next().unwrap_or_default().trim();
        match keyword {
            "SIMPLE" if value != "T" => return None,
            "SIMPLE" => h.simple = true,
            "BITPIX" => {
                h.bits = value.parse().ok();
                if h.bits != Some(16) {
                    return None;
                }
            }
            "NAXIS" if value != "2" => return None,
            "NAXIS1" => h.width = value.parse().ok(),
            "NAXIS2" => h.height = value.parse().ok(),
            "BAYERPAT" => h.components = 2,
            _ => {}
        }
    }
    None
}

/// Low bits that are zero in every pixel: the big-endian 16-bit words of
/// `pixels`, or'ed together. 16 when every pixel is zero.
fn unused_low_bits(pixels: &[u8]) -> u32 {
    let mut all = 0u16;
    for p in pixels.chunks_exact(2) {
        all |= u16::from_be_bytes([p[0], p[1]]);
        if all & 1 != 0 {
            return 0;
        }
    }
    all.trailing_zeros()
}

/// Splits a FITS image into header, pixel and trailing fragments; None
/// when `data` is not a FITS file of 16-bit 2-D images.
pub fn categorize(data: &[u8]) -> Option<Vec<Fragment>> {
    if data.len() < 2 * RECORD || !data.len().is_multiple_of(RECORD) {
        return None;
    }
    let h = parse_header(data)?;
    let (width, height) = (h.width?, h.height?);
    let pixels = usize::try_from(width)
        .ok()?
        .checked_mul(usize::try_from(height).ok()?)?
        .checked_mul(2)?;
    let end = h.size.checked_add(pixels)?;
    if pixels == 0 || end > data.len() {
        return None;
    }
    let unused = unused_low_bits(&data[h.size..end]);
    if unused > 8 {
        return None;
    }
    let metadata = serde_json::json!({
        "endianness": "big",
        "bytes_per_sample": 2,
        "unused_lsb_count": unused,
        "component_count": h.components,
    })
    .to_string();
    let mut fragments = vec![
        Fragment {
            category: Category::plain(METADATA),
            size: h.size as u64,
        },
        Fragment {
            category: Category {
                name: IMAGE,
                metadata: Some(metadata),
            },
            size: pixels as u64,
        },
    ];
    if end < data.len() {
        fragments.push(Fragment {
            category: Category::plain(METADATA),
            size: (data.len() - end) as u64,
        });
    }
    Some(fragments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(text: &str) -> String {
        format!("{text:<80}")
    }

    /// A FITS file of a `w` x `h` image of `pixel(i)` words, big-endian.
    fn fits(w: usize, h: usize, extra: &[&str], pixel: impl Fn(usize) -> u16) -> Vec<u8> {
        let mut header = String::new();
        header += &card("SIMPLE  =                    T / conforms to FITS");
        header += &card("BITPIX  =                   16");
        header += &card("NAXIS   =                    2");
        header += &card(&format!("NAXIS1  = {w:>20}"));
        header += &card(&format!("NAXIS2  = {h:>20}"));
        for e in extra {
            header += &card(e);
        }
        header += &card("COMMENT a comment");
        header += &card("END");
        let mut f = header.into_bytes();
        f.resize(f.len().div_ceil(RECORD) * RECORD, b' ');
        for i in 0..w * h {
            f.extend(pixel(i).to_be_bytes());
        }
        f.resize(f.len().div_ceil(RECORD) * RECORD, 0);
        f
    }

    fn sizes(f: &[Fragment]) -> Vec<(&str, u64)> {
        f.iter().map(|f| (f.category.name, f.size)).collect()
    }

    #[test]
    fn images_split_into_header_pixels_and_padding() {
        let f = fits(100, 30, &[], |i| (i as u16 % 1000) << 4);
        let frags = categorize(&f).unwrap();
        assert_eq!(
            sizes(&frags),
            [(METADATA, 2880), (IMAGE, 6000), (METADATA, 2640)]
        );
        assert_eq!(
            frags[1].category.metadata.as_deref(),
            Some(
                r#"{"bytes_per_sample":2,"component_count":1,"endianness":"big","unused_lsb_count":4}"#
            )
        );
        let bayer = fits(72, 40, &["BAYERPAT= 'RGGB'"], |i| i as u16 | 1);
        let frags = categorize(&bayer).unwrap();
        assert_eq!(sizes(&frags), [(METADATA, 2880), (IMAGE, 5760)]);
        assert!(frags[1]
            .category
            .metadata
            .as_deref()
            .unwrap()
            .contains("\"component_count\":2"));
    }

    #[test]
    fn other_files_are_not_images() {
        // 8-bit pixels, a cube, all-zero pixels, a truncated file, text.
        let mut eight = fits(40, 40, &[], |_| 1);
        eight[80 + 30] = b'8';
        eight[80 + 29] = b' ';
        assert!(categorize(&eight).is_none());
        let mut cube = fits(40, 40, &[], |_| 1);
        cube[160 + 29] = b'3';
        assert!(categorize(&cube).is_none());
        assert!(categorize(&fits(40, 40, &[], |_| 0)).is_none());
        let whole = fits(100, 100, &[], |i| i as u16);
        assert!(categorize(&whole[..2 * RECORD]).is_none());
        assert!(categorize(&vec![b' '; 3 * RECORD]).is_none());
        assert!(!sniff(b"GIF89a"));
    }
}
