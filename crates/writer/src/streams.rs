//! Streams of data, one per category: how each is compressed, segmented
//! and ordered ([`plan`]), and the segmenting of them all, one after the
//! other, into blocks ([`segment_streams`]).

use crate::blocks::Dispatch;
use crate::categorize::{Category, Fragments};
use crate::dedupe::Content;
use crate::feed::{feed, Range};
use crate::options::CreateOptions;
use crate::order::{order, Order};
use crate::path_list::{PathList, RankedLists};
use crate::piece::PieceList;
use crate::reference::References;
use crate::segment::{BlockSink, SegmentConfig, SegmentStats, Segmenter};
use crate::tree::Tree;
use crate::{check_cancel, compressor, Result};
use hoard_codec::Compressor;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Where every content goes: the streams and the order of each.
pub(crate) struct Streams {
    /// The block compressor of `options`, also the fallback of streams
    /// whose own compressor fails.
    pub(crate) default: Box<dyn Compressor>,
    /// One plan per category, in stream order.
    pub(crate) plans: Vec<StreamPlan>,
    /// The contents in each order the plans use.
    pub(crate) orders: HashMap<StreamOrder, Vec<usize>>,
}

/// The order of a stream's contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct StreamOrder {
    /// The order of all contents.
    pub(crate) order: Order,
    /// The files laid out first, in this list's order, if any.
    pub(crate) first: Option<Arc<PathList>>,
}

/// Plans the streams of `fragments` and orders `contents` for each,
/// ranking the lists of files to put first in `lists`.
#[inline(never)]
pub(crate) fn plan(
    options: &CreateOptions,
    tree: &Tree,
    contents: &[Content],
    fragments: &Fragments,
    lists: &mut RankedLists,
) -> Result<Streams> {
    let default = compressor(&options.data_compression)?;
    let plans = plan_streams(options, fragments, default.as_ref())?;
    let mut orders: HashMap<StreamOrder, Vec<usize>> = HashMap::new();
    for p in &plans {
        if !orders.contains_key(&p.order) {
            let mut ids = order(tree, contents, p.order.order);
            if let Some(list) = &p.order.first {
                ids = lists.get(list, tree, contents).put_first(ids);
            }
            orders.insert(p.order.clone(), ids);
        }
    }
    Ok(Streams {
        default,
        plans,
        orders,
    })
}

/// What segmenting reads: the tree, its contents, their fragments and
/// their streams.
pub(crate) struct Layout<'a> {
    /// The scanned tree.
    pub(crate) tree: &'a Tree,
    /// Its distinct contents.
    pub(crate) contents: &'a [Content],
    /// The fragments of each content.
    pub(crate) fragments: &'a Fragments,
    /// The streams.
    pub(crate) streams: &'a Streams,
    /// A delta layer's base data, matched against too.
    pub(crate) references: Option<&'a References>,
}

/// What segmenting made.
pub(crate) struct Segmented {
    /// The pieces of each content (indexed like the contents).
    pub(crate) pieces: Vec<PieceList>,
    /// Number of blocks.
    pub(crate) blocks: u32,
    /// What was stored, matched and left as holes.
    pub(crate) stats: SegmentStats,
    /// The stream of each block.
    pub(crate) block_streams: Vec<usize>,
    /// Files that could not be read as scanned.
    pub(crate) warnings: Vec<String>,
}

/// Segments every stream into blocks handed to `dispatch`, reading holes
/// as holes when `sparse`.
#[inline(never)]
pub(crate) fn segment_streams(
    layout: &Layout<'_>,
    dispatch: &mut Dispatch,
    sparse: bool,
    progress: &AtomicU64,
    cancel: &AtomicBool,
) -> Result<Segmented> {
    let mut reader = Reader {
        pieces: vec![PieceList::new(); layout.fragments.slots()],
        buf: vec![0u8; READ_BUFFER],
        warnings: Vec::new(),
        sparse,
        progress,
    };
    let mut next_block = 0u32;
    let mut stats = SegmentStats::default();
    for (stream, plan) in layout.streams.plans.iter().enumerate() {
        let mut sink = dispatch.stream(stream);
        let mut segmenter = Segmenter::new(plan.config, next_block, &mut sink);
        if let Some(r) = layout.references {
            segmenter = segmenter.with_references(r);
        }
        for &c in &layout.streams.orders[&plan.order] {
            reader.segment_content(layout, c, plan.category_index, &mut segmenter, cancel)?;
        }
        let (next, s, split) = segmenter.finish()?;
        if let Some(split) = split {
            for pieces in &mut reader.pieces {
                split.apply(pieces);
            }
        }
        next_block = next;
        stats.add(&s);
    }
    if layout.references.is_some() {
        crate::reference::renumber(&mut reader.pieces, next_block);
    }
    Ok(Segmented {
        pieces: pieces_by_content(reader.pieces, layout.fragments),
        blocks: next_block,
        stats,
        block_streams: dispatch.block_streams().to_vec(),
        warnings: reader.warnings,
    })
}

/// Bytes read from a file at a time: 1 MiB reads cost no more system time
/// than larger ones, and the segmenter finds them still in the CPU's cache
/// (16 MiB reads made a tree's largest file, up to 16 MiB, resident).
const READ_BUFFER: usize = 1 << 20;

/// Joins the pieces of each content's fragments (`by_fragment` holds
/// them in the order of [`Fragments`]): moved, where a content has one.
fn pieces_by_content(by_fragment: Vec<PieceList>, fragments: &Fragments) -> Vec<PieceList> {
    let mut slots = by_fragment.into_iter();
    (0..fragments.contents())
        .map(|c| match fragments.slots_of(c).len() {
            0 => PieceList::new(),
            1 => slots.next().unwrap_or_default(),
            n => slots.by_ref().take(n).flatten().collect(),
        })
        .collect()
}

/// Reads contents into segmenters, collecting their pieces.
struct Reader<'p> {
    /// The pieces of each fragment, in the order of [`Fragments`].
    pieces: Vec<PieceList>,
    buf: Vec<u8>,
    warnings: Vec<String>,
    sparse: bool,
    progress: &'p AtomicU64,
}

impl Reader<'_> {
    /// Feeds the fragments of content `c` that are of category number
    /// `category` (of [`Fragments::categories`]).
    fn segment_content<S: BlockSink>(
        &mut self,
        layout: &Layout<'_>,
        c: usize,
        category: u32,
        segmenter: &mut Segmenter<'_, S>,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let content = &layout.contents[c];
        let source = layout.tree.source(content.files[0]);
        // Holes are looked for only where the scan saw fewer bytes
        // allocated than the size (two `lseek`s a file otherwise).
        let sparse = self.sparse && !layout.tree.files[content.files[0]].allocated;
        let mut start = 0u64;
        let slots = layout.fragments.slots_of(c);
        for (slot, fragment) in slots.zip(layout.fragments.of(c)) {
            if fragment.category == category {
                check_cancel(cancel)?;
                let range = Range {
                    start,
                    len: fragment.size,
                    whole: fragment.size == content.size,
                };
                let read = feed(
                    segmenter,
                    &source,
                    range,
                    sparse,
                    &mut self.buf,
                    &mut self.pieces[slot],
                    self.progress,
                );
                self.warnings
                    .extend(read_warning(read, &source, content.size, range));
            }
            start += fragment.size;
        }
        Ok(())
    }
}

/// The warning, if any, about reading `range` of the file at `source` (of
/// `size` bytes when scanned).
fn read_warning(
    read: std::io::Result<u64>,
    source: &Path,
    size: u64,
    range: Range,
) -> Option<String> {
    match read {
        Ok(n) if n != range.len => Some(format!(
            "{}: changed while being read ({} bytes, then {})",
            source.display(),
            size,
            if range.whole { n } else { range.start + n }
        )),
        Ok(_) => None,
        Err(e) => Some(format!("{}: {e}", source.display())),
    }
}

/// One stream of data: the fragments of one category (with one metadata),
/// segmented into blocks of their own and compressed alike.
pub(crate) struct StreamPlan {
    /// The category of its fragments.
    pub(crate) category: Category,
    /// The category's index in [`Fragments::categories`].
    pub(crate) category_index: u32,
    /// Its blocks' compressor.
    pub(crate) compressor: Box<dyn Compressor>,
    /// Its segmenter's settings.
    pub(crate) config: SegmentConfig,
    /// The order of its contents.
    pub(crate) order: StreamOrder,
}

/// A plan per distinct category among `fragments`, in the order of
/// [`crate::categorize::all_category_names`]: hot data first, then the
/// default category, then in the order the categorizers list theirs.
/// Hot data is laid out in the hotness list's order unless its category
/// is given an order.
///
/// A category whose compressor works on units (FLAC: one frame of
/// samples) gets blocks of whole units and no segmenting, so that every
/// block holds whole units; one whose metadata its compressor cannot use
/// falls back to `default`'s spec.
fn plan_streams(
    options: &CreateOptions,
    fragments: &Fragments,
    default: &dyn Compressor,
) -> Result<Vec<StreamPlan>> {
    let rank: Vec<&str> = crate::categorize::all_category_names();
    let mut categories: Vec<(u32, &Category)> = (0u32..).zip(fragments.categories()).collect();
    categories.sort_by(|(_, a), (_, b)| {
        let pos = |c: &Category| rank.iter().position(|n| *n == c.name);
        (pos(a), &a.metadata).cmp(&(pos(b), &b.metadata))
    });
    let block_size = 1usize << options.block_size_bits;
    let hot_list = options.categorize.as_ref().and_then(|c| c.hotness.clone());
    categories
        .into_iter()
        .map(|(category_index, category)| {
            let s = options
                .per_category
                .get(category.name)
                .cloned()
                .unwrap_or_default();
            let spec = s
                .compression
                .as_deref()
                .unwrap_or(&options.data_compression);
            let mut c = compressor(spec)?;
            let granularity = match c.granularity(category.metadata.as_deref()) {
                Ok(g) => g.max(1),
                Err(_) => {
                    c = compressor(&default.describe())?;
                    1
                }
            };
            let block_size = if category.name == crate::categorize::hotness::HOTNESS {
                block_size.min(crate::categorize::hotness::MAX_BLOCK_SIZE)
            } else {
                block_size
            };
            let bits = s.window_bits.unwrap_or(options.window_bits);
            let window = if bits == 0 || granularity > 1 {
                0
            } else {
                (1usize << bits).min(block_size)
            };
            let shift = s.window_step_shift.unwrap_or(options.window_step_shift);
            let split_lone_block = lone_block_parts(&*c, granularity, options.workers);
            let order = match (s.order, s.explicit_order) {
                (None, None) => StreamOrder {
                    order: options.order,
                    first: if category.name == crate::categorize::hotness::HOTNESS {
                        hot_list.clone()
                    } else {
                        options.explicit_order.clone()
                    },
                },
                (order, first) => StreamOrder {
                    order: order.unwrap_or(options.order),
                    first,
                },
            };
            Ok(StreamPlan {
                category: category.clone(),
                category_index,
                compressor: c,
                config: SegmentConfig {
                    block_size: (block_size / granularity).max(1) * granularity,
                    window,
                    step: (window >> shift).max(1),
                    lookback: s.lookback.unwrap_or(options.lookback),
                    split_lone_block,
                },
                order,
            })
        })
        .collect()
}

/// Into how many blocks a stream's only block is cut (see
/// [`SegmentConfig::split_lone_block`]): one per worker, except for
/// granular codecs (whole units stay in one block) and lzma, whose
/// 64 MiB dictionary finds repeats across the whole block (cut in two,
/// the quick `versions` corpus grew 1.9% at `-l9`; zstd's `-l7` image of
/// the `small` corpus did not grow, and was built in 0.59x the time).
fn lone_block_parts(c: &dyn Compressor, granularity: usize, workers: usize) -> usize {
    if granularity > 1 || c.algo() == hoard_format::section::Compression::LZMA {
        1
    } else {
        workers.max(1)
    }
}

/// Records the category of every block (and, when `with_metadata`, the
/// category metadata of the blocks that have one) in `meta`.
pub(crate) fn record_categories(
    meta: &mut hoard_format::metadata::Metadata,
    plans: &[StreamPlan],
    block_streams: &[usize],
    with_metadata: bool,
) {
    let mut names: Vec<&str> = Vec::new();
    let mut jsons: Vec<&str> = Vec::new();
    let mut block_categories = Vec::with_capacity(block_streams.len());
    let mut block_metadata = std::collections::BTreeMap::new();
    for (block, &stream) in block_streams.iter().enumerate() {
        let category = &plans[stream].category;
        let index = names
            .iter()
            .position(|n| *n == category.name)
            .unwrap_or_else(|| {
                names.push(category.name);
                names.len() - 1
            });
        block_categories.push(index as u32);
        if let (true, Some(json)) = (with_metadata, category.metadata.as_deref()) {
            let j = jsons.iter().position(|m| *m == json).unwrap_or_else(|| {
                jsons.push(json);
                jsons.len() - 1
            });
            block_metadata.insert(block as u32, j as u32);
        }
    }
    meta.category_names = Some(names.into_iter().map(String::from).collect());
    meta.block_categories = Some(block_categories);
    if !jsons.is_empty() {
        meta.category_metadata_json = Some(jsons.into_iter().map(String::from).collect());
        meta.block_category_metadata = Some(block_metadata);
    }
}
