//! The Vulkan loader, the instance, the validation messenger, and what each physical device
//! is and can do.

use ash::vk;
use parking_lot::Mutex;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, LibrarySource, Result};

/// Set to `1` to enable `VK_LAYER_KHRONOS_validation` with a debug-utils messenger.
pub const VALIDATION_VARIABLE: &str = "XHAL_VULKAN_VALIDATION";

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Messages from the validation layer, waiting to fail the next call that looks.
#[derive(Debug, Default)]
pub(crate) struct ValidationLog {
    /// Set with the first message, so that the common case (none) takes no lock.
    any: AtomicBool,
    messages: Mutex<Vec<String>>,
}

impl ValidationLog {
    /// An error carrying every message logged since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<Error> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let mut messages = self.messages.lock();
        self.any.store(false, Ordering::Release);
        if messages.is_empty() {
            return None;
        }
        let joined = messages.join("\n");
        messages.clear();
        Some(Error::internal(format!(
            "the Vulkan validation layer reported: {joined}"
        )))
    }
}

/// The callback the validation layer calls for every message.
unsafe extern "system" fn validation_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes a valid callback-data struct (or null) for the duration of the
    // call; `user_data` is the `ValidationLog` the instance keeps alive longer than the messenger.
    let (message, log) = unsafe {
        let message = data
            .as_ref()
            .and_then(|data| data.message_as_c_str())
            .map(|text| text.to_string_lossy().into_owned())
            .unwrap_or_else(|| "(no message)".to_string());
        (message, (user_data as *const ValidationLog).as_ref())
    };
    tracing::error!(?severity, %message, "Vulkan validation message");
    if let Some(log) = log {
        log.messages.lock().push(message);
        log.any.store(true, Ordering::Release);
    }
    vk::FALSE
}

/// What a physical device offers, beyond its [`DeviceInfo`].
#[derive(Debug, Clone)]
pub(crate) struct Adapter {
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) info: DeviceInfo,
    pub(crate) queue_family: u32,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    pub(crate) max_storage_buffer_range: u64,
    pub(crate) max_uniform_buffer_range: u64,
    /// Storage-buffer descriptors one kernel may bind (per stage and per set).
    pub(crate) max_storage_buffers: u32,
    /// Uniform-buffer descriptors one kernel may bind (per stage and per set).
    pub(crate) max_uniform_buffers: u32,
    pub(crate) max_memory_allocation_size: u64,
    pub(crate) timestamp_period: f64,
    pub(crate) timestamp_valid_bits: u32,
    /// Whether `VK_EXT_calibrated_timestamps` reads the device's timestamps together with
    /// `CLOCK_MONOTONIC`: the device clock the ABI's `device_clock` reports.
    pub(crate) calibrated_timestamps: bool,
    pub(crate) enable: EnabledFeatures,
    /// Bytes this backend holds on the device, for the free-memory figure.
    pub(crate) allocated: Arc<AtomicU64>,
}

impl Adapter {
    /// The device's description, with free memory as it stands now: total less what this
    /// backend holds.
    pub(crate) fn info_now(&self) -> DeviceInfo {
        let mut info = self.info.clone();
        info.free_memory = info.total_memory.saturating_sub(self.allocated.load(Ordering::Relaxed));
        info
    }
}

/// Optional device features to switch on at device creation, because a claimed feature needs them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EnabledFeatures {
    pub(crate) float64: bool,
    pub(crate) int64: bool,
    pub(crate) int16: bool,
    pub(crate) float16: bool,
    pub(crate) storage_buffer_16bit: bool,
    pub(crate) uniform_and_storage_buffer_16bit: bool,
    pub(crate) buffer_int64_atomics: bool,
    pub(crate) shared_int64_atomics: bool,
    /// Native zero-initialisation of workgroup memory (Vulkan 1.3).
    pub(crate) zero_initialize_workgroup_memory: bool,
}

/// The loaded library, the instance and the usable devices.
pub(crate) struct Instance {
    pub(crate) entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub(crate) validation: Arc<ValidationLog>,
    pub(crate) adapters: Vec<Adapter>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every object made from the instance holds an `Arc<Instance>`, so none is left.
        unsafe {
            if let Some((loader, messenger)) = self.messenger.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

fn driver_unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::DriverUnavailable, message)
}

pub(crate) fn vk_error(what: &str, result: vk::Result) -> Error {
    match result {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
            Error::out_of_memory(format!("{what}: {result}"))
        }
        vk::Result::ERROR_DEVICE_LOST => Error::new(ErrorKind::DeviceLost, format!("{what}: {result}")),
        _ => Error::internal(format!("{what}: {result}")),
    }
}

impl Instance {
    /// Opens the loader and creates an instance, with validation when `validation` is set.
    pub(crate) fn create(source: &LibrarySource, validation: bool) -> Result<Instance> {
        // SAFETY: loading libvulkan runs its initialisers, which is what every Vulkan program does.
        let loaded = unsafe {
            match source {
                LibrarySource::System => ash::Entry::load(),
                LibrarySource::Path(path) => ash::Entry::load_from(path),
            }
        };
        let entry = loaded.map_err(|error| {
            let library = match source {
                LibrarySource::System => "libvulkan.so.1".to_string(),
                LibrarySource::Path(path) => path.display().to_string(),
            };
            driver_unavailable(format!(
                "the Vulkan loader {library} could not be loaded ({error}); install libvulkan1 and a Vulkan driver"
            ))
        })?;
        // SAFETY: a plain query of the loaded library.
        let instance_version = unsafe { entry.try_enumerate_instance_version() }
            .ok()
            .flatten()
            .unwrap_or(vk::API_VERSION_1_0);
        if instance_version < vk::API_VERSION_1_2 {
            return Err(driver_unavailable(format!(
                "the Vulkan loader supports Vulkan {}, but xhal needs 1.2 (timeline semaphores)",
                version_string(instance_version)
            )));
        }
        let mut layers = Vec::new();
        let mut extensions = Vec::new();
        if validation {
            // SAFETY: a plain query of the loaded library.
            let available = unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(|result| vk_error("listing Vulkan layers", result))?;
            if !available
                .iter()
                .any(|layer| layer.layer_name_as_c_str() == Ok(VALIDATION_LAYER))
            {
                return Err(driver_unavailable(format!(
                    "{VALIDATION_VARIABLE}=1 asks for VK_LAYER_KHRONOS_validation, which is not installed"
                )));
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let api_version = instance_version.min(vk::API_VERSION_1_3);
        let application = vk::ApplicationInfo::default()
            .application_name(c"xhal")
            .engine_name(c"xhal-vulkan")
            .api_version(api_version);
        let create_info = vk::InstanceCreateInfo::default()
            .application_info(&application)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        // SAFETY: the create info and everything it points to live until the call returns.
        let instance = unsafe { entry.create_instance(&create_info, None) }.map_err(|result| match result {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
                driver_unavailable("no Vulkan driver (ICD) is installed, or none supports this instance".to_string())
            }
            other => driver_unavailable(format!("vkCreateInstance failed: {other}")),
        })?;
        let validation_log = Arc::new(ValidationLog::default());
        let mut this = Instance {
            entry,
            instance,
            messenger: None,
            validation: Arc::clone(&validation_log),
            adapters: Vec::new(),
        };
        if validation {
            let loader = ash::ext::debug_utils::Instance::new(&this.entry, &this.instance);
            let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(validation_callback))
                .user_data(Arc::as_ptr(&validation_log) as *mut c_void);
            // SAFETY: the log outlives the messenger: `Instance::drop` destroys the messenger
            // before the `Arc` field is dropped.
            let messenger = unsafe { loader.create_debug_utils_messenger(&messenger_info, None) }
                .map_err(|result| vk_error("creating the validation messenger", result))?;
            this.messenger = Some((loader, messenger));
        }
        // SAFETY: a plain query of a live instance.
        let physical_devices = unsafe { this.instance.enumerate_physical_devices() }
            .map_err(|result| driver_unavailable(format!("vkEnumeratePhysicalDevices failed: {result}")))?;
        let mut skipped = Vec::new();
        for physical in physical_devices {
            match this.describe(physical) {
                Ok(adapter) => this.adapters.push(adapter),
                Err(reason) => {
                    tracing::info!(%reason, "skipped a Vulkan physical device");
                    skipped.push(reason);
                }
            }
        }
        if this.adapters.is_empty() {
            let reason = if skipped.is_empty() {
                "the Vulkan loader found no physical device (no driver/ICD installed?)".to_string()
            } else {
                format!("no usable Vulkan device: {}", skipped.join("; "))
            };
            return Err(driver_unavailable(reason));
        }
        Ok(this)
    }

    /// Describes a physical device, or says why it cannot serve xhal.
    fn describe(&self, physical: vk::PhysicalDevice) -> std::result::Result<Adapter, String> {
        let instance = &self.instance;
        // SAFETY: plain queries of a physical device of this live instance.
        let properties = unsafe { instance.get_physical_device_properties(physical) };
        let name = properties
            .device_name_as_c_str()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unnamed Vulkan device".to_string());
        if properties.api_version < vk::API_VERSION_1_2 {
            return Err(format!(
                "{name} supports Vulkan {}, xhal needs 1.2",
                version_string(properties.api_version)
            ));
        }
        // SAFETY: as above.
        let extensions = unsafe { instance.enumerate_device_extension_properties(physical) }
            .map_err(|result| format!("{name}: listing extensions failed: {result}"))?;
        let has_extension = |wanted: &CStr| {
            extensions
                .iter()
                .any(|extension| extension.extension_name_as_c_str() == Ok(wanted))
        };
        let has_pci_bus_info = has_extension(ash::ext::pci_bus_info::NAME);
        let calibrated_timestamps = has_extension(ash::ext::calibrated_timestamps::NAME) && {
            let loader = ash::ext::calibrated_timestamps::Instance::new(&self.entry, instance);
            // SAFETY: the device lists the extension; a plain query of a live physical device.
            let domains =
                unsafe { loader.get_physical_device_calibrateable_time_domains(physical) }.unwrap_or_default();
            domains.contains(&vk::TimeDomainEXT::DEVICE) && domains.contains(&vk::TimeDomainEXT::CLOCK_MONOTONIC)
        };

        let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut pci = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
        let mut properties2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut maintenance3)
            .push_next(&mut subgroup)
            .push_next(&mut driver)
            .push_next(&mut id);
        if has_pci_bus_info {
            properties2 = properties2.push_next(&mut pci);
        }
        // SAFETY: every struct chained is core 1.2 or an extension the device lists.
        unsafe { instance.get_physical_device_properties2(physical, &mut properties2) };
        let limits = properties2.properties.limits;

        let mut features11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut features12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut features13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut features11)
            .push_next(&mut features12);
        let vulkan13 = properties.api_version >= vk::API_VERSION_1_3;
        if vulkan13 {
            features2 = features2.push_next(&mut features13);
        }
        // SAFETY: core structs of the device's version.
        unsafe { instance.get_physical_device_features2(physical, &mut features2) };
        let core_features = features2.features;
        if features12.timeline_semaphore == vk::FALSE {
            return Err(format!("{name} has no timeline semaphores, which xhal streams need"));
        }

        // SAFETY: plain queries, as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let Some((queue_family, family)) = families
            .iter()
            .enumerate()
            .find(|(_, family)| family.queue_flags.contains(vk::QueueFlags::COMPUTE))
        else {
            return Err(format!("{name} has no compute queue"));
        };
        // SAFETY: as above.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let heaps = &memory.memory_heaps[..memory.memory_heap_count as usize];
        let device_local: Vec<u64> = heaps
            .iter()
            .filter(|heap| heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|heap| heap.size)
            .collect();
        let heap_sizes = if device_local.is_empty() {
            heaps.iter().map(|heap| heap.size).collect()
        } else {
            device_local
        };
        let total_memory: u64 = heap_sizes.iter().sum();
        let largest_heap = heap_sizes.iter().copied().max().unwrap_or(0);
        let max_memory_allocation_size = maintenance3.max_memory_allocation_size.min(largest_heap);

        let enable = EnabledFeatures {
            float64: core_features.shader_float64 == vk::TRUE,
            int64: core_features.shader_int64 == vk::TRUE,
            int16: core_features.shader_int16 == vk::TRUE,
            float16: features12.shader_float16 == vk::TRUE,
            storage_buffer_16bit: features11.storage_buffer16_bit_access == vk::TRUE,
            uniform_and_storage_buffer_16bit: features11.uniform_and_storage_buffer16_bit_access == vk::TRUE,
            buffer_int64_atomics: features12.shader_buffer_int64_atomics == vk::TRUE,
            shared_int64_atomics: features12.shader_shared_int64_atomics == vk::TRUE,
            zero_initialize_workgroup_memory: vulkan13
                && features13.shader_zero_initialize_workgroup_memory == vk::TRUE,
        };
        // `var<uniform>` bindings are bound as uniform-buffer descriptors (see the module
        // and stream code), which every Vulkan device has.
        let mut features = Features::ATOMICS_32 | Features::UNIFORM_BUFFERS;
        if enable.float64 {
            features = features | Features::F64;
        }
        if enable.int64 {
            features = features | Features::I64;
        }
        if enable.float16 && enable.storage_buffer_16bit {
            features = features | Features::F16;
        }
        if enable.int64 && enable.buffer_int64_atomics && enable.shared_int64_atomics {
            features = features | Features::ATOMICS_64;
        }
        if limits.timestamp_compute_and_graphics == vk::TRUE && family.timestamp_valid_bits > 0 {
            features = features | Features::TIMESTAMPS;
        }
        // The device's storage buffers are host-mappable when the memory type they come from
        // (the first device-local one, as the opened device picks it) is host-visible and
        // coherent: lavapipe's and integrated GPUs' memory.
        let mappable = vk::MemoryPropertyFlags::DEVICE_LOCAL
            | vk::MemoryPropertyFlags::HOST_VISIBLE
            | vk::MemoryPropertyFlags::HOST_COHERENT;
        if memory.memory_types[..memory.memory_type_count as usize]
            .iter()
            .find(|kind| kind.property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
            .is_some_and(|kind| kind.property_flags.contains(mappable))
        {
            features = features | Features::HOST_MAPPABLE;
        }

        let mut uuid = id.device_uuid;
        if uuid == [0; 16] {
            // Some drivers leave the uuid empty; the name and ids are stable across runs.
            uuid = stable_uuid(&name, properties.vendor_id, properties.device_id);
        }
        let pci_bus_id = has_pci_bus_info.then(|| {
            format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                pci.pci_domain, pci.pci_bus, pci.pci_device, pci.pci_function
            )
        });
        let allocated = Arc::new(AtomicU64::new(0));
        let max_storage_buffers = limits
            .max_per_stage_descriptor_storage_buffers
            .min(limits.max_descriptor_set_storage_buffers);
        let info = DeviceInfo {
            name,
            vendor: vendor_name(properties.vendor_id),
            // Ids of 0x10000 and up are Khronos vendor ids, not PCI ones.
            vendor_id: if properties.vendor_id < 0x10000 {
                properties.vendor_id
            } else {
                0
            },
            device_id: properties.device_id,
            device_type: match properties.device_type {
                vk::PhysicalDeviceType::CPU => DeviceType::Cpu,
                vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceType::IntegratedGpu,
                vk::PhysicalDeviceType::DISCRETE_GPU => DeviceType::DiscreteGpu,
                _ => DeviceType::Other,
            },
            uuid,
            pci_bus_id,
            driver_version: driver_version(&driver, properties.vendor_id, properties.driver_version),
            total_memory,
            free_memory: total_memory,
            max_allocation_size: max_memory_allocation_size,
            max_workgroup_size: limits.max_compute_work_group_size,
            max_workgroup_invocations: limits.max_compute_work_group_invocations,
            max_workgroup_count: limits.max_compute_work_group_count,
            max_workgroup_memory: limits.max_compute_shared_memory_size,
            subgroup_size: subgroup.subgroup_size,
            // Core counts every buffer argument against this. Uniform buffers have limits
            // of their own, checked when a kernel's pipeline is made.
            max_buffer_arguments: max_storage_buffers,
            max_scalar_block_size: limits.max_push_constants_size,
            // Any view may be bound as a storage buffer or as a uniform one, so it meets both
            // alignments.
            buffer_offset_alignment: u32::try_from(
                limits
                    .min_storage_buffer_offset_alignment
                    .max(limits.min_uniform_buffer_offset_alignment)
                    .max(1),
            )
            .unwrap_or(u32::MAX),
            features,
            kernel_formats: vec![KernelFormat::SPIRV_SHADER, KernelFormat::WGSL],
        };
        Ok(Adapter {
            physical,
            info,
            queue_family: queue_family as u32,
            memory,
            max_storage_buffer_range: u64::from(limits.max_storage_buffer_range),
            max_uniform_buffer_range: u64::from(limits.max_uniform_buffer_range),
            max_storage_buffers,
            max_uniform_buffers: limits
                .max_per_stage_descriptor_uniform_buffers
                .min(limits.max_descriptor_set_uniform_buffers),
            max_memory_allocation_size,
            timestamp_period: f64::from(limits.timestamp_period),
            timestamp_valid_bits: family.timestamp_valid_bits,
            calibrated_timestamps,
            enable,
            allocated,
        })
    }
}

fn version_string(version: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(version),
        vk::api_version_minor(version),
        vk::api_version_patch(version)
    )
}

fn vendor_name(vendor_id: u32) -> String {
    match vendor_id {
        0x1002 | 0x1022 => "AMD",
        0x10DE => "NVIDIA",
        0x8086 => "Intel",
        0x13B5 => "ARM",
        0x5143 => "Qualcomm",
        0x106B => "Apple",
        0x1010 => "Imagination Technologies",
        0x14E4 => "Broadcom",
        0x10005 => "Mesa",
        0x10002 => "VeriSilicon",
        0x10003 => "Kazan",
        0x10004 => "Codeplay",
        _ => return format!("Vulkan vendor {vendor_id:#x}"),
    }
    .to_string()
}

fn driver_version(driver: &vk::PhysicalDeviceDriverProperties<'_>, vendor_id: u32, raw: u32) -> String {
    let name = driver
        .driver_name_as_c_str()
        .map(|text| text.to_string_lossy().into_owned())
        .unwrap_or_default();
    let details = driver
        .driver_info_as_c_str()
        .map(|text| text.to_string_lossy().into_owned())
        .unwrap_or_default();
    let numeric = if vendor_id == 0x10DE {
        format!(
            "{}.{}.{}.{}",
            raw >> 22,
            (raw >> 14) & 0xff,
            (raw >> 6) & 0xff,
            raw & 0x3f
        )
    } else {
        version_string(raw)
    };
    let text = [name, details, format!("(driver version {numeric})")]
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    text.chars().filter(|c| !c.is_control()).collect()
}

/// A uuid made from stable facts about the device, for drivers that report none.
fn stable_uuid(name: &str, vendor_id: u32, device_id: u32) -> [u8; 16] {
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    let mut out = [0u8; 16];
    let bytes = name
        .bytes()
        .chain(vendor_id.to_le_bytes())
        .chain(device_id.to_le_bytes());
    for byte in bytes {
        state = (state ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
    }
    out[..8].copy_from_slice(&state.to_le_bytes());
    out[8..].copy_from_slice(&state.rotate_left(29).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    out[0] |= 1;
    out
}
