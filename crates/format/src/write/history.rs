//! The HISTORY payload: the inverse of [`crate::history::decode_history`].

use super::thrift::{encode_struct, Value};
use crate::history::{HistoryEntry, ToolVersion};
use std::collections::BTreeMap;

fn binary(s: &str) -> Value {
    Value::Binary(s.as_bytes().to_vec())
}

fn version(v: &ToolVersion) -> Value {
    let mut fields = BTreeMap::from([
        (1, Value::I16(v.major as i16)),
        (2, Value::I16(v.minor as i16)),
        (3, Value::I16(v.patch as i16)),
        (4, Value::Bool(v.is_release)),
    ]);
    for (id, text) in [(5, &v.git_rev), (6, &v.git_branch), (7, &v.git_desc)] {
        if let Some(t) = text {
            fields.insert(id, binary(t));
        }
    }
    Value::Struct(fields)
}

/// Encodes history entries as a HISTORY section payload. Library versions
/// are a thrift set: written sorted and without duplicates.
pub fn encode_history(entries: &[HistoryEntry]) -> Vec<u8> {
    let list = entries
        .iter()
        .map(|e| {
            let mut f = BTreeMap::from([
                (1, version(&e.version)),
                (2, binary(&e.system_id)),
                (3, binary(&e.compiler_id)),
            ]);
            if let Some(a) = &e.arguments {
                f.insert(4, Value::List(a.iter().map(|s| binary(s)).collect()));
            }
            if let Some(t) = e.timestamp {
                f.insert(5, Value::I64(t as i64));
            }
            if let Some(l) = &e.library_versions {
                let mut sorted = l.clone();
                sorted.sort();
                sorted.dedup();
                f.insert(6, Value::Set(sorted.iter().map(|s| binary(s)).collect()));
            }
            Value::Struct(f)
        })
        .collect();
    encode_struct(&Value::Struct(BTreeMap::from([(1, Value::List(list))])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::decode_history;

    #[test]
    fn history_round_trips() {
        let entries = vec![
            HistoryEntry {
                version: ToolVersion {
                    major: 0,
                    minor: 15,
                    patch: 3,
                    is_release: true,
                    git_rev: Some("59e391fcda".into()),
                    git_branch: Some("HEAD".into()),
                    git_desc: Some("v0.15.3".into()),
                },
                system_id: "Linux [x86_64]".into(),
                compiler_id: "GNU 12.2.0".into(),
                arguments: Some(vec!["mkdwarfs".into(), "-i".into(), "x".into()]),
                timestamp: Some(1_700_000_000),
                library_versions: Some(vec!["lz4-1.9.4".into(), "zstd-1.5.4".into()]),
            },
            HistoryEntry {
                version: ToolVersion {
                    minor: 1,
                    ..Default::default()
                },
                system_id: "Linux [x86_64]".into(),
                compiler_id: "rustc".into(),
                arguments: None,
                timestamp: None,
                library_versions: None,
            },
        ];
        assert_eq!(decode_history(&encode_history(&entries)).unwrap(), entries);
    }

    #[test]
    fn library_versions_are_a_thrift_set() {
        let entry = HistoryEntry {
            library_versions: Some(vec!["b-1".into(), "a-2".into(), "b-1".into()]),
            ..Default::default()
        };
        let bytes = encode_history(&[entry]);
        let back = decode_history(&bytes).unwrap();
        assert_eq!(
            back[0].library_versions,
            Some(vec!["a-2".to_string(), "b-1".to_string()])
        );
        // Field 6 header (delta 3 after field 3, type 10 = set).
        assert!(bytes.windows(2).any(|w| w == [0x3a, 0x28]));
    }
}
