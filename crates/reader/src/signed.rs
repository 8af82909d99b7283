//! Verified reads of a signed image (`--trust`): the signature is checked
//! once at open, then every section against its signed hash when it is
//! loaded (see the hoard-trust crate).
//!
//! At open the image must carry a signature by a trusted key whose
//! digest lists exactly the image's sections, not expired, whose claims
//! meet what the reader expects (its name, a minimum version: this is
//! the one place they are checked); the bytes before the first
//! section and every section but blocks (the section index, the
//! metadata, the history) are checked then, so tampered metadata or a
//! tampered index fails the open. Blocks are checked at each load, before
//! they are decompressed: a remote image still fetches only what is read,
//! and a tampered block fails the reads that need it (the error says
//! which block; a front end reports it, a mount logs it once).

use crate::error::{corrupt, Error, Result};
use crate::section::Section;
use crate::source::Source;
use hoard_format::section::Version;
use hoard_trust::{Claims, Expectations, ImageDigest, PublicKey, Signature, TrustedKeys};

/// The signed digest of an opened image, against which loads are checked.
#[derive(Debug)]
pub struct Signed {
    digest: ImageDigest,
    key: PublicKey,
    claims: Claims,
    /// Where the signature section starts: it and the recovery data after
    /// it are not in the digest (the signature section is compared whole
    /// at open; crates/trust/README.md says why recovery data is left out).
    signature_offset: u64,
}

impl Signed {
    /// Checks the signature of the image whose sections (as listed at
    /// open) are `sections`, whose first section is at `offset` and
    /// whose format is `version`, and that its claims meet `expect` and
    /// have not expired (by the system clock); `payload` loads a
    /// section's payload (XXH3-checked).
    pub(crate) fn check(
        source: &Source,
        sections: &[Section],
        (offset, version): (u64, Version),
        trusted: &TrustedKeys,
        expect: &Expectations,
        payload: impl Fn(&Section) -> Result<Vec<u8>>,
    ) -> Result<Signed> {
        let at = sections
            .iter()
            .position(|s| s.header.kind == hoard_trust::SECTION_TYPE)
            .ok_or_else(|| {
                corrupt!("the image is not signed, and --trust takes only signed images")
            })?;
        let section = &sections[at];
        let signature = Signature::parse(&payload(section)?).map_err(trust_error)?;
        signature.verify(trusted).map_err(trust_error)?;
        let number = section.header.number.unwrap_or_default();
        let raw = source.read(section.offset, section.end() - section.offset)?;
        if *raw != signature.section(number, version) {
            return Err(corrupt!("the signature section's header is damaged"));
        }
        let after = &sections[at + 1..];
        if !(after.is_empty()
            || (after.len() == 1 && after[0].header.kind == hoard_recovery::SECTION_TYPE))
        {
            return Err(corrupt!("sections follow the image signature"));
        }
        let digest = signature.digest;
        let listed = &sections[..at];
        let tiled = listed.len() == digest.sections.len()
            && digest.prefix_len == offset
            && listed
                .iter()
                .zip(&digest.sections)
                .all(|(s, d)| s.offset == d.offset && s.end() == d.end());
        if !tiled {
            return Err(corrupt!("the image's sections are not the ones signed"));
        }
        let prefix = source.read(0, offset)?;
        if digest.kind.hash(&prefix) != digest.prefix_hash {
            return Err(corrupt!(
                "the bytes before the image are not the ones signed"
            ));
        }
        // Last: what a genuine image claims is judged.
        signature.claims.check(expect, now()).map_err(trust_error)?;
        Ok(Signed {
            digest,
            key: signature.key,
            claims: signature.claims,
            signature_offset: section.offset,
        })
    }

    /// Who signed the image.
    pub fn key(&self) -> &PublicKey {
        &self.key
    }

    /// What the signature claims of the image (checked at open).
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Checks a section's header and payload against the signed digest.
    pub(crate) fn check_section(
        &self,
        section: &Section,
        header: &[u8],
        payload: &[u8],
    ) -> Result<()> {
        if section.offset >= self.signature_offset {
            return Ok(());
        }
        let size = (header.len() + payload.len()) as u64;
        let matches = self.digest.section_at(section.offset).is_some_and(|d| {
            d.size == size && d.hash == self.digest.kind.section_hash(header, payload)
        });
        if matches {
            return Ok(());
        }
        Err(corrupt!(
            "{} section {} at offset {} does not match the image signature",
            section.header.kind.name(),
            section.header.number.unwrap_or_default(),
            section.offset
        ))
    }
}

/// The system clock, in seconds since 1970-01-01 UTC (before it, 0).
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn trust_error(e: hoard_trust::Error) -> Error {
    Error::Corrupt(e.to_string())
}
