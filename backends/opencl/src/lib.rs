//! xhal's OpenCL backend, with the ICD loader `libOpenCL.so.1` opened at run time.
//!
//! Every device of every platform the loader finds (CPU, GPU, accelerator) that speaks
//! OpenCL 1.2 or later is an xhal device. The OpenCL API is a hand-declared function table
//! resolved with `libloading`, so nothing OpenCL is needed to build: a machine without the
//! loader, or without any driver behind it, gets a `DriverUnavailable` error with the reason.
//!
//! Kernels arrive as OpenCL C source (`opencl-c`, built with `-cl-kernel-arg-info`), or as
//! SPIR-V (`spirv-kernel`) on devices whose `CL_DEVICE_IL_VERSION` names it. They follow the
//! xhal argument ABI: buffer argument `i` is pointer parameter `i`, and the scalar block, when
//! the kernel has scalars, is one more by-value parameter. Each kernel declares its workgroup
//! size with `__attribute__((reqd_work_group_size(X, Y, Z)))`; a kernel without it is refused
//! when it is looked up. Arguments are checked against the parameters before a launch.
//!
//! WGSL reaches this backend as OpenCL C written by `xhal_kernel::c` (translated host-side by
//! xhal-core). Such a kernel may end with one more by-value parameter, `lengths` of a struct
//! type `xh_lengths_<entry>`: one `ulong` per buffer parameter (at least one), the byte length
//! of each bound view in binding order. The backend sees it in the reflected parameters and
//! fills it at every launch; the caller never passes it. An entry point is looked up by the C
//! name the emitter gives it (`xhal_kernel::c::c_symbol`: `main` is `main_`, `step` is
//! `step_`), then by its own name. 64-bit atomics are claimed where the device lists both
//! `cl_khr_int64_base_atomics` and `cl_khr_int64_extended_atomics`; f16 where it lists
//! `cl_khr_fp16` (WGSL's f16 is written as `half`, each operation rounded as in WGSL).
//!
//! A buffer argument with an offset becomes a sub-buffer, since OpenCL C kernels take plain
//! pointers; a sub-buffer's origin must be a multiple of `CL_DEVICE_MEM_BASE_ADDR_ALIGN`,
//! which the device reports as its `buffer_offset_alignment`, so the checked adapter refuses
//! other offsets.
//!
//! Streams are in-order command queues (with profiling where the device has it, for timing
//! events); every command is enqueued without blocking and flushed. Events are markers;
//! waiting for one on another stream is a barrier with the marker in its wait list; elapsed
//! time is the difference of the markers' `CL_PROFILING_COMMAND_END`.
//!
//! [`OpenClDriver`] is the typed driver; [`OpenClBackend`] is it behind the checked adapter
//! ([`Checked`]), which owns the handles and does every argument check before a driver method
//! runs: `OpenClBackend::new(OpenClDriver::from_env())`.
#![deny(missing_docs)]

mod command_list;
mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod reflect;
mod stream;

use device::Gpu;
use instance::Instance;
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use std::sync::Arc;
use stream::{Event, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, LazyInstance, LibrarySource, Object, Result};

/// The backend's name.
const NAME: &str = "opencl";

xhal_backend::register_static_backend!(NAME, create_static);
xhal_backend::export_plugin!(create_plugin);

/// The OpenCL backend as the host sees it: [`OpenClDriver`] behind the checked adapter.
pub type OpenClBackend = Checked<OpenClDriver>;

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(OpenClBackend::new(OpenClDriver::from_env())))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<OpenClBackend> {
    xhal_backend::init_logging();
    Ok(OpenClBackend::new(OpenClDriver::from_env()))
}

/// The OpenCL driver. See the crate documentation.
#[derive(Debug)]
pub struct OpenClDriver {
    /// Made on first use, so constructing the driver never touches the loader.
    instance: LazyInstance<Instance>,
}

impl OpenClDriver {
    fn with_source(source: LibrarySource) -> OpenClDriver {
        OpenClDriver {
            instance: LazyInstance::new(source),
        }
    }

    /// The system's OpenCL loader (`libOpenCL.so.1`), which finds drivers through its own
    /// configuration (`/etc/OpenCL/vendors`, `OCL_ICD_VENDORS`).
    pub fn from_env() -> OpenClDriver {
        OpenClDriver::with_source(LibrarySource::System)
    }

    /// The OpenCL loader (or a driver library exporting the API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> OpenClDriver {
        OpenClDriver::with_source(LibrarySource::path(path))
    }

    /// Makes the stream's next command fail while executing, as a device fault would, so
    /// tests can reach the sticky-error paths on a driver where nothing faults safely.
    #[doc(hidden)]
    pub fn inject_execution_failure(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.inject_execution_failure()
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance.get(Instance::create)
    }
}

// The object types are `pub` in private modules: the trait needs them public, and outside the
// crate they stay opaque, reached only through the adapter's accessors.
impl Driver for OpenClDriver {
    type Device = Arc<Gpu>;
    type Buffer = DeviceBuffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Arc<Module>;
    type Kernel = KernelObject;
    const NAME: &'static str = NAME;
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32, _opened: Option<&Arc<Gpu>>) -> Result<DeviceInfo> {
        Ok(self.instance()?.device_info(index as usize))
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        // The adapter shares this one context among every open of the index while any is live,
        // which OpenCL needs: it lets a buffer, event or kernel made through one device handle
        // be used on a stream made through another, and OpenCL objects work only within the
        // context that made them.
        Gpu::open(Arc::clone(self.instance()?), index as usize).map(Arc::new)
    }
}
