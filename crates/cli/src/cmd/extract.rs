//! `hoard extract`: recreate the tree of an image in a directory (the
//! work is hoard-reader's [`extract`](hoard_reader::extract)), or write it
//! as one tar, cpio or zip archive.

use crate::args::ExtractArgs;
use crate::target::of_stack;
use anyhow::{Context, Result};
use hoard_reader::extract::{extract_nodes, is_root, ExtractOptions, Patterns, XattrRestore};
use hoard_reader::open::open;
use hoard_reader::{View, ViewExt, ViewNode as Node};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Extracts the image into the output directory.
pub fn run(args: &ExtractArgs) -> Result<u8> {
    let fs = open(&of_stack(&args.image, &args.layers)?)?.into_stack()?;
    let patterns: Vec<&String> = args.patterns.iter().chain(&args.more_patterns).collect();
    let nodes = Patterns::new(&patterns)?.select(fs.walk(fs.root(), b"")?);
    if let Some(format) = args.format {
        return write_archive(&fs, &nodes, format, args.format_options.as_deref(), args);
    }
    let options = ExtractOptions {
        owners: args.owners || is_root(),
        devices: is_root() && !args.skip_devices,
        specials: !args.skip_specials,
        xattrs: match (args.no_xattrs, is_root()) {
            (true, _) => XattrRestore::None,
            (false, true) => XattrRestore::All,
            (false, false) => XattrRestore::User,
        },
        continue_on_error: args.continue_on_error,
        disk_writers: args.num_disk_writers,
    };
    let errors = crate::pool::with_workers(args.workers, || {
        extract_nodes(&fs, &nodes, &args.output, &options)
    })??;
    for e in &errors {
        eprintln!("hoard: {e}");
    }
    Ok(if errors.is_empty() { 0 } else { 2 })
}

/// Writes `nodes` as one archive to the output file (through a temporary
/// file renamed into place when complete) or to standard output (`-`).
fn write_archive(
    fs: &dyn View,
    nodes: &[Node],
    format: crate::archive::Format,
    options: Option<&str>,
    args: &ExtractArgs,
) -> Result<u8> {
    let with_xattrs = !args.no_xattrs;
    let notes = if args.output.as_os_str() == "-" {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        let notes = crate::archive::write(fs, nodes, format, options, with_xattrs, &mut out)?;
        out.flush().context("standard output")?;
        notes
    } else {
        let path = &args.output;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let context = || format!("cannot write archive '{}'", path.display());
        let tmp = tempfile::Builder::new()
            .prefix(".hoard-")
            .tempfile_in(dir)
            .with_context(context)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
        let notes = crate::archive::write(fs, nodes, format, options, with_xattrs, &mut out)
            .with_context(context)?;
        out.flush().with_context(context)?;
        drop(out);
        // A temporary file is private; the archive gets the usual mode.
        // SAFETY: umask has no preconditions; it is set back at once.
        let umask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o666 & !umask))
            .with_context(context)?;
        tmp.persist(path).with_context(context)?;
        notes
    };
    for n in &notes {
        eprintln!("hoard: {n}");
    }
    Ok(0)
}
