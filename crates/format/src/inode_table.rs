//! The inode table, kept as one column per field of [`InodeData`], a
//! column all zeros taking no memory: most images keep only the
//! modification time, and one owner and group. A `Vec<InodeData>` took
//! 80 bytes an inode; on 10 million files that is 800 MB for mostly zeros.

use crate::metadata::InodeData;

/// One field of every inode; empty while every value so far is zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Column<T>(Vec<T>);

impl<T: Copy + Default + PartialEq> Column<T> {
    /// Stores `value` in row `row` of a table of `rows` rows (`row ==
    /// rows` appends), making room for `room` rows when the column fills.
    fn store(&mut self, row: usize, value: T, rows: usize, room: usize) {
        if self.0.is_empty() {
            if value == T::default() {
                return;
            }
            self.0.reserve_exact(room.max(rows + 1));
            self.0.resize(rows, T::default());
        }
        if row == self.0.len() {
            self.0.push(value);
        } else {
            self.0[row] = value;
        }
    }

    fn get(&self, row: usize) -> T {
        self.0.get(row).copied().unwrap_or_default()
    }
}

/// Every inode's [`InodeData`], indexed by inode number. Two tables are
/// equal, and print alike, when their inodes are, however they are kept.
#[derive(Clone, Default)]
pub struct InodeTable {
    len: usize,
    /// How many inodes are expected, for a column's room when it fills.
    expected: usize,
    /// Mode, owner and group indices, and the link count minus one.
    narrow: [Column<u32>; 4],
    /// Time offsets (a, m, c, b) and their sub-second parts.
    wide: [Column<u64>; 8],
}

impl InodeTable {
    /// Number of inodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no inodes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends an inode.
    pub fn push(&mut self, inode: InodeData) {
        self.store(self.len, &inode);
        self.len += 1;
    }

    /// Stores `inode` as inode `ino` (`ino == len` appends).
    fn store(&mut self, ino: usize, inode: &InodeData) {
        let (narrow, wide) = split(inode);
        let (rows, room) = (self.len, self.expected);
        for (column, value) in self.narrow.iter_mut().zip(narrow) {
            column.store(ino, value, rows, room);
        }
        for (column, value) in self.wide.iter_mut().zip(wide) {
            column.store(ino, value, rows, room);
        }
    }

    /// Inode `ino`, if there is one.
    pub fn get(&self, ino: usize) -> Option<InodeData> {
        (ino < self.len).then(|| {
            join(
                self.narrow.each_ref().map(|c| c.get(ino)),
                self.wide.each_ref().map(|c| c.get(ino)),
            )
        })
    }

    /// Field `field` of inode `ino`, the fields numbered in the order of
    /// thrift's `inode_data`: mode, owner and group indices (0-2), access,
    /// modification, change and birth time offsets (3-6), their sub-second
    /// parts (7-10), link count minus one (11).
    pub fn field(&self, ino: usize, field: usize) -> u64 {
        match field {
            0..=2 => u64::from(self.narrow[field].get(ino)),
            3..=10 => self.wide[field - 3].get(ino),
            11 => u64::from(self.narrow[3].get(ino)),
            _ => 0,
        }
    }

    /// Every inode, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = InodeData> + '_ {
        (0..self.len).map(|ino| self.get(ino).unwrap_or_default())
    }

    /// Changes every inode with `change`.
    pub fn update(&mut self, mut change: impl FnMut(&mut InodeData)) {
        for ino in 0..self.len {
            let mut inode = self.get(ino).unwrap_or_default();
            change(&mut inode);
            self.store(ino, &inode);
        }
    }
}

impl PartialEq for InodeTable {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for InodeTable {}

impl std::fmt::Debug for InodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<InodeData> for InodeTable {
    fn from_iter<I: IntoIterator<Item = InodeData>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut table = InodeTable {
            expected: iter.size_hint().0,
            ..InodeTable::default()
        };
        for inode in iter {
            table.push(inode);
        }
        table
    }
}

fn split(i: &InodeData) -> ([u32; 4], [u64; 8]) {
    (
        [
            i.mode_index,
            i.owner_index,
            i.group_index,
            i.nlink_minus_one,
        ],
        [
            i.atime_offset,
            i.mtime_offset,
            i.ctime_offset,
            i.btime_offset,
            i.atime_subsec,
            i.mtime_subsec,
            i.ctime_subsec,
            i.btime_subsec,
        ],
    )
}

fn join(n: [u32; 4], w: [u64; 8]) -> InodeData {
    InodeData {
        mode_index: n[0],
        owner_index: n[1],
        group_index: n[2],
        nlink_minus_one: n[3],
        atime_offset: w[0],
        mtime_offset: w[1],
        ctime_offset: w[2],
        btime_offset: w[3],
        atime_subsec: w[4],
        mtime_subsec: w[5],
        ctime_subsec: w[6],
        btime_subsec: w[7],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inodes_read_back_and_zero_columns_stay_empty() {
        let inodes: Vec<InodeData> = (0..100u32)
            .map(|n| InodeData {
                mode_index: n % 3,
                mtime_offset: u64::from(n) * 1000,
                // Nonzero only from inode 60 on: the column fills then.
                ctime_offset: u64::from(n.saturating_sub(59)),
                ..InodeData::default()
            })
            .collect();
        let mut table: InodeTable = inodes.iter().copied().collect();
        assert_eq!(table.len(), 100);
        assert!(table.iter().eq(inodes.iter().copied()));
        assert_eq!(table.get(100), None);
        assert!(table.wide[0].0.is_empty(), "atime is all zeros");
        assert!(table.narrow[1].0.is_empty(), "owner is all zeros");

        table.update(|i| i.owner_index = 7);
        table.update(|i| i.ctime_offset = 0);
        assert!(table
            .iter()
            .all(|i| i.owner_index == 7 && i.ctime_offset == 0));
        assert_eq!(table.get(99).unwrap().mtime_offset, 99_000);

        // Equal inodes make equal tables, whatever their columns hold.
        let zeroed: InodeTable = table.iter().collect();
        assert!(zeroed.wide[2].0.is_empty() && !table.wide[2].0.is_empty());
        assert_eq!(zeroed, table);
        assert_eq!(format!("{zeroed:?}"), format!("{table:?}"));
    }
}
