//! Where an archive's file contents wait for the later stages.

use crate::scratch::ScratchDir;
use crate::{Error, Result};
use hoard_archive::ArchiveReader;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where file contents wait for the later stages: one file each in a
/// temporary directory, made when first needed (a build that spools
/// nothing, or is stopped before it does, leaves no directory to remove).
pub(crate) struct Spool {
    parent: PathBuf,
    dir: Option<ScratchDir>,
    next: u64,
    buf: Vec<u8>,
}

impl Spool {
    /// A spool in a new directory inside `parent` (`$TMPDIR` if `None`).
    pub(crate) fn new(parent: Option<&Path>) -> Result<Self> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        Ok(Spool {
            parent,
            dir: None,
            next: 0,
            buf: vec![0; 1 << 20],
        })
    }

    /// The path of the next spool file.
    fn next_path(&mut self) -> Result<PathBuf> {
        let name = self.next.to_string();
        self.next += 1;
        Ok(self.dir()?.join(name))
    }

    /// Copies exactly `size` bytes of `data` to a new spool file (zero
    /// pages as holes when `sparse`); returns its path. A stream that ends
    /// early is an error.
    pub(crate) fn store(
        &mut self,
        data: &mut dyn Read,
        size: u64,
        sparse: bool,
    ) -> Result<PathBuf> {
        let path = self.next_path()?;
        let io = |e| Error::io(&path, e);
        let mut out = std::fs::File::create(&path).map_err(io)?;
        let mut left = size;
        while left > 0 {
            let want = self
                .buf
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match data.read(&mut self.buf[..want]) {
                Ok(0) => {
                    return Err(Error::Input(format!(
                        "the archive ends inside a file ({} of {size} bytes read)",
                        size - left
                    )))
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::Input(format!("cannot read the archive: {e}"))),
            };
            let chunk = &self.buf[..n];
            if sparse && chunk.iter().all(|&b| b == 0) {
                out.seek(SeekFrom::Current(n as i64)).map_err(io)?;
            } else {
                out.write_all(chunk).map_err(io)?;
            }
            left -= n as u64;
        }
        out.set_len(size).map_err(io)?;
        Ok(path)
    }
}

impl Spool {
    /// Copies the current member's data blocks from `reader` to a new
    /// spool file of `size` bytes (gaps between blocks stay holes);
    /// returns its path. Data past `size` is an error.
    pub(crate) fn store_blocks(
        &mut self,
        reader: &mut ArchiveReader,
        size: u64,
    ) -> hoard_archive::Result<PathBuf> {
        let path = self
            .next_path()
            .map_err(|e| hoard_archive::Error::Fatal(e.to_string()))?;
        let io =
            |e: std::io::Error| hoard_archive::Error::Fatal(format!("{}: {e}", path.display()));
        let out = std::fs::File::create(&path).map_err(io)?;
        while let Some((offset, block)) = reader.read_block()? {
            if offset
                .checked_add(block.len() as u64)
                .is_none_or(|end| end > size)
            {
                return Err(hoard_archive::Error::Member(format!(
                    "data past the member's size of {size} bytes"
                )));
            }
            out.write_all_at(block, offset).map_err(io)?;
        }
        out.set_len(size).map_err(io)?;
        Ok(path)
    }

    /// Where the spool keeps its files (made now if not yet).
    pub(crate) fn dir(&mut self) -> Result<&Path> {
        let dir = match self.dir.take() {
            Some(dir) => dir,
            None => ScratchDir::new_in(&self.parent, "spool")?,
        };
        Ok(self.dir.insert(dir).path())
    }

    /// The spool's directory, if one was made, to keep until the build
    /// ends.
    pub(super) fn into_dir(self) -> Option<ScratchDir> {
        self.dir
    }

    /// Empties the spool file at `path` (contents no entry names any more).
    pub(crate) fn empty(path: &Path) {
        // Only disk space is at stake: a failure changes nothing else.
        let _ = std::fs::File::create(path);
    }
}
