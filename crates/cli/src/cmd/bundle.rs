//! `hoard bundle`: one executable file that runs a program packed in an
//! image. It is the runtime (`hoard-runtime`, found beside this program
//! unless `--runtime` names one), the bundle note (the entry and where the
//! image starts, see `hoard_runtime::note`) and the image, taken as it is
//! when the input is an image, else built with the create options.

use super::create;
use crate::args::BundleArgs;
use anyhow::{anyhow, bail, Context, Result};
use hoard_reader::{open, FileKind, Form, Target};
use hoard_runtime::note::{elf_end, Note};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The runtime's file name, beside the `hoard` binary.
const RUNTIME: &str = "hoard-runtime";

/// Writes the bundle; returns the exit code (2 when the image was built
/// with entries left out, as `hoard create`).
pub fn run(args: &BundleArgs) -> Result<u8> {
    let c = &args.create;
    if c.recompress.is_some() || !c.base.is_empty() || c.layers.is_some() {
        bail!("bundle takes no --recompress, --base or --layers: the runtime runs one whole image");
    }
    let Some(output) = c.output.clone() else {
        bail!("bundle needs -o APP: the file to write");
    };
    if output.exists() && !c.force {
        bail!("'{}' exists (--force to overwrite it)", output.display());
    }
    let runtime_path = match &args.runtime {
        Some(path) => path.clone(),
        None => beside_this_program()?,
    };
    let runtime = read_runtime(&runtime_path)?;
    let note = Note::new(runtime.len() as u64, &args.entry).map_err(anyhow::Error::msg)?;
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let work = tempfile::Builder::new()
        .prefix(".hoard-bundle")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot write in '{}'", parent.display()))?;
    let (image, code) = if is_image(&c.input) {
        (c.input.clone(), 0)
    } else {
        let mut build = c.clone();
        let built = work.path().join("image.dwarfs");
        build.output = Some(built.clone());
        let code = create::run(&build)?;
        (built, code)
    };
    check_entry(&image, &args.entry)?;
    let mut out = tempfile::NamedTempFile::new_in(&parent)?;
    out.write_all(&runtime)?;
    out.write_all(&note.to_bytes())?;
    std::io::copy(&mut File::open(&image)?, &mut out)
        .with_context(|| format!("cannot copy '{}'", image.display()))?;
    out.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o755))?;
    if c.fsync {
        out.as_file().sync_all()?;
    }
    out.persist(&output)
        .with_context(|| format!("cannot write '{}'", output.display()))?;
    Ok(code)
}

/// `hoard-runtime` in the directory of the running `hoard`.
fn beside_this_program() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let runtime = exe.with_file_name(RUNTIME);
    if !runtime.is_file() {
        bail!(
            "no runtime at '{}' (install it with scripts/install.sh, or give --runtime FILE)",
            runtime.display()
        );
    }
    Ok(runtime)
}

/// The runtime's bytes: an ELF file that ends where its headers say
/// (not a bundle already).
fn read_runtime(path: &Path) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("cannot open '{}'", path.display()))?;
    let end = elf_end(&file).map_err(|e| anyhow!("'{}': {e}", path.display()))?;
    let mut bytes = Vec::new();
    (&file).read_to_end(&mut bytes)?;
    if end != bytes.len() as u64 {
        bail!(
            "'{}' is not a runtime: {} bytes follow its ELF file",
            path.display(),
            bytes.len() as u64 - end.min(bytes.len() as u64)
        );
    }
    Ok(bytes)
}

/// Whether `input` is a file that starts with a DwarFS image.
fn is_image(input: &Path) -> bool {
    let mut head = [0u8; 64];
    File::open(input)
        .and_then(|mut f| f.read(&mut head))
        .is_ok_and(|n| hoard_format::section::parse_version(&head[..n]).is_ok())
}

/// Checks that the image at `image` opens and that `entry` in it is a
/// program: an executable regular file, or a symlink.
fn check_entry(image: &Path, entry: &Path) -> Result<()> {
    let mut target = Target::new(vec![image.to_path_buf()]);
    target.form = Form::Image;
    let fs = open::open(&target)
        .and_then(|o| o.into_image())
        .with_context(|| format!("cannot open the image '{}'", image.display()))?;
    if fs.is_delta() {
        bail!(
            "'{}' is a layer: a bundle runs one whole image",
            image.display()
        );
    }
    let shown = entry.display();
    let ino = fs
        .lookup_path_bytes(entry.as_os_str().as_bytes())
        .map_err(|_| anyhow!("the entry '{shown}' is not in the image"))?;
    let stat = fs.stat(ino)?;
    match stat.kind {
        FileKind::Symlink => Ok(()),
        FileKind::Regular if stat.mode & 0o111 != 0 => Ok(()),
        FileKind::Regular => bail!("the entry '{shown}' is not executable"),
        _ => bail!("the entry '{shown}' is not a file"),
    }
}
