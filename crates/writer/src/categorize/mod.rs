//! Stage 2b: categorizers look at each distinct content and split it into
//! fragments of named categories (`pcmaudio/waveform`, `incompressible`,
//! ...), so each category can get its own segmenter, blocks and
//! compressor, like DwarFS's `--categorize`. The `hotness` categorizer
//! goes by path: the files of a list.

/// The category of data that no categorizer claimed.
pub const DEFAULT_CATEGORY: &str = "<default>";

/// A category and, for categories whose compressors need to know the data's
/// layout, its metadata: the JSON DwarFS stores in `category_metadata_json`
/// (sample layout of PCM audio or FITS images). Data of one category but
/// different metadata never shares a block.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Category {
    /// The category name, as stored in `category_names`.
    pub name: &'static str,
    /// The subcategory's metadata, if any.
    pub metadata: Option<String>,
}

impl Category {
    /// A category without metadata.
    pub fn plain(name: &'static str) -> Self {
        Category {
            name,
            metadata: None,
        }
    }
}

/// A run of bytes of one category; a content's fragments cover it exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// What the bytes are.
    pub category: Category,
    /// How many bytes.
    pub size: u64,
}

impl Fragment {
    /// The fragments of a content of `size` bytes all of `category`: one,
    /// or none for an empty content.
    pub fn whole(category: Category, size: u64) -> Vec<Fragment> {
        if size == 0 {
            Vec::new()
        } else {
            vec![Fragment { category, size }]
        }
    }
}

/// The fragments of every content, in one list (a content's fragments
/// side by side, contents in order), each naming its category by index:
/// a `Vec` of fragments per content, each with its own copy of the
/// category, took about 90 bytes a content.
#[derive(Debug, Clone, Default)]
pub struct Fragments {
    /// The distinct categories of the fragments, in order of first use.
    categories: Vec<Category>,
    /// Every fragment, content after content.
    all: Vec<Slot>,
    /// Where each content's fragments start in `all`, and where the last
    /// content's end.
    starts: Vec<usize>,
}

/// A fragment as [`Fragments`] keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index of its category in [`Fragments::categories`].
    pub category: u32,
    /// How many bytes.
    pub size: u64,
}

impl Fragments {
    /// No contents yet, room for `contents`.
    pub fn with_capacity(contents: usize) -> Self {
        let mut starts = Vec::with_capacity(contents + 1);
        starts.push(0);
        Fragments {
            categories: Vec::new(),
            all: Vec::with_capacity(contents),
            starts,
        }
    }

    /// Every content of `sizes` as one fragment of `category` (none for an
    /// empty content).
    pub fn whole(category: Category, sizes: impl ExactSizeIterator<Item = u64>) -> Self {
        let mut f = Fragments::with_capacity(sizes.len());
        for size in sizes {
            if size > 0 {
                f.all.push(Slot { category: 0, size });
            }
            f.starts.push(f.all.len());
        }
        if !f.all.is_empty() {
            f.categories.push(category);
        }
        f
    }

    /// Appends the next content's fragments.
    pub fn push(&mut self, fragments: Vec<Fragment>) {
        for Fragment { category, size } in fragments {
            let index = match self.categories.iter().position(|c| *c == category) {
                Some(i) => i,
                None => {
                    self.categories.push(category);
                    self.categories.len() - 1
                }
            };
            self.all.push(Slot {
                category: index as u32,
                size,
            });
        }
        self.starts.push(self.all.len());
    }

    /// The fragments of content `c`.
    pub fn of(&self, c: usize) -> &[Slot] {
        &self.all[self.slots_of(c)]
    }

    /// The positions of content `c`'s fragments among all fragments.
    pub fn slots_of(&self, c: usize) -> std::ops::Range<usize> {
        self.starts[c]..self.starts[c + 1]
    }

    /// Number of fragments of all contents.
    pub fn slots(&self) -> usize {
        self.all.len()
    }

    /// Number of contents.
    pub fn contents(&self) -> usize {
        self.starts.len() - 1
    }

    /// The distinct categories; a [`Slot`]'s `category` indexes them.
    pub fn categories(&self) -> &[Category] {
        &self.categories
    }
}

pub mod binary;
pub mod fits;
pub mod hotness;
pub mod incompressible;
pub mod pcmaudio;
pub mod zip;

use crate::dedupe::Content;
use crate::path_list::PathList;
use crate::tree::Tree;
pub use incompressible::IncompressibleOptions;
use rayon::prelude::*;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A categorizer, by its DwarFS name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Categorizer {
    /// FITS astronomical images (`fits/image`, `fits/metadata`).
    Fits,
    /// PCM audio (`pcmaudio/waveform`, `pcmaudio/metadata`).
    PcmAudio,
    /// Executables (`binary/elf`, `binary/pe`).
    Binary,
    /// Zip archives: their headers (`zip/headers`) apart from their data.
    Zip,
    /// Data zstd cannot shrink (`incompressible`).
    Incompressible,
    /// The files of a list (`hotness`): run only when named, with a list.
    Hotness,
}

/// Every categorizer's name, in the order `--categorize` alone runs them.
pub const ALL_NAMES: &str = "fits,pcmaudio,binary,zip,incompressible";

/// Every categorizer, in the order `--categorize` alone runs them.
pub const ALL: [Categorizer; 5] = [
    Categorizer::Fits,
    Categorizer::PcmAudio,
    Categorizer::Binary,
    Categorizer::Zip,
    Categorizer::Incompressible,
];

/// Every categorizer `--categorize` takes by name.
const KNOWN: [Categorizer; 6] = [
    Categorizer::Hotness,
    Categorizer::Fits,
    Categorizer::PcmAudio,
    Categorizer::Binary,
    Categorizer::Zip,
    Categorizer::Incompressible,
];

impl Categorizer {
    /// The name `--categorize` takes.
    pub fn name(self) -> &'static str {
        match self {
            Categorizer::Fits => "fits",
            Categorizer::PcmAudio => "pcmaudio",
            Categorizer::Binary => "binary",
            Categorizer::Zip => "zip",
            Categorizer::Incompressible => "incompressible",
            Categorizer::Hotness => "hotness",
        }
    }

    /// The categories it can emit.
    pub fn categories(self) -> &'static [&'static str] {
        match self {
            Categorizer::Fits => &[fits::IMAGE, fits::METADATA],
            Categorizer::PcmAudio => &[pcmaudio::METADATA, pcmaudio::WAVEFORM],
            Categorizer::Binary => &[binary::ELF, binary::PE],
            Categorizer::Zip => &[zip::HEADERS],
            Categorizer::Incompressible => &[incompressible::INCOMPRESSIBLE],
            Categorizer::Hotness => &[hotness::HOTNESS],
        }
    }

    /// The smallest file it may claim: smaller ones are not opened for it.
    fn smallest_claimed(self, opts: &CategorizeOptions) -> u64 {
        match self {
            Categorizer::Zip => zip::MIN_ARCHIVE,
            Categorizer::Incompressible => opts.incompressible.min_input_size,
            Categorizer::Fits
            | Categorizer::PcmAudio
            | Categorizer::Binary
            | Categorizer::Hotness => 1,
        }
    }

    /// Parses a comma-separated list such as `pcmaudio,incompressible`;
    /// `none` is the empty list.
    pub fn parse_list(list: &str) -> Result<Vec<Categorizer>, String> {
        if list == "none" {
            return Ok(Vec::new());
        }
        list.split(',')
            .filter(|s| !s.is_empty())
            .map(|name| {
                KNOWN.into_iter().find(|c| c.name() == name).ok_or_else(|| {
                    let known: Vec<&str> = KNOWN.iter().map(|c| c.name()).collect();
                    format!("unknown categorizer '{name}' (known: {})", known.join(", "))
                })
            })
            .collect()
    }
}

/// Every category name any categorizer can emit, in the order their
/// data is laid out: hot data first, then the default category.
pub fn all_category_names() -> Vec<&'static str> {
    [hotness::HOTNESS, DEFAULT_CATEGORY]
        .into_iter()
        .chain(ALL.iter().flat_map(|c| c.categories().iter().copied()))
        .collect()
}

/// What `--categorize` and its options asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct CategorizeOptions {
    /// The categorizers, in order: the first that claims a file wins.
    pub categorizers: Vec<Categorizer>,
    /// Settings of the incompressible categorizer.
    pub incompressible: IncompressibleOptions,
    /// The hot files (`--hotness-list`), which the hotness categorizer
    /// needs.
    pub hotness: Option<Arc<PathList>>,
}

impl CategorizeOptions {
    /// Checks that the hotness categorizer and a hotness list come
    /// together.
    pub fn check(&self) -> Result<(), String> {
        let runs_hotness = self.categorizers.contains(&Categorizer::Hotness);
        match (runs_hotness, &self.hotness) {
            (true, None) => Err("the hotness categorizer needs a list: --hotness-list FILE".into()),
            (false, Some(_)) => {
                Err("--hotness-list is for the hotness categorizer: --categorize=hotness".into())
            }
            _ => Ok(()),
        }
    }
}

/// Format categorizers read whole files into memory; larger ones are left
/// to the incompressible categorizer or the default category.
const MAX_FORMAT_FILE: u64 = 1 << 30;

/// Bytes read first to recognize a format.
const HEAD: usize = 4096;

/// The fragments of every content (indexed like `contents`), found in
/// parallel; `hot` says which contents the hotness list names (their
/// place in it), for the hotness categorizer.
/// A content no categorizer claims — and, when holes are kept
/// (`sparse_files`), a sparse file not hot, or a file that cannot be read
/// now — is one fragment of [`DEFAULT_CATEGORY`]; an empty content has no
/// fragments. `done` counts the bytes looked at.
pub fn categorize(
    tree: &Tree,
    contents: &[Content],
    sparse_files: bool,
    opts: &CategorizeOptions,
    hot: Option<&[Option<u32>]>,
    done: &AtomicU64,
) -> Fragments {
    let found: Vec<Vec<Fragment>> = contents
        .par_iter()
        .enumerate()
        .map(|(c, content)| {
            let path = tree.source(content.files[0]);
            let hot = hot.is_some_and(|h| h.get(c).is_some_and(Option::is_some));
            let found = categorize_file(&path, content.size, sparse_files, opts, hot)
                .ok()
                .flatten();
            done.fetch_add(content.size, Ordering::Relaxed);
            match found {
                Some(f) if f.iter().map(|f| f.size).sum::<u64>() == content.size => f,
                _ => Fragment::whole(Category::plain(DEFAULT_CATEGORY), content.size),
            }
        })
        .collect();
    let mut fragments = Fragments::with_capacity(contents.len());
    for f in found {
        fragments.push(f);
    }
    fragments
}

/// Runs the categorizers on one file, first match wins; `hot` when the
/// hotness list names it.
fn categorize_file(
    path: &std::path::Path,
    size: u64,
    sparse_files: bool,
    opts: &CategorizeOptions,
    hot: bool,
) -> std::io::Result<Option<Vec<Fragment>>> {
    let smallest = opts.categorizers.iter().map(|c| c.smallest_claimed(opts));
    if size == 0 || smallest.min().is_none_or(|s| size < s) {
        return Ok(None);
    }
    let hot = hot && opts.categorizers.contains(&Categorizer::Hotness);
    let hot_fragments = || Fragment::whole(Category::plain(hotness::HOTNESS), size);
    // Decided by path alone, reading nothing, when hotness comes first
    // (for a hot file) or runs alone.
    let hotness_first = opts.categorizers.first() == Some(&Categorizer::Hotness);
    let hotness_alone = opts.categorizers.iter().all(|c| *c == Categorizer::Hotness);
    if (hot && hotness_first) || hotness_alone {
        return Ok(hot.then(hot_fragments));
    }
    let file = std::fs::File::open(path)?;
    if sparse_files {
        use std::os::unix::fs::MetadataExt;
        if file.metadata()?.blocks() * 512 < size {
            // Holes stay holes, in the hotness or the default category.
            return Ok(hot.then(hot_fragments));
        }
    }
    let mut head = vec![0u8; HEAD.min(size as usize)];
    let n = file.read_at(&mut head, 0)?;
    head.truncate(n);
    let whole_file = || -> std::io::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(size as usize);
        (&file).take(size).read_to_end(&mut data)?;
        Ok(data)
    };
    for c in &opts.categorizers {
        let found = match c {
            Categorizer::Fits if fits::sniff(&head) && size <= MAX_FORMAT_FILE => {
                fits::categorize(&whole_file()?)
            }
            Categorizer::PcmAudio if pcmaudio::sniff(&head) && size <= MAX_FORMAT_FILE => {
                pcmaudio::categorize(&whole_file()?)
            }
            Categorizer::Binary => binary::categorize(&head, size, |at| {
                let mut sig = [0u8; 4];
                file.read_exact_at(&mut sig, at).ok().map(|_| sig)
            }),
            Categorizer::Zip if zip::sniff(&head) && size >= zip::MIN_ARCHIVE => {
                zip::categorize(&file, size)
            }
            Categorizer::Incompressible => {
                incompressible::categorize((&file).take(size), size, &opts.incompressible)?
            }
            Categorizer::Hotness if hot => Some(hot_fragments()),
            _ => None,
        };
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}
