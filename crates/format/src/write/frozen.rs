//! Frozen2 encoding: a value tree is given the smallest layout that holds
//! it (each integer position gets the bits its largest value needs, or
//! the whole bytes, see [`FieldWidths`]; positions that are always default
//! get no layout at all), then the schema and the bit-packed data are
//! written. The inverse of [`crate::frozen`].
//!
//! Conventions (those DwarFS and the `dwarfs` crate read): all field
//! offsets are bit offsets (stored negative), fields are laid out in id
//! order, the root layout records its size in bytes, the root value sits at
//! byte 0 and the items of every list and the bytes of every string follow
//! in the order they are met, each at a byte boundary, found through its
//! `distance` from the storage start of the value holding it.

use super::thrift::{encode_struct, Value};
use std::collections::{BTreeMap, HashMap};

/// A value to freeze.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frozen {
    /// An unsigned integer or bool.
    Uint(u64),
    /// A struct: fields by id (absent fields are default).
    Struct(BTreeMap<i16, Frozen>),
    /// A list or set (sets sorted by the caller).
    List(Vec<Frozen>),
    /// A list of integers: [`Frozen::List`] of [`Frozen::Uint`]s, stored
    /// compactly.
    Uints(Vec<u64>),
    /// A list of structs whose fields are all integers, stored by column:
    /// (field id, the field's value in every row), ids ascending, columns
    /// of equal length. The same as a [`Frozen::List`] of
    /// [`Frozen::Struct`]s with every field present, in a fraction of the
    /// memory (metadata has a few such rows per file).
    Table(Vec<(i16, Column)>),
    /// A map, sorted by key by the caller.
    Map(Vec<(Frozen, Frozen)>),
    /// A string or binary.
    Bytes(Vec<u8>),
    /// An optional value.
    Optional(Option<Box<Frozen>>),
}

impl Frozen {
    /// A struct from (id, value) pairs.
    pub fn fields(fields: impl IntoIterator<Item = (i16, Frozen)>) -> Frozen {
        Frozen::Struct(fields.into_iter().collect())
    }

    /// A set optional value.
    pub fn some(v: Frozen) -> Frozen {
        Frozen::Optional(Some(Box::new(v)))
    }

    /// A list of integers.
    pub fn uints<T: Into<u64> + Copy>(values: &[T]) -> Frozen {
        Frozen::Uints(values.iter().map(|&v| v.into()).collect())
    }

    /// A list of `rows` structs with the integer fields `ids` (ascending),
    /// `row(i, column)` giving row `i`'s value of field `ids[column]`.
    pub fn table(ids: &[i16], rows: usize, row: impl Fn(usize, usize) -> u64) -> Frozen {
        Frozen::Table(
            ids.iter()
                .enumerate()
                .map(|(c, &id)| (id, Column::new(rows, |i| row(i, c))))
                .collect(),
        )
    }
}

/// One column of a [`Frozen::Table`]: a field's value in every row, each
/// in as few bytes as the column's widest value needs (most metadata
/// columns are indices or zero: with every value a `u64` they were the
/// largest part of a build's peak memory on trees of many small files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    /// `rows` zeros.
    Zeros(usize),
    /// Values below 2^16.
    U16(Vec<u16>),
    /// Values below 2^32.
    U32(Vec<u32>),
    /// Any values.
    U64(Vec<u64>),
}

impl Column {
    /// The column of `rows` values, `value(i)` giving row `i`'s (called
    /// twice per row: once to find the widest, once to store).
    pub fn new(rows: usize, value: impl Fn(usize) -> u64) -> Column {
        let widest = (0..rows).fold(0, |a, i| a | value(i));
        if widest == 0 {
            Column::Zeros(rows)
        } else if widest <= u64::from(u16::MAX) {
            Column::U16((0..rows).map(|i| value(i) as u16).collect())
        } else if widest <= u64::from(u32::MAX) {
            Column::U32((0..rows).map(|i| value(i) as u32).collect())
        } else {
            Column::U64((0..rows).map(value).collect())
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        match self {
            Column::Zeros(n) => *n,
            Column::U16(v) => v.len(),
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s value.
    pub fn get(&self, i: usize) -> u64 {
        match self {
            Column::Zeros(_) => 0,
            Column::U16(v) => u64::from(v[i]),
            Column::U32(v) => u64::from(v[i]),
            Column::U64(v) => v[i],
        }
    }

    /// The bitwise or of every value (as wide as the widest).
    fn widest(&self) -> u64 {
        (0..self.len()).fold(0, |a, i| a | self.get(i))
    }
}

impl From<Vec<u64>> for Column {
    fn from(values: Vec<u64>) -> Column {
        Column::new(values.len(), |i| values[i])
    }
}

/// How many bits an integer position of the layout takes. Readers take
/// the widths from the schema, so either choice reads the same in DwarFS,
/// the `dwarfs` crate and hoard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldWidths {
    /// The bits its largest value needs: the smallest data, for metadata
    /// stored uncompressed (DwarFS's choice).
    Bits,
    /// Those bits rounded up to whole bytes. The data grows (a fifth to a
    /// third on real trees), but every field of every row starts at a
    /// byte, where lzma and zstd see repeated values as repeated bytes:
    /// compressed with lzma, the quick corpora's metadata was 8-26%
    /// smaller (see doc/writer-history.md).
    Bytes,
}

impl FieldWidths {
    /// The width of a position whose largest value needs `bits`.
    fn of(self, bits: u32) -> u32 {
        match self {
            FieldWidths::Bits => bits,
            FieldWidths::Bytes => bits.div_ceil(8) * 8,
        }
    }
}

/// The layout of one position of the value tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Layout {
    /// Always default: takes no bits, has no schema entry.
    #[default]
    Empty,
    Int(u32),
    /// Fields by id: (layout, bit offset); total bits.
    Struct(BTreeMap<i16, Layout>),
    /// A list, map or string: distance bits, count bits, item layout
    /// (`None` for strings, whose items are raw bytes).
    Seq {
        count_bits: u32,
        item: Option<Box<Layout>>,
        /// Whether any instance has data (so needs a distance).
        has_data: bool,
    },
}

fn bits_for(v: u64) -> u32 {
    u64::BITS - v.leading_zeros()
}

impl Layout {
    /// Widens this layout so it also holds `v`.
    fn merge(&mut self, v: &Frozen) {
        match v {
            Frozen::Uint(x) => {
                let b = bits_for(*x);
                match self {
                    Layout::Empty if b > 0 => *self = Layout::Int(b),
                    Layout::Int(old) => *old = (*old).max(b),
                    _ => {}
                }
            }
            Frozen::Struct(fields) => {
                if let Some(ls) = self.as_struct() {
                    for (id, f) in fields {
                        ls.entry(*id).or_default().merge(f);
                    }
                }
            }
            Frozen::Optional(o) => {
                // A struct of "is set" (1) and the value (2).
                if let (Some(ls), Some(v)) = (self.as_struct(), o) {
                    ls.entry(1).or_default().merge(&Frozen::Uint(1));
                    ls.entry(2).or_default().merge(v);
                }
            }
            Frozen::List(items) => {
                self.seq(items.len());
                if let Layout::Seq { item, .. } = self {
                    let il = item.get_or_insert_with(Default::default);
                    for i in items {
                        il.merge(i);
                    }
                }
            }
            Frozen::Uints(values) => {
                self.seq(values.len());
                if let Layout::Seq { item, .. } = self {
                    let il = item.get_or_insert_with(Default::default);
                    il.merge(&Frozen::Uint(values.iter().fold(0, |a, &v| a | v)));
                }
            }
            Frozen::Table(columns) => {
                let rows = columns.first().map_or(0, |(_, c)| c.len());
                self.seq(rows);
                if let Layout::Seq { item, .. } = self {
                    let il = item.get_or_insert_with(Default::default);
                    if rows > 0 {
                        if let Some(ls) = il.as_struct() {
                            for (id, column) in columns {
                                ls.entry(*id)
                                    .or_default()
                                    .merge(&Frozen::Uint(column.widest()));
                            }
                        }
                    }
                }
            }
            Frozen::Map(entries) => {
                self.seq(entries.len());
                if let Layout::Seq { item, .. } = self {
                    let il = item.get_or_insert_with(Default::default);
                    // Each entry is a struct of key (1) and value (2).
                    for (k, v) in entries {
                        if let Some(ls) = il.as_struct() {
                            ls.entry(1).or_default().merge(k);
                            ls.entry(2).or_default().merge(v);
                        }
                    }
                }
            }
            Frozen::Bytes(b) => self.seq(b.len()),
        }
    }

    /// The fields of this struct layout (an empty layout becomes one), or
    /// None if this position holds something else.
    fn as_struct(&mut self) -> Option<&mut BTreeMap<i16, Layout>> {
        if matches!(self, Layout::Empty) {
            *self = Layout::Struct(BTreeMap::new());
        }
        match self {
            Layout::Struct(fields) => Some(fields),
            _ => None,
        }
    }

    fn seq(&mut self, count: usize) {
        if matches!(self, Layout::Empty) {
            *self = Layout::Seq {
                count_bits: 0,
                item: None,
                has_data: false,
            };
        }
        if let Layout::Seq {
            count_bits,
            has_data,
            ..
        } = self
        {
            *count_bits = (*count_bits).max(bits_for(count as u64));
            *has_data |= count > 0;
        }
    }
}

/// A finished layout: bits and field offsets, ready for the schema.
#[derive(Debug, Clone)]
struct Placed {
    bits: u32,
    kind: PlacedKind,
}

#[derive(Debug, Clone)]
enum PlacedKind {
    Int,
    /// Field id -> (offset in bits, layout).
    Struct(BTreeMap<i16, (u32, Placed)>),
}

/// Gives every non-empty position its bits (`widths` of what its values
/// need) and offsets. Sequences become structs of distance (1), count (2)
/// and item (3).
fn place(l: &Layout, distance_bits: u32, widths: FieldWidths) -> Option<Placed> {
    match l {
        Layout::Empty => None,
        Layout::Int(b) => Some(Placed {
            bits: widths.of(*b),
            kind: PlacedKind::Int,
        }),
        Layout::Struct(fields) => {
            let mut offset = 0u32;
            let mut out = BTreeMap::new();
            for (id, f) in fields {
                if let Some(p) = place(f, distance_bits, widths) {
                    let bits = p.bits;
                    out.insert(*id, (offset, p));
                    offset += bits;
                }
            }
            (offset > 0).then_some(Placed {
                bits: offset,
                kind: PlacedKind::Struct(out),
            })
        }
        Layout::Seq {
            count_bits,
            item,
            has_data,
        } => {
            // Strings (no item layout) store bytes; lists store items
            // only when those take bits.
            let item = item.as_ref().map(|i| place(i, distance_bits, widths));
            let needs_distance = *has_data && item.as_ref().is_none_or(Option::is_some);
            let item = item.flatten();
            let mut fields = BTreeMap::new();
            let mut offset = 0;
            if needs_distance {
                fields.insert(1, Layout::Int(distance_bits.max(1)));
            }
            if *count_bits > 0 {
                fields.insert(2, Layout::Int(*count_bits));
            }
            let mut out = BTreeMap::new();
            for (id, f) in &fields {
                let p = place(f, distance_bits, widths).expect("non-empty");
                let bits = p.bits;
                out.insert(*id, (offset, p));
                offset += bits;
            }
            if let Some(i) = item {
                out.insert(3, (offset, i));
            }
            (offset > 0).then_some(Placed {
                bits: offset,
                kind: PlacedKind::Struct(out),
            })
        }
    }
}

/// Bit-level writer over a growing buffer.
struct Bits {
    buf: Vec<u8>,
    max_distance: u64,
}

impl Bits {
    fn put(&mut self, bit: u64, bits: u32, value: u64) {
        let mut pos = bit;
        let mut left = bits;
        let mut v = value;
        while left > 0 {
            let byte = (pos / 8) as usize;
            let shift = (pos % 8) as u32;
            let take = (8 - shift).min(left);
            let mask = ((1u16 << take) - 1) as u8;
            self.buf[byte] |= ((v as u8) & mask) << shift;
            v = if take >= 64 { 0 } else { v >> take };
            pos += u64::from(take);
            left -= take;
        }
    }

    /// Reserves `bytes` at the end; returns where they start.
    fn reserve(&mut self, bytes: usize) -> usize {
        let start = self.buf.len();
        self.buf.resize(start + bytes, 0);
        start
    }
}

fn field(p: &Placed, id: i16) -> Option<&(u32, Placed)> {
    match &p.kind {
        PlacedKind::Struct(f) => f.get(&id),
        PlacedKind::Int => None,
    }
}

/// Writes `v` with layout `p` at absolute bit `bit`; `storage` is the byte
/// that distances of lists inside `v` count from.
fn write(out: &mut Bits, v: &Frozen, p: &Placed, storage: usize, bit: u64) {
    match v {
        Frozen::Uint(x) => out.put(bit, p.bits, *x),
        Frozen::Struct(fields) => {
            for (id, f) in fields {
                if let Some((off, fp)) = field(p, *id) {
                    write(out, f, fp, storage, bit + u64::from(*off));
                }
            }
        }
        Frozen::Optional(o) => {
            if let Some(v) = o {
                if let Some((off, fp)) = field(p, 1) {
                    out.put(bit + u64::from(*off), fp.bits, 1);
                }
                if let Some((off, fp)) = field(p, 2) {
                    write(out, v, fp, storage, bit + u64::from(*off));
                }
            }
        }
        Frozen::List(items) => {
            write_seq(
                out,
                items.len(),
                p,
                storage,
                bit,
                |out, item, start, i, stride| {
                    write(
                        out,
                        &items[i],
                        item,
                        start,
                        start as u64 * 8 + i as u64 * stride,
                    );
                },
            );
        }
        Frozen::Uints(values) => {
            write_seq(
                out,
                values.len(),
                p,
                storage,
                bit,
                |out, item, start, i, stride| {
                    out.put(start as u64 * 8 + i as u64 * stride, item.bits, values[i]);
                },
            );
        }
        Frozen::Table(columns) => {
            let rows = columns.first().map_or(0, |(_, c)| c.len());
            write_seq(out, rows, p, storage, bit, |out, item, start, i, stride| {
                let at = start as u64 * 8 + i as u64 * stride;
                for (id, column) in columns {
                    if let Some((off, fp)) = field(item, *id) {
                        out.put(at + u64::from(*off), fp.bits, column.get(i));
                    }
                }
            });
        }
        Frozen::Map(entries) => {
            write_seq(
                out,
                entries.len(),
                p,
                storage,
                bit,
                |out, item, start, i, stride| {
                    let (k, v) = &entries[i];
                    let at = start as u64 * 8 + i as u64 * stride;
                    if let Some((off, kp)) = field(item, 1) {
                        write(out, k, kp, start, at + u64::from(*off));
                    }
                    if let Some((off, vp)) = field(item, 2) {
                        write(out, v, vp, start, at + u64::from(*off));
                    }
                },
            );
        }
        Frozen::Bytes(b) => {
            let start = out.reserve(b.len());
            out.buf[start..].copy_from_slice(b);
            if let Some((off, dp)) = field(p, 1) {
                if !b.is_empty() {
                    let d = (start - storage) as u64;
                    out.max_distance = out.max_distance.max(d);
                    out.put(bit + u64::from(*off), dp.bits, d);
                }
            }
            if let Some((off, cp)) = field(p, 2) {
                out.put(bit + u64::from(*off), cp.bits, b.len() as u64);
            }
        }
    }
}

/// Writes the header of a list or map of `count` items and reserves its
/// item area; `item` writes item `i` given the item layout, the area's
/// start byte, `i` and the item stride in bits.
fn write_seq(
    out: &mut Bits,
    count: usize,
    p: &Placed,
    storage: usize,
    bit: u64,
    item: impl Fn(&mut Bits, &Placed, usize, usize, u64),
) {
    if let Some((off, cp)) = field(p, 2) {
        out.put(bit + u64::from(*off), cp.bits, count as u64);
    }
    let Some((_, ip)) = field(p, 3) else {
        return;
    };
    if count == 0 || ip.bits == 0 {
        return;
    }
    let stride = u64::from(ip.bits);
    let start = out.reserve((count as u64 * stride).div_ceil(8) as usize);
    if let Some((off, dp)) = field(p, 1) {
        let d = (start - storage) as u64;
        out.max_distance = out.max_distance.max(d);
        out.put(bit + u64::from(*off), dp.bits, d);
    }
    for i in 0..count {
        item(out, ip, start, i, stride);
    }
}

/// The layouts of a schema, each distinct layout once (as DwarFS writes
/// them: many fields share one, e.g. every 32-bit integer).
#[derive(Default)]
struct Layouts {
    list: Vec<Value>,
    /// The encoded form of each layout in `list`, to its id.
    ids: HashMap<Vec<u8>, usize>,
}

impl Layouts {
    /// The id of `layout`, added if it is new.
    fn intern(&mut self, layout: Value) -> i16 {
        let next = self.list.len();
        let id = *self.ids.entry(encode_struct(&layout)).or_insert(next);
        if id == next {
            self.list.push(layout);
        }
        // Ids past i16 are refused by `freeze` before the schema is used.
        id as i16
    }
}

/// Adds the layouts of `p` (and everything below it) to `layouts`;
/// returns its id.
fn schema_layout(p: &Placed, layouts: &mut Layouts, root: bool) -> i16 {
    let mut fields = Vec::new();
    if let PlacedKind::Struct(fs) = &p.kind {
        for (id, (off, fp)) in fs {
            let lid = schema_layout(fp, layouts, false);
            fields.push((
                Value::I16(*id),
                Value::Struct(BTreeMap::from([
                    (1, Value::I16(lid)),
                    (2, Value::I16(-(*off as i16))),
                ])),
            ));
        }
    }
    let size = if root { p.bits.div_ceil(8) } else { 0 };
    layouts.intern(Value::Struct(BTreeMap::from([
        (1, Value::I32(size as i32)),
        (2, Value::I16(p.bits as i16)),
        (3, Value::Map(fields)),
        (4, Value::Binary(Vec::new())),
    ])))
}

/// Why a value cannot be frozen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreezeError {
    /// A struct needs more bits than a layout offset can address.
    #[error("a structure needs more than 32767 bits")]
    TooWide,
    /// More layouts than a schema can number.
    #[error("more than 32767 layouts")]
    TooManyLayouts,
}

fn check_widths(p: &Placed) -> Result<(), FreezeError> {
    if p.bits > i16::MAX as u32 {
        return Err(FreezeError::TooWide);
    }
    if let PlacedKind::Struct(fs) = &p.kind {
        for (_, fp) in fs.values() {
            check_widths(fp)?;
        }
    }
    Ok(())
}

/// Freezes `root` (a struct) with integer positions `widths` wide:
/// returns the schema (thrift compact) and the data.
pub fn freeze(root: &Frozen, widths: FieldWidths) -> Result<(Vec<u8>, Vec<u8>), FreezeError> {
    let mut layout = Layout::default();
    layout.merge(root);
    // Distances are not known before the data is written: write once with
    // 32-bit distances, then again with just the bits the largest needs
    // (smaller distances can only make the data shorter).
    let mut distance_bits = 32;
    loop {
        let placed = place(&layout, distance_bits, widths).unwrap_or(Placed {
            bits: 0,
            kind: PlacedKind::Struct(BTreeMap::new()),
        });
        check_widths(&placed)?;
        let mut out = Bits {
            buf: vec![0; placed.bits.div_ceil(8) as usize],
            max_distance: 0,
        };
        write(&mut out, root, &placed, 0, 0);
        let needed = bits_for(out.max_distance).max(1);
        if needed < distance_bits {
            distance_bits = needed;
            continue;
        }
        let mut layouts = Layouts::default();
        let root_id = schema_layout(&placed, &mut layouts, true);
        let layouts = layouts.list;
        if layouts.len() > i16::MAX as usize {
            return Err(FreezeError::TooManyLayouts);
        }
        let schema = Value::Struct(BTreeMap::from([
            (1, Value::Bool(true)),
            (
                2,
                Value::Map(
                    layouts
                        .into_iter()
                        .enumerate()
                        .map(|(i, l)| (Value::I16(i as i16), l))
                        .collect(),
                ),
            ),
            (3, Value::I16(root_id)),
            (4, Value::I32(1)),
        ]));
        return Ok((encode_struct(&schema), out.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frozen::Schema;

    fn sample() -> Frozen {
        Frozen::fields([
            (1, Frozen::Uint(5)),
            (2, Frozen::Uint(0)),
            (3, Frozen::Uint(u64::MAX)),
            (4, Frozen::uints(&[1u32, 2, 3, 4_000_000])),
            (
                5,
                Frozen::List(vec![
                    Frozen::fields([(1, Frozen::Uint(1)), (2, Frozen::Bytes(b"abc".to_vec()))]),
                    Frozen::fields([(1, Frozen::Uint(0)), (2, Frozen::Bytes(Vec::new()))]),
                    Frozen::fields([(1, Frozen::Uint(1)), (3, Frozen::uints(&[7u32, 8]))]),
                ]),
            ),
            (6, Frozen::Optional(None)),
            (7, Frozen::some(Frozen::Uint(9))),
            (8, Frozen::some(Frozen::List(vec![]))),
            (
                9,
                Frozen::Map(vec![
                    (Frozen::Uint(1), Frozen::Uint(100)),
                    (Frozen::Uint(5), Frozen::Uint(1 << 40)),
                ]),
            ),
            (10, Frozen::List(vec![Frozen::Uint(0); 3])),
            (11, Frozen::Bytes(b"a string".to_vec())),
        ])
    }

    #[test]
    fn frozen_values_read_back() {
        for widths in [FieldWidths::Bits, FieldWidths::Bytes] {
            let (schema, data) = freeze(&sample(), widths).unwrap();
            assert_sample(&Schema::decode(&schema).unwrap(), &data);
        }
    }

    fn assert_sample(schema: &Schema, data: &[u8]) {
        let r = schema.root(data);
        assert_eq!(r.field(1).uint().unwrap(), 5);
        assert_eq!(r.field(2).uint().unwrap(), 0);
        assert!(!r.field(2).is_present());
        assert_eq!(r.field(3).uint().unwrap(), u64::MAX);
        let l = r.field(4).list().unwrap();
        let v: Vec<u64> = (0..l.len()).map(|i| l.get(i).uint().unwrap()).collect();
        assert_eq!(v, [1, 2, 3, 4_000_000]);
        let s = r.field(5).list().unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(0).field(2).bytes().unwrap(), b"abc");
        assert_eq!(s.get(1).field(2).bytes().unwrap(), b"");
        assert_eq!(s.get(1).field(1).uint().unwrap(), 0);
        let inner = s.get(2).field(3).list().unwrap();
        assert_eq!(inner.get(1).uint().unwrap(), 8);
        assert!(r.field(6).optional().unwrap().is_none());
        assert_eq!(r.field(7).optional().unwrap().unwrap().uint().unwrap(), 9);
        let empty = r.field(8).optional().unwrap().unwrap().list().unwrap();
        assert!(empty.is_empty());
        let m = r.field(9).list().unwrap();
        assert_eq!(m.get(1).field(1).uint().unwrap(), 5);
        assert_eq!(m.get(1).field(2).uint().unwrap(), 1 << 40);
        assert_eq!(r.field(10).list().unwrap().len(), 3);
        assert_eq!(r.field(11).bytes().unwrap(), b"a string");
    }

    /// Every integer position of `p` and below, as (bit offset, bits).
    fn positions(p: &Placed, at: u32, out: &mut Vec<(u32, u32)>) {
        match &p.kind {
            PlacedKind::Int => out.push((at, p.bits)),
            PlacedKind::Struct(fields) => {
                for (off, f) in fields.values() {
                    positions(f, at + off, out);
                }
            }
        }
    }

    #[test]
    fn whole_byte_widths_start_every_field_at_a_byte() {
        let mut layout = Layout::default();
        layout.merge(&compact(100));
        let mut found = Vec::new();
        positions(
            &place(&layout, 13, FieldWidths::Bytes).unwrap(),
            0,
            &mut found,
        );
        assert!(found.iter().any(|&(_, bits)| bits == 8), "{found:?}");
        assert!(
            found.iter().all(|&(at, bits)| at % 8 == 0 && bits % 8 == 0),
            "{found:?}"
        );
        let mut narrow = Vec::new();
        positions(
            &place(&layout, 13, FieldWidths::Bits).unwrap(),
            0,
            &mut narrow,
        );
        assert!(narrow.iter().any(|&(_, bits)| bits % 8 != 0), "{narrow:?}");
        // The same values, wider: more data.
        let bits = freeze(&compact(100), FieldWidths::Bits).unwrap().1;
        let bytes = freeze(&compact(100), FieldWidths::Bytes).unwrap().1;
        assert!(bytes.len() > bits.len());
    }

    /// `sample` with its integer lists and integer-struct lists given in
    /// the generic form.
    fn generic(rows: usize) -> Frozen {
        let row = |i: usize| {
            Frozen::fields([
                (1, Frozen::Uint(i as u64 * 3)),
                (4, Frozen::Uint(0)),
                (6, Frozen::Uint(1 << (i % 40))),
            ])
        };
        Frozen::fields([
            (1, Frozen::List((0..rows).map(row).collect())),
            (2, Frozen::List(vec![Frozen::Uint(0); rows])),
            (
                3,
                Frozen::List((0..rows as u64).map(Frozen::Uint).collect()),
            ),
            (
                4,
                Frozen::some(Frozen::List((0..rows).rev().map(row).collect())),
            ),
        ])
    }

    fn compact(rows: usize) -> Frozen {
        let row = |i: usize, c: usize| [i as u64 * 3, 0, 1 << (i % 40)][c];
        Frozen::fields([
            (1, Frozen::table(&[1, 4, 6], rows, row)),
            (2, Frozen::Uints(vec![0; rows])),
            (3, Frozen::Uints((0..rows as u64).collect())),
            (
                4,
                Frozen::some(Frozen::table(&[1, 4, 6], rows, |i, c| row(rows - 1 - i, c))),
            ),
        ])
    }

    #[test]
    fn compact_lists_freeze_like_generic_ones() {
        for rows in [0, 1, 2, 100] {
            assert_eq!(
                freeze(&compact(rows), FieldWidths::Bits).unwrap(),
                freeze(&generic(rows), FieldWidths::Bits).unwrap(),
                "{rows} rows"
            );
        }
    }

    #[test]
    fn an_all_default_value_freezes_to_nothing() {
        let (schema, data) =
            freeze(&Frozen::fields([(1, Frozen::Uint(0))]), FieldWidths::Bytes).unwrap();
        let schema = Schema::decode(&schema).unwrap();
        assert!(data.is_empty());
        assert_eq!(schema.root(&data).field(1).uint().unwrap(), 0);
    }
}
