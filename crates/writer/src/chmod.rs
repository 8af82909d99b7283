//! `--chmod`: permission changes in the syntax of chmod(1), applied to every
//! entry. Each comma-separated clause is octal (`0644`) or symbolic
//! (`[ugoa]*[+-=][rwxXst]*`); a leading `D` or `F` limits a clause to
//! directories or to everything else. `norm` stands for `ug-st,=Xr`.
//! Without `ugoa`, a clause applies to all (no umask is involved).

use hoard_format::mode::{S_IFDIR, S_IFMT};

/// Which entries a clause applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    All,
    Dirs,
    NonDirs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Set all permission bits.
    Octal(u32),
    /// `who` mask, operator, permission letters.
    Symbolic { who: u32, op: u8, perms: Vec<u8> },
}

/// A parsed `--chmod` specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chmod {
    clauses: Vec<(Scope, Change)>,
}

impl Chmod {
    /// Parses a specification.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = if spec == "norm" { "ug-st,=Xr" } else { spec };
        let clauses = spec
            .split(',')
            .map(|c| clause(c).map_err(|e| format!("--chmod '{spec}': clause '{c}': {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Chmod { clauses })
    }

    /// Applies the changes to `mode` (type bits kept).
    pub fn apply(&self, mode: u32) -> u32 {
        let is_dir = mode & S_IFMT == S_IFDIR;
        let mut perm = mode & 0o7777;
        for (scope, change) in &self.clauses {
            let applies = match scope {
                Scope::All => true,
                Scope::Dirs => is_dir,
                Scope::NonDirs => !is_dir,
            };
            if applies {
                perm = change.apply(perm, is_dir);
            }
        }
        (mode & S_IFMT) | perm
    }
}

fn clause(c: &str) -> Result<(Scope, Change), String> {
    let (scope, rest) = match c.as_bytes().first() {
        Some(b'D') => (Scope::Dirs, &c[1..]),
        Some(b'F') => (Scope::NonDirs, &c[1..]),
        _ => (Scope::All, c),
    };
    if rest.is_empty() {
        return Err("empty".into());
    }
    if rest.bytes().all(|b| b.is_ascii_digit()) {
        let v = u32::from_str_radix(rest, 8).map_err(|_| "invalid octal mode")?;
        if v > 0o7777 {
            return Err("octal mode above 7777".into());
        }
        return Ok((scope, Change::Octal(v)));
    }
    let op_at = rest
        .find(['+', '-', '='])
        .ok_or("expected an operator (+, - or =)")?;
    let mut who = 0;
    for b in rest[..op_at].bytes() {
        who |= match b {
            b'u' => 0o4700,
            b'g' => 0o2070,
            b'o' => 0o1007,
            b'a' => 0o7777,
            _ => return Err(format!("unknown class '{}'", b as char)),
        };
    }
    if who == 0 {
        who = 0o7777;
    }
    let op = rest.as_bytes()[op_at];
    let perms = rest.as_bytes()[op_at + 1..].to_vec();
    if let Some(b) = perms.iter().find(|b| !b"rwxXst".contains(b)) {
        return Err(format!("unknown permission '{}'", *b as char));
    }
    Ok((scope, Change::Symbolic { who, op, perms }))
}

impl Change {
    fn apply(&self, perm: u32, is_dir: bool) -> u32 {
        match self {
            Change::Octal(v) => *v,
            Change::Symbolic { who, op, perms } => {
                let any_exec = perm & 0o111 != 0;
                let mut bits = 0;
                for p in perms {
                    bits |= match p {
                        b'r' => 0o444,
                        b'w' => 0o222,
                        b'x' => 0o111,
                        b'X' if is_dir || any_exec => 0o111,
                        b's' => 0o6000,
                        b't' => 0o1000,
                        _ => 0,
                    };
                }
                let bits = bits & who;
                match op {
                    b'+' => perm | bits,
                    b'-' => perm & !bits,
                    // `=` clears the classes named (but keeps the setuid and
                    // setgid bits of directories, as chmod does).
                    _ => {
                        let keep = if is_dir { 0o6000 } else { 0 };
                        (perm & !(who & !keep)) | bits
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use hoard_format::mode::{S_IFDIR as DIR, S_IFREG as REG};

    fn ch(spec: &str, mode: u32) -> u32 {
        Chmod::parse(spec).unwrap().apply(mode)
    }

    #[test]
    fn symbolic_and_octal() {
        assert_eq!(ch("u+x", REG | 0o644), REG | 0o744);
        assert_eq!(ch("go-w", REG | 0o666), REG | 0o644);
        assert_eq!(ch("a=r", REG | 0o777), REG | 0o444);
        assert_eq!(ch("0600", REG | 0o4777), REG | 0o600);
        assert_eq!(ch("u+s,g+s", REG | 0o755), REG | 0o6755);
        assert_eq!(ch("+t", DIR | 0o777), DIR | 0o1777);
    }

    #[test]
    fn scopes_and_capital_x() {
        assert_eq!(ch("D0755,F0644", DIR | 0o700), DIR | 0o755);
        assert_eq!(ch("D0755,F0644", REG | 0o700), REG | 0o644);
        assert_eq!(ch("a+X", REG | 0o644), REG | 0o644);
        assert_eq!(ch("a+X", REG | 0o744), REG | 0o755);
        assert_eq!(ch("a+X", DIR | 0o600), DIR | 0o711);
    }

    #[test]
    fn norm() {
        assert_eq!(ch("norm", REG | 0o4750), REG | 0o555);
        assert_eq!(ch("norm", REG | 0o644), REG | 0o444);
        assert_eq!(ch("norm", REG | 0o700), REG | 0o555);
        assert_eq!(ch("norm", DIR | 0o700), DIR | 0o555);
    }

    #[test]
    fn errors() {
        for bad in ["", "u", "q+r", "u+z", "99999", "D"] {
            assert!(Chmod::parse(bad).is_err(), "{bad}");
        }
    }
}
