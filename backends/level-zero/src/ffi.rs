//! The slice of the Level Zero core API this backend calls, declared by hand from
//! `ze_api.h` (API 1.0 to 1.4 structures, which later versions only extend through `pNext`)
//! and resolved from the loader `libze_loader.so.1` at run time, so that nothing Level Zero
//! is needed to build the crate.
//!
//! Some entry points are optional: `zeCommandListHostSynchronize` (API 1.6; without it a
//! stream synchronizes through a barrier that signals an event), `zeDevicePciGetPropertiesExt`
//! (the PCI extension; without it a device has no PCI bus id),
//! `zeDeviceGetGlobalTimestamps` (API 1.1; without it a device has no clock),
//! `zeDriverGetLastErrorDescription` (API 1.6; without it an error is its result code alone)
//! and `zeCommandListImmediateAppendCommandListsExp` (loaders of API 1.9; without it, or
//! without a driver that lists its extension, the device has no native command lists and core
//! replays graphs operation by operation).

use std::ffi::{c_char, c_void};
use xhal_backend::ffi::LoadError;
use xhal_backend::{Error, ErrorKind, Result};

/// `ze_result_t`.
pub(crate) type ZeResult = u32;

pub(crate) type DriverHandle = *mut c_void;
pub(crate) type DeviceHandle = *mut c_void;
pub(crate) type ContextHandle = *mut c_void;
pub(crate) type CommandListHandle = *mut c_void;
pub(crate) type EventPoolHandle = *mut c_void;
pub(crate) type EventHandle = *mut c_void;
pub(crate) type ModuleHandle = *mut c_void;
pub(crate) type BuildLogHandle = *mut c_void;
pub(crate) type KernelHandle = *mut c_void;

pub(crate) const ZE_RESULT_SUCCESS: ZeResult = 0;
pub(crate) const ZE_RESULT_NOT_READY: ZeResult = 1;
pub(crate) const ZE_RESULT_ERROR_DEVICE_LOST: ZeResult = 0x7000_0001;
pub(crate) const ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY: ZeResult = 0x7000_0003;
pub(crate) const ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET: ZeResult = 0x7000_0006;
pub(crate) const ZE_RESULT_ERROR_UNINITIALIZED: ZeResult = 0x7800_0001;
pub(crate) const ZE_RESULT_ERROR_INVALID_KERNEL_NAME: ZeResult = 0x7800_0011;

pub(crate) const ZE_INIT_FLAG_GPU_ONLY: u32 = 1 << 0;

pub(crate) const ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES: u32 = 0x3;
pub(crate) const ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES: u32 = 0x4;
pub(crate) const ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES: u32 = 0x5;
pub(crate) const ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES: u32 = 0x6;
pub(crate) const ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES: u32 = 0x7;
pub(crate) const ZE_STRUCTURE_TYPE_CONTEXT_DESC: u32 = 0xd;
pub(crate) const ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC: u32 = 0xe;
pub(crate) const ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC: u32 = 0xf;
pub(crate) const ZE_STRUCTURE_TYPE_EVENT_POOL_DESC: u32 = 0x10;
pub(crate) const ZE_STRUCTURE_TYPE_EVENT_DESC: u32 = 0x11;
pub(crate) const ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC: u32 = 0x15;
pub(crate) const ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC: u32 = 0x16;
pub(crate) const ZE_STRUCTURE_TYPE_MODULE_DESC: u32 = 0x1b;
pub(crate) const ZE_STRUCTURE_TYPE_KERNEL_DESC: u32 = 0x1d;
pub(crate) const ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES: u32 = 0x1e;
pub(crate) const ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES: u32 = 0x10008;

pub(crate) const ZE_DEVICE_TYPE_GPU: u32 = 1;
pub(crate) const ZE_DEVICE_TYPE_CPU: u32 = 2;
pub(crate) const ZE_DEVICE_TYPE_FPGA: u32 = 3;
pub(crate) const ZE_DEVICE_TYPE_MCA: u32 = 4;
pub(crate) const ZE_DEVICE_TYPE_VPU: u32 = 5;
pub(crate) const ZE_DEVICE_PROPERTY_FLAG_INTEGRATED: u32 = 1 << 0;

pub(crate) const ZE_DEVICE_MODULE_FLAG_FP64: u32 = 1 << 1;
pub(crate) const ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS: u32 = 1 << 2;

pub(crate) const ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE: u32 = 1 << 0;
/// `ZE_COMMAND_QUEUE_FLAG_IN_ORDER`, which Debian's 1.4 header does not have yet: set only
/// for drivers of API 1.9 or later; older ones get barriers between commands instead (see
/// `stream.rs`), since their validation refuses unknown flags.
pub(crate) const ZE_COMMAND_QUEUE_FLAG_IN_ORDER: u32 = 1 << 1;
/// `ZE_COMMAND_LIST_FLAG_IN_ORDER`, set on regular lists under the same rule as the queue flag.
pub(crate) const ZE_COMMAND_LIST_FLAG_IN_ORDER: u32 = 1 << 3;
pub(crate) const ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS: u32 = 2;
pub(crate) const ZE_COMMAND_QUEUE_PRIORITY_NORMAL: u32 = 0;
/// `ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_HIGH`.
pub(crate) const ZE_COMMAND_QUEUE_PRIORITY_HIGH: u32 = 2;

pub(crate) const ZE_EVENT_POOL_FLAG_HOST_VISIBLE: u32 = 1 << 0;
pub(crate) const ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP: u32 = 1 << 2;
pub(crate) const ZE_EVENT_SCOPE_FLAG_HOST: u32 = 1 << 2;

pub(crate) const ZE_MODULE_FORMAT_IL_SPIRV: u32 = 0;

/// `ZE_MAKE_VERSION(1, 9)`: from here on, drivers are known to take in-order immediate
/// command lists.
pub(crate) const ZE_API_VERSION_1_9: u32 = (1 << 16) | 9;

pub(crate) const ZE_MAX_DEVICE_NAME: usize = 256;
pub(crate) const ZE_MAX_EXTENSION_NAME: usize = 256;

/// `ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME`: the extension of
/// `zeCommandListImmediateAppendCommandListsExp`.
pub(crate) const ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME: &str = "ZE_experimental_immediate_command_list_append";
pub(crate) const ZE_SUBGROUPSIZE_COUNT: usize = 8;

/// `ze_device_properties_t`.
#[repr(C)]
pub(crate) struct DeviceProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) device_type: u32,
    pub(crate) vendor_id: u32,
    pub(crate) device_id: u32,
    pub(crate) flags: u32,
    pub(crate) subdevice_id: u32,
    pub(crate) core_clock_rate: u32,
    pub(crate) max_mem_alloc_size: u64,
    pub(crate) max_hardware_contexts: u32,
    pub(crate) max_command_queue_priority: u32,
    pub(crate) num_threads_per_eu: u32,
    pub(crate) physical_eu_simd_width: u32,
    pub(crate) num_eus_per_subslice: u32,
    pub(crate) num_subslices_per_slice: u32,
    pub(crate) num_slices: u32,
    /// Nanoseconds per tick with this `stype` (cycles per second only with the 1.2 stype).
    pub(crate) timer_resolution: u64,
    pub(crate) timestamp_valid_bits: u32,
    pub(crate) kernel_timestamp_valid_bits: u32,
    pub(crate) uuid: [u8; 16],
    pub(crate) name: [c_char; ZE_MAX_DEVICE_NAME],
}

/// `ze_device_compute_properties_t`.
#[repr(C)]
pub(crate) struct DeviceComputeProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) max_total_group_size: u32,
    pub(crate) max_group_size: [u32; 3],
    pub(crate) max_group_count: [u32; 3],
    pub(crate) max_shared_local_memory: u32,
    pub(crate) num_sub_group_sizes: u32,
    pub(crate) sub_group_sizes: [u32; ZE_SUBGROUPSIZE_COUNT],
}

/// `ze_device_memory_properties_t`.
#[repr(C)]
pub(crate) struct DeviceMemoryProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) flags: u32,
    pub(crate) max_clock_rate: u32,
    pub(crate) max_bus_width: u32,
    pub(crate) total_size: u64,
    pub(crate) name: [c_char; ZE_MAX_DEVICE_NAME],
}

/// `ze_device_module_properties_t`.
#[repr(C)]
pub(crate) struct DeviceModuleProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) spirv_version_supported: u32,
    pub(crate) flags: u32,
    pub(crate) fp16_flags: u32,
    pub(crate) fp32_flags: u32,
    pub(crate) fp64_flags: u32,
    pub(crate) max_arguments_size: u32,
    pub(crate) printf_buffer_size: u32,
    pub(crate) native_kernel_supported: [u8; 16],
}

/// `ze_command_queue_group_properties_t`.
#[repr(C)]
pub(crate) struct CommandQueueGroupProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) flags: u32,
    pub(crate) max_memory_fill_pattern_size: usize,
    pub(crate) num_queues: u32,
}

/// `ze_pci_ext_properties_t` (with `ze_pci_address_ext_t` and `ze_pci_speed_ext_t` inline).
#[repr(C)]
pub(crate) struct PciExtProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) domain: u32,
    pub(crate) bus: u32,
    pub(crate) device: u32,
    pub(crate) function: u32,
    pub(crate) gen_version: i32,
    pub(crate) width: i32,
    pub(crate) max_bandwidth: i64,
}

/// `ze_context_desc_t`.
#[repr(C)]
pub(crate) struct ContextDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) flags: u32,
}

/// `ze_device_mem_alloc_desc_t`.
#[repr(C)]
pub(crate) struct DeviceMemAllocDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) flags: u32,
    pub(crate) ordinal: u32,
}

/// `ze_host_mem_alloc_desc_t`.
#[repr(C)]
pub(crate) struct HostMemAllocDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) flags: u32,
}

/// `ze_command_queue_desc_t`.
#[repr(C)]
pub(crate) struct CommandQueueDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) ordinal: u32,
    pub(crate) index: u32,
    pub(crate) flags: u32,
    pub(crate) mode: u32,
    pub(crate) priority: u32,
}

/// `ze_command_list_desc_t`.
#[repr(C)]
pub(crate) struct CommandListDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) command_queue_group_ordinal: u32,
    pub(crate) flags: u32,
}

/// `ze_driver_extension_properties_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DriverExtensionProperties {
    pub(crate) name: [c_char; ZE_MAX_EXTENSION_NAME],
    pub(crate) version: u32,
}

/// `ze_event_pool_desc_t`.
#[repr(C)]
pub(crate) struct EventPoolDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) flags: u32,
    pub(crate) count: u32,
}

/// `ze_event_desc_t`.
#[repr(C)]
pub(crate) struct EventDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) index: u32,
    pub(crate) signal: u32,
    pub(crate) wait: u32,
}

/// `ze_module_desc_t`.
#[repr(C)]
pub(crate) struct ModuleDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) format: u32,
    pub(crate) input_size: usize,
    pub(crate) p_input_module: *const u8,
    pub(crate) p_build_flags: *const c_char,
    pub(crate) p_constants: *const c_void,
}

/// `ze_kernel_desc_t`.
#[repr(C)]
pub(crate) struct KernelDesc {
    pub(crate) stype: u32,
    pub(crate) p_next: *const c_void,
    pub(crate) flags: u32,
    pub(crate) p_kernel_name: *const c_char,
}

/// `ze_kernel_properties_t`.
#[repr(C)]
pub(crate) struct KernelProperties {
    pub(crate) stype: u32,
    pub(crate) p_next: *mut c_void,
    pub(crate) num_kernel_args: u32,
    pub(crate) required_group_size: [u32; 3],
    pub(crate) required_num_sub_groups: u32,
    pub(crate) required_subgroup_size: u32,
    pub(crate) max_subgroup_size: u32,
    pub(crate) max_num_subgroups: u32,
    pub(crate) local_mem_size: u32,
    pub(crate) private_mem_size: u32,
    pub(crate) spill_mem_size: u32,
    pub(crate) kernel_uuid: [u8; 16],
    pub(crate) module_uuid: [u8; 16],
}

/// `ze_group_count_t`.
#[repr(C)]
pub(crate) struct GroupCount {
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) z: u32,
}

/// `ze_kernel_timestamp_data_t`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct KernelTimestampData {
    pub(crate) kernel_start: u64,
    pub(crate) kernel_end: u64,
}

/// `ze_kernel_timestamp_result_t`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct KernelTimestampResult {
    pub(crate) global: KernelTimestampData,
    pub(crate) context: KernelTimestampData,
}

/// Zeroed plain-data structures with their `stype` set, ready for a query.
macro_rules! zeroed_with_stype {
    ($($type:ident = $stype:ident;)*) => {
        $(impl $type {
            pub(crate) fn new() -> $type {
                // SAFETY: a `repr(C)` struct of integers, arrays of them and raw pointers, for
                // which all-zero bytes are a valid value.
                let mut value: $type = unsafe { std::mem::zeroed() };
                value.stype = $stype;
                value
            }
        })*
    };
}

zeroed_with_stype! {
    DeviceProperties = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    DeviceComputeProperties = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
    DeviceMemoryProperties = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    DeviceModuleProperties = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
    CommandQueueGroupProperties = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
    PciExtProperties = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
    KernelProperties = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES;
}

/// The loader's file name.
pub(crate) const LOADER_LIBRARY: &str = "libze_loader.so.1";

xhal_backend::function_table! {
    /// The Level Zero entry points, resolved from the loader (kept loaded for the life of
    /// the process: the loader unloads its drivers when it goes, which is not safe while
    /// anything still runs).
    pub(crate) struct Api: extern "C";
    required {
        init = "zeInit": fn(u32) -> ZeResult;
        driver_get = "zeDriverGet": fn(*mut u32, *mut DriverHandle) -> ZeResult;
        driver_get_api_version = "zeDriverGetApiVersion": fn(DriverHandle, *mut u32) -> ZeResult;
        driver_get_extension_properties = "zeDriverGetExtensionProperties":
            fn(DriverHandle, *mut u32, *mut DriverExtensionProperties) -> ZeResult;
        device_get = "zeDeviceGet": fn(DriverHandle, *mut u32, *mut DeviceHandle) -> ZeResult;
        device_get_properties = "zeDeviceGetProperties": fn(DeviceHandle, *mut DeviceProperties) -> ZeResult;
        device_get_compute_properties = "zeDeviceGetComputeProperties":
            fn(DeviceHandle, *mut DeviceComputeProperties) -> ZeResult;
        device_get_memory_properties = "zeDeviceGetMemoryProperties":
            fn(DeviceHandle, *mut u32, *mut DeviceMemoryProperties) -> ZeResult;
        device_get_module_properties = "zeDeviceGetModuleProperties":
            fn(DeviceHandle, *mut DeviceModuleProperties) -> ZeResult;
        device_get_command_queue_group_properties = "zeDeviceGetCommandQueueGroupProperties":
            fn(DeviceHandle, *mut u32, *mut CommandQueueGroupProperties) -> ZeResult;
        context_create = "zeContextCreate": fn(DriverHandle, *const ContextDesc, *mut ContextHandle) -> ZeResult;
        context_destroy = "zeContextDestroy": fn(ContextHandle) -> ZeResult;
        mem_alloc_device = "zeMemAllocDevice":
            fn(ContextHandle, *const DeviceMemAllocDesc, usize, usize, DeviceHandle, *mut *mut c_void) -> ZeResult;
        mem_alloc_host = "zeMemAllocHost":
            fn(ContextHandle, *const HostMemAllocDesc, usize, usize, *mut *mut c_void) -> ZeResult;
        mem_free = "zeMemFree": fn(ContextHandle, *mut c_void) -> ZeResult;
        command_list_create_immediate = "zeCommandListCreateImmediate":
            fn(ContextHandle, DeviceHandle, *const CommandQueueDesc, *mut CommandListHandle) -> ZeResult;
        command_list_create = "zeCommandListCreate":
            fn(ContextHandle, DeviceHandle, *const CommandListDesc, *mut CommandListHandle) -> ZeResult;
        command_list_close = "zeCommandListClose": fn(CommandListHandle) -> ZeResult;
        command_list_reset = "zeCommandListReset": fn(CommandListHandle) -> ZeResult;
        command_list_destroy = "zeCommandListDestroy": fn(CommandListHandle) -> ZeResult;
        command_list_append_memory_copy = "zeCommandListAppendMemoryCopy":
            fn(CommandListHandle, *mut c_void, *const c_void, usize, EventHandle, u32, *mut EventHandle) -> ZeResult;
        command_list_append_memory_fill = "zeCommandListAppendMemoryFill":
            fn(
                CommandListHandle,
                *mut c_void,
                *const c_void,
                usize,
                usize,
                EventHandle,
                u32,
                *mut EventHandle,
            ) -> ZeResult;
        command_list_append_barrier = "zeCommandListAppendBarrier":
            fn(CommandListHandle, EventHandle, u32, *mut EventHandle) -> ZeResult;
        command_list_append_launch_kernel = "zeCommandListAppendLaunchKernel":
            fn(CommandListHandle, KernelHandle, *const GroupCount, EventHandle, u32, *mut EventHandle) -> ZeResult;
        command_list_append_wait_on_events = "zeCommandListAppendWaitOnEvents":
            fn(CommandListHandle, u32, *mut EventHandle) -> ZeResult;
        event_pool_create = "zeEventPoolCreate":
            fn(ContextHandle, *const EventPoolDesc, u32, *mut DeviceHandle, *mut EventPoolHandle) -> ZeResult;
        event_pool_destroy = "zeEventPoolDestroy": fn(EventPoolHandle) -> ZeResult;
        event_create = "zeEventCreate": fn(EventPoolHandle, *const EventDesc, *mut EventHandle) -> ZeResult;
        event_destroy = "zeEventDestroy": fn(EventHandle) -> ZeResult;
        event_host_synchronize = "zeEventHostSynchronize": fn(EventHandle, u64) -> ZeResult;
        event_host_reset = "zeEventHostReset": fn(EventHandle) -> ZeResult;
        event_query_status = "zeEventQueryStatus": fn(EventHandle) -> ZeResult;
        event_query_kernel_timestamp = "zeEventQueryKernelTimestamp":
            fn(EventHandle, *mut KernelTimestampResult) -> ZeResult;
        module_create = "zeModuleCreate":
            fn(ContextHandle, DeviceHandle, *const ModuleDesc, *mut ModuleHandle, *mut BuildLogHandle) -> ZeResult;
        module_destroy = "zeModuleDestroy": fn(ModuleHandle) -> ZeResult;
        module_build_log_get_string = "zeModuleBuildLogGetString":
            fn(BuildLogHandle, *mut usize, *mut c_char) -> ZeResult;
        module_build_log_destroy = "zeModuleBuildLogDestroy": fn(BuildLogHandle) -> ZeResult;
        module_get_kernel_names = "zeModuleGetKernelNames": fn(ModuleHandle, *mut u32, *mut *const c_char) -> ZeResult;
        kernel_create = "zeKernelCreate": fn(ModuleHandle, *const KernelDesc, *mut KernelHandle) -> ZeResult;
        kernel_destroy = "zeKernelDestroy": fn(KernelHandle) -> ZeResult;
        kernel_set_group_size = "zeKernelSetGroupSize": fn(KernelHandle, u32, u32, u32) -> ZeResult;
        kernel_set_argument_value = "zeKernelSetArgumentValue": fn(KernelHandle, u32, usize, *const c_void) -> ZeResult;
        kernel_get_properties = "zeKernelGetProperties": fn(KernelHandle, *mut KernelProperties) -> ZeResult;
    }
    optional {
        /// `zeCommandListHostSynchronize`, where the loader exports it (API 1.6).
        command_list_host_synchronize = "zeCommandListHostSynchronize": fn(CommandListHandle, u64) -> ZeResult;
        /// `zeDevicePciGetPropertiesExt`, where the loader exports it.
        device_pci_get_properties_ext = "zeDevicePciGetPropertiesExt":
            fn(DeviceHandle, *mut PciExtProperties) -> ZeResult;
        /// `zeDeviceGetGlobalTimestamps`, where the loader exports it (API 1.1).
        device_get_global_timestamps = "zeDeviceGetGlobalTimestamps": fn(DeviceHandle, *mut u64, *mut u64) -> ZeResult;
        /// `zeDriverGetLastErrorDescription`, where the loader exports it (API 1.6).
        driver_get_last_error_description = "zeDriverGetLastErrorDescription":
            fn(DriverHandle, *mut *const c_char) -> ZeResult;
        /// `zeCommandListImmediateAppendCommandListsExp`, where the loader exports it (API 1.9):
        /// usable where the driver also lists `ZE_experimental_immediate_command_list_append`.
        command_list_immediate_append_command_lists_exp = "zeCommandListImmediateAppendCommandListsExp":
            fn(CommandListHandle, u32, *mut CommandListHandle, EventHandle, u32, *mut EventHandle) -> ZeResult;
    }
}

impl Api {
    /// Opens `library` and resolves every entry point.
    pub(crate) fn load(library: &str) -> Result<Api> {
        // SAFETY: loading the Level Zero loader runs its initialisers, as every Level Zero
        // program does; each entry point is declared with the signature `ze_api.h` gives it.
        unsafe { Api::open(library) }.map_err(|error| {
            let message = match error {
                LoadError::Open { library, error } => format!(
                    "the Level Zero loader {library} could not be loaded ({error}); install the loader (libze1) and \
                     a Level Zero driver (intel-level-zero-gpu, or the vendor's)"
                ),
                missing @ LoadError::MissingSymbol { .. } => {
                    format!("the Level Zero loader {missing}; it is not a Level Zero 1.x loader")
                }
            };
            Error::new(ErrorKind::DriverUnavailable, message)
        })
    }
}

/// The name of a `ze_result_t`, as in `ze_api.h`.
pub(crate) fn result_name(code: ZeResult) -> &'static str {
    match code {
        0 => "ZE_RESULT_SUCCESS",
        1 => "ZE_RESULT_NOT_READY",
        0x7000_0001 => "ZE_RESULT_ERROR_DEVICE_LOST",
        0x7000_0002 => "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        0x7000_0003 => "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
        0x7000_0004 => "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE",
        0x7000_0005 => "ZE_RESULT_ERROR_MODULE_LINK_FAILURE",
        0x7000_0006 => "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET",
        0x7000_0007 => "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE",
        0x7ff0_0001 => "ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX",
        0x7ff0_0002 => "ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE",
        0x7ff0_0003 => "ZE_RESULT_EXP_ERROR_REMOTE_DEVICE",
        0x7001_0000 => "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS",
        0x7001_0001 => "ZE_RESULT_ERROR_NOT_AVAILABLE",
        0x7002_0000 => "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE",
        0x7002_0001 => "ZE_RESULT_WARNING_DROPPED_DATA",
        0x7800_0001 => "ZE_RESULT_ERROR_UNINITIALIZED",
        0x7800_0002 => "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
        0x7800_0003 => "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
        0x7800_0004 => "ZE_RESULT_ERROR_INVALID_ARGUMENT",
        0x7800_0005 => "ZE_RESULT_ERROR_INVALID_NULL_HANDLE",
        0x7800_0006 => "ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE",
        0x7800_0007 => "ZE_RESULT_ERROR_INVALID_NULL_POINTER",
        0x7800_0008 => "ZE_RESULT_ERROR_INVALID_SIZE",
        0x7800_0009 => "ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
        0x7800_000a => "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT",
        0x7800_000b => "ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT",
        0x7800_000c => "ZE_RESULT_ERROR_INVALID_ENUMERATION",
        0x7800_000d => "ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION",
        0x7800_000e => "ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT",
        0x7800_000f => "ZE_RESULT_ERROR_INVALID_NATIVE_BINARY",
        0x7800_0010 => "ZE_RESULT_ERROR_INVALID_GLOBAL_NAME",
        0x7800_0011 => "ZE_RESULT_ERROR_INVALID_KERNEL_NAME",
        0x7800_0012 => "ZE_RESULT_ERROR_INVALID_FUNCTION_NAME",
        0x7800_0013 => "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION",
        0x7800_0014 => "ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION",
        0x7800_0015 => "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX",
        0x7800_0016 => "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE",
        0x7800_0017 => "ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE",
        0x7800_0018 => "ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED",
        0x7800_0019 => "ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE",
        0x7800_001a => "ZE_RESULT_ERROR_OVERLAPPING_REGIONS",
        0x7800_001b => "ZE_RESULT_WARNING_ACTION_REQUIRED",
        0x7fff_fffe => "ZE_RESULT_ERROR_UNKNOWN",
        _ => "a ze_result_t this backend does not know",
    }
}

/// An xhal error for `code`, returned by `call` while `doing` something: the kind follows
/// the code, the message names the call, the result and what was being done.
pub(crate) fn ze_error(call: &str, doing: impl std::fmt::Display, code: ZeResult) -> Error {
    let kind = match code {
        0x7000_0002 | 0x7000_0003 => ErrorKind::OutOfMemory,
        0x7000_0001 | 0x7000_0006 | 0x7000_0007 => ErrorKind::DeviceLost,
        0x7800_0002 | 0x7800_0003 | 0x7800_0009 | 0x7800_000a | 0x7800_000d | 0x7800_000e => ErrorKind::Unsupported,
        0x7000_0004
        | 0x7000_0005
        | 0x7800_0004
        | 0x7800_0008
        | 0x7800_000c
        | 0x7800_000f
        | 0x7800_0011
        | 0x7800_0013..=0x7800_0017
        | 0x7800_001a => ErrorKind::InvalidArgument,
        0x7800_0001 => ErrorKind::DriverUnavailable,
        _ => ErrorKind::Internal,
    };
    Error::new(
        kind,
        format!("{call} failed while {doing}: {} ({code:#x})", result_name(code)),
    )
}

/// Whether `code`, returned by an append to an immediate command list, says that the device or
/// the work failed, rather than that the command was refused. An immediate list submits what
/// is appended as it is appended, so the append reports what the submission met: a lost
/// device, one that must be reset, or device memory the submission could not get (making its
/// allocations resident, its scratch space). The stream's work may be gone or half done then,
/// so these stick to it. The other results refuse the command before it reaches the device:
/// validation (a bad argument, size, handle, enumeration), an unsupported feature, host memory
/// the driver could not get to build the command. Nothing was enqueued, and the stream goes on.
pub(crate) fn is_execution_failure(code: ZeResult) -> bool {
    matches!(
        code,
        ZE_RESULT_ERROR_DEVICE_LOST | ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET | ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY
    )
}

/// `Ok` for `ZE_RESULT_SUCCESS`, else [`ze_error`].
pub(crate) fn check(code: ZeResult, call: &str, doing: impl FnOnce() -> String) -> Result<()> {
    if code == ZE_RESULT_SUCCESS {
        Ok(())
    } else {
        Err(ze_error(call, doing(), code))
    }
}

/// A fixed-size C string field, without its terminating NUL.
pub(crate) fn c_string(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Sizes and offsets from `ze_api.h` on LP64: every struct starts with a 4-byte `stype`
    /// and, 8-aligned, the `pNext` pointer.
    #[test]
    fn structures_match_the_header_layout() {
        assert_eq!(offset_of!(DeviceProperties, p_next), 8);
        assert_eq!(offset_of!(DeviceProperties, device_type), 16);
        assert_eq!(offset_of!(DeviceProperties, max_mem_alloc_size), 40);
        assert_eq!(offset_of!(DeviceProperties, timer_resolution), 80);
        assert_eq!(offset_of!(DeviceProperties, uuid), 96);
        assert_eq!(offset_of!(DeviceProperties, name), 112);
        assert_eq!(size_of::<DeviceProperties>(), 368);
        assert_eq!(offset_of!(DeviceComputeProperties, max_total_group_size), 16);
        assert_eq!(offset_of!(DeviceComputeProperties, max_shared_local_memory), 44);
        assert_eq!(size_of::<DeviceComputeProperties>(), 88);
        assert_eq!(offset_of!(DeviceMemoryProperties, total_size), 32);
        assert_eq!(size_of::<DeviceMemoryProperties>(), 296);
        assert_eq!(offset_of!(DeviceModuleProperties, max_arguments_size), 36);
        assert_eq!(size_of::<DeviceModuleProperties>(), 64);
        assert_eq!(
            offset_of!(CommandQueueGroupProperties, max_memory_fill_pattern_size),
            24
        );
        assert_eq!(size_of::<CommandQueueGroupProperties>(), 40);
        assert_eq!(offset_of!(PciExtProperties, domain), 16);
        assert_eq!(offset_of!(PciExtProperties, max_bandwidth), 40);
        assert_eq!(size_of::<PciExtProperties>(), 48);
        assert_eq!(size_of::<ContextDesc>(), 24);
        assert_eq!(size_of::<DeviceMemAllocDesc>(), 24);
        assert_eq!(size_of::<HostMemAllocDesc>(), 24);
        assert_eq!(offset_of!(CommandQueueDesc, priority), 32);
        assert_eq!(size_of::<CommandQueueDesc>(), 40);
        assert_eq!(offset_of!(CommandListDesc, command_queue_group_ordinal), 16);
        assert_eq!(size_of::<CommandListDesc>(), 24);
        assert_eq!(offset_of!(DriverExtensionProperties, version), 256);
        assert_eq!(size_of::<DriverExtensionProperties>(), 260);
        assert_eq!(size_of::<EventPoolDesc>(), 24);
        assert_eq!(size_of::<EventDesc>(), 32);
        assert_eq!(offset_of!(ModuleDesc, input_size), 24);
        assert_eq!(offset_of!(ModuleDesc, p_constants), 48);
        assert_eq!(size_of::<ModuleDesc>(), 56);
        assert_eq!(offset_of!(KernelDesc, p_kernel_name), 24);
        assert_eq!(size_of::<KernelDesc>(), 32);
        assert_eq!(offset_of!(KernelProperties, spill_mem_size), 56);
        assert_eq!(size_of::<KernelProperties>(), 96);
        assert_eq!(size_of::<GroupCount>(), 12);
        assert_eq!(size_of::<KernelTimestampResult>(), 32);
    }

    #[test]
    fn only_failures_of_the_device_or_the_work_stick() {
        for code in [0x7000_0001, 0x7000_0003, 0x7000_0006] {
            assert!(is_execution_failure(code), "{}", result_name(code));
        }
        // Refusals: host memory for the command, validation, an unsupported feature.
        for code in [
            0,
            0x7000_0002,
            0x7800_0003,
            0x7800_0004,
            0x7800_0005,
            0x7800_0008,
            0x7800_000c,
        ] {
            assert!(!is_execution_failure(code), "{}", result_name(code));
        }
    }

    #[test]
    fn results_keep_their_names_and_kinds() {
        let error = ze_error("zeMemAllocDevice", "allocating 16 bytes", 0x7000_0003);
        assert_eq!(error.kind(), ErrorKind::OutOfMemory);
        assert_eq!(
            error.message(),
            "zeMemAllocDevice failed while allocating 16 bytes: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003)"
        );
        assert_eq!(
            ze_error("zeInit", "x", 0x7800_0001).kind(),
            ErrorKind::DriverUnavailable
        );
        assert_eq!(ze_error("x", "y", 0x7000_0001).kind(), ErrorKind::DeviceLost);
        assert_eq!(ze_error("x", "y", 0x7000_0004).kind(), ErrorKind::InvalidArgument);
        assert_eq!(ze_error("x", "y", 0x7800_0003).kind(), ErrorKind::Unsupported);
        let unknown = ze_error("x", "y", 0x1234);
        assert_eq!(unknown.kind(), ErrorKind::Internal);
        assert!(unknown.message().contains("0x1234"), "{unknown}");
        assert!(check(ZE_RESULT_SUCCESS, "zeInit", || unreachable!()).is_ok());
    }

    /// Every result the header names has its name here (values from `ze_api.h` 1.8).
    #[test]
    fn every_header_result_is_named() {
        for code in [
            0u32,
            1,
            0x7000_0001,
            0x7000_0007,
            0x7001_0000,
            0x7002_0001,
            0x7800_0001,
            0x7800_001b,
            0x7fff_fffe,
        ] {
            assert!(result_name(code).starts_with("ZE_RESULT_"), "{code:#x}");
        }
        assert_eq!(result_name(0x7800_0011), "ZE_RESULT_ERROR_INVALID_KERNEL_NAME");
    }

    #[test]
    fn c_strings_stop_at_the_terminator() {
        let mut field = [0 as c_char; 8];
        for (slot, byte) in field.iter_mut().zip(b"Arc A770") {
            *slot = *byte as c_char;
        }
        assert_eq!(c_string(&field), "Arc A770");
        field[3] = 0;
        assert_eq!(c_string(&field), "Arc");
    }
}
