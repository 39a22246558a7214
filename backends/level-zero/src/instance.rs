//! The loader, `zeInit`, every driver and every device, and what each device is and can do.

use crate::ffi::{self, Api, DeviceHandle, DriverHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, LibrarySource, Result};

/// The alignment this backend asks of a buffer argument's offset: a kernel dereferences the
/// view's start as a pointer to its element type, and no WGSL type needs more than 16 bytes;
/// 64 keeps views on cache lines as well.
pub(crate) const BUFFER_OFFSET_ALIGNMENT: u64 = 64;

/// One Level Zero device, as found.
pub(crate) struct Adapter {
    pub(crate) driver: DriverHandle,
    pub(crate) device: DeviceHandle,
    pub(crate) info: DeviceInfo,
    /// The ordinal of a command queue group that computes.
    pub(crate) compute_ordinal: u32,
    /// The driver's API version is 1.9 or later: immediate lists are created in order.
    pub(crate) in_order_lists: bool,
    /// Regular command lists can run from a stream's immediate list
    /// (`zeCommandListImmediateAppendCommandListsExp`): the device has native command lists.
    pub(crate) command_lists: bool,
    /// Nanoseconds per timestamp tick.
    pub(crate) timer_resolution_ns: u64,
    /// Valid bits of a kernel timestamp.
    pub(crate) kernel_timestamp_bits: u32,
    /// Bytes this backend holds on the device, for the free-memory figure.
    pub(crate) allocated: Arc<AtomicU64>,
}

// Driver and device handles are process-wide and never freed by the driver; calls taking
// them are thread-safe.
// SAFETY: see above.
unsafe impl Send for Adapter {}
// SAFETY: see above.
unsafe impl Sync for Adapter {}

impl Adapter {
    /// The device's description now: its free memory is what this backend has not allocated.
    pub(crate) fn describe(&self) -> DeviceInfo {
        let mut info = self.info.clone();
        info.free_memory = info.total_memory.saturating_sub(self.allocated.load(Ordering::Relaxed));
        info
    }
}

/// The loaded library and the usable devices.
pub(crate) struct Instance {
    pub(crate) api: Api,
    pub(crate) adapters: Vec<Adapter>,
}

fn driver_unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::DriverUnavailable, message)
}

const INSTALL_HINT: &str = "install a Level Zero driver (intel-level-zero-gpu with an Intel GPU, or the vendor's)";

impl Instance {
    /// Opens the loader, initializes it for GPUs and finds every device of every driver.
    pub(crate) fn create(source: &LibrarySource) -> Result<Instance> {
        let library = match source {
            LibrarySource::System => ffi::LOADER_LIBRARY.to_string(),
            LibrarySource::Path(path) => path.display().to_string(),
        };
        let api = Api::load(&library)?;
        // SAFETY: zeInit takes only flags; it may be called more than once.
        let code = unsafe { (api.init)(ffi::ZE_INIT_FLAG_GPU_ONLY) };
        if code == ffi::ZE_RESULT_ERROR_UNINITIALIZED {
            return Err(driver_unavailable(format!(
                "no Level Zero driver: the loader {library} answered zeInit with ZE_RESULT_ERROR_UNINITIALIZED \
                 (it found no driver for a GPU); {INSTALL_HINT}"
            )));
        }
        if code != ffi::ZE_RESULT_SUCCESS {
            return Err(driver_unavailable(format!(
                "no Level Zero driver: {}; {INSTALL_HINT}",
                ffi::ze_error("zeInit", "initializing for GPUs", code).message()
            )));
        }
        let drivers = drivers(&api)?;
        if drivers.is_empty() {
            return Err(driver_unavailable(format!(
                "no Level Zero driver: the loader {library} initialized but zeDriverGet lists none; {INSTALL_HINT}"
            )));
        }
        let mut adapters = Vec::new();
        let mut refused = Vec::new();
        for driver in drivers {
            match devices(&api, driver) {
                Ok(found) => {
                    for device in found {
                        match describe(&api, driver, device) {
                            Ok(adapter) => adapters.push(adapter),
                            Err(error) => {
                                let why = with_driver_description(&api, driver, &error);
                                tracing::warn!(error = %why, "Level Zero device skipped");
                                refused.push(why);
                            }
                        }
                    }
                }
                Err(error) => refused.push(with_driver_description(&api, driver, &error)),
            }
        }
        if adapters.is_empty() {
            let why = if refused.is_empty() {
                "its drivers list no device".to_string()
            } else {
                refused.join("; ")
            };
            return Err(driver_unavailable(format!(
                "the Level Zero loader {library} found drivers but no usable device ({why})"
            )));
        }
        Ok(Instance { api, adapters })
    }
}

/// `error`'s message followed by the driver's own description of the failure, where the
/// loader has `zeDriverGetLastErrorDescription` and the driver gives one: a result code alone
/// seldom says what is missing (a driver without the library it needs, say).
fn with_driver_description(api: &Api, driver: DriverHandle, error: &Error) -> String {
    let message = error.message().to_string();
    let Some(last_error) = api.driver_get_last_error_description else {
        return message;
    };
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: a driver the loader listed, asked on the thread whose call just failed; the
    // string is the driver's, valid until its next call on this thread, and copied at once.
    let code = unsafe { last_error(driver, &mut text) };
    if code != ffi::ZE_RESULT_SUCCESS || text.is_null() {
        return message;
    }
    // SAFETY: a NUL-terminated string (see above).
    let description = unsafe { std::ffi::CStr::from_ptr(text) }
        .to_string_lossy()
        .trim()
        .to_string();
    if description.is_empty() {
        message
    } else {
        format!("{message}; the driver says: {description}")
    }
}

fn drivers(api: &Api) -> Result<Vec<DriverHandle>> {
    let mut count = 0u32;
    // SAFETY: asks for the count only.
    let code = unsafe { (api.driver_get)(&mut count, std::ptr::null_mut()) };
    if code == ffi::ZE_RESULT_ERROR_UNINITIALIZED {
        return Ok(Vec::new());
    }
    ffi::check(code, "zeDriverGet", || "counting Level Zero drivers".to_string())
        .map_err(|error| driver_unavailable(error.message().to_string()))?;
    let mut drivers = vec![std::ptr::null_mut(); count as usize];
    if count > 0 {
        // SAFETY: the vector holds `count` entries.
        let code = unsafe { (api.driver_get)(&mut count, drivers.as_mut_ptr()) };
        ffi::check(code, "zeDriverGet", || "listing Level Zero drivers".to_string())
            .map_err(|error| driver_unavailable(error.message().to_string()))?;
        drivers.truncate(count as usize);
    }
    Ok(drivers)
}

fn devices(api: &Api, driver: DriverHandle) -> Result<Vec<DeviceHandle>> {
    let mut count = 0u32;
    // SAFETY: asks for the count only, of a driver the loader listed.
    let code = unsafe { (api.device_get)(driver, &mut count, std::ptr::null_mut()) };
    ffi::check(code, "zeDeviceGet", || "counting a driver's devices".to_string())?;
    let mut devices = vec![std::ptr::null_mut(); count as usize];
    if count > 0 {
        // SAFETY: the vector holds `count` entries.
        let code = unsafe { (api.device_get)(driver, &mut count, devices.as_mut_ptr()) };
        ffi::check(code, "zeDeviceGet", || "listing a driver's devices".to_string())?;
        devices.truncate(count as usize);
    }
    Ok(devices)
}

/// The PCI vendor's name, for the vendor ids a Level Zero driver reports.
fn vendor_name(vendor_id: u32) -> String {
    match vendor_id {
        0x8086 => "Intel".to_string(),
        0x10de => "NVIDIA".to_string(),
        0x1002 => "AMD".to_string(),
        other => format!("PCI vendor {other:#06x}"),
    }
}

/// Describes `device` of `driver`.
fn describe(api: &Api, driver: DriverHandle, device: DeviceHandle) -> Result<Adapter> {
    let mut properties = ffi::DeviceProperties::new();
    // SAFETY: a device the driver listed; the struct has its stype set.
    let code = unsafe { (api.device_get_properties)(device, &mut properties) };
    ffi::check(code, "zeDeviceGetProperties", || "describing a device".to_string())?;
    let name = ffi::c_string(&properties.name);

    let mut compute = ffi::DeviceComputeProperties::new();
    // SAFETY: as above.
    let code = unsafe { (api.device_get_compute_properties)(device, &mut compute) };
    ffi::check(code, "zeDeviceGetComputeProperties", || format!("describing {name}"))?;

    let mut module = ffi::DeviceModuleProperties::new();
    // SAFETY: as above.
    let code = unsafe { (api.device_get_module_properties)(device, &mut module) };
    ffi::check(code, "zeDeviceGetModuleProperties", || format!("describing {name}"))?;

    let mut memory_count = 0u32;
    // SAFETY: asks for the count only.
    let code = unsafe { (api.device_get_memory_properties)(device, &mut memory_count, std::ptr::null_mut()) };
    ffi::check(code, "zeDeviceGetMemoryProperties", || {
        format!("counting the memories of {name}")
    })?;
    let mut memories: Vec<ffi::DeviceMemoryProperties> =
        (0..memory_count).map(|_| ffi::DeviceMemoryProperties::new()).collect();
    if memory_count > 0 {
        // SAFETY: the vector holds `memory_count` structs with their stype set.
        let code = unsafe { (api.device_get_memory_properties)(device, &mut memory_count, memories.as_mut_ptr()) };
        ffi::check(code, "zeDeviceGetMemoryProperties", || {
            format!("describing the memories of {name}")
        })?;
        memories.truncate(memory_count as usize);
    }
    let total_memory: u64 = memories.iter().map(|memory| memory.total_size).sum();

    let compute_ordinal = compute_ordinal(api, device, &name)?;

    let mut api_version = 0u32;
    // SAFETY: a driver the loader listed.
    let code = unsafe { (api.driver_get_api_version)(driver, &mut api_version) };
    ffi::check(code, "zeDriverGetApiVersion", || {
        format!("asking the API version of {name}'s driver")
    })?;

    let pci_bus_id = api.device_pci_get_properties_ext.and_then(|function| {
        let mut pci = ffi::PciExtProperties::new();
        // SAFETY: the extension's entry point, with its struct's stype set.
        let code = unsafe { function(device, &mut pci) };
        (code == ffi::ZE_RESULT_SUCCESS).then(|| {
            format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                pci.domain, pci.bus, pci.device, pci.function
            )
        })
    });

    let device_type = match properties.device_type {
        ffi::ZE_DEVICE_TYPE_GPU if properties.flags & ffi::ZE_DEVICE_PROPERTY_FLAG_INTEGRATED != 0 => {
            DeviceType::IntegratedGpu
        }
        ffi::ZE_DEVICE_TYPE_GPU => DeviceType::DiscreteGpu,
        ffi::ZE_DEVICE_TYPE_CPU => DeviceType::Cpu,
        ffi::ZE_DEVICE_TYPE_FPGA | ffi::ZE_DEVICE_TYPE_MCA | ffi::ZE_DEVICE_TYPE_VPU => DeviceType::Accelerator,
        _ => DeviceType::Other,
    };

    // Every Level Zero device runs 64-bit SPIR-V kernels with 32-bit atomics; kernel
    // timestamps are core.
    let mut features = Features::ATOMICS_32 | Features::I64 | Features::TIMESTAMPS;
    if module.flags & ffi::ZE_DEVICE_MODULE_FLAG_FP64 != 0 {
        features = features | Features::F64;
    }
    // 64-bit atomics become `Int64Atomics` in the Kernel SPIR-V that xhal-kernel writes.
    if module.flags & ffi::ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS != 0 {
        features = features | Features::ATOMICS_64;
    }
    // No f16 even where the module flags list it: the Kernel SPIR-V writer refuses it.

    // The argument space holds the pointers, the scalar block and the buffer lengths (an 8-byte
    // pointer and an 8-byte length per buffer): a quarter (at least 128 bytes, at most half)
    // goes to the scalar block, as on OpenCL.
    let parameter_bytes = if module.max_arguments_size == 0 {
        1024
    } else {
        module.max_arguments_size as usize
    };
    let scalar_bytes = (parameter_bytes / 4).max(128).min(parameter_bytes / 2);
    let buffer_arguments = (parameter_bytes - scalar_bytes).saturating_sub(8) / 16;

    let subgroup_size = compute
        .sub_group_sizes
        .iter()
        .take((compute.num_sub_group_sizes as usize).min(ffi::ZE_SUBGROUPSIZE_COUNT))
        .copied()
        .filter(|width| width.is_power_of_two() && *width <= 128)
        .min()
        .unwrap_or(1);

    let max_allocation = properties
        .max_mem_alloc_size
        .min(if total_memory == 0 { u64::MAX } else { total_memory });
    let driver_version = format!("Level Zero API {}.{}", api_version >> 16, api_version & 0xffff);
    tracing::debug!(%name, %driver_version, "Level Zero device found");
    let info = DeviceInfo {
        name,
        vendor: vendor_name(properties.vendor_id),
        vendor_id: properties.vendor_id,
        device_id: properties.device_id,
        device_type,
        uuid: properties.uuid,
        pci_bus_id,
        driver_version,
        total_memory,
        free_memory: total_memory,
        max_allocation_size: max_allocation,
        max_workgroup_size: compute.max_group_size,
        max_workgroup_invocations: compute.max_total_group_size,
        max_workgroup_count: compute.max_group_count,
        max_workgroup_memory: compute.max_shared_local_memory,
        subgroup_size,
        max_buffer_arguments: u32::try_from(buffer_arguments).unwrap_or(u32::MAX),
        max_scalar_block_size: u32::try_from(scalar_bytes).unwrap_or(u32::MAX),
        buffer_offset_alignment: BUFFER_OFFSET_ALIGNMENT as u32,
        features,
        kernel_formats: vec![KernelFormat::SPIRV_KERNEL],
    };
    Ok(Adapter {
        driver,
        device,
        info,
        compute_ordinal,
        in_order_lists: api_version >= ffi::ZE_API_VERSION_1_9,
        command_lists: appends_command_lists(api, driver),
        timer_resolution_ns: properties.timer_resolution.max(1),
        kernel_timestamp_bits: properties.kernel_timestamp_valid_bits,
        allocated: Arc::new(AtomicU64::new(0)),
    })
}

/// Whether `driver` runs regular command lists from immediate ones: the loader exports
/// `zeCommandListImmediateAppendCommandListsExp` and the driver lists its extension. Both are
/// needed, since a loader of API 1.9 exports the entry point over every driver and answers
/// `ZE_RESULT_ERROR_UNSUPPORTED_FEATURE` for a driver without it.
fn appends_command_lists(api: &Api, driver: DriverHandle) -> bool {
    if api.command_list_immediate_append_command_lists_exp.is_none() {
        tracing::debug!(
            "the Level Zero loader has no zeCommandListImmediateAppendCommandListsExp: no native command lists"
        );
        return false;
    }
    match extensions(api, driver) {
        Ok(extensions) => {
            let listed = extensions
                .iter()
                .any(|(name, version)| name == ffi::ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME && version >> 16 == 1);
            if !listed {
                tracing::debug!(
                    "the Level Zero driver does not list {}: no native command lists",
                    ffi::ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME
                );
            }
            listed
        }
        Err(error) => {
            tracing::debug!(%error, "no native command lists");
            false
        }
    }
}

/// The extensions `driver` lists: name and version.
fn extensions(api: &Api, driver: DriverHandle) -> Result<Vec<(String, u32)>> {
    let mut count = 0u32;
    // SAFETY: asks for the count only, of a driver the loader listed.
    let code = unsafe { (api.driver_get_extension_properties)(driver, &mut count, std::ptr::null_mut()) };
    ffi::check(code, "zeDriverGetExtensionProperties", || {
        "counting a driver's extensions".to_string()
    })?;
    // A driver lists tens; a count past this is a broken driver, not a list to allocate.
    const MOST_EXTENSIONS: u32 = 4096;
    if count > MOST_EXTENSIONS {
        return Err(Error::internal(format!(
            "zeDriverGetExtensionProperties counted {count} extensions, more than the {MOST_EXTENSIONS} \
             a driver can have; the Level Zero driver is broken"
        )));
    }
    let empty = ffi::DriverExtensionProperties {
        name: [0; ffi::ZE_MAX_EXTENSION_NAME],
        version: 0,
    };
    let mut properties = vec![empty; count as usize];
    if count > 0 {
        // SAFETY: the vector holds `count` entries.
        let code = unsafe { (api.driver_get_extension_properties)(driver, &mut count, properties.as_mut_ptr()) };
        ffi::check(code, "zeDriverGetExtensionProperties", || {
            "listing a driver's extensions".to_string()
        })?;
        properties.truncate(count as usize);
    }
    Ok(properties
        .iter()
        .map(|extension| (ffi::c_string(&extension.name), extension.version))
        .collect())
}

/// The first command queue group that computes.
fn compute_ordinal(api: &Api, device: DeviceHandle, name: &str) -> Result<u32> {
    let mut count = 0u32;
    // SAFETY: asks for the count only.
    let code = unsafe { (api.device_get_command_queue_group_properties)(device, &mut count, std::ptr::null_mut()) };
    ffi::check(code, "zeDeviceGetCommandQueueGroupProperties", || {
        format!("counting the queue groups of {name}")
    })?;
    let mut groups: Vec<ffi::CommandQueueGroupProperties> =
        (0..count).map(|_| ffi::CommandQueueGroupProperties::new()).collect();
    if count > 0 {
        // SAFETY: the vector holds `count` structs with their stype set.
        let code = unsafe { (api.device_get_command_queue_group_properties)(device, &mut count, groups.as_mut_ptr()) };
        ffi::check(code, "zeDeviceGetCommandQueueGroupProperties", || {
            format!("describing the queue groups of {name}")
        })?;
        groups.truncate(count as usize);
    }
    groups
        .iter()
        .position(|group| group.flags & ffi::ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE != 0 && group.num_queues > 0)
        .map(|ordinal| ordinal as u32)
        .ok_or_else(|| Error::unsupported(format!("{name} has no command queue group that computes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendors_are_named_by_pci_id() {
        assert_eq!(vendor_name(0x8086), "Intel");
        assert_eq!(vendor_name(0x1234), "PCI vendor 0x1234");
    }
}
