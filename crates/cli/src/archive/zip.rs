//! zip through the `zip` crate, streamed (sizes and CRCs in data
//! descriptors after each file's data, so no seeking): file contents
//! deflated (or stored, with `--format-options`), Unix modes, the DOS time and the extended timestamp field
//! (whole seconds, UTC) that `unzip` restores. zip has no owners, devices,
//! fifos, sockets or hard links: each link of a file is a copy.

use super::options::ZipCompression;
use super::{ArchiveWriter, Entry};
use anyhow::{anyhow, Context, Result};
use hoard_reader::FileKind;
use std::io::Write;
use zip::write::{FullFileOptions, SimpleFileOptions, StreamWriter};
use zip::{CompressionMethod, DateTime, ZipWriter};

/// Writes zip entries.
pub struct ZipStream<'w> {
    zip: Option<ZipWriter<StreamWriter<&'w mut dyn Write>>>,
    compression: ZipCompression,
}

impl<'w> ZipStream<'w> {
    /// A writer of a zip archive to `out`, file contents compressed as
    /// `compression` says.
    pub fn new(out: &'w mut dyn Write, compression: ZipCompression) -> Self {
        ZipStream {
            zip: Some(ZipWriter::new_stream(out)),
            compression,
        }
    }
}

/// Year, month, day, hour, minute, second (UTC) of `sec` seconds since
/// the epoch.
fn civil(sec: i64) -> (i64, u8, u8, u8, u8, u8) {
    let (year, month, day) = crate::cmd::time::civil_from_days(sec.div_euclid(86_400));
    let rest = sec.rem_euclid(86_400);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    (year, month as u8, day as u8, h as u8, m as u8, s as u8)
}

/// The DOS time of `sec` (1980-01-01 when it cannot hold it).
fn dos_time(sec: i64) -> DateTime {
    let (y, mo, d, h, mi, s) = civil(sec);
    u16::try_from(y)
        .ok()
        .and_then(|y| DateTime::from_date_and_time(y, mo, d, h, mi, s).ok())
        .unwrap_or_default()
}

fn options(
    e: &Entry<'_>,
    compression: ZipCompression,
) -> Result<FullFileOptions<'static, 'static>> {
    let st = &e.stat;
    let (method, level) = match (st.kind, compression) {
        (FileKind::Regular, ZipCompression::Deflate(level)) => {
            (CompressionMethod::Deflated, level.map(i64::from))
        }
        _ => (CompressionMethod::Stored, None),
    };
    let mtime = u32::try_from(st.mtime.sec.max(0)).unwrap_or(u32::MAX);
    Ok(SimpleFileOptions::default()
        .compression_method(method)
        .compression_level(level)
        .unix_permissions(st.mode & 0o7777)
        .last_modified_time(dos_time(st.mtime.sec))
        .large_file(st.size >= u64::from(u32::MAX))
        .with_extended_timestamp(Some(mtime), None, None)?)
}

impl ArchiveWriter for ZipStream<'_> {
    fn entry(&mut self, e: &Entry<'_>) -> Result<()> {
        if e.path.is_empty() {
            // zip cannot name the root.
            return Ok(());
        }
        let zip = self
            .zip
            .as_mut()
            .ok_or_else(|| anyhow!("zip archive already finished"))?;
        let what = || format!("zip entry '{}'", String::from_utf8_lossy(e.path));
        let name = std::str::from_utf8(e.path)
            .map_err(|_| anyhow!("zip names must be UTF-8"))
            .with_context(what)?;
        let options = options(e, self.compression).with_context(what)?;
        match (e.stat.kind, e.target) {
            (FileKind::Directory, _) => zip.add_directory(format!("{name}/"), options),
            (FileKind::Symlink, Some(target)) => {
                let target = String::from_utf8_lossy(target);
                zip.add_symlink(name, target, options)
            }
            _ => {
                zip.start_file(name, options).with_context(what)?;
                std::io::copy(&mut e.contents(), zip).with_context(what)?;
                Ok(())
            }
        }
        .with_context(what)
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(zip) = self.zip.take() {
            zip.finish()?.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil(1_699_999_200), (2023, 11, 14, 22, 0, 0));
        assert_eq!(civil(-1), (1969, 12, 31, 23, 59, 59));
    }
}
