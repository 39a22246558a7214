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

mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod reflect;
mod stream;

use device::{Gpu, OpenedDevices};
use instance::{Instance, LoaderSource};
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use std::sync::{Arc, OnceLock};
use stream::{Event, Stream};
use xhal_backend::{Backend, BackendInfo, Checked, DeviceInfo, Driver, KernelFormat, Launch, Object, Result};

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
pub struct OpenClDriver {
    source: LoaderSource,
    /// Made on first use, so constructing the driver never touches the loader.
    instance: OnceLock<Result<Arc<Instance>>>,
    opened: OpenedDevices,
}

impl std::fmt::Debug for OpenClDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClDriver")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl OpenClDriver {
    fn with_source(source: LoaderSource) -> OpenClDriver {
        OpenClDriver {
            source,
            instance: OnceLock::new(),
            opened: OpenedDevices::default(),
        }
    }

    /// The system's OpenCL loader (`libOpenCL.so.1`), which finds drivers through its own
    /// configuration (`/etc/OpenCL/vendors`, `OCL_ICD_VENDORS`).
    pub fn from_env() -> OpenClDriver {
        OpenClDriver::with_source(LoaderSource::System)
    }

    /// The OpenCL loader (or a driver library exporting the API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> OpenClDriver {
        OpenClDriver::with_source(LoaderSource::Path(path.into()))
    }

    /// Makes the stream's next command fail while executing, as a device fault would, so
    /// tests can reach the sticky-error paths on a driver where nothing faults safely.
    #[doc(hidden)]
    pub fn inject_execution_failure(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.inject_execution_failure()
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::create(&self.source).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
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

    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_backend::abi::XHAL_ABI_MAJOR, xhal_backend::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        Ok(self.instance()?.device_info(index as usize))
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        self.opened.open(self.instance()?, index)
    }

    fn buffer_allocate(&self, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
        DeviceBuffer::new(device, size)
    }

    fn stream_create(&self, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        Stream::new(device)
    }

    fn stream_sticky_error(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.sticky_error()
    }

    unsafe fn stream_write(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        // SAFETY: the caller accepted `stream_write`'s contract, which `Stream::write` repeats.
        unsafe { stream.write(buffer, offset, source, size) }
    }

    unsafe fn stream_read(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        // SAFETY: the caller accepted `stream_read`'s contract, which `Stream::read` repeats.
        unsafe { stream.read(buffer, offset, destination, size) }
    }

    fn stream_copy(
        &self,
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: &Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        stream.copy(source, source_offset, destination, destination_offset, size)
    }

    fn stream_fill(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        stream.fill(buffer, offset, size, pattern)
    }

    fn stream_launch(&self, stream: &Arc<Object<Stream>>, launch: &Launch<'_, Self>) -> Result<()> {
        launch
            .kernel
            .launch(stream, launch.workgroups, launch.buffers, launch.scalars)
    }

    fn stream_record_event(&self, stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        stream.record_event(event)
    }

    fn stream_wait_event(&self, stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        stream.wait_event(event)
    }

    fn stream_synchronize(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.synchronize()
    }

    fn stream_query(&self, stream: &Arc<Object<Stream>>) -> Result<bool> {
        stream.query()
    }

    fn event_create(&self, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        Event::new(device, timing)
    }

    fn event_query(&self, event: &Arc<Object<Event>>) -> Result<bool> {
        event.query()
    }

    fn event_synchronize(&self, event: &Arc<Object<Event>>) -> Result<()> {
        event.synchronize()
    }

    fn event_elapsed_time(&self, start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        Event::elapsed_nanoseconds(start, start.handle(), end, end.handle())
    }

    fn module_load(&self, device: &Arc<Object<Arc<Gpu>>>, format: KernelFormat, code: &[u8]) -> Result<Arc<Module>> {
        Module::load(device, format, code).map(Arc::new)
    }

    fn kernel_get(&self, module: &Arc<Object<Arc<Module>>>, name: &str) -> Result<KernelObject> {
        module.kernel(name)
    }
}
