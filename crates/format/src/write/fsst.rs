//! FSST compression of string tables: a symbol table of up to 255 symbols
//! (1 to 8 bytes) is learned from the strings, then each string is encoded
//! on its own as codes, greedily taking the longest symbol that matches and
//! escaping bytes no symbol covers. The inverse of [`crate::fsst`].
//!
//! Learning follows the FSST paper's idea: a few rounds of encoding a
//! sample with the current table, counting how often each symbol and each
//! pair of adjacent symbols occurs, and keeping the 255 candidates that
//! save the most bytes. Two ways of proposing candidates are tried, and
//! the table of any round that encodes the sample smallest is kept.

use crate::string_list::StringList;
use rustc_hash::FxBuildHasher;
use std::collections::HashMap;

/// A symbol (1 to 8 bytes) as a map key: its bytes, and its length in the
/// top byte; no allocation per lookup.
type Key = u128;

/// Maps keyed by symbols, with a fast hash (learning counts candidates
/// at every position of the sample; the keys are not chosen by an
/// adversary, so a multiply-rotate hash is enough).
type SymbolMap<V> = HashMap<Key, V, FxBuildHasher>;

fn key(symbol: Symbol) -> Key {
    Key::from(symbol.word) | (symbol.len as Key) << 120
}

fn symbol_of(key: Key) -> Vec<u8> {
    let b = key.to_le_bytes();
    b[..usize::from(b[15])].to_vec()
}

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
    codes: Codes,
}

/// The first 8 bytes of `bytes` (fewer when it is shorter) as a
/// little-endian word.
fn word(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(first) => u64::from_le_bytes(*first),
        None => bytes.iter().rev().fold(0, |w, &b| (w << 8) | u64::from(b)),
    }
}

/// A symbol found in a string: its bytes as a word (see [`word`]) and
/// its length, 1 to 8.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    word: u64,
    len: usize,
}

/// The low `len` bytes of a word.
fn mask(len: usize) -> u64 {
    if len >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * len)) - 1
    }
}

/// Symbol -> code, for the greedy encoder: per first byte, the symbols
/// that start with it (as words), longest first, so the longest match is
/// the first that agrees.
#[derive(Debug, Clone)]
struct Codes {
    by_first: Vec<Vec<(u64, usize, u8)>>,
}

impl Codes {
    fn new(symbols: &[Vec<u8>]) -> Self {
        let mut by_first = vec![Vec::new(); 256];
        for (code, s) in symbols.iter().enumerate() {
            by_first[usize::from(s[0])].push((word(s), s.len(), code as u8));
        }
        for list in &mut by_first {
            list.sort_by_key(|&(_, len, _)| std::cmp::Reverse(len));
        }
        Codes { by_first }
    }

    /// The longest symbol `rest` (not empty) starts with and its code,
    /// or its first byte and no code.
    fn longest(&self, rest: &[u8]) -> (Symbol, Option<u8>) {
        let n = rest.len().min(8);
        let w = word(rest);
        self.by_first[usize::from(rest[0])]
            .iter()
            .find(|&&(symbol, len, _)| len <= n && (w ^ symbol) & mask(len) == 0)
            .map_or(
                (
                    Symbol {
                        word: w & 0xff,
                        len: 1,
                    },
                    None,
                ),
                |&(word, len, code)| (Symbol { word, len }, Some(code)),
            )
    }
}

/// Encodes `s` with `codes`, calling `emit` for each symbol used (or a
/// byte escaped, as a one-byte symbol with `None` code).
fn greedy(codes: &Codes, s: &[u8], mut emit: impl FnMut(Symbol, Option<u8>)) {
    let mut i = 0;
    while i < s.len() {
        let (symbol, code) = codes.longest(&s[i..]);
        emit(symbol, code);
        i += symbol.len;
    }
}

fn index(symbols: &[Vec<u8>]) -> Codes {
    Codes::new(symbols)
}

/// About [`SAMPLE_BYTES`] of `strings`, each string taken with the same
/// chance (from a fixed seed): a fixed stride would see only some digits
/// of numbered names.
fn sample(strings: &StringList) -> Vec<&[u8]> {
    let total = strings.total_len();
    let every = (total / SAMPLE_BYTES).max(1) as u64;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    strings
        .iter()
        .filter(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.is_multiple_of(every)
        })
        .collect()
}

/// One way of scoring candidate symbols while learning a table.
#[derive(Clone, Copy)]
struct Scoring {
    /// Also propose each symbol grown by the first byte of the next one,
    /// so symbols can lengthen a byte at a time (names such as
    /// `f000123` want that), not only by joining two whole symbols.
    grow: bool,
}

/// Bytes `sample` takes when encoded with `codes` (an escaped byte costs 2).
fn encoded_size(codes: &Codes, sample: &[&[u8]]) -> usize {
    let mut size = 0;
    for s in sample {
        greedy(codes, s, |_, code| {
            size += if code.is_some() { 1 } else { 2 }
        });
    }
    size
}

/// The next table: the candidates (symbols the current table uses, and
/// pairs of them) that cover the most bytes of `sample`. Single bytes
/// count 8 times: a byte in the table saves an escape wherever it is left
/// over.
fn next_table(symbols: &[Vec<u8>], sample: &[&[u8]], scoring: Scoring) -> Vec<Vec<u8>> {
    let codes = index(symbols);
    let mut gain: SymbolMap<usize> = SymbolMap::default();
    for s in sample {
        let mut prev: Option<Symbol> = None;
        greedy(&codes, s, |sym, _| {
            *gain.entry(key(sym)).or_default() += if sym.len == 1 { 8 } else { sym.len };
            if let Some(prev) = prev {
                let shift = 8 * prev.len as u32;
                if prev.len + sym.len <= 8 {
                    let pair = Symbol {
                        word: prev.word | sym.word << shift,
                        len: prev.len + sym.len,
                    };
                    *gain.entry(key(pair)).or_default() += pair.len;
                }
                if scoring.grow && sym.len > 1 && prev.len < 8 {
                    let grown = Symbol {
                        word: prev.word | (sym.word & 0xff) << shift,
                        len: prev.len + 1,
                    };
                    *gain.entry(key(grown)).or_default() += grown.len;
                }
            }
            prev = Some(sym);
        });
    }
    let mut ranked: Vec<(Key, usize)> = gain.into_iter().collect();
    // Most saved first; ties broken by the bytes for determinism.
    let order = |a: &(Key, usize), b: &(Key, usize)| {
        let (x, y) = (a.0.to_le_bytes(), b.0.to_le_bytes());
        b.1.cmp(&a.1)
            .then_with(|| x[..usize::from(x[15])].cmp(&y[..usize::from(y[15])]))
    };
    if ranked.len() > MAX_SYMBOLS {
        ranked.select_nth_unstable_by(MAX_SYMBOLS - 1, order);
        ranked.truncate(MAX_SYMBOLS);
    }
    ranked.sort_unstable_by(order);
    ranked.into_iter().map(|(k, _)| symbol_of(k)).collect()
}

/// The table of the rounds of `scoring` that encodes `sample` smallest,
/// with that size.
fn best_table(sample: &[&[u8]], scoring: Scoring) -> (usize, Vec<Vec<u8>>) {
    let mut best = (usize::MAX, Vec::new());
    let mut symbols: Vec<Vec<u8>> = Vec::new();
    for _ in 0..ROUNDS {
        symbols = next_table(&symbols, sample, scoring);
        let size = encoded_size(&index(&symbols), sample);
        if size < best.0 {
            best = (size, symbols.clone());
        }
    }
    best
}

impl Encoder {
    /// Learns a table from `strings`: the rounds of each way of scoring
    /// give candidate tables, and the one that encodes the sample smallest
    /// wins.
    pub fn learn(strings: &StringList) -> Self {
        let sample = sample(strings);
        let no_table = (encoded_size(&Codes::new(&[]), &sample), Vec::new());
        // The two ways of scoring learn on a thread each.
        let [plain, growing] = std::thread::scope(|scope| {
            [false, true]
                .map(|grow| {
                    let sample = &sample;
                    scope.spawn(move || best_table(sample, Scoring { grow }))
                })
                .map(|t| t.join().expect("learning a symbol table does not panic"))
        });
        // Ties go to the first, as in a sequential search.
        let mut symbols = [plain, growing]
            .into_iter()
            .fold(no_table, |best, t| if t.0 < best.0 { t } else { best })
            .1;
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
        self.encode_into(s, &mut out);
        out
    }

    /// Encodes one string at the end of `out`.
    pub fn encode_into(&self, s: &[u8], out: &mut Vec<u8>) {
        greedy(&self.codes, s, |sym, code| match code {
            Some(c) => out.push(c),
            None => out.extend_from_slice(&[ESCAPE, sym.word as u8]),
        });
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
        let enc = Encoder::learn(&strings.iter().collect());
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
    fn numbered_names_grow_long_symbols() {
        // 50,000 names of one letter and six digits. Sampling every fifth
        // name and joining only whole symbols learned a table that packed
        // them 1.2x; a random sample and symbols grown a byte at a time
        // pack them 2.5x.
        let names: Vec<Vec<u8>> = (0..50_000)
            .map(|i| format!("f{i:06}").into_bytes())
            .collect();
        let (packed, plain) = round_trip(&names);
        assert!(packed * 22 < plain * 10, "{packed} vs {plain}");
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
