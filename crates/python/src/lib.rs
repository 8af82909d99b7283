//! `hoard._hoard`, the compiled part of the Python package `hoard`: a thin
//! layer over hoard-reader (`image::Image`) and hoard-writer
//! (`build::create`, `build::rewrite`, `merge::merge`, and
//! `build::list_objects` for `hoard.distributed`) that converts arguments and
//! results and releases the GIL while the Rust code runs. The Python half
//! (`python/hoard`) adds what is most natural in Python: `os.stat_result`,
//! file objects, `walk`, the fsspec file system.

mod build;
mod errors;
mod image;
mod merge;

use pyo3::prelude::*;

/// The compiled core of the `hoard` package (use `hoard`, not this).
#[pymodule]
fn _hoard(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<image::Image>()?;
    m.add_function(wrap_pyfunction!(build::create, m)?)?;
    m.add_function(wrap_pyfunction!(build::rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(build::list_objects, m)?)?;
    m.add_function(wrap_pyfunction!(merge::merge, m)?)?;
    m.add("ImageError", m.py().get_type::<errors::ImageError>())?;
    Ok(())
}
