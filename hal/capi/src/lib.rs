//! The xhal C API for applications: `libxhal_capi.so` and `include/xhal_capi.h`.
//!
//! The plugin ABI (`include/xhal.h`) is the vendor's side of xhal; this is the other side, for
//! C and C++ programs (and the PyTorch device) that use the runtime: discovery and device
//! choice with its explanation, buffers from the caching allocator, streams, events, copies,
//! WGSL modules with reflection, and launches checked against that reflection.
//!
//! Rules every entry point follows (docs/capi.md says more):
//!
//! - It returns an `xhal_status_t`; on failure the calling thread's last error holds the
//!   status and a message naming the function, what was wrong and what was expected
//!   (`xhal_last_error_message`).
//! - Handles are opaque. Each is a key into the library's table of live objects, never a
//!   pointer to one: a destroyed, stale, null or wrong-kind handle is
//!   `XHAL_ERROR_INVALID_HANDLE`, never a crash.
//! - Structs the library fills or reads begin with `struct_size`; fields are only appended,
//!   each addition a minor version.
//! - Panics never cross into C: each entry point catches them and returns
//!   `XHAL_ERROR_INTERNAL`.

// The C names (`xhal_device_t`, `xhal_status_t`) are the API; Rust's naming rules yield to them.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod graph;
mod handles;
mod kernel;
mod memory;
mod pinned;
mod profiler;
mod runtime;
mod stream;

pub use kernel::*;
pub use memory::*;
pub use pinned::*;
pub use runtime::*;
pub use stream::*;

/// The major version of this API. A program built against another major is refused by
/// `xhal_runtime_create`.
pub const XHAL_API_MAJOR: u32 = 1;
/// The minor version of this API: additions only. A program built against a newer minor than
/// the library's is refused by `xhal_runtime_create`.
pub const XHAL_API_MINOR: u32 = 4;

/// What every entry point returns: `XHAL_SUCCESS` or one of the `XHAL_ERROR_` codes. The
/// codes 1 to 12 have the numbers of the plugin ABI's `XHAL_STATUS_` codes.
pub type xhal_status_t = u32;

/// The call succeeded.
pub const XHAL_SUCCESS: xhal_status_t = 0;
/// An argument is invalid (a null pointer, a size that does not fit, WGSL that does not compile).
pub const XHAL_ERROR_INVALID_ARGUMENT: xhal_status_t = 1;
/// An offset or size reaches past the end of a buffer.
pub const XHAL_ERROR_OUT_OF_BOUNDS: xhal_status_t = 2;
/// The device (or the host) has no memory for the request.
pub const XHAL_ERROR_OUT_OF_MEMORY: xhal_status_t = 3;
/// The device, or this library, does not do what was asked.
pub const XHAL_ERROR_UNSUPPORTED: xhal_status_t = 4;
/// What was named (a device, an entry point) does not exist.
pub const XHAL_ERROR_NOT_FOUND: xhal_status_t = 5;
/// A handle is null, destroyed, or of another kind.
pub const XHAL_ERROR_INVALID_HANDLE: xhal_status_t = 6;
/// The device stopped working; its streams report this from then on.
pub const XHAL_ERROR_DEVICE_LOST: xhal_status_t = 7;
/// A kernel faulted while it ran.
pub const XHAL_ERROR_KERNEL_FAULT: xhal_status_t = 8;
/// A wait timed out.
pub const XHAL_ERROR_TIMEOUT: xhal_status_t = 9;
/// Work has not completed (reserved; queries answer through their out-parameter instead).
pub const XHAL_ERROR_NOT_READY: xhal_status_t = 10;
/// A fault inside xhal or a plugin; the message says where.
pub const XHAL_ERROR_INTERNAL: xhal_status_t = 11;
/// A backend's driver is missing or unusable.
pub const XHAL_ERROR_DRIVER_UNAVAILABLE: xhal_status_t = 12;
/// A plugin file could not be loaded.
pub const XHAL_ERROR_PLUGIN_LOAD: xhal_status_t = 13;
/// No device satisfies the selector; the message lists each device and why it was rejected.
pub const XHAL_ERROR_SELECTION: xhal_status_t = 14;

fn status_of(kind: xhal::ErrorKind) -> xhal_status_t {
    use xhal::ErrorKind as K;
    match kind {
        K::InvalidArgument => XHAL_ERROR_INVALID_ARGUMENT,
        K::OutOfBounds => XHAL_ERROR_OUT_OF_BOUNDS,
        K::OutOfMemory => XHAL_ERROR_OUT_OF_MEMORY,
        K::Unsupported => XHAL_ERROR_UNSUPPORTED,
        K::NotFound => XHAL_ERROR_NOT_FOUND,
        K::InvalidHandle => XHAL_ERROR_INVALID_HANDLE,
        K::DeviceLost => XHAL_ERROR_DEVICE_LOST,
        K::KernelFault => XHAL_ERROR_KERNEL_FAULT,
        K::Timeout => XHAL_ERROR_TIMEOUT,
        K::DriverUnavailable => XHAL_ERROR_DRIVER_UNAVAILABLE,
        K::PluginLoad => XHAL_ERROR_PLUGIN_LOAD,
        K::Selection => XHAL_ERROR_SELECTION,
        // Internal, Unknown, and any kind a later xhal adds.
        _ => XHAL_ERROR_INTERNAL,
    }
}

/// The name of `status` (`"XHAL_ERROR_OUT_OF_BOUNDS"`), a static string; `"XHAL_ERROR_UNKNOWN"`
/// for a code this library does not know.
#[no_mangle]
pub extern "C" fn xhal_status_name(status: xhal_status_t) -> *const c_char {
    let name: &'static CStr = match status {
        XHAL_SUCCESS => c"XHAL_SUCCESS",
        XHAL_ERROR_INVALID_ARGUMENT => c"XHAL_ERROR_INVALID_ARGUMENT",
        XHAL_ERROR_OUT_OF_BOUNDS => c"XHAL_ERROR_OUT_OF_BOUNDS",
        XHAL_ERROR_OUT_OF_MEMORY => c"XHAL_ERROR_OUT_OF_MEMORY",
        XHAL_ERROR_UNSUPPORTED => c"XHAL_ERROR_UNSUPPORTED",
        XHAL_ERROR_NOT_FOUND => c"XHAL_ERROR_NOT_FOUND",
        XHAL_ERROR_INVALID_HANDLE => c"XHAL_ERROR_INVALID_HANDLE",
        XHAL_ERROR_DEVICE_LOST => c"XHAL_ERROR_DEVICE_LOST",
        XHAL_ERROR_KERNEL_FAULT => c"XHAL_ERROR_KERNEL_FAULT",
        XHAL_ERROR_TIMEOUT => c"XHAL_ERROR_TIMEOUT",
        XHAL_ERROR_NOT_READY => c"XHAL_ERROR_NOT_READY",
        XHAL_ERROR_INTERNAL => c"XHAL_ERROR_INTERNAL",
        XHAL_ERROR_DRIVER_UNAVAILABLE => c"XHAL_ERROR_DRIVER_UNAVAILABLE",
        XHAL_ERROR_PLUGIN_LOAD => c"XHAL_ERROR_PLUGIN_LOAD",
        XHAL_ERROR_SELECTION => c"XHAL_ERROR_SELECTION",
        _ => c"XHAL_ERROR_UNKNOWN",
    };
    name.as_ptr()
}

/// The version of the library that is running (which may be newer than the header a program
/// was built with). Either pointer may be null.
///
/// # Safety
///
/// Each non-null pointer points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_api_version(major: *mut u32, minor: *mut u32) {
    if !major.is_null() {
        // SAFETY: the caller passes a writable u32 or null, and null was ruled out.
        unsafe { major.write(XHAL_API_MAJOR) };
    }
    if !minor.is_null() {
        // SAFETY: as above.
        unsafe { minor.write(XHAL_API_MINOR) };
    }
}

struct LastError {
    status: xhal_status_t,
    message: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<LastError> = RefCell::new(LastError {
        status: XHAL_SUCCESS,
        message: CString::default(),
    });
}

/// The message of the most recent failed call on this thread (`""` when none has failed):
/// the function's name, what was wrong and what was expected. The string belongs to the
/// library and stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn xhal_last_error_message() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().message.as_ptr())
}

/// The status of the most recent failed call on this thread (`XHAL_SUCCESS` when none has
/// failed).
#[no_mangle]
pub extern "C" fn xhal_last_error_status() -> xhal_status_t {
    LAST_ERROR.with(|last| last.borrow().status)
}

/// Forgets this thread's last error, so that `xhal_last_error_status` reads
/// `XHAL_SUCCESS` until a call fails.
#[no_mangle]
pub extern "C" fn xhal_clear_last_error() {
    record(XHAL_SUCCESS, String::new());
}

fn record(status: xhal_status_t, message: String) -> xhal_status_t {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = LastError { status, message });
    status
}

/// The failure of a call: an xhal error, reported with the call's name.
pub(crate) type Result<T> = std::result::Result<T, xhal::Error>;

pub(crate) fn invalid(message: impl Into<String>) -> xhal::Error {
    xhal::Error::invalid_argument(message)
}

/// Runs the body of entry point `function`, turning its error or panic into a status and
/// this thread's last error.
pub(crate) fn call(function: &str, body: impl FnOnce() -> Result<()>) -> xhal_status_t {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => XHAL_SUCCESS,
        Ok(Err(error)) => {
            tracing::debug!(function, %error, "xhal C API call failed");
            record(status_of(error.kind()), format!("{function}: {error}"))
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            record(
                XHAL_ERROR_INTERNAL,
                format!("{function}: internal fault inside xhal: {what}"),
            )
        }
    }
}

/// Writes `value` through `out`, which must not be null.
///
/// # Safety
///
/// `out` is null or points to writable memory for a `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<()> {
    if out.is_null() {
        return Err(invalid(format!(
            "{what} is a null pointer; pass where to write the result"
        )));
    }
    // SAFETY: the caller guarantees `out` points to a writable T, and it is not null.
    unsafe { out.write(value) };
    Ok(())
}

/// The UTF-8 text of a NUL-terminated string argument.
///
/// # Safety
///
/// `text` is null or points to a NUL-terminated string.
pub(crate) unsafe fn text_arg<'a>(text: *const c_char, what: &str) -> Result<&'a str> {
    if text.is_null() {
        return Err(invalid(format!(
            "{what} is a null pointer; pass a NUL-terminated string"
        )));
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

/// Fills a struct the caller sized with `struct_size`: copies the first `struct_size` bytes of
/// `value` (fields a newer header appended are left as they are) and keeps `struct_size`.
///
/// # Safety
///
/// `out` is null or points to a writable struct whose first field is a `size_t struct_size`
/// and whose memory is at least `struct_size` bytes.
pub(crate) unsafe fn fill_sized<T>(out: *mut T, value: T, minimum: usize, what: &str) -> Result<()> {
    if out.is_null() {
        return Err(invalid(format!("{what} is a null pointer; pass a struct to fill")));
    }
    // SAFETY: the caller guarantees `out` points to a struct starting with a size_t.
    let declared = unsafe { out.cast::<usize>().read_unaligned() };
    if declared < minimum {
        return Err(invalid(format!(
            "{what}.struct_size is {declared}; it must be at least {minimum} (set it to sizeof the struct)"
        )));
    }
    let count = declared.min(std::mem::size_of::<T>());
    let value = std::mem::ManuallyDrop::new(value);
    // SAFETY: both regions hold at least `count` bytes (`count` ≤ size_of::<T>() and ≤ the
    // caller's struct_size); they do not overlap (`value` is a local).
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&*value as *const T).cast::<u8>().add(std::mem::size_of::<usize>()),
            out.cast::<u8>().add(std::mem::size_of::<usize>()),
            count - std::mem::size_of::<usize>(),
        )
    };
    Ok(())
}

/// Reads a struct the caller sized with `struct_size`, with fields past it as in `defaults`.
///
/// # Safety
///
/// `input` is null or points to a readable struct whose first field is a `size_t
/// struct_size` and whose memory is at least `struct_size` bytes.
pub(crate) unsafe fn read_sized<T: Copy>(input: *const T, defaults: T, minimum: usize, what: &str) -> Result<T> {
    if input.is_null() {
        return Err(invalid(format!("{what} is a null pointer")));
    }
    // SAFETY: the caller guarantees `input` points to a struct starting with a size_t.
    let declared = unsafe { input.cast::<usize>().read_unaligned() };
    if declared < minimum {
        return Err(invalid(format!(
            "{what}.struct_size is {declared}; it must be at least {minimum} (set it to sizeof the struct)"
        )));
    }
    let count = declared.min(std::mem::size_of::<T>());
    let mut value = defaults;
    // SAFETY: `input` holds at least `count` readable bytes and `value` is a T, at least
    // `count` bytes; a local does not overlap the caller's struct.
    unsafe { std::ptr::copy_nonoverlapping(input.cast::<u8>(), (&mut value as *mut T).cast::<u8>(), count) };
    Ok(value)
}
