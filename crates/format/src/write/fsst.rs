//! FSST compression of string tables: a symbol table of up to 255 symbols
//! (1 to 8 bytes) is learned from the strings, then each string is encoded
//! on its own as codes, greedily taking the longest symbol that matches and
//! escaping bytes no symbol covers. The inverse of [`crate::fsst`].
//!
//! Learning follows the FSST paper's idea: a few rounds of encoding a
//! sample with the current table, counting how often each symbol and each
//! pair of adjacent symbols occurs, and keeping the 255 candidates that
//! save the most bytes.

use std::collections::HashMap;

const ESCAPE: u8 = 0xff;
const MAX_SYMBOLS: usize = 255;
const ROUNDS: usize = 5;
/// Bytes of input the table is learned from.
const SAMPLE_BYTES: usize = 1 << 16;

/// A learned symbol table.
#[derive(Debug, Clone)]
pub struct Encoder {
    /// Symbols by code.
    symbols: Vec<Vec<u8>>,
    /// Symbol -> code.
    codes: HashMap<Vec<u8>, u8>,
}

/// Encodes `s` with `codes`, calling `emit` for each symbol used (or a
/// byte escaped, as a one-byte "symbol" with `None` code).
fn greedy(codes: &HashMap<Vec<u8>, u8>, s: &[u8], mut emit: impl FnMut(&[u8], Option<u8>)) {
    let mut i = 0;
    while i < s.len() {
        let longest = (1..=8.min(s.len() - i))
            .rev()
            .find_map(|len| codes.get(&s[i..i + len]).map(|&c| (len, c)));
        match longest {
            Some((len, code)) => {
                emit(&s[i..i + len], Some(code));
                i += len;
            }
            None => {
                emit(&s[i..i + 1], None);
                i += 1;
            }
        }
    }
}

fn index(symbols: &[Vec<u8>]) -> HashMap<Vec<u8>, u8> {
    symbols
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i as u8))
        .collect()
}

impl Encoder {
    /// Learns a table from `strings`.
    pub fn learn(strings: &[Vec<u8>]) -> Self {
        let mut sample: Vec<&[u8]> = Vec::new();
        let mut taken = 0;
        // An even spread of the strings, up to the sample size.
        let total: usize = strings.iter().map(Vec::len).sum();
        let every = (total / SAMPLE_BYTES).max(1);
        for s in strings.iter().step_by(every) {
            if taken >= SAMPLE_BYTES {
                break;
            }
            sample.push(s);
            taken += s.len();
        }
        let mut symbols: Vec<Vec<u8>> = Vec::new();
        for _ in 0..ROUNDS {
            let codes = index(&symbols);
            let mut gain: HashMap<Vec<u8>, usize> = HashMap::new();
            for s in &sample {
                let mut prev: Option<Vec<u8>> = None;
                greedy(&codes, s, |sym, _| {
                    *gain.entry(sym.to_vec()).or_default() += sym.len();
                    if let Some(p) = &prev {
                        if p.len() + sym.len() <= 8 {
                            let mut pair = p.clone();
                            pair.extend_from_slice(sym);
                            *gain.entry(pair.clone()).or_default() += pair.len();
                        }
                    }
                    prev = Some(sym.to_vec());
                });
            }
            let mut ranked: Vec<(Vec<u8>, usize)> = gain.into_iter().collect();
            // Most saved first; ties broken by the bytes for determinism.
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            symbols = ranked
                .into_iter()
                .take(MAX_SYMBOLS)
                .map(|(s, _)| s)
                .collect();
        }
        // Codes follow the serialized order: lengths 2..=8, then 1.
        symbols.sort_by_key(|s| (if s.len() == 1 { 9 } else { s.len() }, s.clone()));
        Encoder {
            codes: index(&symbols),
            symbols,
        }
    }

    /// Encodes one string.
    pub fn encode(&self, s: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(s.len());
        greedy(&self.codes, s, |sym, code| match code {
            Some(c) => out.push(c),
            None => {
                out.push(ESCAPE);
                out.push(sym[0]);
            }
        });
        out
    }

    /// The serialized symbol table, as [`crate::fsst::SymbolTable::decode`]
    /// reads it.
    pub fn serialize(&self) -> Vec<u8> {
        let mut counts = [0u8; 8];
        for s in &self.symbols {
            counts[s.len() - 1] += 1;
        }
        let mut out = vec![1, self.symbols.len() as u8, counts[1], 0];
        out.extend_from_slice(&[0x0a, 0x14, 0x34, 0x01, 0]);
        out.extend_from_slice(&counts);
        for s in &self.symbols {
            out.extend_from_slice(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsst::SymbolTable;

    fn round_trip(strings: &[Vec<u8>]) -> (usize, usize) {
        let enc = Encoder::learn(strings);
        let table = SymbolTable::decode(&enc.serialize()).unwrap();
        let mut packed = 0;
        for s in strings {
            let e = enc.encode(s);
            packed += e.len();
            assert_eq!(&table.decode_string(&e).unwrap(), s);
        }
        (packed, strings.iter().map(Vec::len).sum())
    }

    #[test]
    fn names_compress_and_decode() {
        let names: Vec<Vec<u8>> = (0..3000)
            .map(|i| format!("libsomething-{}.so.{}", i % 97, i % 13).into_bytes())
            .collect();
        let (packed, plain) = round_trip(&names);
        assert!(packed * 2 < plain, "{packed} vs {plain}");
    }

    #[test]
    fn odd_inputs_decode() {
        let mut s = 7u64;
        let random: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                (0..i % 40)
                    .map(|_| {
                        s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (s >> 56) as u8
                    })
                    .collect()
            })
            .collect();
        round_trip(&random);
        round_trip(&[Vec::new(), vec![0xff; 20], vec![0; 3]]);
        round_trip(&[]);
    }
}
