//! `hoard check`: verify an image, or print per-file checksums.
//!
//! The check reads every section and verifies its XXH3-64 and SHA-512/256
//! hashes, then checks the metadata: a sound directory tree, every inode
//! reachable, every chunk inside its block. `--full` also decompresses every
//! block and reads every file. Problems are printed one per line; the exit
//! code is 1 if there was any.

use crate::args::{CheckArgs, ChecksumAlgo};
use crate::tree::{self, Node};
use anyhow::Result;
use hoard_reader::{ContentPiece, FileKind, Filesystem, Image};
use rayon::prelude::*;
use sha2::Digest;
use std::io::Write;

/// Runs the check (or the checksum listing).
pub fn run(args: &CheckArgs) -> Result<u8> {
    if let Some(algo) = args.checksum {
        let fs = super::open(&args.image)?;
        return super::with_workers(args.workers, || print_checksums(&fs, algo))?;
    }
    let report = super::with_workers(args.workers, || check(args))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for p in &report.problems {
            eprintln!("{}: {p}", args.image.image.display());
        }
        if report.problems.is_empty() {
            println!("{}: no problems found", args.image.image.display());
        }
    }
    Ok(if report.problems.is_empty() { 0 } else { 1 })
}

/// What a check found.
#[derive(Debug, Default, serde::Serialize)]
struct Report {
    image: String,
    ok: bool,
    sections: usize,
    blocks: usize,
    inodes: usize,
    problems: Vec<String>,
}

fn check(args: &CheckArgs) -> Report {
    let mut report = Report {
        image: args.image.image.display().to_string(),
        ..Report::default()
    };
    let opened = super::open_plain(&args.image);
    match opened {
        Err(e) => {
            // The metadata did not load; still report section damage, which
            // is usually the cause.
            if let Ok(image) = Image::open(
                &args.image.image,
                &hoard_reader::OpenOptions {
                    offset: args.image.offset,
                    no_mmap: false,
                },
            ) {
                check_sections(&image, &mut report);
            }
            if report.problems.is_empty() {
                report.problems.push(e.to_string());
            }
        }
        Ok(fs) => {
            check_sections(fs.image(), &mut report);
            check_metadata(&fs, &mut report);
            if args.full && report.problems.is_empty() {
                check_data(&fs, &mut report);
            }
            report.blocks = fs.blocks().len();
            report.inodes = fs.metadata().inodes.len();
        }
    }
    report.ok = report.problems.is_empty();
    report
}

fn check_sections(image: &Image, report: &mut Report) {
    report.sections = image.sections().len();
    if let Some(p) = image.index_problem() {
        report.problems.push(format!("section index: {p}"));
    }
    let problems: Vec<String> = image
        .sections()
        .par_iter()
        .filter_map(|s| {
            image
                .verified_payload(s)
                .and_then(|_| image.verify_sha(s))
                .err()
                .map(|e| e.to_string())
        })
        .collect();
    report.problems.extend(problems);
}

fn check_metadata(fs: &Filesystem, report: &mut Report) {
    let nodes = match tree::walk(fs, fs.root(), b"") {
        Ok(n) => n,
        Err(e) => {
            report.problems.push(crate::one_line(&e));
            return;
        }
    };
    let mut reached = vec![false; fs.metadata().inodes.len()];
    let dir_paths: std::collections::HashMap<u32, &[u8]> = nodes
        .iter()
        .filter(|n| n.kind == FileKind::Directory)
        .map(|n| (n.ino, n.path.as_slice()))
        .collect();
    for n in &nodes {
        reached[n.ino as usize] = true;
        if n.kind == FileKind::Directory && n.ino != fs.root() {
            match fs.parent(n.ino) {
                Ok(parent) if dir_paths.get(&parent) == Some(&parent_path(&n.path)) => {}
                Ok(parent) => report.problems.push(format!(
                    "directory '{}' has the wrong parent (inode {parent})",
                    String::from_utf8_lossy(&n.path)
                )),
                Err(e) => report.problems.push(e.to_string()),
            }
        }
        if let Err(e) = fs.stat(n.ino) {
            report
                .problems
                .push(format!("'{}': {e}", String::from_utf8_lossy(&n.path)));
        }
    }
    if let Some(ino) = reached.iter().position(|r| !r) {
        report
            .problems
            .push(format!("inode {ino} is not reachable from the root"));
    }
    for i in 0..fs.metadata().chunks.len() {
        if let Err(e) = fs.extent(i) {
            report.problems.push(e.to_string());
        }
    }
}

fn parent_path(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// Decompresses every block and reads every regular file completely.
fn check_data(fs: &Filesystem, report: &mut Report) {
    let problems: Vec<String> = (0..fs.blocks().len() as u32)
        .into_par_iter()
        .filter_map(|b| fs.block(b).err().map(|e| e.to_string()))
        .collect();
    report.problems.extend(problems);
    let files = match fs.files_in_data_order() {
        Ok(f) => f,
        Err(e) => {
            report.problems.push(e.to_string());
            return;
        }
    };
    let problems: Vec<String> = files
        .par_iter()
        .filter_map(|&ino| fs.read_all(ino, |_| Ok(())).err().map(|e| e.to_string()))
        .collect();
    report.problems.extend(problems);
}

/// Prints `HASH  PATH` for every regular file, sorted by path.
fn print_checksums(fs: &Filesystem, algo: ChecksumAlgo) -> Result<u8> {
    let nodes: Vec<Node> = tree::walk(fs, fs.root(), b"")?
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

enum Hasher {
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl Hasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
            Hasher::Xxh3(h) => h.update(data),
        }
    }

    fn hex(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
            Hasher::Xxh3(h) => h.digest128().to_be_bytes().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn file_checksum(fs: &Filesystem, ino: u32, algo: ChecksumAlgo) -> Result<String> {
    let mut hasher = match algo {
        ChecksumAlgo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        ChecksumAlgo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        ChecksumAlgo::Xxh3 => Hasher::Xxh3(Box::default()),
    };
    let zeros = [0u8; 65536];
    fs.read_all(ino, |piece| {
        match piece {
            ContentPiece::Data(d) => hasher.update(d),
            ContentPiece::Hole(mut n) => {
                while n > 0 {
                    let k = n.min(zeros.len() as u64) as usize;
                    hasher.update(&zeros[..k]);
                    n -= k as u64;
                }
            }
        }
        Ok(())
    })?;
    Ok(hasher.hex())
}
