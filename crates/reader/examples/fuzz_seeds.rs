//! Writes seed corpora for the fuzz targets in `fuzz/` from the DwarFS
//! images in a folder such as `../shared/dwarfs-images`:
//!
//! ```sh
//! cargo run -p hoard-reader --example fuzz_seeds -- ../shared/dwarfs-images fuzz/corpus
//! ```
//!
//! * `open_image/`: the images of `compat/`, `misc/` and `badfs/`, as they are;
//! * `decode_metadata/`: of every image whose metadata loads, the schema
//!   length (`u16` little endian), the schema, then the metadata;
//! * `decompress/`: small inputs compressed with each general-purpose
//!   algorithm, and the FLAC and RICEPP blocks of `upstream/categorize`,
//!   each as the algorithm id byte, then the payload.

use hoard_format::section::{Compression, SectionType};
use hoard_reader::{Image, OpenOptions};
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The `.dwarfs` files in `dir`, sorted.
fn images(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "dwarfs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Writes `prefix ++ payload` to `dir/name`.
fn save(dir: &Path, name: &str, prefix: &[u8], payload: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(name), [prefix, payload].concat())?;
    Ok(())
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into()
}

/// The schema and metadata of `path`, as `decode_metadata` takes them.
fn metadata_seed(path: &Path) -> Option<Vec<u8>> {
    let image = Image::open(path, &OpenOptions::default()).ok()?;
    let load = |kind| image.load(image.find(kind)?, 1 << 28).ok();
    let schema = load(SectionType::METADATA_V2_SCHEMA)?;
    let data = load(SectionType::METADATA_V2)?;
    let len = u16::try_from(schema.len()).ok()?;
    Some([&len.to_le_bytes()[..], &schema, &data].concat())
}

fn main() -> Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [images_dir, out] = &args[..] else {
        return Err("usage: fuzz_seeds IMAGES_DIR CORPUS_DIR".into());
    };
    let groups = ["compat", "misc", "badfs", "upstream"];
    for group in groups {
        for path in images(&images_dir.join(group))? {
            if group != "upstream" {
                save(
                    &out.join("open_image"),
                    &stem(&path),
                    &[],
                    &std::fs::read(&path)?,
                )?;
            }
            if let Some(seed) = metadata_seed(&path) {
                save(&out.join("decode_metadata"), &stem(&path), &[], &seed)?;
            }
        }
    }

    let decompress = out.join("decompress");
    let text = std::fs::read(images_dir.join("compat/compat-v0.9.10.manifest"))?;
    let binary = std::fs::read(images_dir.join("misc/gh307.dwarfs"))?;
    let inputs: [(&str, &[u8]); 4] = [
        ("text", &text),
        ("binary", &binary),
        ("zeros", &[0; 5000]),
        ("empty", &[]),
    ];
    for spec in ["null", "zstd", "lzma", "lz4", "lz4hc", "brotli"] {
        let compressor = hoard_codec::compressor_from_spec(spec)?;
        let id = u8::try_from(compressor.algo().0)?;
        for (name, data) in inputs {
            let payload = compressor.compress(data, None)?;
            save(&decompress, &format!("{spec}-{name}"), &[id], &payload)?;
        }
    }
    let categorize = images_dir.join("upstream/categorize.dwarfs");
    let image = Image::open(&categorize, &OpenOptions::default())?;
    for (i, section) in image.sections().iter().enumerate() {
        let algo = section.header.compression;
        let payload = image.raw_payload(section)?;
        if section.header.kind == SectionType::BLOCK
            && matches!(algo, Compression::FLAC | Compression::RICEPP)
            && payload.len() <= 256 << 10
        {
            let name = format!("{}-{i}", algo.name());
            save(&decompress, &name, &[u8::try_from(algo.0)?], &payload)?;
        }
    }
    Ok(())
}
