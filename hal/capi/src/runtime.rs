//! Runtimes (discovery, device choice) and devices.

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::Arc;

use crate::handles::{self, Object};
use crate::{call, fill_sized, invalid, read_sized, text_arg, write_out, xhal_status_t, Result};

/// What discovery found: backends and their devices. Opaque; from `xhal_runtime_create`.
pub struct xhal_runtime_t {
    _private: [u8; 0],
}

/// An open device. Opaque; from `xhal_runtime_choose` or `xhal_device_open`.
pub struct xhal_device_t {
    _private: [u8; 0],
}

/// `xhal_runtime_options_t::flags`: only the backends built into the library (the CPU
/// reference device); no plugin is searched for or loaded.
pub const XHAL_RUNTIME_NO_PLUGINS: u32 = 1;

/// How `xhal_runtime_create` discovers backends. Zero-initialise it and set `struct_size`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_runtime_options_t {
    /// `sizeof(xhal_runtime_options_t)`.
    pub struct_size: usize,
    /// Folders searched for plugins, separated by `:`, instead of `XHAL_PLUGIN_PATH` and the
    /// default folders; null for the default search.
    pub plugin_path: *const c_char,
    /// `XHAL_RUNTIME_` flags.
    pub flags: u32,
}

/// `xhal_device_info_t::type` of a CPU.
pub const XHAL_DEVICE_TYPE_CPU: u32 = 1;
/// `xhal_device_info_t::type` of a GPU that shares memory with the host.
pub const XHAL_DEVICE_TYPE_INTEGRATED_GPU: u32 = 2;
/// `xhal_device_info_t::type` of a GPU with its own memory.
pub const XHAL_DEVICE_TYPE_DISCRETE_GPU: u32 = 3;
/// `xhal_device_info_t::type` of another kind of accelerator.
pub const XHAL_DEVICE_TYPE_ACCELERATOR: u32 = 4;
/// `xhal_device_info_t::type` of anything else.
pub const XHAL_DEVICE_TYPE_OTHER: u32 = 5;

/// `xhal_device_info_t::features`: 16-bit floats in kernels.
pub const XHAL_DEVICE_FEATURE_F16: u64 = 1 << 0;
/// `xhal_device_info_t::features`: 64-bit floats in kernels.
pub const XHAL_DEVICE_FEATURE_F64: u64 = 1 << 1;
/// `xhal_device_info_t::features`: 64-bit integers in kernels.
pub const XHAL_DEVICE_FEATURE_I64: u64 = 1 << 2;
/// `xhal_device_info_t::features`: 32-bit atomics.
pub const XHAL_DEVICE_FEATURE_ATOMICS_32: u64 = 1 << 3;
/// `xhal_device_info_t::features`: 64-bit atomics.
pub const XHAL_DEVICE_FEATURE_ATOMICS_64: u64 = 1 << 4;
/// `xhal_device_info_t::features`: events that time (`xhal_event_elapsed_ms`).
pub const XHAL_DEVICE_FEATURE_TIMESTAMPS: u64 = 1 << 5;
/// `xhal_device_info_t::features`: the host can address the device's memory.
pub const XHAL_DEVICE_FEATURE_HOST_MAPPABLE: u64 = 1 << 6;
/// `xhal_device_info_t::features`: kernels take `var<uniform>` bindings natively.
pub const XHAL_DEVICE_FEATURE_UNIFORM_BUFFERS: u64 = 1 << 7;

/// A device's facts. The strings belong to the runtime or device they came from and live as
/// long as it does. `features` has the plugin ABI's `XHAL_FEATURE_` bits.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_device_info_t {
    /// `sizeof(xhal_device_info_t)`, set by the caller.
    pub struct_size: usize,
    /// `backend:index`, as `XHAL_DEVICE` names it.
    pub label: *const c_char,
    /// The backend's name.
    pub backend: *const c_char,
    /// The device's index within its backend.
    pub index: u32,
    /// `XHAL_DEVICE_TYPE_`.
    pub device_type: u32,
    /// The device's name.
    pub name: *const c_char,
    /// The vendor's name.
    pub vendor: *const c_char,
    /// The driver's version, as the driver writes it.
    pub driver_version: *const c_char,
    /// Bytes of memory in all.
    pub total_memory: u64,
    /// The largest single buffer, in bytes.
    pub max_allocation_size: u64,
    /// The largest workgroup in x, y and z.
    pub max_workgroup_size: [u32; 3],
    /// The most invocations in one workgroup.
    pub max_workgroup_invocations: u32,
    /// The most workgroups in x, y and z.
    pub max_workgroup_count: [u32; 3],
    /// Bytes of workgroup memory.
    pub max_workgroup_memory: u32,
    /// Invocations per subgroup (0 when unknown).
    pub subgroup_size: u32,
    /// The most buffer arguments of one launch.
    pub max_buffer_arguments: u32,
    /// The most bytes of scalars of one launch.
    pub max_scalar_block_size: u32,
    /// `XHAL_FEATURE_` bits.
    pub features: u64,
}

/// The strings of one device's facts, kept for the `const char*` fields.
pub(crate) struct InfoStrings {
    label: CString,
    backend: CString,
    name: CString,
    vendor: CString,
    driver_version: CString,
}

fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).unwrap_or_default()
}

impl InfoStrings {
    fn new(label: &str, backend: &str, info: &xhal::DeviceInfo) -> InfoStrings {
        InfoStrings {
            label: c_string(label),
            backend: c_string(backend),
            name: c_string(&info.name),
            vendor: c_string(&info.vendor),
            driver_version: c_string(&info.driver_version),
        }
    }
}

fn device_type(kind: xhal::DeviceType) -> u32 {
    match kind {
        xhal::DeviceType::Cpu => XHAL_DEVICE_TYPE_CPU,
        xhal::DeviceType::IntegratedGpu => XHAL_DEVICE_TYPE_INTEGRATED_GPU,
        xhal::DeviceType::DiscreteGpu => XHAL_DEVICE_TYPE_DISCRETE_GPU,
        xhal::DeviceType::Accelerator => XHAL_DEVICE_TYPE_ACCELERATOR,
        xhal::DeviceType::Other => XHAL_DEVICE_TYPE_OTHER,
    }
}

fn info_struct(strings: &InfoStrings, index: u32, info: &xhal::DeviceInfo) -> xhal_device_info_t {
    xhal_device_info_t {
        struct_size: std::mem::size_of::<xhal_device_info_t>(),
        label: strings.label.as_ptr(),
        backend: strings.backend.as_ptr(),
        index,
        device_type: device_type(info.device_type),
        name: strings.name.as_ptr(),
        vendor: strings.vendor.as_ptr(),
        driver_version: strings.driver_version.as_ptr(),
        total_memory: info.total_memory,
        max_allocation_size: info.max_allocation_size,
        max_workgroup_size: info.max_workgroup_size,
        max_workgroup_invocations: info.max_workgroup_invocations,
        max_workgroup_count: info.max_workgroup_count,
        max_workgroup_memory: info.max_workgroup_memory,
        subgroup_size: info.subgroup_size,
        max_buffer_arguments: info.max_buffer_arguments,
        max_scalar_block_size: info.max_scalar_block_size,
        features: info.features.0,
    }
}

const DEVICE_INFO_V1_0: usize = std::mem::offset_of!(xhal_device_info_t, features) + 8;
const OPTIONS_V1_0: usize = std::mem::offset_of!(xhal_runtime_options_t, flags) + 4;

pub(crate) struct RuntimeObject {
    runtime: Arc<xhal::Runtime>,
    entries: Vec<(xhal::DeviceEntry, InfoStrings)>,
    report: CString,
}

pub(crate) struct DeviceObject {
    pub(crate) device: xhal::Device,
    strings: InfoStrings,
    why: CString,
    /// The handle of the device's default stream, destroyed with the device handle.
    pub(crate) default_stream: usize,
}

impl Drop for DeviceObject {
    fn drop(&mut self) {
        let _ = handles::remove(self.default_stream, "stream", "the default stream");
    }
}

/// Discovers backends and devices: the CPU backend built into the library, then plugins
/// from `options->plugin_path` when given, else from `XHAL_PLUGIN_PATH` and the default
/// folders. `api_major` and `api_minor` are the header's `XHAL_API_MAJOR` and
/// `XHAL_API_MINOR` (`xhal_runtime_create_default` passes them): a program built for another
/// major version, or a newer minor than this library's, is refused with
/// `XHAL_ERROR_UNSUPPORTED`. `options` may be null.
///
/// # Safety
///
/// `options` is null or a readable `xhal_runtime_options_t` of its `struct_size`; `runtime`
/// points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_create(
    api_major: u32,
    api_minor: u32,
    options: *const xhal_runtime_options_t,
    runtime: *mut *mut xhal_runtime_t,
) -> xhal_status_t {
    call("xhal_runtime_create", || {
        if api_major != crate::XHAL_API_MAJOR || api_minor > crate::XHAL_API_MINOR {
            return Err(xhal::Error::new(
                xhal::ErrorKind::Unsupported,
                format!(
                    "the program was built for xhal C API {api_major}.{api_minor}, and this library implements {}.{}: \
                     use a library of major version {api_major} and minor {api_minor} or later",
                    crate::XHAL_API_MAJOR,
                    crate::XHAL_API_MINOR
                ),
            ));
        }
        let options = if options.is_null() {
            xhal_runtime_options_t {
                struct_size: std::mem::size_of::<xhal_runtime_options_t>(),
                plugin_path: std::ptr::null(),
                flags: 0,
            }
        } else {
            let defaults = xhal_runtime_options_t {
                struct_size: 0,
                plugin_path: std::ptr::null(),
                flags: 0,
            };
            // SAFETY: the caller passes a readable options struct of its struct_size.
            unsafe { read_sized(options, defaults, OPTIONS_V1_0, "options")? }
        };
        if options.flags & !XHAL_RUNTIME_NO_PLUGINS != 0 {
            return Err(invalid(format!(
                "options.flags {:#x} has bits this library does not know; it knows XHAL_RUNTIME_NO_PLUGINS (1)",
                options.flags
            )));
        }
        let mut builder = xhal::Runtime::builder();
        if options.flags & XHAL_RUNTIME_NO_PLUGINS != 0 {
            builder = builder.without_plugin_search().device_selector(None);
        } else if !options.plugin_path.is_null() {
            // SAFETY: a non-null plugin_path is a NUL-terminated string, per the struct's contract.
            let path = unsafe { text_arg(options.plugin_path, "options.plugin_path")? };
            builder = builder.plugin_folders(path.split(':').filter(|p| !p.is_empty()).map(PathBuf::from));
        }
        let built = Arc::new(builder.build()?);
        let entries = built
            .devices()
            .into_iter()
            .map(|entry| {
                let strings = InfoStrings::new(&entry.label(), &entry.backend, &entry.info);
                (entry, strings)
            })
            .collect();
        let report = serde_json::to_string(built.report())
            .map_err(|e| xhal::Error::internal(format!("the discovery report does not serialize: {e}")))?;
        let handle = handles::insert(Object::Runtime(Arc::new(RuntimeObject {
            runtime: built,
            entries,
            report: c_string(&report),
        })));
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(runtime, handle as *mut xhal_runtime_t, "runtime") }
    })
}

/// Destroys a runtime handle (null is accepted). Devices opened from it stay open.
#[no_mangle]
pub extern "C" fn xhal_runtime_destroy(runtime: *mut xhal_runtime_t) -> xhal_status_t {
    call("xhal_runtime_destroy", || {
        handles::remove(runtime as usize, "runtime", "runtime").map(drop)
    })
}

/// The number of devices discovery found, over every backend.
///
/// # Safety
///
/// `count` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_device_count(runtime: *const xhal_runtime_t, count: *mut u32) -> xhal_status_t {
    call("xhal_runtime_device_count", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        // SAFETY: the caller passes a writable u32.
        unsafe { write_out(count, object.entries.len() as u32, "count") }
    })
}

/// The facts of device `index` (0 to the device count - 1, in discovery order, as `xhal
/// devices` lists them) without opening it.
///
/// # Safety
///
/// `info` points to a writable `xhal_device_info_t` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_device_info(
    runtime: *const xhal_runtime_t,
    index: u32,
    info: *mut xhal_device_info_t,
) -> xhal_status_t {
    call("xhal_runtime_device_info", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        let (entry, strings) = object.entries.get(index as usize).ok_or_else(|| {
            xhal::Error::not_found(format!(
                "device index {index}: the runtime has {} device(s)",
                object.entries.len()
            ))
        })?;
        let value = info_struct(strings, entry.index, &entry.info);
        // SAFETY: the caller passes a writable struct of its struct_size.
        unsafe { fill_sized(info, value, DEVICE_INFO_V1_0, "info") }
    })
}

/// What discovery did, as JSON (the `discovery` part of `xhal doctor --json`): the folders
/// searched, each plugin file tried and what became of it. The string belongs to the runtime.
///
/// # Safety
///
/// `json` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_report_json(
    runtime: *const xhal_runtime_t,
    json: *mut *const c_char,
) -> xhal_status_t {
    call("xhal_runtime_report_json", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        // SAFETY: the caller passes writable storage for a pointer.
        unsafe { write_out(json, object.report.as_ptr(), "json") }
    })
}

fn selector_of(text: *const c_char) -> Result<xhal::Selector> {
    if text.is_null() {
        return xhal::Selector::from_env();
    }
    // SAFETY: a non-null selector is a NUL-terminated string, per every caller's contract.
    let text = unsafe { text_arg(text, "selector")? };
    if text.trim().is_empty() {
        return Ok(xhal::Selector::new());
    }
    xhal::Selector::parse_from(text, "the selector")
}

/// The devices `selector` accepts, best first, as indices into the runtime's device list: the
/// order a program numbering "its" devices should use (the PyTorch device numbers `xhal:N`
/// this way). `selector` uses the `XHAL_DEVICE` grammar (`vulkan:*,!cpu`); null reads
/// `XHAL_DEVICE`, and an empty string accepts every device, in the default order. At most
/// `capacity` indices are written; `count` receives how many there are in all.
///
/// # Safety
///
/// `selector` is null or NUL-terminated; `indices` is null (with `capacity` 0) or has room for
/// `capacity` values; `count` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_select(
    runtime: *const xhal_runtime_t,
    selector: *const c_char,
    indices: *mut u32,
    capacity: u32,
    count: *mut u32,
) -> xhal_status_t {
    call("xhal_runtime_select", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        let selector = selector_of(selector)?;
        let candidates: Vec<xhal::Candidate<'_>> = object
            .entries
            .iter()
            .map(|(entry, _)| xhal::Candidate {
                backend: &entry.backend,
                index: entry.index,
                info: &entry.info,
            })
            .collect();
        let ranking = selector.rank(&candidates);
        if indices.is_null() && capacity > 0 {
            return Err(invalid(format!("indices is a null pointer with capacity {capacity}")));
        }
        for (slot, &index) in ranking.accepted.iter().take(capacity as usize).enumerate() {
            // SAFETY: the caller gives room for `capacity` values, and slot < capacity.
            unsafe { indices.add(slot).write(index as u32) };
        }
        // SAFETY: the caller passes a writable u32.
        unsafe { write_out(count, ranking.accepted.len() as u32, "count") }
    })
}

fn open_object(device: xhal::Device, why: String) -> Result<usize> {
    let label = device.label();
    let strings = InfoStrings::new(&label, device.backend_name(), device.info());
    let stream = device.create_stream()?;
    let default_stream = handles::insert(Object::Stream(Arc::new(crate::stream::StreamObject {
        stream,
        device: device.clone(),
        is_default: true,
        capture: Default::default(),
    })));
    Ok(handles::insert(Object::Device(Arc::new(DeviceObject {
        device,
        strings,
        why: c_string(&why),
        default_stream,
    }))))
}

/// Chooses the best device `selector` accepts and opens it (see `xhal_runtime_select` for
/// the selector; null reads `XHAL_DEVICE`). `xhal_device_why` then says why it was chosen.
/// When no device is accepted the error is `XHAL_ERROR_SELECTION`, and its message lists
/// every device and why each was rejected.
///
/// # Safety
///
/// `selector` is null or NUL-terminated; `device` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_runtime_choose(
    runtime: *const xhal_runtime_t,
    selector: *const c_char,
    device: *mut *mut xhal_device_t,
) -> xhal_status_t {
    call("xhal_runtime_choose", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        let selector = selector_of(selector)?;
        let (opened, explanation) = object.runtime.choose(&selector)?;
        let handle = open_object(opened, explanation.to_string())?;
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(device, handle as *mut xhal_device_t, "device") }
    })
}

/// Opens the device labelled `label` (`"vulkan:0"`, as `xhal devices` writes it). Each open
/// gives a new handle, with its own default stream, to the same device.
///
/// # Safety
///
/// `label` is NUL-terminated; `device` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_open(
    runtime: *const xhal_runtime_t,
    label: *const c_char,
    device: *mut *mut xhal_device_t,
) -> xhal_status_t {
    call("xhal_device_open", || {
        let object = handles::runtime(runtime as usize, "runtime")?;
        // SAFETY: the caller passes a NUL-terminated string.
        let label = unsafe { text_arg(label, "label")? };
        let opened = object.runtime.open(label)?;
        let handle = open_object(opened, format!("opened {label} by its label"))?;
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(device, handle as *mut xhal_device_t, "device") }
    })
}

/// Destroys a device handle and its default stream's handle (null is accepted). Buffers,
/// streams, events and modules made from it stay usable until they are destroyed.
#[no_mangle]
pub extern "C" fn xhal_device_destroy(device: *mut xhal_device_t) -> xhal_status_t {
    call("xhal_device_destroy", || {
        handles::remove(device as usize, "device", "device").map(drop)
    })
}

/// The device's facts.
///
/// # Safety
///
/// `info` points to a writable `xhal_device_info_t` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_get_info(
    device: *const xhal_device_t,
    info: *mut xhal_device_info_t,
) -> xhal_status_t {
    call("xhal_device_get_info", || {
        let object = handles::device(device as usize, "device")?;
        let value = info_struct(&object.strings, object.device.index(), object.device.info());
        // SAFETY: the caller passes a writable struct of its struct_size.
        unsafe { fill_sized(info, value, DEVICE_INFO_V1_0, "info") }
    })
}

/// Why this device was chosen: the selector's explanation, with a verdict on every other
/// device. The string belongs to the device handle.
///
/// # Safety
///
/// `why` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_why(device: *const xhal_device_t, why: *mut *const c_char) -> xhal_status_t {
    call("xhal_device_why", || {
        let object = handles::device(device as usize, "device")?;
        // SAFETY: the caller passes writable storage for a pointer.
        unsafe { write_out(why, object.why.as_ptr(), "why") }
    })
}
