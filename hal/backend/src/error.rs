//! One error type for every layer: the application API, the backend traits and the plugin ABI.
//!
//! Like `std::io::Error`, an [`Error`] is a [`ErrorKind`] to match on and a message for people.
//! Every kind maps to one `XHAL_STATUS_*` code, so an error crosses the C boundary and comes
//! back with the same kind and message.

use xhal_abi as abi;

/// Result alias used throughout xhal.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, coarsely; the message says exactly what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument was malformed.
    InvalidArgument,
    /// An offset or length reached outside a buffer, or overflowed.
    OutOfBounds,
    /// The device could not provide the memory asked for.
    OutOfMemory,
    /// The device or plugin does not support what was asked.
    Unsupported,
    /// A device, backend, kernel or file does not exist.
    NotFound,
    /// A handle was destroyed, of the wrong kind, or belongs to another device or backend.
    InvalidHandle,
    /// The device stopped working.
    DeviceLost,
    /// A kernel failed while executing.
    KernelFault,
    /// An operation ran past its time limit.
    Timeout,
    /// A plugin panicked or broke an internal invariant.
    Internal,
    /// The vendor driver a backend needs is missing.
    DriverUnavailable,
    /// A plugin file could not be loaded (not a library, no entry point, wrong ABI...).
    PluginLoad,
    /// A device selector was malformed or matched nothing.
    Selection,
    /// A plugin returned a status code this host does not know.
    Unknown(u32),
}

impl ErrorKind {
    /// The `XHAL_STATUS_*` code for this kind.
    pub fn status(self) -> abi::XhalStatus {
        match self {
            ErrorKind::InvalidArgument => abi::XHAL_STATUS_INVALID_ARGUMENT,
            ErrorKind::OutOfBounds => abi::XHAL_STATUS_OUT_OF_BOUNDS,
            ErrorKind::OutOfMemory => abi::XHAL_STATUS_OUT_OF_MEMORY,
            ErrorKind::Unsupported => abi::XHAL_STATUS_UNSUPPORTED,
            ErrorKind::NotFound | ErrorKind::Selection => abi::XHAL_STATUS_NOT_FOUND,
            ErrorKind::InvalidHandle => abi::XHAL_STATUS_INVALID_HANDLE,
            ErrorKind::DeviceLost => abi::XHAL_STATUS_DEVICE_LOST,
            ErrorKind::KernelFault => abi::XHAL_STATUS_KERNEL_FAULT,
            ErrorKind::Timeout => abi::XHAL_STATUS_TIMEOUT,
            ErrorKind::Internal | ErrorKind::PluginLoad => abi::XHAL_STATUS_INTERNAL,
            ErrorKind::DriverUnavailable => abi::XHAL_STATUS_DRIVER_UNAVAILABLE,
            ErrorKind::Unknown(code) => code,
        }
    }

    /// The kind for an `XHAL_STATUS_*` code. `XHAL_STATUS_OK` and `XHAL_STATUS_NOT_READY` are
    /// not failures; they map to `Unknown` because callers handle them before asking.
    pub fn from_status(status: abi::XhalStatus) -> ErrorKind {
        match status {
            abi::XHAL_STATUS_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            abi::XHAL_STATUS_OUT_OF_BOUNDS => ErrorKind::OutOfBounds,
            abi::XHAL_STATUS_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            abi::XHAL_STATUS_UNSUPPORTED => ErrorKind::Unsupported,
            abi::XHAL_STATUS_NOT_FOUND => ErrorKind::NotFound,
            abi::XHAL_STATUS_INVALID_HANDLE => ErrorKind::InvalidHandle,
            abi::XHAL_STATUS_DEVICE_LOST => ErrorKind::DeviceLost,
            abi::XHAL_STATUS_KERNEL_FAULT => ErrorKind::KernelFault,
            abi::XHAL_STATUS_TIMEOUT => ErrorKind::Timeout,
            abi::XHAL_STATUS_INTERNAL => ErrorKind::Internal,
            abi::XHAL_STATUS_DRIVER_UNAVAILABLE => ErrorKind::DriverUnavailable,
            other => ErrorKind::Unknown(other),
        }
    }

    /// A short stable name, as used in JSON reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::OutOfBounds => "out_of_bounds",
            ErrorKind::OutOfMemory => "out_of_memory",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::NotFound => "not_found",
            ErrorKind::InvalidHandle => "invalid_handle",
            ErrorKind::DeviceLost => "device_lost",
            ErrorKind::KernelFault => "kernel_fault",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Internal => "internal",
            ErrorKind::DriverUnavailable => "driver_unavailable",
            ErrorKind::PluginLoad => "plugin_load",
            ErrorKind::Selection => "selection",
            ErrorKind::Unknown(_) => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorKind::Unknown(code) => write!(f, "unknown status {code}"),
            other => f.write_str(&other.name().replace('_', " ")),
        }
    }
}

/// An xhal error: a kind and a message naming what was wrong and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` put in front of its message.
    pub fn context(self, context: impl std::fmt::Display) -> Error {
        Error {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }

    /// Shorthand for [`ErrorKind::InvalidArgument`].
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }
    /// Shorthand for [`ErrorKind::OutOfBounds`].
    pub fn out_of_bounds(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::OutOfBounds, message)
    }
    /// Shorthand for [`ErrorKind::OutOfMemory`].
    pub fn out_of_memory(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::OutOfMemory, message)
    }
    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unsupported, message)
    }
    /// Shorthand for [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }
    /// Shorthand for [`ErrorKind::InvalidHandle`].
    pub fn invalid_handle(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidHandle, message)
    }
    /// Shorthand for [`ErrorKind::KernelFault`].
    pub fn kernel_fault(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::KernelFault, message)
    }
    /// Shorthand for [`ErrorKind::Internal`].
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Internal, message)
    }
}

/// Checks that `offset + size` fits in `capacity` without overflowing, naming `what` in the error.
pub fn check_range(what: &str, offset: u64, size: u64, capacity: u64) -> Result<()> {
    match offset.checked_add(size) {
        None => Err(Error::out_of_bounds(format!(
            "{what}: offset {offset} + size {size} overflows u64"
        ))),
        Some(end) if end > capacity => Err(Error::out_of_bounds(format!(
            "{what}: bytes {offset}..{end} reach past the end of a {capacity}-byte buffer"
        ))),
        Some(_) => Ok(()),
    }
}

#[cfg(feature = "kernel")]
impl From<xhal_kernel::KernelError> for Error {
    /// Kernel problems keep their rendered diagnostic (`file:line:column`, the source line and
    /// a caret) as the message.
    fn from(error: xhal_kernel::KernelError) -> Error {
        use xhal_kernel::KernelErrorKind as Kind;
        let kind = match error.kind() {
            Kind::Parse | Kind::Validation | Kind::Reflection | Kind::Override => ErrorKind::InvalidArgument,
            Kind::Unsupported => ErrorKind::Unsupported,
            Kind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Internal,
        };
        Error::new(kind, error.to_string())
    }
}

impl serde::Serialize for Error {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("Error", 2)?;
        out.serialize_field("kind", self.kind.name())?;
        out.serialize_field("message", &self.message)?;
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_status() {
        let kinds = [
            ErrorKind::InvalidArgument,
            ErrorKind::OutOfBounds,
            ErrorKind::OutOfMemory,
            ErrorKind::Unsupported,
            ErrorKind::NotFound,
            ErrorKind::InvalidHandle,
            ErrorKind::DeviceLost,
            ErrorKind::KernelFault,
            ErrorKind::Timeout,
            ErrorKind::Internal,
            ErrorKind::DriverUnavailable,
        ];
        for kind in kinds {
            assert_eq!(ErrorKind::from_status(kind.status()), kind);
        }
        assert_eq!(ErrorKind::from_status(999), ErrorKind::Unknown(999));
    }

    #[test]
    fn range_check_names_overflow_and_overrun() {
        assert!(check_range("copy", 0, 16, 16).is_ok());
        let overrun = check_range("copy", 8, 16, 16).unwrap_err();
        assert_eq!(overrun.kind(), ErrorKind::OutOfBounds);
        assert!(overrun.message().contains("8..24"), "{overrun}");
        let overflow = check_range("copy", u64::MAX, 2, 16).unwrap_err();
        assert!(overflow.message().contains("overflows"), "{overflow}");
    }
}
