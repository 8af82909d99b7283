//! The thrift compact protocol, encoding a [`Value`] tree: the inverse of
//! [`crate::thrift::decode_struct`]. Unlike decoded values, integers here
//! carry their declared width, which readers check.

use std::collections::BTreeMap;

const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

/// A thrift value to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `i16`.
    I16(i16),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `string` or `binary`.
    Binary(Vec<u8>),
    /// `list`.
    List(Vec<Value>),
    /// `set`: like a list, but typed as a set, which readers check.
    Set(Vec<Value>),
    /// `map`.
    Map(Vec<(Value, Value)>),
    /// A struct: field id to value.
    Struct(BTreeMap<i16, Value>),
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The compact type id of a value (as a container element).
fn type_id(v: &Value) -> u8 {
    match v {
        Value::Bool(true) => BOOL_TRUE,
        Value::Bool(false) => BOOL_FALSE,
        Value::I16(_) => I16,
        Value::I32(_) => I32,
        Value::I64(_) => I64,
        Value::Binary(_) => BINARY,
        Value::List(_) => LIST,
        Value::Set(_) => SET,
        Value::Map(_) => MAP,
        Value::Struct(_) => STRUCT,
    }
}

/// Writes a value's body (no field header).
fn body(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => out.push(if *b { BOOL_TRUE } else { BOOL_FALSE }),
        Value::I16(i) => varint(out, zigzag(i64::from(*i))),
        Value::I32(i) => varint(out, zigzag(i64::from(*i))),
        Value::I64(i) => varint(out, zigzag(*i)),
        Value::Binary(b) => {
            varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::List(items) | Value::Set(items) => {
            // Booleans in containers are stored as type 1 = true.
            let elem = items.first().map_or(I64, |i| match type_id(i) {
                BOOL_FALSE => BOOL_TRUE,
                t => t,
            });
            if items.len() < 15 {
                out.push(((items.len() as u8) << 4) | elem);
            } else {
                out.push(0xf0 | elem);
                varint(out, items.len() as u64);
            }
            for i in items {
                body(out, i);
            }
        }
        Value::Map(entries) => {
            varint(out, entries.len() as u64);
            if let Some((k, v)) = entries.first() {
                let t = |x: &Value| match type_id(x) {
                    BOOL_FALSE => BOOL_TRUE,
                    t => t,
                };
                out.push((t(k) << 4) | t(v));
            }
            for (k, v) in entries {
                body(out, k);
                body(out, v);
            }
        }
        Value::Struct(fields) => {
            let mut last = 0i16;
            for (&id, v) in fields {
                let t = type_id(v);
                let delta = id.wrapping_sub(last);
                if (1..=15).contains(&delta) {
                    out.push(((delta as u8) << 4) | t);
                } else {
                    out.push(t);
                    varint(out, zigzag(i64::from(id)));
                }
                if !matches!(v, Value::Bool(_)) {
                    body(out, v);
                }
                last = id;
            }
            out.push(0);
        }
    }
}

/// Encodes a struct value in the compact protocol.
pub fn encode_struct(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    body(&mut out, v);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thrift::{decode_struct, Value as Decoded};

    /// What the decoder makes of a value.
    fn decoded(v: &Value) -> Decoded {
        match v {
            Value::Bool(b) => Decoded::Bool(*b),
            Value::I16(i) => Decoded::Int(i64::from(*i)),
            Value::I32(i) => Decoded::Int(i64::from(*i)),
            Value::I64(i) => Decoded::Int(*i),
            Value::Binary(b) => Decoded::Binary(b.clone()),
            Value::List(l) | Value::Set(l) => Decoded::List(l.iter().map(decoded).collect()),
            Value::Map(m) => {
                Decoded::Map(m.iter().map(|(k, v)| (decoded(k), decoded(v))).collect())
            }
            Value::Struct(s) => Decoded::Struct(s.iter().map(|(k, v)| (*k, decoded(v))).collect()),
        }
    }

    #[test]
    fn values_round_trip_through_the_decoder() {
        let inner = Value::Struct(BTreeMap::from([
            (1, Value::I16(-5)),
            (2, Value::Bool(false)),
            (40, Value::Binary(b"far field".to_vec())),
        ]));
        let v = Value::Struct(BTreeMap::from([
            (1, Value::Bool(true)),
            (
                2,
                Value::Map(vec![
                    (Value::I16(0), inner.clone()),
                    (Value::I16(7), inner.clone()),
                ]),
            ),
            (3, Value::I64(i64::MAX)),
            (8, Value::I32(-70_000)),
            (
                4,
                Value::List(
                    (0..20)
                        .map(|i| Value::Binary(vec![i; i as usize]))
                        .collect(),
                ),
            ),
            (5, Value::List(vec![])),
            (6, Value::Map(vec![])),
            (7, Value::List(vec![Value::Bool(true), Value::Bool(false)])),
            (9, Value::Set(vec![Value::Binary(b"a".to_vec())])),
        ]));
        let bytes = encode_struct(&v);
        let (back, used) = decode_struct(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(back, decoded(&v));
    }
}
