//! Stage 2b: categorizers look at each distinct content and split it into
//! fragments of named categories (`pcmaudio/waveform`, `incompressible`,
//! ...), so each category can get its own segmenter, blocks and
//! compressor, like DwarFS's `--categorize`.

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
