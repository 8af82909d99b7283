//! Repairing an image file: the repaired copy is written to a temporary
//! file beside the target, checked, and only then renamed into place.

use crate::{Damage, Error, Recovery, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// What a repair did.
#[derive(Debug)]
pub struct Repair {
    /// The damage found in the input.
    pub damage: Damage,
    /// The layout of its recovery data.
    pub layout: crate::Layout,
    /// Whether `output` was written (not when nothing was damaged and the
    /// output is the input itself).
    pub written: bool,
}

/// Repairs the image `input` into `output` (which may be `input`).
/// Damage beyond the recovery data's reach is refused with
/// [`Error::BeyondRepair`], and nothing is written.
pub fn repair_file(input: &Path, output: &Path) -> Result<Repair> {
    let file = File::open(input)?;
    let recovery = Recovery::search(&file)
        .ok_or_else(|| Error::Invalid("no readable recovery data in the image".into()))?;
    let damage = recovery.damage(&file)?;
    let layout = *recovery.layout();
    if !damage.repairable() {
        return Err(Error::BeyondRepair(format!(
            "damage exceeds the recovery data: {} of {} stripes cannot be rebuilt; nothing was changed",
            damage.lost_stripes.len(),
            layout.stripes
        )));
    }
    if damage.is_empty() && same_file(input, output) {
        return Ok(Repair {
            damage,
            layout,
            written: false,
        });
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".hoard-repair-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    {
        let mut out = BufWriter::with_capacity(1 << 20, tmp.as_file());
        recovery.write_repaired(&file, &damage, &mut out)?;
        out.flush()?;
    }
    tmp.as_file().sync_all()?;
    let check = Recovery::search(tmp.as_file())
        .ok_or_else(|| Error::Invalid("the repaired copy has no readable recovery data".into()))?;
    if !check.damage(tmp.as_file())?.is_empty() || check.layout() != &layout {
        return Err(Error::Invalid(
            "the repaired copy does not verify; nothing was changed".into(),
        ));
    }
    let mode = std::fs::metadata(input)?.permissions();
    tmp.as_file().set_permissions(mode)?;
    tmp.persist(output).map_err(|e| Error::Io(e.error))?;
    Ok(Repair {
        damage,
        layout,
        written: true,
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
