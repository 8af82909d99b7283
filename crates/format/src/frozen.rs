//! Frozen2: fbthrift's bit-packed layout, which DwarFS uses for its metadata.
//!
//! The METADATA_V2_SCHEMA section describes, per layout, how many bits a
//! value takes and at which offsets its fields sit (non-negative offsets in
//! bytes, negative ones in bits). Values are read at a position made of a
//! byte "storage start" and a bit offset from it:
//!
//! * an integer or bool is `bits` bits, least significant first;
//! * a struct's field sits at the struct's position plus the field offset;
//! * a list, set, map or string has fields 1 (`distance`) and 2 (`count`):
//!   its items start at byte `storage start + distance`, item `i` at bit
//!   `i × item bits` from there (field 3 is the item layout; map items are
//!   pairs with fields 1 and 2);
//! * an optional has fields 1 (is set) and 2 (the value);
//! * a field missing from a layout holds the default (zero, empty, unset).

use crate::thrift::{self, Value};
use crate::{corrupt, Result};
use std::collections::HashMap;
use std::ops::Range;

/// How a layout stores its value.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Bits per value.
    pub bits: u32,
    /// Fields by thrift field id: (layout id, offset in bits).
    pub fields: HashMap<i16, (i16, u32)>,
}

/// A decoded frozen2 schema.
#[derive(Debug, Clone)]
pub struct Schema {
    layouts: HashMap<i16, Layout>,
    root: i16,
}

impl Schema {
    /// Decodes a METADATA_V2_SCHEMA payload.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (v, _) = thrift::decode_struct(bytes)?;
        let version = v.field(4).and_then(Value::as_int).unwrap_or(0);
        if version != 1 {
            return Err(corrupt!("unsupported frozen schema version {version}"));
        }
        let root = int_field(&v, 3)? as i16;
        let mut layouts = HashMap::new();
        for (k, l) in v
            .field(2)
            .and_then(Value::as_map)
            .ok_or_else(|| corrupt!("schema has no layouts"))?
        {
            let id = k
                .as_int()
                .ok_or_else(|| corrupt!("schema layout id is not an integer"))?
                as i16;
            let bits = l.field(2).and_then(Value::as_int).unwrap_or(0);
            if !(0..=i64::from(u16::MAX)).contains(&bits) {
                return Err(corrupt!("schema layout {id}: invalid bit count {bits}"));
            }
            let mut fields = HashMap::new();
            for (fk, f) in l.field(3).and_then(Value::as_map).unwrap_or(&[]) {
                let fid = fk
                    .as_int()
                    .ok_or_else(|| corrupt!("schema field id is not an integer"))?
                    as i16;
                let layout = int_field(f, 1)? as i16;
                let offset = f.field(2).and_then(Value::as_int).unwrap_or(0);
                let offset_bits = if offset >= 0 { offset * 8 } else { -offset };
                if offset_bits > i64::from(u16::MAX) * 8 {
                    return Err(corrupt!(
                        "schema layout {id}: field {fid} offset {offset} out of range"
                    ));
                }
                fields.insert(fid, (layout, offset_bits as u32));
            }
            layouts.insert(
                id,
                Layout {
                    bits: bits as u32,
                    fields,
                },
            );
        }
        for (id, l) in &layouts {
            if l.fields.is_empty() && l.bits > 64 {
                return Err(corrupt!("schema layout {id}: a {}-bit integer", l.bits));
            }
            if let Some((f, _)) = l
                .fields
                .iter()
                .find(|(_, (lid, _))| !layouts.contains_key(lid))
            {
                return Err(corrupt!(
                    "schema layout {id}: field {f} refers to a missing layout"
                ));
            }
        }
        if !layouts.contains_key(&root) {
            return Err(corrupt!("schema root layout {root} is missing"));
        }
        Ok(Schema { layouts, root })
    }

    /// A view of the root value of `data`.
    pub fn root<'a>(&'a self, data: &'a [u8]) -> View<'a> {
        View {
            schema: self,
            data,
            layout: self.layouts.get(&self.root),
            storage: 0,
            bit: 0,
        }
    }

    /// Every layout of the schema, in no particular order.
    pub fn layouts(&self) -> impl Iterator<Item = &Layout> {
        self.layouts.values()
    }
}

fn int_field(v: &Value, id: i16) -> Result<i64> {
    v.field(id)
        .and_then(Value::as_int)
        .ok_or_else(|| corrupt!("schema: missing integer field {id}"))
}

/// A value inside frozen data: a layout at a position.
#[derive(Clone, Copy)]
pub struct View<'a> {
    schema: &'a Schema,
    data: &'a [u8],
    layout: Option<&'a Layout>,
    storage: u64,
    bit: u64,
}

impl<'a> View<'a> {
    /// The view of field `id` (an absent field reads as the default).
    pub fn field(&self, id: i16) -> View<'a> {
        let found = self.layout.and_then(|l| l.fields.get(&id));
        View {
            layout: found.and_then(|(lid, _)| self.schema.layouts.get(lid)),
            bit: self.bit + found.map_or(0, |(_, off)| u64::from(*off)),
            ..*self
        }
    }

    /// Whether the layout stores anything.
    pub fn is_present(&self) -> bool {
        self.layout.is_some()
    }

    /// Reads an unsigned integer (or bool) of up to 64 bits.
    pub fn uint(&self) -> Result<u64> {
        let Some(layout) = self.layout else {
            return Ok(0);
        };
        if !layout.fields.is_empty() {
            return Err(corrupt!("metadata: expected an integer, found a structure"));
        }
        let bits = layout.bits;
        if bits == 0 {
            return Ok(0);
        }
        let start = self
            .storage
            .checked_mul(8)
            .and_then(|s| s.checked_add(self.bit))
            .ok_or_else(|| corrupt!("metadata: position overflows"))?;
        let end = start + u64::from(bits);
        if end > self.data.len() as u64 * 8 {
            return Err(corrupt!(
                "metadata: value at bit {start} lies past the end ({} bytes)",
                self.data.len()
            ));
        }
        let mut v = 0u64;
        let mut got = 0u32;
        let mut pos = start;
        while got < bits {
            let byte = self.data[(pos / 8) as usize];
            let shift = (pos % 8) as u32;
            let take = (8 - shift).min(bits - got);
            let part = (u64::from(byte) >> shift) & ((1u64 << take) - 1);
            v |= part << got;
            got += take;
            pos += u64::from(take);
        }
        Ok(v)
    }

    /// Reads an integer that must fit in 32 bits.
    pub fn u32(&self) -> Result<u32> {
        let v = self.uint()?;
        u32::try_from(v).map_err(|_| corrupt!("metadata: value {v} does not fit in 32 bits"))
    }

    /// Reads a bool.
    pub fn bool(&self) -> Result<bool> {
        Ok(self.uint()? != 0)
    }

    /// Reads an optional: `None` when unset.
    pub fn optional(&self) -> Result<Option<View<'a>>> {
        if !self.is_present() || !self.field(1).bool()? {
            return Ok(None);
        }
        Ok(Some(self.field(2)))
    }

    /// Reads a list, set, map or string header.
    pub fn list(&self) -> Result<List<'a>> {
        if !self.is_present() {
            return Ok(List {
                item: View {
                    layout: None,
                    ..*self
                },
                count: 0,
                stride: 0,
            });
        }
        let distance = self.field(1).uint()?;
        let count = self.field(2).uint()?;
        let item = self.field(3);
        let storage = self
            .storage
            .checked_add(distance)
            .ok_or_else(|| corrupt!("metadata: list position overflows"))?;
        let stride = u64::from(item.layout.map_or(0, |l| l.bits));
        if count > 0 {
            let end_bits = count
                .checked_mul(stride)
                .and_then(|b| b.checked_add(storage.checked_mul(8)?))
                .ok_or_else(|| corrupt!("metadata: list size overflows"))?;
            if end_bits > self.data.len() as u64 * 8 {
                return Err(corrupt!(
                    "metadata: list of {count} items at byte {storage} lies past the end ({} bytes)",
                    self.data.len()
                ));
            }
        }
        Ok(List {
            item: View {
                storage,
                bit: 0,
                ..item
            },
            count,
            stride,
        })
    }

    /// Reads a string's bytes.
    pub fn bytes(&self) -> Result<&'a [u8]> {
        let range = self.byte_range()?;
        Ok(&self.data[range])
    }

    /// Where a string's bytes lie in the data (checked to be inside it).
    pub fn byte_range(&self) -> Result<Range<usize>> {
        if !self.is_present() {
            return Ok(0..0);
        }
        let distance = self.field(1).uint()?;
        let count = self.field(2).uint()?;
        let start = self.storage.checked_add(distance);
        let end = start.and_then(|s| s.checked_add(count));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() as u64 => Ok(s as usize..e as usize),
            _ => Err(corrupt!(
                "metadata: string of {count} bytes at {distance} past byte {} lies outside the data",
                self.storage
            )),
        }
    }
}

/// Where an integer lies in each item of a list: its bit offset in the
/// item and its width. A field the schema leaves out reads as zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntField {
    offset: u32,
    bits: u32,
}

impl IntField {
    /// The integer `view` (an item of a list of `stride`-bit items, or a
    /// field of one) of at most `max_bits` bits, checked to lie inside its item.
    fn of(view: &View<'_>, stride: u64, max_bits: u32) -> Result<Self> {
        let Some(layout) = view.layout else {
            return Ok(IntField::default());
        };
        if !layout.fields.is_empty() {
            return Err(corrupt!("metadata: expected an integer, found a structure"));
        }
        if layout.bits > max_bits {
            return Err(corrupt!(
                "metadata: a {}-bit value where at most {max_bits} bits fit",
                layout.bits
            ));
        }
        if view.bit + u64::from(layout.bits) > stride {
            return Err(corrupt!(
                "metadata: a field at bit {} of {} bits lies outside its {stride}-bit item",
                view.bit,
                layout.bits
            ));
        }
        Ok(IntField {
            offset: view.bit as u32,
            bits: layout.bits,
        })
    }
}

/// A list inside frozen data by position only, so that it can be kept
/// beside the data it lies in: items are read in place with [`Packed::get`],
/// without decoding the whole list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Packed {
    /// Byte where the items start.
    storage: u64,
    count: u64,
    stride: u64,
}

impl Packed {
    /// Number of items.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Byte of the data where the items start (strings of a list of
    /// strings lie at their distance from it).
    pub fn storage(&self) -> u64 {
        self.storage
    }

    /// Field `field` of item `i`, read from `data` (the data the list was
    /// found in). An item past the end reads as zero: callers check `i`
    /// against [`len`](Self::len) and report it; this never panics.
    #[inline]
    pub fn get(&self, data: &[u8], i: u64, field: IntField) -> u64 {
        if i >= self.count || field.bits == 0 {
            return 0;
        }
        // Within the bounds `View::list` checked, by construction of
        // `IntField::of` and the test above.
        let pos = self.storage * 8 + i * self.stride + u64::from(field.offset);
        read_bits(data, pos, field.bits)
    }

    /// Items `0..len` of a list of plain integers, decoded into a vector.
    pub fn to_vec(&self, data: &[u8], field: IntField) -> Vec<u64> {
        (0..self.count).map(|i| self.get(data, i, field)).collect()
    }
}

/// `bits` (1 to 64) bits of `data` from bit `pos`, least significant first;
/// bits past the end of `data` read as zero.
#[inline]
fn read_bits(data: &[u8], pos: u64, bits: u32) -> u64 {
    let byte = usize::try_from(pos / 8).unwrap_or(usize::MAX);
    let shift = (pos % 8) as u32;
    // Most fields (at most 57 bits) lie in the 8 bytes from their first:
    // one load, where the data goes on that far.
    if bits != 0 && shift + bits <= 64 {
        if let Some(word) = data.get(byte..).and_then(|s| s.first_chunk::<8>()) {
            return (u64::from_le_bytes(*word) >> shift) & (u64::MAX >> (64 - bits));
        }
    }
    let mut buf = [0u8; 16];
    let need = (shift + bits).div_ceil(8) as usize;
    if let Some(src) = data.get(byte..) {
        let n = src.len().min(need);
        buf[..n].copy_from_slice(&src[..n]);
    }
    let v = (u128::from_le_bytes(buf) >> shift) as u64;
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

/// A list, set, map or string inside frozen data.
#[derive(Clone, Copy)]
pub struct List<'a> {
    item: View<'a>,
    count: u64,
    stride: u64,
}

impl<'a> List<'a> {
    /// Number of items.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Item `i` (`i` must be below [`len`](Self::len)).
    pub fn get(&self, i: u64) -> View<'a> {
        View {
            bit: i * self.stride,
            ..self.item
        }
    }

    /// The list by position, for reading items in place.
    pub fn packed(&self) -> Packed {
        Packed {
            storage: self.item.storage,
            count: self.count,
            stride: self.stride,
        }
    }

    /// Where field `id` of each item lies: an integer of at most `max_bits` bits.
    pub fn int_field(&self, id: i16, max_bits: u32) -> Result<IntField> {
        IntField::of(&self.item.field(id), self.stride, max_bits)
    }

    /// Where each item lies, for a list of integers of at most `max_bits` bits.
    pub fn int_items(&self, max_bits: u32) -> Result<IntField> {
        IntField::of(&self.item, self.stride, max_bits)
    }

    /// The list, refused when longer than `limit`. Items that take no bits
    /// carry no data, so their number is further bounded by the size of
    /// the data.
    pub fn bounded(self, limit: u64) -> Result<Self> {
        let limit = if self.stride == 0 {
            limit.min((self.item.data.len() as u64 * 64).max(1 << 16))
        } else {
            limit
        };
        if self.count > limit {
            return Err(corrupt!(
                "metadata: list of {} items exceeds the limit of {limit}",
                self.count
            ));
        }
        Ok(self)
    }

    /// All items, mapped by `f`, refusing lists longer than `limit`
    /// (see [`bounded`](Self::bounded)).
    pub fn map<T>(&self, limit: u64, f: impl Fn(View<'a>) -> Result<T>) -> Result<Vec<T>> {
        let list = self.bounded(limit)?;
        (0..list.count).map(|i| f(list.get(i))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::read_bits;

    #[test]
    fn reads_bits_across_bytes_and_zeros_past_the_end() {
        let data = [0b1010_1100u8, 0xff, 0x01];
        assert_eq!(read_bits(&data, 2, 4), 0b1011);
        assert_eq!(read_bits(&data, 4, 8), 0xfa);
        assert_eq!(read_bits(&data, 16, 8), 0x01);
        assert_eq!(read_bits(&data, 20, 8), 0);
        assert_eq!(read_bits(&data, 1 << 40, 8), 0);
        assert_eq!(read_bits(&[0xff; 10], 3, 64), u64::MAX);
    }

    #[test]
    fn every_position_and_width_reads_as_bit_by_bit() {
        let data: Vec<u8> = (0..24u32).map(|i| (i * 97 + 13) as u8).collect();
        let bit = |p: u64| match data.get((p / 8) as usize) {
            Some(b) => u64::from(b >> (p % 8) & 1),
            None => 0,
        };
        for pos in 0..(data.len() as u64 * 8 + 16) {
            for bits in 1..=64u32 {
                let want = (0..u64::from(bits)).fold(0, |v, k| v | bit(pos + k) << k);
                assert_eq!(read_bits(&data, pos, bits), want, "bit {pos}, {bits} bits");
            }
        }
    }
}
