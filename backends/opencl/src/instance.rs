//! The loader, every platform and every device, and what each device is and can do.

use crate::ffi::{self, info_bytes, info_string, info_value, query_of, Api, DeviceId, PlatformId};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, LibrarySource, Result};

/// Held while platforms and devices are listed and described, and while a context is made or
/// released, across every backend instance in the process. Some drivers are not safe there:
/// PoCL tears its devices down when the last context goes and sets them up again on the next
/// query, so a device query racing a context release reads freed strings.
pub(crate) static DRIVER_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// One OpenCL device, as found.
pub(crate) struct Adapter {
    pub(crate) platform: PlatformId,
    pub(crate) device: DeviceId,
    pub(crate) info: DeviceInfo,
    /// The device's queues can be created with profiling.
    pub(crate) profiling: bool,
    /// The program-from-IL entry point, where the device takes SPIR-V.
    pub(crate) create_program_with_il: Option<ffi::CreateProgramWithIl>,
    /// `CL_DEVICE_ADDRESS_BITS`: a global work size must fit in this many bits.
    pub(crate) address_bits: u32,
    /// `cl_khr_command_buffer`, where the device has it with simultaneous use and asks for no
    /// queue property this backend's queues lack: command lists (ABI 1.4) are built on it.
    pub(crate) command_buffers: Option<ffi::CommandBufferApi>,
    /// Bytes this backend holds on the device, for the free-memory figure.
    pub(crate) allocated: Arc<AtomicU64>,
}

// Platform and device ids are process-wide identifiers that the OpenCL runtime never frees;
// every OpenCL call taking them is thread-safe.
// SAFETY: see above.
unsafe impl Send for Adapter {}
// SAFETY: see above.
unsafe impl Sync for Adapter {}

/// The loaded library and the usable devices.
pub(crate) struct Instance {
    pub(crate) api: Api,
    pub(crate) adapters: Vec<Adapter>,
}

fn driver_unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::DriverUnavailable, message)
}

impl Instance {
    /// Opens the loader and finds every device of every platform.
    pub(crate) fn create(source: &LibrarySource) -> Result<Instance> {
        let library = match source {
            LibrarySource::System => ffi::LOADER_LIBRARY.to_string(),
            LibrarySource::Path(path) => path.display().to_string(),
        };
        let api = Api::load(&library)?;
        let _driver = DRIVER_LOCK.lock();
        let platforms = platforms(&api)?;
        let mut adapters = Vec::new();
        let mut refused = Vec::new();
        for platform in platforms {
            let platform_name = platform_string(&api, platform, ffi::CL_PLATFORM_NAME);
            match devices(&api, platform) {
                Ok(found) => {
                    for (position, device) in found.into_iter().enumerate() {
                        match describe(&api, platform, device, position) {
                            Ok(adapter) => adapters.push(adapter),
                            Err(error) => {
                                tracing::warn!(platform = %platform_name, %error, "OpenCL device skipped");
                                refused.push(format!("{platform_name}: {}", error.message()));
                            }
                        }
                    }
                }
                Err(error) => refused.push(format!("{platform_name}: {}", error.message())),
            }
        }
        if adapters.is_empty() {
            return Err(driver_unavailable(format!(
                "the OpenCL loader {library} found platforms but no usable device ({})",
                refused.join("; ")
            )));
        }
        Ok(Instance { api, adapters })
    }

    /// What device `index` (below the device count) is, with the memory this backend holds
    /// on it taken from the free figure.
    pub(crate) fn device_info(&self, index: usize) -> DeviceInfo {
        let adapter = &self.adapters[index];
        let mut info = adapter.info.clone();
        info.free_memory = info
            .total_memory
            .saturating_sub(adapter.allocated.load(Ordering::Relaxed));
        info
    }
}

fn platforms(api: &Api) -> Result<Vec<PlatformId>> {
    let library = api.library_name();
    let mut count: u32 = 0;
    // SAFETY: asks for the count only.
    let code = unsafe { (api.get_platform_ids)(0, std::ptr::null_mut(), &mut count) };
    if code == ffi::CL_PLATFORM_NOT_FOUND_KHR || (code == ffi::CL_SUCCESS && count == 0) {
        return Err(driver_unavailable(format!(
            "the OpenCL loader {library} found no platform (no OpenCL driver is installed, or OCL_ICD_VENDORS \
             points where there is none); install one, such as pocl-opencl-icd"
        )));
    }
    if code != ffi::CL_SUCCESS {
        return Err(driver_unavailable(format!(
            "the OpenCL loader {library} could not list platforms: {} ({code})",
            ffi::error_name(code)
        )));
    }
    let mut platforms = vec![std::ptr::null_mut(); count as usize];
    // SAFETY: the vector holds `count` entries.
    let code = unsafe { (api.get_platform_ids)(count, platforms.as_mut_ptr(), std::ptr::null_mut()) };
    ffi::check(code, || "listing OpenCL platforms".to_string())
        .map_err(|error| driver_unavailable(error.message().to_string()))?;
    Ok(platforms)
}

fn devices(api: &Api, platform: PlatformId) -> Result<Vec<DeviceId>> {
    let mut count: u32 = 0;
    // SAFETY: asks for the count only.
    let code = unsafe { (api.get_device_ids)(platform, ffi::CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut count) };
    if code == ffi::CL_DEVICE_NOT_FOUND || (code == ffi::CL_SUCCESS && count == 0) {
        return Ok(Vec::new());
    }
    ffi::check(code, || "listing the platform's devices".to_string())?;
    let mut devices = vec![std::ptr::null_mut(); count as usize];
    // SAFETY: the vector holds `count` entries.
    let code = unsafe {
        (api.get_device_ids)(
            platform,
            ffi::CL_DEVICE_TYPE_ALL,
            count,
            devices.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    ffi::check(code, || "listing the platform's devices".to_string())?;
    Ok(devices)
}

fn platform_string(api: &Api, platform: PlatformId, parameter: u32) -> String {
    // SAFETY: a string parameter of a platform the loader listed.
    unsafe { info_bytes(query_of(api.get_platform_info, platform, parameter)) }
        .map(|bytes| info_string(&bytes))
        .unwrap_or_default()
}

/// Reads device parameters, naming the parameter when the driver refuses.
struct DeviceQuery<'a> {
    api: &'a Api,
    device: DeviceId,
}

impl DeviceQuery<'_> {
    fn bytes(&self, parameter: u32, name: &str) -> Result<Vec<u8>> {
        // SAFETY: a parameter of a device the loader listed; sizes come from the driver.
        unsafe { info_bytes(query_of(self.api.get_device_info, self.device, parameter)) }
            .map_err(|code| ffi::cl_error(format!("reading {name} of an OpenCL device"), code))
    }

    fn string(&self, parameter: u32, name: &str) -> Result<String> {
        self.bytes(parameter, name).map(|bytes| info_string(&bytes))
    }

    fn value<T: Default>(&self, parameter: u32, name: &str) -> Result<T> {
        // SAFETY: `T` is the parameter's documented type at each call site.
        unsafe { info_value::<T>(query_of(self.api.get_device_info, self.device, parameter)) }
            .map_err(|code| ffi::cl_error(format!("reading {name} of an OpenCL device"), code))
    }

    /// A parameter only some devices have (an extension's); `None` where it is refused.
    fn optional_bytes(&self, parameter: u32) -> Option<Vec<u8>> {
        // SAFETY: as for `bytes`.
        unsafe { info_bytes(query_of(self.api.get_device_info, self.device, parameter)) }.ok()
    }
}

/// `OpenCL 3.0 PoCL ...` → `(3, 0)`.
pub(crate) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let numbers = text.strip_prefix("OpenCL ")?.split_whitespace().next()?;
    let (major, minor) = numbers.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Describes `device`, the `position`th of its platform.
fn describe(api: &Api, platform: PlatformId, device: DeviceId, position: usize) -> Result<Adapter> {
    let query = DeviceQuery { api, device };
    let name = query.string(ffi::CL_DEVICE_NAME, "CL_DEVICE_NAME")?;
    let version = query.string(ffi::CL_DEVICE_VERSION, "CL_DEVICE_VERSION")?;
    match parse_version(&version) {
        Some(parsed) if parsed >= (1, 2) => {}
        _ => {
            return Err(Error::unsupported(format!(
                "{name} reports `{version}`; xhal needs OpenCL 1.2 (fill, markers, barriers and argument info)"
            )))
        }
    }
    let available: ffi::ClBool = query.value(ffi::CL_DEVICE_AVAILABLE, "CL_DEVICE_AVAILABLE")?;
    if available == ffi::CL_FALSE {
        return Err(Error::unsupported(format!("{name} reports itself unavailable")));
    }
    let compiler: ffi::ClBool = query.value(ffi::CL_DEVICE_COMPILER_AVAILABLE, "CL_DEVICE_COMPILER_AVAILABLE")?;
    let vendor = query.string(ffi::CL_DEVICE_VENDOR, "CL_DEVICE_VENDOR")?;
    let vendor_id: u32 = query.value(ffi::CL_DEVICE_VENDOR_ID, "CL_DEVICE_VENDOR_ID")?;
    let driver_version = query.string(ffi::CL_DRIVER_VERSION, "CL_DRIVER_VERSION")?;
    let profile = query.string(ffi::CL_DEVICE_PROFILE, "CL_DEVICE_PROFILE")?;
    let extensions = query.string(ffi::CL_DEVICE_EXTENSIONS, "CL_DEVICE_EXTENSIONS")?;
    let has = |extension: &str| extensions.split_whitespace().any(|known| known == extension);
    let kind: u64 = query.value(ffi::CL_DEVICE_TYPE, "CL_DEVICE_TYPE")?;
    let unified: ffi::ClBool = query
        .value(ffi::CL_DEVICE_HOST_UNIFIED_MEMORY, "CL_DEVICE_HOST_UNIFIED_MEMORY")
        .unwrap_or(ffi::CL_FALSE);
    let device_type = if kind & ffi::CL_DEVICE_TYPE_GPU != 0 {
        if unified == ffi::CL_TRUE {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        }
    } else if kind & ffi::CL_DEVICE_TYPE_CPU != 0 {
        DeviceType::Cpu
    } else if kind & ffi::CL_DEVICE_TYPE_ACCELERATOR != 0 {
        DeviceType::Accelerator
    } else {
        DeviceType::Other
    };
    let total_memory: u64 = query.value(ffi::CL_DEVICE_GLOBAL_MEM_SIZE, "CL_DEVICE_GLOBAL_MEM_SIZE")?;
    let max_allocation: u64 = query.value(ffi::CL_DEVICE_MAX_MEM_ALLOC_SIZE, "CL_DEVICE_MAX_MEM_ALLOC_SIZE")?;
    let invocations: usize = query.value(ffi::CL_DEVICE_MAX_WORK_GROUP_SIZE, "CL_DEVICE_MAX_WORK_GROUP_SIZE")?;
    let dimensions: u32 = query.value(
        ffi::CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS,
        "CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS",
    )?;
    let sizes_bytes = query.bytes(ffi::CL_DEVICE_MAX_WORK_ITEM_SIZES, "CL_DEVICE_MAX_WORK_ITEM_SIZES")?;
    let sizes: Vec<usize> = sizes_bytes
        .chunks_exact(std::mem::size_of::<usize>())
        .map(|chunk| usize::from_ne_bytes(chunk.try_into().unwrap_or_default()))
        .collect();
    if dimensions < 3 || sizes.len() < 3 {
        return Err(Error::unsupported(format!(
            "{name} has {dimensions} work-item dimensions; xhal launches in 3"
        )));
    }
    let clamp = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
    let max_workgroup_size = [clamp(sizes[0]), clamp(sizes[1]), clamp(sizes[2])];
    let local_memory: u64 = query.value(ffi::CL_DEVICE_LOCAL_MEM_SIZE, "CL_DEVICE_LOCAL_MEM_SIZE")?;
    let parameter_bytes: usize = query.value(ffi::CL_DEVICE_MAX_PARAMETER_SIZE, "CL_DEVICE_MAX_PARAMETER_SIZE")?;
    let address_bits: u32 = query.value(ffi::CL_DEVICE_ADDRESS_BITS, "CL_DEVICE_ADDRESS_BITS")?;
    let alignment_bits: u32 = query.value(ffi::CL_DEVICE_MEM_BASE_ADDR_ALIGN, "CL_DEVICE_MEM_BASE_ADDR_ALIGN")?;
    let base_address_alignment = u64::from(alignment_bits / 8).max(1);
    let queue_properties: u64 = query.value(ffi::CL_DEVICE_QUEUE_PROPERTIES, "CL_DEVICE_QUEUE_PROPERTIES")?;
    let profiling = queue_properties & ffi::CL_QUEUE_PROFILING_ENABLE != 0;

    // The parameter space holds the pointers, the scalar block and, for kernels emitted from
    // WGSL, the buffer lengths (a ulong per buffer, at least one): a quarter (at least 128
    // bytes, at most half) goes to the scalar block, the rest to pointers and their lengths.
    let pointer_bytes = (address_bits / 8).max(4) as usize;
    let scalar_bytes = (parameter_bytes / 4).max(128).min(parameter_bytes / 2);
    let buffer_arguments = (parameter_bytes - scalar_bytes).saturating_sub(8) / (pointer_bytes + 8);

    let mut features = Features::ATOMICS_32;
    let full_profile = profile == "FULL_PROFILE";
    if full_profile || has("cles_khr_int64") {
        features = features | Features::I64;
    }
    if has("cl_khr_fp64") {
        features = features | Features::F64;
    }
    // WGSL's f16 becomes OpenCL C's `half`, which takes cl_khr_fp16 (the emitted source
    // enables it); a device without it cannot build such a kernel, and core refuses it first,
    // naming f16.
    if has("cl_khr_fp16") {
        features = features | Features::F16;
    }
    // WGSL's 64-bit atomics take both extensions: atom_add and friends from the base one,
    // atom_min, atom_max and the bitwise operations from the extended one.
    if has("cl_khr_int64_base_atomics") && has("cl_khr_int64_extended_atomics") {
        features = features | Features::ATOMICS_64;
    }
    if profiling {
        features = features | Features::TIMESTAMPS;
    }

    let il_version = query
        .optional_bytes(ffi::CL_DEVICE_IL_VERSION)
        .map(|bytes| info_string(&bytes))
        .unwrap_or_default();
    let create_program_with_il = if il_version.contains("SPIR-V") {
        il_entry_point(api, platform)
    } else {
        None
    };
    let mut kernel_formats = Vec::new();
    if compiler == ffi::CL_TRUE {
        kernel_formats.push(KernelFormat::OPENCL_C);
    }
    if create_program_with_il.is_some() {
        kernel_formats.push(KernelFormat::SPIRV_KERNEL);
    }
    if kernel_formats.is_empty() {
        return Err(Error::unsupported(format!(
            "{name} has no OpenCL C compiler and takes no SPIR-V (CL_DEVICE_IL_VERSION `{il_version}`)"
        )));
    }

    let subgroup_size = query
        .optional_bytes(ffi::CL_DEVICE_SUB_GROUP_SIZES_INTEL)
        .and_then(|bytes| {
            bytes
                .chunks_exact(std::mem::size_of::<usize>())
                .map(|chunk| usize::from_ne_bytes(chunk.try_into().unwrap_or_default()))
                .min()
        })
        .map(clamp)
        .filter(|width| width.is_power_of_two() && *width <= 128)
        .unwrap_or(1);

    let pci_bus_id = if has("cl_khr_pci_bus_info") {
        // SAFETY: the extension's parameter returns this struct.
        unsafe { info_value::<ffi::PciBusInfo>(query_of(api.get_device_info, device, ffi::CL_DEVICE_PCI_BUS_INFO_KHR)) }
            .ok()
            .map(|bus| {
                format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    bus.domain, bus.bus, bus.device, bus.function
                )
            })
    } else {
        None
    };
    let platform_name = platform_string(api, platform, ffi::CL_PLATFORM_NAME);
    let platform_vendor = platform_string(api, platform, ffi::CL_PLATFORM_VENDOR);
    let platform_version = platform_string(api, platform, ffi::CL_PLATFORM_VERSION);
    let uuid = if has("cl_khr_device_uuid") {
        query
            .optional_bytes(ffi::CL_DEVICE_UUID_KHR)
            .and_then(|bytes| <[u8; 16]>::try_from(bytes.as_slice()).ok())
    } else {
        None
    }
    .unwrap_or_else(|| {
        derived_uuid(&[
            &platform_name,
            &platform_vendor,
            &name,
            &vendor,
            &pci_bus_id.clone().unwrap_or_default(),
            &position.to_string(),
        ])
    });
    tracing::debug!(%name, %platform_name, %platform_version, %version, "OpenCL device found");

    let info = DeviceInfo {
        name,
        vendor,
        vendor_id,
        device_id: 0,
        device_type,
        uuid,
        pci_bus_id,
        driver_version,
        total_memory,
        free_memory: total_memory,
        max_allocation_size: max_allocation.min(total_memory),
        max_workgroup_size,
        max_workgroup_invocations: clamp(invocations),
        // OpenCL bounds a launch by its global size (a size_t), not by a workgroup count.
        max_workgroup_count: [u32::MAX; 3],
        max_workgroup_memory: u32::try_from(local_memory).unwrap_or(u32::MAX),
        subgroup_size,
        max_buffer_arguments: u32::try_from(buffer_arguments).unwrap_or(u32::MAX),
        max_scalar_block_size: u32::try_from(scalar_bytes).unwrap_or(u32::MAX),
        // A view at an offset binds as a sub-buffer, whose origin OpenCL requires at this
        // alignment; the checked adapter refuses launch views off it.
        buffer_offset_alignment: u32::try_from(base_address_alignment).unwrap_or(u32::MAX),
        features,
        kernel_formats,
    };
    let command_buffers = if has("cl_khr_command_buffer") {
        let capabilities: u64 = query
            .value(
                ffi::CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
                "CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR",
            )
            .unwrap_or(0);
        let required: u64 = query
            .value(
                ffi::CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
                "CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR",
            )
            .unwrap_or(u64::MAX);
        // The stream queues are in order, with profiling where the device has it.
        let allowed = if profiling { ffi::CL_QUEUE_PROFILING_ENABLE } else { 0 };
        if capabilities & ffi::CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR != 0 && required & !allowed == 0 {
            command_buffer_entry_points(api, platform)
        } else {
            None
        }
    } else {
        None
    };
    Ok(Adapter {
        platform,
        device,
        info,
        profiling,
        create_program_with_il,
        address_bits,
        command_buffers,
        allocated: Arc::new(AtomicU64::new(0)),
    })
}

/// `cl_khr_command_buffer`'s entry points on `platform`, or `None` when one is missing.
fn command_buffer_entry_points(api: &Api, platform: PlatformId) -> Option<ffi::CommandBufferApi> {
    let lookup = api.get_extension_function_address_for_platform?;
    let find = |name: &std::ffi::CStr| {
        // SAFETY: a lookup by NUL-terminated name on a platform the loader listed.
        let address = unsafe { lookup(platform, name.as_ptr()) };
        (!address.is_null()).then_some(address)
    };
    // SAFETY: each address is the entry point of that name, whose signature cl_khr_command_buffer
    // documents as the field's type.
    unsafe {
        Some(ffi::CommandBufferApi {
            create: std::mem::transmute::<*mut c_void, ffi::CreateCommandBuffer>(find(c"clCreateCommandBufferKHR")?),
            finalize: std::mem::transmute::<*mut c_void, ffi::CommandBufferCall>(find(c"clFinalizeCommandBufferKHR")?),
            release: std::mem::transmute::<*mut c_void, ffi::CommandBufferCall>(find(c"clReleaseCommandBufferKHR")?),
            enqueue: std::mem::transmute::<*mut c_void, ffi::EnqueueCommandBuffer>(find(c"clEnqueueCommandBufferKHR")?),
            copy: std::mem::transmute::<*mut c_void, ffi::CommandCopyBuffer>(find(c"clCommandCopyBufferKHR")?),
            fill: std::mem::transmute::<*mut c_void, ffi::CommandFillBuffer>(find(c"clCommandFillBufferKHR")?),
            nd_range: std::mem::transmute::<*mut c_void, ffi::CommandNdRangeKernel>(find(
                c"clCommandNDRangeKernelKHR",
            )?),
        })
    }
}

/// The loader's `clCreateProgramWithIL`, or the platform's `clCreateProgramWithILKHR`.
fn il_entry_point(api: &Api, platform: PlatformId) -> Option<ffi::CreateProgramWithIl> {
    if let Some(function) = api.create_program_with_il {
        return Some(function);
    }
    let lookup = api.get_extension_function_address_for_platform?;
    // SAFETY: a lookup by NUL-terminated name on a platform the loader listed.
    let address = unsafe { lookup(platform, c"clCreateProgramWithILKHR".as_ptr()) };
    if address.is_null() {
        return None;
    }
    // SAFETY: `cl_khr_il_program` documents this signature for the entry point.
    Some(unsafe { std::mem::transmute::<*mut c_void, ffi::CreateProgramWithIl>(address) })
}

/// A uuid from what identifies a device without `cl_khr_device_uuid` (its platform, name,
/// vendor, bus and position in the platform): stable across runs on one machine, as an RFC 9562 version-8 (vendor-defined) uuid.
fn derived_uuid(parts: &[&str]) -> [u8; 16] {
    // Two FNV-1a hashes with different offsets, over every part and its length.
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
    fn versions_parse_from_the_device_string() {
        assert_eq!(parse_version("OpenCL 3.0 PoCL HSTR: pthread"), Some((3, 0)));
        assert_eq!(parse_version("OpenCL 1.2 CUDA"), Some((1, 2)));
        assert_eq!(parse_version("OpenCL C 1.2"), None);
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn derived_uuids_are_stable_and_distinct() {
        let first = derived_uuid(&["PoCL", "pthread"]);
        assert_eq!(first, derived_uuid(&["PoCL", "pthread"]));
        assert_ne!(first, derived_uuid(&["PoCL", "pthread2"]));
        assert_ne!(first, derived_uuid(&["PoCLp", "thread"]));
        assert_eq!(first[6] >> 4, 8);
    }
}
