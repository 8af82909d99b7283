//! Filter rules (`-F`), rsync style: `+ PATTERN` includes, `- PATTERN`
//! excludes, `. FILE` reads more rules from a file. The first rule that
//! matches an entry decides; an entry no rule matches is included. An
//! excluded directory is not entered.
//!
//! Patterns are globs (`*` and `?` stay within one name, `**` crosses
//! directories, `[...]` classes). A pattern with a leading `/` is anchored at
//! the input root; one with another `/` matches the end of the path; one
//! without matches the name alone. A trailing `/` matches directories only.

use crate::{Error, Result};
use globset::{GlobBuilder, GlobMatcher};
use std::path::Path;
use std::sync::Mutex;

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Include,
    Exclude,
}

#[derive(Debug, Clone)]
struct Rule {
    action: Action,
    matcher: GlobMatcher,
    /// Match against the last name only.
    name_only: bool,
    dirs_only: bool,
}

/// A filter decision, recorded for `--debug-filter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Path inside the image.
    pub path: Vec<u8>,
    /// Whether the entry is a directory.
    pub is_dir: bool,
    /// Whether it is included.
    pub included: bool,
}

/// An ordered list of filter rules.
#[derive(Debug, Default)]
pub struct Filter {
    rules: Vec<Rule>,
    /// Every decision, when recording for `--debug-filter`.
    recorded: Option<Mutex<Vec<Decision>>>,
}

impl Filter {
    /// Builds a filter from rules as given to `-F` (each may be a `. FILE`
    /// merge rule).
    pub fn parse<S: AsRef<str>>(rules: &[S]) -> Result<Self> {
        let mut filter = Filter::default();
        for r in rules {
            filter.add(r.as_ref(), 0)?;
        }
        Ok(filter)
    }

    /// Records every decision from now on (see [`Filter::decisions`]).
    pub fn record(&mut self) {
        self.recorded = Some(Mutex::new(Vec::new()));
    }

    /// The recorded decisions, sorted by path.
    pub fn decisions(&self) -> Vec<Decision> {
        let mut d = self
            .recorded
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default();
        d.sort_by(|a, b| a.path.cmp(&b.path));
        d
    }

    fn add(&mut self, rule: &str, depth: usize) -> Result<()> {
        let bad = |msg: &str| Error::Input(format!("filter rule '{rule}': {msg}"));
        let rule_text = rule.trim_end_matches(['\r', '\n']);
        if rule_text.trim().is_empty() || rule_text.starts_with('#') {
            return Ok(());
        }
        let (op, pattern) = rule_text
            .split_once(' ')
            .ok_or_else(|| bad("expected '+ PATTERN', '- PATTERN' or '. FILE'"))?;
        let action = match op {
            "+" => Action::Include,
            "-" => Action::Exclude,
            "." => {
                if depth > 8 {
                    return Err(bad("merge files nested too deeply"));
                }
                let text = std::fs::read_to_string(Path::new(pattern))
                    .map_err(|e| Error::io(Path::new(pattern), e))?;
                for line in text.lines() {
                    self.add(line, depth + 1)?;
                }
                return Ok(());
            }
            _ => return Err(bad("expected '+', '-' or '.' before the pattern")),
        };
        let dirs_only = pattern.ends_with('/');
        let pattern = pattern.trim_end_matches('/');
        if pattern.is_empty() {
            return Err(bad("empty pattern"));
        }
        let (glob, name_only) = if let Some(anchored) = pattern.strip_prefix('/') {
            (anchored.to_string(), false)
        } else if pattern.contains('/') {
            (format!("{{{pattern},**/{pattern}}}"), false)
        } else {
            (pattern.to_string(), true)
        };
        let matcher = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| bad(&e.kind().to_string()))?
            .compile_matcher();
        self.rules.push(Rule {
            action,
            matcher,
            name_only,
            dirs_only,
        });
        Ok(())
    }

    /// Whether the entry at `path` (inside the image, `/`-separated) is
    /// included.
    pub fn includes(&self, path: &[u8], is_dir: bool) -> bool {
        let text = String::from_utf8_lossy(path);
        let name = text.rsplit('/').next().unwrap_or(&text);
        let included = self
            .rules
            .iter()
            .find(|r| {
                (!r.dirs_only || is_dir)
                    && r.matcher
                        .is_match(if r.name_only { name } else { text.as_ref() })
            })
            .is_none_or(|r| r.action == Action::Include);
        if let Some(rec) = &self.recorded {
            rec.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Decision {
                    path: path.to_vec(),
                    is_dir,
                    included,
                });
        }
        included
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(rules: &[&str]) -> Filter {
        Filter::parse(rules).unwrap()
    }

    #[test]
    fn first_matching_rule_decides() {
        let filter = f(&["+ keep.o", "- *.o"]);
        assert!(filter.includes(b"src/keep.o", false));
        assert!(!filter.includes(b"src/main.o", false));
        assert!(filter.includes(b"src/main.c", false));
    }

    #[test]
    fn anchoring_and_directories() {
        let filter = f(&["- /build/", "- cache/x", "- tmp/"]);
        assert!(!filter.includes(b"build", true));
        assert!(filter.includes(b"build", false));
        assert!(filter.includes(b"a/build", true));
        assert!(!filter.includes(b"cache/x", false));
        assert!(!filter.includes(b"a/cache/x", false));
        assert!(!filter.includes(b"a/b/tmp", true));
    }

    #[test]
    fn double_star_crosses_directories() {
        let filter = f(&["+ /src/**/*.rs", "- /src/**"]);
        assert!(filter.includes(b"src/a/b/c.rs", false));
        assert!(!filter.includes(b"src/a/b/c.txt", false));
    }

    #[test]
    fn bad_rules_are_errors() {
        assert!(Filter::parse(&["x *.o"]).is_err());
        assert!(Filter::parse(&["-"]).is_err());
        assert!(Filter::parse(&["- [a"]).is_err());
        assert!(Filter::parse(&[". /nonexistent/rules"]).is_err());
    }
}
