//! The `binary` categorizer: executables and libraries (ELF, PE) go to
//! `binary/elf` and `binary/pe`, so machine code shares blocks with
//! machine code and compresses better, away from text and data.

use super::{Category, Fragment};

/// ELF files.
pub const ELF: &str = "binary/elf";
/// PE (Windows) files.
pub const PE: &str = "binary/pe";

/// Bytes of the start of a file this categorizer needs.
pub const HEAD: usize = 64;

/// The whole file as one fragment of its binary category, if `head` (the
/// first [`HEAD`] bytes, or the whole file if shorter) and `offset_probe`
/// (reads 4 bytes at an offset, for the PE signature) say it is one.
pub fn categorize(
    head: &[u8],
    size: u64,
    offset_probe: impl FnOnce(u64) -> Option<[u8; 4]>,
) -> Option<Vec<Fragment>> {
    let name = if is_elf(head) {
        ELF
    } else if is_pe(head, size, offset_probe) {
        PE
    } else {
        return None;
    };
    Some(vec![Fragment {
        category: Category::plain(name),
        size,
    }])
}

/// The ELF magic and a known ident version.
fn is_elf(head: &[u8]) -> bool {
    head.len() >= 20 && head.starts_with(b"\x7fELF") && head[6] == 1
}

/// A DOS stub whose `e_lfanew` points at a `PE\0\0` signature.
fn is_pe(head: &[u8], size: u64, probe: impl FnOnce(u64) -> Option<[u8; 4]>) -> bool {
    if head.len() < 64 || !head.starts_with(b"MZ") {
        return false;
    }
    let lfanew = u64::from(u32::from_le_bytes([head[60], head[61], head[62], head[63]]));
    // The signature and the COFF header with the optional header's magic.
    lfanew + 26 <= size && probe(lfanew) == Some(*b"PE\0\0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_and_pe_are_recognized() {
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        let f = categorize(&elf, 5000, |_| None).unwrap();
        assert_eq!((f[0].category.name, f[0].size), (ELF, 5000));

        let mut pe = b"MZ".to_vec();
        pe.resize(64, 0);
        pe[60] = 0x80;
        assert_eq!(
            categorize(&pe, 4096, |at| (at == 0x80).then_some(*b"PE\0\0")).unwrap()[0]
                .category
                .name,
            PE
        );
        assert!(categorize(&pe, 4096, |_| Some(*b"NE\0\0")).is_none());
        assert!(categorize(&pe, 0x90, |_| Some(*b"PE\0\0")).is_none());
        assert!(categorize(b"#!/bin/sh\n", 10, |_| None).is_none());
    }
}
