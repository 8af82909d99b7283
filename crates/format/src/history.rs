//! The HISTORY section: which tool versions wrote or rewrote the image,
//! with which arguments and when (thrift `history`, compact encoded).

use crate::thrift::{self, Value};
use crate::Result;

/// One write or rewrite of the image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Tool version as `major.minor.patch`, plus the git description if any.
    pub version: String,
    /// The system the tool ran on.
    pub system_id: String,
    /// The compiler that built the tool.
    pub compiler_id: String,
    /// The tool's command line.
    pub arguments: Option<Vec<String>>,
    /// When, in seconds since the epoch.
    pub timestamp: Option<u64>,
    /// Versions of the libraries the tool used.
    pub library_versions: Option<Vec<String>>,
}

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_bytes)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

fn texts(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_list)
        .map(|l| l.iter().map(|s| text(Some(s))).collect())
}

/// Decodes a HISTORY payload.
pub fn decode_history(payload: &[u8]) -> Result<Vec<HistoryEntry>> {
    let (v, _) = thrift::decode_struct(payload)?;
    let entries = v.field(1).and_then(Value::as_list).unwrap_or(&[]);
    Ok(entries
        .iter()
        .map(|e| {
            let ver = e.field(1);
            let num = |id| {
                ver.and_then(|v| v.field(id))
                    .and_then(Value::as_int)
                    .unwrap_or(0)
            };
            let mut version = format!("{}.{}.{}", num(1), num(2), num(3));
            let desc = text(ver.and_then(|v| v.field(7)));
            if !desc.is_empty() {
                version = format!("{version} ({desc})");
            }
            HistoryEntry {
                version,
                system_id: text(e.field(2)),
                compiler_id: text(e.field(3)),
                arguments: texts(e.field(4)),
                timestamp: e.field(5).and_then(Value::as_int).map(|t| t as u64),
                library_versions: texts(e.field(6)),
            }
        })
        .collect())
}
