//! The CUDA driver API through cudarc's run-time loaded bindings, every call guarded.
//!
//! cudarc resolves each entry point the first time it is called and panics when the library
//! or the symbol is missing. Every call here goes through [`call`], which checks first that
//! the library was found ([`library_status`]) and turns a panic into an error, so a missing
//! or partial driver is an xhal error, never an unwind across the plugin boundary.

pub(crate) use cudarc::driver::sys;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use xhal_backend::{Error, ErrorKind, Result};

pub(crate) use sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUresult, CUstream};

/// The library names cudarc tries, for messages.
pub(crate) const DRIVER_LIBRARY: &str = "libcuda.so.1";

/// `CU_STREAM_NON_BLOCKING`: the stream does not synchronize with the legacy default stream.
pub(crate) const STREAM_NON_BLOCKING: u32 = 0x1;
/// `CU_EVENT_DISABLE_TIMING`.
pub(crate) const EVENT_DISABLE_TIMING: u32 = 0x2;
/// `CU_MEMHOSTALLOC_PORTABLE`: the pinned memory is pinned for every context.
pub(crate) const HOST_ALLOC_PORTABLE: u32 = 0x1;

/// The text of a panic payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Whether cudarc finds the CUDA driver library. Once found it stays found (cudarc keeps the
/// first library it opens for the life of the process); a miss is asked again next time, since
/// a library opened since may now match a name cudarc tries.
pub(crate) fn library_status() -> Result<()> {
    static PRESENT: OnceLock<()> = OnceLock::new();
    if PRESENT.get().is_some() {
        return Ok(());
    }
    // SAFETY: only tries to open the candidate libraries by name.
    let message = match catch_unwind(|| unsafe { sys::is_culib_present() }) {
        Ok(true) => {
            let _ = PRESENT.set(());
            return Ok(());
        }
        Ok(false) => format!(
            "the CUDA driver library ({DRIVER_LIBRARY}, or libcuda.so) was not found on the library path; \
             install the NVIDIA driver (Debian: nvidia-driver / libcuda1), or add its folder to LD_LIBRARY_PATH"
        ),
        Err(payload) => format!("looking for the CUDA driver library failed: {}", panic_text(&*payload)),
    };
    Err(Error::new(ErrorKind::DriverUnavailable, message))
}

/// The error kind for a CUDA error code.
fn kind_of(code: CUresult) -> ErrorKind {
    use sys::cudaError_enum as E;
    match code {
        E::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        E::CUDA_ERROR_NO_DEVICE | E::CUDA_ERROR_NOT_INITIALIZED | E::CUDA_ERROR_DEINITIALIZED => {
            ErrorKind::DriverUnavailable
        }
        E::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | E::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            ErrorKind::DriverUnavailable
        }
        E::CUDA_ERROR_INVALID_VALUE => ErrorKind::InvalidArgument,
        E::CUDA_ERROR_INVALID_HANDLE | E::CUDA_ERROR_INVALID_CONTEXT => ErrorKind::InvalidHandle,
        E::CUDA_ERROR_NOT_FOUND => ErrorKind::NotFound,
        E::CUDA_ERROR_NOT_SUPPORTED
        | E::CUDA_ERROR_INVALID_PTX
        | E::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | E::CUDA_ERROR_NO_BINARY_FOR_GPU
        | E::CUDA_ERROR_INVALID_IMAGE => ErrorKind::Unsupported,
        E::CUDA_ERROR_LAUNCH_TIMEOUT => ErrorKind::Timeout,
        E::CUDA_ERROR_ECC_UNCORRECTABLE | E::CUDA_ERROR_DEVICE_UNAVAILABLE => ErrorKind::DeviceLost,
        code if is_execution_error(code) => ErrorKind::KernelFault,
        _ => ErrorKind::Internal,
    }
}

/// Whether `code` reports a fault of work that was executing: such errors corrupt the
/// context, so they stick to the stream that saw them.
pub(crate) fn is_execution_error(code: CUresult) -> bool {
    use sys::cudaError_enum as E;
    matches!(
        code,
        E::CUDA_ERROR_ILLEGAL_ADDRESS
            | E::CUDA_ERROR_LAUNCH_FAILED
            | E::CUDA_ERROR_LAUNCH_TIMEOUT
            | E::CUDA_ERROR_ASSERT
            | E::CUDA_ERROR_HARDWARE_STACK_ERROR
            | E::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | E::CUDA_ERROR_MISALIGNED_ADDRESS
            | E::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | E::CUDA_ERROR_INVALID_PC
            | E::CUDA_ERROR_ECC_UNCORRECTABLE
            | E::CUDA_ERROR_UNKNOWN
    )
}

/// `cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2) (allocating 64 bytes on ...)`.
pub(crate) fn cuda_error(function: &str, code: CUresult, doing: impl FnOnce() -> String) -> Error {
    let doing = doing();
    let context = if doing.is_empty() {
        String::new()
    } else {
        format!(" ({doing})")
    };
    Error::new(
        kind_of(code),
        format!("{function} failed: {code:?} ({}){context}", code as u32),
    )
}

/// Calls the driver entry point `function` through `body`; a panic (the library or the symbol
/// is missing) and every code but `CUDA_SUCCESS` is an error naming the call.
pub(crate) fn call(function: &str, doing: impl FnOnce() -> String, body: impl FnOnce() -> CUresult) -> Result<()> {
    match raw_call(function, body)? {
        CUresult::CUDA_SUCCESS => Ok(()),
        code => Err(cuda_error(function, code, doing)),
    }
}

/// Calls `function` through `body` and returns its code; only a panic is an error.
pub(crate) fn raw_call(function: &str, body: impl FnOnce() -> CUresult) -> Result<CUresult> {
    library_status()?;
    catch_unwind(AssertUnwindSafe(body)).map_err(|payload| {
        Error::new(
            ErrorKind::DriverUnavailable,
            format!(
                "{function} could not be called: {} (the CUDA driver library is too old or not a CUDA driver)",
                panic_text(&*payload)
            ),
        )
    })
}

/// No context for the message.
pub(crate) fn quiet() -> String {
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_call_and_the_cuda_error() {
        let error = cuda_error("cuMemAlloc", CUresult::CUDA_ERROR_OUT_OF_MEMORY, || {
            "64 bytes".to_string()
        });
        assert_eq!(error.kind(), ErrorKind::OutOfMemory);
        assert_eq!(
            error.message(),
            "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2) (64 bytes)"
        );
        let fault = cuda_error("cuStreamSynchronize", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS, quiet);
        assert_eq!(fault.kind(), ErrorKind::KernelFault);
        assert!(fault.message().contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)"), "{fault}");
        assert!(is_execution_error(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_execution_error(CUresult::CUDA_ERROR_INVALID_VALUE));
    }

    #[test]
    fn panics_become_errors() {
        // Whatever this machine has, a panicking body is an error, not an unwind.
        let result = raw_call("cuFake", || panic!("Missing symbol cuFake"));
        let error = result.unwrap_err();
        assert!(
            error.message().contains("cuFake could not be called") || error.kind() == ErrorKind::DriverUnavailable,
            "{error}"
        );
    }
}
