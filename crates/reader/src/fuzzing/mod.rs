//! Entry points shared by the fuzz targets (`fuzz/`) and the regression
//! tests that replay what they found, so both run the same code.

pub mod tampered;

use crate::image::{Image, ImageOffset};
use crate::source::Source;
use crate::{check, walk, Error, FileKind, Filesystem};
use hoard_format::metadata::Metadata;
use hoard_format::section::{self, Compression, HeaderLayout};

/// Block cache size used while fuzzing.
const CACHE_SIZE: usize = 16 << 20;
/// Most bytes [`decompress`] lets a payload decompress to.
const DECOMPRESS_LIMIT: usize = 16 << 20;

/// Opens `data` as an image (prefix found automatically) after rewriting
/// the hashes of its v2.2+ section headers, so that mutated inputs get past
/// the hash checks, then [`exercise`]s the file system.
pub fn open_image(data: &[u8]) -> crate::Result<()> {
    let mut bytes = data.to_vec();
    fix_section_hashes(&mut bytes);
    let image = Image::from_source(Source::Bytes(bytes), ImageOffset::Auto)?;
    let fs = Filesystem::from_image(image, CACHE_SIZE)?;
    exercise(&fs);
    Ok(())
}

/// Any bytes as public key lines and as a signature payload, then as an
/// image opened trusting a fixed key: its hashes rewritten as in
/// [`open_image`] and its signature section (found by its trailer at the
/// end), if one parses, signed again by that key, so that mutations reach
/// the checks after the signature; then [`exercise`]d.
pub fn signed_image(data: &[u8]) -> crate::Result<()> {
    for line in String::from_utf8_lossy(data).lines() {
        let _ = hoard_trust::PublicKey::parse_line(line);
    }
    let _ = hoard_trust::Signature::parse(data);
    let key = hoard_trust::SecretKey::from_seed(&[7; 32]);
    let mut bytes = data.to_vec();
    fix_section_hashes(&mut bytes);
    sign_again(&mut bytes, &key);
    let trusted = hoard_trust::TrustedKeys::from_keys(vec![key.public()]);
    let image = Image::from_source(Source::Bytes(bytes), ImageOffset::Auto)?
        .trusting(&trusted, &Default::default())?;
    let fs = Filesystem::from_image(image, CACHE_SIZE)?;
    exercise(&fs);
    Ok(())
}

/// The age identity the `encrypted_image` seeds are encrypted to (a test
/// key, made by `age-keygen` for them; its recipient is
/// age1ynf4jcuj6rjmtpxjcf6jyvfynetgjt9veh6gp0eegymwtckup95shc9p8n;
/// public in this source, so it protects nothing).
pub(crate) const FUZZ_IDENTITY: &str =
    "AGE-SECRET-KEY-1UT9RXW7HR42ZPVR47QVZ77HH3FWAQ62J8CSJTXHSL2S3GPUDEHTSJ0L50K";

/// Any bytes as the payload of a key section (parsed, its recipients
/// counted, unwrapped with a fixed age identity), then as an image opened
/// with that identity: its hashes rewritten as in [`open_image`], its
/// data key unwrapped, then [`exercise`]d (every read decrypts).
pub fn encrypted_image(data: &[u8]) -> crate::Result<()> {
    let mut identities = hoard_trust::encrypt::Identities::default();
    identities
        .add_text(FUZZ_IDENTITY)
        .expect("the fuzzing identity parses");
    if let Ok(section) = hoard_trust::encrypt::KeySection::parse(data) {
        let _ = section.wrapping().to_string();
        let _ = section.unwrap(&identities);
    }
    let mut bytes = data.to_vec();
    fix_section_hashes(&mut bytes);
    let image = Image::from_source(Source::Bytes(bytes), ImageOffset::Auto)?
        .unlocking(Some(&identities))?;
    let fs = Filesystem::from_image(image, CACHE_SIZE)?;
    exercise(&fs);
    Ok(())
}

/// Any bytes as the text of each kind of key file hoard reads, and as a
/// signature payload (its claims decoded): a secret key (hoard's or
/// OpenSSH's), each line as a public key and as a `--sign-expires` time,
/// an identity file (age or OpenSSH), a recipients file (age or SSH).
/// Errors are expected; only a panic, a hang or unbounded memory is a bug.
pub fn key_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = hoard_trust::SecretKey::parse(&text);
    for line in text.lines() {
        let _ = hoard_trust::PublicKey::parse_line(line);
        let _ = hoard_trust::claims::parse_time(line);
    }
    let _ = hoard_trust::encrypt::Identities::default().add_text(&text);
    let _ = hoard_trust::encrypt::Recipients::from_text(&text);
    if let Ok(signature) = hoard_trust::Signature::parse(data) {
        let _ = signature.claims.to_string();
        let _ = signature.claims.check(&Default::default(), 0);
    }
}

/// Signs the digest of the signature section that ends `bytes` again with
/// `key`, if there is one that parses.
fn sign_again(bytes: &mut [u8], key: &hoard_trust::SecretKey) {
    let end = bytes.len() as u64;
    let Some(start) = hoard_trust::signature::section_start(bytes, end) else {
        return;
    };
    let start = start as usize;
    let Some(raw) = bytes.get(start..start + section::V2_HEADER_SIZE) else {
        return;
    };
    let (Ok(version), number) = (
        section::parse_version(raw),
        u32::from_le_bytes([raw[48], raw[49], raw[50], raw[51]]),
    ) else {
        return;
    };
    let Ok(signature) = hoard_trust::Signature::parse(&bytes[start + section::V2_HEADER_SIZE..])
    else {
        return;
    };
    let signed = hoard_trust::Signature::sign(signature.digest, signature.claims, key)
        .section(number, version);
    if signed.len() == bytes.len() - start {
        bytes[start..].copy_from_slice(&signed);
    }
}

/// Recomputes the XXH3-64 and SHA-512/256 hashes of each v2 section header
/// found by walking the sections from the start of the image, keeping every
/// other header field. Stops at the first header that does not parse.
fn fix_section_hashes(bytes: &mut [u8]) {
    let Some(start) = section::find_image_offset_in(bytes) else {
        return;
    };
    let mut pos = start as usize;
    while let Some(raw) = bytes.get(pos..pos + section::V2_HEADER_SIZE) {
        let Ok(version) = section::parse_version(raw) else {
            return;
        };
        if version.layout() != HeaderLayout::V2 {
            return;
        }
        let Ok(header) = section::parse_header(raw, version) else {
            return;
        };
        let payload_start = pos + section::V2_HEADER_SIZE;
        let Some(end) = usize::try_from(header.length)
            .ok()
            .and_then(|l| payload_start.checked_add(l))
            .filter(|&e| e <= bytes.len())
        else {
            return;
        };
        let mut fixed = section::encode_header_v2(
            header.number.unwrap_or(0),
            header.kind,
            header.compression,
            &bytes[payload_start..end],
        );
        // The version bytes are not covered by the hashes: keep them.
        fixed[6..8].copy_from_slice(&bytes[pos + 6..pos + 8]);
        bytes[pos..payload_start].copy_from_slice(&fixed);
        pos = end;
    }
}

/// Runs everything a reader of the file system can do: a delta layer's
/// list of base images, then for every inode its extended attributes,
/// stat and the kind-specific reads (readdir and lookup of each entry,
/// readlink, a few ranges of a file), a lookup of each walked path, then
/// reading every file whole and a full check. Errors are expected and ignored; only a
/// panic, a hang or unbounded memory use is a bug.
pub fn exercise(fs: &Filesystem) {
    // A delta layer's list of its bases (read alone, its chunks in them
    // fail to read).
    let _ = fs.dependencies();
    for ino in 0..fs.layout().count {
        let _ = fs.xattrs(ino);
        let Ok(stat) = fs.stat(ino) else { continue };
        match stat.kind {
            FileKind::Directory => {
                let _ = fs.parent(ino);
                for entry in fs.readdir(ino).unwrap_or_default() {
                    let _ = fs.lookup(ino, &entry.name);
                }
            }
            FileKind::Symlink => {
                let _ = fs.readlink(ino);
            }
            FileKind::Regular => {
                let mut buf = [0u8; 4096];
                for offset in [0, stat.size / 2, stat.size.saturating_sub(100), stat.size] {
                    let _ = fs.read(ino, offset, &mut buf);
                }
            }
            _ => {}
        }
    }
    if let Ok(nodes) = walk::walk(fs, fs.root(), b"") {
        for node in nodes {
            if let Ok(path) = std::str::from_utf8(&node.path) {
                let _ = fs.lookup_path(path);
            }
        }
    }
    // Whole files and blocks last, so that the reads above find blocks
    // partly decompressed.
    for ino in fs.layout().files..fs.layout().devices {
        let _ = fs.read_all(ino, |_| Ok(()));
    }
    check::check_filesystem(fs, true);
}

/// Splits `data` into a schema (its length in the first two bytes, little
/// endian) and a metadata payload, and decodes them.
pub fn decode_metadata(data: &[u8]) -> crate::Result<()> {
    let (len, rest) = data
        .split_at_checked(2)
        .ok_or_else(|| Error::Corrupt("input too short".into()))?;
    let len = usize::from(u16::from_le_bytes([len[0], len[1]])).min(rest.len());
    let (schema, meta) = rest.split_at(len);
    Metadata::decode(schema, meta)?;
    Ok(())
}

/// Decompresses `data[1..]` with the algorithm whose id is `data[0]`, as a
/// block section payload, allowing at most 16 MiB of output: whole, then
/// a piece at a time.
pub fn decompress(data: &[u8]) -> crate::Result<()> {
    let (&algo, payload) = data
        .split_first()
        .ok_or_else(|| Error::Corrupt("input too short".into()))?;
    let algo = Compression(algo.into());
    let whole = hoard_codec::decompress(algo, payload, DECOMPRESS_LIMIT);
    let mut decoder = hoard_codec::partial_decoder(algo, payload, DECOMPRESS_LIMIT)
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    let mut out = vec![0u8; decoder.size()];
    let mut at = 0;
    loop {
        let end = (at + 4096).min(out.len());
        decoder
            .decode(&mut out[at..end])
            .map_err(|e| Error::Corrupt(e.to_string()))?;
        at = end;
        if at == out.len() {
            break;
        }
    }
    decoder
        .decode(&mut [])
        .map_err(|e| Error::Corrupt(e.to_string()))?;
    // Both ways agree on every payload they accept.
    assert!(whole.is_ok_and(|w| w == out), "partial decoding differs");
    Ok(())
}
