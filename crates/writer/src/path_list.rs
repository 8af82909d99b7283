//! Lists of files in the image, in an order that matters: the hot files
//! of `--hotness-list` and the order of `--order=explicit:file=FILE`.
//! A list is a text file of paths relative to the input's root, one a
//! line, as `hoard mount -o analysis_file=FILE` (and DwarFS's driver)
//! writes them; a leading `/` is allowed. Empty lines are skipped, and a
//! path given twice counts where it is first given.

use crate::dedupe::Content;
use crate::tree::{Kind, Tree};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A list of paths in the image, in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathList {
    /// The file it was read from (for messages).
    file: PathBuf,
    /// The paths, without a leading slash, each once, in order.
    paths: Vec<Vec<u8>>,
}

impl PathList {
    /// Reads the list in `file`; an error is one line naming it.
    pub fn read(file: &Path) -> Result<Self, String> {
        let text = std::fs::read(file)
            .map_err(|e| format!("cannot read the list of files '{}': {e}", file.display()))?;
        Ok(PathList::parse(file, &text))
    }

    /// The list `text`, as read from `file`.
    pub fn parse(file: &Path, text: &[u8]) -> Self {
        let mut seen = HashSet::new();
        let paths = text
            .split(|&b| b == b'\n')
            .map(|line| {
                let start = line.iter().position(|&b| b != b'/').unwrap_or(line.len());
                &line[start..]
            })
            .filter(|path| !path.is_empty() && seen.insert(*path))
            .map(<[u8]>::to_vec)
            .collect();
        PathList {
            file: file.to_path_buf(),
            paths,
        }
    }

    /// The file the list was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Number of distinct paths listed.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether no path is listed.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Where each of `contents` (of `tree`) comes in the list: the first
    /// place any of its files is listed at, by any of its names.
    pub(crate) fn rank(&self, tree: &Tree, contents: &[Content]) -> Ranks {
        let mut of_file = vec![u32::MAX; tree.files.len()];
        let mut unmatched = 0;
        for (place, path) in (0u32..).zip(&self.paths) {
            match lookup(tree, path).map(|e| &tree.entries[e].kind) {
                Some(Kind::File { file }) if *file < of_file.len() => {
                    of_file[*file] = of_file[*file].min(place);
                }
                _ => unmatched += 1,
            }
        }
        let of_content = contents
            .iter()
            .map(|c| {
                let place = c.files.iter().filter_map(|&f| of_file.get(f)).min();
                place.copied().filter(|&p| p != u32::MAX)
            })
            .collect();
        Ranks {
            of_content,
            unmatched,
        }
    }
}

/// The places of contents in a [`PathList`].
#[derive(Debug, Clone)]
pub(crate) struct Ranks {
    /// The place of each content in the list; None for one not listed.
    pub(crate) of_content: Vec<Option<u32>>,
    /// Paths listed that name no regular file of the tree.
    pub(crate) unmatched: usize,
}

impl Ranks {
    /// `ids` (contents) with the listed ones first, in the list's order,
    /// the others after them in the order they had.
    pub(crate) fn put_first(&self, ids: Vec<usize>) -> Vec<usize> {
        let (mut listed, rest): (Vec<usize>, Vec<usize>) = ids
            .into_iter()
            .partition(|&c| self.of_content.get(c).is_some_and(Option::is_some));
        listed.sort_by_key(|&c| self.of_content[c]);
        listed.extend(rest);
        listed
    }
}

/// The entry at `path` (`/`-separated, relative to the root), walking
/// the directories' children (sorted by name).
fn lookup(tree: &Tree, path: &[u8]) -> Option<usize> {
    let mut at = 0usize;
    for name in path.split(|&b| b == b'/').filter(|n| !n.is_empty()) {
        let Kind::Dir { children } = &tree.entries.get(at)?.kind else {
            return None;
        };
        let i = children
            .binary_search_by(|&c| tree.entries[c].name.as_slice().cmp(name))
            .ok()?;
        at = children[i];
    }
    Some(at)
}

/// The [`Ranks`] of every list a build uses, each list ranked once.
#[derive(Debug, Default)]
pub(crate) struct RankedLists(Vec<(Arc<PathList>, Ranks)>);

impl RankedLists {
    /// The ranks of `list`'s files among `contents` (of `tree`).
    pub(crate) fn get(
        &mut self,
        list: &Arc<PathList>,
        tree: &Tree,
        contents: &[Content],
    ) -> &Ranks {
        let i = match self.0.iter().position(|(l, _)| Arc::ptr_eq(l, list)) {
            Some(i) => i,
            None => {
                self.0.push((Arc::clone(list), list.rank(tree, contents)));
                self.0.len() - 1
            }
        };
        &self.0[i].1
    }

    /// What each list matched.
    pub(crate) fn reports(&self) -> Vec<ListReport> {
        self.0
            .iter()
            .map(|(list, ranks)| ListReport {
                file: list.file.clone(),
                listed: list.len(),
                unmatched: ranks.unmatched,
            })
            .collect()
    }
}

/// What a list a build used matched: how many of its paths the tree does
/// not have as regular files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListReport {
    /// The file it was read from.
    pub file: PathBuf,
    /// Distinct paths listed.
    pub listed: usize,
    /// Paths listed that name no regular file of the tree.
    pub unmatched: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Attrs, Entry, File, Source};

    fn tree(paths: &[&str]) -> Tree {
        let dir = || Kind::Dir {
            children: Default::default(),
        };
        let mut t = Tree {
            entries: vec![Entry {
                name: Default::default(),
                parent: 0,
                kind: dir(),
                attrs: Attrs::default(),
                xattrs: Default::default(),
            }],
            ..Default::default()
        };
        for path in paths {
            let mut at = 0;
            let names: Vec<&str> = path.split('/').collect();
            for (n, name) in names.iter().enumerate() {
                let existing = match &t.entries[at].kind {
                    Kind::Dir { children } => children
                        .iter()
                        .copied()
                        .find(|&c| t.entries[c].name.as_slice() == name.as_bytes()),
                    _ => unreachable!(),
                };
                at = match existing {
                    Some(e) => e,
                    None => {
                        let kind = if n + 1 == names.len() {
                            t.files.push(File {
                                source: Source::Entry(t.entries.len() as u32),
                                size: 1,
                                links: 1,
                                allocated: true,
                            });
                            Kind::File {
                                file: t.files.len() - 1,
                            }
                        } else {
                            dir()
                        };
                        t.entries.push(Entry {
                            name: name.as_bytes().into(),
                            parent: at,
                            kind,
                            attrs: Attrs::default(),
                            xattrs: Default::default(),
                        });
                        let new = t.entries.len() - 1;
                        if let Kind::Dir { children } = &mut t.entries[at].kind {
                            children.push(new);
                        }
                        new
                    }
                };
            }
        }
        let names: Vec<Vec<u8>> = t.entries.iter().map(|e| e.name.to_vec()).collect();
        for e in &mut t.entries {
            if let Kind::Dir { children } = &mut e.kind {
                children.sort_by(|&a, &b| names[a].cmp(&names[b]));
            }
        }
        t
    }

    fn contents(t: &Tree) -> Vec<Content> {
        (0..t.files.len())
            .map(|f| Content {
                size: 1,
                files: smallvec::smallvec![f],
                nilsimsa: None,
            })
            .collect()
    }

    #[test]
    fn lists_place_files_by_first_mention_and_count_unknown_paths() {
        let t = tree(&["a/x.py", "a/y.py", "b/z.so", "c"]);
        let list = PathList::parse(
            Path::new("hot"),
            b"/b/z.so\na/y.py\n\nnope\na\n//a/y.py\nc\n",
        );
        assert_eq!(list.len(), 5);
        let ranks = list.rank(&t, &contents(&t));
        assert_eq!(ranks.of_content, [None, Some(1), Some(0), Some(4)]);
        assert_eq!(ranks.unmatched, 2, "a missing path and a directory");
        assert_eq!(ranks.put_first(vec![0, 1, 2, 3]), [2, 1, 3, 0]);
    }
}
