//! Extended attributes: hoard's extension of the DwarFS metadata.
//!
//! DwarFS has no place for extended attributes, so hoard stores them in one
//! optional field of the metadata struct with an id far above DwarFS's own
//! ([`XATTRS_FIELD`]). Frozen2 readers find fields through the schema by
//! id, and those that do not know an id skip it: DwarFS 0.15 and the
//! `dwarfs` crate read such images as if the field were not there (see the
//! crate README for how that was checked).
//!
//! The field (thrift notation, ids in the struct):
//!
//! ```text
//! struct xattr_table {
//!   1: list<binary>     names      // distinct attribute names, sorted
//!   2: list<binary>     values     // distinct values, sorted
//!   3: list<xattr_pair> pairs      // every set's pairs, set after set
//!   4: list<UInt32>     set_index  // set i is pairs[set_index[i]..set_index[i + 1]]
//!   5: list<UInt32>     inode_sets // the set of each inode, by inode number
//! }
//! struct xattr_pair { 1: UInt32 name_index; 2: UInt32 value_index }
//! ```
//!
//! Set 0 is always the empty set, so inodes without attributes cost only
//! the few bits of a 0 in `inode_sets`. Within a set, pairs are sorted by
//! name and names are unique.

use crate::frozen::View;
use crate::write::frozen::Frozen;
use crate::{corrupt, Result};
use std::collections::BTreeMap;

/// Id of the `xattr_table` field in the metadata struct (DwarFS's own ids
/// end at 37).
pub const XATTRS_FIELD: i16 = 1000;

/// Most items any one list of the table may have.
const MAX_ITEMS: u64 = 1 << 28;

/// One extended attribute: name and value.
pub type Xattr = (Vec<u8>, Vec<u8>);

/// The distinct attribute sets of an image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XattrSets {
    /// Distinct names, sorted.
    pub names: Vec<Vec<u8>>,
    /// Distinct values, sorted.
    pub values: Vec<Vec<u8>>,
    /// Each set as (name index, value index) pairs sorted by name; set 0
    /// is empty.
    pub sets: Vec<Vec<(u32, u32)>>,
}

impl XattrSets {
    /// The attributes of set `set` as (name, value) slices; `None` when
    /// there is no such set.
    pub fn get(&self, set: u32) -> Option<Vec<(&[u8], &[u8])>> {
        let pairs = self.sets.get(set as usize)?;
        pairs
            .iter()
            .map(|&(n, v)| {
                Some((
                    self.names.get(n as usize)?.as_slice(),
                    self.values.get(v as usize)?.as_slice(),
                ))
            })
            .collect()
    }
}

/// The extended attributes of every inode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Xattrs {
    /// The distinct sets.
    pub sets: XattrSets,
    /// The set of each inode, by inode number.
    pub inode_sets: Vec<u32>,
}

impl Xattrs {
    /// Number of inodes with at least one attribute.
    pub fn inodes_with_xattrs(&self) -> usize {
        self.inode_sets.iter().filter(|&&s| s != 0).count()
    }
}

/// Interns attribute sets into [`Xattrs`], numbering sets in the order
/// they are first met.
#[derive(Debug, Default)]
pub struct XattrsBuilder {
    sets: BTreeMap<Vec<Xattr>, u32>,
    inode_sets: Vec<u32>,
}

impl XattrsBuilder {
    /// Adds the next inode with attributes `attrs` (any order; later
    /// duplicates of a name are dropped).
    pub fn push(&mut self, attrs: &[Xattr]) {
        if attrs.is_empty() {
            self.inode_sets.push(0);
            return;
        }
        let mut set: Vec<Xattr> = attrs.to_vec();
        set.sort();
        set.dedup_by(|a, b| a.0 == b.0);
        let next = self.sets.len() as u32 + 1;
        let id = *self.sets.entry(set).or_insert(next);
        self.inode_sets.push(id);
    }

    /// The table, or `None` when no inode has an attribute.
    pub fn finish(self) -> Option<Xattrs> {
        if self.sets.is_empty() {
            return None;
        }
        let mut names: Vec<&[u8]> = Vec::new();
        let mut values: Vec<&[u8]> = Vec::new();
        for set in self.sets.keys() {
            for (n, v) in set {
                names.push(n);
                values.push(v);
            }
        }
        names.sort_unstable();
        names.dedup();
        values.sort_unstable();
        values.dedup();
        let index = |list: &[&[u8]], x: &[u8]| list.binary_search(&x).unwrap_or(0) as u32;
        let mut sets = vec![Vec::new(); self.sets.len() + 1];
        for (set, &id) in &self.sets {
            sets[id as usize] = set
                .iter()
                .map(|(n, v)| (index(&names, n), index(&values, v)))
                .collect();
        }
        Some(Xattrs {
            sets: XattrSets {
                names: names.into_iter().map(<[u8]>::to_vec).collect(),
                values: values.into_iter().map(<[u8]>::to_vec).collect(),
                sets,
            },
            inode_sets: self.inode_sets,
        })
    }
}

fn byte_strings(v: View<'_>) -> Result<Vec<Vec<u8>>> {
    v.list()?.map(MAX_ITEMS, |i| Ok(i.bytes()?.to_vec()))
}

/// Decodes the names, values and sets of an `xattr_table` (`table`),
/// checking every index.
pub fn decode_sets(table: View<'_>) -> Result<XattrSets> {
    let names = byte_strings(table.field(1))?;
    let values = byte_strings(table.field(2))?;
    let pairs = table.field(3).list()?.map(MAX_ITEMS, |p| {
        let (n, v) = (p.field(1).u32()?, p.field(2).u32()?);
        if n as usize >= names.len() || v as usize >= values.len() {
            return Err(corrupt!("extended attribute pair ({n}, {v}) out of range"));
        }
        Ok((n, v))
    })?;
    let index = table.field(4).list()?.map(MAX_ITEMS, |i| i.u32())?;
    if index.first().is_some_and(|&i| i != 0) || index.len() < 2 {
        return Err(corrupt!("extended attribute set index malformed"));
    }
    let sets = index
        .windows(2)
        .map(|w| {
            let set = (w[0] <= w[1])
                .then(|| pairs.get(w[0] as usize..w[1] as usize))
                .flatten()
                .ok_or_else(|| {
                    corrupt!("extended attribute set {}..{} out of range", w[0], w[1])
                })?;
            if set
                .windows(2)
                .any(|p| names[p[0].0 as usize] >= names[p[1].0 as usize])
            {
                return Err(corrupt!("extended attribute set not sorted by name"));
            }
            Ok(set.to_vec())
        })
        .collect::<Result<Vec<_>>>()?;
    if !sets[0].is_empty() {
        return Err(corrupt!("extended attribute set 0 is not empty"));
    }
    Ok(XattrSets {
        names,
        values,
        sets,
    })
}

/// Decodes a whole `xattr_table`, checking that every inode's set exists.
pub fn decode(table: View<'_>) -> Result<Xattrs> {
    let sets = decode_sets(table)?;
    let inode_sets = table.field(5).list()?.map(MAX_ITEMS, |i| {
        let s = i.u32()?;
        if s as usize >= sets.sets.len() {
            return Err(corrupt!("extended attribute set {s} out of range"));
        }
        Ok(s)
    })?;
    Ok(Xattrs { sets, inode_sets })
}

/// The `xattr_table` value to freeze.
pub fn to_frozen(x: &Xattrs) -> Frozen {
    let bytes = |l: &[Vec<u8>]| Frozen::List(l.iter().map(|b| Frozen::Bytes(b.clone())).collect());
    let pairs: Vec<(u32, u32)> = x.sets.sets.iter().flatten().copied().collect();
    let mut index = vec![0u32];
    for s in &x.sets.sets {
        index.push(index.last().copied().unwrap_or(0) + s.len() as u32);
    }
    Frozen::fields([
        (1, bytes(&x.sets.names)),
        (2, bytes(&x.sets.values)),
        (
            3,
            Frozen::table(&[1, 2], pairs.len(), |i, c| {
                u64::from([pairs[i].0, pairs[i].1][c])
            }),
        ),
        (4, Frozen::uints(&index)),
        (5, Frozen::uints(&x.inode_sets)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frozen::Schema;
    use crate::write::frozen::{freeze, FieldWidths};

    fn attr(n: &str, v: &[u8]) -> Xattr {
        (n.as_bytes().to_vec(), v.to_vec())
    }

    #[test]
    fn sets_are_deduplicated_and_read_back() {
        let mut b = XattrsBuilder::default();
        let a = vec![attr("user.b", b"2"), attr("user.a", b"1")];
        b.push(&[]);
        b.push(&a);
        b.push(&[attr("security.capability", &[1, 0, 0, 2])]);
        b.push(&[a[1].clone(), a[0].clone()]);
        let x = b.finish().unwrap();
        assert_eq!(x.inode_sets, [0, 1, 2, 1]);
        assert_eq!(x.sets.sets.len(), 3);
        assert_eq!(x.inodes_with_xattrs(), 3);
        let (schema, data) = freeze(
            &Frozen::fields([(XATTRS_FIELD, to_frozen(&x))]),
            FieldWidths::Bits,
        )
        .unwrap();
        let schema = Schema::decode(&schema).unwrap();
        let back = decode(schema.root(&data).field(XATTRS_FIELD)).unwrap();
        assert_eq!(back, x);
        assert_eq!(
            back.sets.get(1).unwrap(),
            [(&b"user.a"[..], &b"1"[..]), (b"user.b", b"2")]
        );
        assert!(back.sets.get(0).unwrap().is_empty());
        assert!(back.sets.get(3).is_none());
    }

    #[test]
    fn no_attributes_means_no_table() {
        let mut b = XattrsBuilder::default();
        b.push(&[]);
        assert!(b.finish().is_none());
    }

    #[test]
    fn bad_indices_are_refused() {
        let mut x = XattrsBuilder::default();
        x.push(&[attr("user.a", b"1")]);
        let mut x = x.finish().unwrap();
        x.inode_sets.push(7);
        let (schema, data) =
            freeze(&Frozen::fields([(1, to_frozen(&x))]), FieldWidths::Bits).unwrap();
        let schema = Schema::decode(&schema).unwrap();
        assert!(decode(schema.root(&data).field(1)).is_err());
        x.inode_sets.pop();
        x.sets.sets[1][0].0 = 5;
        let (schema, data) =
            freeze(&Frozen::fields([(1, to_frozen(&x))]), FieldWidths::Bits).unwrap();
        let schema = Schema::decode(&schema).unwrap();
        assert!(decode(schema.root(&data).field(1)).is_err());
    }
}
