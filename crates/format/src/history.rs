//! The HISTORY section: which tool versions wrote or rewrote the image,
//! with which arguments and when (thrift `history`, compact encoded).

use crate::thrift::{self, Value};
use crate::Result;

/// The version of the tool that wrote a history entry (thrift
/// `dwarfs_version`). DwarFS's tools print `git_desc` always and
/// `git_branch` when `is_release` is false, so writers fill them in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolVersion {
    /// Major version number.
    pub major: u16,
    /// Minor version number.
    pub minor: u16,
    /// Patch version number.
    pub patch: u16,
    /// Whether this is a tagged release rather than a development build.
    pub is_release: bool,
    /// The source revision, if known.
    pub git_rev: Option<String>,
    /// The source branch, if known.
    pub git_branch: Option<String>,
    /// A description of the version, e.g. `v0.15.3` or `hoard v0.1.0`.
    pub git_desc: Option<String>,
}

impl ToolVersion {
    /// Fills in what DwarFS's tools print without checking that it is
    /// there: `git_desc` (`vMAJOR.MINOR.PATCH`) and, for a development
    /// build, `git_branch` (`unknown`). Older hoard versions left them out.
    pub fn complete(&mut self) {
        if self.git_desc.is_none() {
            self.git_desc = Some(format!("v{}.{}.{}", self.major, self.minor, self.patch));
        }
        if !self.is_release && self.git_branch.is_none() {
            self.git_branch = Some("unknown".into());
        }
    }
}

impl std::fmt::Display for ToolVersion {
    /// `git_desc` when present, else `major.minor.patch`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.git_desc {
            Some(d) => f.write_str(d),
            None => write!(f, "{}.{}.{}", self.major, self.minor, self.patch),
        }
    }
}

/// One write or rewrite of the image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The version of the tool.
    pub version: ToolVersion,
    /// The system the tool ran on.
    pub system_id: String,
    /// The compiler that built the tool.
    pub compiler_id: String,
    /// The tool's command line.
    pub arguments: Option<Vec<String>>,
    /// When, in seconds since the epoch.
    pub timestamp: Option<u64>,
    /// Versions of the libraries the tool used (a set: sorted, unique).
    pub library_versions: Option<Vec<String>>,
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_bytes)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

fn texts(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_list).map(|l| {
        l.iter()
            .map(|s| text(Some(s)).unwrap_or_default())
            .collect()
    })
}

fn tool_version(v: Option<&Value>) -> ToolVersion {
    let field = |id| v.and_then(|v| v.field(id));
    let num = |id| field(id).and_then(Value::as_int).unwrap_or(0) as u16;
    ToolVersion {
        major: num(1),
        minor: num(2),
        patch: num(3),
        is_release: field(4).and_then(Value::as_bool).unwrap_or(false),
        git_rev: text(field(5)),
        git_branch: text(field(6)),
        git_desc: text(field(7)),
    }
}

/// Decodes a HISTORY payload.
pub fn decode_history(payload: &[u8]) -> Result<Vec<HistoryEntry>> {
    let (v, _) = thrift::decode_struct(payload)?;
    let entries = v.field(1).and_then(Value::as_list).unwrap_or(&[]);
    Ok(entries
        .iter()
        .map(|e| HistoryEntry {
            version: tool_version(e.field(1)),
            system_id: text(e.field(2)).unwrap_or_default(),
            compiler_id: text(e.field(3)).unwrap_or_default(),
            arguments: texts(e.field(4)),
            timestamp: e.field(5).and_then(Value::as_int).map(|t| t as u64),
            library_versions: texts(e.field(6)),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_fills_only_what_is_missing() {
        let mut bare = ToolVersion {
            major: 0,
            minor: 1,
            ..Default::default()
        };
        bare.complete();
        assert_eq!(bare.git_desc.as_deref(), Some("v0.1.0"));
        assert_eq!(bare.git_branch.as_deref(), Some("unknown"));
        let mut release = ToolVersion {
            is_release: true,
            git_desc: Some("v0.15.3".into()),
            ..Default::default()
        };
        let before = release.clone();
        release.complete();
        assert_eq!(release, before);
    }
}
