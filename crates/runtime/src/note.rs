//! The bundle note: what the runtime needs to know about the image behind
//! it. `hoard bundle` writes it right after the runtime's ELF file; the
//! runtime finds it where its own ELF headers say the file ends. Nothing
//! follows the image, and the note holds no `DWARFS` magic, so DwarFS's
//! `-o offset=auto` (and hoard's search) find the image behind it.
//!
//! Layout, little-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `HOARDBDL` |
//! | 8 | 4 | version, 1 |
//! | 12 | 4 | length `n` of the entry path |
//! | 16 | 8 | where the image starts in the file |
//! | 24 | `n` | the entry path, relative to the image's root |
//!
//! then zeros up to the image, which starts at a multiple of [`ALIGN`].

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

/// The note's first bytes.
pub const MAGIC: &[u8; 8] = b"HOARDBDL";
/// The note's version.
const VERSION: u32 = 1;
/// Bytes before the entry path.
const HEAD: usize = 24;
/// The longest entry path.
pub const MAX_ENTRY: usize = 4096;
/// The image starts at a multiple of this (a page).
pub const ALIGN: u64 = 4096;

/// Where a bundle's image starts and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Where the note starts: where the runtime's ELF file ends.
    pub at: u64,
    /// The program to run, relative to the image's root.
    pub entry: PathBuf,
    /// Where the image starts in the bundle.
    pub image_offset: u64,
}

impl Note {
    /// The note for a runtime of `at` bytes running `entry`.
    pub fn new(at: u64, entry: &Path) -> Result<Note, String> {
        check_entry(entry.as_os_str().as_bytes())?;
        let end = at + (HEAD + entry.as_os_str().len()) as u64;
        Ok(Note {
            at,
            entry: entry.to_path_buf(),
            image_offset: end.div_ceil(ALIGN) * ALIGN,
        })
    }

    /// The note's bytes, padding included: what goes between the runtime
    /// and the image.
    pub fn to_bytes(&self) -> Vec<u8> {
        let entry = self.entry.as_os_str().as_bytes();
        let mut out = Vec::with_capacity((self.image_offset - self.at) as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(entry.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.image_offset.to_le_bytes());
        out.extend_from_slice(entry);
        out.resize((self.image_offset - self.at) as usize, 0);
        out
    }

    /// Reads the note of `bundle` (a runtime with an image behind it).
    pub fn read(bundle: &File) -> Result<Note, String> {
        let at = elf_end(bundle)?;
        let len = bundle.metadata().map_err(|e| e.to_string())?.len();
        let mut head = [0u8; HEAD];
        if len < at + HEAD as u64 || bundle.read_exact_at(&mut head, at).is_err() {
            return Err("no image behind the runtime (run `hoard bundle` to make one)".into());
        }
        if head[..8] != *MAGIC {
            return Err(
                "no bundle note behind the runtime (run `hoard bundle` to make one)".into(),
            );
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(format!(
                "bundle note version {version} (this runtime reads {VERSION})"
            ));
        }
        let entry_len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
        let image_offset = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
        if entry_len == 0 || entry_len > MAX_ENTRY {
            return Err(format!("bundle note: entry path of {entry_len} bytes"));
        }
        let end = at + (HEAD + entry_len) as u64;
        if image_offset < end || image_offset >= len {
            return Err(format!(
                "bundle note: image offset {image_offset} outside {end}..{len}"
            ));
        }
        let mut entry = vec![0u8; entry_len];
        bundle
            .read_exact_at(&mut entry, at + HEAD as u64)
            .map_err(|e| format!("bundle note: {e}"))?;
        check_entry(&entry)?;
        Ok(Note {
            at,
            entry: PathBuf::from(OsStr::from_bytes(&entry)),
            image_offset,
        })
    }
}

/// Checks an entry path: relative, made of plain names only (no `.`,
/// `..` or empty ones), no NUL, at most [`MAX_ENTRY`] bytes.
pub fn check_entry(entry: &[u8]) -> Result<(), String> {
    let shown = String::from_utf8_lossy(entry);
    let path = Path::new(OsStr::from_bytes(entry));
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    let clean = !entry.is_empty()
        && !entry.contains(&0)
        && entry.len() <= MAX_ENTRY
        && plain
        && !entry.ends_with(b"/")
        && !entry.windows(2).any(|w| w == b"//")
        && !entry.starts_with(b"./")
        && !entry.windows(3).any(|w| w == b"/./")
        && !entry.ends_with(b"/.");
    if clean {
        Ok(())
    } else {
        Err(format!(
            "entry '{shown}': expected a relative path of plain names inside the image (e.g. bin/app)"
        ))
    }
}

/// Where the ELF file `file` ends: past its last program segment, its
/// program headers and its section headers (an ELF64 little-endian file,
/// as the runtime is built).
pub fn elf_end(file: &File) -> Result<u64, String> {
    let not_elf = |why: &str| format!("the runtime is not a 64-bit little-endian ELF file ({why})");
    let mut h = [0u8; 64];
    file.read_exact_at(&mut h, 0)
        .map_err(|_| not_elf("too short"))?;
    if h[..4] != *b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return Err(not_elf("bad identification"));
    }
    let u16_at = |b: &[u8], o: usize| u64::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(&h, 0x20), u16_at(&h, 0x36), u16_at(&h, 0x38));
    let (shoff, shentsize, shnum) = (u64_at(&h, 0x28), u16_at(&h, 0x3a), u16_at(&h, 0x3c));
    if phentsize != 56 || (shnum > 0 && shentsize != 64) {
        return Err(not_elf("unexpected header sizes"));
    }
    let table_end = |off: u64, n: u64, size: u64| off.checked_add(n * size);
    let mut end = 64u64
        .max(table_end(phoff, phnum, phentsize).ok_or_else(|| not_elf("bad program headers"))?)
        .max(table_end(shoff, shnum, shentsize).ok_or_else(|| not_elf("bad section headers"))?);
    let mut table = vec![0u8; (phnum * phentsize) as usize];
    file.read_exact_at(&mut table, phoff)
        .map_err(|_| not_elf("program headers cut short"))?;
    for ph in table.chunks_exact(56) {
        let segment_end = u64_at(ph, 8)
            .checked_add(u64_at(ph, 32))
            .ok_or_else(|| not_elf("bad segment"))?;
        end = end.max(segment_end);
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_note_reads_back_behind_an_elf_file() {
        let runtime = std::fs::read("/proc/self/exe").unwrap();
        let exe = File::open("/proc/self/exe").unwrap();
        assert_eq!(elf_end(&exe).unwrap(), runtime.len() as u64);
        let note = Note::new(runtime.len() as u64, Path::new("bin/app")).unwrap();
        assert_eq!(note.image_offset % ALIGN, 0);
        let mut bundle = tempfile_in_target();
        bundle.write_all(&runtime).unwrap();
        bundle.write_all(&note.to_bytes()).unwrap();
        bundle.write_all(b"DWARFS image bytes").unwrap();
        assert_eq!(Note::read(&bundle).unwrap(), note);
    }

    #[test]
    fn entries_are_plain_relative_paths() {
        for good in ["app", "bin/app", "usr/lib/x.sh"] {
            assert!(check_entry(good.as_bytes()).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/bin/app",
            "../app",
            "bin/../app",
            "./app",
            "bin//app",
            "bin/",
            "a\0b",
        ] {
            assert!(check_entry(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    fn tempfile_in_target() -> File {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("hoard-note-test-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}
