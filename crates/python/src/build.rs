//! `hoard.create` and `hoard.rewrite`: keyword options (named as the
//! command line's long options, `-` written `_`) turned into
//! hoard-writer's options, the build run without the GIL, and an optional
//! progress callback called from the calling thread a few times a second.

use crate::errors::image_error;
use hoard_format::write::PackOptions;
use hoard_writer::categorize::{CategorizeOptions, Categorizer, IncompressibleOptions};
use hoard_writer::chmod::Chmod;
use hoard_writer::filter::Filter;
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::output::OutputOptions;
use hoard_writer::parse::{parse_resolution, parse_time, split, Given, StreamOptions};
use hoard_writer::path_list::PathList;
use hoard_writer::rewrite::{Rebuild, RewriteOptions};
use hoard_writer::scan::{xattr_filter, InputList};
use hoard_writer::{CreateOptions, Progress};
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyAnyMethods, PyDict, PyDictMethods};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the progress callback is called.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// The keyword options still to use, taken one by one; any left over is
/// an unknown option.
pub(crate) struct Options<'py>(Bound<'py, PyDict>);

impl<'py> Options<'py> {
    pub(crate) fn new(py: Python<'py>, given: Option<&Bound<'py, PyDict>>) -> PyResult<Self> {
        Ok(Options(match given {
            Some(d) => d.copy()?,
            None => PyDict::new(py),
        }))
    }

    /// Takes option `name`, converted.
    fn take<T: for<'a> FromPyObjectOwned<'a>>(&self, name: &str) -> PyResult<Option<T>> {
        let Some(value) = self.0.get_item(name)? else {
            return Ok(None);
        };
        self.0.del_item(name)?;
        if value.is_none() {
            return Ok(None);
        }
        let extracted = value.extract::<T>().map_err(Into::<PyErr>::into);
        extracted
            .map(Some)
            .map_err(|e| PyTypeError::new_err(format!("option {name}: {e}")))
    }

    /// Takes flag `name` (false when absent).
    fn flag(&self, name: &str) -> PyResult<bool> {
        Ok(self.take::<bool>(name)?.unwrap_or(false))
    }

    /// Takes per-stream option `name`: a value (for every category), a
    /// list of `VALUE` and `CATEGORY::VALUE` strings, or a dict from
    /// category (None or "" for every category) to value; values may be
    /// numbers.
    fn values(&self, name: &str) -> PyResult<Vec<String>> {
        let Some(value) = self.0.get_item(name)? else {
            return Ok(Vec::new());
        };
        self.0.del_item(name)?;
        let text = |v: &Bound<'py, PyAny>| -> PyResult<String> {
            if v.is_instance_of::<pyo3::types::PyString>() {
                v.extract()
            } else if v.is_instance_of::<pyo3::types::PyInt>() {
                Ok(v.str()?.to_string())
            } else {
                Err(PyTypeError::new_err(format!(
                    "option {name}: values are str or int, not {}",
                    v.get_type().name()?
                )))
            }
        };
        if value.is_none() {
            Ok(Vec::new())
        } else if let Ok(dict) = value.cast::<PyDict>() {
            dict.iter()
                .map(|(k, v)| {
                    let v = text(&v)?;
                    if k.is_none() || k.extract::<String>().is_ok_and(|k| k.is_empty()) {
                        Ok(v)
                    } else {
                        Ok(format!("{}::{v}", k.extract::<String>()?))
                    }
                })
                .collect()
        } else if let Ok(one) = text(&value) {
            Ok(vec![one])
        } else {
            value.try_iter()?.map(|v| text(&v?)).collect()
        }
    }

    /// What the history records as the command line of a call: the
    /// function, its paths, the level and every option given (`name=value`,
    /// values as Python shows them).
    fn arguments(&self, function: &str, paths: &[&PathBuf], level: u8) -> PyResult<Vec<String>> {
        let mut args = vec![function.to_string()];
        args.extend(paths.iter().map(|p| p.display().to_string()));
        args.push(format!("level={level}"));
        for (k, v) in self.0.iter() {
            args.push(format!("{k}={}", v.repr()?));
        }
        Ok(args)
    }

    /// Fails on any option not taken.
    pub(crate) fn finish(self, what: &str) -> PyResult<()> {
        let left: Vec<String> = self.0.keys().iter().map(|k| k.to_string()).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(PyTypeError::new_err(format!(
                "{what}() got unknown options: {}",
                left.join(", ")
            )))
        }
    }
}

fn level_of(level: u8) -> PyResult<Level> {
    Level::get(level)
        .ok_or_else(|| PyValueError::new_err(format!("level {level} out of range 0 to 9")))
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The bytes of a `header` option: bytes, or the path of a file.
fn header(options: &Options<'_>) -> PyResult<Option<Vec<u8>>> {
    let Some(value) = options.0.get_item("header")? else {
        return Ok(None);
    };
    options.0.del_item("header")?;
    if let Ok(bytes) = value.extract::<Vec<u8>>() {
        return Ok(Some(bytes));
    }
    let path: PathBuf = value.extract()?;
    Ok(Some(std::fs::read(&path)?))
}

/// The image `path` and what options `force`, `fsync`, `header`,
/// `recovery`, `sign` (with `sign_name`, `sign_version`, `sign_expires`)
/// and `encrypt_to` or `passphrase_file` add to it.
pub(crate) fn output_options(opts: &Options<'_>, path: PathBuf) -> PyResult<OutputOptions> {
    Ok(OutputOptions {
        path,
        force: opts.flag("force")?,
        fsync: opts.flag("fsync")?,
        header: header(opts)?,
        recovery: opts.take("recovery")?,
        sign: signing_key(opts)?,
        claims: claims(opts)?,
        encrypt: recipients(opts)?,
    })
}

/// The keys for the images a build reads: those trusted to have signed
/// them (option `trust`), those that open encrypted ones (options
/// `identity` and `input_passphrase_file`), and whether option `decrypt`
/// writes a plain image from them.
pub(crate) type InputKeys = (
    Option<hoard_trust::TrustedKeys>,
    Option<Arc<hoard_trust::encrypt::Identities>>,
    bool,
);

/// The [`InputKeys`] the options name.
pub(crate) fn input_keys(opts: &Options<'_>) -> PyResult<InputKeys> {
    let trust = crate::image::trusted_keys(opts.take::<Vec<PathBuf>>("trust")?)?;
    let identity = opts.take::<Vec<PathBuf>>("identity")?;
    let passphrase = opts.take::<PathBuf>("input_passphrase_file")?;
    let identities = crate::image::identities(identity, passphrase.as_deref())?;
    Ok((trust, identities, opts.flag("decrypt")?))
}

/// Builds the image `image_path` from the directory (or tar/cpio archive)
/// `source`; see `hoard.create` for the options.
#[pyfunction]
#[pyo3(signature = (source, image_path, level=hoard_writer::level::DEFAULT_LEVEL, progress=None, options=None))]
pub fn create<'py>(
    py: Python<'py>,
    source: PathBuf,
    image_path: PathBuf,
    level: u8,
    progress: Option<Bound<'py, PyAny>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = Options::new(py, options)?;
    let arguments = opts.arguments("hoard.create", &[&source, &image_path], level)?;
    let mut o = CreateOptions::at_level(source, image_path.clone(), level_of(level)?);
    o.output = output_options(&opts, image_path)?;
    if let Some(b) = opts.take("block_size_bits")? {
        o.block_size_bits = b;
    }
    if let Some(c) = opts.take("metadata_compression")? {
        o.set_metadata_compression(c);
    }
    if let Some(c) = opts.take("schema_compression")? {
        o.schema_compression = c;
    }
    let compression = opts.values("compression")?;
    let window_size = opts.values("window_size")?;
    let window_step = opts.values("window_step")?;
    let lookback = opts.values("max_lookback_blocks")?;
    let order = opts.values("order")?;
    let hotness = opts
        .take::<PathBuf>("hotness_list")?
        .map(|file| PathList::read(&file).map(Arc::new).map_err(value_error))
        .transpose()?;
    if let Some(list) = categorizers(&opts)? {
        let categorizers = Categorizer::parse_list(&list).map_err(value_error)?;
        o.categorize = (!categorizers.is_empty()).then_some(CategorizeOptions {
            categorizers,
            incompressible: incompressible(&opts)?,
            hotness: hotness.clone(),
        });
        o.per_category = hoard_writer::level::category_defaults(level);
    }
    if let Some(list) = hotness {
        if !o
            .categorize
            .as_ref()
            .is_some_and(|c| c.categorizers.contains(&Categorizer::Hotness))
        {
            return Err(value_error(format!(
                "hotness_list {} is for the hotness categorizer: add categorize=\"hotness\"",
                list.file().display()
            )));
        }
    }
    let given = |option, values| Given { option, values };
    StreamOptions {
        compression: given("compression", &compression),
        window_size: given("window_size", &window_size),
        window_step: given("window_step", &window_step),
        lookback: given("max_lookback_blocks", &lookback),
        order: given("order", &order),
    }
    .apply(&mut o)
    .map_err(value_error)?;
    o.category_names = !opts.flag("no_category_names")?;
    o.category_metadata = o.category_names && !opts.flag("no_category_metadata")?;
    if let Some(n) = opts.take::<usize>("num_workers")? {
        o.workers = n.max(1);
    }
    if let Some(l) = opts.take("memory_limit")? {
        o.memory_limit = l;
    }
    o.scan.with_devices = opts.flag("with_devices")?;
    o.scan.with_specials = opts.flag("with_specials")?;
    o.scan.remove_empty_dirs = opts.flag("remove_empty_dirs")?;
    o.scan.no_xattrs = opts.flag("no_xattrs")?;
    o.sparse = !opts.flag("no_sparse_files")?;
    o.scan.xattr_filter = opts
        .take::<String>("xattr_filter")?
        .map(|f| xattr_filter(&f).map_err(value_error))
        .transpose()?;
    if let Some(list) = opts.take::<Vec<u8>>("input_list")? {
        o.scan.only = Some(InputList::parse(&list));
    }
    if let Some(rules) = opts.take::<Vec<String>>("filter")? {
        o.filter = Some(Filter::parse(&rules).map_err(value_error)?);
    }
    o.attrs.set_owner = opts.take("set_owner")?;
    o.attrs.set_group = opts.take("set_group")?;
    let source_date_epoch = history::source_date_epoch().map_err(value_error)?;
    let now = history::now().map_err(value_error)?;
    o.attrs.set_time = set_time(&opts, now)?;
    o.attrs.keep_all_times = opts.flag("keep_all_times")?;
    o.attrs.time_resolution_ns = opts
        .take::<String>("time_resolution")?
        .map(|r| parse_resolution(&r).map_err(value_error))
        .transpose()?;
    o.attrs.clamp_time = source_date_epoch;
    o.attrs.create_timestamp = (!opts.flag("no_create_timestamp")?).then_some(now.max(0) as u64);
    if let Some(chmod) = opts.take::<String>("chmod")? {
        o.attrs.chmod = Some(Chmod::parse(&chmod).map_err(value_error)?);
    }
    if let Some(pack) = opts.take::<String>("pack_metadata")? {
        o.pack = PackOptions::parse(&pack).map_err(value_error)?;
    }
    o.section_index = !opts.flag("no_section_index")?;
    o.delta = delta(&opts)?;
    (o.trust, o.identities, o.decrypt) = input_keys(&opts)?;
    o.history = history_entry(&opts, arguments, now)?;
    opts.finish("create")?;

    let live = Progress::default();
    let summary = run_with_progress(py, progress.as_ref(), &live, |cancel| {
        hoard_writer::create(&o, &live, cancel)
    })?;
    summary_dict(py, &summary)
}

/// What a build wrote, as the dict `create` and `merge` return.
pub(crate) fn summary_dict<'py>(
    py: Python<'py>,
    summary: &hoard_writer::Summary,
) -> PyResult<Bound<'py, PyDict>> {
    let c = &summary.counts;
    let dict = PyDict::new(py);
    dict.set_item("directories", c.dirs)?;
    dict.set_item("symlinks", c.symlinks)?;
    dict.set_item("files", c.files)?;
    dict.set_item("devices", c.devices)?;
    dict.set_item("specials", c.specials)?;
    dict.set_item("original_bytes", summary.original_bytes)?;
    dict.set_item("duplicate_files", summary.duplicate_files)?;
    dict.set_item("blocks", summary.blocks)?;
    dict.set_item("image_bytes", summary.image_bytes)?;
    dict.set_item("warnings", &summary.warnings)?;
    Ok(dict)
}

/// The layer options: `base` (a list of image paths, lowest first)
/// with `delta`, `trust_mtime`, `opaque_dirs`, `force_stack` and
/// `metacopy`, as `hoard create --base`; None without a base.
fn delta(opts: &Options<'_>) -> PyResult<Option<hoard_writer::delta::DeltaOptions>> {
    let layer = hoard_writer::delta::DeltaOptions {
        bases: opts.take("base")?.unwrap_or_default(),
        trust_mtime: opts.flag("trust_mtime")?,
        opaque_dirs: opts.flag("opaque_dirs")?,
        force_stack: opts.flag("force_stack")?,
        metacopy: opts.flag("metacopy")?,
        refer_to_base: opts.flag("delta")?,
    };
    if layer.bases.is_empty() {
        if layer.refer_to_base {
            return Err(PyValueError::new_err("option delta needs a base"));
        }
        return Ok(None);
    }
    Ok(Some(layer))
}

/// The `incompressible_*` options over their defaults (those of the
/// command line).
fn incompressible(opts: &Options<'_>) -> PyResult<IncompressibleOptions> {
    let mut i = IncompressibleOptions::default();
    if let Some(n) = opts.take("incompressible_min_input_size")? {
        i.min_input_size = n;
    }
    if let Some(n) = opts.take::<usize>("incompressible_block_size")? {
        i.block_size = n.max(1);
    }
    i.fragments = opts.flag("incompressible_fragments")?;
    if let Some(r) = opts.take("incompressible_ratio")? {
        i.ratio = r;
    }
    if let Some(l) = opts.take("incompressible_zstd_level")? {
        i.zstd_level = l;
    }
    Ok(i)
}

/// The `set_time` option: seconds since the epoch, "now", or an ISO 8601
/// date and time (UTC).
fn set_time(opts: &Options<'_>, now: i64) -> PyResult<Option<i64>> {
    let Some(value) = opts.0.get_item("set_time")? else {
        return Ok(None);
    };
    opts.0.del_item("set_time")?;
    if value.is_none() {
        return Ok(None);
    }
    if let Ok(secs) = value.extract::<i64>() {
        return Ok(Some(secs));
    }
    let text: String = value
        .extract()
        .map_err(|_| PyTypeError::new_err("option set_time: seconds or a date string"))?;
    parse_time(&text, now).map(Some).map_err(value_error)
}

/// The history entry of this call (none with `no_history`; without its
/// time with `no_history_timestamps`).
fn history_entry(
    opts: &Options<'_>,
    arguments: Vec<String>,
    now: i64,
) -> PyResult<Option<hoard_format::history::HistoryEntry>> {
    let stamp = !opts.flag("no_history_timestamps")?;
    Ok((!opts.flag("no_history")?)
        .then(|| history::this_run(arguments, stamp.then_some(now.max(0) as u64))))
}

/// The `categorize` option: True for every categorizer, False for none, or
/// a list.
fn categorizers(opts: &Options<'_>) -> PyResult<Option<String>> {
    let Some(value) = opts.0.get_item("categorize")? else {
        return Ok(None);
    };
    opts.0.del_item("categorize")?;
    if let Ok(all) = value.extract::<bool>() {
        let list = if all {
            hoard_writer::categorize::ALL_NAMES
        } else {
            "none"
        };
        return Ok(Some(list.to_string()));
    }
    value.extract::<String>().map(Some).map_err(|_| {
        PyTypeError::new_err("option categorize: True, False or a comma-separated list")
    })
}

/// Runs `build` on another thread, without the GIL; meanwhile calls
/// `callback` (if any) with the counters of `live` a few times a second.
/// An exception in the callback, or Ctrl-C, cancels the build.
fn run_with_progress<T: Send>(
    py: Python<'_>,
    callback: Option<&Bound<'_, PyAny>>,
    live: &Progress,
    build: impl FnOnce(Arc<AtomicBool>) -> hoard_writer::Result<T> + Send,
) -> PyResult<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let mut raised: Option<PyErr> = None;
    let result = std::thread::scope(|scope| {
        let worker = {
            let cancel = Arc::clone(&cancel);
            scope.spawn(move || build(cancel))
        };
        while !worker.is_finished() {
            py.detach(|| std::thread::sleep(PROGRESS_EVERY));
            if raised.is_some() {
                continue;
            }
            let report = py.check_signals().and_then(|()| match callback {
                Some(cb) => cb.call1((progress_dict(py, live)?,)).map(drop),
                None => Ok(()),
            });
            if let Err(e) = report {
                raised = Some(e);
                cancel.store(true, Ordering::Relaxed);
            }
        }
        worker.join()
    });
    if let Some(e) = raised {
        return Err(e);
    }
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(image_error(e)),
        Err(_) => Err(PyKeyboardInterrupt::new_err(
            "the build stopped unexpectedly",
        )),
    }
}

/// The progress counters as a dict: phase and counts.
fn progress_dict<'py>(py: Python<'py>, p: &Progress) -> PyResult<Bound<'py, PyDict>> {
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let dict = PyDict::new(py);
    dict.set_item("phase", format!("{:?}", p.phase()).to_lowercase())?;
    dict.set_item("entries_scanned", get(&p.scan.entries))?;
    dict.set_item("bytes_scanned", get(&p.scan.bytes))?;
    dict.set_item("bytes_hashed", get(&p.dedupe.bytes))?;
    dict.set_item("bytes_to_segment", get(&p.to_segment))?;
    dict.set_item("bytes_segmented", get(&p.segmented))?;
    dict.set_item("blocks_written", get(&p.blocks.blocks))?;
    dict.set_item("bytes_compressed", get(&p.blocks.compressed_bytes))?;
    Ok(dict)
}

/// Rewrites image `source` as `image_path` with new compression (and,
/// with `rebuild_metadata`, new owners, times, permissions); see
/// `hoard.rewrite` for the options.
#[pyfunction]
#[pyo3(signature = (source, image_path, level=hoard_writer::level::DEFAULT_LEVEL, options=None))]
pub fn rewrite(
    py: Python<'_>,
    source: PathBuf,
    image_path: PathBuf,
    level: u8,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(u64, u64, u64)> {
    let opts = Options::new(py, options)?;
    let arguments = opts.arguments("hoard.rewrite", &[&source, &image_path], level)?;
    let level = level_of(level)?;
    let now = history::now().map_err(value_error)?;
    let recompress = opts
        .take::<String>("recompress")?
        .unwrap_or_else(|| "all".into());
    let (blocks, metadata) = match recompress.as_str() {
        "all" => (true, true),
        "block" => (true, false),
        "metadata" => (false, true),
        "none" => (false, false),
        other => {
            return Err(PyValueError::new_err(format!(
                "recompress '{other}': expected all, block, metadata or none"
            )))
        }
    };
    let compression = split("compression", &opts.values("compression")?, |s| {
        Ok(s.to_string())
    })
    .map_err(value_error)?;
    let metadata_compression = opts.take::<String>("metadata_compression")?;
    let rebuild = if opts.flag("rebuild_metadata")? {
        Some(Rebuild {
            set_owner: opts.take("set_owner")?,
            set_group: opts.take("set_group")?,
            set_time: set_time(&opts, now)?.map(|t| t.max(0) as u64),
            chmod: opts
                .take::<String>("chmod")?
                .map(|c| Chmod::parse(&c).map_err(value_error))
                .transpose()?,
        })
    } else {
        None
    };
    let offset = match opts.take::<String>("image_offset")? {
        Some(o) => o.parse().map_err(PyValueError::new_err)?,
        None => Default::default(),
    };
    let (trust, identities, decrypt) = input_keys(&opts)?;
    let options = RewriteOptions {
        input: source,
        offset,
        output: output_options(&opts, image_path)?,
        data_compression: blocks.then(|| compression.general.unwrap_or_else(|| level.data.into())),
        per_category: compression.per_category,
        metadata_compression: metadata
            .then(|| metadata_compression.unwrap_or_else(|| level.metadata.into())),
        schema_compression: opts
            .take("schema_compression")?
            .unwrap_or_else(|| level.schema.into()),
        rebuild,
        pack: PackOptions::parse(
            &opts
                .take::<String>("pack_metadata")?
                .unwrap_or_else(|| "auto".into()),
        )
        .map_err(value_error)?,
        workers: opts
            .take::<usize>("num_workers")?
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        memory_limit: opts
            .take("memory_limit")?
            .unwrap_or_else(hoard_writer::options::default_memory_limit),
        history: history_entry(&opts, arguments, now)?,
        section_index: !opts.flag("no_section_index")?,
        trust,
        identities,
        decrypt,
    };
    opts.finish("rewrite")?;
    let progress = Default::default();
    let summary = py
        .detach(|| {
            hoard_writer::rewrite::rewrite(&options, &progress, Arc::new(AtomicBool::new(false)))
        })
        .map_err(image_error)?;
    Ok((summary.blocks, summary.input_bytes, summary.output_bytes))
}

/// Who the image is encrypted to: option `encrypt_to` (recipients or
/// files of them) or `passphrase_file`, if given.
fn recipients(opts: &Options<'_>) -> PyResult<Option<Arc<hoard_trust::encrypt::Recipients>>> {
    let to = opts.take::<Vec<String>>("encrypt_to")?;
    let passphrase = opts.take::<PathBuf>("passphrase_file")?;
    let recipients = match (to, passphrase) {
        (None, None) => return Ok(None),
        (Some(to), None) => hoard_trust::encrypt::Recipients::parse(&to),
        (None, Some(path)) => hoard_trust::encrypt::Recipients::passphrase(&path),
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "encrypt_to and passphrase_file cannot be used together",
            ))
        }
    };
    recipients.map(|r| Some(Arc::new(r))).map_err(value_error)
}

/// The secret key of option `sign` (a key file path), if given.
fn signing_key(opts: &Options<'_>) -> PyResult<Option<Arc<hoard_trust::SecretKey>>> {
    opts.take::<PathBuf>("sign")?
        .map(|p| {
            hoard_trust::SecretKey::load(&p)
                .map(Arc::new)
                .map_err(value_error)
        })
        .transpose()
}

/// What the signature claims: options `sign_name`, `sign_version` and
/// `sign_expires` (an RFC 3339 date or time).
fn claims(opts: &Options<'_>) -> PyResult<hoard_trust::Claims> {
    let expires = opts
        .take::<String>("sign_expires")?
        .map(|s| hoard_trust::claims::parse_time(&s))
        .transpose()
        .map_err(value_error)?;
    hoard_trust::Claims::new(opts.take("sign_name")?, opts.take("sign_version")?, expires)
        .map_err(value_error)
}

/// The path below the prefix and the size of each object under `url`
/// (`s3://bucket/prefix/`), in key order: what `hoard.distributed`
/// plans the shards of a build from.
#[pyfunction]
pub fn list_objects(py: Python<'_>, url: PathBuf) -> PyResult<Vec<(String, u64)>> {
    py.detach(|| hoard_writer::objects::list_objects(&url))
        .map_err(image_error)
}
