//! `hoard.merge`: images joined into one (hoard-writer's `merge`), run
//! without the GIL.

use crate::build::{input_keys, output_options, Options};
use crate::errors::image_error;
use hoard_writer::history;
use hoard_writer::level::Level;
use hoard_writer::merge::merge_reusing_blocks;
use hoard_writer::options::{Input, Parts};
use hoard_writer::CreateOptions;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Joins the images `parts` into `image_path`: each under a directory of
/// `names` (default: its file name without extension), or with `union`
/// at the root; `options` are the output options and keys of
/// `hoard.create`; see `hoard.merge`.
#[pyfunction]
#[pyo3(signature = (parts, image_path, names=None, union=false, dedupe=true, recompress=false,
                    level=hoard_writer::level::DEFAULT_LEVEL, force=false, options=None))]
#[allow(clippy::too_many_arguments)]
pub fn merge<'py>(
    py: Python<'py>,
    parts: Vec<PathBuf>,
    image_path: PathBuf,
    names: Option<Vec<String>>,
    union: bool,
    dedupe: bool,
    recompress: bool,
    level: u8,
    force: bool,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = Options::new(py, options)?;
    let level = Level::get(level)
        .ok_or_else(|| PyValueError::new_err(format!("level {level} out of range 0 to 9")))?;
    if parts.is_empty() {
        return Err(PyValueError::new_err("no images to merge"));
    }
    let mut spec = match (union, names) {
        (true, Some(_)) => return Err(PyValueError::new_err("names and union exclude each other")),
        (true, None) => Parts {
            images: parts,
            names: None,
            dedupe,
        },
        (false, None) => Parts::under_own_names(parts).map_err(image_error)?,
        (false, Some(names)) => Parts {
            images: parts,
            names: Some(names),
            dedupe,
        },
    };
    spec.dedupe = dedupe;
    let mut o = CreateOptions::at_level(Input::Parts(spec), image_path.clone(), level);
    o.output = output_options(&opts, image_path)?;
    o.output.force |= force;
    (o.trust, o.identities, o.decrypt) = input_keys(&opts)?;
    opts.finish("merge")?;
    o.categorize = None;
    let now = history::now().map_err(|e| PyValueError::new_err(e.to_string()))?;
    o.history = Some(history::this_run(
        vec!["hoard.merge".into()],
        Some(now.max(0) as u64),
    ));
    let summary = py
        .detach(|| {
            if recompress {
                hoard_writer::create(&o, &Default::default(), Arc::new(AtomicBool::new(false)))
            } else {
                merge_reusing_blocks(&o)
            }
        })
        .map_err(image_error)?;
    crate::build::summary_dict(py, &summary)
}
