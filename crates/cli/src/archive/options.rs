//! `--format-options`: options for the archive writer, written as
//! libarchive takes them (archive_write_set_options(3), which DwarFS's
//! dwarfsextract passes them to): comma-separated `option=value`,
//! `option` (on), `!option` (off), each optionally prefixed `format:`.
//! Only the options hoard's writers honour are accepted; any other is an
//! error naming it.

use super::Format;
use anyhow::{bail, Result};

/// How a zip archive stores file contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZipCompression {
    /// Deflated, at a level from 1 (fastest) to 9 (smallest); none: zlib's
    /// default (6).
    Deflate(Option<u8>),
    /// Stored as they are.
    Store,
}

/// The settings `--format-options` may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatOptions {
    /// zip: `compression=store|deflate`, `compression-level=0..9` (0
    /// stores, other levels deflate, as in libarchive); the last one given
    /// decides.
    pub zip: ZipCompression,
}

impl Default for FormatOptions {
    fn default() -> Self {
        FormatOptions {
            zip: ZipCompression::Deflate(None),
        }
    }
}

/// The names libarchive gives `format` as an option module.
fn module_names(format: Format) -> &'static [&'static str] {
    match format {
        Format::Tar => &["pax", "tar", "ustar", "posix"],
        Format::Gnutar => &["gnutar"],
        Format::Cpio => &["newc", "cpio"],
        Format::Zip => &["zip"],
    }
}

/// What each format takes, for the error message.
fn accepted(format: Format) -> &'static str {
    match format {
        Format::Zip => "compression=store|deflate and compression-level=0..9",
        Format::Tar => "xattrheader=SCHILY (the extended attribute records it writes)",
        Format::Gnutar | Format::Cpio => "none",
    }
}

impl FormatOptions {
    /// Parses `text` for an archive in `format`.
    pub fn parse(text: &str, format: Format) -> Result<Self> {
        let mut options = FormatOptions::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (module, rest) = match item.split_once(':') {
                Some((m, rest)) => (Some(m), rest),
                None => (None, item),
            };
            if let Some(m) = module {
                if !module_names(format).contains(&m) {
                    bail!(
                        "--format-options: '{item}' is for '{m}', not the {} output \
                         (its module names: {})",
                        module_names(format)[0],
                        module_names(format).join(", ")
                    );
                }
            }
            let (name, value) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (rest, None),
            };
            let zip = &mut options.zip;
            match (format, name, value) {
                (Format::Zip, "compression", Some("store")) => *zip = ZipCompression::Store,
                (Format::Zip, "compression", Some("deflate")) => {
                    if *zip == ZipCompression::Store {
                        *zip = ZipCompression::Deflate(None);
                    }
                }
                (Format::Zip, "compression-level", Some(v))
                    if v.len() == 1 && v.as_bytes()[0].is_ascii_digit() =>
                {
                    *zip = match v.as_bytes()[0] - b'0' {
                        0 => ZipCompression::Store,
                        level => ZipCompression::Deflate(Some(level)),
                    };
                }
                (Format::Tar, "xattrheader", Some(v)) if v.eq_ignore_ascii_case("SCHILY") => {}
                _ => bail!(
                    "--format-options: unsupported option '{item}' for {} output \
                     (accepted: {})",
                    module_names(format)[0],
                    accepted(format)
                ),
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_options_set_the_compression() {
        let zip = |s: &str| FormatOptions::parse(s, Format::Zip).map(|o| o.zip);
        assert_eq!(zip("").unwrap(), ZipCompression::Deflate(None));
        assert_eq!(zip("compression=store").unwrap(), ZipCompression::Store);
        assert_eq!(
            zip("zip:compression-level=0").unwrap(),
            ZipCompression::Store
        );
        assert_eq!(
            zip("compression=deflate, compression-level=9").unwrap(),
            ZipCompression::Deflate(Some(9))
        );
        assert_eq!(
            zip("compression=store,compression=deflate").unwrap(),
            ZipCompression::Deflate(None)
        );
        for bad in [
            "compression=bzip2",
            "compression-level=10",
            "zip64",
            "pax:x=1",
        ] {
            let e = zip(bad).unwrap_err().to_string();
            assert!(e.starts_with("--format-options: "), "{e}");
        }
    }

    #[test]
    fn other_formats_take_what_they_write() {
        assert!(FormatOptions::parse("pax:xattrheader=SCHILY", Format::Tar).is_ok());
        let e = FormatOptions::parse("xattrheader=LIBARCHIVE", Format::Tar).unwrap_err();
        assert!(e.to_string().contains("xattrheader=SCHILY"), "{e}");
        let e = FormatOptions::parse("compression=store", Format::Cpio).unwrap_err();
        assert!(e.to_string().contains("accepted: none"), "{e}");
    }
}
