//! The `pcmaudio` categorizer: uncompressed integer PCM audio in WAV,
//! Wave64, AIFF and CAF files. The sample data becomes a
//! `pcmaudio/waveform` fragment whose metadata gives the sample layout (what
//! FLAC needs to code it losslessly); headers and trailing chunks become
//! `pcmaudio/metadata`.
//!
//! Accepted like DwarFS does: 8-bit unsigned or 16/20/24/32-bit signed
//! samples, any channel count; floating point and compressed formats are
//! left alone. A `data` chunk that is not a whole number of frames is cut
//! down to one, the rest going to metadata.

use super::{Category, Fragment};

/// Category of the header and other non-sample bytes.
pub const METADATA: &str = "pcmaudio/metadata";
/// Category of the samples.
pub const WAVEFORM: &str = "pcmaudio/waveform";

/// Files shorter than this are not looked at.
const MIN_SIZE: usize = 32;

/// How the samples of a file are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    big_endian: bool,
    signed: bool,
    bits: u32,
    bytes: u32,
    channels: u32,
}

impl Layout {
    /// Samples padded at the low end (`lsb`), as every format here stores
    /// them, with the byte count the bit count needs.
    fn new(big_endian: bool, signed: bool, bits: u32, channels: u32) -> Self {
        Layout {
            big_endian,
            signed,
            bits,
            bytes: bits.div_ceil(8),
            channels,
        }
    }

    /// The subset DwarFS handles.
    fn supported(&self) -> bool {
        self.channels > 0
            && self.channels <= 8
            && match self.bits {
                8 => self.bytes == 1,
                16 => self.bytes == 2,
                20 | 24 => self.bytes == 3 || self.bytes == 4,
                32 => self.bytes == 4,
                _ => false,
            }
    }

    fn frame(&self) -> u64 {
        u64::from(self.channels * self.bytes)
    }

    /// The metadata JSON, keys sorted as DwarFS writes them.
    fn json(&self) -> String {
        serde_json::json!({
            "endianness": if self.big_endian { "big" } else { "little" },
            "signedness": if self.signed { "signed" } else { "unsigned" },
            "padding": "lsb",
            "bytes_per_sample": self.bytes,
            "bits_per_sample": self.bits,
            "number_of_channels": self.channels,
        })
        .to_string()
    }
}

/// Whether `head` (the start of a file) looks like one of the formats.
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(b"RIFF")
        || head.starts_with(b"FORM")
        || head.starts_with(b"caff")
        || head.starts_with(W64_RIFF)
}

/// Splits a PCM audio file into metadata and waveform fragments; None when
/// `data` is not one.
pub fn categorize(data: &[u8]) -> Option<Vec<Fragment>> {
    if data.len() < MIN_SIZE {
        return None;
    }
    let (layout, start, len) = aiff(data)
        .or_else(|| caf(data))
        .or_else(|| wav(data))
        .or_else(|| wave64(data))?;
    if !layout.supported() {
        return None;
    }
    let len = len - len % layout.frame();
    if len == 0 {
        return None;
    }
    let total = data.len() as u64;
    let mut fragments = vec![
        Fragment {
            category: Category::plain(METADATA),
            size: start,
        },
        Fragment {
            category: Category {
                name: WAVEFORM,
                metadata: Some(layout.json()),
            },
            size: len,
        },
    ];
    if start + len < total {
        fragments.push(Fragment {
            category: Category::plain(METADATA),
            size: total - start - len,
        });
    }
    Some(fragments)
}

fn u16_at(d: &[u8], pos: usize, big: bool) -> Option<u16> {
    let b: [u8; 2] = d.get(pos..pos + 2)?.try_into().ok()?;
    Some(if big {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    })
}

fn u32_at(d: &[u8], pos: usize, big: bool) -> Option<u32> {
    let b: [u8; 4] = d.get(pos..pos + 4)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

fn u64_at(d: &[u8], pos: usize, big: bool) -> Option<u64> {
    let b: [u8; 8] = d.get(pos..pos + 8)?.try_into().ok()?;
    Some(if big {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    })
}

/// One chunk of an IFF-like file: its id, where its body starts, how long
/// the body is.
struct Chunk<'a> {
    id: &'a [u8],
    body: usize,
    size: u64,
}

/// How a family of formats frames its chunks.
struct Framing {
    id_len: usize,
    /// Size field is 8 bytes (else 4).
    wide: bool,
    big_endian: bool,
    /// The size counts the chunk header too (Wave64).
    size_includes_header: bool,
    align: usize,
}

/// Walks the chunks from `pos` to the end of `d`; stops at the first chunk
/// that does not fit.
fn chunks<'a>(d: &'a [u8], mut pos: usize, f: &'a Framing) -> impl Iterator<Item = Chunk<'a>> {
    std::iter::from_fn(move || {
        pos = pos.checked_next_multiple_of(f.align)?;
        let header = f.id_len + if f.wide { 8 } else { 4 };
        let id = d.get(pos..pos + f.id_len)?;
        let size = if f.wide {
            u64_at(d, pos + f.id_len, f.big_endian)?
        } else {
            u64::from(u32_at(d, pos + f.id_len, f.big_endian)?)
        };
        let body_size = if f.size_includes_header {
            size.checked_sub(header as u64)?
        } else {
            size
        };
        let body = pos + header;
        let end = (body as u64).checked_add(body_size)?;
        if end > d.len() as u64 {
            return None;
        }
        pos = end as usize;
        Some(Chunk {
            id,
            body,
            size: body_size,
        })
    })
}

/// AIFF: big-endian signed samples; `COMM` gives the layout, `SSND` the
/// samples after an offset.
fn aiff(d: &[u8]) -> Option<(Layout, u64, u64)> {
    if !d.starts_with(b"FORM") || d.get(8..12)? != b"AIFF" {
        return None;
    }
    let framing = Framing {
        id_len: 4,
        wide: false,
        big_endian: true,
        size_includes_header: false,
        align: 2,
    };
    let mut comm = None;
    for c in chunks(d, 12, &framing) {
        match c.id {
            b"COMM" => {
                if c.size != 18 || comm.is_some() {
                    return None;
                }
                let channels = u16_at(d, c.body, true)?;
                let frames = u32_at(d, c.body + 2, true)?;
                let bits = u16_at(d, c.body + 6, true)?;
                let layout = Layout::new(true, true, bits.into(), channels.into());
                if !layout.supported() {
                    return None;
                }
                comm = Some((layout, frames));
            }
            b"SSND" => {
                let (layout, frames) = comm?;
                let offset = u32_at(d, c.body, true)?;
                let start = c.body as u64 + 8 + u64::from(offset);
                let len = u64::from(frames) * layout.frame();
                if 8 + u64::from(offset) + len > c.size {
                    return None;
                }
                return Some((layout, start, len));
            }
            _ => {}
        }
    }
    None
}

/// CAF: `desc` with linear PCM, `data` after a 4-byte edit count; a data
/// size of all ones means "to the end of the file".
fn caf(d: &[u8]) -> Option<(Layout, u64, u64)> {
    if !d.starts_with(b"caff") || u16_at(d, 4, true)? != 1 || u16_at(d, 6, true)? != 0 {
        return None;
    }
    const FLOAT: u32 = 1;
    const LITTLE_ENDIAN: u32 = 2;
    let mut desc = None;
    let mut pos = 8usize;
    while let Some(id) = d.get(pos..pos + 4) {
        let mut size = u64_at(d, pos + 4, true)?;
        let body = pos + 12;
        if id == b"data" && size == u64::MAX {
            size = (d.len() - body.min(d.len())) as u64;
        }
        let end = (body as u64).checked_add(size)?;
        if end > d.len() as u64 {
            return None;
        }
        match id {
            b"desc" => {
                if size != 32 || desc.is_some() {
                    return None;
                }
                if d.get(body + 8..body + 12)? != b"lpcm" {
                    return None;
                }
                let flags = u32_at(d, body + 12, true)?;
                let bytes_per_packet = u32_at(d, body + 16, true)?;
                let frames_per_packet = u32_at(d, body + 20, true)?;
                let channels = u32_at(d, body + 24, true)?;
                let bits = u32_at(d, body + 28, true)?;
                if flags & FLOAT != 0
                    || frames_per_packet != 1
                    || channels == 0
                    || bytes_per_packet == 0
                    || bytes_per_packet > 4 * channels
                    || bytes_per_packet % channels != 0
                {
                    return None;
                }
                let layout = Layout {
                    big_endian: flags & LITTLE_ENDIAN == 0,
                    signed: true,
                    bits,
                    bytes: bytes_per_packet / channels,
                    channels,
                };
                if !layout.supported() {
                    return None;
                }
                desc = Some(layout);
            }
            b"data" => {
                let layout = desc?;
                let len = size.checked_sub(4)?;
                return Some((layout, body as u64 + 4, len));
            }
            _ => {}
        }
        pos = end as usize;
    }
    None
}

const W64_RIFF: &[u8] = b"riff\x2e\x91\xcf\x11\xa5\xd6\x28\xdb\x04\xc1\x00\x00";
const W64_WAVE: &[u8] = b"wave\xf3\xac\xd3\x11\x8c\xd1\x00\xc0\x4f\x8e\xdb\x8a";
const W64_FMT: &[u8] = b"fmt \xf3\xac\xd3\x11\x8c\xd1\x00\xc0\x4f\x8e\xdb\x8a";
const W64_DATA: &[u8] = b"data\xf3\xac\xd3\x11\x8c\xd1\x00\xc0\x4f\x8e\xdb\x8a";

/// WAV: RIFF chunks, little endian.
fn wav(d: &[u8]) -> Option<(Layout, u64, u64)> {
    if !d.starts_with(b"RIFF") || d.get(8..12)? != b"WAVE" {
        return None;
    }
    let framing = Framing {
        id_len: 4,
        wide: false,
        big_endian: false,
        size_includes_header: false,
        align: 2,
    };
    wav_like(d, 12, &framing, b"fmt ", b"data", &[16, 18, 20, 40])
}

/// Wave64: WAV with GUID chunk ids and 64-bit sizes.
fn wave64(d: &[u8]) -> Option<(Layout, u64, u64)> {
    if !d.starts_with(W64_RIFF) || d.get(24..40)? != W64_WAVE {
        return None;
    }
    let framing = Framing {
        id_len: 16,
        wide: true,
        big_endian: false,
        size_includes_header: true,
        align: 8,
    };
    wav_like(d, 40, &framing, W64_FMT, W64_DATA, &[16, 18, 40])
}

fn wav_like(
    d: &[u8],
    start: usize,
    framing: &Framing,
    fmt_id: &[u8],
    data_id: &[u8],
    fmt_sizes: &[u64],
) -> Option<(Layout, u64, u64)> {
    const PCM: u16 = 1;
    const EXTENSIBLE: u16 = 0xfffe;
    let mut fmt = None;
    for c in chunks(d, start, framing) {
        if c.id == fmt_id {
            if !fmt_sizes.contains(&c.size) || fmt.is_some() {
                return None;
            }
            let code = u16_at(d, c.body, false)?;
            let channels = u16_at(d, c.body + 2, false)?;
            let bits = u16_at(d, c.body + 14, false)?;
            let format = if c.size == 40 && code == EXTENSIBLE {
                u16_at(d, c.body + 24, false)?
            } else {
                code
            };
            if format != PCM {
                return None;
            }
            let layout = Layout::new(false, bits > 8, bits.into(), channels.into());
            if !layout.supported() {
                return None;
            }
            fmt = Some(layout);
        } else if c.id == data_id {
            return Some((fmt?, c.body as u64, c.size));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav_file(channels: u16, bits: u16, data: &[u8], trailer: &[u8]) -> Vec<u8> {
        let bytes = bits.div_ceil(8);
        let mut f = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        f.extend(16u32.to_le_bytes());
        f.extend(1u16.to_le_bytes());
        f.extend(channels.to_le_bytes());
        f.extend(44100u32.to_le_bytes());
        f.extend((44100 * u32::from(channels * bytes)).to_le_bytes());
        f.extend((channels * bytes).to_le_bytes());
        f.extend(bits.to_le_bytes());
        f.extend(b"data");
        f.extend((data.len() as u32).to_le_bytes());
        f.extend(data);
        if data.len() % 2 == 1 {
            f.push(0);
        }
        f.extend(trailer);
        let size = (f.len() - 8) as u32;
        f[4..8].copy_from_slice(&size.to_le_bytes());
        f
    }

    fn sizes(f: &[Fragment]) -> Vec<(&str, u64)> {
        f.iter().map(|f| (f.category.name, f.size)).collect()
    }

    #[test]
    fn wav_splits_header_samples_and_trailer() {
        let data = vec![7u8; 4000];
        let trailer = b"LIST\x04\0\0\0abcd";
        let file = wav_file(2, 16, &data, trailer);
        let f = categorize(&file).unwrap();
        assert_eq!(
            sizes(&f),
            [(METADATA, 44), (WAVEFORM, 4000), (METADATA, 12)]
        );
        assert_eq!(
            f[1].category.metadata.as_deref(),
            Some(
                r#"{"bits_per_sample":16,"bytes_per_sample":2,"endianness":"little","number_of_channels":2,"padding":"lsb","signedness":"signed"}"#
            )
        );
        assert_eq!(f.iter().map(|f| f.size).sum::<u64>(), file.len() as u64);
    }

    #[test]
    fn wav_8_bit_is_unsigned_and_partial_frames_go_to_metadata() {
        let file = wav_file(2, 8, &[1u8; 101], b"");
        let f = categorize(&file).unwrap();
        assert_eq!(sizes(&f), [(METADATA, 44), (WAVEFORM, 100), (METADATA, 2)]);
        assert!(f[1]
            .category
            .metadata
            .as_deref()
            .unwrap()
            .contains("\"unsigned\""));
    }

    #[test]
    fn unsupported_and_broken_files_are_not_audio() {
        assert!(categorize(&wav_file(2, 12, &[0; 600], b"")).is_none());
        let mut float = wav_file(1, 32, &[0; 400], b"");
        float[20] = 3; // IEEE float
        assert!(categorize(&float).is_none());
        let whole = wav_file(1, 16, &[0; 400], b"");
        assert!(categorize(&whole[..200]).is_none());
        assert!(categorize(b"RIFF but not at all a wave file, no").is_none());
        assert!(categorize(&[0u8; 100]).is_none());
    }

    #[test]
    fn aiff_samples_follow_the_ssnd_offset() {
        let frames = 100u32;
        let mut f = b"FORM\0\0\0\0AIFFCOMM".to_vec();
        f.extend(18u32.to_be_bytes());
        f.extend(1u16.to_be_bytes());
        f.extend(frames.to_be_bytes());
        f.extend(24u16.to_be_bytes());
        f.extend([0x40, 0x0e, 0xac, 0x44, 0, 0, 0, 0, 0, 0]); // 44100 Hz
        f.extend(b"SSND");
        f.extend((8 + 4 + frames * 3).to_be_bytes());
        f.extend(4u32.to_be_bytes());
        f.extend(0u32.to_be_bytes());
        f.extend([0u8; 4]);
        f.extend(vec![5u8; 300]);
        let size = (f.len() - 8) as u32;
        f[4..8].copy_from_slice(&size.to_be_bytes());
        let frags = categorize(&f).unwrap();
        assert_eq!(sizes(&frags), [(METADATA, 58), (WAVEFORM, 300)]);
        let meta = frags[1].category.metadata.as_deref().unwrap();
        assert!(meta.contains("\"big\"") && meta.contains("\"bits_per_sample\":24"));
    }

    #[test]
    fn caf_data_to_the_end_of_the_file() {
        let mut f = b"caff\0\x01\0\0desc".to_vec();
        f.extend(32u64.to_be_bytes());
        f.extend(48000f64.to_be_bytes());
        f.extend(b"lpcm");
        f.extend(2u32.to_be_bytes()); // little endian
        f.extend(4u32.to_be_bytes());
        f.extend(1u32.to_be_bytes());
        f.extend(2u32.to_be_bytes());
        f.extend(16u32.to_be_bytes());
        f.extend(b"data");
        f.extend(u64::MAX.to_be_bytes());
        f.extend(0u32.to_be_bytes());
        f.extend(vec![9u8; 400]);
        let frags = categorize(&f).unwrap();
        assert_eq!(sizes(&frags), [(METADATA, 68), (WAVEFORM, 400)]);
    }

    #[test]
    fn wave64_guid_chunks() {
        let data = vec![3u8; 600];
        let mut f = W64_RIFF.to_vec();
        f.extend(0u64.to_le_bytes());
        f.extend(W64_WAVE);
        f.extend(W64_FMT);
        f.extend((24u64 + 16).to_le_bytes());
        f.extend(1u16.to_le_bytes());
        f.extend(3u16.to_le_bytes());
        f.extend(44100u32.to_le_bytes());
        f.extend((44100u32 * 6).to_le_bytes());
        f.extend(6u16.to_le_bytes());
        f.extend(16u16.to_le_bytes());
        f.extend(W64_DATA);
        f.extend((24u64 + data.len() as u64).to_le_bytes());
        f.extend(&data);
        let len = f.len() as u64;
        f[16..24].copy_from_slice(&len.to_le_bytes());
        let frags = categorize(&f).unwrap();
        assert_eq!(sizes(&frags), [(METADATA, 104), (WAVEFORM, 600)]);
    }
}
