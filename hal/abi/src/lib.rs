//! The xhal plugin ABI, version 1.5.
//!
//! This crate is the single source of truth for the C boundary between the xhal host and a
//! backend plugin. `include/xhal.h` is generated from it by cbindgen; `docs/abi.md` explains
//! every entry, who owns what, and for how long.
//!
//! Rules that keep the ABI stable:
//! - A plugin exports exactly one symbol, `XHAL_PLUGIN_QUERY_SYMBOL`, of type
//!   `XhalPluginQueryFn`.
//! - Every struct that crosses the boundary begins with `struct_size`. Fields are only ever
//!   appended, each addition bumps the minor version, and a reader never touches a field that
//!   lies beyond the `struct_size` it was given.
//! - Status codes are plain `u32` constants, never enums, so an unknown code from a newer
//!   plugin is still a value the host can print.
//! - Handles are opaque pointers; null is never a valid handle, and every destroy entry
//!   accepts null.
#![no_std]
#![deny(missing_docs)]

/// Major version of the ABI this crate describes. A host loads a plugin only when the majors match.
pub const XHAL_ABI_MAJOR: u32 = 1;
/// Minor version of the ABI this crate describes. Minors only append fields and entries.
pub const XHAL_ABI_MINOR: u32 = 5;

/// Name of the one symbol a plugin exports.
pub const XHAL_PLUGIN_QUERY_SYMBOL: &str = "xhal_plugin_query";

/// Status returned by every fallible entry. `XHAL_STATUS_OK` is success; anything else comes
/// with an `XhalError` when the caller asked for one.
pub type XhalStatus = u32;

/// The call succeeded.
pub const XHAL_STATUS_OK: XhalStatus = 0;
/// An argument was malformed (null where a value is required, a bad size, a bad format...).
pub const XHAL_STATUS_INVALID_ARGUMENT: XhalStatus = 1;
/// An offset or length reached outside a buffer.
pub const XHAL_STATUS_OUT_OF_BOUNDS: XhalStatus = 2;
/// The device could not provide the memory asked for.
pub const XHAL_STATUS_OUT_OF_MEMORY: XhalStatus = 3;
/// The device or plugin does not support what was asked.
pub const XHAL_STATUS_UNSUPPORTED: XhalStatus = 4;
/// A named thing (device index, kernel name) does not exist.
pub const XHAL_STATUS_NOT_FOUND: XhalStatus = 5;
/// A handle was null, destroyed, of the wrong kind, or belongs to another device.
pub const XHAL_STATUS_INVALID_HANDLE: XhalStatus = 6;
/// The device stopped working; every later call on it may fail the same way.
pub const XHAL_STATUS_DEVICE_LOST: XhalStatus = 7;
/// A kernel failed while it executed (a fault, an out-of-bounds access in strict mode).
pub const XHAL_STATUS_KERNEL_FAULT: XhalStatus = 8;
/// An operation ran past its time limit.
pub const XHAL_STATUS_TIMEOUT: XhalStatus = 9;
/// The queried work has not completed yet. Returned by the query entries; not a failure.
pub const XHAL_STATUS_NOT_READY: XhalStatus = 10;
/// The plugin caught a panic or an internal invariant broke.
pub const XHAL_STATUS_INTERNAL: XhalStatus = 11;
/// The vendor driver the plugin needs is missing or refused to start.
pub const XHAL_STATUS_DRIVER_UNAVAILABLE: XhalStatus = 12;

/// The device is a CPU.
pub const XHAL_DEVICE_TYPE_CPU: u32 = 1;
/// A GPU that shares memory with the host.
pub const XHAL_DEVICE_TYPE_INTEGRATED_GPU: u32 = 2;
/// A GPU with its own memory.
pub const XHAL_DEVICE_TYPE_DISCRETE_GPU: u32 = 3;
/// Any other accelerator (NPU, FPGA, DSP).
pub const XHAL_DEVICE_TYPE_ACCELERATOR: u32 = 4;
/// A device that fits none of the above (a software rasteriser, a simulator).
pub const XHAL_DEVICE_TYPE_OTHER: u32 = 5;

/// Kernels may use 16-bit floats.
pub const XHAL_FEATURE_F16: u64 = 1 << 0;
/// Kernels may use 64-bit floats.
pub const XHAL_FEATURE_F64: u64 = 1 << 1;
/// Kernels may use 64-bit integers.
pub const XHAL_FEATURE_I64: u64 = 1 << 2;
/// Kernels may use 32-bit atomics on buffer memory.
pub const XHAL_FEATURE_ATOMICS_32: u64 = 1 << 3;
/// Kernels may use 64-bit atomics on buffer memory.
pub const XHAL_FEATURE_ATOMICS_64: u64 = 1 << 4;
/// Events created with `XHAL_EVENT_FLAG_TIMING` measure elapsed time.
pub const XHAL_FEATURE_TIMESTAMPS: u64 = 1 << 5;
/// Device memory can be mapped into the host address space.
pub const XHAL_FEATURE_HOST_MAPPABLE: u64 = 1 << 6;
/// Added in 1.2. The device's kernels take uniform buffers natively: a WGSL module it is given
/// may declare `var<uniform>` bindings, and the device binds those buffer arguments as
/// uniform (constant) buffers. Without it the host lowers every `var<uniform>` to
/// `var<storage, read>` (the same bytes) before the device sees the module.
pub const XHAL_FEATURE_UNIFORM_BUFFERS: u64 = 1 << 7;

/// WGSL source text (UTF-8).
pub const XHAL_KERNEL_FORMAT_WGSL: u32 = 1;
/// SPIR-V for the Vulkan shader execution model.
pub const XHAL_KERNEL_FORMAT_SPIRV_SHADER: u32 = 2;
/// SPIR-V for the OpenCL kernel execution model (Level Zero, OpenCL).
pub const XHAL_KERNEL_FORMAT_SPIRV_KERNEL: u32 = 3;
/// NVIDIA PTX text.
pub const XHAL_KERNEL_FORMAT_PTX: u32 = 4;
/// NVIDIA cubin.
pub const XHAL_KERNEL_FORMAT_CUBIN: u32 = 5;
/// AMD code object.
pub const XHAL_KERNEL_FORMAT_HSACO: u32 = 6;
/// CUDA C++ source for run-time compilation.
pub const XHAL_KERNEL_FORMAT_CUDA_C: u32 = 7;
/// HIP C++ source for run-time compilation.
pub const XHAL_KERNEL_FORMAT_HIP_C: u32 = 8;
/// OpenCL C source.
pub const XHAL_KERNEL_FORMAT_OPENCL_C: u32 = 9;
/// The CPU reference backend's built-in test kernels: UTF-8 text naming one built-in per line.
pub const XHAL_KERNEL_FORMAT_CPU_BUILTIN: u32 = 100;
/// Formats at or above this value are free for vendors to define.
pub const XHAL_KERNEL_FORMAT_VENDOR_BASE: u32 = 0x1000_0000;

/// Most kernel formats one device can list in `XhalDeviceInfo`.
pub const XHAL_MAX_KERNEL_FORMATS: usize = 16;

/// Events created with this flag record timestamps, so `event_elapsed_time` works on them.
pub const XHAL_EVENT_FLAG_TIMING: u32 = 1;

/// Added in 1.4. `buffer_map`: the host reads the mapped bytes.
pub const XHAL_MAP_READ: u32 = 1;
/// Added in 1.4. `buffer_map`: the host writes the mapped bytes.
pub const XHAL_MAP_WRITE: u32 = 2;

/// A borrowed UTF-8 string: pointer and length in bytes, no terminator required.
/// Who owns it and for how long is stated wherever a string crosses (see docs/abi.md).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XhalStr {
    /// First byte; may be null only when `len` is 0.
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

/// An error reported by a plugin. The plugin allocates it, the host reads it and then hands
/// it back through `XhalPluginApi::error_free`. A plugin may place this at the start of a
/// larger private struct.
#[repr(C)]
#[derive(Debug)]
pub struct XhalError {
    /// Size of this struct as the plugin knows it.
    pub struct_size: usize,
    /// One of the `XHAL_STATUS_*` codes; equals the status the entry returned.
    pub code: XhalStatus,
    /// What went wrong and what was expected. Owned by the error; valid until `error_free`.
    pub message: XhalStr,
}

/// An opened device. Opaque.
pub struct XhalDevice {
    _opaque: [u8; 0],
}
/// A device allocation. Opaque.
pub struct XhalBuffer {
    _opaque: [u8; 0],
}
/// An in-order queue of work on one device. Opaque.
pub struct XhalStream {
    _opaque: [u8; 0],
}
/// A point in a stream that other streams and the host can wait for. Opaque.
pub struct XhalEvent {
    _opaque: [u8; 0],
}
/// Loaded kernel code. Opaque.
pub struct XhalModule {
    _opaque: [u8; 0],
}
/// One entry point of a module. Opaque.
pub struct XhalKernel {
    _opaque: [u8; 0],
}
/// Added in 1.4. A recorded, in-order list of copies, fills and launches on one device,
/// submitted to streams any number of times. Opaque.
pub struct XhalCommandList {
    _opaque: [u8; 0],
}

/// Everything a plugin tells about one device. The caller sets `struct_size` to the size it
/// knows; the plugin fills only the fields that fit within both its own and the caller's size.
/// Strings are owned by the plugin and stay valid for the life of the process (plugins are
/// never unloaded).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XhalDeviceInfo {
    /// Size of this struct as the caller knows it.
    pub struct_size: usize,
    /// Marketing name of the device.
    pub name: XhalStr,
    /// Vendor name.
    pub vendor: XhalStr,
    /// PCI vendor id, or 0 where there is none.
    pub vendor_id: u32,
    /// PCI device id, or 0 where there is none.
    pub device_id: u32,
    /// One of the `XHAL_DEVICE_TYPE_*` values.
    pub device_type: u32,
    /// Identity that stays the same across runs and enumerations.
    pub uuid: [u8; 16],
    /// PCI bus id as `domain:bus:device.function`; empty where the device has none.
    pub pci_bus_id: XhalStr,
    /// Version of the vendor driver underneath.
    pub driver_version: XhalStr,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Device memory free at the time of the call, in bytes.
    pub free_memory: u64,
    /// Largest single allocation in bytes.
    pub max_allocation_size: u64,
    /// Largest workgroup in each dimension.
    pub max_workgroup_size: [u32; 3],
    /// Most invocations in one workgroup.
    pub max_workgroup_invocations: u32,
    /// Most workgroups in each dimension of one launch.
    pub max_workgroup_count: [u32; 3],
    /// Workgroup memory in bytes.
    pub max_workgroup_memory: u32,
    /// Width of a subgroup (warp, wavefront); 1 where there is no such thing.
    pub subgroup_size: u32,
    /// Most buffer arguments one launch may bind.
    pub max_buffer_arguments: u32,
    /// Largest scalar block in bytes.
    pub max_scalar_block_size: u32,
    /// Required alignment in bytes of a buffer argument's offset.
    pub buffer_offset_alignment: u32,
    /// `XHAL_FEATURE_*` bits.
    pub features: u64,
    /// How many entries of `kernel_formats` are used.
    pub kernel_format_count: u32,
    /// Accepted `XHAL_KERNEL_FORMAT_*` values, most preferred first.
    pub kernel_formats: [u32; XHAL_MAX_KERNEL_FORMATS],
}

/// One buffer argument of a launch: a buffer and the byte range of it the kernel sees.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XhalBufferArg {
    /// The buffer; it must stay alive until the launch completes.
    pub buffer: *mut XhalBuffer,
    /// Byte offset of the view into the buffer.
    pub offset: u64,
    /// Byte length of the view.
    pub size: u64,
}

/// Everything one kernel launch needs, following the xhal argument ABI: buffer `i` binds to
/// parameter (or binding) `i`, and the scalar block is one blob laid out by WGSL rules.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XhalLaunchInfo {
    /// Size of this struct as the caller knows it.
    pub struct_size: usize,
    /// The kernel to run.
    pub kernel: *mut XhalKernel,
    /// Number of workgroups in x, y and z; each at least 1.
    pub workgroups: [u32; 3],
    /// `buffer_count` buffer arguments, in parameter order. May be null when the count is 0.
    pub buffers: *const XhalBufferArg,
    /// Number of buffer arguments.
    pub buffer_count: u32,
    /// The scalar block. The plugin copies it before returning. May be null when the size is 0.
    pub scalars: *const u8,
    /// Size of the scalar block in bytes.
    pub scalar_size: usize,
}

/// `error_out` convention: every fallible entry takes `XhalError **error` last. When it is not
/// null and the entry fails, the plugin stores a new error there; the host frees it with
/// `error_free`. When it is null the plugin reports only the status.
pub type XhalErrorOut = *mut *mut XhalError;

/// The table a plugin hands to the host from `xhal_plugin_query` (declared at the end of this
/// header). Entries are never null in a v1.0 plugin; the host rejects a table whose v1.0
/// entries are not all present. The plugin keeps the table alive for the life of the process.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct XhalPluginApi {
    /// Size of this struct as the plugin knows it; at least `XHAL_PLUGIN_API_V1_0_SIZE`.
    pub struct_size: usize,
    /// Major ABI version the plugin implements.
    pub abi_major: u32,
    /// Minor ABI version the plugin implements.
    pub abi_minor: u32,
    /// Backend name (`cpu`, `vulkan`...): lowercase letters, digits, `_` and `-`. Static.
    pub plugin_name: XhalStr,
    /// Plugin version. Static.
    pub plugin_version: XhalStr,

    /// Frees an error the plugin returned. Accepts null.
    pub error_free: Option<unsafe extern "C" fn(error: *mut XhalError)>,

    /// Number of devices. A plugin whose driver is missing returns
    /// `XHAL_STATUS_DRIVER_UNAVAILABLE` with the reason, never crashes.
    pub device_count: Option<unsafe extern "C" fn(count: *mut u32, error: XhalErrorOut) -> XhalStatus>,
    /// Fills `info` for device `index` without opening it.
    pub device_get_info:
        Option<unsafe extern "C" fn(index: u32, info: *mut XhalDeviceInfo, error: XhalErrorOut) -> XhalStatus>,
    /// Opens device `index`.
    pub device_open:
        Option<unsafe extern "C" fn(index: u32, device: *mut *mut XhalDevice, error: XhalErrorOut) -> XhalStatus>,
    /// Closes a device. Every object created on it must already be destroyed. Accepts null.
    pub device_close: Option<unsafe extern "C" fn(device: *mut XhalDevice)>,

    /// Allocates `size` bytes (`size` > 0) of device memory.
    pub buffer_allocate: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            size: u64,
            buffer: *mut *mut XhalBuffer,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Frees a buffer. No queued work may still use it. Accepts null.
    pub buffer_free: Option<unsafe extern "C" fn(buffer: *mut XhalBuffer)>,

    /// Creates a stream.
    pub stream_create: Option<
        unsafe extern "C" fn(device: *mut XhalDevice, stream: *mut *mut XhalStream, error: XhalErrorOut) -> XhalStatus,
    >,
    /// Waits for the stream's work, then destroys it. Accepts null.
    pub stream_destroy: Option<unsafe extern "C" fn(stream: *mut XhalStream)>,
    /// Enqueues a host-to-device copy. `source` must stay valid and unchanged until the write completes.
    pub stream_write: Option<
        unsafe extern "C" fn(
            stream: *mut XhalStream,
            buffer: *mut XhalBuffer,
            offset: u64,
            source: *const u8,
            size: u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Enqueues a device-to-host copy. `destination` must stay valid, and untouched by the
    /// host, until the read completes.
    pub stream_read: Option<
        unsafe extern "C" fn(
            stream: *mut XhalStream,
            buffer: *mut XhalBuffer,
            offset: u64,
            destination: *mut u8,
            size: u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Enqueues a device-to-device copy. The ranges may overlap, even within one buffer.
    pub stream_copy: Option<
        unsafe extern "C" fn(
            stream: *mut XhalStream,
            source: *mut XhalBuffer,
            source_offset: u64,
            destination: *mut XhalBuffer,
            destination_offset: u64,
            size: u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of
    /// the pattern size. The plugin copies the pattern before returning.
    pub stream_fill: Option<
        unsafe extern "C" fn(
            stream: *mut XhalStream,
            buffer: *mut XhalBuffer,
            offset: u64,
            size: u64,
            pattern: *const u8,
            pattern_size: usize,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Enqueues a kernel launch.
    pub stream_launch: Option<
        unsafe extern "C" fn(stream: *mut XhalStream, launch: *const XhalLaunchInfo, error: XhalErrorOut) -> XhalStatus,
    >,
    /// Enqueues a record of `event`: it completes when all work enqueued before it has.
    pub stream_record_event:
        Option<unsafe extern "C" fn(stream: *mut XhalStream, event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus>,
    /// Makes later work on `stream` wait for the event's most recent record (a no-op when
    /// the event was never recorded). Never blocks the host.
    pub stream_wait_event:
        Option<unsafe extern "C" fn(stream: *mut XhalStream, event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus>,
    /// Blocks until all enqueued work completed; returns the stream's sticky error if any.
    pub stream_synchronize: Option<unsafe extern "C" fn(stream: *mut XhalStream, error: XhalErrorOut) -> XhalStatus>,
    /// `XHAL_STATUS_OK` when all enqueued work completed, `XHAL_STATUS_NOT_READY` when not.
    pub stream_query: Option<unsafe extern "C" fn(stream: *mut XhalStream, error: XhalErrorOut) -> XhalStatus>,

    /// Creates an event; `flags` is a set of `XHAL_EVENT_FLAG_*`.
    pub event_create: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            flags: u32,
            event: *mut *mut XhalEvent,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Destroys an event. Accepts null.
    pub event_destroy: Option<unsafe extern "C" fn(event: *mut XhalEvent)>,
    /// `XHAL_STATUS_OK` when the most recent record completed (or none was made),
    /// `XHAL_STATUS_NOT_READY` when not.
    pub event_query: Option<unsafe extern "C" fn(event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus>,
    /// Blocks the host until the most recent record completed.
    pub event_synchronize: Option<unsafe extern "C" fn(event: *mut XhalEvent, error: XhalErrorOut) -> XhalStatus>,
    /// Nanoseconds between two completed timing events.
    pub event_elapsed_time: Option<
        unsafe extern "C" fn(
            start: *mut XhalEvent,
            end: *mut XhalEvent,
            nanoseconds: *mut u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,

    /// Loads kernel code of `format` from `size` bytes at `code`; the plugin copies what it keeps.
    pub module_load: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            format: u32,
            code: *const u8,
            size: usize,
            module: *mut *mut XhalModule,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Destroys a module. Its kernels must already be destroyed. Accepts null.
    pub module_destroy: Option<unsafe extern "C" fn(module: *mut XhalModule)>,
    /// Finds an entry point by name.
    pub kernel_get: Option<
        unsafe extern "C" fn(
            module: *mut XhalModule,
            name: XhalStr,
            kernel: *mut *mut XhalKernel,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Releases a kernel. Accepts null.
    pub kernel_destroy: Option<unsafe extern "C" fn(kernel: *mut XhalKernel)>,

    /// Added in 1.1, optional. The device's free and total memory in bytes as the driver
    /// reports them now (`cuMemGetInfo`), written to `free` and `total`. A plugin that cannot
    /// tell returns `XHAL_STATUS_UNSUPPORTED`, or leaves the entry null; the host reports
    /// `UNSUPPORTED` itself for a null entry or one beyond the plugin's `struct_size`.
    pub device_memory_usage: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            free: *mut u64,
            total: *mut u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,

    /// Added in 1.3, optional. Reads the device's timestamp clock (the clock of
    /// `event_timestamp`) and the host's monotonic clock (`CLOCK_MONOTONIC` on POSIX) as close
    /// together as the driver can, in nanoseconds: `device_ns` and `host_ns`, and in
    /// `uncertainty_ns` how far apart in time the two reads may lie. The host places device
    /// times on its own clock with it: `host = device + (host_ns - device_ns)`. A plugin whose
    /// devices have no absolute timestamps returns `XHAL_STATUS_UNSUPPORTED` or leaves the entry
    /// null; the host then times operations with `event_elapsed_time` alone.
    pub device_clock: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            device_ns: *mut u64,
            host_ns: *mut u64,
            uncertainty_ns: *mut u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.3, optional. The time on the device's timestamp clock (`device_clock`), in
    /// nanoseconds, at which the latest record of a timing event completed on the device.
    /// Misuse is `XHAL_STATUS_INVALID_ARGUMENT`, as for `event_elapsed_time`: an event created
    /// without timing, never recorded, or not yet complete (`XHAL_STATUS_NOT_READY` is not
    /// used). Null, or `XHAL_STATUS_UNSUPPORTED`, when `device_clock` is absent.
    pub event_timestamp:
        Option<unsafe extern "C" fn(event: *mut XhalEvent, device_ns: *mut u64, error: XhalErrorOut) -> XhalStatus>,

    /// Added in 1.4, optional, with the seven entries after it: command lists, a device's
    /// native way to record work once and submit it many times (Vulkan command buffers, CUDA
    /// and HIP graphs, Level Zero command lists, `cl_khr_command_buffer`). A plugin provides
    /// all eight or none; the host replays a graph operation by operation on a plugin that
    /// leaves them null or answers `XHAL_STATUS_UNSUPPORTED` here.
    ///
    /// Creates an empty list on `device`, open for appends. The commands of a list run in the
    /// order they were appended, each after the previous one completed, as on a stream.
    pub command_list_create: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            list: *mut *mut XhalCommandList,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Appends a device-to-device copy, with the rules of `stream_copy`; the
    /// ranges are checked now, against buffers the host keeps alive while the list exists.
    pub command_list_append_copy: Option<
        unsafe extern "C" fn(
            list: *mut XhalCommandList,
            source: *mut XhalBuffer,
            source_offset: u64,
            destination: *mut XhalBuffer,
            destination_offset: u64,
            size: u64,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Appends a fill, with the rules of `stream_fill`; the plugin copies the
    /// pattern before returning.
    pub command_list_append_fill: Option<
        unsafe extern "C" fn(
            list: *mut XhalCommandList,
            buffer: *mut XhalBuffer,
            offset: u64,
            size: u64,
            pattern: *const u8,
            pattern_size: usize,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Appends a launch, with the rules of `stream_launch`; the plugin copies the
    /// scalar block and the buffer array before returning.
    pub command_list_append_launch: Option<
        unsafe extern "C" fn(
            list: *mut XhalCommandList,
            launch: *const XhalLaunchInfo,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Closes the list for appends and makes it ready to submit: whatever the
    /// device can check or build ahead of time happens here, once. A list that is not finished
    /// cannot be submitted, and a finished one takes no more appends.
    pub command_list_finish:
        Option<unsafe extern "C" fn(list: *mut XhalCommandList, error: XhalErrorOut) -> XhalStatus>,
    /// Added in 1.4. Replaces the arguments of command `index` (0 for the first command
    /// appended), a launch, for the submissions that follow: the same kernel, the same number
    /// of buffer views each of the same size as before (other buffers, other offsets), and a
    /// scalar block of the same size. The host calls it only on a finished list none of whose
    /// submissions is pending.
    pub command_list_update_launch: Option<
        unsafe extern "C" fn(
            list: *mut XhalCommandList,
            index: u32,
            launch: *const XhalLaunchInfo,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Enqueues every command of a finished list on `stream`, made on the list's
    /// device, after the work queued before it; work queued after it waits for all of them.
    /// Never blocks on the work. A list may be submitted again, and to several streams, before
    /// earlier submissions complete. A command that fails makes the stream's error sticky, as
    /// the same command enqueued alone would.
    pub stream_submit_command_list: Option<
        unsafe extern "C" fn(stream: *mut XhalStream, list: *mut XhalCommandList, error: XhalErrorOut) -> XhalStatus,
    >,
    /// Added in 1.4. Destroys a list. The host calls it only when no submission of the list is
    /// pending. Accepts null.
    pub command_list_destroy: Option<unsafe extern "C" fn(list: *mut XhalCommandList)>,

    /// Added in 1.4, optional, with `buffer_unmap`: host access to device memory without a
    /// copy, on a device that reports `XHAL_FEATURE_HOST_MAPPABLE`. Writes in `host_pointer` the
    /// host address of byte `offset` of `buffer`, valid for `size` (> 0) bytes until the matching
    /// `buffer_unmap`. `flags` is a non-empty set of `XHAL_MAP_READ` and `XHAL_MAP_WRITE`. A read
    /// mapping shows every write of the work that completed before the call; what the host
    /// writes is seen by the work enqueued after the unmap. The host maps a range only while no
    /// queued work uses the buffer, and enqueues no work that uses it until every mapping of it
    /// is unmapped. A buffer may be mapped several times at once.
    pub buffer_map: Option<
        unsafe extern "C" fn(
            buffer: *mut XhalBuffer,
            offset: u64,
            size: u64,
            flags: u32,
            host_pointer: *mut *mut u8,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Ends the mapping that `buffer_map` returned `host_pointer` for; the host
    /// no longer touches the bytes. A pointer that is not a live mapping of the buffer is
    /// `XHAL_STATUS_INVALID_ARGUMENT`.
    pub buffer_unmap:
        Option<unsafe extern "C" fn(buffer: *mut XhalBuffer, host_pointer: *mut u8, error: XhalErrorOut) -> XhalStatus>,

    /// Added in 1.4, optional, with `host_memory_free`: `size` (> 0) bytes of host memory the
    /// device's transfers reach directly (page-locked, "pinned"), written to `host_pointer`,
    /// aligned to at least 64 bytes. The host reads and writes it as any memory, and passes
    /// pointers into it to `stream_write` and `stream_read` of this device, which may then copy
    /// without staging and without waiting for the host; it touches a range only while no
    /// transfer queued on it is pending. A device without such memory returns
    /// `XHAL_STATUS_UNSUPPORTED` or leaves both entries null; the host then uses ordinary memory.
    pub host_memory_allocate: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            size: u64,
            host_pointer: *mut *mut u8,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.4. Frees memory `host_memory_allocate` returned, once no queued transfer uses
    /// it. Accepts null.
    pub host_memory_free: Option<unsafe extern "C" fn(device: *mut XhalDevice, host_pointer: *mut u8)>,

    /// Added in 1.5, optional, with `stream_create_with_priority`: the device's stream
    /// priorities, numbered as CUDA numbers them: `least` is the priority of a stream made by
    /// `stream_create` and must be 0, `greatest` the most urgent, numerically lower or equal
    /// (`greatest <= 0`). A device that schedules every stream alike returns
    /// `XHAL_STATUS_UNSUPPORTED` or leaves both entries null; the host then gives every stream
    /// priority 0.
    pub device_stream_priorities: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            least: *mut i32,
            greatest: *mut i32,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
    /// Added in 1.5. Creates a stream whose work the device prefers to work of streams with a
    /// numerically greater priority, when both are ready: a hint about order, never about
    /// results. `priority` lies in the range `device_stream_priorities` reports (the host clamps
    /// a request into it before calling); a stream of priority `least` behaves as one from
    /// `stream_create`.
    pub stream_create_with_priority: Option<
        unsafe extern "C" fn(
            device: *mut XhalDevice,
            priority: i32,
            stream: *mut *mut XhalStream,
            error: XhalErrorOut,
        ) -> XhalStatus,
    >,
}

/// `struct_size` of an `XhalPluginApi` with every v1.0 entry: where the v1.0 part ends. A host
/// rejects smaller tables. This stays fixed when later minors append entries.
pub const XHAL_PLUGIN_API_V1_0_SIZE: usize =
    core::mem::offset_of!(XhalPluginApi, kernel_destroy) + core::mem::size_of::<usize>();
/// `struct_size` of an `XhalPluginApi` with every v1.1 entry.
pub const XHAL_PLUGIN_API_V1_1_SIZE: usize =
    core::mem::offset_of!(XhalPluginApi, device_memory_usage) + core::mem::size_of::<usize>();
/// `struct_size` of an `XhalPluginApi` with every v1.3 entry (1.2 added none).
pub const XHAL_PLUGIN_API_V1_3_SIZE: usize =
    core::mem::offset_of!(XhalPluginApi, event_timestamp) + core::mem::size_of::<usize>();
/// `struct_size` of an `XhalPluginApi` with every v1.4 entry.
pub const XHAL_PLUGIN_API_V1_4_SIZE: usize =
    core::mem::offset_of!(XhalPluginApi, host_memory_free) + core::mem::size_of::<usize>();
/// `struct_size` of an `XhalPluginApi` with every v1.5 entry.
pub const XHAL_PLUGIN_API_V1_5_SIZE: usize =
    core::mem::offset_of!(XhalPluginApi, stream_create_with_priority) + core::mem::size_of::<usize>();
/// `struct_size` of an `XhalDeviceInfo` with every v1.0 field: where the v1.0 part ends (the
/// struct's trailing padding is not part of it).
pub const XHAL_DEVICE_INFO_V1_0_SIZE: usize =
    core::mem::offset_of!(XhalDeviceInfo, kernel_formats) + 4 * XHAL_MAX_KERNEL_FORMATS;
/// `struct_size` of an `XhalLaunchInfo` with every v1.0 field.
pub const XHAL_LAUNCH_INFO_V1_0_SIZE: usize =
    core::mem::offset_of!(XhalLaunchInfo, scalar_size) + core::mem::size_of::<usize>();
/// Smallest `struct_size` of an `XhalError` the host reads the message of.
pub const XHAL_ERROR_V1_0_SIZE: usize = core::mem::offset_of!(XhalError, message) + core::mem::size_of::<XhalStr>();

/// The one function a plugin exports, as `xhal_plugin_query`. It returns the plugin's static
/// table, or null when the plugin cannot serve a host of that ABI version. It may be called
/// more than once and from any thread; it must return the same table each time.
pub type XhalPluginQueryFn = unsafe extern "C" fn(host_abi_major: u32, host_abi_minor: u32) -> *const XhalPluginApi;

impl XhalStr {
    /// The empty string.
    pub const EMPTY: XhalStr = XhalStr {
        ptr: core::ptr::null(),
        len: 0,
    };

    /// Borrows a Rust string. The caller keeps `text` alive as long as the ABI requires.
    pub const fn from_str(text: &str) -> XhalStr {
        XhalStr {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }

    /// Reads the bytes back.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes that outlive `'a`, or `len` must be 0.
    pub unsafe fn as_bytes<'a>(&self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            &[]
        } else {
            // SAFETY: the caller guarantees `len` readable bytes at `ptr` for `'a`.
            unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
        }
    }
}

// SAFETY: an XhalStr is a borrowed view of immutable bytes; the ABI forbids writing through it.
unsafe impl Send for XhalStr {}
// SAFETY: as above, shared read-only access is all the ABI allows.
unsafe impl Sync for XhalStr {}
// SAFETY: the table holds only function pointers and static strings.
unsafe impl Send for XhalPluginApi {}
// SAFETY: as above.
unsafe impl Sync for XhalPluginApi {}

impl XhalDeviceInfo {
    /// A zeroed v1.0 struct with `struct_size` set, ready to hand to `device_get_info`.
    pub const fn new() -> XhalDeviceInfo {
        XhalDeviceInfo {
            struct_size: XHAL_DEVICE_INFO_V1_0_SIZE,
            name: XhalStr::EMPTY,
            vendor: XhalStr::EMPTY,
            vendor_id: 0,
            device_id: 0,
            device_type: 0,
            uuid: [0; 16],
            pci_bus_id: XhalStr::EMPTY,
            driver_version: XhalStr::EMPTY,
            total_memory: 0,
            free_memory: 0,
            max_allocation_size: 0,
            max_workgroup_size: [0; 3],
            max_workgroup_invocations: 0,
            max_workgroup_count: [0; 3],
            max_workgroup_memory: 0,
            subgroup_size: 0,
            max_buffer_arguments: 0,
            max_scalar_block_size: 0,
            buffer_offset_alignment: 0,
            features: 0,
            kernel_format_count: 0,
            kernel_formats: [0; XHAL_MAX_KERNEL_FORMATS],
        }
    }
}

impl XhalPluginApi {
    /// A v1.0 table with a name and version and every entry null: a starting point that a
    /// plugin fills in, and what a host reads a shorter table into.
    pub const fn without_entries(plugin_name: XhalStr, plugin_version: XhalStr) -> XhalPluginApi {
        XhalPluginApi {
            struct_size: XHAL_PLUGIN_API_V1_0_SIZE,
            abi_major: XHAL_ABI_MAJOR,
            abi_minor: XHAL_ABI_MINOR,
            plugin_name,
            plugin_version,
            error_free: None,
            device_count: None,
            device_get_info: None,
            device_open: None,
            device_close: None,
            buffer_allocate: None,
            buffer_free: None,
            stream_create: None,
            stream_destroy: None,
            stream_write: None,
            stream_read: None,
            stream_copy: None,
            stream_fill: None,
            stream_launch: None,
            stream_record_event: None,
            stream_wait_event: None,
            stream_synchronize: None,
            stream_query: None,
            event_create: None,
            event_destroy: None,
            event_query: None,
            event_synchronize: None,
            event_elapsed_time: None,
            module_load: None,
            module_destroy: None,
            kernel_get: None,
            kernel_destroy: None,
            device_memory_usage: None,
            device_clock: None,
            event_timestamp: None,
            command_list_create: None,
            command_list_append_copy: None,
            command_list_append_fill: None,
            command_list_append_launch: None,
            command_list_finish: None,
            command_list_update_launch: None,
            stream_submit_command_list: None,
            command_list_destroy: None,
            buffer_map: None,
            buffer_unmap: None,
            host_memory_allocate: None,
            host_memory_free: None,
            device_stream_priorities: None,
            stream_create_with_priority: None,
        }
    }
}

impl Default for XhalDeviceInfo {
    fn default() -> Self {
        Self::new()
    }
}
