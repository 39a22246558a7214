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
//! first. Errors found while executing stick to the stream.
//!
//! [`RocmDriver`] implements the typed [`Driver`] trait and trusts what it is handed;
//! [`RocmBackend`] is that driver behind `xhal_backend`'s checked adapter, which owns the
//! handles and checks every argument (handles, devices, ranges, fill patterns, views) once.
#![deny(missing_docs)]

// The driver's object types are `pub` inside these private modules: `impl Driver` names them,
// and nothing outside the crate can.
mod code_object;
mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod stream;

use device::Gpu;
use instance::{Instance, LibrarySource};
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use stream::{Event, Stream};
use xhal_backend::{
    Backend, BackendInfo, Checked, DeviceInfo, Driver, KernelFormat, Launch, MemoryUsage, Object, Result,
};

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
pub struct RocmDriver {
    source: LibrarySource,
    /// Made on first use, so constructing the driver never touches the runtime.
    instance: OnceLock<Result<Arc<Instance>>>,
    /// The device open at each index, shared by every open of that index while one is live,
    /// so that `device_info` can ask the runtime for its free memory.
    opened: Mutex<HashMap<u32, Weak<Gpu>>>,
}

impl std::fmt::Debug for RocmDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocmDriver")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl RocmDriver {
    fn with_source(source: LibrarySource) -> RocmDriver {
        RocmDriver {
            source,
            instance: OnceLock::new(),
            opened: Mutex::new(HashMap::new()),
        }
    }

    /// The system's HIP runtime: `libamdhip64.so`, then `.so.7`, `.so.6` and `.so.5`, found
    /// by the dynamic loader (`LD_LIBRARY_PATH`, `/etc/ld.so.conf.d`).
    pub fn from_env() -> RocmDriver {
        RocmDriver::with_source(LibrarySource::System)
    }

    /// The HIP runtime (or a library exporting its API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> RocmDriver {
        RocmDriver::with_source(LibrarySource::Path(path.into()))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::create(&self.source).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
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

    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: Self::NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_backend::abi::XHAL_ABI_MAJOR, xhal_backend::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        // The adapter checked `index` against `device_count`, which is the adapters' number.
        let adapter = &self.instance()?.adapters[index as usize];
        let mut info = adapter.info.clone();
        info.free_memory = match self.opened.lock().get(&index).and_then(Weak::upgrade) {
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
        let instance = self.instance()?;
        let mut opened = self.opened.lock();
        if let Some(gpu) = opened.get(&index).and_then(Weak::upgrade) {
            return Ok(gpu);
        }
        let gpu = Arc::new(Gpu::open(Arc::clone(instance), index as usize)?);
        opened.insert(index, Arc::downgrade(&gpu));
        Ok(gpu)
    }

    fn device_memory_usage(&self, device: &Arc<Object<Arc<Gpu>>>) -> Result<MemoryUsage> {
        let (free, total) = device.memory_info()?;
        Ok(MemoryUsage { free, total })
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
        // SAFETY: the caller accepted `Driver::stream_write`'s contract, which is `Stream::write`'s.
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
        // SAFETY: the caller accepted `Driver::stream_read`'s contract, which is `Stream::read`'s.
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

    fn module_load(&self, device: &Arc<Object<Arc<Gpu>>>, format: KernelFormat, code: &[u8]) -> Result<Module> {
        Module::load(device, format, code)
    }

    fn kernel_get(&self, module: &Arc<Object<Module>>, name: &str) -> Result<KernelObject> {
        Module::kernel(module, name)
    }
}
