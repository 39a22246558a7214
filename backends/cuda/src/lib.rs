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
//! [`CudaDriver`] implements the typed [`Driver`]; the host sees it as [`CudaBackend`], the
//! driver behind the checked adapter, which does every check of handles, device ownership,
//! ranges, fill patterns and views before a method here runs.
#![deny(missing_docs)]

mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod nvrtc;
mod reflect;
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
pub struct CudaDriver {
    source: LibrarySource,
    /// Made on first use, so constructing the driver never touches the CUDA driver library.
    instance: OnceLock<Result<Arc<Instance>>>,
    /// Every open of one device index shares its primary context, allocation stream and
    /// staging pool; the free-memory figure asks the opened device.
    opened: Mutex<HashMap<u32, Weak<Gpu>>>,
}

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl CudaDriver {
    fn with_source(source: LibrarySource) -> CudaDriver {
        CudaDriver {
            source,
            instance: OnceLock::new(),
            opened: Mutex::new(HashMap::new()),
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
        CudaDriver::with_source(LibrarySource::Path(path.into()))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::create(&self.source).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
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
        let adapter = &self.instance()?.adapters[index as usize];
        let mut info = adapter.info.clone();
        let opened = self.opened.lock().get(&index).and_then(Weak::upgrade);
        info.free_memory = opened.and_then(|gpu| gpu.free_memory()).unwrap_or_else(|| {
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
        device.memory_usage()
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

    fn module_load(&self, device: &Arc<Object<Arc<Gpu>>>, format: KernelFormat, code: &[u8]) -> Result<Arc<Module>> {
        Module::load(device, format, code).map(Arc::new)
    }

    fn kernel_get(&self, module: &Arc<Object<Arc<Module>>>, name: &str) -> Result<KernelObject> {
        module.kernel(name)
    }
}
