//! The wgpu instance: its adapters found and each described as an xhal device, before any is
//! opened.

use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, Result};

/// Instance flags chosen on purpose rather than from the build type. In debug builds wgpu
/// turns on both `DEBUG` (naga then writes the WGSL source into each SPIR-V module's
/// `OpSource`, as source language 10) and Vulkan validation, and the Khronos layer packaged
/// on Debian 12 (1.3.239) predates language 10 and reports every shader module as invalid.
/// So neither is on by default; `WGPU_DEBUG=1` and `WGPU_VALIDATION=1` (honoured through
/// `with_env`) turn them on, and the layer's messages are then forwarded to `tracing`, that
/// one known message downgraded (see the `validation` module). The layer only ever logs: its
/// messages never become API errors. wgpu's own validation, which turns misuse into errors,
/// is always on.
fn instance_flags() -> wgpu::InstanceFlags {
    wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL.with_env()
}

/// The usable adapters of every wgpu backend, in wgpu's order; device `i` is adapter `i`.
pub(crate) struct Instance {
    adapters: Vec<AdapterEntry>,
    /// Why adapters were left out, for the error when none is usable.
    skipped: Vec<String>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.adapters.iter().map(|entry| entry.info.name.as_str()).collect();
        f.debug_struct("Instance")
            .field("adapters", &names)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// Enumerates the adapters of every wgpu backend (`WGPU_BACKEND` and the flags above are
    /// read from the environment). A missing driver leaves no adapter; it never fails here,
    /// `device_count` says why.
    pub(crate) fn from_env() -> Instance {
        let flags = instance_flags();
        if flags.contains(wgpu::InstanceFlags::VALIDATION) {
            crate::validation::forward_wgpu_log();
        }
        let descriptor = wgpu::InstanceDescriptor {
            backends: wgpu::Backends::all().with_env(),
            flags,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        };
        #[cfg(all(unix, not(target_vendor = "apple"), not(target_os = "android")))]
        crate::wayland_log::quiet_when_unreachable();
        let instance = wgpu::Instance::new(descriptor);
        let (adapters, skipped) = enumerate(&instance);
        Instance { adapters, skipped }
    }

    /// The number of usable adapters, or why there is none.
    pub(crate) fn device_count(&self) -> Result<u32> {
        if self.adapters.is_empty() {
            let reason = if self.skipped.is_empty() {
                "wgpu found no adapter on any backend (no Vulkan, Metal, DX12 or GL driver answered)".to_string()
            } else {
                format!(
                    "wgpu found no adapter that can run xhal kernels: {}",
                    self.skipped.join("; ")
                )
            };
            return Err(Error::new(ErrorKind::DriverUnavailable, reason));
        }
        Ok(self.adapters.len() as u32)
    }

    /// Adapter `index`, which the checked adapter has kept below `device_count`.
    pub(crate) fn adapter(&self, index: u32) -> &AdapterEntry {
        &self.adapters[index as usize]
    }

    pub(crate) fn device_info(&self, index: u32) -> DeviceInfo {
        self.adapter(index).info.clone()
    }
}

/// The wgpu features a device is opened with when the adapter has them; everything else
/// xhal needs is core WebGPU.
pub(crate) const WANTED_FEATURES: wgpu::Features = wgpu::Features::IMMEDIATES
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_INT64)
    .union(wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS)
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

/// Bytes of immediate data the backend's own transfer kernel needs.
pub(crate) const TRANSFER_IMMEDIATE_BYTES: u32 = 32;

/// One usable adapter and what it says about itself.
pub(crate) struct AdapterEntry {
    pub(crate) adapter: wgpu::Adapter,
    pub(crate) info: DeviceInfo,
    pub(crate) features: wgpu::Features,
    pub(crate) limits: wgpu::Limits,
}

/// Every adapter of every backend wgpu was built with, minus those that cannot run xhal
/// kernels, each with the reason it was left out. Never panics: a backend whose driver is
/// missing simply contributes no adapter.
pub(crate) fn enumerate(instance: &wgpu::Instance) -> (Vec<AdapterEntry>, Vec<String>) {
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let mut usable = Vec::new();
    let mut skipped = Vec::new();
    for adapter in adapters {
        let info = adapter.get_info();
        let label = format!("{} ({:?})", info.name, info.backend);
        match unusable_reason(&adapter) {
            Some(reason) => {
                tracing::info!(adapter = %label, %reason, "skipped a wgpu adapter");
                skipped.push(format!("{label}: {reason}"));
            }
            None => {
                let twins = usable
                    .iter()
                    .filter(|entry: &&AdapterEntry| entry.adapter.get_info() == info)
                    .count();
                let features = adapter.features() & WANTED_FEATURES;
                let limits = adapter.limits();
                let memory = total_memory(&adapter, &info);
                let device_info = describe(&info, features, &limits, twins as u32, memory);
                usable.push(AdapterEntry {
                    adapter,
                    info: device_info,
                    features,
                    limits,
                });
            }
        }
    }
    (usable, skipped)
}

fn unusable_reason(adapter: &wgpu::Adapter) -> Option<String> {
    let downlevel = adapter.get_downlevel_capabilities();
    if !downlevel.flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
        return Some("the adapter has no compute shaders".into());
    }
    let limits = adapter.limits();
    if limits.max_storage_buffers_per_shader_stage < 2 {
        return Some(format!(
            "the adapter allows {} storage buffer(s) per compute shader; xhal needs at least 2",
            limits.max_storage_buffers_per_shader_stage
        ));
    }
    if !adapter.features().contains(wgpu::Features::IMMEDIATES) || limits.max_immediate_size < TRANSFER_IMMEDIATE_BYTES
    {
        return Some("the adapter has no immediate data (push constants), which carry xhal's scalar block".into());
    }
    None
}

fn describe(
    info: &wgpu::AdapterInfo,
    features: wgpu::Features,
    limits: &wgpu::Limits,
    twin: u32,
    total_memory: u64,
) -> DeviceInfo {
    let max_allocation_size = limits.max_buffer_size.min(total_memory);
    DeviceInfo {
        name: format!("{} ({:?})", info.name, info.backend),
        vendor: vendor_name(info),
        vendor_id: info.vendor,
        device_id: info.device,
        device_type: match info.device_type {
            wgpu::DeviceType::IntegratedGpu => DeviceType::IntegratedGpu,
            wgpu::DeviceType::DiscreteGpu => DeviceType::DiscreteGpu,
            wgpu::DeviceType::Cpu => DeviceType::Cpu,
            wgpu::DeviceType::VirtualGpu | wgpu::DeviceType::Other => DeviceType::Other,
        },
        uuid: stable_uuid(info, twin),
        pci_bus_id: (!info.device_pci_bus_id.is_empty()).then(|| info.device_pci_bus_id.clone()),
        driver_version: [info.driver.as_str(), info.driver_info.as_str()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        total_memory,
        free_memory: available_memory(info, total_memory),
        max_allocation_size,
        max_workgroup_size: [
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_size_y,
            limits.max_compute_workgroup_size_z,
        ],
        max_workgroup_invocations: limits.max_compute_invocations_per_workgroup,
        max_workgroup_count: [limits.max_compute_workgroups_per_dimension; 3],
        max_workgroup_memory: limits.max_compute_workgroup_storage_size,
        subgroup_size: subgroup_width(info),
        max_buffer_arguments: limits
            .max_storage_buffers_per_shader_stage
            .min(limits.max_bindings_per_bind_group),
        max_scalar_block_size: limits.max_immediate_size,
        // A view may be bound as storage or as a uniform, so it meets both alignments.
        buffer_offset_alignment: limits
            .min_storage_buffer_offset_alignment
            .max(limits.min_uniform_buffer_offset_alignment),
        features: xhal_features(features),
        kernel_formats: vec![KernelFormat::WGSL],
    }
}

/// WGSL always has 32-bit atomics; the rest only where wgpu can really enable them.
pub(crate) fn xhal_features(features: wgpu::Features) -> Features {
    // `var<uniform>` bindings are bound as wgpu uniform buffers (see the kernel module).
    let mut out = Features::ATOMICS_32 | Features::UNIFORM_BUFFERS;
    if features.contains(wgpu::Features::SHADER_F16) {
        out = out | Features::F16;
    }
    if features.contains(wgpu::Features::SHADER_F64) {
        out = out | Features::F64;
    }
    if features.contains(wgpu::Features::SHADER_INT64) {
        out = out | Features::I64;
        if features.contains(wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS) {
            out = out | Features::ATOMICS_64;
        }
    }
    if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
        out = out | Features::TIMESTAMPS;
    }
    out
}

/// The smallest subgroup the adapter may run, which every kernel can rely on; 1 when wgpu
/// does not know (a single invocation is always a valid subgroup).
fn subgroup_width(info: &wgpu::AdapterInfo) -> u32 {
    let width = info.subgroup_min_size;
    if width.is_power_of_two() && width <= 128 {
        width
    } else {
        1
    }
}

fn vendor_name(info: &wgpu::AdapterInfo) -> String {
    let known = match info.vendor {
        0x1002 | 0x1022 => Some("AMD"),
        0x10DE => Some("NVIDIA"),
        0x8086 => Some("Intel"),
        0x13B5 => Some("ARM"),
        0x5143 => Some("Qualcomm"),
        0x106B => Some("Apple"),
        0x1010 => Some("Imagination Technologies"),
        0x10005 => Some("Mesa"),
        0x1414 => Some("Microsoft"),
        _ => None,
    };
    match known {
        Some(name) => name.to_string(),
        None if !info.driver.is_empty() => info.driver.clone(),
        None => format!("{:#x}", info.vendor),
    }
}

/// FNV-1a, written out because the uuid must not change with the Rust version or the
/// process, as `std`'s hashers may.
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A uuid that names the same adapter in every run: a hash of what the adapter says about
/// itself (vendor, device, backend, name, driver, bus), and its position among adapters
/// that say exactly the same thing.
fn stable_uuid(info: &wgpu::AdapterInfo, twin: u32) -> [u8; 16] {
    let identity = format!(
        "{:#x}|{:#x}|{:?}|{}|{}|{}|{}|{twin}",
        info.vendor, info.device, info.backend, info.name, info.driver, info.driver_info, info.device_pci_bus_id
    );
    let high = fnv1a(0xcbf2_9ce4_8422_2325, identity.as_bytes());
    let low = fnv1a(0x84222325_cbf29ce4, identity.as_bytes());
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&high.to_be_bytes());
    uuid[8..].copy_from_slice(&low.to_be_bytes());
    // RFC 4122 version 8 (custom) and variant bits, so tools read it as a well-formed uuid.
    uuid[6] = (uuid[6] & 0x0f) | 0x80;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    uuid
}

/// wgpu does not report memory sizes. Under Vulkan they come from the driver's device-local
/// heaps; a CPU adapter's memory is the host's; for anything else the only size wgpu
/// guarantees is reported.
fn total_memory(adapter: &wgpu::Adapter, info: &wgpu::AdapterInfo) -> u64 {
    if let Some(bytes) = vulkan_device_local_bytes(adapter) {
        return bytes;
    }
    if info.device_type == wgpu::DeviceType::Cpu {
        if let Some(bytes) = meminfo_field("MemTotal:") {
            return bytes;
        }
    }
    FALLBACK_MEMORY
}

#[cfg(not(any(target_vendor = "apple", target_arch = "wasm32")))]
fn vulkan_device_local_bytes(adapter: &wgpu::Adapter) -> Option<u64> {
    // SAFETY: the Vulkan adapter is only read, by a query that changes nothing, and `adapter`
    // keeps it alive for the guard's lifetime.
    let vulkan = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = vulkan.shared_instance().raw_instance();
    // SAFETY: the physical device was enumerated from this instance, which outlives the call.
    let properties = unsafe { instance.get_physical_device_memory_properties(vulkan.raw_physical_device()) };
    let bytes: u64 = properties
        .memory_heaps_as_slice()
        .iter()
        .filter(|heap| heap.flags.contains(ash::vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|heap| heap.size)
        .sum();
    (bytes > 0).then_some(bytes)
}

#[cfg(any(target_vendor = "apple", target_arch = "wasm32"))]
fn vulkan_device_local_bytes(_adapter: &wgpu::Adapter) -> Option<u64> {
    None
}

/// The host's available memory for a CPU adapter; otherwise wgpu gives no figure, and the
/// total is the best one known.
fn available_memory(info: &wgpu::AdapterInfo, total_memory: u64) -> u64 {
    if info.device_type == wgpu::DeviceType::Cpu {
        if let Some(bytes) = meminfo_field("MemAvailable:") {
            return bytes.min(total_memory);
        }
    }
    total_memory
}

/// Reported when neither wgpu nor the host says how much memory an adapter has: 1 GiB, which
/// every adapter able to run compute shaders has.
const FALLBACK_MEMORY: u64 = 1 << 30;

fn meminfo_field(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with(field))?;
    let kibibytes: u64 = line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    kibibytes.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: name.into(),
            vendor: 0x10005,
            device: 0,
            device_type: wgpu::DeviceType::Cpu,
            device_pci_bus_id: String::new(),
            driver: "llvmpipe".into(),
            driver_info: "Mesa".into(),
            backend: wgpu::Backend::Vulkan,
            subgroup_min_size: 8,
            subgroup_max_size: 8,
            transient_saves_memory: Some(false),
            limit_bucket: None,
        }
    }

    #[test]
    fn uuid_is_stable_and_tells_adapters_apart() {
        let first = stable_uuid(&info("a"), 0);
        assert_eq!(first, stable_uuid(&info("a"), 0));
        assert_ne!(first, stable_uuid(&info("b"), 0));
        assert_ne!(first, stable_uuid(&info("a"), 1));
        let mut gl = info("a");
        gl.backend = wgpu::Backend::Gl;
        assert_ne!(first, stable_uuid(&gl, 0));
    }

    #[test]
    fn features_follow_wgpu() {
        assert_eq!(
            xhal_features(wgpu::Features::empty()),
            Features::ATOMICS_32 | Features::UNIFORM_BUFFERS
        );
        let all = xhal_features(WANTED_FEATURES);
        for feature in [
            Features::F16,
            Features::F64,
            Features::I64,
            Features::ATOMICS_64,
            Features::TIMESTAMPS,
        ] {
            assert!(all.contains(feature));
        }
        assert!(!xhal_features(wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS).contains(Features::ATOMICS_64));
    }
}
