//! The access profile (`analysis_file=FILE`, DwarFS's option): the paths
//! of the files opened through the mount, one a line, relative to the
//! root without a leading `/` (`lib/python3/os.py`), in the order of
//! their first open, each file once; the list `--hotness-list` reads.
//!
//! Each line is written as its file is first opened, so the profile can
//! be read while the image is mounted. A file's path is the one it was
//! first seen under (looked up, or listed with its attributes): a file
//! with several hard links is named once, by that path.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// An open access profile, recording as the mount is used.
#[derive(Debug)]
pub struct Analysis {
    root: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The profile; `None` once a write failed.
    out: Option<File>,
    /// The parent directory and name each inode was first seen under.
    seen: HashMap<u64, (u64, Box<[u8]>)>,
    /// The inodes whose path is written.
    opened: HashSet<u64>,
}

impl Analysis {
    /// Creates (or empties) the profile `path`, for a view whose root is
    /// inode `root`; the error is one line naming the file.
    pub fn create(path: &Path, root: u64) -> Result<Analysis, String> {
        let out = File::create(path)
            .map_err(|e| format!("analysis_file: cannot create '{}': {e}", path.display()))?;
        Ok(Analysis {
            root,
            state: Mutex::new(State {
                out: Some(out),
                seen: HashMap::new(),
                opened: HashSet::new(),
            }),
        })
    }

    /// Notes that inode `ino` is entry `name` of directory `dir` (unless
    /// it was seen under another name before).
    pub fn seen(&self, dir: u64, name: &[u8], ino: u64) {
        if ino == self.root {
            return;
        }
        let mut state = self.lock();
        state.seen.entry(ino).or_insert_with(|| (dir, name.into()));
    }

    /// Notes that inode `ino` was opened: its path is written, the first
    /// time only. A write that fails is reported once; recording stops.
    pub fn opened(&self, ino: u64) {
        let mut state = self.lock();
        if state.out.is_none() || state.opened.contains(&ino) {
            return;
        }
        let Some(mut line) = path_of(&state.seen, self.root, ino) else {
            return;
        };
        state.opened.insert(ino);
        line.push(b'\n');
        let written = state.out.as_mut().map(|out| out.write_all(&line));
        if let Some(Err(e)) = written {
            eprintln!("hoard: error: analysis_file: {e}; no more files are recorded");
            state.out = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The path of `ino` below the root, from the entries seen; `None` if one
/// of its directories was not seen (or the chain does not reach the root).
fn path_of(seen: &HashMap<u64, (u64, Box<[u8]>)>, root: u64, ino: u64) -> Option<Vec<u8>> {
    let mut names = Vec::new();
    let mut at = ino;
    while at != root {
        // Each step goes to an entry seen earlier, so this ends; the bound
        // only guards against surprises.
        if names.len() > seen.len() {
            return None;
        }
        let (dir, name) = seen.get(&at)?;
        names.push(&name[..]);
        at = *dir;
    }
    names.reverse();
    Some(names.join(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_each_opened_file_once_relative_to_the_root() {
        let dir = std::env::temp_dir().join(format!("hoard-analysis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("profile");
        let a = Analysis::create(&file, 7).unwrap();
        a.seen(7, b"lib", 1);
        a.seen(1, b"os.py", 2);
        a.seen(7, b"top", 3);
        a.seen(7, b"link-to-os.py", 2);
        a.opened(2);
        a.opened(3);
        a.opened(2);
        a.opened(99);
        assert_eq!(std::fs::read(&file).unwrap(), b"lib/os.py\ntop\n");
        assert!(Analysis::create(&dir.join("no/such/dir"), 0)
            .unwrap_err()
            .contains("cannot create"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
