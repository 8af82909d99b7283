//! Where the regular files of an uncompressed tar lie: enough of the
//! format (ustar, pax and GNU long names) to find a `docker save`
//! archive's members without unpacking it.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

/// Most members indexed.
const MAX_MEMBERS: usize = 100_000;
/// Largest pax header or GNU long name read.
const MAX_HEADER_DATA: u64 = 1 << 20;

/// A member's data: its offset in the archive and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Where the data starts.
    pub offset: u64,
    /// How many bytes it has.
    pub size: u64,
}

fn bad(why: impl Into<String>) -> Error {
    Error::Invalid {
        what: "tar archive",
        why: why.into(),
    }
}

/// A NUL-terminated field.
fn field(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// A numeric field: octal, or base-256 when its first bit is set.
fn number(bytes: &[u8]) -> Result<u64> {
    if bytes.first().is_some_and(|&b| b & 0x80 != 0) {
        let mut n: u64 = u64::from(bytes[0] & 0x7f);
        for &b in &bytes[1..] {
            n = n
                .checked_mul(256)
                .and_then(|n| n.checked_add(u64::from(b)))
                .ok_or_else(|| bad("a size does not fit 64 bits"))?;
        }
        return Ok(n);
    }
    let text = field(bytes);
    let text = std::str::from_utf8(text).map_err(|_| bad("a size is not octal"))?;
    let text = text.trim_matches(|c| c == ' ' || c == '\0');
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8).map_err(|_| bad(format!("size '{text}' is not octal")))
}

/// The `path` and `size` records of a pax header.
fn pax(data: &[u8]) -> Result<(Option<Vec<u8>>, Option<u64>)> {
    let (mut path, mut size) = (None, None);
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("a pax record has no length"))?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|t| t.parse().ok())
            .filter(|&l| l > space + 1 && l <= rest.len())
            .ok_or_else(|| bad("a pax record's length is wrong"))?;
        let record = &rest[space + 1..len - 1];
        rest = &rest[len..];
        if let Some(p) = record.strip_prefix(b"path=") {
            path = Some(p.to_vec());
        } else if let Some(s) = record.strip_prefix(b"size=") {
            let s = std::str::from_utf8(s).ok().and_then(|s| s.parse().ok());
            size = Some(s.ok_or_else(|| bad("a pax size is not a number"))?);
        }
    }
    Ok((path, size))
}

/// The regular files of the tar `file`, by name (without a leading `./`).
pub fn index<F: Read + Seek>(file: &mut F) -> Result<HashMap<Vec<u8>, Span>> {
    let mut members = HashMap::new();
    let mut offset = 0u64;
    let (mut long_name, mut pax_path, mut pax_size) = (None, None, None);
    loop {
        let mut header = [0u8; 512];
        file.seek(SeekFrom::Start(offset))?;
        if let Err(e) = file.read_exact(&mut header) {
            return match e.kind() {
                std::io::ErrorKind::UnexpectedEof => Err(bad("it ends without its end marker")),
                _ => Err(e.into()),
            };
        }
        if header.iter().all(|&b| b == 0) {
            return Ok(members);
        }
        let sum: u64 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        if number(&header[148..156])? != sum {
            return Err(bad(format!("bad header checksum at offset {offset}")));
        }
        let size = pax_size
            .take()
            .map_or_else(|| number(&header[124..136]), Ok)?;
        let data = offset + 512;
        let next = size
            .checked_add(511)
            .map(|s| s / 512 * 512)
            .and_then(|s| data.checked_add(s))
            .ok_or_else(|| bad("a member's size is too large"))?;
        let read_data = |file: &mut F| -> Result<Vec<u8>> {
            if size > MAX_HEADER_DATA {
                return Err(bad("an extended header is too large"));
            }
            let mut buf = vec![0u8; size as usize];
            file.read_exact(&mut buf)?;
            Ok(buf)
        };
        match header[156] {
            b'x' => (pax_path, pax_size) = pax(&read_data(file)?)?,
            b'L' => long_name = Some(field(&read_data(file)?).to_vec()),
            b'g' => {}
            kind => {
                let name = match (pax_path.take(), long_name.take()) {
                    (Some(p), _) | (None, Some(p)) => p,
                    (None, None) => {
                        let name = field(&header[0..100]);
                        let prefix = field(&header[345..500]);
                        if &header[257..262] == b"ustar" && !prefix.is_empty() {
                            [prefix, b"/", name].concat()
                        } else {
                            name.to_vec()
                        }
                    }
                };
                if matches!(kind, b'0' | 0 | b'7') {
                    if members.len() >= MAX_MEMBERS {
                        return Err(bad("too many members"));
                    }
                    let name = name.strip_prefix(b"./").unwrap_or(&name).to_vec();
                    members.insert(name, Span { offset: data, size });
                }
            }
        }
        offset = next;
    }
}
