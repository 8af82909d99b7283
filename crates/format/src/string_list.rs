//! [`StringList`]: a list of byte strings kept in one buffer, as the
//! metadata's names and symlink targets are. A name of a few bytes kept
//! as its own `Vec<u8>` cost 24 bytes and a 32-byte allocation; here it
//! costs its bytes and a 4-byte end offset (10 million names: some 600 MB
//! less).

use std::fmt;

/// Byte strings, stored back to back.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringList {
    bytes: Vec<u8>,
    /// Where each string ends in `bytes`.
    ends: Vec<u32>,
}

impl StringList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `s` and returns its index.
    ///
    /// # Panics
    /// If the strings together would pass 4 GiB, which the format's
    /// 32-bit string offsets cannot address (see [`try_push`](Self::try_push)).
    pub fn push(&mut self, s: &[u8]) -> u32 {
        self.try_push(s).expect("strings under 4 GiB")
    }

    /// Appends `s` and returns its index, or `None` (and leaves the list
    /// as it was) if the strings together would pass 4 GiB.
    pub fn try_push(&mut self, s: &[u8]) -> Option<u32> {
        let end = u32::try_from(self.bytes.len() + s.len()).ok()?;
        self.bytes.extend_from_slice(s);
        self.ends.push(end);
        Some((self.ends.len() - 1) as u32)
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the list has no strings.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// String `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)? as usize;
        let start = match i {
            0 => 0,
            _ => self.ends[i - 1] as usize,
        };
        Some(&self.bytes[start..end])
    }

    /// The strings in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        (0..self.len()).map(|i| &self[i])
    }

    /// All strings, back to back.
    pub fn concatenated(&self) -> &[u8] {
        &self.bytes
    }

    /// Total length of the strings in bytes.
    pub fn total_len(&self) -> usize {
        self.bytes.len()
    }

    /// Rewrites every byte of every string with `f` (lengths stay).
    pub fn map_bytes(&mut self, f: impl Fn(u8) -> u8) {
        self.bytes.iter_mut().for_each(|b| *b = f(*b));
    }
}

impl std::ops::Index<usize> for StringList {
    type Output = [u8];

    /// String `i`, which must exist.
    fn index(&self, i: usize) -> &[u8] {
        self.get(i).expect("string index in range")
    }
}

impl<S: AsRef<[u8]>> FromIterator<S> for StringList {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut list = StringList::new();
        for s in iter {
            list.push(s.as_ref());
        }
        list
    }
}

impl fmt::Debug for StringList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|s| String::from_utf8_lossy(s)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_as_pushed() {
        let mut list = StringList::new();
        assert!(list.is_empty());
        assert_eq!(list.push(b"usr"), 0);
        assert_eq!(list.push(b""), 1);
        assert_eq!(list.push(b"lib64"), 2);
        assert_eq!(list.len(), 3);
        assert_eq!(list.get(0), Some(&b"usr"[..]));
        assert_eq!(list.get(1), Some(&b""[..]));
        assert_eq!(&list[2], b"lib64");
        assert_eq!(list.get(3), None);
        assert_eq!(list.concatenated(), b"usrlib64");
        assert_eq!(list.total_len(), 8);
        assert_eq!(list.try_push(b"x"), Some(3));
        let again: StringList = list.iter().collect();
        assert_eq!(again, list);
        assert_eq!(format!("{list:?}"), r#"["usr", "", "lib64", "x"]"#);
    }

    #[test]
    fn bytes_are_rewritten_in_place() {
        let mut list: StringList = ["a\\b", "c"].into_iter().collect();
        list.map_bytes(|b| if b == b'\\' { b'/' } else { b });
        assert_eq!(&list[0], b"a/b");
        assert_eq!(&list[1], b"c");
    }
}
