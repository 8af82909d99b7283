//! `hoard ls`: list entries, optionally long and recursive.

use crate::args::LsArgs;
use crate::target::of_stack;
use anyhow::Result;
use hoard_reader::open::open;
use hoard_reader::walk;
use hoard_reader::{FileKind, Stat, View, ViewExt, ViewNode as Node};
use std::io::Write;

/// Lists the entries of a directory (or one file) of an image (or of a
/// stack of layers).
pub fn run(args: &LsArgs) -> Result<u8> {
    let fs = open(&of_stack(&args.image, &args.layers)?)?.into_stack()?;
    let path = args.path.as_deref().unwrap_or("");
    let ino = fs.lookup_path(path)?;
    let base = path.trim_matches('/').as_bytes().to_vec();
    let nodes: Vec<Node> = if args.recursive {
        fs.walk(ino, &base)?.into_iter().skip(1).collect()
    } else if fs.stat(ino)?.kind == FileKind::Directory {
        fs.entries(ino)?
            .into_iter()
            .map(|e| {
                walk::check_name(&e.name, &base)?;
                Ok(Node {
                    path: if args.path.is_some() {
                        walk::join(&base, &e.name)
                    } else {
                        e.name
                    },
                    kind: e.kind,
                    ino: e.ino,
                })
            })
            .collect::<Result<_>>()?
    } else {
        vec![Node {
            path: base,
            ino,
            kind: fs.stat(ino)?.kind,
        }]
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for node in &nodes {
        if args.long {
            writeln!(out, "{}", long_line(&fs, node)?)?;
        } else {
            writeln!(out, "{}", String::from_utf8_lossy(&node.path))?;
        }
    }
    out.flush()?;
    Ok(0)
}

fn long_line(fs: &dyn View, node: &Node) -> Result<String> {
    let st = fs.stat(node.ino)?;
    let size = match st.kind {
        FileKind::CharDevice | FileKind::BlockDevice => format!(
            "{}, {}",
            hoard_reader::inode::dev_major(st.rdev),
            hoard_reader::inode::dev_minor(st.rdev)
        ),
        _ => st.size.to_string(),
    };
    // `@` after the mode marks entries with extended attributes.
    let xattrs = if fs.xattrs(node.ino)?.is_empty() {
        ""
    } else {
        "@"
    };
    let mut line = format!(
        "{}{xattrs} {:>3} {:>5} {:>5} {:>10} {} {}",
        mode_string(&st),
        st.nlink,
        st.uid,
        st.gid,
        size,
        format_time(st.mtime.sec),
        String::from_utf8_lossy(&node.path)
    );
    if st.kind == FileKind::Symlink {
        line.push_str(" -> ");
        line.push_str(&String::from_utf8_lossy(&fs.readlink(node.ino)?));
    }
    Ok(line)
}

/// `ls -l` style mode string, e.g. `-rwsr-xr-x`.
pub fn mode_string(st: &Stat) -> String {
    let m = st.mode;
    let mut s = String::with_capacity(10);
    s.push(st.kind.letter());
    let special = [(0o4000, 's', 'S'), (0o2000, 's', 'S'), (0o1000, 't', 'T')];
    for (i, (bit, set_x, set_nox)) in special.iter().enumerate() {
        let shift = 6 - 3 * i;
        s.push(if m & (0o4 << shift) != 0 { 'r' } else { '-' });
        s.push(if m & (0o2 << shift) != 0 { 'w' } else { '-' });
        let x = m & (0o1 << shift) != 0;
        s.push(match (m & bit != 0, x) {
            (true, true) => *set_x,
            (true, false) => *set_nox,
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// Formats seconds since the epoch as `YYYY-MM-DD HH:MM` (UTC).
pub fn format_time(sec: i64) -> String {
    let (year, month, day) = super::time::civil_from_days(sec.div_euclid(86_400));
    let rem = sec.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_utc_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00");
        assert_eq!(format_time(4_102_444_800), "2100-01-01 00:00");
        assert_eq!(format_time(-86_400), "1969-12-31 00:00");
    }
}
