//! Signing an image that exists (`hoard sign`).
//!
//! In place, an image with nothing after its sections (not signed yet,
//! no recovery data) gets its signature appended: its bytes are read
//! and hashed, not copied. An append cut short by a crash or a kill
//! leaves a signature section cut short, which readers leave out (the
//! image reads as unsigned, and `hoard check` names it) until it is
//! signed again.
//!
//! Otherwise (into another file, or over an earlier signature or
//! recovery data) the image's bytes up to any earlier signature or
//! recovery data are copied to a temporary file beside the output, the
//! signature (and new recovery data of the same percent, when the image
//! had some) appended, and the file put in place when complete, as
//! every output is ([`crate::scratch`]). Renamed over an existing file,
//! the temporary file is written back to disk as it is written: ext4
//! (and others) flush a file renamed over another before the rename, so
//! that a crash cannot leave the old name with no data, and that flush
//! then finds the disk already busy with most of it instead of starting
//! it at the end.

use crate::scratch::ScratchFile;
use crate::{Error, Result};
use hoard_format::section::{self, HeaderLayout, SectionType, Version, V2_HEADER_SIZE};
use hoard_reader::{Image, OpenOptions, Section};
use hoard_trust::digest::{DigestKind, ImageDigest, SectionDigest};
use hoard_trust::{Claims, SecretKey, Signature};
use rayon::prelude::*;
use std::fs::File;
use std::io::{ErrorKind, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Signs the image at `input` and `claims` with `key` and writes it to
/// `output` (which may be `input`; another existing file only when
/// `force`). Returns the size of the signed image.
pub fn sign_image(
    input: &Path,
    output: &Path,
    key: &SecretKey,
    claims: Claims,
    force: bool,
) -> Result<u64> {
    let image =
        Image::open(input, &OpenOptions::default()).map_err(|e| Error::Input(e.to_string()))?;
    if image.version().layout() != HeaderLayout::V2 {
        return Err(Error::Input(format!(
            "format {} has no section hashes and cannot be signed (`hoard rewrite` it first)",
            image.version()
        )));
    }
    let same = output == input
        || output
            .canonicalize()
            .ok()
            .is_some_and(|o| input.canonicalize().ok() == Some(o));
    let replaces = output.symlink_metadata().is_ok();
    if !same && !force && replaces {
        return Err(Error::Input(format!(
            "{}: already exists (use -f to overwrite)",
            output.display()
        )));
    }
    let listed = image.listed_sections();
    let count = listed
        .iter()
        .position(|s| is_appended(s.header.kind))
        .unwrap_or(listed.len());
    let signed = &listed[..count];
    let end = signed.last().map_or(image.offset(), |s| s.end());
    if let Some((recovery, raw)) = image.recovery() {
        let damage = recovery.damage(raw).map_err(|e| damaged(e.to_string()))?;
        if !damage.is_empty() {
            return Err(damaged("its recovery data finds damage".into()));
        }
    }

    let number = u32::try_from(count).map_err(|_| Error::Input("too many sections".into()))?;
    let bare = count == listed.len() && image.recovery().is_none();
    if same && bare {
        if let Some(file) = open_to_append(input)? {
            return append_signature(&file, input, &image, signed, number, key, claims);
        }
    }

    let mut tmp = ScratchFile::new_in(crate::scratch::directory_of(output))?;
    let io = |e| Error::io(output, e);
    let source = std::fs::File::open(input).map_err(|e| Error::io(input, e))?;
    let out = Output {
        file: tmp.as_file(),
        write_back: replaces,
    };
    let digest = copy_and_hash(&source, Some(&out), &image, signed)
        .map_err(|e| copy_error(e, input, output))?;
    let section = Signature::sign(digest, claims, key).section(number, image.version());
    let file = tmp.as_file_mut();
    file.write_all_at(&section, end)
        .and_then(|_| file.seek(SeekFrom::End(0)))
        .map_err(io)?;
    if let Some((recovery, _)) = image.recovery() {
        let layout = hoard_recovery::Layout::plan(
            end + section.len() as u64,
            number + 1,
            recovery.layout().percent,
        )
        .map_err(|e| Error::Input(e.to_string()))?;
        let built = hoard_recovery::build_section(&layout, tmp.as_file())
            .map_err(|e| Error::Input(e.to_string()))?;
        tmp.as_file_mut().write_all(&built.bytes).map_err(io)?;
    }
    let mode = std::fs::metadata(input)
        .map_err(|e| Error::io(input, e))?
        .permissions();
    tmp.as_file().set_permissions(mode).map_err(io)?;
    let size = tmp.as_file().metadata().map_err(io)?.len();
    tmp.persist(output, true).map_err(io)?;
    Ok(size)
}

/// The image in `path` opened to append to, locked against another
/// `hoard sign`; `None` when this process may not write it (then it is
/// signed into a new file put in its place, which needs only its
/// directory writable).
fn open_to_append(path: &Path) -> Result<Option<File>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on a file descriptor we hold.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(Error::Input(format!(
            "{}: another process holds a lock on it (another `hoard sign`?)",
            path.display()
        )));
    }
    Ok(Some(file))
}

/// Signs the image in `file` (at `path`) in place: hashes its `signed`
/// sections as they are and appends section `number`, the signature.
/// Returns the size of the signed image.
fn append_signature(
    file: &File,
    path: &Path,
    image: &Image,
    signed: &[Section],
    number: u32,
    key: &SecretKey,
    claims: Claims,
) -> Result<u64> {
    let end = signed.last().map_or(image.offset(), |s| s.end());
    let digest = copy_and_hash(file, None, image, signed).map_err(|e| copy_error(e, path, path))?;
    let section = Signature::sign(digest, claims, key).section(number, image.version());
    let size = end + section.len() as u64;
    file.write_all_at(&section, end)
        .and_then(|_| file.set_len(size))
        .map_err(|e| Error::io(path, e))?;
    Ok(size)
}

/// The error for a failed copy (or hashing) of `input` into `output`.
fn copy_error(e: Copy, input: &Path, output: &Path) -> Error {
    match e {
        Copy::Io(e) if e.kind() == ErrorKind::UnexpectedEof => {
            Error::Input(format!("{}: changed while it was read", input.display()))
        }
        Copy::Io(e) => Error::io(output, e),
        Copy::Damaged(why) => damaged(why),
    }
}

/// Whether sections of `kind` are appended after the signed ones.
fn is_appended(kind: SectionType) -> bool {
    kind == hoard_trust::SECTION_TYPE || kind == hoard_recovery::SECTION_TYPE
}

/// The error for an image too damaged to sign.
fn damaged(why: String) -> Error {
    Error::Input(format!("the image is damaged ({why}); `hoard check` it"))
}

/// Why the signed bytes could not be copied.
enum Copy {
    Io(std::io::Error),
    /// A section does not pass its own hash or header checks.
    Damaged(String),
}

impl From<std::io::Error> for Copy {
    fn from(e: std::io::Error) -> Self {
        Copy::Io(e)
    }
}

/// The temporary file the signed image is written to.
struct Output<'a> {
    file: &'a File,
    /// Start writing each piece back to disk once written (see the
    /// module's doc).
    write_back: bool,
}

impl Output<'_> {
    /// Writes `bytes` at file offset `at`.
    fn write_at(&self, bytes: &[u8], at: u64) -> std::io::Result<()> {
        self.file.write_all_at(bytes, at)?;
        if self.write_back {
            use std::os::fd::AsRawFd;
            // SAFETY: a plain system call on a file descriptor we hold.
            // A hint: a file system that cannot do it is not an error.
            unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    at as libc::off64_t,
                    bytes.len() as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
        Ok(())
    }
}

/// Copies the image's prefix and `signed` sections from `source` to the
/// same offsets of `out` (when given), each read once into memory,
/// checked against its XXH3-64 hash (an image with damaged bytes is not
/// signed), hashed for the digest and written from that one copy, the
/// sections in parallel on all cores. Returns the digest of what was
/// read.
fn copy_and_hash(
    source: &File,
    out: Option<&Output<'_>>,
    image: &Image,
    signed: &[Section],
) -> std::result::Result<ImageDigest, Copy> {
    let kind = DigestKind::NEWEST;
    let copy = |buf: &mut Vec<u8>, start: u64, end: u64| -> std::io::Result<[u8; 32]> {
        let len = usize::try_from(end.saturating_sub(start))
            .map_err(|_| std::io::Error::other("a section too large to copy"))?;
        buf.resize(len, 0);
        source.read_exact_at(buf, start)?;
        let hash = kind.hash(buf);
        if let Some(out) = out {
            out.write_at(buf, start)?;
        }
        Ok(hash)
    };
    let prefix_hash = copy(&mut Vec::new(), 0, image.offset())?;
    let sections = signed
        .par_iter()
        .map_init(Vec::new, |buf, s| {
            let hash = copy(buf, s.offset, s.end())?;
            check_section(image.version(), s, buf).map_err(Copy::Damaged)?;
            Ok(SectionDigest {
                offset: s.offset,
                size: s.end() - s.offset,
                hash,
            })
        })
        .collect::<std::result::Result<_, Copy>>()?;
    Ok(ImageDigest {
        kind,
        prefix_len: image.offset(),
        prefix_hash,
        sections,
    })
}

/// Checks the bytes of a section (header and payload) read for signing:
/// its header must be the one listed, its XXH3-64 hash must match.
fn check_section(
    version: Version,
    listed: &Section,
    bytes: &[u8],
) -> std::result::Result<(), String> {
    if let Some(why) = &listed.damaged {
        return Err(why.clone());
    }
    let (raw_header, payload) = bytes.split_at(V2_HEADER_SIZE.min(bytes.len()));
    let header = section::parse_header(raw_header, version).map_err(|e| e.to_string())?;
    let expected = &listed.header;
    if header.kind != expected.kind
        || header.number != expected.number
        || header.length != expected.length
    {
        return Err(format!(
            "the section at offset {} is not the one its index lists",
            listed.offset
        ));
    }
    section::verify_xxh3(&header, raw_header, payload).map_err(|e| e.to_string())
}
