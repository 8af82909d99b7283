//! The metadata tables, read in place from the frozen metadata bytes.
//!
//! Opening an image finds where each table lies and decodes only the small
//! ones (modes, owners, groups, shared files) and the delta-packed ones;
//! entries, inodes, chunks and names are read from the metadata bytes when
//! asked for, so opening takes about as long for a million files as for ten.
//! Every value read is an index or offset the caller still checks before use.

use crate::error::{corrupt, Result};
use hoard_format::frozen::{IntField, List, Packed, Schema, View};
use hoard_format::fsst::SymbolTable;
use hoard_format::metadata::FsOptions;
use hoard_format::xattrs::{XattrSets, XATTRS_FIELD};
use std::borrow::Cow;
use std::ops::Range;

/// Most items a decoded table may have (as in the full decoder).
const MAX_ITEMS: u64 = 1 << 28;

/// A column of `u32` values: stored in place, or decoded (delta-packed
/// tables, which must be summed up anyway).
#[derive(Debug)]
pub(crate) enum Column {
    /// Read from the metadata bytes.
    Stored(Packed, IntField),
    /// Decoded at open.
    Owned(Vec<u32>),
}

impl Column {
    fn stored(list: List<'_>) -> Result<Self> {
        Ok(Column::Stored(list.packed(), list.int_items(32)?))
    }

    /// Decodes a list whose items are deltas into running sums
    /// (`with_zero`: with a leading 0, as packed string indexes need).
    fn summed(list: List<'_>, data: &[u8], with_zero: bool, what: &str) -> Result<Self> {
        let (packed, field) = (list.packed(), list.int_items(32)?);
        let mut out = Vec::with_capacity(list.len() as usize + usize::from(with_zero));
        let mut sum = 0u32;
        if with_zero {
            out.push(0);
        }
        for i in 0..packed.len() {
            sum = sum
                .checked_add(packed.get(data, i, field) as u32)
                .ok_or_else(|| corrupt!("packed {what} overflows"))?;
            out.push(sum);
        }
        Ok(Column::Owned(out))
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        match self {
            Column::Stored(p, _) => p.len() as usize,
            Column::Owned(v) => v.len(),
        }
    }

    /// Value `i`, if there is one.
    #[inline]
    pub(crate) fn get(&self, data: &[u8], i: usize) -> Option<u32> {
        match self {
            Column::Stored(p, f) => {
                (i < p.len() as usize).then(|| p.get(data, i as u64, *f) as u32)
            }
            Column::Owned(v) => v.get(i).copied(),
        }
    }

    /// All values.
    fn to_vec(&self, data: &[u8]) -> Vec<u32> {
        (0..self.len()).filter_map(|i| self.get(data, i)).collect()
    }
}

/// A list of structures read in place: the list and where its fields lie.
#[derive(Debug)]
pub(crate) struct Rows<const N: usize> {
    list: Packed,
    fields: [IntField; N],
}

impl Rows<1> {
    /// The items of a list of integers of at most `max_bits` bits.
    fn items(list: List<'_>, max_bits: u32) -> Result<Self> {
        Ok(Rows {
            list: list.packed(),
            fields: [list.int_items(max_bits)?],
        })
    }
}

impl<const N: usize> Rows<N> {
    /// Fields `ids` (each an integer of at most `max_bits` bits) of the items of `list`.
    fn of(list: List<'_>, ids: [i16; N], max_bits: u32) -> Result<Self> {
        let mut fields = [IntField::default(); N];
        for (f, id) in fields.iter_mut().zip(ids) {
            *f = list.int_field(id, max_bits)?;
        }
        Ok(Rows {
            list: list.packed(),
            fields,
        })
    }

    /// Number of rows.
    pub(crate) fn len(&self) -> usize {
        self.list.len() as usize
    }

    /// Field `f` (an index into the ids given) of row `i` (0 past the end).
    #[inline]
    pub(crate) fn get(&self, data: &[u8], i: usize, f: usize) -> u64 {
        self.list.get(data, i as u64, self.fields[f])
    }
}

/// Names or symlink targets, read and decompressed one at a time.
#[derive(Debug)]
pub(crate) enum Strings {
    /// A `list<string>`: each item's bytes at its distance from the list.
    Plain(Rows<2>),
    /// A string table: one buffer, offsets into it, maybe FSST-compressed.
    Table {
        buffer: Range<usize>,
        offsets: Column,
        symbols: Option<SymbolTable>,
    },
}

impl Strings {
    /// From the plain list or, when present, the compact table.
    fn of(plain: View<'_>, compact: View<'_>, data: &[u8], what: &str) -> Result<Self> {
        let Some(table) = compact.optional()? else {
            return Ok(Strings::Plain(Rows::of(list(plain)?, [1, 2], 64)?));
        };
        let buffer = table.field(1).byte_range()?;
        let symbols = table
            .field(2)
            .optional()?
            .map(|s| s.bytes().and_then(SymbolTable::decode))
            .transpose()?;
        let index = list(table.field(3))?;
        let offsets = if table.field(4).bool()? {
            Column::summed(index, data, true, what)?
        } else {
            Column::stored(index)?
        };
        Ok(Strings::Table {
            buffer,
            offsets,
            symbols,
        })
    }

    /// Number of strings.
    pub(crate) fn len(&self) -> usize {
        match self {
            Strings::Plain(rows) => rows.len(),
            Strings::Table { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }

    /// String `i`, decompressed.
    pub(crate) fn get<'d>(&self, data: &'d [u8], i: usize, what: &str) -> Result<Cow<'d, [u8]>> {
        if i >= self.len() {
            return Err(corrupt!("{what} index {i} out of range"));
        }
        match self {
            Strings::Plain(rows) => {
                let start = rows.list.storage().checked_add(rows.get(data, i, 0));
                let end = start.and_then(|s| s.checked_add(rows.get(data, i, 1)));
                match (start, end) {
                    (Some(s), Some(e)) if e <= data.len() as u64 => {
                        Ok(Cow::Borrowed(&data[s as usize..e as usize]))
                    }
                    _ => Err(corrupt!("{what} {i} lies outside the metadata")),
                }
            }
            Strings::Table {
                buffer,
                offsets,
                symbols,
            } => {
                let (start, end) = (offsets.get(data, i), offsets.get(data, i + 1));
                let piece = match (start, end) {
                    (Some(s), Some(e)) if s <= e && e as usize <= buffer.len() => {
                        &data[buffer.start + s as usize..buffer.start + e as usize]
                    }
                    _ => {
                        return Err(corrupt!(
                        "{what} string {i}: range {start:?}..{end:?} outside the {}-byte buffer",
                        buffer.len()
                    ))
                    }
                };
                match symbols {
                    Some(t) => Ok(Cow::Owned(t.decode_string(piece)?)),
                    None => Ok(Cow::Borrowed(piece)),
                }
            }
        }
    }
}

/// Inode fields, in the order [`Tables::inodes`] resolves them.
pub(crate) mod inode_field {
    pub(crate) const MODE: usize = 0;
    pub(crate) const OWNER: usize = 1;
    pub(crate) const GROUP: usize = 2;
    pub(crate) const ATIME: usize = 3;
    pub(crate) const MTIME: usize = 4;
    pub(crate) const CTIME: usize = 5;
    pub(crate) const ATIME_SUBSEC: usize = 6;
    pub(crate) const MTIME_SUBSEC: usize = 7;
    pub(crate) const CTIME_SUBSEC: usize = 8;
    pub(crate) const NLINK_MINUS_ONE: usize = 9;
    /// The thrift field ids of the above.
    pub(crate) const IDS: [i16; 10] = [2, 4, 5, 6, 7, 8, 10, 11, 12, 14];
}

/// The tables of an image's metadata, read in place.
#[derive(Debug)]
pub(crate) struct Tables {
    /// The metadata bytes everything is read from.
    pub(crate) data: Vec<u8>,
    /// Chunks: block, offset, size.
    pub(crate) chunks: Rows<3>,
    /// First entry of each directory, plus a sentinel.
    pub(crate) first_entry: Column,
    /// Parent entry of each directory, when stored (2.3+, unpacked).
    pub(crate) parent_entry: Option<Column>,
    /// Per stored inode, the fields of [`inode_field`].
    pub(crate) inodes: Rows<10>,
    /// Before 2.3: the stored inode of each inode number.
    pub(crate) inode_order: Option<Column>,
    /// Directory entries: name index, inode number.
    pub(crate) entries: Rows<2>,
    /// Index into `chunks` per file content, plus a sentinel.
    pub(crate) chunk_table: Column,
    /// Index into `symlinks` per symlink inode.
    pub(crate) symlink_table: Column,
    /// Distinct owners, groups, modes.
    pub(crate) uids: Vec<u32>,
    pub(crate) gids: Vec<u32>,
    pub(crate) modes: Vec<u32>,
    /// Entry names.
    pub(crate) names: Strings,
    /// Symlink targets.
    pub(crate) symlinks: Strings,
    /// Device numbers per device inode.
    pub(crate) devices: Option<Rows<1>>,
    /// Shared content of each shared file (unpacked).
    pub(crate) shared_files: Vec<u32>,
    /// How many contents the shared files share.
    pub(crate) shared_contents: usize,
    pub(crate) timestamp_base: u64,
    pub(crate) block_size: u32,
    pub(crate) total_fs_size: u64,
    pub(crate) options: FsOptions,
    /// Path separator of the writing system, if not `/`.
    pub(crate) separator: Option<u8>,
    pub(crate) features: Vec<String>,
    pub(crate) category_names: Vec<String>,
    pub(crate) block_categories: Vec<u32>,
    pub(crate) hole_block_index: Option<u32>,
    pub(crate) large_hole_size: Vec<u64>,
    /// Extended attributes, when stored.
    pub(crate) xattrs: Option<StoredXattrs>,
}

/// The extended attributes: the distinct sets decoded, the set of each
/// inode read in place.
#[derive(Debug)]
pub(crate) struct StoredXattrs {
    pub(crate) sets: XattrSets,
    pub(crate) inode_sets: Column,
}

impl StoredXattrs {
    fn open(table: View<'_>, inode_count: usize) -> Result<Self> {
        let sets = hoard_format::xattrs::decode_sets(table)?;
        let inode_sets = Column::stored(list(table.field(5))?)?;
        if inode_sets.len() != inode_count {
            return Err(corrupt!(
                "extended attributes name {} inodes, the image has {inode_count}",
                inode_sets.len()
            ));
        }
        Ok(StoredXattrs { sets, inode_sets })
    }

    /// The attributes of inode `ino` (an inode number in range).
    pub(crate) fn of<'a>(&'a self, data: &[u8], ino: u32) -> Result<Vec<(&'a [u8], &'a [u8])>> {
        let set = self.inode_sets.get(data, ino as usize).unwrap_or(0);
        self.sets
            .get(set)
            .ok_or_else(|| corrupt!("inode {ino}: extended attribute set {set} out of range"))
    }
}

/// The list `v`, refused when longer than the decoder allows.
fn list(v: View<'_>) -> Result<List<'_>> {
    Ok(v.list()?.bounded(MAX_ITEMS)?)
}

fn u32_vec(list: List<'_>, data: &[u8]) -> Result<Vec<u32>> {
    Ok(Column::stored(list)?.to_vec(data))
}

fn texts(v: View<'_>) -> Result<Vec<String>> {
    let Some(l) = v.optional()? else {
        return Ok(Vec::new());
    };
    Ok(list(l)?.map(MAX_ITEMS, |x| {
        Ok(String::from_utf8_lossy(x.bytes()?).into_owned())
    })?)
}

impl Tables {
    /// Finds the tables in the (decompressed) schema and metadata payloads.
    pub(crate) fn open(schema: &[u8], data: Vec<u8>) -> Result<Self> {
        let schema = Schema::decode(schema)?;
        let root = schema.root(&data);
        let f = |id| root.field(id);
        let d = &data[..];

        let options = f(18)
            .optional()?
            .map(|v| -> Result<FsOptions> {
                Ok(FsOptions {
                    mtime_only: v.field(1).bool()?,
                    time_resolution_sec: v.field(2).optional()?.map(|x| x.u32()).transpose()?,
                    packed_chunk_table: v.field(3).bool()?,
                    packed_directories: v.field(4).bool()?,
                    packed_shared_files_table: v.field(5).bool()?,
                    subsecond_resolution_nsec_multiplier: v
                        .field(6)
                        .optional()?
                        .map(|x| x.u32())
                        .transpose()?,
                    has_btime: v.field(7).bool()?,
                    inodes_have_nlink: v.field(8).bool()?,
                })
            })
            .transpose()?
            .unwrap_or_default();

        let chunk_table = if options.packed_chunk_table {
            Column::summed(list(f(4))?, d, false, "chunk table")?
        } else {
            Column::stored(list(f(4))?)?
        };
        let dirs = list(f(2))?;
        let entries_view = f(19).optional()?;
        let v2_2_layout = entries_view.is_none();
        let (first_entry, parent_entry) = if options.packed_directories {
            let firsts = Rows::<1>::of(dirs, [2], 32)?;
            let mut sums = Vec::with_capacity(firsts.len());
            let mut sum = 0u32;
            for i in 0..firsts.len() {
                sum = sum
                    .checked_add(firsts.get(d, i, 0) as u32)
                    .ok_or_else(|| corrupt!("packed directories overflows"))?;
                sums.push(sum);
            }
            (Column::Owned(sums), None)
        } else {
            let rows = Rows::<2>::of(dirs, [2, 1], 32)?;
            (
                Column::Stored(rows.list, rows.fields[0]),
                (!v2_2_layout).then_some(Column::Stored(rows.list, rows.fields[1])),
            )
        };
        let inode_list = list(f(3))?;
        let inodes = Rows::of(inode_list, inode_field::IDS, 64)?;
        let (entries, inode_order) = match entries_view {
            Some(stored) => (Rows::of(list(stored)?, [1, 2], 32)?, None),
            // Before 2.3 the inode list doubles as the entry list, and
            // entry_table_v2_2 maps inode numbers to it.
            None => (
                Rows::of(inode_list, [1, 3], 32)?,
                Some(Column::stored(list(f(5))?)?),
            ),
        };

        let packed_shared = f(20)
            .optional()?
            .map(|l| u32_vec(list(l)?, d))
            .transpose()?
            .unwrap_or_default();
        let inode_count = inode_order.as_ref().map_or(inodes.len(), Column::len);
        let (shared_files, shared_contents) = if options.packed_shared_files_table {
            (
                hoard_format::metadata::unpack_shared_files(&packed_shared, inode_count)?,
                packed_shared.len(),
            )
        } else {
            if packed_shared.windows(2).any(|w| w[0] > w[1]) {
                return Err(corrupt!("shared files table is not sorted"));
            }
            let contents = packed_shared.last().map_or(0, |&l| l as usize + 1);
            (packed_shared, contents)
        };

        let separator = f(26)
            .optional()?
            .map(|x| x.u32())
            .transpose()?
            .and_then(|s| u8::try_from(s).ok())
            .filter(|&s| s != b'/' && s.is_ascii());
        let devices = f(17)
            .optional()?
            .map(|l| Rows::items(list(l)?, 64))
            .transpose()?;
        let large_hole_size = f(35)
            .optional()?
            .map(|l| -> Result<Vec<u64>> {
                let l = list(l)?;
                Ok(l.packed().to_vec(d, l.int_items(64)?))
            })
            .transpose()?
            .unwrap_or_default();

        Ok(Tables {
            chunks: Rows::of(list(f(1))?, [1, 2, 3], 32)?,
            first_entry,
            parent_entry,
            inodes,
            inode_order,
            entries,
            chunk_table,
            symlink_table: Column::stored(list(f(6))?)?,
            uids: u32_vec(list(f(7))?, d)?,
            gids: u32_vec(list(f(8))?, d)?,
            modes: u32_vec(list(f(9))?, d)?,
            names: Strings::of(f(10), f(24), d, "names")?,
            symlinks: Strings::of(f(11), f(25), d, "symlink")?,
            devices,
            shared_files,
            shared_contents,
            timestamp_base: f(12).uint()?,
            block_size: f(15).u32()?,
            total_fs_size: f(16).uint()?,
            options,
            separator,
            features: texts(f(27))?,
            category_names: texts(f(28))?,
            block_categories: f(29)
                .optional()?
                .map(|l| u32_vec(list(l)?, d))
                .transpose()?
                .unwrap_or_default(),
            hole_block_index: f(34).optional()?.map(|x| x.u32()).transpose()?,
            large_hole_size,
            xattrs: f(XATTRS_FIELD)
                .optional()?
                .map(|t| StoredXattrs::open(t, inode_count))
                .transpose()?,
            data,
        })
    }

    /// Number of inodes.
    pub(crate) fn inode_count(&self) -> usize {
        self.inode_order
            .as_ref()
            .map_or(self.inodes.len(), Column::len)
    }

    /// Field `field` (see [`inode_field`]) of inode `ino`, which must be
    /// below [`inode_count`](Self::inode_count).
    pub(crate) fn inode(&self, ino: u32, field: usize) -> Result<u64> {
        let row = match &self.inode_order {
            None => ino as usize,
            Some(order) => {
                let row = order
                    .get(&self.data, ino as usize)
                    .ok_or_else(|| corrupt!("inode {ino} out of range"))?;
                if row as usize >= self.inodes.len() {
                    return Err(corrupt!("entry table value {row} out of range"));
                }
                row as usize
            }
        };
        Ok(self.inodes.get(&self.data, row, field))
    }

    /// Name index and inode number of directory entry `i` (below `entries.len()`).
    #[inline]
    pub(crate) fn entry(&self, i: usize) -> (u32, u32) {
        (
            self.entries.get(&self.data, i, 0) as u32,
            self.entries.get(&self.data, i, 1) as u32,
        )
    }
}
