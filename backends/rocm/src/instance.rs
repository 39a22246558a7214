//! The HIP runtime, hiprtc where it loads, every device, and what each device is and can do.

use crate::ffi::{self, attribute, Api, GraphApi, HipDevice, Rtc};
use std::ffi::{c_char, c_int, CStr};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, LibrarySource, Result};

/// AMD's PCI vendor id.
const AMD_VENDOR_ID: u32 = 0x1002;

/// The kernel argument segment of an AMD GPU kernel holds 4 KiB, of which the compiler's
/// hidden arguments (after the explicit ones) take up to 256 bytes.
const EXPLICIT_ARGUMENT_BYTES: u32 = 4096 - 256;
/// The part of the explicit argument bytes given to the scalar block; the rest holds the
/// buffer pointers and, for kernels emitted from WGSL, one 8-byte length per buffer.
const SCALAR_BLOCK_BYTES: u32 = 1024;

/// Where the Linux amdgpu driver describes each GPU it drives (`gfx_target_version`,
/// `domain`, `location_id`), the same files the ROCm runtime reads.
pub(crate) const KFD_TOPOLOGY: &str = "/sys/class/kfd/kfd/topology/nodes";

/// One HIP device, as found.
pub(crate) struct Adapter {
    /// The HIP device ordinal (for `hipSetDevice`).
    pub(crate) ordinal: c_int,
    pub(crate) info: DeviceInfo,
    /// The `gfx…` target name, where the driver's topology gives it: what hiprtc compiles
    /// for (`--offload-arch`).
    pub(crate) arch: Option<String>,
    /// Bytes this backend holds on the device, for the free-memory figure where the runtime
    /// cannot say.
    pub(crate) allocated: Arc<AtomicU64>,
}

/// The loaded runtime and the usable devices.
pub(crate) struct Instance {
    pub(crate) api: Api,
    /// hiprtc, where it loads: `hip-c` is offered only then.
    pub(crate) rtc: Option<Rtc>,
    /// Stream capture and graphs, where the runtime captures everything a command list holds:
    /// command lists (ABI 1.4) are offered only then.
    pub(crate) graphs: Option<GraphApi>,
    pub(crate) adapters: Vec<Adapter>,
}

/// `HIP_VERSION` of ROCm 5.3, the first runtime whose stream capture records
/// `hipModuleLaunchKernel` (hipamd's SWDEV-352951). Before it, that launch on a capturing
/// stream ran at once and was left out of the graph, while copies and fills were captured.
const FIRST_RUNTIME_CAPTURING_MODULE_LAUNCHES: c_int = 50_300_000;

fn driver_unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::DriverUnavailable, message)
}

impl Instance {
    /// Opens the runtime and lists every device.
    pub(crate) fn create(source: &LibrarySource) -> Result<Instance> {
        let candidates: Vec<String> = match source {
            LibrarySource::System => ffi::HIP_LIBRARIES.iter().map(|name| name.to_string()).collect(),
            LibrarySource::Path(path) => vec![path.display().to_string()],
        };
        let api = Api::load(&candidates)?;
        let library = api.library_name().to_string();
        // SAFETY: flags must be 0.
        let init = unsafe { (api.init)(0) };
        // A machine without an AMD GPU (or without access to /dev/kfd) makes hipInit fail with
        // hipErrorNoDevice or hipErrorInvalidDevice; both mean no device, not a broken runtime.
        if init == ffi::HIP_ERROR_NO_DEVICE || init == ffi::HIP_ERROR_INVALID_DEVICE {
            return Err(no_device(&api, "hipInit", init));
        }
        if init != ffi::HIP_SUCCESS {
            let error = api.error(&format!("initialising the HIP runtime {library}"), "hipInit", init);
            return Err(driver_unavailable(format!(
                "{}; {}",
                error.message(),
                ffi::INSTALL_HINT
            )));
        }
        let mut count: c_int = 0;
        // SAFETY: writes one int.
        let code = unsafe { (api.get_device_count)(&mut count) };
        if code == ffi::HIP_ERROR_NO_DEVICE || (code == ffi::HIP_SUCCESS && count <= 0) {
            return Err(no_device(&api, "hipGetDeviceCount", code));
        }
        if code != ffi::HIP_SUCCESS {
            let error = api.error(
                &format!("counting the devices of the HIP runtime {library}"),
                "hipGetDeviceCount",
                code,
            );
            return Err(driver_unavailable(error.message().to_string()));
        }
        let rtc = match Rtc::load(&library) {
            Ok(rtc) => {
                tracing::debug!(library = %rtc.library_name(), "hiprtc loaded");
                Some(rtc)
            }
            Err(reasons) => {
                tracing::info!(%reasons, "hiprtc is not available; hip-c source is not offered");
                None
            }
        };
        let runtime_version = version_string(&api);
        let mut adapters = Vec::new();
        let mut refused = Vec::new();
        for ordinal in 0..count {
            match describe(&api, ordinal, rtc.is_some(), &runtime_version, Path::new(KFD_TOPOLOGY)) {
                Ok(adapter) => adapters.push(adapter),
                Err(error) => {
                    tracing::warn!(ordinal, %error, "HIP device skipped");
                    refused.push(format!("device {ordinal}: {}", error.message()));
                }
            }
        }
        if adapters.is_empty() {
            return Err(driver_unavailable(format!(
                "the HIP runtime {library} lists {count} device(s) but none is usable ({})",
                refused.join("; ")
            )));
        }
        let graphs = graphs(&api);
        Ok(Instance {
            api,
            rtc,
            graphs,
            adapters,
        })
    }
}

/// The runtime's graph calls, where it exports them all and captures kernel launches.
fn graphs(api: &Api) -> Option<GraphApi> {
    let Some(graphs) = api.graphs() else {
        tracing::info!("the HIP runtime has no stream capture or graphs; graphs replay operation by operation");
        return None;
    };
    let mut version: c_int = 0;
    // SAFETY: writes one int.
    let code = unsafe { (api.runtime_get_version)(&mut version) };
    if code != ffi::HIP_SUCCESS || version < FIRST_RUNTIME_CAPTURING_MODULE_LAUNCHES {
        tracing::info!(
            version,
            "this HIP runtime (before ROCm 5.3) does not capture hipModuleLaunchKernel; graphs replay operation \
             by operation"
        );
        return None;
    }
    Some(graphs)
}

/// The error for a runtime that loaded but has no device.
fn no_device(api: &Api, call: &str, code: ffi::HipError) -> Error {
    let answer = if code == ffi::HIP_SUCCESS {
        format!("{call} reports 0 devices")
    } else {
        format!("{call} answers {} ({code})", api.error_name(code))
    };
    driver_unavailable(format!(
        "the HIP runtime {} loaded but finds no AMD GPU ({answer}); a ROCm-capable GPU needs the amdgpu kernel \
         driver, and this user needs access to /dev/kfd and /dev/dri/renderD* (the video and render groups)",
        api.library_name()
    ))
}

/// `HIP <runtime> (driver <driver>)`, from the version numbers HIP reports.
fn version_string(api: &Api) -> String {
    let mut runtime: c_int = 0;
    let mut driver: c_int = 0;
    // SAFETY: each writes one int.
    let runtime_code = unsafe { (api.runtime_get_version)(&mut runtime) };
    // SAFETY: as above.
    let driver_code = unsafe { (api.driver_get_version)(&mut driver) };
    let format = |value: c_int| {
        // HIP_VERSION is major * 10_000_000 + minor * 100_000 + patch.
        format!("{}.{}.{}", value / 10_000_000, (value / 100_000) % 100, value % 100_000)
    };
    match (runtime_code == ffi::HIP_SUCCESS, driver_code == ffi::HIP_SUCCESS) {
        (true, true) => format!("HIP {} (driver {})", format(runtime), format(driver)),
        (true, false) => format!("HIP {}", format(runtime)),
        (false, true) => format!("HIP driver {}", format(driver)),
        (false, false) => "HIP".to_string(),
    }
}

/// Reads one device attribute, naming it when the runtime refuses.
fn attribute_value(api: &Api, ordinal: c_int, attribute: c_int, name: &str) -> Result<i32> {
    let mut value: c_int = 0;
    // SAFETY: writes one int for a listed device.
    let code = unsafe { (api.device_get_attribute)(&mut value, attribute, ordinal) };
    api.check(code, "hipDeviceGetAttribute", || {
        format!("reading {name} of HIP device {ordinal}")
    })?;
    Ok(value)
}

fn positive(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// Describes device `ordinal`.
fn describe(api: &Api, ordinal: c_int, hiprtc: bool, runtime_version: &str, topology: &Path) -> Result<Adapter> {
    let mut device: HipDevice = 0;
    // SAFETY: writes one device handle for an ordinal below the count.
    let code = unsafe { (api.device_get)(&mut device, ordinal) };
    api.check(code, "hipDeviceGet", || format!("opening HIP device {ordinal}"))?;
    let mut name_bytes = [0 as c_char; 256];
    // SAFETY: the buffer holds `len` bytes; HIP NUL-terminates within them.
    let code = unsafe { (api.device_get_name)(name_bytes.as_mut_ptr(), name_bytes.len() as c_int, device) };
    api.check(code, "hipDeviceGetName", || {
        format!("reading the name of HIP device {ordinal}")
    })?;
    let name = c_text(&name_bytes);
    let mut total_memory: usize = 0;
    // SAFETY: writes one size_t.
    let code = unsafe { (api.device_total_mem)(&mut total_memory, device) };
    api.check(code, "hipDeviceTotalMem", || {
        format!("reading the memory size of {name}")
    })?;
    let total_memory = total_memory as u64;

    let read = |attribute: i32, attribute_name: &str| attribute_value(api, ordinal, attribute, attribute_name);
    let compute_units = read(attribute::MULTIPROCESSOR_COUNT, "hipDeviceAttributeMultiprocessorCount")?;
    let invocations = read(attribute::MAX_THREADS_PER_BLOCK, "hipDeviceAttributeMaxThreadsPerBlock")?;
    let warp_size = read(attribute::WARP_SIZE, "hipDeviceAttributeWarpSize")?;
    let block = [
        read(attribute::MAX_BLOCK_DIM_X, "hipDeviceAttributeMaxBlockDimX")?,
        read(attribute::MAX_BLOCK_DIM_Y, "hipDeviceAttributeMaxBlockDimY")?,
        read(attribute::MAX_BLOCK_DIM_Z, "hipDeviceAttributeMaxBlockDimZ")?,
    ];
    let grid = [
        read(attribute::MAX_GRID_DIM_X, "hipDeviceAttributeMaxGridDimX")?,
        read(attribute::MAX_GRID_DIM_Y, "hipDeviceAttributeMaxGridDimY")?,
        read(attribute::MAX_GRID_DIM_Z, "hipDeviceAttributeMaxGridDimZ")?,
    ];
    let shared_memory = read(
        attribute::MAX_SHARED_MEMORY_PER_BLOCK,
        "hipDeviceAttributeMaxSharedMemoryPerBlock",
    )?;
    let integrated = read(attribute::INTEGRATED, "hipDeviceAttributeIntegrated").unwrap_or(0);
    let pci_device_id = read(attribute::PCI_DEVICE_ID, "hipDeviceAttributePciDeviceId").unwrap_or(0);

    let mut bus_bytes = [0 as c_char; 64];
    // SAFETY: the buffer holds `len` bytes.
    let code = unsafe { (api.device_get_pci_bus_id)(bus_bytes.as_mut_ptr(), bus_bytes.len() as c_int, ordinal) };
    let pci_bus_id = (code == ffi::HIP_SUCCESS)
        .then(|| c_text(&bus_bytes).to_ascii_lowercase())
        .filter(|text| !text.is_empty());

    let uuid = api
        .device_get_uuid
        .and_then(|get_uuid| {
            let mut uuid = ffi::HipUuid::default();
            // SAFETY: writes one hipUUID.
            let code = unsafe { get_uuid(&mut uuid, device) };
            (code == ffi::HIP_SUCCESS && uuid.bytes != [0; 16]).then_some(uuid.bytes)
        })
        .unwrap_or_else(|| derived_uuid(&[&name, pci_bus_id.as_deref().unwrap_or(""), &ordinal.to_string()]));

    // ROCm's runtime takes the target from HSA_OVERRIDE_GFX_VERSION where it is set (as it
    // often is for GPUs ROCm does not list), so hiprtc must compile for that one too.
    let overridden = std::env::var("HSA_OVERRIDE_GFX_VERSION").ok();
    let arch = overridden
        .as_deref()
        .and_then(gfx_name_from_override)
        .or_else(|| pci_bus_id.as_deref().and_then(|bus| arch_from_topology(topology, bus)));
    let mut kernel_formats = Vec::new();
    if hiprtc {
        kernel_formats.push(KernelFormat::HIP_C);
    }
    kernel_formats.push(KernelFormat::HSACO);
    let driver_version = match &arch {
        Some(arch) => format!("{runtime_version}, {arch}"),
        None => runtime_version.to_string(),
    };
    tracing::debug!(%name, ordinal, compute_units, ?arch, "HIP device found");

    let explicit_pointer_and_length = 16;
    let info = DeviceInfo {
        name,
        vendor: "AMD".to_string(),
        vendor_id: AMD_VENDOR_ID,
        device_id: positive(pci_device_id),
        device_type: if integrated != 0 {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        },
        uuid,
        pci_bus_id,
        driver_version,
        total_memory,
        free_memory: total_memory,
        // HIP sets no per-allocation limit below the device's memory.
        max_allocation_size: total_memory,
        max_workgroup_size: block.map(positive),
        max_workgroup_invocations: positive(invocations),
        max_workgroup_count: grid.map(positive),
        max_workgroup_memory: positive(shared_memory),
        subgroup_size: positive(warp_size).max(1),
        max_buffer_arguments: (EXPLICIT_ARGUMENT_BYTES - SCALAR_BLOCK_BYTES - 8) / explicit_pointer_and_length,
        max_scalar_block_size: SCALAR_BLOCK_BYTES,
        // Kernels take plain pointers, so any offset binds; 16 keeps every WGSL type
        // (up to vec4<f32>/vec2<f64>) at its alignment.
        buffer_offset_alignment: 16,
        // f16 on every device HIP runs on (all have half precision): the emitted HIP C uses
        // clang's _Float16 and rounds each operation.
        features: Features::F16
            | Features::I64
            | Features::F64
            | Features::ATOMICS_32
            | Features::ATOMICS_64
            | Features::TIMESTAMPS,
        kernel_formats,
    };
    if info.max_workgroup_invocations == 0 || info.max_workgroup_size.contains(&0) {
        return Err(Error::unsupported(format!(
            "{} reports no workgroup size (max threads per block {invocations}, block dims {block:?})",
            info.name
        )));
    }
    Ok(Adapter {
        ordinal,
        info,
        arch,
        allocated: Arc::new(AtomicU64::new(0)),
    })
}

/// A C string in a fixed buffer, without its terminator, trimmed.
fn c_text(bytes: &[c_char]) -> String {
    let bytes: Vec<u8> = bytes.iter().map(|&byte| byte as u8).collect();
    let end = bytes.iter().position(|&byte| byte == 0).unwrap_or(bytes.len());
    CStr::from_bytes_with_nul(&[&bytes[..end], &[0]].concat())
        .map(|text| text.to_string_lossy().trim().to_string())
        .unwrap_or_default()
}

/// The `gfx…` name of the GPU at PCI address `bus` (`dddd:bb:dd.f`), from the amdgpu
/// driver's topology under `root`: `gfx_target_version` is major × 10000 + minor × 100 +
/// stepping, and the name writes minor and stepping as one hex digit each (90010 is gfx90a).
pub(crate) fn arch_from_topology(root: &Path, bus: &str) -> Option<String> {
    let (domain, location) = parse_pci_address(bus)?;
    let nodes = std::fs::read_dir(root).ok()?;
    for node in nodes.flatten() {
        let Ok(text) = std::fs::read_to_string(node.path().join("properties")) else {
            continue;
        };
        let property = |key: &str| {
            text.lines().find_map(|line| {
                let (name, value) = line.split_once(' ')?;
                (name == key).then(|| value.trim().parse::<u64>().ok()).flatten()
            })
        };
        let (Some(version), Some(node_location)) = (property("gfx_target_version"), property("location_id")) else {
            continue;
        };
        if version == 0 || node_location != location || property("domain").unwrap_or(0) != domain {
            continue;
        }
        return gfx_name(version);
    }
    None
}

/// `gfx_target_version` as a target name.
pub(crate) fn gfx_name(version: u64) -> Option<String> {
    let (major, minor, stepping) = (version / 10_000, (version / 100) % 100, version % 100);
    (major > 0 && minor < 16 && stepping < 16).then(|| format!("gfx{major}{minor:x}{stepping:x}"))
}

/// `HSA_OVERRIDE_GFX_VERSION` (`10.3.0`) as a target name (`gfx1030`).
pub(crate) fn gfx_name_from_override(text: &str) -> Option<String> {
    let parts: Vec<u64> = text
        .trim()
        .split('.')
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [major, minor, stepping] => gfx_name(major * 10_000 + minor * 100 + stepping),
        _ => None,
    }
}

/// `dddd:bb:dd.f` → (domain, bus << 8 | device << 3 | function), as the driver's topology
/// writes `domain` and `location_id`.
fn parse_pci_address(bus: &str) -> Option<(u64, u64)> {
    let (domain, rest) = bus.split_once(':')?;
    let (bus_number, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |text: &str| u64::from_str_radix(text.trim(), 16).ok();
    Some((
        hex(domain)?,
        (hex(bus_number)? << 8) | (hex(device)? << 3) | hex(function)?,
    ))
}

/// A uuid from what identifies a device whose runtime has no `hipDeviceGetUuid` (its name,
/// bus and ordinal): stable across runs on one machine, as an RFC 9562 version-8 uuid.
fn derived_uuid(parts: &[&str]) -> [u8; 16] {
    let mut hashes = [0xcbf2_9ce4_8422_2325u64, 0x6c62_272e_07bb_0142u64];
    for hash in &mut hashes {
        for part in parts {
            for byte in part.bytes().chain((part.len() as u64).to_le_bytes()) {
                *hash ^= u64::from(byte);
                *hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(&hashes[0].to_be_bytes());
    uuid[8..].copy_from_slice(&hashes[1].to_be_bytes());
    uuid[6] = (uuid[6] & 0x0f) | 0x80;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    uuid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_versions_become_gfx_names() {
        assert_eq!(gfx_name(90010).as_deref(), Some("gfx90a"));
        assert_eq!(gfx_name(90402).as_deref(), Some("gfx942"));
        assert_eq!(gfx_name(110000).as_deref(), Some("gfx1100"));
        assert_eq!(gfx_name(100302).as_deref(), Some("gfx1032"));
        assert_eq!(gfx_name(90006).as_deref(), Some("gfx906"));
        assert_eq!(gfx_name(0), None);
        assert_eq!(gfx_name_from_override("10.3.0").as_deref(), Some("gfx1030"));
        assert_eq!(gfx_name_from_override("9.0.10").as_deref(), Some("gfx90a"));
        assert_eq!(gfx_name_from_override("11.0"), None);
        assert_eq!(gfx_name_from_override("x.y.z"), None);
    }

    #[test]
    fn pci_addresses_become_topology_locations() {
        assert_eq!(parse_pci_address("0000:03:00.0"), Some((0, 0x300)));
        assert_eq!(parse_pci_address("0001:c1:02.1"), Some((1, (0xc1 << 8) | (2 << 3) | 1)));
        assert_eq!(parse_pci_address("garbage"), None);
    }

    #[test]
    fn the_arch_is_read_from_the_node_at_the_devices_bus() {
        let root = std::env::temp_dir().join(format!("xhal-rocm-topology-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (node, properties) in [
            (
                "0",
                "cpu_cores_count 16\ngfx_target_version 0\nlocation_id 0\ndomain 0\n",
            ),
            ("1", "gfx_target_version 90010\nlocation_id 768\ndomain 0\n"),
            ("2", "gfx_target_version 110000\nlocation_id 49920\ndomain 0\n"),
        ] {
            std::fs::create_dir_all(root.join(node)).expect("temporary folder");
            std::fs::write(root.join(node).join("properties"), properties).expect("temporary file");
        }
        assert_eq!(arch_from_topology(&root, "0000:03:00.0").as_deref(), Some("gfx90a"));
        assert_eq!(arch_from_topology(&root, "0000:c3:00.0").as_deref(), Some("gfx1100"));
        assert_eq!(arch_from_topology(&root, "0000:04:00.0"), None);
        assert_eq!(arch_from_topology(&root.join("missing"), "0000:03:00.0"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn derived_uuids_are_stable_and_distinct() {
        let first = derived_uuid(&["gfx", "0000:03:00.0"]);
        assert_eq!(first, derived_uuid(&["gfx", "0000:03:00.0"]));
        assert_ne!(first, derived_uuid(&["gfx", "0000:04:00.0"]));
        assert_eq!(first[6] >> 4, 8);
    }
}
