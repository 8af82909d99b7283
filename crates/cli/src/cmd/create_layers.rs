//! `hoard create -i CONTAINER --layers DIR`: one image layer per layer of
//! a container image, each built over those below it (`--base`, a delta
//! layer, whiteouts and opaque directories for what the layer deletes),
//! named by the layer's chain digest ([`hoard_writer::oci::LayerInput`]).
//! An image in a registry is copied once into a scratch layout in `DIR`,
//! and removed when all layers are made.
//! A layer already in `DIR` is kept, so images that share base layers
//! share those files. Prints the stack, bottom first.

use super::create::{options, print_summary};
use crate::args::create::CreateArgs;
use anyhow::{Context, Result};
use hoard_writer::delta::DeltaOptions;
use hoard_writer::{create, Progress};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Writes the layers into `dir`; returns the exit code.
pub fn run(args: &CreateArgs, dir: &Path) -> Result<u8> {
    let source = args
        .input
        .to_str()
        .and_then(hoard_oci::Source::parse)
        .context("--layers takes a container image (-i oci:…, docker-archive:…, docker://…)")?;
    let platform = args
        .platform
        .as_deref()
        .map(hoard_oci::Platform::parse)
        .transpose()?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make '{}'", dir.display()))?;
    let cancel = super::interrupt::exit_on_signals()?;
    let input_name = args.input.to_string_lossy();
    let layers = hoard_writer::oci::layer_input(
        &input_name,
        &source,
        platform.as_ref(),
        &args.registry.options()?,
        &std::path::absolute(dir)?,
    )?;
    let names = &layers.names;
    let mut stack: Vec<PathBuf> = Vec::new();
    let mut listed = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let path = dir.join(format!("{name}.dwarfs"));
        let made = !path.exists();
        if made {
            let mut o = options(args)?;
            o.input = PathBuf::from(&layers.input).into();
            o.output = args.protect.options(&path, args.force, args.fsync)?;
            o.container_layers = Some(i + 1);
            if !stack.is_empty() {
                args.keys.apply(&mut o)?;
                o.delta = Some(DeltaOptions {
                    bases: stack.clone(),
                    trust_mtime: false,
                    opaque_dirs: true,
                    force_stack: false,
                    metacopy: false,
                    refer_to_base: true,
                });
            }
            let started = Instant::now();
            let summary = create(&o, &Progress::default(), Arc::clone(&cancel))
                .with_context(|| format!("cannot create layer {}", i + 1))?;
            if !args.json && args.log_level == "info" {
                println!("layer {}:", i + 1);
                print_summary(&summary, started.elapsed().as_secs_f64());
            }
        }
        listed.push(serde_json::json!({"path": path, "made": made}));
        stack.push(path);
    }
    if args.json {
        println!("{}", serde_json::json!({ "layers": listed }));
    } else {
        println!("layers, bottom first (hoard mount them in this order):");
        for l in &listed {
            let how = if l["made"] == true { "made" } else { "kept" };
            println!("  {} ({how})", l["path"].as_str().unwrap_or_default());
        }
    }
    Ok(0)
}
