//! The thrift compact protocol, decoded into a generic value tree.
//!
//! DwarFS stores the frozen2 schema, the HISTORY section and the headers of
//! FLAC and RICEPP blocks this way. Decoding is bounded: nesting depth is
//! limited and every container count is checked against the bytes left, so
//! hostile input cannot make it allocate or recurse without bound.

use crate::{corrupt, Result};
use std::collections::BTreeMap;

/// Deepest nesting of containers accepted.
const MAX_DEPTH: usize = 32;

/// A decoded thrift value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `byte`, `i16`, `i32` or `i64`.
    Int(i64),
    /// `double`.
    Double(f64),
    /// `string` or `binary`.
    Binary(Vec<u8>),
    /// `list` or `set`.
    List(Vec<Value>),
    /// `map`, in stored order.
    Map(Vec<(Value, Value)>),
    /// A struct: field id to value.
    Struct(BTreeMap<i16, Value>),
}

impl Value {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The bool, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The bytes, if this is a string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(b) => Some(b),
            _ => None,
        }
    }

    /// The string, if this is valid UTF-8 text.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// The elements, if this is a list or set.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// Field `id`, if this is a struct that has it.
    pub fn field(&self, id: i16) -> Option<&Value> {
        match self {
            Value::Struct(s) => s.get(&id),
            _ => None,
        }
    }
}

/// Decodes one struct at the start of `bytes`; returns it and the number of
/// bytes it took.
pub fn decode_struct(bytes: &[u8]) -> Result<(Value, usize)> {
    let mut r = Reader { bytes, pos: 0 };
    let v = r.read_struct(0)?;
    Ok((v, r.pos))
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

// Compact protocol type ids.
const T_BOOL_TRUE: u8 = 1;
const T_BOOL_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| corrupt!("thrift: unexpected end of data"))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(corrupt!("thrift: varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt!("thrift: varint too long"))
    }

    fn zigzag(&mut self) -> Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A container element count, which can't exceed the bytes left (every
    /// element takes at least one byte).
    fn count(&mut self, n: u64) -> Result<usize> {
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            return Err(corrupt!(
                "thrift: container of {n} elements in {left} bytes"
            ));
        }
        Ok(n as usize)
    }

    fn read_value(&mut self, ty: u8, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(corrupt!("thrift: nesting too deep"));
        }
        Ok(match ty {
            T_BOOL_TRUE => Value::Bool(true),
            T_BOOL_FALSE => Value::Bool(false),
            T_BYTE => Value::Int(i64::from(self.byte()? as i8)),
            T_I16 | T_I32 | T_I64 => Value::Int(self.zigzag()?),
            T_DOUBLE => {
                let end = self.pos + 8;
                let b = self
                    .bytes
                    .get(self.pos..end)
                    .ok_or_else(|| corrupt!("thrift: truncated double"))?;
                self.pos = end;
                Value::Double(f64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            T_BINARY => {
                let len = self.varint()?;
                let len = self.count(len)?;
                let b = self.bytes[self.pos..self.pos + len].to_vec();
                self.pos += len;
                Value::Binary(b)
            }
            T_LIST | T_SET => {
                let h = self.byte()?;
                let elem = h & 0x0f;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                let n = self.count(n)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(if elem == T_BOOL_TRUE || elem == T_BOOL_FALSE {
                        Value::Bool(self.byte()? == 1)
                    } else {
                        self.read_value(elem, depth + 1)?
                    });
                }
                Value::List(v)
            }
            T_MAP => {
                let n = self.varint()?;
                let n = self.count(n)?;
                let mut m = Vec::with_capacity(n);
                if n > 0 {
                    let kv = self.byte()?;
                    let (kt, vt) = (kv >> 4, kv & 0x0f);
                    for _ in 0..n {
                        let k = self.read_element(kt, depth)?;
                        let v = self.read_element(vt, depth)?;
                        m.push((k, v));
                    }
                }
                Value::Map(m)
            }
            T_STRUCT => self.read_struct(depth + 1)?,
            t => return Err(corrupt!("thrift: unknown type {t}")),
        })
    }

    /// A container element: bools are a byte each inside containers.
    fn read_element(&mut self, ty: u8, depth: usize) -> Result<Value> {
        if ty == T_BOOL_TRUE || ty == T_BOOL_FALSE {
            Ok(Value::Bool(self.byte()? == 1))
        } else {
            self.read_value(ty, depth + 1)
        }
    }

    fn read_struct(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(corrupt!("thrift: nesting too deep"));
        }
        let mut fields = BTreeMap::new();
        let mut last_id: i16 = 0;
        loop {
            let h = self.byte()?;
            if h == 0 {
                return Ok(Value::Struct(fields));
            }
            let ty = h & 0x0f;
            let id = match h >> 4 {
                0 => i16::try_from(self.zigzag()?)
                    .map_err(|_| corrupt!("thrift: field id out of range"))?,
                delta => last_id
                    .checked_add(i16::from(delta))
                    .ok_or_else(|| corrupt!("thrift: field id out of range"))?,
            };
            last_id = id;
            fields.insert(id, self.read_value(ty, depth)?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_fields_lists_and_maps() {
        // struct { 1: i32 = -2, 2: string "hi", 4: list<i16> [1, 2], 5: map<i16,bool> {3: true}, 6: true }
        let bytes = [
            0x15, 0x03, // field 1, i32, zigzag(-2) = 3
            0x18, 0x02, b'h', b'i', // field 2, binary
            0x29, 0x24, 0x02, 0x04, // field 4 (delta 2), list of 2 i16: 1, 2
            0x1b, 0x01, 0x41, 0x06, 0x01, // field 5, map of 1, i16 -> bool
            0x11, // field 6, bool true
            0x00,
        ];
        let (v, used) = decode_struct(&bytes).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(v.field(1).unwrap().as_int(), Some(-2));
        assert_eq!(v.field(2).unwrap().as_str(), Some("hi"));
        assert_eq!(
            v.field(4).unwrap().as_list().unwrap(),
            &[Value::Int(1), Value::Int(2)]
        );
        assert_eq!(
            v.field(5).unwrap().as_map().unwrap(),
            &[(Value::Int(3), Value::Bool(true))]
        );
        assert_eq!(v.field(6).unwrap().as_bool(), Some(true));
    }

    #[test]
    fn refuses_truncated_and_oversized_input() {
        assert!(decode_struct(&[0x15]).is_err());
        assert!(decode_struct(&[0x18, 0x7f, b'a']).is_err());
        assert!(decode_struct(&[0x19, 0xf5, 0xff, 0xff, 0xff, 0x0f]).is_err());
        let deep = vec![0x1c; 1000];
        assert!(decode_struct(&deep).is_err());
    }
}
