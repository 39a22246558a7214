//! The plugin side: turns a Rust [`Backend`] into the C ABI.
//!
//! [`export_plugin!`](crate::export_plugin) defines the one exported symbol,
//! `xhal_plugin_query`. Every entry of the table is a plain function here that finds the
//! plugin's single backend, converts handles and arguments, and runs the call inside
//! `catch_unwind`, so a panic becomes an `XHAL_STATUS_INTERNAL` error instead of unwinding
//! into C (which would abort the host).
//!
//! Handles cross as the backend's `u64` handle values cast to pointers; the backend stays
//! in charge of checking them.

use crate::backend::{
    Backend, BufferArg, BufferHandle, CommandListHandle, DeviceHandle, DeviceInfo, EventHandle, KernelFormat,
    KernelHandle, LaunchArgs, ModuleHandle, StreamHandle,
};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use xhal_abi::*;

/// The plugin's backend, created by the first successful `xhal_plugin_query`.
static PLUGIN_BACKEND: OnceLock<Box<dyn Backend>> = OnceLock::new();
/// The table handed to the host; built once, never freed, so the host may keep the pointer.
static PLUGIN_API: OnceLock<XhalPluginApi> = OnceLock::new();

/// Implementation of `xhal_plugin_query` for [`export_plugin!`](crate::export_plugin).
/// Returns null when the host's major version differs, or when the backend cannot be created
/// (a backend whose driver is missing should still be created and report the reason from
/// `device_count`, so that `xhal doctor` can show it).
pub fn query(
    host_abi_major: u32,
    _host_abi_minor: u32,
    create: fn() -> Result<Box<dyn Backend>>,
) -> *const XhalPluginApi {
    if host_abi_major != XHAL_ABI_MAJOR {
        return std::ptr::null();
    }
    let created = catch_unwind(|| {
        // One creation at a time, so racing first queries never build two backends (a
        // backend may open a driver context); a failed creation is retried by the next query.
        static CREATING: Mutex<()> = Mutex::new(());
        let _creating = CREATING.lock();
        if PLUGIN_BACKEND.get().is_none() {
            match create() {
                Ok(backend) => {
                    let _ = PLUGIN_BACKEND.set(backend);
                }
                Err(error) => {
                    tracing::error!(%error, "xhal plugin could not create its backend");
                    return false;
                }
            }
        }
        true
    });
    if !matches!(created, Ok(true)) {
        return std::ptr::null();
    }
    let Some(backend) = PLUGIN_BACKEND.get() else {
        return std::ptr::null();
    };
    PLUGIN_API.get_or_init(|| build_api(backend.as_ref())) as *const XhalPluginApi
}

fn build_api(backend: &dyn Backend) -> XhalPluginApi {
    let info = backend.info();
    XhalPluginApi {
        struct_size: XHAL_PLUGIN_API_V1_5_SIZE,
        abi_major: XHAL_ABI_MAJOR,
        abi_minor: XHAL_ABI_MINOR,
        plugin_name: XhalStr::from_str(intern(&info.name)),
        plugin_version: XhalStr::from_str(intern(&info.version)),
        error_free: Some(error_free),
        device_count: Some(device_count),
        device_get_info: Some(device_get_info),
        device_open: Some(device_open),
        device_close: Some(device_close),
        buffer_allocate: Some(buffer_allocate),
        buffer_free: Some(buffer_free),
        stream_create: Some(stream_create),
        stream_destroy: Some(stream_destroy),
        stream_write: Some(stream_write),
        stream_read: Some(stream_read),
        stream_copy: Some(stream_copy),
        stream_fill: Some(stream_fill),
        stream_launch: Some(stream_launch),
        stream_record_event: Some(stream_record_event),
        stream_wait_event: Some(stream_wait_event),
        stream_synchronize: Some(stream_synchronize),
        stream_query: Some(stream_query),
        event_create: Some(event_create),
        event_destroy: Some(event_destroy),
        event_query: Some(event_query),
        event_synchronize: Some(event_synchronize),
        event_elapsed_time: Some(event_elapsed_time),
        module_load: Some(module_load),
        module_destroy: Some(module_destroy),
        kernel_get: Some(kernel_get),
        kernel_destroy: Some(kernel_destroy),
        device_memory_usage: Some(device_memory_usage),
        device_clock: Some(device_clock),
        event_timestamp: Some(event_timestamp),
        command_list_create: Some(command_list_create),
        command_list_append_copy: Some(command_list_append_copy),
        command_list_append_fill: Some(command_list_append_fill),
        command_list_append_launch: Some(command_list_append_launch),
        command_list_finish: Some(command_list_finish),
        command_list_update_launch: Some(command_list_update_launch),
        stream_submit_command_list: Some(stream_submit_command_list),
        command_list_destroy: Some(command_list_destroy),
        buffer_map: Some(buffer_map),
        buffer_unmap: Some(buffer_unmap),
        host_memory_allocate: Some(host_memory_allocate),
        host_memory_free: Some(host_memory_free),
        device_stream_priorities: Some(device_stream_priorities),
        stream_create_with_priority: Some(stream_create_with_priority),
    }
}

/// Strings in device info must outlive the call (the ABI says: the life of the process).
/// Names repeat, so interning bounds the memory kept.
fn intern(text: &str) -> &'static str {
    static INTERNED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut guard = INTERNED.lock();
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(existing) = set.get(text) {
        return existing;
    }
    let leaked: &'static str = Box::leak(text.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// An error as the plugin allocates it: the ABI struct first, then the message it points to.
#[repr(C)]
struct OwnedError {
    header: XhalError,
    message: String,
}

fn backend() -> Result<&'static dyn Backend> {
    PLUGIN_BACKEND
        .get()
        .map(|backend| backend.as_ref())
        .ok_or_else(|| Error::internal("plugin entry called before xhal_plugin_query succeeded"))
}

fn store_error(error: Error, error_out: XhalErrorOut) -> XhalStatus {
    // An error must never read as success or "not ready", whatever status a backend relayed.
    let status = match error.kind().status() {
        XHAL_STATUS_OK | XHAL_STATUS_NOT_READY => XHAL_STATUS_INTERNAL,
        status => status,
    };
    if !error_out.is_null() {
        let message = error.message().to_owned();
        let mut owned = Box::new(OwnedError {
            header: XhalError {
                struct_size: XHAL_ERROR_V1_0_SIZE,
                code: status,
                message: XhalStr::EMPTY,
            },
            message,
        });
        // The String's heap bytes do not move when the Box moves, so the view stays valid.
        owned.header.message = XhalStr::from_str(&owned.message);
        // SAFETY: error_out is non-null and the ABI requires it to point to writable storage.
        unsafe { *error_out = Box::into_raw(owned).cast::<XhalError>() };
    }
    status
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs one fallible entry: no panic escapes, every error is reported through `error_out`.
fn guarded(
    entry: &str,
    error_out: XhalErrorOut,
    body: impl FnOnce(&'static dyn Backend) -> Result<XhalStatus>,
) -> XhalStatus {
    match catch_unwind(AssertUnwindSafe(|| backend().and_then(body))) {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => store_error(error, error_out),
        Err(payload) => store_error(
            Error::internal(format!(
                "plugin panicked in {entry}: {}",
                panic_message(payload.as_ref())
            )),
            error_out,
        ),
    }
}

/// Runs a destroy entry: null is accepted, panics are swallowed (there is no one to report to).
fn guarded_destroy(entry: &str, handle: u64, body: impl FnOnce(&'static dyn Backend)) {
    if handle == 0 {
        return;
    }
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| backend().map(body))) {
        tracing::error!(entry, panic = %panic_message(payload.as_ref()), "plugin panicked in a destroy entry");
    }
}

fn required<T>(pointer: *const T, what: &str) -> Result<()> {
    if pointer.is_null() {
        Err(Error::invalid_argument(format!("{what} must not be null")))
    } else {
        Ok(())
    }
}

fn ok() -> Result<XhalStatus> {
    Ok(XHAL_STATUS_OK)
}

fn ready(is_ready: bool) -> Result<XhalStatus> {
    Ok(if is_ready {
        XHAL_STATUS_OK
    } else {
        XHAL_STATUS_NOT_READY
    })
}

fn handle<T>(pointer: *mut T) -> u64 {
    pointer as usize as u64
}

fn pointer<T>(handle: u64) -> *mut T {
    handle as usize as *mut T
}

/// Writes `value` through `out` after a null check.
///
/// # Safety
/// `out` must be null or valid for a write of `T`.
unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<XhalStatus> {
    required(out, what)?;
    // SAFETY: checked non-null above; validity is the caller's contract.
    unsafe { out.write(value) };
    ok()
}

unsafe extern "C" fn error_free(error: *mut XhalError) {
    if error.is_null() {
        return;
    }
    // SAFETY: every XhalError this plugin hands out is the head of a boxed OwnedError.
    drop(unsafe { Box::from_raw(error.cast::<OwnedError>()) });
}

unsafe extern "C" fn device_count(count: *mut u32, error: XhalErrorOut) -> XhalStatus {
    guarded("device_count", error, |backend| {
        required(count, "count")?;
        let devices = backend.device_count()?;
        // SAFETY: count checked non-null; the host passes a writable u32.
        unsafe { write_out(count, devices, "count") }
    })
}

/// Converts to the ABI struct. Strings are interned so they outlive the call.
pub(crate) fn device_info_to_abi(info: &DeviceInfo) -> XhalDeviceInfo {
    let mut raw = XhalDeviceInfo::new();
    raw.name = XhalStr::from_str(intern(&info.name));
    raw.vendor = XhalStr::from_str(intern(&info.vendor));
    raw.vendor_id = info.vendor_id;
    raw.device_id = info.device_id;
    raw.device_type = info.device_type.to_abi();
    raw.uuid = info.uuid;
    raw.pci_bus_id = XhalStr::from_str(intern(info.pci_bus_id.as_deref().unwrap_or("")));
    raw.driver_version = XhalStr::from_str(intern(&info.driver_version));
    raw.total_memory = info.total_memory;
    raw.free_memory = info.free_memory;
    raw.max_allocation_size = info.max_allocation_size;
    raw.max_workgroup_size = info.max_workgroup_size;
    raw.max_workgroup_invocations = info.max_workgroup_invocations;
    raw.max_workgroup_count = info.max_workgroup_count;
    raw.max_workgroup_memory = info.max_workgroup_memory;
    raw.subgroup_size = info.subgroup_size;
    raw.max_buffer_arguments = info.max_buffer_arguments;
    raw.max_scalar_block_size = info.max_scalar_block_size;
    raw.buffer_offset_alignment = info.buffer_offset_alignment;
    raw.features = info.features.0;
    let formats = &info.kernel_formats[..info.kernel_formats.len().min(XHAL_MAX_KERNEL_FORMATS)];
    for (slot, format) in raw.kernel_formats.iter_mut().zip(formats) {
        *slot = format.0;
    }
    raw.kernel_format_count = formats.len() as u32;
    raw
}

unsafe extern "C" fn device_get_info(index: u32, info: *mut XhalDeviceInfo, error: XhalErrorOut) -> XhalStatus {
    guarded("device_get_info", error, |backend| {
        required(info, "info")?;
        // SAFETY: info checked non-null; its first field is struct_size by the ABI.
        let caller_size = unsafe { (*info).struct_size };
        if caller_size < XHAL_DEVICE_INFO_V1_0_SIZE {
            return Err(Error::invalid_argument(format!(
                "info.struct_size is {caller_size}; ABI 1.0 needs at least {XHAL_DEVICE_INFO_V1_0_SIZE}"
            )));
        }
        let mut raw = device_info_to_abi(&backend.device_info(index)?);
        raw.struct_size = caller_size;
        // A caller built against an older minor knows fewer fields: write only what fits.
        let size = caller_size.min(XHAL_DEVICE_INFO_V1_0_SIZE);
        // SAFETY: the caller owns at least `caller_size` writable bytes at `info`, and we
        // copy no more than both structs hold.
        unsafe { std::ptr::copy_nonoverlapping((&raw as *const XhalDeviceInfo).cast::<u8>(), info.cast::<u8>(), size) };
        ok()
    })
}

unsafe extern "C" fn device_open(index: u32, device: *mut *mut XhalDevice, error: XhalErrorOut) -> XhalStatus {
    guarded("device_open", error, |backend| {
        required(device, "device")?;
        let opened = backend.device_open(index)?;
        // SAFETY: checked non-null by `required` above.
        unsafe { write_out(device, pointer(opened.0), "device") }
    })
}

unsafe extern "C" fn device_close(device: *mut XhalDevice) {
    guarded_destroy("device_close", handle(device), |backend| {
        backend.device_close(DeviceHandle(handle(device)))
    });
}

unsafe extern "C" fn device_memory_usage(
    device: *mut XhalDevice,
    free: *mut u64,
    total: *mut u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("device_memory_usage", error, |backend| {
        required(free, "free")?;
        required(total, "total")?;
        let usage = backend.device_memory_usage(DeviceHandle(handle(device)))?;
        // SAFETY: both checked non-null above.
        unsafe {
            write_out(free, usage.free, "free")?;
            write_out(total, usage.total, "total")
        }
    })
}

unsafe extern "C" fn device_clock(
    device: *mut XhalDevice,
    device_ns: *mut u64,
    host_ns: *mut u64,
    uncertainty_ns: *mut u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("device_clock", error, |backend| {
        required(device_ns, "device_ns")?;
        required(host_ns, "host_ns")?;
        required(uncertainty_ns, "uncertainty_ns")?;
        let sample = backend.device_clock(DeviceHandle(handle(device)))?;
        // SAFETY: all three checked non-null above.
        unsafe {
            write_out(device_ns, sample.device_ns, "device_ns")?;
            write_out(host_ns, sample.host_ns, "host_ns")?;
            write_out(uncertainty_ns, sample.uncertainty_ns, "uncertainty_ns")
        }
    })
}

unsafe extern "C" fn buffer_allocate(
    device: *mut XhalDevice,
    size: u64,
    buffer: *mut *mut XhalBuffer,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("buffer_allocate", error, |backend| {
        required(buffer, "buffer")?;
        let allocated = backend.buffer_allocate(DeviceHandle(handle(device)), size)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(buffer, pointer(allocated.0), "buffer") }
    })
}

unsafe extern "C" fn buffer_free(buffer: *mut XhalBuffer) {
    guarded_destroy("buffer_free", handle(buffer), |backend| {
        backend.buffer_free(BufferHandle(handle(buffer)))
    });
}

unsafe extern "C" fn stream_create(
    device: *mut XhalDevice,
    stream: *mut *mut XhalStream,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_create", error, |backend| {
        required(stream, "stream")?;
        let created = backend.stream_create(DeviceHandle(handle(device)))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(stream, pointer(created.0), "stream") }
    })
}

unsafe extern "C" fn device_stream_priorities(
    device: *mut XhalDevice,
    least: *mut i32,
    greatest: *mut i32,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("device_stream_priorities", error, |backend| {
        required(least, "least")?;
        required(greatest, "greatest")?;
        let priorities = backend.device_stream_priorities(DeviceHandle(handle(device)))?;
        // SAFETY: both checked non-null above.
        unsafe {
            write_out(least, priorities.least, "least")?;
            write_out(greatest, priorities.greatest, "greatest")
        }
    })
}

unsafe extern "C" fn stream_create_with_priority(
    device: *mut XhalDevice,
    priority: i32,
    stream: *mut *mut XhalStream,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_create_with_priority", error, |backend| {
        required(stream, "stream")?;
        let created = backend.stream_create_with_priority(DeviceHandle(handle(device)), priority)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(stream, pointer(created.0), "stream") }
    })
}

unsafe extern "C" fn stream_destroy(stream: *mut XhalStream) {
    guarded_destroy("stream_destroy", handle(stream), |backend| {
        backend.stream_destroy(StreamHandle(handle(stream)))
    });
}

unsafe extern "C" fn stream_write(
    stream: *mut XhalStream,
    buffer: *mut XhalBuffer,
    offset: u64,
    source: *const u8,
    size: u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_write", error, |backend| {
        if size > 0 {
            required(source, "source")?;
        }
        // SAFETY: the host guarantees `source` stays valid until the write completes (ABI contract).
        unsafe {
            backend.stream_write(
                StreamHandle(handle(stream)),
                BufferHandle(handle(buffer)),
                offset,
                source,
                size,
            )?
        };
        ok()
    })
}

unsafe extern "C" fn stream_read(
    stream: *mut XhalStream,
    buffer: *mut XhalBuffer,
    offset: u64,
    destination: *mut u8,
    size: u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_read", error, |backend| {
        if size > 0 {
            required(destination, "destination")?;
        }
        // SAFETY: the host guarantees `destination` stays valid until the read completes (ABI contract).
        unsafe {
            backend.stream_read(
                StreamHandle(handle(stream)),
                BufferHandle(handle(buffer)),
                offset,
                destination,
                size,
            )?
        };
        ok()
    })
}

unsafe extern "C" fn stream_copy(
    stream: *mut XhalStream,
    source: *mut XhalBuffer,
    source_offset: u64,
    destination: *mut XhalBuffer,
    destination_offset: u64,
    size: u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_copy", error, |backend| {
        backend.stream_copy(
            StreamHandle(handle(stream)),
            BufferHandle(handle(source)),
            source_offset,
            BufferHandle(handle(destination)),
            destination_offset,
            size,
        )?;
        ok()
    })
}

unsafe extern "C" fn stream_fill(
    stream: *mut XhalStream,
    buffer: *mut XhalBuffer,
    offset: u64,
    size: u64,
    pattern: *const u8,
    pattern_size: usize,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_fill", error, |backend| {
        // SAFETY: the host passes `pattern_size` readable bytes, or null.
        let pattern = unsafe { read_pattern(pattern, pattern_size) }?;
        backend.stream_fill(
            StreamHandle(handle(stream)),
            BufferHandle(handle(buffer)),
            offset,
            size,
            pattern,
        )?;
        ok()
    })
}

/// A launch as the host passed it, read into owned arguments (the scalar block stays borrowed).
struct AbiLaunch<'a> {
    kernel: KernelHandle,
    workgroups: [u32; 3],
    buffers: SmallVec<[BufferArg; 8]>,
    scalars: &'a [u8],
}

impl AbiLaunch<'_> {
    /// Reads `launch`, checking its pointers and `struct_size`.
    ///
    /// # Safety
    /// `launch` must be null or point to a readable `XhalLaunchInfo` whose arrays follow the ABI
    /// and outlive `'a`.
    unsafe fn read<'a>(launch: *const XhalLaunchInfo) -> Result<AbiLaunch<'a>> {
        required(launch, "launch")?;
        // SAFETY: checked non-null; the host passes a readable XhalLaunchInfo.
        let raw = unsafe { &*launch };
        if raw.struct_size < XHAL_LAUNCH_INFO_V1_0_SIZE {
            return Err(Error::invalid_argument(format!(
                "launch.struct_size is {}; ABI 1.0 needs at least {XHAL_LAUNCH_INFO_V1_0_SIZE}",
                raw.struct_size
            )));
        }
        let buffers: SmallVec<[BufferArg; 8]> = if raw.buffer_count == 0 {
            SmallVec::new()
        } else {
            required(raw.buffers, "launch.buffers")?;
            // SAFETY: non-null and `buffer_count` entries long by the ABI contract.
            unsafe { std::slice::from_raw_parts(raw.buffers, raw.buffer_count as usize) }
                .iter()
                .map(|arg| BufferArg {
                    buffer: BufferHandle(handle(arg.buffer)),
                    offset: arg.offset,
                    size: arg.size,
                })
                .collect()
        };
        let scalars: &[u8] = if raw.scalar_size == 0 {
            &[]
        } else {
            required(raw.scalars, "launch.scalars")?;
            // SAFETY: non-null and `scalar_size` bytes long by the ABI contract.
            unsafe { std::slice::from_raw_parts(raw.scalars, raw.scalar_size) }
        };
        Ok(AbiLaunch {
            kernel: KernelHandle(handle(raw.kernel)),
            workgroups: raw.workgroups,
            buffers,
            scalars,
        })
    }

    fn args(&self) -> LaunchArgs<'_> {
        LaunchArgs {
            kernel: self.kernel,
            workgroups: self.workgroups,
            buffers: &self.buffers,
            scalars: self.scalars,
        }
    }
}

/// A fill pattern as the host passed it.
///
/// # Safety
/// `pattern` must be null or point to `pattern_size` readable bytes that outlive `'a`.
unsafe fn read_pattern<'a>(pattern: *const u8, pattern_size: usize) -> Result<&'a [u8]> {
    required(pattern, "pattern")?;
    if !matches!(pattern_size, 1 | 2 | 4) {
        return Err(Error::invalid_argument(format!(
            "pattern_size is {pattern_size}; expected 1, 2 or 4"
        )));
    }
    // SAFETY: non-null, and the caller provides `pattern_size` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(pattern, pattern_size) })
}

unsafe extern "C" fn stream_launch(
    stream: *mut XhalStream,
    launch: *const XhalLaunchInfo,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_launch", error, |backend| {
        // SAFETY: the host follows the ABI for `launch`, which outlives this call.
        let launch = unsafe { AbiLaunch::read(launch) }?;
        backend.stream_launch(StreamHandle(handle(stream)), &launch.args())?;
        ok()
    })
}

unsafe extern "C" fn stream_record_event(
    stream: *mut XhalStream,
    event: *mut XhalEvent,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_record_event", error, |backend| {
        backend.stream_record_event(StreamHandle(handle(stream)), EventHandle(handle(event)))?;
        ok()
    })
}

unsafe extern "C" fn stream_wait_event(
    stream: *mut XhalStream,
    event: *mut XhalEvent,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_wait_event", error, |backend| {
        backend.stream_wait_event(StreamHandle(handle(stream)), EventHandle(handle(event)))?;
        ok()
    })
}

unsafe extern "C" fn stream_synchronize(stream: *mut XhalStream, error: XhalErrorOut) -> XhalStatus {
    guarded("stream_synchronize", error, |backend| {
        backend.stream_synchronize(StreamHandle(handle(stream)))?;
        ok()
    })
}

unsafe extern "C" fn stream_query(stream: *mut XhalStream, error: XhalErrorOut) -> XhalStatus {
    guarded("stream_query", error, |backend| {
        ready(backend.stream_query(StreamHandle(handle(stream)))?)
    })
}

unsafe extern "C" fn event_create(
    device: *mut XhalDevice,
    flags: u32,
    event: *mut *mut XhalEvent,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("event_create", error, |backend| {
        required(event, "event")?;
        let unknown = flags & !XHAL_EVENT_FLAG_TIMING;
        if unknown != 0 {
            return Err(Error::invalid_argument(format!(
                "event flags {flags:#x} contain unknown bits {unknown:#x}; ABI 1.0 knows only XHAL_EVENT_FLAG_TIMING"
            )));
        }
        let created = backend.event_create(DeviceHandle(handle(device)), flags & XHAL_EVENT_FLAG_TIMING != 0)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(event, pointer(created.0), "event") }
    })
}

unsafe extern "C" fn event_destroy(event: *mut XhalEvent) {
    guarded_destroy("event_destroy", handle(event), |backend| {
        backend.event_destroy(EventHandle(handle(event)))
    });
}

unsafe extern "C" fn event_query(event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus {
    guarded("event_query", error, |backend| {
        ready(backend.event_query(EventHandle(handle(event)))?)
    })
}

unsafe extern "C" fn event_synchronize(event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus {
    guarded("event_synchronize", error, |backend| {
        backend.event_synchronize(EventHandle(handle(event)))?;
        ok()
    })
}

unsafe extern "C" fn event_elapsed_time(
    start: *mut XhalEvent,
    end: *mut XhalEvent,
    nanoseconds: *mut u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("event_elapsed_time", error, |backend| {
        required(nanoseconds, "nanoseconds")?;
        let elapsed = backend.event_elapsed_time(EventHandle(handle(start)), EventHandle(handle(end)))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(nanoseconds, elapsed, "nanoseconds") }
    })
}

unsafe extern "C" fn event_timestamp(event: *mut XhalEvent, device_ns: *mut u64, error: XhalErrorOut) -> XhalStatus {
    guarded("event_timestamp", error, |backend| {
        required(device_ns, "device_ns")?;
        let timestamp = backend.event_timestamp(EventHandle(handle(event)))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(device_ns, timestamp, "device_ns") }
    })
}

unsafe extern "C" fn module_load(
    device: *mut XhalDevice,
    format: u32,
    code: *const u8,
    size: usize,
    module: *mut *mut XhalModule,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("module_load", error, |backend| {
        required(module, "module")?;
        let code: &[u8] = if size == 0 {
            &[]
        } else {
            required(code, "code")?;
            // SAFETY: non-null and `size` bytes long by the ABI contract.
            unsafe { std::slice::from_raw_parts(code, size) }
        };
        let loaded = backend.module_load(DeviceHandle(handle(device)), KernelFormat(format), code)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(module, pointer(loaded.0), "module") }
    })
}

unsafe extern "C" fn module_destroy(module: *mut XhalModule) {
    guarded_destroy("module_destroy", handle(module), |backend| {
        backend.module_destroy(ModuleHandle(handle(module)))
    });
}

unsafe extern "C" fn kernel_get(
    module: *mut XhalModule,
    name: XhalStr,
    kernel: *mut *mut XhalKernel,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("kernel_get", error, |backend| {
        required(kernel, "kernel")?;
        if name.len > 0 {
            required(name.ptr, "name.ptr")?;
        }
        // SAFETY: checked above; the host passes `len` readable bytes.
        let bytes = unsafe { name.as_bytes() };
        let name = std::str::from_utf8(bytes).map_err(|_| Error::invalid_argument("kernel name is not valid UTF-8"))?;
        let found = backend.kernel_get(ModuleHandle(handle(module)), name)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(kernel, pointer(found.0), "kernel") }
    })
}

unsafe extern "C" fn kernel_destroy(kernel: *mut XhalKernel) {
    guarded_destroy("kernel_destroy", handle(kernel), |backend| {
        backend.kernel_destroy(KernelHandle(handle(kernel)))
    });
}

unsafe extern "C" fn command_list_create(
    device: *mut XhalDevice,
    list: *mut *mut XhalCommandList,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("command_list_create", error, |backend| {
        required(list, "list")?;
        let created = backend.command_list_create(DeviceHandle(handle(device)))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(list, pointer(created.0), "list") }
    })
}

unsafe extern "C" fn command_list_append_copy(
    list: *mut XhalCommandList,
    source: *mut XhalBuffer,
    source_offset: u64,
    destination: *mut XhalBuffer,
    destination_offset: u64,
    size: u64,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("command_list_append_copy", error, |backend| {
        backend.command_list_append_copy(
            CommandListHandle(handle(list)),
            BufferHandle(handle(source)),
            source_offset,
            BufferHandle(handle(destination)),
            destination_offset,
            size,
        )?;
        ok()
    })
}

unsafe extern "C" fn command_list_append_fill(
    list: *mut XhalCommandList,
    buffer: *mut XhalBuffer,
    offset: u64,
    size: u64,
    pattern: *const u8,
    pattern_size: usize,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("command_list_append_fill", error, |backend| {
        // SAFETY: the host passes `pattern_size` readable bytes, or null.
        let pattern = unsafe { read_pattern(pattern, pattern_size) }?;
        backend.command_list_append_fill(
            CommandListHandle(handle(list)),
            BufferHandle(handle(buffer)),
            offset,
            size,
            pattern,
        )?;
        ok()
    })
}

unsafe extern "C" fn command_list_append_launch(
    list: *mut XhalCommandList,
    launch: *const XhalLaunchInfo,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("command_list_append_launch", error, |backend| {
        // SAFETY: the host follows the ABI for `launch`, which outlives this call.
        let launch = unsafe { AbiLaunch::read(launch) }?;
        backend.command_list_append_launch(CommandListHandle(handle(list)), &launch.args())?;
        ok()
    })
}

unsafe extern "C" fn command_list_finish(list: *mut XhalCommandList, error: XhalErrorOut) -> XhalStatus {
    guarded("command_list_finish", error, |backend| {
        backend.command_list_finish(CommandListHandle(handle(list)))?;
        ok()
    })
}

unsafe extern "C" fn command_list_update_launch(
    list: *mut XhalCommandList,
    index: u32,
    launch: *const XhalLaunchInfo,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("command_list_update_launch", error, |backend| {
        // SAFETY: the host follows the ABI for `launch`, which outlives this call.
        let launch = unsafe { AbiLaunch::read(launch) }?;
        backend.command_list_update_launch(CommandListHandle(handle(list)), index, &launch.args())?;
        ok()
    })
}

unsafe extern "C" fn stream_submit_command_list(
    stream: *mut XhalStream,
    list: *mut XhalCommandList,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("stream_submit_command_list", error, |backend| {
        backend.stream_submit_command_list(StreamHandle(handle(stream)), CommandListHandle(handle(list)))?;
        ok()
    })
}

unsafe extern "C" fn command_list_destroy(list: *mut XhalCommandList) {
    guarded_destroy("command_list_destroy", handle(list), |backend| {
        backend.command_list_destroy(CommandListHandle(handle(list)))
    });
}

unsafe extern "C" fn buffer_map(
    buffer: *mut XhalBuffer,
    offset: u64,
    size: u64,
    flags: u32,
    host_pointer: *mut *mut u8,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("buffer_map", error, |backend| {
        required(host_pointer, "host_pointer")?;
        let mapped = backend.buffer_map(BufferHandle(handle(buffer)), offset, size, flags)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(host_pointer, mapped, "host_pointer") }
    })
}

unsafe extern "C" fn buffer_unmap(buffer: *mut XhalBuffer, host_pointer: *mut u8, error: XhalErrorOut) -> XhalStatus {
    guarded("buffer_unmap", error, |backend| {
        backend.buffer_unmap(BufferHandle(handle(buffer)), host_pointer)?;
        ok()
    })
}

unsafe extern "C" fn host_memory_allocate(
    device: *mut XhalDevice,
    size: u64,
    host_pointer: *mut *mut u8,
    error: XhalErrorOut,
) -> XhalStatus {
    guarded("host_memory_allocate", error, |backend| {
        required(host_pointer, "host_pointer")?;
        let allocated = backend.host_memory_allocate(DeviceHandle(handle(device)), size)?;
        // SAFETY: checked non-null above.
        unsafe { write_out(host_pointer, allocated, "host_pointer") }
    })
}

unsafe extern "C" fn host_memory_free(device: *mut XhalDevice, host_pointer: *mut u8) {
    guarded_destroy("host_memory_free", host_pointer as usize as u64, |backend| {
        backend.host_memory_free(DeviceHandle(handle(device)), host_pointer)
    });
}

/// Exports a backend as an xhal plugin, defining the one symbol `xhal_plugin_query`.
///
/// `constructor` is a `fn() -> xhal_core::Result<B>` where `B: Backend`. It runs on the first
/// query, once it succeeds never again; after a failure the next query tries again. Put this in the backend crate's `lib.rs` and build it as a `cdylib`.
///
/// ```text
/// fn create_plugin() -> xhal_core::Result<MyBackend> { MyBackend::new() }
/// xhal_core::export_plugin!(create_plugin);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($constructor:path) => {
        /// The xhal plugin entry point: returns this plugin's function table.
        ///
        /// # Safety
        /// Callable from any thread; takes no pointers.
        #[no_mangle]
        pub unsafe extern "C" fn xhal_plugin_query(
            host_abi_major: u32,
            host_abi_minor: u32,
        ) -> *const $crate::abi::XhalPluginApi {
            fn create_boxed() -> $crate::Result<::std::boxed::Box<dyn $crate::Backend>> {
                $constructor().map(|backend| ::std::boxed::Box::new(backend) as ::std::boxed::Box<dyn $crate::Backend>)
            }
            $crate::export::query(host_abi_major, host_abi_minor, create_boxed)
        }
    };
}
