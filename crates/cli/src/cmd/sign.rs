//! `hoard sign`: signs an image that exists.

use crate::args::SignArgs;
use anyhow::{Context, Result};

/// Signs the image (into a temporary file renamed into place); returns
/// the exit code.
pub fn run(args: &SignArgs) -> Result<u8> {
    let key = crate::trust::signing_key(Some(&args.key))?.expect("a key path was given");
    let claims = args.claims.claims()?;
    let output = args.output.as_ref().unwrap_or(&args.image);
    // Signing only stops at the end; its temporary file goes on a signal.
    let _cancel = super::interrupt::exit_on_signals()?;
    hoard_writer::sign::sign_image(&args.image, output, &key, claims.clone(), args.force)
        .with_context(|| format!("cannot sign image '{}'", args.image.display()))?;
    println!(
        "{}: signed by {}{}",
        output.display(),
        key.public().fingerprint(),
        crate::trust::claims_suffix(&claims)
    );
    Ok(0)
}
