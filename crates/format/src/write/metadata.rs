//! [`Metadata`] to METADATA_V2_SCHEMA and METADATA_V2 payloads, in the
//! current (v2.5) layout, with DwarFS's packing options (`mkdwarfs -P`).
//! The input is the normalized form [`Metadata::decode`] returns: packing
//! happens here.

use super::frozen::{freeze, Column, FieldWidths, FreezeError, Frozen};
use super::fsst::Encoder;
use crate::metadata::{FsOptions, Metadata};
use crate::string_list::StringList;
use crate::xattrs::XATTRS_FIELD;
use std::collections::BTreeMap;

/// How tables are stored (`mkdwarfs --pack-metadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackOptions {
    /// Delta-compress the chunk table.
    pub chunk_table: bool,
    /// Store directories as delta-compressed first entries only.
    pub directories: bool,
    /// Store the shared files table as counts per content.
    pub shared_files: bool,
    /// FSST-compress names (when that makes them smaller, or `force`).
    pub names: bool,
    /// Delta-compress the names index.
    pub names_index: bool,
    /// FSST-compress symlink targets (when smaller, or `force`).
    pub symlinks: bool,
    /// Delta-compress the symlinks index.
    pub symlinks_index: bool,
    /// FSST-compress even when it does not make the tables smaller.
    pub force: bool,
    /// Store names and symlinks as plain lists, not string tables.
    pub plain: bool,
}

impl Default for PackOptions {
    /// `auto`: every table packed but the shared files table, FSST for
    /// names and symlinks where it helps. DwarFS's `auto` packs only the
    /// string tables; the rest costs a reader a prefix sum over the chunk
    /// table and the two string indices at open and a walk of the tree
    /// for the first parent lookup, and saves a fifth to a third of the
    /// compressed metadata (see doc/writer-history.md). A packed shared
    /// files table is left out because the `dwarfs` crate (0.2.1)
    /// unpacks it wrongly and refuses the image.
    fn default() -> Self {
        PackOptions {
            shared_files: false,
            ..PackOptions::all()
        }
    }
}

impl PackOptions {
    /// Nothing packed (string tables still compact).
    pub fn none() -> Self {
        PackOptions {
            chunk_table: false,
            directories: false,
            shared_files: false,
            names: false,
            names_index: false,
            symlinks: false,
            symlinks_index: false,
            force: false,
            plain: false,
        }
    }

    /// Every table packed (`all`); string tables FSST-compressed where
    /// that makes them smaller.
    pub fn all() -> Self {
        PackOptions {
            chunk_table: true,
            directories: true,
            shared_files: true,
            names: true,
            names_index: true,
            symlinks: true,
            symlinks_index: true,
            force: false,
            plain: false,
        }
    }

    /// What either `self` or `other` packs.
    fn and(self, other: PackOptions) -> Self {
        PackOptions {
            chunk_table: self.chunk_table || other.chunk_table,
            directories: self.directories || other.directories,
            shared_files: self.shared_files || other.shared_files,
            names: self.names || other.names,
            names_index: self.names_index || other.names_index,
            symlinks: self.symlinks || other.symlinks,
            symlinks_index: self.symlinks_index || other.symlinks_index,
            force: self.force || other.force,
            plain: self.plain || other.plain,
        }
    }

    /// Parses `auto`, `none`, `all` or a comma-separated list of
    /// `chunk_table`, `directories`, `shared_files`, `names`,
    /// `names_index`, `symlinks`, `symlinks_index`, `force`, `plain`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut p = PackOptions::none();
        for item in spec.split(',') {
            match item.trim() {
                "auto" => p = p.and(PackOptions::default()),
                "all" => p = p.and(PackOptions::all()),
                "none" => {}
                "chunk_table" => p.chunk_table = true,
                "directories" => p.directories = true,
                "shared_files" => p.shared_files = true,
                "names" => p.names = true,
                "names_index" => p.names_index = true,
                "symlinks" => p.symlinks = true,
                "symlinks_index" => p.symlinks_index = true,
                "force" => p.force = true,
                "plain" => p.plain = true,
                other => {
                    return Err(format!(
                        "--pack-metadata: unknown option '{other}' (auto, none, all, chunk_table, directories, shared_files, names, names_index, symlinks, symlinks_index, force, plain)"
                    ))
                }
            }
        }
        Ok(p)
    }
}

/// The two metadata payloads, uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedMetadata {
    /// The METADATA_V2_SCHEMA payload.
    pub schema: Vec<u8>,
    /// The METADATA_V2 payload.
    pub data: Vec<u8>,
}

fn u(v: impl Into<u64>) -> Frozen {
    Frozen::Uint(v.into())
}

fn opt(v: Option<Frozen>) -> Frozen {
    Frozen::Optional(v.map(Box::new))
}

fn text(s: &str) -> Frozen {
    Frozen::Bytes(s.as_bytes().to_vec())
}

fn fs_options(o: &FsOptions) -> Frozen {
    Frozen::fields([
        (1, u(o.mtime_only)),
        (2, opt(o.time_resolution_sec.map(u))),
        (3, u(o.packed_chunk_table)),
        (4, u(o.packed_directories)),
        (5, u(o.packed_shared_files_table)),
        (6, opt(o.subsecond_resolution_nsec_multiplier.map(u))),
        (7, u(o.has_btime)),
        (8, u(o.inodes_have_nlink)),
    ])
}

fn deltas(values: &[u32]) -> Vec<u32> {
    let mut prev = 0;
    values
        .iter()
        .map(|&v| {
            let d = v.wrapping_sub(prev);
            prev = v;
            d
        })
        .collect()
}

/// A string table (thrift `string_table`): FSST when `fsst` and it wins
/// (or `force`), packed index when `packed_index`.
fn string_table(strings: &StringList, fsst: bool, force: bool, packed_index: bool) -> Frozen {
    let compressed = (fsst && !strings.is_empty())
        .then(|| {
            let enc = Encoder::learn(strings);
            let table = enc.serialize();
            let mut buffer = Vec::new();
            let mut lengths = Vec::with_capacity(strings.len());
            for s in strings.iter() {
                let start = buffer.len();
                enc.encode_into(s, &mut buffer);
                lengths.push((buffer.len() - start) as u32);
            }
            let wins = buffer.len() + table.len() < strings.total_len();
            (force || wins).then_some((table, buffer, lengths))
        })
        .flatten();
    let (symtab, buffer, lengths) = match compressed {
        Some((t, b, l)) => (Some(t), b, l),
        None => (
            None,
            strings.concatenated().to_vec(),
            strings.iter().map(|s| s.len() as u32).collect(),
        ),
    };
    let index: Vec<u32> = if packed_index {
        lengths
    } else {
        std::iter::once(0)
            .chain(lengths.iter().scan(0u32, |acc, &l| {
                *acc += l;
                Some(*acc)
            }))
            .collect()
    };
    Frozen::fields([
        (1, Frozen::Bytes(buffer)),
        (2, opt(symtab.map(Frozen::Bytes))),
        (3, Frozen::uints(&index)),
        (4, u(packed_index)),
    ])
}

fn strings(list: &StringList) -> Frozen {
    Frozen::List(list.iter().map(|s| Frozen::Bytes(s.to_vec())).collect())
}

fn map(m: &BTreeMap<u32, u64>) -> Frozen {
    Frozen::Map(m.iter().map(|(&k, &v)| (u(k), u(v))).collect())
}

/// Packs the shared files table: how many files (minus 2) share each
/// shared content. The normalized table is sorted, every content used by
/// at least two files.
fn pack_shared(shared: &[u32]) -> Option<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    for &s in shared {
        match (s as usize).cmp(&out.len()) {
            std::cmp::Ordering::Less => *out.last_mut()? += 1,
            std::cmp::Ordering::Equal => out.push(0),
            std::cmp::Ordering::Greater => return None,
        }
    }
    // Each count was started at 0 for the first file: subtract one more.
    out.iter()
        .map(|&c| c.checked_sub(1))
        .collect::<Option<Vec<u32>>>()
}

/// Encodes `meta` with the packing options `pack`, its integer fields
/// `widths` wide.
pub fn encode_metadata(
    meta: &Metadata,
    pack: &PackOptions,
    widths: FieldWidths,
) -> Result<EncodedMetadata, FreezeError> {
    let shared_packed = if pack.shared_files {
        pack_shared(&meta.shared_files)
    } else {
        None
    };
    let mut options = meta.options.unwrap_or_default();
    options.packed_chunk_table = pack.chunk_table;
    options.packed_directories = pack.directories;
    options.packed_shared_files_table = shared_packed.is_some();
    // Images without options (format 2.0 to 2.2) keep none unless a
    // packing flag needs them.
    let options = (meta.options.is_some() || options != FsOptions::default()).then_some(options);

    let chunk_table = if pack.chunk_table {
        deltas(&meta.chunk_table)
    } else {
        meta.chunk_table.clone()
    };
    let dirs = &meta.directories;
    let directories = if pack.directories {
        let firsts = deltas(&dirs.iter().map(|d| d.first_entry).collect::<Vec<_>>());
        Frozen::Table(vec![(
            2,
            Column::new(firsts.len(), |i| u64::from(firsts[i])),
        )])
    } else {
        Frozen::table(&[1, 2, 3], dirs.len(), |i, c| {
            let d = &dirs[i];
            u64::from([d.parent_entry, d.first_entry, d.self_entry][c])
        })
    };
    let inodes = Frozen::table(
        &[2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
        meta.inodes.len(),
        |i, c| meta.inodes.field(i, c),
    );
    let mut root = BTreeMap::from([
        (
            1,
            Frozen::table(&[1, 2, 3], meta.chunks.len(), |i, c| {
                let k = &meta.chunks[i];
                u64::from([k.block, k.offset, k.size][c])
            }),
        ),
        (2, directories),
        (3, inodes),
        (4, Frozen::uints(&chunk_table)),
        (6, Frozen::uints(&meta.symlink_table)),
        (7, Frozen::uints(&meta.uids)),
        (8, Frozen::uints(&meta.gids)),
        (9, Frozen::uints(&meta.modes)),
        (12, u(meta.timestamp_base)),
        (15, u(meta.block_size)),
        (16, u(meta.total_fs_size)),
        (17, opt(meta.devices.as_deref().map(Frozen::uints))),
        (18, opt(options.as_ref().map(fs_options))),
        (
            19,
            opt(Some(Frozen::table(
                &[1, 2],
                meta.dir_entries.len(),
                |i, c| {
                    let e = &meta.dir_entries[i];
                    u64::from([e.name_index, e.inode_num][c])
                },
            ))),
        ),
        (
            20,
            opt(Some(Frozen::uints(
                shared_packed.as_deref().unwrap_or(&meta.shared_files),
            ))),
        ),
        (21, opt(meta.total_hardlink_size.map(u))),
        (22, opt(meta.dwarfs_version.as_deref().map(text))),
        (23, opt(meta.create_timestamp.map(u))),
        (26, opt(meta.preferred_path_separator.map(u))),
        (
            27,
            opt(meta
                .features
                .as_ref()
                .map(|f| Frozen::List(f.iter().map(|s| text(s)).collect()))),
        ),
        (
            28,
            opt(meta
                .category_names
                .as_ref()
                .map(|l| Frozen::List(l.iter().map(|s| text(s)).collect()))),
        ),
        (29, opt(meta.block_categories.as_deref().map(Frozen::uints))),
        (
            30,
            opt(meta.reg_file_size_cache.as_ref().map(|c| {
                Frozen::fields([
                    (1, map(&c.size_lookup)),
                    (2, u(c.min_chunk_count)),
                    (3, map(&c.allocated_size_lookup)),
                ])
            })),
        ),
        (
            31,
            opt(meta
                .category_metadata_json
                .as_ref()
                .map(|l| Frozen::List(l.iter().map(|s| text(s)).collect()))),
        ),
        (
            32,
            opt(meta
                .block_category_metadata
                .as_ref()
                .map(|m| Frozen::Map(m.iter().map(|(&k, &v)| (u(k), u(v))).collect()))),
        ),
        (
            33,
            opt(meta.metadata_version_history.as_ref().map(|h| {
                Frozen::List(
                    h.iter()
                        .map(|v| {
                            Frozen::fields([
                                (1, u(v.major)),
                                (2, u(v.minor)),
                                (3, opt(v.dwarfs_version.as_deref().map(text))),
                                (4, u(v.block_size)),
                                (5, opt(v.options.as_ref().map(fs_options))),
                            ])
                        })
                        .collect(),
                )
            })),
        ),
        (34, opt(meta.hole_block_index.map(u))),
        (35, opt(meta.large_hole_size.as_deref().map(Frozen::uints))),
        (36, opt(meta.total_allocated_fs_size.map(u))),
        (
            XATTRS_FIELD,
            opt(meta.xattrs.as_ref().map(crate::xattrs::to_frozen)),
        ),
        (
            crate::metadata::CONTAINER_CONFIG_FIELD,
            opt(meta.container_config.clone().map(Frozen::Bytes)),
        ),
    ]);
    if pack.plain {
        root.insert(10, strings(&meta.names));
        root.insert(11, strings(&meta.symlinks));
    } else {
        root.insert(
            24,
            opt(Some(string_table(
                &meta.names,
                pack.names,
                pack.force,
                pack.names_index,
            ))),
        );
        root.insert(
            25,
            opt(Some(string_table(
                &meta.symlinks,
                pack.symlinks,
                pack.force,
                pack.symlinks_index,
            ))),
        );
    }
    let (schema, data) = freeze(&Frozen::Struct(root), widths)?;
    Ok(EncodedMetadata { schema, data })
}
