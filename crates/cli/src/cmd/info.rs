//! `hoard info`: what an image holds and how it was made.

use crate::args::InfoArgs;
use anyhow::Result;
use hoard_format::section::SectionType;
use hoard_reader::Filesystem;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Prints a summary of the image, as text or JSON.
pub fn run(args: &InfoArgs) -> Result<u8> {
    let fs = super::open(&args.image)?;
    let info = collect(&fs)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_text(&info);
    }
    Ok(0)
}

fn collect(fs: &Filesystem) -> Result<Value> {
    let image = fs.image();
    let meta = fs.metadata()?;
    let layout = fs.layout();
    let mut codecs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for b in fs.blocks() {
        let e = codecs.entry(b.header.compression.name()).or_default();
        e.0 += 1;
        e.1 += b.header.length;
    }
    let blocks: Value = codecs
        .iter()
        .map(|(name, (count, bytes))| {
            (
                name.clone(),
                json!({"count": count, "compressed_bytes": bytes}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    let section_bytes = |kind| {
        image
            .sections()
            .iter()
            .filter(|s| s.header.kind == kind)
            .map(|s| s.header.length)
            .sum::<u64>()
    };
    let options = meta.options.unwrap_or_default();
    let history = image
        .find(SectionType::HISTORY)
        .and_then(|s| image.load(s, 1 << 24).ok())
        .and_then(|p| hoard_format::history::decode_history(&p).ok())
        .map(|entries| {
            entries
                .iter()
                .map(|h| {
                    json!({
                        "version": h.version,
                        "system": h.system_id,
                        "compiler": h.compiler_id,
                        "arguments": h.arguments,
                        "timestamp": h.timestamp,
                        "libraries": h.library_versions,
                    })
                })
                .collect::<Vec<_>>()
        });
    Ok(json!({
        "format_version": image.version().to_string(),
        "image_offset": image.offset(),
        "image_size": image.file_size() - image.offset(),
        "section_index": image.used_index(),
        "sections": image.sections().len(),
        "block_size": meta.block_size,
        "blocks": fs.blocks().len(),
        "blocks_by_compression": blocks,
        "compressed_block_bytes": section_bytes(SectionType::BLOCK),
        "compressed_metadata_bytes": section_bytes(SectionType::METADATA_V2),
        "original_file_bytes": meta.total_fs_size,
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
        "features": meta.features.clone().unwrap_or_default(),
        "categories": meta.category_names.clone().unwrap_or_default(),
        "sparse_files": meta.hole_block_index.is_some(),
        "created_by": meta.dwarfs_version,
        "created_at": meta.create_timestamp,
        "history": history,
    }))
}

fn print_text(info: &Value) {
    let line = |label: &str, v: &Value| {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Null => return,
            other => other.to_string(),
        };
        println!("{label:<28}{text}");
    };
    let fields = [
        ("format version", "format_version"),
        ("image offset", "image_offset"),
        ("image size", "image_size"),
        ("section index", "section_index"),
        ("sections", "sections"),
        ("block size", "block_size"),
        ("blocks", "blocks"),
        ("compressed block bytes", "compressed_block_bytes"),
        ("compressed metadata bytes", "compressed_metadata_bytes"),
        ("original file bytes", "original_file_bytes"),
        ("hardlinked bytes", "hardlinked_bytes"),
        ("chunks", "chunks"),
        ("directory entries", "directory_entries"),
        ("time resolution (s)", "time_resolution_sec"),
        ("subsecond multiplier (ns)", "subsecond_nsec_multiplier"),
        ("sparse files", "sparse_files"),
        ("created by", "created_by"),
        ("created at", "created_at"),
    ];
    for (label, key) in fields {
        line(label, &info[key]);
    }
    for (label, key) in [
        ("blocks by compression", "blocks_by_compression"),
        ("inodes", "inodes"),
        ("packed", "packed"),
    ] {
        if let Value::Object(map) = &info[key] {
            println!("{label}:");
            for (k, v) in map {
                line(&format!("  {k}"), v);
            }
        }
    }
    for key in ["features", "categories"] {
        if let Value::Array(items) = &info[key] {
            if !items.is_empty() {
                let names: Vec<String> = items
                    .iter()
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect();
                line(key, &Value::String(names.join(", ")));
            }
        }
    }
    if let Value::Array(entries) = &info["history"] {
        println!("history:");
        for e in entries {
            println!("  {e}");
        }
    }
}
