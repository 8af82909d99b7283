//! The writer's side: one [`Compressor`] per general-purpose algorithm,
//! configured from DwarFS-style specs (`algo[:key=value|:flag]...`) with
//! DwarFS's option names, ranges and defaults.

use crate::compressor::Compressor;
use crate::flac_encode::{self, FlacCompressor};
use crate::ricepp_encode::{self, RiceppCompressor};
use crate::{failed, lz4, lzma_encode, release, varint, zstd_encode, CodecError};
use hoard_format::section::Compression;
use liblzma::stream::{Check, Filters, LzmaOptions, MatchFinder, Mode, Stream};
use std::fmt::Display;
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;
use zstd::zstd_safe::zstd_sys::ZSTD_cParameter as ZstdParameter;

/// Largest input LZ4 blocks can hold (`LZ4_MAX_INPUT_SIZE`).
const LZ4_MAX_INPUT: usize = 0x7e00_0000;

struct Null;

impl Compressor for Null {
    fn algo(&self) -> Compression {
        Compression::NONE
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        Ok(data.to_vec())
    }
    fn describe(&self) -> String {
        "null".into()
    }
}

struct Zstd {
    level: i32,
    /// Long-distance matching with a window as large as the block.
    long: bool,
    /// Match-finder parameters that override the level's ([`ZSTD_TUNING`]),
    /// in that order; zstd still shrinks them to fit a small block, so
    /// they cost memory only where the block needs it.
    tuning: Vec<(&'static str, u32, ZstdParameter)>,
    /// The target length for a redundant block
    /// ([`zstd_encode::is_redundant`]), in place of the tuned or
    /// the level's own.
    redundant_target_length: Option<u32>,
    encoder: zstd_encode::Encoder,
}

/// zstd's match-finder parameters that zstd specs take, by the names of
/// zstd's own `--zstd=` options spelled out, with zstd's bounds on 64-bit
/// machines (the logs are powers of two).
const ZSTD_TUNING: [(&str, std::ops::RangeInclusive<u32>, ZstdParameter); 5] = [
    ("hash_log", 6..=30, ZstdParameter::ZSTD_c_hashLog),
    ("chain_log", 6..=30, ZstdParameter::ZSTD_c_chainLog),
    ("search_log", 1..=30, ZstdParameter::ZSTD_c_searchLog),
    ("min_match", 3..=7, ZstdParameter::ZSTD_c_minMatch),
    (
        "target_length",
        0..=131_072,
        ZstdParameter::ZSTD_c_targetLength,
    ),
];

impl Zstd {
    /// The value the spec gives `parameter`, if any.
    fn tuned(&self, parameter: ZstdParameter) -> Option<u32> {
        self.tuning
            .iter()
            .find(|(_, _, p)| *p == parameter)
            .map(|&(_, value, _)| value)
    }
}

impl Compressor for Zstd {
    fn algo(&self) -> Compression {
        Compression::ZSTD
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        let mut parameters = Vec::new();
        if self.long {
            let window_log = usize::BITS - data.len().saturating_sub(1).leading_zeros();
            parameters.push((ZstdParameter::ZSTD_c_enableLongDistanceMatching, 1));
            parameters.push((
                ZstdParameter::ZSTD_c_windowLog,
                i64::from(window_log.clamp(10, 31)),
            ));
        }
        for &(_, value, parameter) in &self.tuning {
            parameters.push((parameter, i64::from(value)));
        }
        // Settings for evenly spread bytes, each unless the spec sets it.
        let spread = zstd_encode::spread_parameters(data, self.level);
        for &(parameter, value) in spread {
            if self.tuned(parameter).is_none() {
                parameters.push((parameter, value));
            }
        }
        if !spread.is_empty() && self.encoder.finds_nothing(data, self.level, &parameters)? {
            // Random bytes: a frame at level 1, which is no smaller than
            // the block, so the writer stores the block as it is.
            return self.encoder.compress(data, 1, &[]);
        }
        if let Some(target) = self.redundant_target_length {
            if spread.is_empty() && zstd_encode::is_redundant(data)? {
                parameters.push((ZstdParameter::ZSTD_c_targetLength, i64::from(target)));
            }
        }
        self.encoder.compress(data, self.level, &parameters)
    }
    fn describe(&self) -> String {
        let long = if self.long { ":long" } else { "" };
        let tuning: String = self
            .tuning
            .iter()
            .map(|(name, value, _)| format!(":{name}={value}"))
            .collect();
        let redundant = self
            .redundant_target_length
            .map(|t| format!(":redundant_target_length={t}"))
            .unwrap_or_default();
        format!("zstd:level={}{long}{tuning}{redundant}", self.level)
    }
}

/// An xz branch/call/jump filter tried in front of LZMA2.
#[derive(Clone, Copy)]
enum BinaryFilter {
    X86,
    PowerPc,
    Ia64,
    Arm,
    ArmThumb,
    Sparc,
}

const BINARY_FILTERS: [(&str, BinaryFilter); 6] = [
    ("x86", BinaryFilter::X86),
    ("powerpc", BinaryFilter::PowerPc),
    ("ia64", BinaryFilter::Ia64),
    ("arm", BinaryFilter::Arm),
    ("armthumb", BinaryFilter::ArmThumb),
    ("sparc", BinaryFilter::Sparc),
];
const MODES: [(&str, Mode); 2] = [("fast", Mode::Fast), ("normal", Mode::Normal)];
/// liblzma's ids of [`MODES`].
const MODE_IDS: [liblzma_sys::lzma_mode; 2] =
    [liblzma_sys::LZMA_MODE_FAST, liblzma_sys::LZMA_MODE_NORMAL];
const MATCH_FINDERS: [(&str, MatchFinder); 5] = [
    ("hc3", MatchFinder::HashChain3),
    ("hc4", MatchFinder::HashChain4),
    ("bt2", MatchFinder::BinaryTree2),
    ("bt3", MatchFinder::BinaryTree3),
    ("bt4", MatchFinder::BinaryTree4),
];
/// liblzma's ids of [`MATCH_FINDERS`].
const MATCH_FINDER_IDS: [liblzma_sys::lzma_match_finder; 5] = [
    liblzma_sys::LZMA_MF_HC3,
    liblzma_sys::LZMA_MF_HC4,
    liblzma_sys::LZMA_MF_BT2,
    liblzma_sys::LZMA_MF_BT3,
    liblzma_sys::LZMA_MF_BT4,
];

#[derive(Clone, Copy)]
struct Lzma {
    level: u32,
    extreme: bool,
    /// The extreme preset for a redundant block
    /// ([`zstd_encode::is_redundant`]).
    redundant_extreme: bool,
    dict_size: Option<u32>,
    binary: Option<usize>,
    mode: Option<usize>,
    mf: Option<usize>,
    nice: Option<u32>,
    depth: Option<u32>,
    /// Literal context bits, literal position bits, position bits: how
    /// lzma models literals and matches (0..4 each; lc + lp at most 4).
    /// Data in rows of whole bytes, like hoard's metadata, compresses
    /// smaller with `lc=0:lp=2:pb=2` than with the presets' 3, 0, 2.
    lc: Option<u32>,
    lp: Option<u32>,
    pb: Option<u32>,
}

/// The dictionary size of each lzma preset level, as a power of two (the
/// table in xz(1): 256 KiB at level 0 up to 64 MiB at level 9).
const PRESET_DICT_BITS: [u32; 10] = [18, 20, 21, 22, 22, 23, 23, 24, 25, 26];

/// liblzma's smallest dictionary.
const MIN_DICT_BITS: u32 = 12;

impl Lzma {
    /// [`Lzma::resolved`] as the liblzma crate takes it.
    fn options(&self, len: usize) -> Result<LzmaOptions, CodecError> {
        let bad = || failed("lzma", format!("no preset {}", self.preset()));
        let r = self.resolved(len).ok_or_else(bad)?;
        let mode = MODE_IDS.iter().position(|&m| m == r.mode).ok_or_else(bad)?;
        let mf = MATCH_FINDER_IDS
            .iter()
            .position(|&m| m == r.mf)
            .ok_or_else(bad)?;
        let mut o = LzmaOptions::new_preset(self.preset()).map_err(|e| failed("lzma", e))?;
        o.dict_size(r.dict_size)
            .literal_context_bits(r.lc)
            .literal_position_bits(r.lp)
            .position_bits(r.pb)
            .mode(MODES[mode].1)
            .nice_len(r.nice_len)
            .match_finder(MATCH_FINDERS[mf].1)
            .depth(r.depth);
        Ok(o)
    }

    /// The liblzma preset of `level` and `extreme`.
    fn preset(&self) -> u32 {
        let extreme = if self.extreme {
            liblzma::stream::PRESET_EXTREME
        } else {
            0
        };
        self.level | extreme
    }

    /// The dictionary size for `len` bytes of input: no larger than the
    /// input (rounded up to a power of two), as xz does. A larger one
    /// finds nothing more, but its hash tables still take memory (32 MiB
    /// less for a 16 MiB block at level 9), and a decoder sets aside the
    /// dictionary size the stream states.
    fn dict_size(&self, len: usize) -> u32 {
        let wanted = self
            .dict_size
            .unwrap_or(PRESET_DICT_BITS[self.level as usize]);
        let fits = len.max(1).next_power_of_two().trailing_zeros();
        1 << wanted.min(fits).max(MIN_DICT_BITS)
    }

    /// The encoder settings for `len` bytes of input in liblzma's own
    /// form: the preset with every option given applied.
    fn resolved(&self, len: usize) -> Option<liblzma_sys::lzma_options_lzma> {
        // SAFETY: all-zero is a valid value of this plain C struct, and
        // lzma_lzma_preset fills it.
        let mut o: liblzma_sys::lzma_options_lzma = unsafe { std::mem::zeroed() };
        if unsafe { liblzma_sys::lzma_lzma_preset(&mut o, self.preset()) } != 0 {
            return None;
        }
        o.dict_size = self.dict_size(len);
        if let Some(i) = self.mode {
            o.mode = MODE_IDS[i];
        }
        if let Some(i) = self.mf {
            o.mf = MATCH_FINDER_IDS[i];
        }
        o.nice_len = self.nice.unwrap_or(o.nice_len);
        o.depth = self.depth.unwrap_or(o.depth);
        o.lc = self.lc.unwrap_or(o.lc);
        o.lp = self.lp.unwrap_or(o.lp);
        o.pb = self.pb.unwrap_or(o.pb);
        Some(o)
    }

    /// The settings for 7-Zip's encoder ([`lzma_encode`]), when it can
    /// do what is asked: normal mode with a binary-tree match finder (the
    /// presets of levels 4 to 9), no branch filter, some input. Other
    /// settings go to liblzma.
    fn two_thread_settings(&self, len: usize) -> Option<lzma_encode::Settings> {
        if self.binary.is_some() || len == 0 {
            return None;
        }
        let o = self.resolved(len)?;
        let i = MATCH_FINDER_IDS.iter().position(|&id| id == o.mf)?;
        let hash_bytes = MATCH_FINDERS[i].0.strip_prefix("bt")?.parse().ok()?;
        (o.mode == liblzma_sys::LZMA_MODE_NORMAL).then_some(lzma_encode::Settings {
            dict_size: o.dict_size,
            lc: o.lc,
            lp: o.lp,
            pb: o.pb,
            nice_len: o.nice_len,
            depth: o.depth,
            hash_bytes,
        })
    }

    /// The extreme preset of these settings, where `redundant_extreme`
    /// asks for it and `data` is redundant.
    fn extreme_for(&self, data: &[u8]) -> Result<Option<Lzma>, CodecError> {
        if !self.redundant_extreme || self.extreme || !zstd_encode::is_redundant(data)? {
            return Ok(None);
        }
        Ok(Some(Lzma {
            extreme: true,
            redundant_extreme: false,
            ..*self
        }))
    }

    fn encode(filters: &Filters, data: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut enc = Self::encoder(filters)?;
        enc.write_all(data).map_err(|e| failed("lzma", e))?;
        enc.finish().map_err(|e| failed("lzma", e))
    }

    fn encoder(filters: &Filters) -> Result<liblzma::write::XzEncoder<Vec<u8>>, CodecError> {
        let stream =
            Stream::new_stream_encoder(filters, Check::Crc64).map_err(|e| failed("lzma", e))?;
        Ok(liblzma::write::XzEncoder::new_stream(Vec::new(), stream))
    }
}

impl Compressor for Lzma {
    fn algo(&self) -> Compression {
        Compression::LZMA
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        if let Some(extreme) = self.extreme_for(data)? {
            // lzma takes nothing from a block's category metadata.
            return extreme.compress(data, None);
        }
        if let Some(settings) = self.two_thread_settings(data.len()) {
            return lzma_encode::compress(data, &settings);
        }
        let opts = self.options(data.len())?;
        let mut plain = Filters::new();
        plain.lzma2(&opts);
        let best = Self::encode(&plain, data)?;
        let Some(i) = self.binary else {
            return Ok(best);
        };
        // Like DwarFS: also try the binary filter, keep the smaller stream.
        let mut filters = Filters::new();
        match BINARY_FILTERS[i].1 {
            BinaryFilter::X86 => filters.x86(),
            BinaryFilter::PowerPc => filters.powerpc(),
            BinaryFilter::Ia64 => filters.ia64(),
            BinaryFilter::Arm => filters.arm(),
            BinaryFilter::ArmThumb => filters.arm_thumb(),
            BinaryFilter::Sparc => filters.sparc(),
        };
        filters.lzma2(&opts);
        let filtered = Self::encode(&filters, data)?;
        Ok(if filtered.len() < best.len() {
            filtered
        } else {
            best
        })
    }
    fn memory(&self, len: usize) -> u64 {
        let Some(mut options) = self.resolved(len) else {
            return 0;
        };
        let filters = [
            liblzma_sys::lzma_filter {
                id: liblzma_sys::LZMA_FILTER_LZMA2,
                options: &mut options as *mut _ as *mut std::ffi::c_void,
            },
            liblzma_sys::lzma_filter {
                id: liblzma_sys::LZMA_VLI_UNKNOWN,
                options: std::ptr::null_mut(),
            },
        ];
        // SAFETY: a filter chain ended by LZMA_VLI_UNKNOWN, whose options
        // outlive the call. liblzma's figure is the same structures
        // 7-Zip's encoder allocates, within a few percent.
        match unsafe { liblzma_sys::lzma_raw_encoder_memusage(filters.as_ptr()) } {
            u64::MAX => 0,
            n => n,
        }
    }
    fn compress_shared(
        &self,
        data: &mut Arc<Vec<u8>>,
        metadata: Option<&str>,
    ) -> Result<(Vec<u8>, bool), CodecError> {
        if let Some(extreme) = self.extreme_for(data)? {
            return extreme.compress_shared(data, metadata);
        }
        if let Some(settings) = self.two_thread_settings(data.len()) {
            return lzma_encode::compress_shared(data, &settings);
        }
        if self.binary.is_some() {
            // Two tries, each reading the whole block.
            return Ok((self.compress(data, metadata)?, false));
        }
        let mut filters = Filters::new();
        filters.lzma2(&self.options(data.len())?);
        let mut enc = Self::encoder(&filters)?;
        let (mut read, mut released) = (0, 0);
        while read < data.len() {
            let end = (read + release::STEP).min(data.len());
            // The encoder has copied these bytes into its window on return.
            enc.write_all(&data[read..end])
                .map_err(|e| failed("lzma", e))?;
            read = end;
            if release::release(data, released, read) {
                released = read;
            }
        }
        let payload = enc.finish().map_err(|e| failed("lzma", e))?;
        Ok((payload, released > 0))
    }
    fn describe(&self) -> String {
        let mut s = format!("lzma:level={}", self.level);
        if self.extreme {
            s.push_str(":extreme");
        }
        if self.redundant_extreme {
            s.push_str(":redundant_extreme");
        }
        if let Some(n) = self.dict_size {
            s.push_str(&format!(":dict_size={n}"));
        }
        if let Some(i) = self.binary {
            s.push_str(&format!(":binary={}", BINARY_FILTERS[i].0));
        }
        if let Some(i) = self.mode {
            s.push_str(&format!(":mode={}", MODES[i].0));
        }
        if let Some(i) = self.mf {
            s.push_str(&format!(":mf={}", MATCH_FINDERS[i].0));
        }
        if let Some(n) = self.nice {
            s.push_str(&format!(":nice={n}"));
        }
        if let Some(n) = self.depth {
            s.push_str(&format!(":depth={n}"));
        }
        for (key, n) in [("lc", self.lc), ("lp", self.lp), ("pb", self.pb)] {
            if let Some(n) = n {
                s.push_str(&format!(":{key}={n}"));
            }
        }
        s
    }
}

struct Lz4;

impl Compressor for Lz4 {
    fn algo(&self) -> Compression {
        Compression::LZ4
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        if data.len() > LZ4_MAX_INPUT {
            return Err(failed(
                "lz4",
                format!("{} bytes is too large for LZ4", data.len()),
            ));
        }
        if data.is_empty() {
            return lz4::with_size_prefix("lz4", data, &lz4_flex::block::compress(data));
        }
        // liblz4's own fast mode, as DwarFS uses: lz4_flex's encoder packs
        // a little worse (0.15% on a sample of /usr).
        let mode = ::lz4::block::CompressionMode::DEFAULT;
        lz4::compress_with_size_prefix("lz4", data, mode)
    }
    fn describe(&self) -> String {
        "lz4".into()
    }
}

struct Lz4Hc {
    level: i32,
}

impl Compressor for Lz4Hc {
    /// DwarFS labels LZ4HC blocks as plain LZ4: the payloads are the same.
    fn algo(&self) -> Compression {
        Compression::LZ4
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        if data.len() > LZ4_MAX_INPUT {
            return Err(failed(
                "lz4hc",
                format!("{} bytes is too large for LZ4", data.len()),
            ));
        }
        if data.is_empty() {
            // liblz4's HC match finder must not see an empty (dangling) input.
            return lz4::with_size_prefix("lz4hc", data, &lz4_flex::block::compress(data));
        }
        let mode = ::lz4::block::CompressionMode::HIGHCOMPRESSION(self.level);
        lz4::compress_with_size_prefix("lz4hc", data, mode)
    }
    fn describe(&self) -> String {
        format!("lz4hc:level={}", self.level)
    }
}

struct Brotli {
    quality: i32,
    lgwin: i32,
}

impl Compressor for Brotli {
    fn algo(&self) -> Compression {
        Compression::BROTLI
    }
    fn compress(&self, data: &[u8], _metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        let params = ::brotli::enc::BrotliEncoderParams {
            quality: self.quality,
            lgwin: self.lgwin,
            // As brotli's one-shot encoder does for windows above 2^24.
            large_window: self.lgwin > 24,
            size_hint: data.len(),
            ..Default::default()
        };
        let mut out = Vec::with_capacity(data.len() / 2 + 16);
        varint::encode(data.len() as u64, &mut out);
        ::brotli::BrotliCompress(&mut &data[..], &mut out, &params)
            .map_err(|e| failed("brotli", e))?;
        Ok(out)
    }
    fn describe(&self) -> String {
        format!("brotli:quality={}:lgwin={}", self.quality, self.lgwin)
    }
}

/// The options of a spec, taken one by one; what is left is an error.
struct Options<'a> {
    spec: &'a str,
    opts: Vec<(&'a str, Option<&'a str>)>,
}

impl<'a> Options<'a> {
    fn bad(&self, msg: impl Into<String>) -> CodecError {
        CodecError::BadSpec {
            spec: self.spec.to_string(),
            msg: msg.into(),
        }
    }

    fn take(&mut self, key: &str) -> Option<Option<&'a str>> {
        let i = self.opts.iter().position(|(k, _)| *k == key)?;
        Some(self.opts.remove(i).1)
    }

    /// A number option within `range`.
    fn number<T>(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<Option<T>, CodecError>
    where
        T: FromStr + PartialOrd + Display,
    {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let n: T = value
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| self.bad(format!("option '{key}' needs a number")))?;
        if !range.contains(&n) {
            return Err(self.bad(format!(
                "option '{key}' must be in {}..{}",
                range.start(),
                range.end()
            )));
        }
        Ok(Some(n))
    }

    /// A flag: given alone, or as `=1`/`=0`/`=true`/`=false`.
    fn flag(&mut self, key: &str) -> Result<bool, CodecError> {
        match self.take(key) {
            None => Ok(false),
            Some(None | Some("1" | "true" | "yes")) => Ok(true),
            Some(Some("0" | "false" | "no")) => Ok(false),
            Some(Some(v)) => Err(self.bad(format!("flag '{key}' does not take the value '{v}'"))),
        }
    }

    /// One of a list of names; returns its index.
    fn choice<T>(&mut self, key: &str, names: &[(&str, T)]) -> Result<Option<usize>, CodecError> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        match names.iter().position(|(n, _)| Some(*n) == value) {
            Some(i) => Ok(Some(i)),
            None => {
                let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                Err(self.bad(format!("option '{key}' must be one of {}", all.join(", "))))
            }
        }
    }

    fn finish(self) -> Result<(), CodecError> {
        if self.opts.is_empty() {
            return Ok(());
        }
        let keys: Vec<&str> = self.opts.iter().map(|(k, _)| *k).collect();
        Err(self.bad(format!("unknown option(s): {}", keys.join(", "))))
    }
}

/// Builds a compressor from a DwarFS-style spec: an algorithm name, then
/// `:`-separated options, e.g. `null` (or `none`), `zstd:level=19`,
/// `zstd:level=12:long`, `lzma:level=9:extreme`, `lz4`, `lz4hc:level=9`,
/// `brotli:quality=11:lgwin=22`.
///
/// Options and their defaults follow DwarFS: zstd `level` (-131072..22,
/// default 22) and `long`, and hoard's `hash_log`, `chain_log`,
/// `search_log` (powers of two), `min_match` and `target_length`, which
/// override the level's match finder as zstd's parameters of those names
/// do (those left out, a high level still sets for a block whose bytes
/// are spread nearly evenly: a wider hash table, a tree reaching 4 MiB
/// back, matches of 4 bytes or more), and `redundant_target_length`, the
/// target length for a block whose samples compress to under 15% at
/// level 3 (many versions of a file side by side); lzma `level` (0..9, default 9), `extreme`,
/// hoard's `redundant_extreme` (the extreme preset for such a block),
/// `dict_size` (12..30, log2), `binary` (x86, powerpc, ia64, arm, armthumb,
/// sparc), `mode` (fast, normal), `mf` (hc3, hc4, bt2, bt3, bt4), `nice`
/// (2..273), `depth`, and hoard's `lc`, `lp`, `pb` (0..4, lc + lp at most
/// 4); lz4hc `level` (0..12, default 9); brotli `quality`
/// (0..11, default 11) and `lgwin` (10..30, default 22); flac `level`
/// (0..8, default 5) and `exhaustive` (libFLAC's exhaustive model search),
/// e.g. `flac:level=8:exhaustive`. A flac compressor takes each block's
/// sample layout from its category metadata (DwarFS's `pcmaudio/waveform`
/// JSON) at [`Compressor::compress`]; so does ricepp, with `block_size`
/// (16..512, default 128), from the `fits/image` JSON.
pub fn compressor_from_spec(spec: &str) -> Result<Box<dyn Compressor>, CodecError> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let mut o = Options {
        spec,
        opts: Vec::new(),
    };
    for p in parts {
        let (k, v) = match p.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (p, None),
        };
        if o.opts.iter().any(|(seen, _)| *seen == k) {
            return Err(o.bad(format!("duplicate option '{k}'")));
        }
        o.opts.push((k, v));
    }
    let c: Box<dyn Compressor> = match name {
        "null" | "none" => Box::new(Null),
        "zstd" => Box::new(Zstd {
            level: o.number("level", -131_072..=22)?.unwrap_or(22),
            long: o.flag("long")?,
            tuning: ZSTD_TUNING
                .into_iter()
                .filter_map(|(name, range, parameter)| {
                    let value = o.number(name, range).transpose()?;
                    Some(value.map(|v| (name, v, parameter)))
                })
                .collect::<Result<_, _>>()?,
            redundant_target_length: o.number("redundant_target_length", 0..=131_072)?,
            encoder: Default::default(),
        }),
        "lzma" => {
            let lzma = Lzma {
                level: o.number("level", 0..=9)?.unwrap_or(9),
                extreme: o.flag("extreme")?,
                redundant_extreme: o.flag("redundant_extreme")?,
                dict_size: o.number("dict_size", 12..=30)?,
                binary: o.choice("binary", &BINARY_FILTERS)?,
                mode: o.choice("mode", &MODES)?,
                mf: o.choice("mf", &MATCH_FINDERS)?,
                nice: o.number("nice", 2..=273)?,
                depth: o.number("depth", 0..=u32::MAX)?,
                lc: o.number("lc", 0..=4)?,
                lp: o.number("lp", 0..=4)?,
                pb: o.number("pb", 0..=4)?,
            };
            // The presets' lc and lp are 3 and 0.
            if lzma.lc.unwrap_or(3) + lzma.lp.unwrap_or(0) > 4 {
                return Err(o.bad("lc + lp must be at most 4"));
            }
            Box::new(lzma)
        }
        "lz4" => Box::new(Lz4),
        "lz4hc" => Box::new(Lz4Hc {
            level: o.number("level", 0..=12)?.unwrap_or(9),
        }),
        "brotli" => Box::new(Brotli {
            quality: o.number("quality", 0..=11)?.unwrap_or(11),
            lgwin: o.number("lgwin", 10..=30)?.unwrap_or(22),
        }),
        "flac" => Box::new(FlacCompressor {
            level: o
                .number("level", 0..=flac_encode::MAX_LEVEL)?
                .unwrap_or(flac_encode::DEFAULT_LEVEL),
            exhaustive: o.flag("exhaustive")?,
        }),
        "ricepp" => Box::new(RiceppCompressor {
            block_size: o
                .number("block_size", ricepp_encode::BLOCK_SIZES)?
                .unwrap_or(ricepp_encode::DEFAULT_BLOCK_SIZE),
        }),
        "" => return Err(o.bad("no algorithm named")),
        other => return Err(o.bad(format!("unknown algorithm '{other}'"))),
    };
    o.finish()?;
    Ok(c)
}
