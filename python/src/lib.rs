//! `xhal._native`: the native half of the `xhal` Python package. The package's
//! `__init__.py` re-exports what is here and adds the exception classes, which it hands back
//! through [`register_errors`] so that every error from Rust arrives as the class that
//! mirrors its [`xhal::ErrorKind`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyDict;

mod array;
mod device;
mod dlpack;
mod dtype;
mod errors;
mod kernel;
mod stream;

pub(crate) use errors::{invalid, py_err};

/// The runtime every device comes from, discovered once per process.
static RUNTIME: OnceLock<std::result::Result<Arc<xhal::Runtime>, xhal::Error>> = OnceLock::new();

/// Where the package's own plugins are, set by `__init__.py` before anything is discovered.
static BUNDLED_PLUGINS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The process's runtime: the built-in CPU backend and the plugins from `XHAL_PLUGIN_PATH`
/// when it is set, else from the package's `plugins` folder.
pub(crate) fn runtime(py: Python<'_>) -> PyResult<Arc<xhal::Runtime>> {
    let result = py.detach(|| {
        RUNTIME.get_or_init(|| {
            let bundled = BUNDLED_PLUGINS.lock().map(|folder| folder.clone()).unwrap_or(None);
            match (std::env::var_os("XHAL_PLUGIN_PATH"), bundled) {
                (None, Some(folder)) => xhal::Runtime::builder().plugin_folders([folder]).build(),
                _ => xhal::Runtime::discover(),
            }
            .map(Arc::new)
        })
    });
    match result {
        Ok(runtime) => Ok(Arc::clone(runtime)),
        Err(error) => Err(py_err(error.clone())),
    }
}

/// Names the folder of plugins that came with the package (before the first discovery).
#[pyfunction]
fn _set_bundled_plugins(folder: PathBuf) {
    if let Ok(mut bundled) = BUNDLED_PLUGINS.lock() {
        *bundled = Some(folder);
    }
}

/// Hands the exception classes to the native module, by `ErrorKind` name.
#[pyfunction]
fn _register_errors(py: Python<'_>, classes: &Bound<'_, PyDict>) -> PyResult<()> {
    errors::register(py, classes)
}

/// Every device of every backend, in discovery order: what `xhal devices` lists.
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<Vec<device::DeviceEntry>> {
    let runtime = runtime(py)?;
    Ok(runtime.devices().into_iter().map(device::DeviceEntry::from).collect())
}

/// What discovery found, as `xhal doctor --json` reports it: the search folders, every plugin
/// file tried and what became of it, the built-in backends, and each backend with its devices
/// or the reason it has none.
#[pyfunction]
fn doctor(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let runtime = runtime(py)?;
    let backends: Vec<serde_json::Value> = runtime
        .backends()
        .iter()
        .map(|entry| {
            let devices = match &entry.devices {
                Ok(devices) => {
                    serde_json::json!({ "devices": devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>() })
                }
                Err(error) => serde_json::json!({ "error": error.to_string() }),
            };
            serde_json::json!({
                "name": entry.info.name,
                "version": entry.info.version,
                "abi_version": format!("{}.{}", entry.info.abi_version.0, entry.info.abi_version.1),
                "source": entry.source,
                "devices": devices,
            })
        })
        .collect();
    let report = serde_json::json!({
        "discovery": runtime.report(),
        "backends": backends,
        "bundled_plugins": BUNDLED_PLUGINS
            .lock()
            .ok()
            .and_then(|folder| folder.clone())
            .map(|folder| folder.display().to_string()),
    });
    let text =
        serde_json::to_string(&report).map_err(|e| py_err(invalid(format!("the report does not serialize: {e}"))))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(_set_bundled_plugins, m)?)?;
    m.add_function(wrap_pyfunction!(_register_errors, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(doctor, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_class::<device::DeviceEntry>()?;
    m.add_class::<device::Device>()?;
    m.add_class::<array::Array>()?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<stream::Event>()?;
    m.add_class::<kernel::Module>()?;
    m.add_class::<kernel::Kernel>()?;
    m.add_class::<kernel::Param>()?;
    Ok(())
}
