//! `hoard check`: verify an image (see `hoard_reader::check`), or print
//! per-file checksums. Problems are printed one per line; the exit code is
//! 1 if there was any.

use crate::args::{CheckArgs, ChecksumAlgo};
use crate::checksum::file_checksum;
use anyhow::{Context, Result};
use hoard_reader::walk::{self, Node};
use hoard_reader::{check, FileKind, Filesystem, Image};
use rayon::prelude::*;
use std::io::Write;

/// Runs the check (or the checksum listing).
pub fn run(args: &CheckArgs) -> Result<u8> {
    if let Some(algo) = args.checksum {
        let fs = super::open(&args.image)?;
        return super::with_workers(args.workers, || print_checksums(&fs, algo))?;
    }
    let options = open_options(args)?;
    // A file that cannot be read at all is an error, not a problem found.
    if let Err(e @ hoard_reader::Error::Io(_)) = Image::open(&args.image.image, &options) {
        return Err(e)
            .with_context(|| format!("cannot open image '{}'", args.image.image.display()));
    }
    let report = super::with_workers(args.workers, || check(args, &options))?;
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

fn open_options(args: &CheckArgs) -> Result<hoard_reader::OpenOptions> {
    Ok(hoard_reader::OpenOptions {
        offset: args.image.offset,
        no_mmap: false,
        image_size: None,
        trust: crate::trust::trusted_keys(&args.image.trust)?,
        expect: args.image.expect.expectations(),
        identities: crate::trust::identities(
            &args.image.identity,
            args.image.passphrase_file.as_deref(),
        )?,
    })
}

fn check(args: &CheckArgs, options: &hoard_reader::OpenOptions) -> Report {
    let mut found = check::check_image(
        || Image::open(&args.image.image, options),
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
