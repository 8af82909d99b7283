//! pax extended header records, read right.
//!
//! The `tar` crate splits a pax header at newlines, but a record is
//! length-prefixed and its value may hold newlines of its own: the text
//! ACLs GNU tar writes (`SCHILY.acl.*`) always do, and binary attribute
//! values (`SCHILY.xattr.*`) can. So the stream is watched as it goes into
//! the `tar` reader ([`PaxTap`]): the tap follows the tar framing, keeps
//! the data of each member's pax header, and [`records`] parses it by the
//! lengths.

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;

/// The most a member's pax header may hold (the `tar` reader holds it in
/// memory too).
const MAX_PAX: u64 = 64 << 20;

/// The raw pax header of the member whose header was read last, shared
/// between a [`PaxTap`] and its reader.
pub(super) type LastPax = Rc<RefCell<Option<Vec<u8>>>>;

/// Where the tap is in the tar framing.
enum Phase {
    /// Filling the next 512-byte header.
    Header,
    /// Old GNU sparse extension headers, then `data` bytes.
    SparseExtensions { data: u64 },
    /// `left` bytes of member data, then padding to 512; kept when the
    /// member is a pax header.
    Data { left: u64, pad: u64, keep: bool },
    /// The framing could not be followed (the `tar` reader will say why).
    Lost,
}

/// A reader that passes a tar stream through unchanged and keeps the pax
/// header of each member for [`LastPax`].
pub(super) struct PaxTap<R> {
    inner: R,
    phase: Phase,
    block: Vec<u8>,
    /// pax data read since the last member header.
    pending: Option<Vec<u8>>,
    /// The data of the pax header being read.
    kept: Vec<u8>,
    last: LastPax,
}

impl<R: Read> PaxTap<R> {
    /// Taps `inner`; `last` is where each member's pax header goes.
    pub(super) fn new(inner: R, last: LastPax) -> Self {
        PaxTap {
            inner,
            phase: Phase::Header,
            block: Vec::with_capacity(512),
            pending: None,
            kept: Vec::new(),
            last,
        }
    }

    /// Follows `bytes` through the framing.
    fn follow(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.phase {
                Phase::Lost => return,
                Phase::Header | Phase::SparseExtensions { .. } => {
                    let take = (512 - self.block.len()).min(bytes.len());
                    self.block.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if self.block.len() == 512 {
                        self.phase = self.next_phase();
                        self.block.clear();
                    }
                }
                Phase::Data { left, pad, keep } => {
                    let take = (*left + *pad).min(bytes.len() as u64) as usize;
                    if *keep {
                        let data = take.min(*left as usize);
                        self.kept.extend_from_slice(&bytes[..data]);
                    }
                    let data_taken = (take as u64).min(*left);
                    *left -= data_taken;
                    *pad -= take as u64 - data_taken;
                    bytes = &bytes[take..];
                    if *left == 0 && *pad == 0 {
                        if *keep {
                            self.pending = Some(std::mem::take(&mut self.kept));
                        }
                        self.phase = Phase::Header;
                    }
                }
            }
        }
    }

    /// The phase after the full 512-byte block in `self.block`.
    fn next_phase(&mut self) -> Phase {
        let h = &self.block;
        if let Phase::SparseExtensions { data } = self.phase {
            return if h[504] != 0 {
                Phase::SparseExtensions { data }
            } else {
                data_phase(data, false)
            };
        }
        if h.iter().all(|&b| b == 0) {
            return Phase::Header;
        }
        let Some(mut size) = header_size(&h[124..136]) else {
            return Phase::Lost;
        };
        match h[156] {
            b'x' | b'X' => {
                if size > MAX_PAX {
                    return Phase::Lost;
                }
                self.kept.clear();
                data_phase(size, true)
            }
            b'g' | b'L' | b'K' => data_phase(size, false),
            kind => {
                let pax = self.pending.take();
                if let Some(s) = pax.as_deref().and_then(|p| {
                    records(p)
                        .find(|(k, _)| *k == b"size")
                        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
                }) {
                    size = s;
                }
                *self.last.borrow_mut() = pax;
                if kind == b'S' && h[482] != 0 {
                    Phase::SparseExtensions { data: size }
                } else {
                    data_phase(size, false)
                }
            }
        }
    }
}

/// Member data of `size` bytes and its padding.
fn data_phase(size: u64, keep: bool) -> Phase {
    if size == 0 {
        return Phase::Header;
    }
    Phase::Data {
        left: size,
        pad: (512 - size % 512) % 512,
        keep,
    }
}

/// A header's size field: octal, or base-256 when its top bit is set.
fn header_size(field: &[u8]) -> Option<u64> {
    if field[0] & 0x80 != 0 {
        let mut n = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            n = n.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(n);
    }
    let text = std::str::from_utf8(field).ok()?;
    let digits = text.trim_matches(|c: char| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(digits, 8).ok()
}

impl<R: Read> Read for PaxTap<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.follow(&buf[..n]);
        Ok(n)
    }
}

/// The records of pax header data `data`, as (key, value); parsing stops
/// at the first malformed record.
pub(super) fn records(data: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let space = rest.iter().position(|&b| b == b' ')?;
        let len: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        if len <= space + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return None;
        }
        let record = &rest[space + 1..len - 1];
        rest = &rest[len..];
        let eq = record.iter().position(|&b| b == b'=')?;
        Some((&record[..eq], &record[eq + 1..]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, value: &[u8]) -> Vec<u8> {
        let body = [key.as_bytes(), b"=", value, b"\n"].concat();
        let mut len = body.len() + 2;
        while format!("{len} ").len() + body.len() != len {
            len += 1;
        }
        [format!("{len} ").into_bytes(), body].concat()
    }

    #[test]
    fn values_may_hold_newlines() {
        let data = [
            record("SCHILY.acl.access", b"user::rw-\nother::r--\n"),
            record("SCHILY.xattr.user.bin", b"\n\0\n"),
            record("path", b"a/b"),
        ]
        .concat();
        let r: Vec<_> = records(&data).collect();
        assert_eq!(
            r,
            [
                (&b"SCHILY.acl.access"[..], &b"user::rw-\nother::r--\n"[..]),
                (b"SCHILY.xattr.user.bin", b"\n\0\n"),
                (b"path", b"a/b"),
            ]
        );
        assert_eq!(records(b"99 path=x\n").count(), 0);
        assert_eq!(records(b"3 =\n").count(), 0);
    }

    #[test]
    fn sizes_are_octal_or_base_256() {
        assert_eq!(header_size(b"00000001750\0"), Some(1000));
        assert_eq!(header_size(b"\0\0\0\0\0\0\0\0\0\0\0\0"), Some(0));
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[7] = 2;
        assert_eq!(header_size(&big), Some(2 << 32));
        assert_eq!(header_size(b"0000000175x\0"), None);
    }
}
