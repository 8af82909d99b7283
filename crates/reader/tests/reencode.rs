//! The metadata encoder against real images: the metadata of every shared
//! DwarFS image, re-encoded with each packing option, decodes to the same
//! metadata.

use hoard_format::metadata::{Metadata, Storage};
use hoard_format::write::{encode_metadata, FieldWidths, PackOptions};
use hoard_reader::{Filesystem, FsOptions};
use std::path::PathBuf;

fn images() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["compat", "upstream", "misc"]
        .into_iter()
        .flat_map(hoard_testdata::images)
        .collect();
    out.sort();
    out
}

/// `meta` without what only describes how it was stored.
fn comparable(meta: &Metadata) -> Metadata {
    let mut m = meta.clone();
    m.storage = Storage::default();
    if let Some(o) = &mut m.options {
        o.packed_chunk_table = false;
        o.packed_directories = false;
        o.packed_shared_files_table = false;
    }
    if m.options == Some(Default::default()) {
        m.options = None;
    }
    m
}

#[test]
fn every_image_reencodes_with_every_packing() {
    let specs = [
        "auto",
        "none",
        "all",
        "plain",
        "all,force",
        "chunk_table",
        "directories",
        "shared_files",
        "names,force",
        "names_index",
        "symlinks,symlinks_index",
    ];
    let mut checked = 0;
    for image in images() {
        let fs = match Filesystem::open(&image, &FsOptions::default()) {
            Ok(fs) => fs,
            // future-features.dwarfs is refused on purpose.
            Err(e) => {
                eprintln!("{}: {e}", image.display());
                continue;
            }
        };
        let original = comparable(fs.metadata().unwrap());
        for (spec, widths) in specs
            .iter()
            .flat_map(|s| [(s, FieldWidths::Bits), (s, FieldWidths::Bytes)])
        {
            let pack = PackOptions::parse(spec).unwrap();
            let encoded = encode_metadata(fs.metadata().unwrap(), &pack, widths).unwrap();
            let back = Metadata::decode(&encoded.schema, &encoded.data)
                .unwrap_or_else(|e| panic!("{} -P {spec} {widths:?}: {e}", image.display()));
            let back = comparable(&back);
            if back != original {
                let (a, b) = (format!("{original:#?}"), format!("{back:#?}"));
                let first = a
                    .lines()
                    .zip(b.lines())
                    .enumerate()
                    .find(|(_, (x, y))| x != y)
                    .map(|(i, (x, y))| format!("line {i}: {x} != {y}"));
                panic!(
                    "{} -P {spec} {widths:?}: metadata differs after re-encoding: {first:?}",
                    image.display()
                );
            }
        }
        checked += 1;
    }
    eprintln!("{checked} images re-encoded");
}

#[test]
fn packing_options_parse() {
    assert_eq!(PackOptions::parse("auto").unwrap(), PackOptions::default());
    assert!(PackOptions::parse("all").unwrap().chunk_table);
    assert!(!PackOptions::parse("none").unwrap().names);
    assert!(PackOptions::parse("names,bogus").is_err());
    // A preset adds to the options named with it, in any order.
    for spec in ["shared_files,auto", "auto,shared_files"] {
        assert_eq!(PackOptions::parse(spec).unwrap(), PackOptions::all());
    }
    assert!(PackOptions::parse("force,auto").unwrap().force);
    assert!(!PackOptions::parse("auto").unwrap().shared_files);
}
