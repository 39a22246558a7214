//! The driver library, NVRTC, every device, and what each device is and can do.

use crate::ffi::{self, call, raw_call, sys, CUdevice, CUresult};
use crate::nvrtc;
use std::ffi::{c_char, c_int};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use xhal_backend::{DeviceInfo, DeviceType, Error, ErrorKind, Features, KernelFormat, LibrarySource, Result};

/// One CUDA device, as found.
pub(crate) struct Adapter {
    pub(crate) device: CUdevice,
    pub(crate) info: DeviceInfo,
    /// `major * 10 + minor`, as in `sm_90`.
    pub(crate) compute_capability: u32,
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`: buffers come from the stream-ordered pool.
    pub(crate) memory_pools: bool,
    /// `cuDriverGetVersion`: `12040` for CUDA 12.4.
    pub(crate) driver_version: i32,
    /// The driver has stream capture and executable graphs (CUDA 11.4 and later): command
    /// lists (ABI 1.4) are graphs captured from a stream of their own.
    pub(crate) graphs: bool,
    /// Bytes this backend holds on the device, for the free-memory figure.
    pub(crate) allocated: Arc<AtomicU64>,
}

/// The loaded driver and the usable devices.
pub(crate) struct Instance {
    pub(crate) adapters: Vec<Adapter>,
}

fn driver_unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::DriverUnavailable, message)
}

/// Opens `path` for good (plugins and drivers are never unloaded) and checks that cudarc's
/// search by name lands on it.
fn preload(path: &std::path::Path) -> Result<()> {
    if !path.exists() {
        return Err(driver_unavailable(format!(
            "there is no CUDA driver library at {}; install the NVIDIA driver or point at its libcuda.so.1",
            path.display()
        )));
    }
    // SAFETY: opening a driver library runs its initialisers, as any CUDA program does.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|error| driver_unavailable(format!("opening the CUDA driver library {}: {error}", path.display())))?;
    // SAFETY: only the address is compared, never called through this handle.
    let ours = unsafe { library.get::<unsafe extern "C" fn(u32) -> CUresult>(b"cuInit") }
        .map(|symbol| *symbol as usize)
        .map_err(|error| driver_unavailable(format!("{} exports no cuInit: {error}", path.display())))?;
    std::mem::forget(library);
    ffi::library_status().map_err(|_| {
        driver_unavailable(format!(
            "{} was opened, but the CUDA bindings find the driver by name (libcuda.so, then versioned names down to \
             libcuda.so.1) and none of those names is it: name the file libcuda.so.1, or build it with that soname",
            path.display()
        ))
    })?;
    let found = std::panic::catch_unwind(|| {
        // SAFETY: the library is present (checked above); only an address is read.
        unsafe { sys::culib().get::<unsafe extern "C" fn(u32) -> CUresult>(b"cuInit") }
            .map(|symbol| *symbol as usize)
            .ok()
    })
    .ok()
    .flatten();
    if found != Some(ours) {
        return Err(driver_unavailable(format!(
            "the CUDA bindings opened another driver library than {} (a libcuda.so found first on the library \
             path, or one opened earlier in this process); one process uses one CUDA driver",
            path.display()
        )));
    }
    Ok(())
}

impl Instance {
    /// Opens the driver, initialises it and describes every device.
    pub(crate) fn create(source: &LibrarySource) -> Result<Instance> {
        if let LibrarySource::Path(path) = source {
            preload(path)?;
        }
        ffi::library_status()?;
        // SAFETY: cuInit takes flags, which must be 0.
        let code = raw_call("cuInit", || unsafe { sys::cuInit(0) })?;
        match code {
            CUresult::CUDA_SUCCESS => {}
            CUresult::CUDA_ERROR_NO_DEVICE => {
                return Err(driver_unavailable(
                    "the CUDA driver found no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE (100)); check that an NVIDIA \
                     GPU is installed and visible (CUDA_VISIBLE_DEVICES, container device access)",
                ))
            }
            code => {
                let error = ffi::cuda_error("cuInit", code, ffi::quiet);
                return Err(driver_unavailable(format!(
                    "the CUDA driver did not start: {}; check the NVIDIA kernel module (nvidia-smi) and that the driver \
                     and its library match",
                    error.message()
                )));
            }
        }
        let mut version: c_int = 0;
        // SAFETY: writes one int.
        call("cuDriverGetVersion", ffi::quiet, || unsafe {
            sys::cuDriverGetVersion(&mut version)
        })?;
        let mut count: c_int = 0;
        // SAFETY: writes one int.
        call("cuDeviceGetCount", ffi::quiet, || unsafe {
            sys::cuDeviceGetCount(&mut count)
        })
        .map_err(|error| driver_unavailable(error.message().to_string()))?;
        if count <= 0 {
            return Err(driver_unavailable(format!(
                "the CUDA driver ({}) found no CUDA device (cuDeviceGetCount returned 0); check that an NVIDIA GPU is \
                 installed and visible (CUDA_VISIBLE_DEVICES, container device access)",
                version_text(version)
            )));
        }
        let nvrtc = nvrtc::version();
        match (nvrtc::library_path(), nvrtc::unavailable_reason()) {
            (Some(path), _) => tracing::debug!(path, "NVRTC opened"),
            (None, Some(reason)) => {
                tracing::warn!(reason, "CUDA devices take no cuda-c, so WGSL kernels cannot reach them")
            }
            (None, None) => {}
        }
        let mut adapters = Vec::new();
        let mut refused = Vec::new();
        for ordinal in 0..count {
            match describe(ordinal, version, nvrtc) {
                Ok(adapter) => adapters.push(adapter),
                Err(error) => {
                    tracing::warn!(ordinal, %error, "CUDA device skipped");
                    refused.push(format!("device {ordinal}: {}", error.message()));
                }
            }
        }
        if adapters.is_empty() {
            return Err(driver_unavailable(format!(
                "the CUDA driver ({}) lists {count} device(s) but none is usable: {}",
                version_text(version),
                refused.join("; ")
            )));
        }
        Ok(Instance { adapters })
    }
}

/// `12080` → `CUDA 12.8`.
pub(crate) fn version_text(version: c_int) -> String {
    format!("CUDA {}.{}", version / 1000, (version % 1000) / 10)
}

fn attribute(device: CUdevice, attribute: sys::CUdevice_attribute) -> Result<i32> {
    let mut value: c_int = 0;
    call(
        "cuDeviceGetAttribute",
        || format!("reading {attribute:?} of CUDA device {device}"),
        // SAFETY: writes one int for a device the driver listed.
        || unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) },
    )?;
    Ok(value)
}

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// A NUL-terminated byte buffer as text.
fn c_text(bytes: &[c_char]) -> String {
    let bytes: Vec<u8> = bytes.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The parameter space of a launch: 4 KiB on every CUDA device.
const PARAMETER_BYTES: u32 = 4096;
/// Of which the scalar block may take this much.
const SCALAR_BLOCK_BYTES: u32 = 1024;

/// Describes device `ordinal`.
fn describe(ordinal: c_int, driver_version: c_int, nvrtc: Option<(i32, i32)>) -> Result<Adapter> {
    use sys::CUdevice_attribute as A;
    let mut device: CUdevice = 0;
    call(
        "cuDeviceGet",
        || format!("device {ordinal}"),
        // SAFETY: writes one device for an ordinal below the count.
        || unsafe { sys::cuDeviceGet(&mut device, ordinal) },
    )?;
    let mut name = [0 as c_char; 256];
    call(
        "cuDeviceGetName",
        || format!("device {ordinal}"),
        // SAFETY: the buffer holds 256 bytes; the driver writes a NUL-terminated name.
        || unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, device) },
    )?;
    let name = c_text(&name);
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    call(
        "cuDeviceGetUuid_v2",
        || format!("device {ordinal}"),
        // SAFETY: writes one 16-byte uuid.
        || unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, device) },
    )?;
    let uuid = uuid.bytes.map(|byte| byte as u8);
    let mut bus = [0 as c_char; 64];
    // SAFETY: the buffer holds 64 bytes, more than the 13 the id takes.
    let pci_bus_id = call(
        "cuDeviceGetPCIBusId",
        || format!("device {ordinal}"),
        || unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as c_int, device) },
    )
    .ok()
    .map(|()| c_text(&bus).to_ascii_lowercase())
    .filter(|text| !text.is_empty());
    let mut total_memory: usize = 0;
    call(
        "cuDeviceTotalMem_v2",
        || format!("device {ordinal}"),
        // SAFETY: writes one size.
        || unsafe { sys::cuDeviceTotalMem_v2(&mut total_memory, device) },
    )?;
    let total_memory = total_memory as u64;
    let major = attribute(device, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(device, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let compute_capability = to_u32(major * 10 + minor);
    let multiprocessors = attribute(device, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let integrated = attribute(device, A::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0;
    let max_threads = attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    let block = [
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
    ];
    let grid = [
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
    ];
    let shared_memory = attribute(device, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
    let warp = attribute(device, A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?;
    let memory_pools = attribute(device, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0) != 0;
    if major < 5 {
        return Err(Error::unsupported(format!(
            "{name} has compute capability {major}.{minor}; xhal needs 5.0 or later"
        )));
    }

    // Every device of compute capability 5.0 or later has 32- and 64-bit atomics (including
    // 64-bit min/max, from 3.5), doubles, 64-bit integers and timing events. f16 from 5.3, the
    // first with half precision: the emitted CUDA C converts with PTX's cvt and computes in
    // f32, rounding each operation.
    let mut features =
        Features::ATOMICS_32 | Features::ATOMICS_64 | Features::I64 | Features::F64 | Features::TIMESTAMPS;
    if compute_capability >= 53 {
        features = features | Features::F16;
    }
    let mut kernel_formats = Vec::new();
    if nvrtc.is_some() {
        kernel_formats.push(KernelFormat::CUDA_C);
    }
    kernel_formats.push(KernelFormat::CUBIN);
    kernel_formats.push(KernelFormat::PTX);

    let pointer_bytes = 8;
    let buffer_arguments = (PARAMETER_BYTES - SCALAR_BLOCK_BYTES - 8) / (pointer_bytes + 8);
    let info = DeviceInfo {
        name,
        vendor: "NVIDIA".to_string(),
        vendor_id: 0x10de,
        device_id: 0,
        device_type: if integrated {
            DeviceType::IntegratedGpu
        } else {
            DeviceType::DiscreteGpu
        },
        uuid,
        pci_bus_id,
        driver_version: format!(
            "{}, {}, compute capability {major}.{minor} (sm_{compute_capability}), {multiprocessors} SMs",
            version_text(driver_version),
            nvrtc.map_or("no NVRTC".to_string(), |(major, minor)| format!(
                "NVRTC {major}.{minor}"
            ))
        ),
        total_memory,
        free_memory: total_memory,
        max_allocation_size: total_memory,
        max_workgroup_size: block.map(to_u32),
        max_workgroup_invocations: to_u32(max_threads),
        max_workgroup_count: grid.map(to_u32),
        max_workgroup_memory: to_u32(shared_memory),
        subgroup_size: to_u32(warp).max(1),
        max_buffer_arguments: buffer_arguments,
        max_scalar_block_size: SCALAR_BLOCK_BYTES,
        // WGSL's largest alignment (vec4, mat columns); CUDA's loads of a type need its alignment.
        buffer_offset_alignment: 16,
        features,
        kernel_formats,
    };
    let graphs = has_graph_entry_points();
    tracing::debug!(name = %info.name, compute_capability, multiprocessors, memory_pools, graphs, "CUDA device found");
    Ok(Adapter {
        device,
        info,
        compute_capability,
        memory_pools,
        driver_version,
        graphs,
        allocated: Arc::new(AtomicU64::new(0)),
    })
}

/// Whether the loaded driver exports every entry point command lists use; cudarc would panic
/// on a call to a missing one.
fn has_graph_entry_points() -> bool {
    const ENTRY_POINTS: [&[u8]; 6] = [
        b"cuStreamBeginCapture_v2\0",
        b"cuStreamEndCapture\0",
        b"cuGraphInstantiateWithFlags\0",
        b"cuGraphLaunch\0",
        b"cuGraphExecDestroy\0",
        b"cuGraphDestroy\0",
    ];
    // SAFETY: the library is the one cudarc loaded (preloaded and checked before); only the
    // presence of each symbol is read.
    let library = unsafe { sys::culib() };
    ENTRY_POINTS
        .iter()
        // SAFETY: as above; the symbol is not called here.
        .all(|name| unsafe { library.get::<*const ()>(*name) }.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_read_as_major_and_minor() {
        assert_eq!(version_text(12080), "CUDA 12.8");
        assert_eq!(version_text(13000), "CUDA 13.0");
        assert_eq!(version_text(11040), "CUDA 11.4");
    }

    #[test]
    fn c_text_stops_at_the_nul() {
        let bytes = [b'H' as c_char, b'2' as c_char, 0, b'x' as c_char];
        assert_eq!(c_text(&bytes), "H2");
    }
}
