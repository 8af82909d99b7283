//! The HISTORY payload: the inverse of [`crate::history::decode_history`].

use super::thrift::{encode_struct, Value};
use crate::history::HistoryEntry;
use std::collections::BTreeMap;

/// Splits `major.minor.patch (description)` into its parts.
fn version(v: &str) -> Value {
    let (numbers, desc) = match v.split_once(" (") {
        Some((n, d)) => (n, Some(d.trim_end_matches(')'))),
        None => (v, None),
    };
    let mut parts = numbers
        .split('.')
        .map(|p| p.parse::<u16>().unwrap_or(0) as i16);
    let mut fields = BTreeMap::from([
        (1, Value::I16(parts.next().unwrap_or(0))),
        (2, Value::I16(parts.next().unwrap_or(0))),
        (3, Value::I16(parts.next().unwrap_or(0))),
        (4, Value::Bool(desc.is_none())),
    ]);
    if let Some(d) = desc {
        fields.insert(7, Value::Binary(d.as_bytes().to_vec()));
    }
    Value::Struct(fields)
}

fn strings(list: &[String]) -> Value {
    Value::List(
        list.iter()
            .map(|s| Value::Binary(s.as_bytes().to_vec()))
            .collect(),
    )
}

/// Encodes history entries as a HISTORY section payload.
pub fn encode_history(entries: &[HistoryEntry]) -> Vec<u8> {
    let list = entries
        .iter()
        .map(|e| {
            let mut f = BTreeMap::from([
                (1, version(&e.version)),
                (2, Value::Binary(e.system_id.as_bytes().to_vec())),
                (3, Value::Binary(e.compiler_id.as_bytes().to_vec())),
            ]);
            if let Some(a) = &e.arguments {
                f.insert(4, strings(a));
            }
            if let Some(t) = e.timestamp {
                f.insert(5, Value::I64(t as i64));
            }
            if let Some(l) = &e.library_versions {
                let mut sorted = l.clone();
                sorted.sort();
                sorted.dedup();
                f.insert(6, strings(&sorted));
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
                version: "0.15.3 (v0.15.3)".into(),
                system_id: "Linux [x86_64]".into(),
                compiler_id: "GNU 12.2.0".into(),
                arguments: Some(vec!["mkdwarfs".into(), "-i".into(), "x".into()]),
                timestamp: Some(1_700_000_000),
                library_versions: Some(vec!["zstd-1.5.4".into()]),
            },
            HistoryEntry {
                version: "0.1.0".into(),
                system_id: "linux [x86_64]".into(),
                compiler_id: "rustc".into(),
                arguments: None,
                timestamp: None,
                library_versions: None,
            },
        ];
        assert_eq!(decode_history(&encode_history(&entries)).unwrap(), entries);
    }
}
