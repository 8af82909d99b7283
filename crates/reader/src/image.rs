//! The section layer of an open image: where the image starts in its file,
//! which sections it has, and loading (hash-checked, decompressed) payloads.

use crate::encrypted::Encryption;
use crate::error::{corrupt, Error, Result};
use crate::section::Section;
use crate::signed::Signed;
use crate::source::Source;
use hoard_format::section::{
    self, Compression, HeaderLayout, SectionHeader, SectionType, Version, FILE_HEADER_SIZE,
    V2_HEADER_SIZE,
};
use std::borrow::Cow;
use std::path::Path;

/// Bytes at the end of a remote LZMA payload fetched for its declared
/// size: the xz stream's index and footer (about 30 bytes for the
/// one-block streams DwarFS and hoard write).
const LZMA_TAIL: u64 = 256;

/// Where the image starts in its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ImageOffset {
    /// Search for the first section after an arbitrary prefix.
    #[default]
    Auto,
    /// The image starts at this byte offset.
    At(u64),
}

impl std::str::FromStr for ImageOffset {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "auto" {
            return Ok(ImageOffset::Auto);
        }
        s.parse()
            .map(ImageOffset::At)
            .map_err(|_| format!("invalid image offset '{s}': expected a byte count or 'auto'"))
    }
}

/// Options for opening an image.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Where the image starts in the file.
    pub offset: ImageOffset,
    /// Read with `pread` instead of mapping the file.
    pub no_mmap: bool,
    /// Bytes the image takes from its start on (default: to the end of
    /// the file), for an image followed by other data.
    pub image_size: Option<u64>,
    /// Open only an image signed by one of these keys, and check every
    /// section against the signature before it is used (see
    /// [`crate::signed`]).
    pub trust: Option<hoard_trust::TrustedKeys>,
    /// What the signature must claim (a name, a minimum version); only
    /// with `trust`. Expired signatures are refused whatever this says.
    pub expect: hoard_trust::Expectations,
    /// Open an encrypted image with one of these (see
    /// [`crate::encrypted`]); ignored for a plain image.
    pub identities: Option<std::sync::Arc<hoard_trust::encrypt::Identities>>,
}

/// An opened image: its file, version and sections.
#[derive(Debug)]
pub struct Image {
    source: Source,
    offset: u64,
    version: Version,
    sections: Vec<Section>,
    /// `sections` with every pending header read, at the first
    /// [`Image::sections`] of an image that has pending ones.
    resolved: std::sync::OnceLock<Vec<Section>>,
    used_index: bool,
    index_problem: Option<String>,
    /// What was left out at the end of the image, cut short.
    cut_short: Option<String>,
    /// The signed digest every load is checked against (`--trust`).
    signed: Option<Signed>,
    /// The key of an encrypted image.
    encryption: Option<Encryption>,
    /// Loads check the SHA-512/256 of each section too (see
    /// [`Image::check_contents`]).
    checks_sha: std::sync::atomic::AtomicBool,
}

impl Image {
    /// Opens the image in `path` and lists its sections. Errors do not
    /// name `path`: the caller does.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        Self::open_source(|| Source::open(path, !options.no_mmap), options)
    }

    /// Opens the image `source` gives, as [`Image::open`] does: checked
    /// against its signature, then unlocked. `source` is called a second
    /// time when a signed image fails its check with its recovery data.
    pub(crate) fn open_source(
        source: impl Fn() -> Result<Source>,
        options: &OpenOptions,
    ) -> Result<Self> {
        let image = Self::from_source_sized(source()?, options.offset, options.image_size);
        let image = match &options.trust {
            Some(trusted) => match image.and_then(|image| image.trusting(trusted, &options.expect))
            {
                Ok(image) => image,
                Err(e) => Self::open_as_it_is(source()?, options, trusted).map_err(|_| e)?,
            },
            None if !options.expect.is_empty() => {
                return Err(Error::Unsupported(
                    "an expected name or version needs the keys to trust (--trust PUB)".into(),
                ))
            }
            None => image?,
        };
        image.unlocking(options.identities.as_deref())
    }

    /// The image in `path` listed and checked against its signature
    /// without its recovery data: recovery data is not signed, and what
    /// it "repairs" may be what made the open fail.
    fn open_as_it_is(
        source: Source,
        options: &OpenOptions,
        trusted: &hoard_trust::TrustedKeys,
    ) -> Result<Self> {
        Self::list(source, options.offset, options.image_size, false)
            .map_err(|(e, _)| e)?
            .trusting(trusted, &options.expect)
    }

    /// This image with its data key unwrapped by one of `identities`,
    /// when it is encrypted (after its signature is checked, if it was
    /// opened trusting keys); opened without identities, an encrypted
    /// image reads only its plain sections. An encrypted image's listing
    /// is checked (see [`crate::encrypted`]), and one whose key section
    /// was given another type is refused rather than read as plain.
    pub fn unlocking(
        mut self,
        identities: Option<&hoard_trust::encrypt::Identities>,
    ) -> Result<Self> {
        let Some(section) = self.find(hoard_trust::encrypt::SECTION_TYPE).cloned() else {
            self.refuse_hidden_key(identities.is_some_and(|ids| !ids.is_empty()))?;
            return Ok(self);
        };
        let payload = self.verified_payload(&section)?;
        let encryption = Encryption::open(&self.sections, &payload, identities)?;
        self.encryption = Some(encryption);
        Ok(self)
    }

    /// Refuses an image without a key section whose first section starts
    /// as a key section does (an encrypted image whose key section was
    /// retyped): looked at in a local file, and in a remote one when
    /// identities are given (one small fetch).
    fn refuse_hidden_key(&self, identities: bool) -> Result<()> {
        let Some(first) = self.sections.first() else {
            return Ok(());
        };
        if self.source.remote().is_some() && !identities {
            return Ok(());
        }
        let start = self
            .source
            .read_upto(first.payload_offset(), 8)
            .unwrap_or_default();
        if crate::encrypted::is_hidden_key(&start) {
            return Err(corrupt!(
                "the image is encrypted, but its key section was given another type"
            ));
        }
        Ok(())
    }

    /// The key of an encrypted image; `None` for a plain one.
    pub fn encryption(&self) -> Option<&Encryption> {
        self.encryption.as_ref()
    }

    /// This image, once its signature by one of `trusted` is checked, its
    /// claims meet `expect` (and have not expired), and every section but
    /// blocks matches it; loads are checked from then on. With recovery
    /// data, the signature is checked against the file as it is first,
    /// then as repaired (see `Image::verified`).
    pub fn trusting(
        mut self,
        trusted: &hoard_trust::TrustedKeys,
        expect: &hoard_trust::Expectations,
    ) -> Result<Self> {
        let signed = match self.source.recovery() {
            Some((_, as_it_is)) => self
                .check_signature(as_it_is, trusted, expect)
                .or_else(|_| self.check_signature(&self.source, trusted, expect)),
            None => self.check_signature(&self.source, trusted, expect),
        }?;
        self.signed = Some(signed);
        for s in &self.sections {
            let kind = s.header.kind;
            if kind != SectionType::BLOCK
                && kind != hoard_recovery::SECTION_TYPE
                && kind != hoard_trust::SECTION_TYPE
            {
                self.verified(s)?;
            }
        }
        Ok(self)
    }

    /// The signature of the image read from `source`, checked.
    fn check_signature(
        &self,
        source: &Source,
        trusted: &hoard_trust::TrustedKeys,
        expect: &hoard_trust::Expectations,
    ) -> Result<Signed> {
        Signed::check(
            source,
            &self.sections,
            (self.offset, self.version),
            trusted,
            expect,
            |s| {
                self.checked_from(source, s)
                    .map(|(_, payload)| payload.into_owned())
            },
        )
    }

    /// From now on, every load also checks the section's SHA-512/256
    /// (v2.2+ sections), on a copy of its payload: for the base of a
    /// delta layer, whose identity names its blocks by those hashes (see
    /// [`crate::Filesystem::delta_identity`]).
    pub fn check_contents(&self) {
        self.checks_sha
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The signature loads are checked against, when opened with trusted keys.
    pub fn signed(&self) -> Option<&Signed> {
        self.signed.as_ref()
    }

    /// Lists the sections of an image held by `source`.
    pub fn from_source(source: Source, offset: ImageOffset) -> Result<Self> {
        Self::from_source_sized(source, offset, None)
    }

    /// Lists the sections of an image of `size` bytes (or up to the end)
    /// held by `source`. An image with recovery data is read through it,
    /// so damage it covers is repaired on the fly; when an image is too
    /// damaged to list, the whole file is searched for recovery data.
    pub fn from_source_sized(
        source: Source,
        offset: ImageOffset,
        size: Option<u64>,
    ) -> Result<Self> {
        let (error, source) = match Self::list(source, offset, size, true) {
            Ok(image) => return image.through_listed_recovery(offset, size),
            Err(failure) => failure,
        };
        if source.recovery().is_some() {
            return Err(error);
        }
        match hoard_recovery::Recovery::search(&source) {
            Some(recovery) => {
                Self::list(source.recovering(recovery), offset, size, true).map_err(|(e, _)| e)
            }
            None => Err(error),
        }
    }

    /// This image read through its recovery section, when it lists one
    /// whose descriptor at the end of the file is damaged (the image is
    /// listed again then, through it).
    fn through_listed_recovery(self, offset: ImageOffset, size: Option<u64>) -> Result<Self> {
        if self.source.recovery().is_some() {
            return Ok(self);
        }
        let Some(section) = self.find(hoard_recovery::SECTION_TYPE) else {
            return Ok(self);
        };
        match hoard_recovery::Recovery::at_section(&self.source, section.offset) {
            Some(recovery) => {
                Self::list(self.source.recovering(recovery), offset, size, true).map_err(|(e, _)| e)
            }
            None => Ok(self),
        }
    }

    /// Finds the image and lists its sections, read through its recovery
    /// data when it has some and `find_recovery`; on failure, hands the
    /// source back with the error.
    fn list(
        source: Source,
        offset: ImageOffset,
        size: Option<u64>,
        find_recovery: bool,
    ) -> std::result::Result<Self, (Error, Source)> {
        let offset = match offset {
            ImageOffset::At(o) => o,
            // A remote image most likely starts at 0: try that before
            // searching, which reads a megabyte from the server.
            ImageOffset::Auto if source.remote().is_some() => {
                match Self::list(source, ImageOffset::At(0), size, find_recovery) {
                    Ok(image) => return Ok(image),
                    Err((_, source)) => return Self::list_searched(source, size, find_recovery),
                }
            }
            ImageOffset::Auto => {
                match section::find_image_offset(source.len(), &mut |off, len| {
                    source
                        .read_upto(off, len as u64)
                        .map(Cow::into_owned)
                        .unwrap_or_default()
                }) {
                    Some(o) => o,
                    None => return Err((corrupt!("no DwarFS image found in file"), source)),
                }
            }
        };
        if offset >= source.len() {
            let e = corrupt!(
                "image offset {offset} is past the end of the file ({} bytes)",
                source.len()
            );
            return Err((e, source));
        }
        let mut source = match size {
            Some(size) => source.limited(offset.saturating_add(size)),
            None => source,
        };
        if find_recovery && source.recovery().is_none() {
            if let Some(recovery) = hoard_recovery::Recovery::find(&source) {
                source = source.recovering(recovery);
            }
        }
        let version = match source
            .read_upto(offset, FILE_HEADER_SIZE as u64)
            .and_then(|h| Ok(section::parse_version(&h)?))
        {
            Ok(v) => v,
            Err(e) => return Err((e, source)),
        };
        let mut image = Image {
            source,
            offset,
            version,
            sections: Vec::new(),
            resolved: std::sync::OnceLock::new(),
            used_index: false,
            index_problem: None,
            cut_short: None,
            signed: None,
            encryption: None,
            checks_sha: std::sync::atomic::AtomicBool::new(false),
        };
        if version.minor >= 4 {
            match image.sections_from_index() {
                Ok(Some(sections)) => {
                    image.sections = sections;
                    image.used_index = true;
                    image.verify_remote_metadata();
                    return Ok(image);
                }
                Ok(None) => {}
                Err(e) => image.index_problem = Some(e.to_string()),
            }
        }
        match image.scan_sections() {
            Ok((sections, cut_short)) => {
                image.sections = sections;
                if cut_short.is_some() {
                    // The index was looked for at the end of what was cut short.
                    image.index_problem = None;
                    image.cut_short = cut_short;
                }
                Ok(image)
            }
            Err(e) => Err((e, image.source)),
        }
    }

    /// [`Image::list`] with the image searched for in the file.
    fn list_searched(
        source: Source,
        size: Option<u64>,
        find_recovery: bool,
    ) -> std::result::Result<Self, (Error, Source)> {
        match section::find_image_offset(source.len(), &mut |off, len| {
            source
                .read_upto(off, len as u64)
                .map(Cow::into_owned)
                .unwrap_or_default()
        }) {
            Some(o) => Self::list(source, ImageOffset::At(o), size, find_recovery),
            None => Err((corrupt!("no DwarFS image found in file"), source)),
        }
    }

    /// Walks the section headers from the start of the image. A
    /// signature section cut short at the end (an interrupted in-place
    /// `hoard sign`, which appends one) ends the walk: it is left out,
    /// and named in the second value.
    fn scan_sections(&self) -> Result<(Vec<Section>, Option<String>)> {
        let mut pos = self.offset;
        if self.version.layout() == HeaderLayout::V1 {
            pos += FILE_HEADER_SIZE as u64;
        }
        let mut sections = Vec::new();
        while pos < self.source.len() {
            let section = match self.section_at(pos) {
                Ok(section) => section,
                Err(_) if self.is_cut_short_signature(pos, sections.len()) => {
                    let why = format!(
                        "the image ends with a signature section cut short at offset {pos} \
                         (an interrupted `hoard sign`): sign it again"
                    );
                    return Ok((sections, Some(why)));
                }
                Err(e) => return Err(e),
            };
            if let Some(n) = section.header.number {
                if n as usize != sections.len() {
                    return Err(corrupt!(
                        "section at offset {pos} has number {n}, expected {}",
                        sections.len()
                    ));
                }
            }
            pos = section.end();
            sections.push(section);
        }
        Ok((sections, None))
    }

    /// Whether the bytes from `pos` to the end of the file are the start
    /// of section `number`, a signature section, cut short: less than a
    /// header that starts as this image's headers do, or a whole header
    /// of that section whose payload runs past the end.
    fn is_cut_short_signature(&self, pos: u64, number: usize) -> bool {
        if self.version.layout() != HeaderLayout::V2 || pos <= self.offset {
            return false;
        }
        let left = self.source.len().saturating_sub(pos);
        let Ok(bytes) = self.source.read(pos, left.min(V2_HEADER_SIZE as u64)) else {
            return false;
        };
        if bytes.len() < V2_HEADER_SIZE {
            let Ok(first) = self.source.read(self.offset, 8) else {
                return false;
            };
            return !bytes.is_empty() && first.starts_with(&bytes[..bytes.len().min(8)]);
        }
        section::parse_header(&bytes, self.version).is_ok_and(|header| {
            header.kind == hoard_trust::SECTION_TYPE
                && header.number.is_some_and(|n| n as usize == number)
                && pos
                    .saturating_add(V2_HEADER_SIZE as u64)
                    .saturating_add(header.length)
                    > self.source.len()
        })
    }

    /// Reads and checks the header of the section at `pos`.
    fn section_at(&self, pos: u64) -> Result<Section> {
        let size = match self.version.layout() {
            HeaderLayout::V1 => section::V1_HEADER_SIZE,
            HeaderLayout::V2 => V2_HEADER_SIZE,
        } as u64;
        let raw = self
            .source
            .read(pos, size)
            .map_err(|_| corrupt!("truncated section header at offset {pos}"))?;
        let header = section::parse_header(&raw, self.version)?;
        if header.version != self.version {
            return Err(corrupt!(
                "section at offset {pos} has version {}, image has {}",
                header.version,
                self.version
            ));
        }
        let section = Section {
            header,
            offset: pos,
            damaged: None,
            pending: false,
        };
        let end = section.payload_offset().checked_add(section.header.length);
        if end.is_none_or(|e| e > self.source.len()) {
            return Err(corrupt!(
                "{} section at offset {pos} with length {} extends past the end of the image",
                section.header.kind.name(),
                section.header.length
            ));
        }
        Ok(section)
    }

    /// Uses the section index, if the image ends with a valid one (before
    /// its recovery data, if any).
    fn sections_from_index(&self) -> Result<Option<Vec<Section>>> {
        let end = self.index_end();
        let Some(tail_pos) = end.checked_sub(8).filter(|&p| p >= self.offset) else {
            return Ok(None);
        };
        let Some(index_rel) = section::index_offset_hint(&self.source.read(tail_pos, 8)?) else {
            return Ok(None);
        };
        let index_pos = self
            .offset
            .checked_add(index_rel)
            .filter(|&p| p < end)
            .ok_or_else(|| corrupt!("section index offset {index_rel} is out of range"))?;
        let index = self.section_at(index_pos)?;
        if index.header.kind != SectionType::SECTION_INDEX {
            return Err(corrupt!(
                "section index entry does not point at the section index"
            ));
        }
        if index.header.compression != Compression::NONE {
            return Err(corrupt!("section index is compressed"));
        }
        if index.end() != end {
            return Err(corrupt!("section index is not the last section"));
        }
        let payload = self.verified_payload(&index)?;
        let entries = section::parse_section_index(&payload)?;
        if entries.last().map(|e| e.offset) != Some(index_rel) {
            return Err(corrupt!("section index does not end with itself"));
        }
        self.prefetch_listed(&entries, end);
        // Block headers are read with their blocks: an open then costs a
        // few reads (a few requests from a remote source), however many
        // blocks there are.
        let mut sections = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let pos = self.offset + entry.offset;
            let next = entries.get(i + 1).map_or(end, |n| self.offset + n.offset);
            if entry.kind == SectionType::BLOCK {
                sections.push(self.pending_block(i as u32, pos, next)?);
                continue;
            }
            let section = match self.section_at(pos) {
                Ok(s)
                    if s.header.kind == entry.kind
                        && s.end() == next
                        && s.header.number == Some(i as u32) =>
                {
                    s
                }
                Ok(_) | Err(_) if entry.kind == SectionType::BLOCK => {
                    self.damaged_block(i as u32, pos, next)?
                }
                Ok(_) => {
                    return Err(corrupt!(
                        "section index entry {i} does not match the section at offset {pos}"
                    ))
                }
                Err(e) => return Err(e),
            };
            sections.push(section);
        }
        // After the index: the signature, then the recovery data, each
        // if present.
        let mut pos = end;
        for kind in [hoard_trust::SECTION_TYPE, hoard_recovery::SECTION_TYPE] {
            if pos == self.source.len() {
                break;
            }
            let section = self.section_at(pos)?;
            if section.header.kind != kind {
                continue;
            }
            if section.header.number != Some(sections.len() as u32) {
                return Err(corrupt!(
                    "{} section at offset {pos} has the wrong number",
                    kind.name()
                ));
            }
            pos = section.end();
            sections.push(section);
        }
        if pos != self.source.len() {
            return Err(corrupt!(
                "unexpected section at offset {pos} after the section index"
            ));
        }
        Ok(Some(sections))
    }

    /// Asks the source for what opening reads next, all at once: every
    /// section but blocks and recovery data, whole (the metadata, which
    /// opening loads).
    fn prefetch_listed(&self, entries: &[section::IndexEntry], end: u64) {
        let ranges: Vec<_> = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let pos = self.offset.saturating_add(entry.offset);
                let next = entries
                    .get(i + 1)
                    .map_or(end, |n| self.offset.saturating_add(n.offset));
                match entry.kind {
                    SectionType::BLOCK => pos..pos,
                    _ if entry.kind == hoard_recovery::SECTION_TYPE => pos..pos,
                    _ => pos..next,
                }
            })
            .filter(|r| r.start < r.end && r.end <= end)
            .collect();
        self.source.prefetch(&ranges);
    }

    /// Checks the sections besides blocks (and recovery data) of a remote
    /// image, so its source keeps them (on disk, when it caches): a later
    /// open then fetches none of them. Failures show when they are used.
    fn verify_remote_metadata(&self) {
        if self.source.remote().is_none() {
            return;
        }
        for s in &self.sections {
            if s.header.kind != SectionType::BLOCK && s.header.kind != hoard_recovery::SECTION_TYPE
            {
                let _ = self.verified_payload(s);
            }
        }
    }

    /// BLOCK section `number` at `pos` as the section index gives it, its
    /// header not read yet (see [`Section::pending`]).
    fn pending_block(&self, number: u32, pos: u64, next: u64) -> Result<Section> {
        let mut section = self.damaged_block(number, pos, next)?;
        section.damaged = None;
        section.pending = true;
        Ok(section)
    }

    /// The header of `section`, read and checked against what the section
    /// index said if it was pending (with the whole section, in one
    /// request from a remote source).
    fn header_of<'a>(&self, section: &'a Section) -> Result<Cow<'a, SectionHeader>> {
        if !section.pending {
            return Ok(Cow::Borrowed(&section.header));
        }
        self.source
            .prefetch(std::slice::from_ref(&(section.offset..section.end())));
        self.pending_header(section).map(Cow::Owned)
    }

    /// Reads the header of pending `section` alone and checks it against
    /// what the section index said.
    fn pending_header(&self, section: &Section) -> Result<SectionHeader> {
        let read = self.section_at(section.offset)?;
        let expected = &section.header;
        if read.header.kind != expected.kind
            || read.header.number != expected.number
            || read.header.length != expected.length
        {
            return Err(corrupt!(
                "section index entry {} does not match the section at offset {}",
                expected.number.unwrap_or_default(),
                section.offset
            ));
        }
        Ok(read.header)
    }

    /// `section` with its header read, if it was pending; a header that
    /// cannot be read makes it a damaged stand-in, as at open.
    fn resolve(&self, section: &Section) -> Section {
        if !section.pending {
            return section.clone();
        }
        match self.pending_header(section) {
            Ok(header) => Section {
                header,
                pending: false,
                ..section.clone()
            },
            Err(e) => Section {
                damaged: Some(format!(
                    "BLOCK section {} at offset {}: {e}",
                    section.header.number.unwrap_or_default(),
                    section.offset
                )),
                pending: false,
                ..section.clone()
            },
        }
    }

    /// A stand-in for BLOCK section `number` at `pos`, whose header is
    /// damaged: the section index gives its place and size, and reading
    /// it fails, but the rest of the image can be read.
    fn damaged_block(&self, number: u32, pos: u64, next: u64) -> Result<Section> {
        let length = next
            .checked_sub(pos)
            .and_then(|n| n.checked_sub(V2_HEADER_SIZE as u64))
            .filter(|_| self.version.layout() == HeaderLayout::V2)
            .ok_or_else(|| corrupt!("section index entry {number} is too short for a section"))?;
        Ok(Section {
            header: SectionHeader {
                version: self.version,
                number: Some(number),
                kind: SectionType::BLOCK,
                compression: Compression::NONE,
                length,
                sha512_256: None,
                xxh3_64: None,
            },
            offset: pos,
            damaged: Some(format!(
                "BLOCK section {number} at offset {pos}: its header is damaged"
            )),
            pending: false,
        })
    }

    /// Where the section index ends: before the signature and the
    /// recovery data, if any.
    fn index_end(&self) -> u64 {
        let end = match self.source.recovery() {
            Some((recovery, _)) => recovery.layout().section_start(),
            None => self.source.len(),
        };
        let trailer = hoard_trust::signature::TRAILER_SIZE;
        end.checked_sub(trailer)
            .filter(|&p| p >= self.offset)
            .and_then(|p| self.source.read(p, trailer).ok())
            .and_then(|tail| hoard_trust::signature::section_start(&tail, end))
            .filter(|&start| start >= self.offset)
            .unwrap_or(end)
    }

    /// The format version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Byte offset of the image in its file (the size of any prefix).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Size of the file holding the image.
    pub fn file_size(&self) -> u64 {
        self.source.len()
    }

    /// All sections, in file order, each with its header (the first call
    /// reads the block headers not read yet, all together).
    pub fn sections(&self) -> &[Section] {
        if !self.sections.iter().any(|s| s.pending) {
            return &self.sections;
        }
        self.resolved.get_or_init(|| {
            let pending: Vec<_> = self
                .sections
                .iter()
                .filter(|s| s.pending)
                // With the payload's first bytes, which declare its size.
                .map(|s| s.offset..(s.payload_offset() + 64).min(s.end()))
                .collect();
            self.source.prefetch(&pending);
            self.sections.iter().map(|s| self.resolve(s)).collect()
        })
    }

    /// All sections as listed at open: blocks listed from the section
    /// index are [`Section::pending`] (every method of the image reads their header
    /// when it needs it).
    pub fn listed_sections(&self) -> &[Section] {
        &self.sections
    }

    /// Whether the sections were found through the section index.
    pub fn used_index(&self) -> bool {
        self.used_index
    }

    /// Why a section index present in the image was not used, if it was not.
    pub fn index_problem(&self) -> Option<&str> {
        self.index_problem.as_deref()
    }

    /// A signature section cut short at the end of the image, left out
    /// (an interrupted in-place `hoard sign`), if there is one.
    pub fn cut_short(&self) -> Option<&str> {
        self.cut_short.as_deref()
    }

    /// The raw payload of a section, without any check.
    pub fn raw_payload(&self, section: &Section) -> Result<Cow<'_, [u8]>> {
        if let Some(why) = &section.damaged {
            return Err(corrupt!("{why}"));
        }
        self.source
            .read(section.payload_offset(), section.header.length)
    }

    /// The size a section's payload declares it decompresses to, read from
    /// the payload's own header without decoding it; `None` when the
    /// payload does not declare one or cannot be read.
    ///
    /// From a remote source only the payload's first bytes are fetched,
    /// which hold the size for every codec but LZMA, whose stream records
    /// it at its end: there the last bytes (index and footer) are fetched.
    /// Of an encrypted image, a compressed block's size is `None`: its
    /// codec's header is encrypted, and no block is read for it.
    pub fn uncompressed_size(&self, section: &Section) -> Option<u64> {
        let header = self.header_of(section).ok()?;
        let section = &Section {
            header: header.into_owned(),
            pending: false,
            ..section.clone()
        };
        let kind = section.header.kind;
        if self.encryption.is_some() && hoard_trust::encrypt::is_sealed(kind) {
            // Sealed: the codec's header is encrypted with the rest. A
            // stored block is its payload less the tag; a compressed
            // one's size is not worth fetching and decrypting it whole
            // (`hoard info` of a remote image would fetch every block).
            if kind == SectionType::BLOCK {
                return (section.header.compression == Compression::NONE).then(|| {
                    section
                        .header
                        .length
                        .saturating_sub(hoard_trust::encrypt::cipher::TAG_SIZE as u64)
                });
            }
            // The metadata sections, read at open anyway, are decrypted.
            let payload = self.plain_payload(section).ok()?;
            return hoard_codec::uncompressed_size(section.header.compression, &payload)
                .ok()
                .flatten();
        }
        let payload = match self.source.remote() {
            Some(_) if section.header.compression == Compression::NONE => {
                return Some(section.header.length)
            }
            Some(_) if section.header.compression == Compression::LZMA => {
                let length = section.header.length;
                let tail_len = length.min(LZMA_TAIL);
                let tail = self
                    .source
                    .read_upto(section.payload_offset() + length - tail_len, tail_len)
                    .ok()?;
                return hoard_codec::lzma_declared_size(&tail, length).ok();
            }
            Some(_) if section.damaged.is_none() => self
                .source
                .read_upto(section.payload_offset(), section.header.length.min(64))
                .ok()?,
            _ => self.raw_payload(section).ok()?,
        };
        hoard_codec::uncompressed_size(section.header.compression, &payload)
            .ok()
            .flatten()
    }

    /// The payload of a section after checking its XXH3-64 hash.
    ///
    /// A remote source is told whether the bytes were right; bytes that
    /// were not are fetched once more before giving up.
    pub fn verified_payload(&self, section: &Section) -> Result<Cow<'_, [u8]>> {
        self.verified(section).map(|(_, payload)| payload)
    }

    /// The header (read now if it was pending) and the payload of a
    /// section after checking its XXH3-64 hash (and, with `--trust`, its
    /// signed hash).
    ///
    /// A remote source is told whether the bytes were right; bytes that
    /// were not are fetched once more before giving up. A signed image
    /// with recovery data is read as it is first, then repaired: recovery
    /// data is not signed, so what it repairs may be what fails the
    /// signature, and genuine bytes stay readable whatever it holds.
    fn verified(&self, section: &Section) -> Result<(SectionHeader, Cow<'_, [u8]>)> {
        let attempts = if self.source.remote().is_some() { 2 } else { 1 };
        let mut result = Err(corrupt!("no attempt"));
        for _ in 0..attempts {
            if section.pending {
                // The whole section in one request from a remote source.
                self.source
                    .prefetch(std::slice::from_ref(&(section.offset..section.end())));
            }
            result = match self.source.recovery() {
                Some((_, as_it_is)) if self.signed.is_some() => self
                    .checked_from(as_it_is, section)
                    .or_else(|_| self.checked_from(&self.source, section)),
                _ => self.checked_from(&self.source, section),
            };
            self.source
                .checked(section.offset..section.end(), result.is_ok());
            if result.is_ok() {
                break;
            }
        }
        result
    }

    /// The header and payload of `section` read from `source` (the
    /// image's, or the file as it is below its recovery data), checked:
    /// the header is copied once, then hashed, checked against the
    /// listing and parsed from that copy, so a file changing meanwhile
    /// cannot slip another header past the checks. With `--trust` the
    /// payload is copied too, and checked against the signature.
    fn checked_from<'s>(
        &self,
        source: &'s Source,
        section: &Section,
    ) -> Result<(SectionHeader, Cow<'s, [u8]>)> {
        if let Some(why) = &section.damaged {
            return Err(corrupt!("{why}"));
        }
        let (raw_header, header) = self.header_copy(source, section)?;
        let mut payload = source.read(section.payload_offset(), section.header.length)?;
        section::verify_xxh3(&header, &raw_header, &payload)?;
        if self.checks_sha.load(std::sync::atomic::Ordering::Relaxed) {
            payload = Cow::Owned(payload.into_owned());
            section::verify_sha512_256(&header, &raw_header, &payload)?;
        }
        let Some(signed) = &self.signed else {
            return Ok((header, payload));
        };
        // What is used is what was checked, one copy of it: a server may
        // answer two reads differently, and a mapped file may change
        // between check and use.
        payload = Cow::Owned(payload.into_owned());
        signed.check_section(section, &raw_header, &payload)?;
        Ok((header, payload))
    }

    /// A copy of the header bytes of `section` read from `source`, and
    /// the header parsed from that copy, which must be the one listed
    /// (for a block listed from the section index, its type, number and
    /// length).
    fn header_copy(&self, source: &Source, section: &Section) -> Result<(Vec<u8>, SectionHeader)> {
        let raw = source
            .read(section.offset, section.header.size() as u64)
            .map_err(|_| corrupt!("truncated section header at offset {}", section.offset))?
            .into_owned();
        let header = section::parse_header(&raw, self.version)?;
        let listed = &section.header;
        if section.pending {
            if header.kind != listed.kind
                || header.number != listed.number
                || header.length != listed.length
                || header.version != self.version
            {
                return Err(corrupt!(
                    "section index entry {} does not match the section at offset {}",
                    listed.number.unwrap_or_default(),
                    section.offset
                ));
            }
        } else if header != *listed {
            return Err(corrupt!(
                "section at offset {} changed while it was read",
                section.offset
            ));
        }
        Ok((raw, header))
    }

    /// The payload of a section as it was compressed: checked as by
    /// [`Image::verified_payload`], then decrypted if the image is
    /// encrypted.
    pub fn plain_payload(&self, section: &Section) -> Result<Cow<'_, [u8]>> {
        self.plain(section).map(|(_, payload)| payload)
    }

    /// The header and the checked, decrypted payload of a section.
    fn plain(&self, section: &Section) -> Result<(SectionHeader, Cow<'_, [u8]>)> {
        let (header, payload) = self.verified(section)?;
        match &self.encryption {
            Some(encryption) if hoard_trust::encrypt::is_sealed(header.kind) => {
                let plain = encryption.open_section(&header, payload)?;
                Ok((header, Cow::Owned(plain)))
            }
            _ => Ok((header, payload)),
        }
    }

    /// Tells the image's source that these byte ranges of its file will
    /// be read soon, so it reads them ahead in large pieces (see
    /// [`Source::prefetch`]).
    pub fn prefetch(&self, ranges: &[std::ops::Range<u64>]) {
        self.source.prefetch(ranges);
    }

    /// What a remote source fetched so far; `None` for a local file.
    pub fn fetch_stats(&self) -> Option<crate::source::FetchStats> {
        self.source.remote().map(|r| r.stats())
    }

    /// Checks the SHA-512/256 hash of a section (v2.2+; older sections pass).
    pub fn verify_sha(&self, section: &Section) -> Result<()> {
        let (raw_header, header) = self.header_copy(&self.source, section)?;
        let payload = self.raw_payload(section)?;
        section::verify_sha512_256(&header, &raw_header, &payload)?;
        Ok(())
    }

    /// The decompressed payload of a section, hash-checked, refusing more
    /// than `max_size` bytes of output.
    pub fn load(&self, section: &Section, max_size: usize) -> Result<Vec<u8>> {
        let (header, payload) = self.plain(section)?;
        hoard_codec::decompress(header.compression, &payload, max_size)
            .map_err(|e| section.decode_error(e))
    }

    /// A decoder for the payload of a section, hash-checked, that produces
    /// its output a piece at a time, refusing more than `max_size` bytes.
    pub fn partial_decoder(
        &self,
        section: &Section,
        max_size: usize,
    ) -> Result<Box<dyn hoard_codec::PartialDecoder>> {
        let (header, payload) = self.plain(section)?;
        hoard_codec::partial_decoder(header.compression, payload, max_size)
            .map_err(|e| section.decode_error(e))
    }

    /// The recovery data the image is read through, if it has any, and
    /// the file as it is.
    pub fn recovery(&self) -> Option<(&hoard_recovery::Recovery, &Source)> {
        self.source.recovery()
    }

    /// The first section of a kind.
    pub fn find(&self, kind: SectionType) -> Option<&Section> {
        self.sections.iter().find(|s| s.header.kind == kind)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}
