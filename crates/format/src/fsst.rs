//! Decoding of FSST-compressed strings (the `symtab` of a string table).
//!
//! A symbol table holds up to 255 symbols of 1 to 8 bytes. Each byte of a
//! compressed string is a code: `0xff` escapes the next byte, which stands
//! for itself; any other code stands for its symbol.

use crate::{corrupt, Result};

/// Code that makes the next byte a literal.
const ESCAPE: u8 = 0xff;

/// A decoded FSST symbol table.
#[derive(Debug, Clone)]
pub struct SymbolTable {
    symbols: Vec<Vec<u8>>,
}

impl SymbolTable {
    /// Decodes a serialized symbol table: an 8-byte header, a flag byte for
    /// zero-terminated mode, 8 counts of symbols by length (1 to 8), then the
    /// symbols of length 2, 3, …, 8 and last those of length 1.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < 17 {
            return Err(corrupt!(
                "fsst: symbol table too short ({} bytes)",
                bytes.len()
            ));
        }
        if bytes[0] != 1 || bytes[4..8] != [0x0a, 0x14, 0x34, 0x01] {
            return Err(corrupt!("fsst: bad symbol table header"));
        }
        let zero_terminated = match bytes[8] {
            0 => false,
            1 => true,
            b => return Err(corrupt!("fsst: bad zero-terminated flag {b}")),
        };
        let mut counts = [0usize; 8];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = usize::from(bytes[9 + i]);
        }
        let total: usize = counts.iter().sum();
        if total > 255 || total != usize::from(bytes[1]) {
            return Err(corrupt!("fsst: symbol counts do not add up"));
        }
        let mut symbols = Vec::with_capacity(total);
        let mut pos = 17;
        if zero_terminated {
            if counts[0] == 0 {
                return Err(corrupt!(
                    "fsst: zero-terminated table without the NUL symbol"
                ));
            }
            counts[0] -= 1;
            symbols.push(vec![0]);
        }
        for len in (2..=8).chain(1..=1) {
            for _ in 0..counts[len - 1] {
                let sym = bytes
                    .get(pos..pos + len)
                    .ok_or_else(|| corrupt!("fsst: symbol table truncated"))?;
                symbols.push(sym.to_vec());
                pos += len;
            }
        }
        Ok(SymbolTable { symbols })
    }

    /// Decompresses one string.
    pub fn decode_string(&self, input: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(input.len() * 3);
        let mut i = 0;
        while i < input.len() {
            let code = input[i];
            i += 1;
            if code == ESCAPE {
                let b = *input
                    .get(i)
                    .ok_or_else(|| corrupt!("fsst: escape at end of string"))?;
                out.push(b);
                i += 1;
            } else {
                let sym = self
                    .symbols
                    .get(usize::from(code))
                    .ok_or_else(|| corrupt!("fsst: code {code} has no symbol"))?;
                out.extend_from_slice(sym);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_documented_example() {
        // Symbols "FS", "war", "!", "D": histogram 2 one-byte, 1 two-byte, 1 three-byte.
        let mut t = vec![
            1, 4, 0, 0, 0x0a, 0x14, 0x34, 0x01, 0, 2, 1, 1, 0, 0, 0, 0, 0,
        ];
        t.extend_from_slice(b"FSwar!D");
        let st = SymbolTable::decode(&t).unwrap();
        assert_eq!(st.decode_string(&[3, 1, 0, 2]).unwrap(), b"DwarFS!");
        assert_eq!(st.decode_string(&[0xff, b'x', 0]).unwrap(), b"xFS");
        assert!(st.decode_string(&[9]).is_err());
        assert!(st.decode_string(&[0xff]).is_err());
    }

    #[test]
    fn refuses_malformed_tables() {
        assert!(SymbolTable::decode(&[1, 0, 0]).is_err());
        let mut t = vec![
            1, 4, 0, 0, 0x0a, 0x14, 0x34, 0x01, 0, 2, 1, 1, 0, 0, 0, 0, 0,
        ];
        t.extend_from_slice(b"FSw");
        assert!(SymbolTable::decode(&t).is_err());
    }
}
