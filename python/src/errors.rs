//! Errors: every [`xhal::Error`] becomes the Python exception class that mirrors its kind,
//! with the Rust message.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

/// A result whose error is an [`xhal::Error`].
pub(crate) type Res<T> = std::result::Result<T, xhal::Error>;

/// The package's exception classes by kind name (`InvalidArgument`, ...), from `__init__.py`.
static CLASSES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// Every kind name a class must be registered for.
const KINDS: [&str; 14] = [
    "InvalidArgument",
    "OutOfBounds",
    "OutOfMemory",
    "Unsupported",
    "NotFound",
    "InvalidHandle",
    "DeviceLost",
    "KernelFault",
    "Timeout",
    "Internal",
    "DriverUnavailable",
    "PluginLoad",
    "Selection",
    "Unknown",
];

pub(crate) fn register(py: Python<'_>, classes: &Bound<'_, PyDict>) -> PyResult<()> {
    for kind in KINDS {
        match classes.get_item(kind)? {
            Some(class) if class.cast::<PyType>().is_ok() => {}
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "no exception class for the error kind {kind}"
                )))
            }
        }
    }
    CLASSES
        .set(py, classes.clone().unbind())
        .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("the exception classes are already registered"))
}

fn kind_name(kind: xhal::ErrorKind) -> &'static str {
    use xhal::ErrorKind as K;
    match kind {
        K::InvalidArgument => "InvalidArgument",
        K::OutOfBounds => "OutOfBounds",
        K::OutOfMemory => "OutOfMemory",
        K::Unsupported => "Unsupported",
        K::NotFound => "NotFound",
        K::InvalidHandle => "InvalidHandle",
        K::DeviceLost => "DeviceLost",
        K::KernelFault => "KernelFault",
        K::Timeout => "Timeout",
        K::Internal => "Internal",
        K::DriverUnavailable => "DriverUnavailable",
        K::PluginLoad => "PluginLoad",
        K::Selection => "Selection",
        _ => "Unknown",
    }
}

/// The Python exception for `error`.
pub(crate) fn py_err(error: xhal::Error) -> PyErr {
    Python::attach(|py| {
        let class = CLASSES
            .get(py)
            .and_then(|classes| classes.bind(py).get_item(kind_name(error.kind())).ok().flatten())
            .and_then(|class| class.cast_into::<PyType>().ok());
        match class {
            Some(class) => PyErr::from_type(class, error.to_string()),
            // Before `__init__.py` registered its classes (only the native module imported).
            None => pyo3::exceptions::PyRuntimeError::new_err(error.to_string()),
        }
    })
}

/// An [`xhal::ErrorKind::InvalidArgument`] error, as xhal's own checks raise.
pub(crate) fn invalid(message: impl Into<String>) -> xhal::Error {
    xhal::Error::invalid_argument(message)
}

/// Turns an [`xhal::Error`] result into a Python one.
pub(crate) trait IntoPy<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Res<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(py_err)
    }
}
