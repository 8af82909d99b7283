//! `hoard cat`: file contents to standard output.

use crate::args::CatArgs;
use crate::target::of_stack;
use anyhow::{bail, Result};
use hoard_reader::open::open;
use hoard_reader::{ContentPiece, FileKind, View, ViewExt};
use std::io::Write;

/// Writes each named file's contents (of an image, or of a stack of
/// layers) to stdout.
pub fn run(args: &CatArgs) -> Result<u8> {
    let fs = open(&of_stack(&args.image, &args.layers)?)?.into_stack()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    for path in &args.paths {
        let ino = fs.lookup_path(path)?;
        if fs.stat(ino)?.kind != FileKind::Regular {
            bail!("{path}: not a regular file");
        }
        let zeros = [0u8; 65536];
        let at = fs.locate(ino)?;
        at.fs.read_all(at.ino, |piece| {
            let r = match piece {
                ContentPiece::Data(d) => out.write_all(d),
                ContentPiece::Hole(mut n) => {
                    let mut r = Ok(());
                    while n > 0 && r.is_ok() {
                        let k = n.min(zeros.len() as u64) as usize;
                        r = out.write_all(&zeros[..k]);
                        n -= k as u64;
                    }
                    r
                }
            };
            r.map_err(|e| hoard_reader::Error::Io(format!("stdout: {e}")))
        })?;
    }
    out.flush()?;
    Ok(0)
}
