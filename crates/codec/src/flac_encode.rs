//! The FLAC block compressor: PCM audio coded with libFLAC, the reference
//! encoder DwarFS itself uses, so `level` means what it means there.
//!
//! The payload is what [`crate::flac`] reads: varint uncompressed size, a
//! thrift-compact `flac_block_header`, then the FLAC stream. The sample
//! layout comes from the block's category metadata, DwarFS's JSON for
//! `pcmaudio/waveform`.

use crate::compressor::Compressor;
use crate::{failed, varint, CodecError};
use hoard_format::section::Compression;

const ALGO: &str = "flac";

const FLAG_BIG_ENDIAN: u8 = 0x80;
const FLAG_SIGNED: u8 = 0x40;
const FLAG_LSB_PADDING: u8 = 0x20;

/// Interleaved samples handed to libFLAC per call, over all channels (as
/// DwarFS does).
const SAMPLES_PER_CALL: usize = 65536;
/// The sample rate written into every stream; DwarFS uses a fixed one.
const SAMPLE_RATE: u32 = 48_000;

/// Highest libFLAC compression level.
pub const MAX_LEVEL: u32 = 8;
/// The level used when a spec gives none (libFLAC's and DwarFS's default).
pub const DEFAULT_LEVEL: u32 = 5;

/// Compresses PCM audio blocks into DwarFS FLAC payloads with libFLAC.
///
/// Built from the spec `flac[:level=N][:exhaustive]`; each block needs its
/// `pcmaudio/waveform` metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlacCompressor {
    /// libFLAC compression level, 0..=8.
    pub level: u32,
    /// Whether libFLAC searches every LPC order exhaustively.
    pub exhaustive: bool,
}

impl Default for FlacCompressor {
    fn default() -> Self {
        Self {
            level: DEFAULT_LEVEL,
            exhaustive: false,
        }
    }
}

/// How the samples of a block are stored, from its category metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PcmLayout {
    channels: u32,
    bits: u32,
    bytes: usize,
    big_endian: bool,
    signed: bool,
    lsb_padding: bool,
}

impl PcmLayout {
    /// Parses and checks DwarFS's `pcmaudio/waveform` metadata, such as
    /// `{"bits_per_sample":16,"bytes_per_sample":2,"endianness":"little",
    /// "number_of_channels":2,"padding":"msb","signedness":"signed"}`.
    fn parse(metadata: Option<&str>) -> Result<Self, CodecError> {
        let text =
            metadata.ok_or_else(|| failed(ALGO, "no sample layout metadata for the block"))?;
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| failed(ALGO, format!("bad metadata: {e}")))?;
        let number = |key: &str, range: std::ops::RangeInclusive<u64>| {
            let n = json
                .get(key)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| failed(ALGO, format!("metadata needs a number '{key}'")))?;
            if range.contains(&n) {
                Ok(n as u32)
            } else {
                Err(failed(
                    ALGO,
                    format!(
                        "metadata '{key}' is {n}, not in {}..{}",
                        range.start(),
                        range.end()
                    ),
                ))
            }
        };
        let choice = |key: &str, yes: &str, no: &str| match json.get(key).and_then(|v| v.as_str()) {
            Some(v) if v == yes => Ok(true),
            Some(v) if v == no => Ok(false),
            _ => Err(failed(
                ALGO,
                format!("metadata '{key}' must be '{yes}' or '{no}'"),
            )),
        };
        let bytes = number("bytes_per_sample", 1..=4)?;
        let bits = number("bits_per_sample", 8..=32)?;
        if bits > 8 * bytes {
            return Err(failed(
                ALGO,
                format!("metadata has {bits} bits per sample in {bytes} bytes"),
            ));
        }
        Ok(PcmLayout {
            channels: number("number_of_channels", 1..=8)?,
            bits,
            bytes: bytes as usize,
            big_endian: choice("endianness", "big", "little")?,
            signed: choice("signedness", "signed", "unsigned")?,
            lsb_padding: choice("padding", "lsb", "msb")?,
        })
    }

    /// Bytes of one frame: one sample of every channel.
    fn frame_bytes(&self) -> usize {
        self.channels as usize * self.bytes
    }

    /// The `flags` byte of the block header.
    fn flags(&self) -> u8 {
        let mut flags = (self.bytes - 1) as u8;
        if self.big_endian {
            flags |= FLAG_BIG_ENDIAN;
        }
        if self.signed {
            flags |= FLAG_SIGNED;
        }
        if self.lsb_padding {
            flags |= FLAG_LSB_PADDING;
        }
        flags
    }

    /// Padding bits in a stored sample.
    fn padding(&self) -> u32 {
        8 * self.bytes as u32 - self.bits
    }

    /// The stored value of `sample` (its bytes read in the block's byte
    /// order), as the decoder's `SampleLayout::pack` writes it.
    fn stored(&self, sample: i32) -> u32 {
        let mut v = sample as u32;
        if !self.signed {
            v = v.wrapping_add(1 << (self.bits - 1));
        }
        if self.lsb_padding {
            v <<= self.padding();
        }
        v & (u32::MAX >> (32 - 8 * self.bytes as u32))
    }

    /// The sample a stored value holds: the inverse of [`Self::stored`].
    /// `None` when the padding bits are not what `stored` would write, so
    /// the value could not be rebuilt exactly from the sample.
    fn sample_of(&self, raw: u32) -> Option<i32> {
        let v = if self.lsb_padding {
            raw >> self.padding()
        } else {
            raw
        };
        let shift = 32 - self.bits;
        let sample = if self.signed {
            // Sign-extend from `bits`.
            ((v << shift) as i32) >> shift
        } else {
            ((v << shift) >> shift).wrapping_sub(1 << (self.bits - 1)) as i32
        };
        (self.stored(sample) == raw).then_some(sample)
    }

    /// Unpacks the samples stored in `data` (a whole number of frames)
    /// into `out`. `first` is the index of the first sample, for errors.
    fn unpack(&self, data: &[u8], first: usize, out: &mut Vec<i32>) -> Result<(), CodecError> {
        out.clear();
        for (i, chunk) in data.chunks_exact(self.bytes).enumerate() {
            let mut le = [0u8; 4];
            le[..self.bytes].copy_from_slice(chunk);
            if self.big_endian {
                le[..self.bytes].reverse();
            }
            let raw = u32::from_le_bytes(le);
            let sample = self.sample_of(raw).ok_or_else(|| {
                failed(
                    ALGO,
                    format!(
                        "sample {} (0x{raw:x}) has padding bits that {} bits per sample \
                     in {} bytes cannot restore",
                        first + i,
                        self.bits,
                        self.bytes
                    ),
                )
            })?;
            out.push(sample);
        }
        Ok(())
    }
}

/// The payload prefix: varint uncompressed size and the thrift-compact
/// `flac_block_header` {1: num_channels i16, 2: bits_per_sample byte,
/// 3: flags byte}, as DwarFS's serializer writes it.
fn payload_prefix(size: usize, layout: &PcmLayout, out: &mut Vec<u8>) {
    const I16: u8 = 4;
    const BYTE: u8 = 3;
    varint::encode(size as u64, out);
    // Field 1, delta 1: a zigzag varint; every channel count is below 64,
    // so it takes one byte.
    out.push(0x10 | I16);
    out.push((layout.channels as u8) << 1);
    // Fields 2 and 3, delta 1 each: one raw byte.
    out.push(0x10 | BYTE);
    out.push(layout.bits as u8);
    out.push(0x10 | BYTE);
    out.push(layout.flags());
    // Stop.
    out.push(0);
}

impl Compressor for FlacCompressor {
    fn algo(&self) -> Compression {
        Compression::FLAC
    }

    fn compress(&self, data: &[u8], metadata: Option<&str>) -> Result<Vec<u8>, CodecError> {
        let layout = PcmLayout::parse(metadata)?;
        let frame = layout.frame_bytes();
        if !data.len().is_multiple_of(frame) {
            return Err(failed(
                ALGO,
                format!(
                    "{} bytes are not a whole number of {frame}-byte frames \
                 ({} channels of {} bytes)",
                    data.len(),
                    layout.channels,
                    layout.bytes
                ),
            ));
        }
        let mut out = Vec::with_capacity(5 * data.len() / 8 + 16);
        payload_prefix(data.len(), &layout, &mut out);
        let settings = ffi::Settings {
            channels: layout.channels,
            bits_per_sample: layout.bits,
            sample_rate: SAMPLE_RATE,
            level: self.level,
            exhaustive: self.exhaustive,
            total_samples: (data.len() / frame) as u64,
        };
        let mut encoder = ffi::StreamEncoder::new(&settings, out).map_err(|e| failed(ALGO, e))?;
        let chunk_frames = SAMPLES_PER_CALL / layout.channels as usize;
        let mut samples = Vec::with_capacity(chunk_frames * layout.channels as usize);
        for (i, chunk) in data.chunks(chunk_frames * frame).enumerate() {
            layout.unpack(
                chunk,
                i * chunk_frames * layout.channels as usize,
                &mut samples,
            )?;
            encoder
                .process_interleaved(&samples, layout.channels as usize)
                .map_err(|e| failed(ALGO, e))?;
        }
        encoder.finish().map_err(|e| failed(ALGO, e))
    }

    fn describe(&self) -> String {
        let exhaustive = if self.exhaustive { ":exhaustive" } else { "" };
        format!("flac:level={}{exhaustive}", self.level)
    }

    fn needs_metadata(&self) -> bool {
        true
    }

    fn granularity(&self, metadata: Option<&str>) -> Result<usize, CodecError> {
        Ok(PcmLayout::parse(metadata)?.frame_bytes())
    }
}

/// A safe wrapper around libFLAC's stream encoder writing into a `Vec`.
mod ffi {
    use libflac_sys as sys;
    use std::ffi::{c_void, CStr};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::ptr::NonNull;

    /// What the encoder is set up with.
    pub(super) struct Settings {
        /// Interleaved channels, 1..=8.
        pub channels: u32,
        /// Significant bits of each sample, 4..=32.
        pub bits_per_sample: u32,
        /// Written into STREAMINFO; irrelevant to the coding.
        pub sample_rate: u32,
        /// libFLAC compression level, 0..=8.
        pub level: u32,
        /// libFLAC's exhaustive model search.
        pub exhaustive: bool,
        /// Samples per channel the stream will hold.
        pub total_samples: u64,
    }

    /// Where the write, seek and tell callbacks put the stream: `out`, at
    /// `pos` (libFLAC seeks back to rewrite STREAMINFO when finishing).
    struct Sink {
        out: Vec<u8>,
        pos: usize,
        /// Set when a callback failed; the encoder then fails too.
        error: Option<&'static str>,
    }

    impl Sink {
        fn write(&mut self, bytes: &[u8]) -> bool {
            let Some(end) = self.pos.checked_add(bytes.len()) else {
                self.error = Some("stream position overflows");
                return false;
            };
            if end > self.out.len() {
                self.out.resize(end, 0);
            }
            self.out[self.pos..end].copy_from_slice(bytes);
            self.pos = end;
            true
        }

        fn seek(&mut self, offset: u64) -> bool {
            match usize::try_from(offset) {
                Ok(pos) if pos <= self.out.len() => {
                    self.pos = pos;
                    true
                }
                _ => {
                    self.error = Some("libFLAC seeked past the end of the stream");
                    false
                }
            }
        }
    }

    /// An initialized libFLAC stream encoder; deleted when dropped, which
    /// also frees it on every error path.
    pub(super) struct StreamEncoder {
        raw: NonNull<sys::FLAC__StreamEncoder>,
        /// The callbacks' client data, from `Box::leak`: it stays at one
        /// address until `drop` frees it, after deleting the encoder. It is
        /// only reached through this pointer: by the callbacks while libFLAC
        /// runs (within a `&mut self` method), by [`Self::sink`] otherwise.
        sink: NonNull<Sink>,
    }

    impl StreamEncoder {
        /// Creates and initializes an encoder that appends the stream to
        /// `out`.
        pub fn new(settings: &Settings, out: Vec<u8>) -> Result<Self, String> {
            // SAFETY: FLAC__stream_encoder_new has no preconditions; it
            // returns null only when out of memory.
            let raw = unsafe { sys::FLAC__stream_encoder_new() };
            let raw = NonNull::new(raw).ok_or("libFLAC could not allocate an encoder")?;
            let pos = out.len();
            let sink = Box::new(Sink {
                out,
                pos,
                error: None,
            });
            // From here on `drop` deletes the encoder and frees the sink.
            let mut encoder = StreamEncoder {
                raw,
                sink: NonNull::from(Box::leak(sink)),
            };
            let e = encoder.raw.as_ptr();
            // SAFETY: `e` is a live encoder that is not initialized yet,
            // which is all the setters require. Same order as DwarFS: the
            // level resets the exhaustive search, so it comes first.
            let ok = unsafe {
                sys::FLAC__stream_encoder_set_streamable_subset(e, 0) != 0
                    && sys::FLAC__stream_encoder_set_channels(e, settings.channels) != 0
                    && sys::FLAC__stream_encoder_set_bits_per_sample(e, settings.bits_per_sample)
                        != 0
                    && sys::FLAC__stream_encoder_set_sample_rate(e, settings.sample_rate) != 0
                    && sys::FLAC__stream_encoder_set_compression_level(e, settings.level) != 0
                    && sys::FLAC__stream_encoder_set_do_exhaustive_model_search(
                        e,
                        i32::from(settings.exhaustive),
                    ) != 0
                    && sys::FLAC__stream_encoder_set_total_samples_estimate(
                        e,
                        settings.total_samples,
                    ) != 0
            };
            if !ok {
                return Err("libFLAC refused a setting".into());
            }
            // SAFETY: `e` is live and not initialized; the callbacks match
            // libFLAC's signatures and their client data is the sink, which
            // outlives the encoder (see the `sink` field).
            let status = unsafe {
                sys::FLAC__stream_encoder_init_stream(
                    e,
                    Some(write_callback),
                    Some(seek_callback),
                    Some(tell_callback),
                    None,
                    encoder.sink.as_ptr().cast::<c_void>(),
                )
            };
            if status != sys::FLAC__STREAM_ENCODER_INIT_STATUS_OK {
                return Err(format!(
                    "libFLAC init failed (status {status}): {}",
                    encoder.state()
                ));
            }
            Ok(encoder)
        }

        /// The sink, while libFLAC is not running.
        fn sink(&mut self) -> &mut Sink {
            // SAFETY: the sink is alive until `drop`; libFLAC reaches it only
            // during calls made by `&mut self` methods, none of which is
            // running while this borrow (tied to `&mut self`) lasts.
            unsafe { self.sink.as_mut() }
        }

        /// libFLAC's description of the encoder's state, or the callbacks'
        /// own error.
        fn state(&mut self) -> String {
            if let Some(e) = self.sink().error {
                return e.to_string();
            }
            // SAFETY: the encoder is live; the returned string is static
            // and NUL-terminated (or null, checked).
            unsafe {
                let s = sys::FLAC__stream_encoder_get_resolved_state_string(self.raw.as_ptr());
                if s.is_null() {
                    "unknown error".to_string()
                } else {
                    CStr::from_ptr(s).to_string_lossy().into_owned()
                }
            }
        }

        /// Encodes interleaved samples (a whole number of frames of
        /// `channels` samples each).
        pub fn process_interleaved(
            &mut self,
            samples: &[i32],
            channels: usize,
        ) -> Result<(), String> {
            debug_assert_eq!(samples.len() % channels, 0);
            if samples.is_empty() {
                return Ok(());
            }
            let frames = u32::try_from(samples.len() / channels)
                .map_err(|_| "too many samples in one call".to_string())?;
            // SAFETY: the encoder is live and initialized; `samples` holds
            // `frames * channels` samples, as many as libFLAC reads.
            let ok = unsafe {
                sys::FLAC__stream_encoder_process_interleaved(
                    self.raw.as_ptr(),
                    samples.as_ptr(),
                    frames,
                )
            };
            if ok == 0 {
                return Err(format!("libFLAC could not encode: {}", self.state()));
            }
            Ok(())
        }

        /// Flushes the last frame, rewrites STREAMINFO and returns the
        /// output with the stream appended.
        pub fn finish(mut self) -> Result<Vec<u8>, String> {
            // SAFETY: the encoder is live and initialized; afterwards it is
            // uninitialized, so deleting it in `drop` calls no callback.
            let ok = unsafe { sys::FLAC__stream_encoder_finish(self.raw.as_ptr()) };
            if ok == 0 || self.sink().error.is_some() {
                return Err(format!("libFLAC could not finish: {}", self.state()));
            }
            Ok(std::mem::take(&mut self.sink().out))
        }
    }

    impl Drop for StreamEncoder {
        fn drop(&mut self) {
            // SAFETY: `raw` came from FLAC__stream_encoder_new and is deleted
            // only here. If it is still initialized, deleting finishes the
            // stream through the callbacks, whose sink is still alive.
            unsafe { sys::FLAC__stream_encoder_delete(self.raw.as_ptr()) }
            // SAFETY: `sink` came from `Box::leak` and is freed only here,
            // after the encoder that used it is gone.
            drop(unsafe { Box::from_raw(self.sink.as_ptr()) });
        }
    }

    /// The sink behind libFLAC's client data.
    ///
    /// # Safety
    /// `client` must be the pointer given to `init_stream`, and no other
    /// reference to the sink may be live during the callback.
    unsafe fn client_sink<'a>(client: *mut c_void) -> &'a mut Sink {
        // SAFETY: guaranteed by the caller.
        unsafe { &mut *client.cast::<Sink>() }
    }

    unsafe extern "C" fn write_callback(
        _encoder: *const sys::FLAC__StreamEncoder,
        buffer: *const sys::FLAC__byte,
        bytes: usize,
        _samples: u32,
        _current_frame: u32,
        client: *mut c_void,
    ) -> sys::FLAC__StreamEncoderWriteStatus {
        let ok = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `client` is our sink (see `StreamEncoder::new`), used
            // by no one else while libFLAC runs this callback.
            let sink = unsafe { client_sink(client) };
            if bytes == 0 {
                return true;
            }
            if buffer.is_null() {
                sink.error = Some("libFLAC wrote from a null buffer");
                return false;
            }
            // SAFETY: libFLAC passes `bytes` readable bytes at `buffer`.
            let data = unsafe { std::slice::from_raw_parts(buffer, bytes) };
            sink.write(data)
        }));
        match ok {
            Ok(true) => sys::FLAC__STREAM_ENCODER_WRITE_STATUS_OK,
            _ => sys::FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR,
        }
    }

    unsafe extern "C" fn seek_callback(
        _encoder: *const sys::FLAC__StreamEncoder,
        offset: sys::FLAC__uint64,
        client: *mut c_void,
    ) -> sys::FLAC__StreamEncoderSeekStatus {
        let ok = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: as in `write_callback`.
            unsafe { client_sink(client) }.seek(offset)
        }));
        match ok {
            Ok(true) => sys::FLAC__STREAM_ENCODER_SEEK_STATUS_OK,
            _ => sys::FLAC__STREAM_ENCODER_SEEK_STATUS_ERROR,
        }
    }

    unsafe extern "C" fn tell_callback(
        _encoder: *const sys::FLAC__StreamEncoder,
        offset: *mut sys::FLAC__uint64,
        client: *mut c_void,
    ) -> sys::FLAC__StreamEncoderTellStatus {
        let ok = catch_unwind(AssertUnwindSafe(|| {
            if offset.is_null() {
                return false;
            }
            // SAFETY: as in `write_callback`.
            let pos = unsafe { client_sink(client) }.pos as u64;
            // SAFETY: libFLAC passes a valid place for the offset (checked
            // for null above).
            unsafe { offset.write(pos) };
            true
        }));
        match ok {
            Ok(true) => sys::FLAC__STREAM_ENCODER_TELL_STATUS_OK,
            _ => sys::FLAC__STREAM_ENCODER_TELL_STATUS_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compressor_from_spec, decompress, uncompressed_size};

    /// A sample layout as DwarFS's categorizer describes it.
    #[derive(Clone, Copy, Debug)]
    struct Layout {
        bits: u32,
        bytes: u32,
        big_endian: bool,
        signed: bool,
        lsb_padding: bool,
    }

    const fn layout(bits: u32, bytes: u32, big: bool, signed: bool, lsb: bool) -> Layout {
        Layout {
            bits,
            bytes,
            big_endian: big,
            signed,
            lsb_padding: lsb,
        }
    }

    /// Every layout the categorizer produces, and some it does not.
    const LAYOUTS: &[Layout] = &[
        layout(8, 1, false, false, false),
        layout(8, 1, false, true, false),
        layout(16, 2, false, true, false),
        layout(16, 2, true, true, false),
        layout(16, 2, true, false, false),
        layout(12, 2, false, false, true),
        layout(20, 3, false, true, true),
        layout(20, 3, false, true, false),
        layout(20, 3, true, false, false),
        layout(24, 3, false, true, false),
        layout(24, 3, true, true, false),
        layout(24, 4, false, true, true),
        layout(24, 4, false, true, false),
        layout(24, 4, true, false, true),
        layout(32, 4, false, true, false),
        layout(32, 4, true, false, false),
    ];

    fn metadata(l: &Layout, channels: u32) -> String {
        format!(
            r#"{{"bits_per_sample":{},"bytes_per_sample":{},"endianness":"{}","number_of_channels":{channels},"padding":"{}","signedness":"{}"}}"#,
            l.bits,
            l.bytes,
            if l.big_endian { "big" } else { "little" },
            if l.lsb_padding { "lsb" } else { "msb" },
            if l.signed { "signed" } else { "unsigned" },
        )
    }

    /// Stores `sample` as DwarFS does, written independently of the code
    /// under test: offset unsigned samples, shift past lsb padding, and
    /// keep the low bytes of the two's complement value.
    fn pack(l: &Layout, sample: i64, out: &mut Vec<u8>) {
        let mut v = if l.signed {
            sample
        } else {
            sample + (1i64 << (l.bits - 1))
        };
        if l.lsb_padding {
            v <<= 8 * l.bytes - l.bits;
        }
        let le = v.to_le_bytes();
        let bytes = &le[..l.bytes as usize];
        if l.big_endian {
            out.extend(bytes.iter().rev());
        } else {
            out.extend_from_slice(bytes);
        }
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// `frames` frames of `channels` samples: a sine with some noise per
    /// channel, or uniform random samples over the whole range.
    fn samples(l: &Layout, channels: u32, frames: usize, random: bool, seed: u64) -> Vec<u8> {
        let mut rng = Rng(seed | 1);
        let max = (1i64 << (l.bits - 1)) - 1;
        let min = -(1i64 << (l.bits - 1));
        let mut out = Vec::new();
        for i in 0..frames {
            for c in 0..channels {
                let s = if random {
                    min + (rng.next() >> (64 - l.bits)) as i64
                } else {
                    let t = i as f64 / 48_000.0;
                    let f = 220.0 * f64::from(c + 1);
                    let a = 0.8 * (t * f * std::f64::consts::TAU).sin()
                        + 0.1 * (t * 3.1 * f * std::f64::consts::TAU).sin();
                    let noise = (rng.next() % 5) as i64 - 2;
                    ((a * max as f64) as i64 + noise).clamp(min, max)
                };
                pack(l, s, &mut out);
            }
        }
        // Always include the extremes.
        if frames > 0 {
            out.truncate(out.len() - 2 * l.bytes as usize);
            pack(l, min, &mut out);
            pack(l, max, &mut out);
        }
        out
    }

    fn round_trip(c: &dyn Compressor, data: &[u8], meta: &str) -> Vec<u8> {
        let payload = c.compress(data, Some(meta)).unwrap();
        assert_eq!(
            uncompressed_size(Compression::FLAC, &payload).unwrap(),
            Some(data.len() as u64)
        );
        let back = decompress(Compression::FLAC, &payload, data.len())
            .unwrap_or_else(|e| panic!("{meta}: {e}"));
        assert!(back == data, "{meta}: {} bytes differ", data.len());
        payload
    }

    #[test]
    fn every_layout_round_trips() {
        let c = FlacCompressor::default();
        for (n, l) in LAYOUTS.iter().enumerate() {
            for channels in [1, 2, 6, 8] {
                for random in [false, true] {
                    // Over one libFLAC call's worth for 8 channels.
                    let frames = if channels == 8 { 9000 } else { 3000 };
                    let data = samples(l, channels, frames, random, n as u64 * 31 + 7);
                    let meta = metadata(l, channels);
                    round_trip(&c, &data, &meta);
                    assert_eq!(
                        c.granularity(Some(&meta)).unwrap(),
                        (channels * l.bytes) as usize
                    );
                }
            }
        }
    }

    #[test]
    fn levels_and_exhaustive_round_trip() {
        let l = layout(24, 3, false, true, false);
        let data = samples(&l, 2, 20_000, false, 3);
        let meta = metadata(&l, 2);
        let mut sizes = Vec::new();
        for spec in ["flac:level=0", "flac:level=8", "flac:level=3:exhaustive"] {
            let c = compressor_from_spec(spec).unwrap();
            sizes.push(round_trip(c.as_ref(), &data, &meta).len());
        }
        assert!(sizes[1] < sizes[0], "level 8 beats level 0: {sizes:?}");
    }

    #[test]
    fn long_blocks_span_many_encoder_calls() {
        // 1 MiB of 16-bit stereo: 16 calls of 32768 frames.
        let l = layout(16, 2, false, true, false);
        let data = samples(&l, 2, 262_144, false, 11);
        round_trip(&FlacCompressor::default(), &data, &metadata(&l, 2));
    }

    #[test]
    fn stereo_sine_compresses_well() {
        let l = layout(16, 2, false, true, false);
        let data = samples(&l, 2, 48_000, false, 5);
        let payload = round_trip(&FlacCompressor::default(), &data, &metadata(&l, 2));
        assert!(
            payload.len() < data.len() / 3,
            "{} of {} bytes",
            payload.len(),
            data.len()
        );
    }

    #[test]
    fn empty_block_round_trips() {
        for l in LAYOUTS {
            let payload = round_trip(&FlacCompressor::default(), &[], &metadata(l, 2));
            assert_eq!(&payload[..1], [0], "size 0");
            assert_eq!(&payload[8..12], b"fLaC");
        }
    }

    #[test]
    fn header_is_dwarfs_thrift_compact() {
        let l = layout(20, 3, true, true, true);
        let payload = FlacCompressor::default()
            .compress(&[0; 600], Some(&metadata(&l, 8)))
            .unwrap();
        // Size 600 as a varint, then {1: i16 8, 2: byte 20, 3: byte flags}.
        assert_eq!(
            &payload[..10],
            [0xd8, 0x04, 0x14, 0x10, 0x13, 20, 0x13, 0xe2, 0x00, b'f']
        );
        let (header, used) = hoard_format::thrift::decode_struct(&payload[2..]).unwrap();
        assert_eq!(used, 7);
        assert_eq!(header.field(1).and_then(|v| v.as_int()), Some(8));
        assert_eq!(header.field(2).and_then(|v| v.as_int()), Some(20));
        assert_eq!(
            header.field(3).and_then(|v| v.as_int()).map(|v| v as u8),
            Some(0xe2)
        );
    }

    #[test]
    fn samples_unpack_as_the_inverse_of_packing() {
        let parse = |l: &Layout| PcmLayout::parse(Some(&metadata(l, 1))).unwrap();
        // 8-bit unsigned: offset by 128.
        let u8l = parse(&layout(8, 1, false, false, false));
        assert_eq!(u8l.sample_of(0), Some(-128));
        assert_eq!(u8l.sample_of(255), Some(127));
        // 12 bits in 2 bytes, unsigned, padding below.
        let u12 = parse(&layout(12, 2, true, false, true));
        assert_eq!(u12.sample_of(0x7ff0), Some(-1));
        assert_eq!(u12.sample_of(0x7ff1), None, "low padding bit set");
        // 20 bits in 3 bytes, signed, padding above: sign extension.
        let s20 = parse(&layout(20, 3, false, true, false));
        assert_eq!(s20.sample_of(0xff_ffff), Some(-1));
        assert_eq!(s20.sample_of(0x07_ffff), Some(0x7ffff));
        assert_eq!(
            s20.sample_of(0x0f_ffff),
            None,
            "padding is no sign extension"
        );
        // 32-bit, both signednesses.
        let s32 = parse(&layout(32, 4, false, true, false));
        assert_eq!(s32.sample_of(0x8000_0000), Some(i32::MIN));
        let u32l = parse(&layout(32, 4, false, false, false));
        assert_eq!(u32l.sample_of(0), Some(i32::MIN));
        assert_eq!(u32l.sample_of(u32::MAX), Some(i32::MAX));
    }

    fn compress_error(meta: Option<&str>, data: &[u8]) -> String {
        match FlacCompressor::default().compress(data, meta) {
            Err(e @ CodecError::Compress { .. }) => e.to_string(),
            other => panic!("{meta:?}: {other:?}"),
        }
    }

    #[test]
    fn bad_metadata_is_refused() {
        let good = r#"{"bits_per_sample":16,"bytes_per_sample":2,"endianness":"little","number_of_channels":2,"padding":"msb","signedness":"signed"}"#;
        assert!(compress_error(None, &[0; 4]).contains("metadata"));
        let cases = [
            "",
            "not json",
            "[1, 2]",
            "{}",
            r#"{"bits_per_sample":16}"#,
            &good.replace(r#""bits_per_sample":16"#, r#""bits_per_sample":"16""#),
            &good.replace(r#""bits_per_sample":16"#, r#""bits_per_sample":7"#),
            &good.replace(r#""bits_per_sample":16"#, r#""bits_per_sample":17"#),
            &good.replace(r#""bits_per_sample":16"#, r#""bits_per_sample":33"#),
            &good.replace(r#""bits_per_sample":16"#, r#""bits_per_sample":-16"#),
            &good.replace(r#""bytes_per_sample":2"#, r#""bytes_per_sample":0"#),
            &good.replace(r#""bytes_per_sample":2"#, r#""bytes_per_sample":5"#),
            &good.replace(r#""number_of_channels":2"#, r#""number_of_channels":0"#),
            &good.replace(r#""number_of_channels":2"#, r#""number_of_channels":9"#),
            &good.replace("little", "middle"),
            &good.replace(r#""signed""#, r#""maybe""#),
            &good.replace("msb", "none"),
            &good.replace(r#","padding":"msb""#, ""),
        ];
        for meta in cases {
            compress_error(Some(meta), &[0; 4]);
            assert!(
                FlacCompressor::default().granularity(Some(meta)).is_err(),
                "{meta}"
            );
        }
        assert!(FlacCompressor::default().granularity(None).is_err());
        assert_eq!(
            FlacCompressor::default().granularity(Some(good)).unwrap(),
            4
        );
    }

    #[test]
    fn partial_frames_are_refused() {
        let l = layout(24, 3, false, true, false);
        let meta = metadata(&l, 2);
        for len in [1, 3, 5, 7, 601] {
            let e = compress_error(Some(&meta), &vec![0; len]);
            assert!(e.contains("6-byte frames"), "{e}");
        }
    }

    #[test]
    fn samples_the_padding_cannot_restore_are_refused() {
        // 20 bits padded below: a low padding bit set in a sample far into
        // the block, after the encoder has written frames (so it is
        // dropped while still running).
        let l = layout(20, 3, false, true, true);
        let mut data = samples(&l, 2, 100_000, false, 9);
        let at = 3 * 150_001;
        data[at] |= 1;
        let e = compress_error(Some(&metadata(&l, 2)), &data);
        assert!(e.contains("sample 150001"), "{e}");
        // 12 bits padded above, unsigned: the padding must stay zero.
        let l = layout(12, 2, false, false, false);
        let e = compress_error(Some(&metadata(&l, 1)), &[0x00, 0x10]);
        assert!(e.contains("padding bits"), "{e}");
    }

    #[test]
    fn specs_parse_and_describe() {
        for (spec, described) in [
            ("flac", "flac:level=5"),
            ("flac:level=0", "flac:level=0"),
            ("flac:exhaustive:level=8", "flac:level=8:exhaustive"),
            ("flac:exhaustive=0", "flac:level=5"),
        ] {
            let c = compressor_from_spec(spec).unwrap();
            assert_eq!(c.describe(), described);
            assert_eq!(c.algo(), Compression::FLAC);
            assert!(c.needs_metadata());
            assert_eq!(
                compressor_from_spec(described).unwrap().describe(),
                described
            );
        }
        for spec in ["flac:level=9", "flac:level=-1", "flac:level", "flac:fast"] {
            assert!(
                matches!(compressor_from_spec(spec), Err(CodecError::BadSpec { .. })),
                "{spec}"
            );
        }
    }

    /// The FLAC blocks of the upstream image made with `--categorize`, if
    /// the shared images are present.
    #[test]
    fn upstream_blocks_reencode() {
        let blocks = crate::tests::upstream_blocks(Compression::FLAC);
        for theirs in &blocks {
            let size = uncompressed_size(Compression::FLAC, theirs)
                .unwrap()
                .unwrap() as usize;
            let data = decompress(Compression::FLAC, theirs, size).unwrap();
            // The metadata DwarFS reports for the block, from its header.
            let skip = theirs.iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            let (header, used) = hoard_format::thrift::decode_struct(&theirs[skip..]).unwrap();
            let field = |id| header.field(id).and_then(|v| v.as_int()).unwrap();
            let flags = field(3) as u8;
            let l = layout(
                field(2) as u32,
                u32::from(flags & 3) + 1,
                flags & FLAG_BIG_ENDIAN != 0,
                flags & FLAG_SIGNED != 0,
                flags & FLAG_LSB_PADDING != 0,
            );
            let meta = metadata(&l, field(1) as u32);
            let ours = round_trip(&FlacCompressor::default(), &data, &meta);
            // Size prefix and header are byte for byte DwarFS's.
            assert_eq!(ours[..skip + used], theirs[..skip + used], "{meta}");
            // And so is the FLAC stream, but for the libFLAC version in the
            // VORBIS_COMMENT vendor string: same encoder, same level (DwarFS
            // made this image with libFLAC 1.4.2 at its default level 5).
            assert_eq!(
                without_vendor(&ours),
                without_vendor(theirs),
                "{meta}: the stream differs from DwarFS's"
            );
        }
        assert!(blocks.is_empty() || blocks.len() == 2, "{}", blocks.len());
    }

    /// A payload without the length of its VORBIS_COMMENT block and the
    /// vendor string in it ("reference libFLAC 1.4.2 20221022").
    fn without_vendor(payload: &[u8]) -> Vec<u8> {
        let needle = b"reference libFLAC ";
        let at = payload
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("a vendor string");
        let len = u32::from_le_bytes(payload[at - 4..at].try_into().unwrap()) as usize;
        // Block header (type, 3-byte length), vendor length, vendor.
        let mut out = payload[..at - 7].to_vec();
        out.extend_from_slice(&payload[at + len..]);
        out
    }
}
