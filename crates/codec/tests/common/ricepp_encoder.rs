//! A RICEPP encoder for tests, following the choices DwarFS's encoder makes
//! (parameter search, raw fallback), so that re-encoding decoded image
//! blocks must reproduce their bitstreams bit for bit.

/// Least-significant-bit-first writer in 64-bit little-endian words; the
/// final partial word is written with as many bytes as it needs.
struct BitWriter {
    out: Vec<u8>,
    word: u64,
    used: u32,
}

impl BitWriter {
    fn put(&mut self, mut value: u64, mut n: u32) {
        while n > 0 {
            let take = n.min(64 - self.used);
            let masked = if take == 64 {
                value
            } else {
                value & ((1 << take) - 1)
            };
            self.word |= masked << self.used;
            self.used += take;
            value = if take == 64 { 0 } else { value >> take };
            n -= take;
            if self.used == 64 {
                self.out.extend_from_slice(&self.word.to_le_bytes());
                self.word = 0;
                self.used = 0;
            }
        }
    }

    fn zeros(&mut self, mut n: u64) {
        while n > 0 {
            let take = n.min(32);
            self.put(0, take as u32);
            n -= take;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.used > 0 {
            let bytes = self.used.div_ceil(8) as usize;
            self.out
                .extend_from_slice(&self.word.to_le_bytes()[..bytes]);
        }
        self.out
    }
}

pub struct Config {
    pub block_size: usize,
    pub components: usize,
    pub unused_lsb: u32,
    pub big_endian: bool,
}

impl Config {
    fn value(&self, word: u16) -> u64 {
        let w = if self.big_endian {
            word.swap_bytes()
        } else {
            word
        };
        u64::from(w >> self.unused_lsb)
    }
}

/// Bits needed to code `delta` with Rice parameter `fs`.
fn cost(delta: &[u16], fs: u32) -> u64 {
    let mask = 0xffffu64 << fs;
    let high: u64 = delta.iter().map(|&d| u64::from(d) & mask).sum();
    delta.len() as u64 * u64::from(fs + 1) + (high >> fs)
}

/// DwarFS's search for the Rice parameter: start near log2 of the mean,
/// then walk in the direction that saves bits.
fn best_split(delta: &[u16], sum: u64) -> (u32, u64) {
    const FS_MAX: u32 = 14;
    let mean = sum / delta.len() as u64;
    let start = 64 - (mean.leading_zeros() + 2).min(64);
    let (b0, b1) = (cost(delta, start), cost(delta, start + 1));
    let (mut fs, mut bits, dir): (u32, u64, i32) = if b1 <= b0 {
        (start + 1, b1, 1)
    } else {
        (start, b0, -1)
    };
    if b0 != b1 {
        while fs > 0 && fs < FS_MAX {
            let next = fs.checked_add_signed(dir).unwrap();
            let c = cost(delta, next);
            if c > bits {
                break;
            }
            bits = c;
            fs = next;
        }
    }
    (fs, bits)
}

fn encode_block(w: &mut BitWriter, cfg: &Config, words: &[u16], last: &mut u64) {
    let mut delta = Vec::with_capacity(words.len());
    let mut sum = 0u64;
    for &word in words {
        let v = cfg.value(word);
        let diff = v.wrapping_sub(*last);
        let d = (if diff & 0x8000 != 0 {
            !(diff << 1)
        } else {
            diff << 1
        }) as u16;
        delta.push(d);
        sum += u64::from(d);
        *last = v;
    }
    if sum == 0 {
        w.put(0, 4);
        return;
    }
    let (fs, bits) = best_split(&delta, sum);
    if fs < 14 && bits < 16 * words.len() as u64 {
        w.put(u64::from(fs + 1), 4);
        for &d in &delta {
            w.zeros(u64::from(d) >> fs);
            w.put(1, 1);
            w.put(u64::from(d), fs);
        }
    } else {
        w.put(15, 4);
        for &word in words {
            w.put(u64::from(word), 16);
        }
    }
}

/// Encodes stored 16-bit words into a RICEPP bitstream.
pub fn encode(cfg: &Config, words: &[u16]) -> Vec<u8> {
    assert_eq!(words.len() % cfg.components, 0);
    let mut w = BitWriter {
        out: Vec::new(),
        word: 0,
        used: 0,
    };
    let mut last: Vec<u64> = words[..cfg.components]
        .iter()
        .map(|&x| cfg.value(x))
        .collect();
    for &l in &last {
        w.put(l, 16);
    }
    for chunk in words.chunks(cfg.components * cfg.block_size) {
        for (c, last) in last.iter_mut().enumerate() {
            let stream: Vec<u16> = chunk
                .iter()
                .skip(c)
                .step_by(cfg.components)
                .copied()
                .collect();
            encode_block(&mut w, cfg, &stream, last);
        }
    }
    w.finish()
}
