//! Partial decoding: a payload's output produced front to back, a piece at a
//! time, so that a reader who needs only the start of a block does not pay
//! for all of it (DwarFS's `decratio`).
//!
//! zstd, lzma and brotli stream. The other algorithms (none, lz4, lz4hc,
//! flac, ricepp) decode everything when the decoder is made and hand the
//! output out from there; [`PartialDecoder::streams`] tells them apart.
//!
//! The output is exactly the size the payload declares, which is checked
//! against the caller's limit before anything is allocated; a stream that
//! ends early, or holds more than it declares, is corrupt.

use crate::{check_declared, corrupt, decompress, lzma, varint, zstd, CodecError};
use hoard_format::section::Compression;
use std::borrow::Cow;
use std::io::Read;

/// A decoder that produces a payload's output a piece at a time.
pub trait PartialDecoder: Send {
    /// The size of the whole output, as the payload declares it.
    fn size(&self) -> usize;

    /// Bytes of output produced so far.
    fn produced(&self) -> usize;

    /// Whether output is decoded as it is asked for; if not, everything was
    /// decoded up front and callers may as well take it all at once.
    fn streams(&self) -> bool;

    /// Writes the next `out.len()` bytes of output into `out`. When the
    /// output is complete, also checks that the payload ends there (so the
    /// last call may be made with an empty `out`, e.g. for an empty block).
    fn decode(&mut self, out: &mut [u8]) -> Result<(), CodecError>;

    /// A fair estimate of the memory the decoder holds: the compressed
    /// input it keeps, its window or dictionary, or the output it decoded
    /// up front. Zero once the output is complete.
    fn state_bytes(&self) -> usize;
}

/// A decoder for one section payload written by DwarFS with `algo`.
///
/// `max_size` is the largest output the caller accepts, as for
/// [`decompress`]: a payload that declares more is refused here. A
/// streaming decoder keeps the payload: an owned one is moved in, a
/// borrowed one copied.
pub fn partial_decoder<'a>(
    algo: Compression,
    payload: impl Into<Cow<'a, [u8]>>,
    max_size: usize,
) -> Result<Box<dyn PartialDecoder>, CodecError> {
    let payload = payload.into();
    Ok(match algo {
        Compression::ZSTD => Box::new(Progress::new(ZstdStep::new(payload, max_size)?)),
        Compression::LZMA => Box::new(Progress::new(LzmaStep::new(payload, max_size)?)),
        Compression::BROTLI => Box::new(Progress::new(BrotliStep::new(&payload, max_size)?)),
        _ => Box::new(Progress::new(Eager(decompress(algo, &payload, max_size)?))),
    })
}

/// What each algorithm provides; [`Progress`] keeps the count.
trait Step: Send {
    const STREAMS: bool;
    /// The declared output size.
    fn size(&self) -> usize;
    /// Fills `out` with the output from position `at` on.
    fn fill(&mut self, out: &mut [u8], at: usize) -> Result<(), CodecError>;
    /// Checks, once all output is out, that the payload holds no more.
    fn finish(&mut self) -> Result<(), CodecError>;
    /// Memory held while decoding.
    fn state_bytes(&self) -> usize;
}

/// A [`Step`] with the count of bytes produced and the end check done once.
struct Progress<S> {
    step: S,
    size: usize,
    produced: usize,
    finished: bool,
}

impl<S: Step> Progress<S> {
    fn new(step: S) -> Self {
        Progress {
            size: step.size(),
            step,
            produced: 0,
            finished: false,
        }
    }
}

impl<S: Step> PartialDecoder for Progress<S> {
    fn size(&self) -> usize {
        self.size
    }

    fn produced(&self) -> usize {
        self.produced
    }

    fn streams(&self) -> bool {
        S::STREAMS
    }

    fn decode(&mut self, out: &mut [u8]) -> Result<(), CodecError> {
        let left = self.size - self.produced;
        if out.len() > left {
            return Err(CodecError::DeclaredTooLarge {
                algo: "partial",
                size: (self.produced + out.len()) as u64,
                limit: self.size,
            });
        }
        if !out.is_empty() {
            self.step.fill(out, self.produced)?;
            self.produced += out.len();
        }
        if self.produced == self.size && !self.finished {
            self.step.finish()?;
            self.finished = true;
        }
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        if self.finished {
            0
        } else {
            self.step.state_bytes()
        }
    }
}

/// Output decoded whole up front (algorithms that do not stream).
struct Eager(Vec<u8>);

impl Step for Eager {
    const STREAMS: bool = false;

    fn size(&self) -> usize {
        self.0.len()
    }

    fn fill(&mut self, out: &mut [u8], at: usize) -> Result<(), CodecError> {
        out.copy_from_slice(&self.0[at..at + out.len()]);
        Ok(())
    }

    fn finish(&mut self) -> Result<(), CodecError> {
        self.0 = Vec::new();
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        self.0.len()
    }
}

/// The error for a stream that ends before its declared size.
fn ends_early(algo: &'static str, at: usize, size: usize) -> CodecError {
    corrupt(
        algo,
        format!("stream ends after {at} of the declared {size} bytes"),
    )
}

/// The error for a stream that holds more than its declared size.
fn too_long(algo: &'static str, size: usize) -> CodecError {
    corrupt(
        algo,
        format!("stream holds more than the declared {size} bytes"),
    )
}

/// zstd through the streaming API. The window may be as large as the block
/// (`zstd:long`), as DwarFS's one-shot decoding allows.
struct ZstdStep {
    dctx: ::zstd::zstd_safe::DCtx<'static>,
    input: Vec<u8>,
    pos: usize,
    size: usize,
    /// Whether the last call ended a frame.
    frame_done: bool,
}

impl ZstdStep {
    const ALGO: &'static str = "zstd";

    fn new(payload: Cow<'_, [u8]>, max_size: usize) -> Result<Self, CodecError> {
        let size = zstd::declared_size(&payload)?
            .ok_or_else(|| corrupt(Self::ALGO, "frame does not record its content size"))?;
        let size = check_declared(Self::ALGO, size, max_size)?;
        let mut dctx = ::zstd::zstd_safe::DCtx::try_create()
            .ok_or_else(|| corrupt(Self::ALGO, "cannot create a decoder"))?;
        dctx.set_parameter(::zstd::zstd_safe::DParameter::WindowLogMax(31))
            .map_err(|e| corrupt(Self::ALGO, ::zstd::zstd_safe::get_error_name(e)))?;
        Ok(ZstdStep {
            dctx,
            input: payload.into_owned(),
            pos: 0,
            size,
            frame_done: false,
        })
    }

    /// One call of the decoder; returns the bytes written to `out`. A
    /// call that moves nothing means the input is exhausted: zstd always
    /// progresses while it has input and room for output.
    fn run(&mut self, out: &mut [u8]) -> Result<usize, CodecError> {
        let mut ob = ::zstd::zstd_safe::OutBuffer::around(out);
        let mut ib = ::zstd::zstd_safe::InBuffer::around(&self.input);
        ib.set_pos(self.pos);
        let hint = self
            .dctx
            .decompress_stream(&mut ob, &mut ib)
            .map_err(|e| corrupt(Self::ALGO, ::zstd::zstd_safe::get_error_name(e)))?;
        let (consumed, written) = (ib.pos() - self.pos, ob.pos());
        self.pos = ib.pos();
        self.frame_done = hint == 0;
        if consumed == 0 && written == 0 {
            return Err(corrupt(Self::ALGO, "frame is truncated"));
        }
        Ok(written)
    }

    /// Decodes the whole output in one call, as whole-block decoding does
    /// (no window buffer, no copy).
    fn all_at_once(&mut self, out: &mut [u8]) -> Result<(), CodecError> {
        let n = self
            .dctx
            .decompress(out, &self.input)
            .map_err(|e| corrupt(Self::ALGO, ::zstd::zstd_safe::get_error_name(e)))?;
        if n != self.size {
            return Err(ends_early(Self::ALGO, n, self.size));
        }
        self.pos = self.input.len();
        self.frame_done = true;
        Ok(())
    }

    /// Whether the input is used up and its last frame complete.
    fn at_end(&self) -> bool {
        self.frame_done && self.pos == self.input.len()
    }
}

impl Step for ZstdStep {
    const STREAMS: bool = true;

    fn size(&self) -> usize {
        self.size
    }

    fn fill(&mut self, out: &mut [u8], at: usize) -> Result<(), CodecError> {
        if at == 0 && out.len() == self.size {
            return self.all_at_once(out);
        }
        let mut done = 0;
        while done < out.len() {
            if self.at_end() {
                return Err(ends_early(Self::ALGO, at + done, self.size));
            }
            done += self.run(&mut out[done..])?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), CodecError> {
        // The rest of the frame (its checksum) and any further (skippable)
        // frames must decode to nothing.
        let mut spare = [0u8; 1];
        while !self.at_end() {
            if self.run(&mut spare)? > 0 {
                return Err(too_long(Self::ALGO, self.size));
            }
        }
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        self.input.len() + self.dctx.sizeof()
    }
}

/// lzma (xz) through liblzma's stream decoder, set up as for whole blocks.
struct LzmaStep {
    stream: liblzma::stream::Stream,
    input: Vec<u8>,
    size: usize,
}

impl LzmaStep {
    const ALGO: &'static str = "lzma";

    fn new(payload: Cow<'_, [u8]>, max_size: usize) -> Result<Self, CodecError> {
        let size = check_declared(Self::ALGO, lzma::declared_size(&payload)?, max_size)?;
        Ok(LzmaStep {
            stream: lzma::stream_decoder()?,
            input: payload.into_owned(),
            size,
        })
    }

    /// One call of the decoder; returns the bytes written and whether the
    /// stream ended. A call that moves nothing means the input is exhausted.
    fn run(
        &mut self,
        out: &mut [u8],
        action: liblzma::stream::Action,
    ) -> Result<(usize, bool), CodecError> {
        let (in0, out0) = (self.stream.total_in(), self.stream.total_out());
        // total_in never exceeds what was given, so it indexes the input.
        let pos = (in0 as usize).min(self.input.len());
        let status = self
            .stream
            .process(&self.input[pos..], out, action)
            .map_err(|e| corrupt(Self::ALGO, e))?;
        let consumed = self.stream.total_in() - in0;
        let written = (self.stream.total_out() - out0) as usize;
        let end = status == liblzma::stream::Status::StreamEnd;
        if consumed == 0 && written == 0 && !end {
            return Err(corrupt(Self::ALGO, "stream is truncated"));
        }
        Ok((written, end))
    }
}

impl Step for LzmaStep {
    const STREAMS: bool = true;

    fn size(&self) -> usize {
        self.size
    }

    fn fill(&mut self, out: &mut [u8], at: usize) -> Result<(), CodecError> {
        let mut done = 0;
        while done < out.len() {
            let (n, end) = self.run(&mut out[done..], liblzma::stream::Action::Run)?;
            done += n;
            if end && done < out.len() {
                return Err(ends_early(Self::ALGO, at + done, self.size));
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), CodecError> {
        let mut spare = [0u8; 1];
        loop {
            let (n, end) = self.run(&mut spare, liblzma::stream::Action::Finish)?;
            if n > 0 {
                return Err(too_long(Self::ALGO, self.size));
            }
            if end {
                return Ok(());
            }
        }
    }

    fn state_bytes(&self) -> usize {
        // The dictionary is allocated whole but touched only as far as
        // the output got (it copies the output, up to its size).
        let out = usize::try_from(self.stream.total_out()).unwrap_or(usize::MAX);
        self.input.len() + out.min(self.size) + (64 << 10)
    }
}

/// brotli through the crate's streaming reader.
struct BrotliStep {
    reader: ::brotli::Decompressor<std::io::Cursor<Vec<u8>>>,
    input_len: usize,
    size: usize,
}

impl BrotliStep {
    const ALGO: &'static str = "brotli";
    /// The ring buffer the decoder keeps: the window, at most 16 MiB
    /// without large windows, and in practice no more than the output.
    const MAX_RING: usize = 16 << 20;

    fn new(payload: &[u8], max_size: usize) -> Result<Self, CodecError> {
        let (size, stream) = varint::size_prefix(Self::ALGO, payload)?;
        let size = check_declared(Self::ALGO, size, max_size)?;
        Ok(BrotliStep {
            reader: ::brotli::Decompressor::new(std::io::Cursor::new(stream.to_vec()), 64 << 10),
            input_len: stream.len(),
            size,
        })
    }
}

impl Step for BrotliStep {
    const STREAMS: bool = true;

    fn size(&self) -> usize {
        self.size
    }

    fn fill(&mut self, out: &mut [u8], at: usize) -> Result<(), CodecError> {
        let mut done = 0;
        while done < out.len() {
            match self.reader.read(&mut out[done..]) {
                Ok(0) => return Err(ends_early(Self::ALGO, at + done, self.size)),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(corrupt(Self::ALGO, e)),
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), CodecError> {
        match self.reader.read(&mut [0u8; 1]) {
            Ok(0) => Ok(()),
            Ok(_) => Err(too_long(Self::ALGO, self.size)),
            Err(e) => Err(corrupt(Self::ALGO, e)),
        }
    }

    fn state_bytes(&self) -> usize {
        self.input_len + (64 << 10) + self.size.min(Self::MAX_RING)
    }
}
