//! The image file: an optional header prefix, then sections, each numbered
//! and hashed (and, in an encrypted image, sealed, after the key section
//! that starts it: see the hoard-trust crate), then the section index, then (optionally) the signature
//! (see the hoard-trust crate), then (optionally) the recovery data, which
//! covers every byte before it. It is written to a temporary
//! file beside the target and put in place only when complete, so an
//! interrupted or failed build leaves nothing behind (nor does one
//! killed with `SIGKILL`, where the file system makes files without a
//! name: see [`crate::scratch`]). An image for
//! `s3://bucket/key` is sent as it is written, in the parts of a multipart
//! upload completed only at the end (`hoard_remote::upload`): no copy of
//! it is kept anywhere. Only one with recovery data, which covers the
//! whole file and is planned for its final size, is first built in a
//! temporary file of `$TMPDIR`, then uploaded.

use crate::scratch::ScratchFile;
use crate::{Error, Result};
use hoard_format::section::{
    encode_header_v2, encode_index_entry, Compression, IndexEntry, SectionType, Version,
    MAJOR_VERSION, MAX_MINOR_VERSION, V2_HEADER_SIZE,
};
use hoard_remote::upload::Upload;
use hoard_trust::digest::DigestKind;
use hoard_trust::encrypt::cipher::SectionPlace;
use hoard_trust::encrypt::{KeySection, Recipients, SectionCipher};
use hoard_trust::{Claims, SecretKey, Signature};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Removes the temporary files and directories of every build of this
/// process (see [`crate::scratch`]) and aborts every upload of one, for
/// a process about to exit on a signal: a build can take minutes to
/// reach a point where it checks its cancel flag (one large block being
/// compressed). No image can be started afterwards (the lists stay
/// locked), and one renamed into place (or whose upload completed)
/// already is complete.
pub fn remove_partial_images() {
    hoard_remote::upload::abort_all();
    crate::scratch::remove_all();
}

/// Where the bytes of an image go.
enum Sink {
    /// A temporary file, put in place or uploaded when complete.
    File(BufWriter<ScratchFile>),
    /// The parts of an upload, sent as written.
    Upload(Box<Upload>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::File(out) => out,
            Sink::Upload(upload) => upload.as_mut(),
        }
    }

    /// The temporary file, flushed.
    fn file(&mut self) -> std::io::Result<Option<&std::fs::File>> {
        match self {
            Sink::File(out) => {
                out.flush()?;
                Ok(Some(out.get_ref().as_file()))
            }
            Sink::Upload(_) => Ok(None),
        }
    }
}

/// Where an image goes and what is added to it: everything a command
/// that writes an image (`create`, `rewrite`, `merge`) is told about its
/// output.
#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// The image to write: a path or an `s3://bucket/key` URL.
    pub path: PathBuf,
    /// Overwrite an existing image.
    pub force: bool,
    /// Flush the image to disk before renaming it into place, so that
    /// not even a power failure right after leaves a partial image under
    /// the target name. Off, as for `mkdwarfs`, `mksquashfs` and `tar`:
    /// an interrupted build leaves nothing behind either way, and on a
    /// small tree the flush can take longer than the build.
    pub fsync: bool,
    /// Bytes to put before the image (`--header`).
    pub header: Option<Vec<u8>>,
    /// Add Reed-Solomon recovery data of this many percent of the image.
    pub recovery: Option<u32>,
    /// Sign the image with this key (see the hoard-trust crate).
    pub sign: Option<Arc<SecretKey>>,
    /// What the signature claims of the image: its name, version and
    /// expiry (only with `sign`).
    pub claims: Claims,
    /// Encrypt the image to these recipients (see the hoard-trust crate).
    pub encrypt: Option<Arc<Recipients>>,
}

impl OutputOptions {
    /// A plain image at `path`, which must not exist yet.
    pub fn to(path: PathBuf) -> Self {
        OutputOptions {
            path,
            ..OutputOptions::default()
        }
    }
}

/// An image being written.
pub struct ImageFile {
    /// The path or `s3://` URL it becomes.
    target: PathBuf,
    sink: Sink,
    /// The bucket and key a temporary file is uploaded to when complete.
    upload_to: Option<(String, String)>,
    force: bool,
    /// Bytes written since the first section.
    position: u64,
    /// The header prefix.
    prefix: Vec<u8>,
    index: Vec<IndexEntry>,
    /// The hash of each section, kept while one is uploaded as written
    /// for the signature (a file is read again instead, on all cores).
    hashes: Vec<[u8; 32]>,
    /// Bytes of the file handed to the kernel's write-back so far.
    written_back: u64,
    /// A flush to disk of what was written so far, running on its own
    /// thread while the rest is built (see [`ImageFile::sync_in_background`]).
    syncing: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// Flush the image to disk before renaming it into place.
    fsync: bool,
    /// Sign the image with this key.
    sign: Option<Arc<SecretKey>>,
    /// What the signature claims.
    claims: Claims,
    /// Seal sections with this data key (an encrypted image).
    cipher: Option<Arc<SectionCipher>>,
    /// BLOCK sections written so far: what a sealed section is bound to
    /// besides its own number (see hoard-trust's `encrypt::cipher`).
    blocks: u32,
    /// Append recovery data of this many percent.
    recovery: Option<u32>,
}

/// How many bytes are written between requests to start writing them
/// back to disk: the final `fsync`, if asked for, then has less to wait
/// for, and the page cache does not fill with the image either way.
const WRITE_BACK_EVERY: u64 = 16 << 20;

impl ImageFile {
    /// Starts the image `options` describe: its target (which must not
    /// exist unless `force`), a path or an `s3://bucket/key` URL, with
    /// the header before the first section, and, as asked, the image
    /// encrypted (its key section written first), then signed, then
    /// given recovery data by [`ImageFile::finish`].
    pub fn create(options: &OutputOptions) -> Result<Self> {
        let target = options.path.as_path();
        let force = options.force;
        if options.sign.is_none() && !options.claims.is_empty() {
            return Err(Error::Input(
                "a signed name, version or expiry needs a key to sign with (--sign KEY)".into(),
            ));
        }
        let (mut sink, upload_to) = match crate::objects::s3_output(target) {
            Some((bucket, key)) if options.recovery.is_none() => (
                Sink::Upload(Box::new(crate::objects::start_upload(bucket, key, force)?)),
                None,
            ),
            Some((bucket, key)) => {
                if !force {
                    crate::objects::refuse_existing(bucket, key)?;
                }
                let staging = std::env::temp_dir();
                (
                    temporary_file(&staging)?,
                    Some((bucket.to_string(), key.to_string())),
                )
            }
            None => {
                if !force && target.symlink_metadata().is_ok() {
                    return Err(Error::Input(format!(
                        "{}: already exists (use -f to overwrite)",
                        target.display()
                    )));
                }
                (temporary_file(crate::scratch::directory_of(target))?, None)
            }
        };
        let prefix = options.header.clone().unwrap_or_default();
        sink.writer()
            .write_all(&prefix)
            .map_err(|e| Error::io(target, e))?;
        let mut image = ImageFile {
            target: target.to_path_buf(),
            sink,
            upload_to,
            force,
            position: 0,
            prefix,
            index: Vec::new(),
            hashes: Vec::new(),
            written_back: 0,
            syncing: None,
            fsync: options.fsync,
            sign: options.sign.clone(),
            claims: options.claims.clone(),
            cipher: None,
            blocks: 0,
            recovery: options.recovery,
        };
        if let Some(recipients) = &options.encrypt {
            image.encrypt_to(recipients)?;
        }
        Ok(image)
    }

    /// Makes the image encrypted to `recipients`: a new data key is
    /// drawn, its key section written as the first section, and every
    /// section after it but the index sealed.
    fn encrypt_to(&mut self, recipients: &Recipients) -> Result<()> {
        let cipher = SectionCipher::generate().map_err(|e| Error::Input(e.to_string()))?;
        let key = KeySection::wrap(&cipher, recipients).map_err(|e| Error::Input(e.to_string()))?;
        self.section(
            hoard_trust::encrypt::SECTION_TYPE,
            Compression::NONE,
            &key.payload(),
        )?;
        self.cipher = Some(Arc::new(cipher));
        Ok(())
    }

    /// The data key sections are sealed with, for compression workers
    /// that seal their blocks themselves (see [`ImageFile::section_with_header`]).
    pub fn cipher(&self) -> Option<Arc<SectionCipher>> {
        self.cipher.clone()
    }

    /// The (device, inode) of the temporary file, so a scan of the input
    /// can leave it out.
    pub fn identity(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let Sink::File(out) = &self.sink else {
            return None;
        };
        let m = out.get_ref().as_file().metadata().ok()?;
        Some((m.dev(), m.ino()))
    }

    /// How many BLOCK sections were written so far: the block number of
    /// the next one, which its seal is bound to in an encrypted image.
    pub fn blocks_written(&self) -> u32 {
        self.blocks
    }

    /// The number the next section will get.
    pub fn next_section_number(&self) -> Result<u32> {
        u32::try_from(self.index.len()).map_err(|_| Error::Input("too many sections".into()))
    }

    /// Appends one section.
    pub fn section(
        &mut self,
        kind: SectionType,
        compression: Compression,
        payload: &[u8],
    ) -> Result<()> {
        let number = self.next_section_number()?;
        if let Some(cipher) = self
            .cipher
            .clone()
            .filter(|_| hoard_trust::encrypt::is_sealed(kind))
        {
            let mut sealed = payload.to_vec();
            let place = SectionPlace {
                number,
                kind,
                compression,
                blocks_before: self.blocks,
            };
            cipher.seal(place, &mut sealed);
            let header = encode_header_v2(number, kind, compression, &sealed);
            return self.section_with_header(kind, header, &sealed);
        }
        let header = encode_header_v2(number, kind, compression, payload);
        self.section_with_header(kind, header, payload)
    }

    /// Appends one section whose header was encoded elsewhere (by a
    /// compression worker, which hashes the payload on its own core), for
    /// the number [`ImageFile::next_section_number`] gives; a header made
    /// for another number is encoded again (in an encrypted image the
    /// payload must be sealed for the right number: it is an error).
    pub fn section_with_header(
        &mut self,
        kind: SectionType,
        mut header: [u8; V2_HEADER_SIZE],
        payload: &[u8],
    ) -> Result<()> {
        let number = self.next_section_number()?;
        if header[48..52] != number.to_le_bytes() {
            if self.cipher.is_some() && hoard_trust::encrypt::is_sealed(kind) {
                return Err(Error::Input(format!(
                    "internal error: a section sealed with another number than {number}"
                )));
            }
            let compression = Compression(u16::from_le_bytes([header[54], header[55]]));
            header = encode_header_v2(number, kind, compression, payload);
        }
        if kind == SectionType::BLOCK {
            self.blocks = self
                .blocks
                .checked_add(1)
                .ok_or_else(|| Error::Input("too many blocks".into()))?;
        }
        self.index.push(IndexEntry {
            kind,
            offset: self.position,
        });
        let out = self.sink.writer();
        out.write_all(&header)
            .and_then(|_| out.write_all(payload))
            .map_err(|e| Error::io(&self.target, e))?;
        if self.sign.is_some() && matches!(self.sink, Sink::Upload(_)) {
            self.hashes
                .push(DigestKind::NEWEST.section_hash(&header, payload));
        }
        self.position += (header.len() + payload.len()) as u64;
        if self.end() - self.written_back >= WRITE_BACK_EVERY {
            self.start_write_back()?;
        }
        Ok(())
    }

    /// Flushes what is buffered and asks the kernel to start writing the
    /// bytes not yet asked for back to disk, without waiting for it (a
    /// hint: file systems that cannot do it are not an error).
    fn start_write_back(&mut self) -> Result<()> {
        let end = self.end();
        let file = self.sink.file().map_err(|e| Error::io(&self.target, e))?;
        let Some(file) = file else {
            return Ok(());
        };
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: a plain system call on a file descriptor we own.
        unsafe {
            libc::sync_file_range(
                fd,
                self.written_back as libc::off64_t,
                (end - self.written_back) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
        self.written_back = end;
        Ok(())
    }

    /// Starts flushing what was written so far to disk on a thread of its
    /// own, so the final flush of [`ImageFile::finish`] only waits for
    /// what comes after: called when the blocks are written, the flush of
    /// the blocks runs while the metadata is built.
    pub fn sync_in_background(&mut self) -> Result<()> {
        if !self.fsync {
            return Ok(());
        }
        self.start_write_back()?;
        let Sink::File(out) = &self.sink else {
            return Ok(());
        };
        let file = out
            .get_ref()
            .as_file()
            .try_clone()
            .map_err(|e| Error::io(&self.target, e))?;
        if let Some(earlier) = self
            .syncing
            .replace(std::thread::spawn(move || file.sync_data()))
        {
            self.wait_for_sync(earlier)?;
        }
        Ok(())
    }

    /// Waits for a background flush; its failure is the image's.
    fn wait_for_sync(&self, sync: std::thread::JoinHandle<std::io::Result<()>>) -> Result<()> {
        sync.join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the flush to disk panicked")))
            .map_err(|e| Error::io(&self.target, e))
    }

    /// Appends the section index (unless `with_index` is false), the
    /// signature (see [`OutputOptions::sign`]) and then recovery
    /// data, if asked, and puts the image in place: renames the file, or
    /// completes the upload (uploads the file, for one with recovery
    /// data). Returns the image size.
    pub fn finish(mut self, with_index: bool) -> Result<u64> {
        if with_index {
            let mut entries = self.index.clone();
            entries.push(IndexEntry {
                kind: SectionType::SECTION_INDEX,
                offset: self.position,
            });
            let payload: Vec<u8> = entries
                .iter()
                .flat_map(|e| encode_index_entry(*e).to_le_bytes())
                .collect();
            self.section(SectionType::SECTION_INDEX, Compression::NONE, &payload)?;
        }
        if let Some(key) = self.sign.clone() {
            self.signature(&key)?;
        }
        if let Some(percent) = self.recovery {
            self.recovery(percent)?;
        }
        if let Some(sync) = self.syncing.take() {
            self.wait_for_sync(sync)?;
        }
        let target = self.target.clone();
        let out = match self.sink {
            Sink::Upload(upload) => return upload.complete(self.force).map_err(Error::Input),
            Sink::File(out) => out,
        };
        let tmp = out
            .into_inner()
            .map_err(|e| Error::io(&target, e.into_error()))?;
        if let Some((bucket, key)) = &self.upload_to {
            let mut upload = crate::objects::start_upload(bucket, key, self.force)?;
            let mut file = tmp.as_file();
            std::io::Seek::rewind(&mut file).map_err(|e| Error::io(&target, e))?;
            std::io::copy(&mut file, &mut upload).map_err(|e| Error::io(&target, e))?;
            return upload.complete(self.force).map_err(Error::Input);
        }
        if self.fsync {
            tmp.as_file()
                .sync_all()
                .map_err(|e| Error::io(&target, e))?;
        }
        // Temporary files are private; the image gets the usual mode.
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: umask only swaps the process's file mode mask; it is
        // restored at once.
        let mask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o666 & !mask))
            .map_err(|e| Error::io(&target, e))?;
        let size = tmp
            .as_file()
            .metadata()
            .map_err(|e| Error::io(&target, e))?
            .len();
        tmp.persist(&target, self.force)
            .map_err(|e| Error::io(&target, e))?;
        Ok(size)
    }

    /// The file offset just past what was written.
    fn end(&self) -> u64 {
        self.prefix.len() as u64 + self.position
    }

    /// The digest of every byte written: hashed as written for an
    /// upload, else read again from the file.
    fn digest(&mut self) -> Result<hoard_trust::ImageDigest> {
        let prefix = self.prefix.len() as u64;
        let end = self.end();
        let offsets: Vec<u64> = self.index.iter().map(|e| prefix + e.offset).collect();
        let sections: Vec<_> = offsets
            .iter()
            .zip(offsets.iter().skip(1).chain([&end]))
            .map(|(&start, &end)| start..end)
            .collect();
        let file = self.sink.file().map_err(|e| Error::io(&self.target, e))?;
        let Some(file) = file else {
            return Ok(hoard_trust::ImageDigest {
                kind: DigestKind::NEWEST,
                prefix_len: prefix,
                prefix_hash: DigestKind::NEWEST.hash(&self.prefix),
                sections: sections
                    .iter()
                    .zip(&self.hashes)
                    .map(|(r, &hash)| hoard_trust::digest::SectionDigest {
                        offset: r.start,
                        size: r.end - r.start,
                        hash,
                    })
                    .collect(),
            });
        };
        hoard_trust::digest::of_file(file, prefix, &sections)
            .map_err(|e| Error::io(&self.target, e))
    }

    /// Appends the signature section: the digest of every byte written
    /// so far and the claims, signed with `key`.
    fn signature(&mut self, key: &SecretKey) -> Result<()> {
        let digest = self.digest()?;
        let version = Version {
            major: MAJOR_VERSION,
            minor: MAX_MINOR_VERSION,
        };
        let section = Signature::sign(digest, self.claims.clone(), key)
            .section(self.next_section_number()?, version);
        self.index.push(IndexEntry {
            kind: hoard_trust::SECTION_TYPE,
            offset: self.position,
        });
        self.sink
            .writer()
            .write_all(&section)
            .map_err(|e| Error::io(&self.target, e))?;
        self.position += section.len() as u64;
        Ok(())
    }

    /// Appends the recovery section, covering every byte written so far
    /// (see the hoard-recovery crate for its layout).
    fn recovery(&mut self, percent: u32) -> Result<()> {
        let number = u32::try_from(self.index.len())
            .map_err(|_| Error::Input("too many sections".into()))?;
        let layout = hoard_recovery::Layout::plan(self.end(), number, percent)
            .map_err(|e| Error::Input(e.to_string()))?;
        let target = self.target.clone();
        let io = |e| Error::io(&target, e);
        let Some(file) = self.sink.file().map_err(io)? else {
            return Err(Error::Input(
                "internal error: recovery data for an image not in a file".into(),
            ));
        };
        let built = hoard_recovery::build_section(&layout, file).map_err(|e| match e {
            hoard_recovery::Error::Io(e) => Error::io(&target, e),
            e => Error::Input(e.to_string()),
        })?;
        self.sink.writer().write_all(&built.bytes).map_err(io)?;
        self.position += built.bytes.len() as u64;
        Ok(())
    }
}

/// A new temporary file in `dir`.
fn temporary_file(dir: &Path) -> Result<Sink> {
    let tmp = ScratchFile::new_in(dir)?;
    Ok(Sink::File(BufWriter::with_capacity(1 << 20, tmp)))
}
