//! xhal's CUDA backend: the CUDA driver API and NVRTC through cudarc, loaded at run time.
//!
//! Nothing from CUDA is needed to build. When the backend is first asked for its devices it
//! checks that cudarc finds the driver library (`libcuda.so`, down to `libcuda.so.1`) before
//! any cudarc call, and guards every call against cudarc's panics (a missing library or entry
//! point): a machine without the driver, or with no device, gets a `DriverUnavailable` error
//! with the reason, and every CUDA error code becomes an xhal error naming the call and the
//! CUDA error (`cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2) (...)`).
//!
//! Every CUDA device of compute capability 5.0 or later is an xhal device, opened through its
//! primary context, which is made current on the calling thread for every call. Buffers come
//! from the stream-ordered memory pool (`cuMemAllocAsync`) where the device supports it, else
//! from `cuMemAlloc`; host transfers go through pinned staging blocks, so they never block.
//! Streams are non-blocking CUDA streams; events are CUDA events, timed with
//! `cuEventElapsedTime` when created with timing.
//!
//! Kernels arrive as `ptx`, `cubin`, or `cuda-c` source compiled by NVRTC for the device's
//! architecture (offered only where NVRTC is found). They follow the xhal argument ABI:
//! buffer argument `i` is pointer parameter `i` (the view's device address), then the scalar
//! block as one by-value parameter when the kernel has scalars, then, for kernels emitted from
//! WGSL that declare it, the buffer-lengths parameter the backend fills. Entry points are
//! looked up by `xhal_kernel::c::c_symbol(name)`, then by `name`; the workgroup size comes from
//! the module (see `reflect`).
//!
//! [`CudaDriver`] implements the typed [`Driver`], and each object type its role trait where
//! it lives (`device.rs`, `memory.rs`, `stream.rs`, `module.rs`); the host sees it as
//! [`CudaBackend`], the driver behind the checked adapter, which does every check of handles,
//! device ownership, ranges, fill patterns and views before a method here runs.
#![deny(missing_docs)]

mod command_list;
mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod nvrtc;
mod reflect;
mod stream;

use device::Gpu;
use instance::Instance;
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stream::{Event, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, LazyInstance, LibrarySource, Result};

xhal_backend::register_static_backend!(CudaDriver::NAME, create_static);
xhal_backend::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CudaBackend::new(CudaDriver::from_env())))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<CudaBackend> {
    xhal_backend::init_logging();
    Ok(CudaBackend::new(CudaDriver::from_env()))
}

/// The CUDA backend as the host sees it: [`CudaDriver`] behind the checked adapter.
pub type CudaBackend = Checked<CudaDriver>;

/// The CUDA driver. See the crate documentation.
#[derive(Debug)]
pub struct CudaDriver {
    /// Made on first use, so constructing the driver never touches the CUDA driver library.
    instance: LazyInstance<Instance>,
}

impl CudaDriver {
    fn with_source(source: LibrarySource) -> CudaDriver {
        CudaDriver {
            instance: LazyInstance::new(source),
        }
    }

    /// The CUDA driver library the system's loader finds by name (`libcuda.so`, then the
    /// versioned names down to `libcuda.so.1`, on the library path).
    pub fn from_env() -> CudaDriver {
        CudaDriver::with_source(LibrarySource::System)
    }

    /// The CUDA driver library (or a library exporting its API) at `path`. cudarc opens the
    /// driver by name, once per process: the library is opened first so that the search
    /// finds it by its soname, and the driver refuses to start when the search lands on
    /// another one.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> CudaDriver {
        CudaDriver::with_source(LibrarySource::path(path))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance.get(Instance::create)
    }
}

impl Driver for CudaDriver {
    type Device = Arc<Gpu>;
    type Buffer = DeviceBuffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Arc<Module>;
    type Kernel = KernelObject;

    const NAME: &'static str = "cuda";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32, opened: Option<&Arc<Gpu>>) -> Result<DeviceInfo> {
        let adapter = &self.instance()?.adapters[index as usize];
        let mut info = adapter.info.clone();
        // The free-memory figure asks the opened device, where there is one.
        info.free_memory = opened.and_then(|gpu| gpu.free_memory()).unwrap_or_else(|| {
            info.total_memory
                .saturating_sub(adapter.allocated.load(Ordering::Relaxed))
        });
        Ok(info)
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        // The adapter shares this device among every open of the index: its primary context,
        // allocation stream and staging pool.
        Ok(Arc::new(Gpu::open(Arc::clone(self.instance()?), index as usize)?))
    }
}
