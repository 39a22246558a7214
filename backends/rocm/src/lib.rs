//! xhal's ROCm backend: AMD GPUs through the HIP runtime (`libamdhip64`), opened at run time.
//!
//! The HIP API is a hand-declared function table resolved with `libloading` from
//! `libamdhip64.so`, then `.so.7`, `.so.6` and `.so.5`, so nothing from ROCm is needed to
//! build: a machine without the runtime, or without an AMD GPU, gets a `DriverUnavailable`
//! error with the reason. Only calls whose signatures and constants are the same from ROCm
//! 5.0 to ROCm 7 are used; device properties come from `hipDeviceGetAttribute`, never from
//! `hipDeviceProp_t`, whose layout changed between those releases.
//!
//! Kernels arrive as AMD GPU code objects (`hsaco`, loaded with `hipModuleLoadData`), or as
//! HIP C source (`hip-c`) compiled by hiprtc (`libhiprtc.so`, `.so.7`, `.so.6`, `.so.5`, or
//! the runtime itself before ROCm 5.3) for the device's target (`--offload-arch=gfx…`, read
//! from the amdgpu driver's topology, or hiprtc's own choice of the current device). `hip-c`
//! is offered only where hiprtc loads. Kernels follow the xhal argument ABI: buffer argument
//! `i` is pointer parameter `i` (the buffer's address plus the view's offset), and the scalar
//! block, when the kernel has scalars, is one more by-value parameter; a kernel emitted from
//! WGSL may end with the buffer-lengths parameter, which the backend fills. Parameters and
//! their sizes are read from the source and from the code object's metadata, and checked
//! before a launch. The workgroup size comes from `reqd_work_group_size` or, for HIP C written
//! by `xhal_kernel::c`, from the `@workgroup_size` it was written for.
//!
//! Streams are non-blocking HIP streams, events are HIP events (with timing when asked).
//! HIP's current device belongs to each thread, so every call that depends on it sets it
//! first. Errors found while executing stick to the stream. Command lists (ABI 1.4) are HIP
//! graphs captured from a stream of their own, where the runtime has the graph calls.
//!
//! [`RocmDriver`] implements the typed [`Driver`] trait, and each object type its role trait
//! where it lives (`device.rs`, `memory.rs`, `stream.rs`, `module.rs`); they trust what they
//! are handed. [`RocmBackend`] is that driver behind `xhal_backend`'s checked adapter, which
//! owns the handles and checks every argument (handles, devices, ranges, fill patterns, views)
//! once.
#![deny(missing_docs)]

// The driver's object types are `pub` inside these private modules: `impl Driver` names them,
// and nothing outside the crate can.
mod code_object;
mod command_list;
mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod stream;

use device::Gpu;
use instance::Instance;
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stream::{Event, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, LazyInstance, LibrarySource, Result};

xhal_backend::register_static_backend!(RocmDriver::NAME, create_static);
xhal_backend::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RocmBackend::new(RocmDriver::from_env())))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<RocmBackend> {
    xhal_backend::init_logging();
    Ok(RocmBackend::new(RocmDriver::from_env()))
}

/// The ROCm backend as the host and the plugin export see it: [`RocmDriver`] behind the
/// checked adapter. `RocmBackend::new(RocmDriver::from_env())`.
pub type RocmBackend = Checked<RocmDriver>;

/// The ROCm (HIP) driver. See the crate documentation.
#[derive(Debug)]
pub struct RocmDriver {
    /// Made on first use, so constructing the driver never touches the runtime.
    instance: LazyInstance<Instance>,
}

impl RocmDriver {
    fn with_source(source: LibrarySource) -> RocmDriver {
        RocmDriver {
            instance: LazyInstance::new(source),
        }
    }

    /// The system's HIP runtime: `libamdhip64.so`, then `.so.7`, `.so.6` and `.so.5`, found
    /// by the dynamic loader (`LD_LIBRARY_PATH`, `/etc/ld.so.conf.d`).
    pub fn from_env() -> RocmDriver {
        RocmDriver::with_source(LibrarySource::System)
    }

    /// The HIP runtime (or a library exporting its API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> RocmDriver {
        RocmDriver::with_source(LibrarySource::path(path))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance.get(Instance::create)
    }
}

impl Driver for RocmDriver {
    type Device = Arc<Gpu>;
    type Buffer = DeviceBuffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    type Kernel = KernelObject;
    const NAME: &'static str = "rocm";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32, opened: Option<&Arc<Gpu>>) -> Result<DeviceInfo> {
        // The adapter checked `index` against `device_count`, which is the adapters' number.
        let adapter = &self.instance()?.adapters[index as usize];
        let mut info = adapter.info.clone();
        info.free_memory = match opened {
            // The runtime's figure counts every process; it needs the device made current.
            Some(gpu) => gpu.memory_info().map(|(free, _)| free).ok(),
            None => None,
        }
        .unwrap_or_else(|| {
            info.total_memory
                .saturating_sub(adapter.allocated.load(Ordering::Relaxed))
        });
        Ok(info)
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        // The adapter shares this device among every open of the index while one is live, and
        // hands it to `device_info`, which asks the runtime for its free memory.
        Ok(Arc::new(Gpu::open(Arc::clone(self.instance()?), index as usize)?))
    }
}
