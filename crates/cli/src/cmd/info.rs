//! `hoard info`: what an image holds and how it was made. The figures
//! `dwarfsck` shows (block and category sizes, metadata table counts,
//! options, history) are here too, under names of their own.

use super::info_history::history;
use crate::args::InfoArgs;
use crate::target::of_image;
use anyhow::Result;
use hoard_format::metadata::{Metadata, StringStorage};
use hoard_format::section::SectionType;
use hoard_reader::open::{open, Form, Opened};
use hoard_reader::{Filesystem, Section};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Prints a summary of the image, as text or JSON.
pub fn run(args: &InfoArgs) -> Result<u8> {
    let fs = match open(&of_image(&args.image, &[], Form::Image)?)? {
        Opened::Sections(image) => return locked(&image, args.json),
        opened => opened.into_image()?,
    };
    let mut info = collect(&fs)?;
    if let Some(stats) = fs.image().fetch_stats().filter(|_| args.verbose) {
        info["remote"] = serde_json::to_value(stats)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_text(&info);
    }
    Ok(0)
}

/// What `info` tells of an encrypted image without its key: that it is
/// encrypted, and for how many recipients.
fn locked(image: &hoard_reader::Image, json: bool) -> Result<u8> {
    let wrapping = image
        .encryption()
        .map(|e| e.wrapping())
        .ok_or_else(|| anyhow::anyhow!("internal error: the image is not encrypted"))?;
    if json {
        let (recipients, passphrase) = match wrapping {
            hoard_trust::encrypt::Wrapping::Recipients(n) => (n, false),
            hoard_trust::encrypt::Wrapping::Passphrase => (0, true),
        };
        let info = json!({
            "encrypted": true,
            "recipients": recipients,
            "passphrase": passphrase,
            "image_size": image.file_size(),
        });
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        println!("encrypted {wrapping} (--identity FILE or --passphrase-file FILE opens it)");
    }
    Ok(0)
}

/// Count, compressed and (when every payload declares it) uncompressed
/// bytes of a group of sections.
#[derive(Default)]
struct Sizes {
    count: u64,
    compressed: u64,
    uncompressed: Option<u64>,
}

impl Sizes {
    fn add(&mut self, compressed: u64, uncompressed: Option<u64>) {
        if self.count == 0 {
            self.uncompressed = Some(0);
        }
        self.count += 1;
        self.compressed += compressed;
        self.uncompressed = self.uncompressed.zip(uncompressed).map(|(a, b)| a + b);
    }

    fn json(&self) -> Value {
        json!({
            "count": self.count,
            "compressed_bytes": self.compressed,
            "uncompressed_bytes": self.uncompressed,
        })
    }
}

fn sizes_of<'a>(fs: &Filesystem, sections: impl Iterator<Item = &'a Section>) -> Sizes {
    let mut sizes = Sizes::default();
    for s in sections {
        sizes.add(s.header.length, fs.image().uncompressed_size(s));
    }
    sizes
}

fn grouped(groups: BTreeMap<String, Sizes>) -> Value {
    groups
        .into_iter()
        .map(|(name, sizes)| (name, sizes.json()))
        .collect::<Map<_, _>>()
        .into()
}

/// DwarFS's names for the options an image's metadata was stored with.
fn option_names(meta: &Metadata) -> Vec<&'static str> {
    let o = meta.options.unwrap_or_default();
    let mut names = Vec::new();
    for (name, storage) in [
        ("names", meta.storage.names),
        ("symlinks", meta.storage.symlinks),
    ] {
        if let StringStorage::Compact { packed_index, fsst } = storage {
            if fsst {
                names.push(if name == "names" {
                    "packed_names"
                } else {
                    "packed_symlinks"
                });
            }
            if packed_index {
                names.push(if name == "names" {
                    "packed_names_index"
                } else {
                    "packed_symlinks_index"
                });
            }
        }
    }
    for (name, on) in [
        ("mtime_only", o.mtime_only),
        ("packed_chunk_table", o.packed_chunk_table),
        ("packed_directories", o.packed_directories),
        ("packed_shared_files_table", o.packed_shared_files_table),
        ("has_btime", o.has_btime),
        ("inodes_have_nlink", o.inodes_have_nlink),
    ] {
        if meta.options.is_some() && on {
            names.push(name);
        }
    }
    names
}

/// The sizes of the metadata's tables as stored, as `dwarfsck -d3` counts
/// them.
fn metadata_tables(fs: &Filesystem, meta: &Metadata) -> Value {
    let layout = fs.layout();
    let plain = |s: StringStorage, len: usize| if s == StringStorage::Plain { len } else { 0 };
    let mut t = json!({
        "symlink_inode_offset": layout.symlinks,
        "file_inode_offset": layout.files,
        "dev_inode_offset": layout.devices,
        "chunks": meta.chunks.len(),
        "directories": meta.directories.len(),
        "inodes": meta.inodes.len(),
        "chunk_table": meta.chunk_table.len(),
        "symlink_table": meta.symlink_table.len(),
        "uids": meta.uids.len(),
        "gids": meta.gids.len(),
        "modes": meta.modes.len(),
        "names": plain(meta.storage.names, meta.names.len()),
        "symlinks": plain(meta.storage.symlinks, meta.symlinks.len()),
        "devices": meta.devices.as_ref().map(Vec::len),
        "dir_entries": meta.dir_entries.len(),
        "unique_files": layout.unique_files,
    });
    let shared = meta.shared_files.len();
    if meta
        .options
        .as_ref()
        .is_some_and(|o| o.packed_shared_files_table)
    {
        // Packed, the table holds one count per shared content.
        let packed = meta
            .shared_files
            .last()
            .map_or(0, |&last| last as usize + 1);
        t["packed_shared_files_table"] = json!(packed);
        t["unpacked_shared_files_table"] = json!(shared);
    } else {
        t["shared_files_table"] = json!(shared);
    }
    t
}

fn collect(fs: &Filesystem) -> Result<Value> {
    let image = fs.image();
    let meta = fs.metadata()?;
    let layout = fs.layout();
    let mut by_codec: BTreeMap<String, Sizes> = BTreeMap::new();
    let mut by_category: BTreeMap<String, Sizes> = BTreeMap::new();
    let names = meta.category_names.clone().unwrap_or_default();
    for (i, b) in fs.blocks().iter().enumerate() {
        let uncompressed = image.uncompressed_size(b);
        by_codec
            .entry(b.header.compression.name())
            .or_default()
            .add(b.header.length, uncompressed);
        let category = meta.block_categories.as_ref().and_then(|c| c.get(i));
        if let Some(&c) = category {
            let name = names
                .get(c as usize)
                .cloned()
                .unwrap_or_else(|| c.to_string());
            by_category
                .entry(name)
                .or_default()
                .add(b.header.length, uncompressed);
        }
    }
    let all_blocks = sizes_of(fs, fs.blocks().iter());
    let metadata = sizes_of(
        fs,
        image
            .sections()
            .iter()
            .filter(|s| s.header.kind == SectionType::METADATA_V2),
    );
    let options = meta.options.unwrap_or_default();
    Ok(json!({
        "format_version": image.version().to_string(),
        "image_offset": image.offset(),
        "image_size": image.file_size() - image.offset(),
        "section_index": image.used_index(),
        "recovery_percent": image.recovery().map(|(r, _)| r.layout().percent),
        "signature": signature(image),
        "signature_claims": signature_claims(image),
        "encryption": image.encryption().map(|e| e.wrapping().to_string()),
        "sections": image.sections().len(),
        "block_size": meta.block_size,
        "blocks": fs.block_count(),
        "blocks_by_compression": grouped(by_codec),
        "blocks_by_category": meta.block_categories.is_some().then(|| grouped(by_category)),
        "compressed_block_bytes": all_blocks.compressed,
        "uncompressed_block_bytes": all_blocks.uncompressed,
        "compressed_metadata_bytes": metadata.compressed,
        "uncompressed_metadata_bytes": metadata.uncompressed,
        "original_file_bytes": meta.total_fs_size,
        "original_allocated_file_bytes": meta.total_allocated_fs_size,
        "hardlinked_bytes": meta.total_hardlink_size,
        "inodes": {
            "total": layout.count,
            "directories": layout.directories(),
            "symlinks": layout.files - layout.symlinks,
            "regular_files": layout.devices - layout.files,
            "unique_file_contents": meta.chunk_table.len().saturating_sub(1),
            "devices": layout.others - layout.devices,
            "fifos_and_sockets": layout.count - layout.others,
        },
        "chunks": meta.chunks.len(),
        "directory_entries": meta.dir_entries.len(),
        "metadata_tables": metadata_tables(fs, meta),
        "options": option_names(meta),
        "time_resolution_sec": options.time_resolution_sec.unwrap_or(1),
        "subsecond_nsec_multiplier": options.subsecond_resolution_nsec_multiplier,
        "mtime_only": options.mtime_only,
        "packed": {
            "chunk_table": options.packed_chunk_table,
            "directories": options.packed_directories,
            "shared_files_table": options.packed_shared_files_table,
            "names": format!("{:?}", meta.storage.names),
            "symlinks": format!("{:?}", meta.storage.symlinks),
        },
        "preferred_path_separator": meta
            .preferred_path_separator
            .and_then(char::from_u32)
            .map(String::from),
        "features": meta.features.clone().unwrap_or_default(),
        "categories": names,
        "sparse_files": meta.hole_block_index.is_some(),
        "xattrs": meta.xattrs.as_ref().map(|x| json!({
            "inodes": x.inodes_with_xattrs(),
            "sets": x.sets.sets.len() - 1,
            "names": x.sets.names.len(),
            "values": x.sets.values.len(),
        })),
        "created_by": meta.dwarfs_version,
        "created_at": meta.create_timestamp,
        "container": meta.container_config.as_deref().map(container),
        "depends_on": depends_on(fs)?,
        "history": history(fs),
    }))
}

/// `N blocks, C compressed[, U uncompressed]`.
fn sizes_text(v: &Value) -> String {
    let mut s = format!(
        "{} blocks, {} compressed",
        v["count"], v["compressed_bytes"]
    );
    if let Some(u) = v["uncompressed_bytes"].as_u64() {
        s.push_str(&format!(", {u} uncompressed"));
    }
    s
}

fn print_text(info: &Value) {
    let line = |label: &str, v: &Value| {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Null => return,
            other => other.to_string(),
        };
        println!("{label:<30}{text}");
    };
    let fields = [
        ("format version", "format_version"),
        ("image offset", "image_offset"),
        ("image size", "image_size"),
        ("section index", "section_index"),
        ("recovery data (%)", "recovery_percent"),
        ("signature", "signature"),
        ("encrypted", "encryption"),
        ("sections", "sections"),
        ("block size", "block_size"),
        ("blocks", "blocks"),
        ("compressed block bytes", "compressed_block_bytes"),
        ("uncompressed block bytes", "uncompressed_block_bytes"),
        ("compressed metadata bytes", "compressed_metadata_bytes"),
        ("uncompressed metadata bytes", "uncompressed_metadata_bytes"),
        ("original file bytes", "original_file_bytes"),
        ("original allocated bytes", "original_allocated_file_bytes"),
        ("hardlinked bytes", "hardlinked_bytes"),
        ("chunks", "chunks"),
        ("directory entries", "directory_entries"),
        ("time resolution (s)", "time_resolution_sec"),
        ("subsecond multiplier (ns)", "subsecond_nsec_multiplier"),
        ("sparse files", "sparse_files"),
        ("preferred path separator", "preferred_path_separator"),
        ("created by", "created_by"),
        ("created at", "created_at"),
    ];
    for (label, key) in fields {
        line(label, &info[key]);
    }
    for (label, key) in [
        ("blocks by compression", "blocks_by_compression"),
        ("blocks by category", "blocks_by_category"),
    ] {
        if let Value::Object(map) = &info[key] {
            println!("{label}:");
            for (k, v) in map {
                line(&format!("  {k}"), &Value::String(sizes_text(v)));
            }
        }
    }
    for (label, key) in [
        ("inodes", "inodes"),
        ("packed", "packed"),
        ("metadata tables", "metadata_tables"),
        ("extended attributes", "xattrs"),
        ("signature claims", "signature_claims"),
        ("container image", "container"),
        ("fetched (remote image)", "remote"),
    ] {
        if let Value::Object(map) = &info[key] {
            println!("{label}:");
            for (k, v) in map {
                line(&format!("  {k}"), v);
            }
        }
    }
    for key in ["options", "features", "categories"] {
        if let Value::Array(items) = &info[key] {
            if !items.is_empty() {
                let names: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                line(key, &Value::String(names.join(", ")));
            }
        }
    }
    if let Value::Array(deps) = &info["depends_on"] {
        if !deps.is_empty() {
            println!("depends on (delta layer, bottom first):");
            for d in deps {
                let (name, id) = (&d["name"], &d["identity"]);
                println!(
                    "  {}  {}",
                    id.as_str().unwrap_or(""),
                    name.as_str().unwrap_or("")
                );
            }
        }
    }
    super::info_history::print_text(&info["history"]);
}

/// What the config of the container image an image was made from says
/// (kept in its metadata): its digest, platform and how it runs.
fn container(config: &[u8]) -> Value {
    let digest = hoard_oci::Digest::sha256_of(config).to_string();
    match hoard_oci::spec::parse_config(config) {
        Ok(parsed) => {
            let mut info = json!({
                "config_digest": digest,
                "platform": format!("{}/{}", parsed.os, parsed.architecture),
            });
            if let Ok(Value::Object(run)) = serde_json::to_value(parsed.config.unwrap_or_default())
            {
                for (key, value) in run {
                    info[snake_case(&key)] = value;
                }
            }
            info
        }
        Err(e) => json!({"config_digest": digest, "error": e.to_string()}),
    }
}

/// `WorkingDir` as `working_dir`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The images a delta layer depends on, bottom first: each its name and
/// identity (empty for other images).
fn depends_on(fs: &Filesystem) -> Result<Value> {
    let deps = fs.dependencies()?;
    Ok(deps
        .iter()
        .map(|d| json!({"name": d.name, "identity": d.identity}))
        .collect())
}

/// What the image's signature claims (name, version, expiry: checked when
/// opened with `--trust`, as read otherwise); `None` when it is not signed
/// or claims nothing.
fn signature_claims(image: &hoard_reader::Image) -> Option<Value> {
    let claims = match image.signed() {
        Some(signed) => signed.claims().clone(),
        None => {
            let section = image.find(hoard_trust::SECTION_TYPE)?;
            let payload = image.verified_payload(section).ok()?;
            hoard_trust::Signature::parse(&payload).ok()?.claims
        }
    };
    (!claims.is_empty()).then(|| crate::trust::claims_json(&claims))
}

/// Who signed the image (checked when opened with `--trust`), or that it
/// is signed but not checked; `None` when it is not signed.
fn signature(image: &hoard_reader::Image) -> Option<String> {
    match image.signed() {
        Some(signed) => Some(format!("verified, by {}", signed.key().fingerprint())),
        None => image
            .find(hoard_trust::SECTION_TYPE)
            .map(|_| "present, not verified (--trust PUB checks it)".to_string()),
    }
}
