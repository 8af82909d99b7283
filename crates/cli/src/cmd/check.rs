//! `hoard check`: verify an image (see `hoard_reader::check`), or print
//! per-file checksums. Problems are printed one per line; the exit code is
//! 1 if there was any.

use crate::args::{CheckArgs, ChecksumAlgo};
use crate::checksum::file_checksum;
use crate::target::of_image;
use anyhow::Result;
use hoard_reader::open::{open, Form, Target};
use hoard_reader::walk::{self, Node};
use hoard_reader::{check, FileKind, Filesystem};
use rayon::prelude::*;
use std::io::Write;

/// Runs the check (or the checksum listing).
pub fn run(args: &CheckArgs) -> Result<u8> {
    if let Some(algo) = args.checksum {
        let fs = open(&of_image(&args.image, &[], Form::Image)?)?.into_image()?;
        return crate::pool::with_workers(args.workers, || print_checksums(&fs, algo))?;
    }
    let target = of_image(&args.image, &[], Form::Sections)?;
    // A file that cannot be read at all is an error, not a problem found.
    if let Err(e @ hoard_reader::Error::Io(_)) = open(&target) {
        return Err(e.into());
    }
    let report = crate::pool::with_workers(args.workers, || check(args, &target))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for p in &report.found.problems {
            eprintln!("{}: {p}", args.image.image.display());
        }
        let name = args.image.image.display();
        match (&report.found.not_checked, report.found.problems.is_empty()) {
            (Some(why), true) => println!("{name}: no problems found in its sections; {why}"),
            (Some(why), false) => println!("{name}: {why}"),
            (None, true) => println!("{name}: no problems found"),
            (None, false) => {}
        }
    }
    Ok(if report.found.problems.is_empty() {
        0
    } else {
        1
    })
}

/// What a check found, for `--json`.
#[derive(Debug, Default, serde::Serialize)]
struct Report {
    image: String,
    ok: bool,
    #[serde(flatten)]
    found: check::Report,
}

fn check(args: &CheckArgs, target: &Target) -> Report {
    let mut found = check::check_image(
        || open(target)?.into_sections(),
        args.image.cache_size,
        args.full,
    );
    if !found.problems.is_empty() {
        if let Ok(file) = hoard_reader::source::Source::open(&args.image.image, true) {
            check::add_file_damage(&mut found, &file);
        }
    }
    Report {
        image: args.image.image.display().to_string(),
        ok: found.problems.is_empty(),
        found,
    }
}

/// Prints `HASH  PATH` for every regular file, sorted by path.
fn print_checksums(fs: &Filesystem, algo: ChecksumAlgo) -> Result<u8> {
    let nodes: Vec<Node> = walk::walk(fs, fs.root(), b"")?
        .into_iter()
        .filter(|n| n.kind == FileKind::Regular)
        .collect();
    let sums: Vec<Result<String>> = nodes
        .par_iter()
        .map(|n| file_checksum(fs, n.ino, algo))
        .collect();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (node, sum) in nodes.iter().zip(sums) {
        let path = String::from_utf8_lossy(&node.path);
        if path.contains(['\\', '\n']) {
            // The escaped form `sha256sum` writes and reads.
            let escaped = path.replace('\\', "\\\\").replace('\n', "\\n");
            writeln!(out, "\\{}  {escaped}", sum?)?;
        } else {
            writeln!(out, "{}  {path}", sum?)?;
        }
    }
    out.flush()?;
    Ok(0)
}
