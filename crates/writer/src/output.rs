//! The image file: an optional header prefix, then sections, each numbered
//! and hashed (and, in an encrypted image, sealed, after the key section
//! that starts it: see the hoard-trust crate), then the section index, then (optionally) the signature
//! (see the hoard-trust crate), then (optionally) the recovery data, which
//! covers every byte before it. It is written to a temporary
//! file beside the target and renamed into place only when complete, so an
//! interrupted or failed build leaves nothing behind.

use crate::{Error, Result};
use hoard_format::section::{
    encode_header_v2, encode_index_entry, Compression, IndexEntry, SectionType, Version,
    MAJOR_VERSION, MAX_MINOR_VERSION, V2_HEADER_SIZE,
};
use hoard_trust::encrypt::cipher::SectionPlace;
use hoard_trust::encrypt::{KeySection, Recipients, SectionCipher};
use hoard_trust::{SecretKey, Signature};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tempfile::NamedTempFile;

/// The temporary files of the images being written in this process, for
/// [`remove_partial_images`].
static PARTIAL: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes the temporary file of every image this process is writing,
/// for a process about to exit on a signal: a build can take minutes to
/// reach a point where it checks its cancel flag (one large block being
/// compressed). No image can be started afterwards (the list stays
/// locked), and one renamed into place already is complete.
pub fn remove_partial_images() {
    let partial = PARTIAL.lock().unwrap_or_else(|p| p.into_inner());
    for path in partial.iter() {
        let _ = std::fs::remove_file(path);
    }
    std::mem::forget(partial);
}

/// A temporary file listed in [`PARTIAL`] while it lives.
struct Listed(PathBuf);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut partial = PARTIAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = partial.iter().position(|p| *p == self.0) {
            partial.swap_remove(i);
        }
    }
}

/// An image being written.
pub struct ImageFile {
    target: PathBuf,
    /// The temporary file's place in [`PARTIAL`].
    _listed: Listed,
    force: bool,
    out: BufWriter<NamedTempFile>,
    /// Bytes written since the first section.
    position: u64,
    /// Size of the header prefix.
    prefix: u64,
    index: Vec<IndexEntry>,
    /// Bytes of the file handed to the kernel's write-back so far.
    written_back: u64,
    /// A flush to disk of what was written so far, running on its own
    /// thread while the rest is built (see [`ImageFile::sync_in_background`]).
    syncing: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// Flush the image to disk before renaming it into place.
    fsync: bool,
    /// Sign the image with this key.
    sign: Option<Arc<SecretKey>>,
    /// Seal sections with this data key (an encrypted image).
    cipher: Option<Arc<SectionCipher>>,
}

/// How many bytes are written between requests to start writing them
/// back to disk: the final `fsync`, if asked for, then has less to wait
/// for, and the page cache does not fill with the image either way.
const WRITE_BACK_EVERY: u64 = 16 << 20;

impl ImageFile {
    /// Starts an image that will become `target` (which must not exist
    /// unless `force`), writing `header` before the first section.
    pub fn create(target: &Path, force: bool, header: Option<&[u8]>) -> Result<Self> {
        if !force && target.symlink_metadata().is_ok() {
            return Err(Error::Input(format!(
                "{}: already exists (use -f to overwrite)",
                target.display()
            )));
        }
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // Made and listed at once, so that a signal cannot come between.
        let mut partial = PARTIAL.lock().unwrap_or_else(|p| p.into_inner());
        let tmp = tempfile::Builder::new()
            .prefix(".hoard-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        partial.push(tmp.path().to_path_buf());
        drop(partial);
        let listed = Listed(tmp.path().to_path_buf());
        let mut out = BufWriter::with_capacity(1 << 20, tmp);
        if let Some(h) = header {
            out.write_all(h).map_err(|e| Error::io(target, e))?;
        }
        Ok(ImageFile {
            target: target.to_path_buf(),
            _listed: listed,
            force,
            out,
            position: 0,
            prefix: header.map_or(0, |h| h.len() as u64),
            index: Vec::new(),
            written_back: 0,
            syncing: None,
            fsync: false,
            sign: None,
            cipher: None,
        })
    }

    /// Makes [`ImageFile::finish`] flush the image to disk before it
    /// renames it into place (when `fsync`), so that not even a power
    /// failure right after leaves a partial image under the target name.
    /// Off, as for `mkdwarfs`, `mksquashfs` and `tar`: a build that is
    /// interrupted leaves nothing behind either way, and on a small tree
    /// the flush can take longer than the build.
    pub fn with_fsync(mut self, fsync: bool) -> Self {
        self.fsync = fsync;
        self
    }

    /// Makes [`ImageFile::finish`] sign the image with `key`, if given.
    pub fn with_signing_key(mut self, key: Option<Arc<SecretKey>>) -> Self {
        self.sign = key;
        self
    }

    /// Makes the image encrypted to `recipients`, if given: a new data
    /// key is drawn, its key section written as the first section, and
    /// every section after it but the index sealed. Call it before any
    /// section is written.
    pub fn with_encryption(mut self, recipients: Option<&Recipients>) -> Result<Self> {
        let Some(recipients) = recipients else {
            return Ok(self);
        };
        if !self.index.is_empty() {
            return Err(Error::Input(
                "internal error: encryption asked for after the first section".into(),
            ));
        }
        let cipher = SectionCipher::generate().map_err(|e| Error::Input(e.to_string()))?;
        let key = KeySection::wrap(&cipher, recipients).map_err(|e| Error::Input(e.to_string()))?;
        self.section(
            hoard_trust::encrypt::SECTION_TYPE,
            Compression::NONE,
            &key.payload(),
        )?;
        self.cipher = Some(Arc::new(cipher));
        Ok(self)
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
        let m = self.out.get_ref().as_file().metadata().ok()?;
        Some((m.dev(), m.ino()))
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
        self.index.push(IndexEntry {
            kind,
            offset: self.position,
        });
        self.out
            .write_all(&header)
            .and_then(|_| self.out.write_all(payload))
            .map_err(|e| Error::io(&self.target, e))?;
        self.position += (header.len() + payload.len()) as u64;
        if self.prefix + self.position - self.written_back >= WRITE_BACK_EVERY {
            self.start_write_back()?;
        }
        Ok(())
    }

    /// Flushes what is buffered and asks the kernel to start writing the
    /// bytes not yet asked for back to disk, without waiting for it (a
    /// hint: file systems that cannot do it are not an error).
    fn start_write_back(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.target, e))?;
        let end = self.prefix + self.position;
        use std::os::fd::AsRawFd;
        let fd = self.out.get_ref().as_file().as_raw_fd();
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
        let file = self
            .out
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
    /// signature (see [`ImageFile::with_signing_key`]) and then recovery
    /// data of `recovery` percent, if asked, flushes, and renames
    /// the file into place. Returns the image size.
    pub fn finish(mut self, with_index: bool, recovery: Option<u32>) -> Result<u64> {
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
        if let Some(percent) = recovery {
            self.recovery(percent)?;
        }
        if let Some(sync) = self.syncing.take() {
            self.wait_for_sync(sync)?;
        }
        let target = self.target.clone();
        let tmp = self
            .out
            .into_inner()
            .map_err(|e| Error::io(&target, e.into_error()))?;
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
        if self.force {
            tmp.persist(&target)
                .map_err(|e| Error::io(&target, e.error))?;
        } else {
            tmp.persist_noclobber(&target)
                .map_err(|e| Error::io(&target, e.error))?;
        }
        Ok(size)
    }

    /// Appends the signature section: the digest of every byte written
    /// so far, signed with `key`.
    fn signature(&mut self, key: &SecretKey) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.target, e))?;
        let end = self.prefix + self.position;
        let offsets: Vec<u64> = self.index.iter().map(|e| self.prefix + e.offset).collect();
        let sections: Vec<_> = offsets
            .iter()
            .zip(offsets.iter().skip(1).chain([&end]))
            .map(|(&start, &end)| start..end)
            .collect();
        let digest =
            hoard_trust::digest::of_file(self.out.get_ref().as_file(), self.prefix, &sections)
                .map_err(|e| Error::io(&self.target, e))?;
        let version = Version {
            major: MAJOR_VERSION,
            minor: MAX_MINOR_VERSION,
        };
        let section = Signature::sign(digest, key).section(self.next_section_number()?, version);
        self.index.push(IndexEntry {
            kind: hoard_trust::SECTION_TYPE,
            offset: self.position,
        });
        self.out
            .write_all(&section)
            .map_err(|e| Error::io(&self.target, e))?;
        self.position += section.len() as u64;
        Ok(())
    }

    /// Appends the recovery section, covering every byte written so far
    /// (see the hoard-recovery crate for its layout).
    fn recovery(&mut self, percent: u32) -> Result<()> {
        let io = |e| Error::io(&self.target, e);
        self.out.flush().map_err(io)?;
        let number = u32::try_from(self.index.len())
            .map_err(|_| Error::Input("too many sections".into()))?;
        let layout = hoard_recovery::Layout::plan(self.prefix + self.position, number, percent)
            .map_err(|e| Error::Input(e.to_string()))?;
        let built =
            hoard_recovery::build_section(&layout, self.out.get_ref().as_file()).map_err(|e| {
                match e {
                    hoard_recovery::Error::Io(e) => Error::io(&self.target, e),
                    e => Error::Input(e.to_string()),
                }
            })?;
        self.out.write_all(&built.bytes).map_err(io)?;
        self.position += built.bytes.len() as u64;
        Ok(())
    }
}
