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
#![deny(missing_docs)]

mod code_object;
mod ffi;
mod gpu;
mod instance;
mod module;
mod source;
mod stream;

use gpu::{DeviceBuffer, Gpu};
use instance::{Instance, LibrarySource};
use module::{KernelObject, Module};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use stream::{Event, Stream};
use xhal_core::handles::{HandleTable, ObjectKind};
use xhal_core::{
    Backend, BackendInfo, BufferHandle, DeviceHandle, DeviceInfo, Error, EventHandle, KernelFormat, KernelHandle,
    LaunchArgs, ModuleHandle, Result, StreamHandle,
};

/// The backend's name.
const NAME: &str = "rocm";

xhal_core::register_static_backend!(NAME, create_static);
xhal_core::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RocmBackend::from_env()))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<RocmBackend> {
    xhal_core::plugin::init_logging();
    Ok(RocmBackend::from_env())
}

/// The ROCm (HIP) backend. See the crate documentation.
pub struct RocmBackend {
    source: LibrarySource,
    /// Made on first use, so constructing the backend never touches the driver.
    instance: OnceLock<Result<Arc<Instance>>>,
    opened: Mutex<HashMap<u32, Weak<Gpu>>>,
    devices: HandleTable<Arc<Gpu>>,
    buffers: HandleTable<DeviceBuffer>,
    streams: HandleTable<Stream>,
    events: HandleTable<Event>,
    modules: HandleTable<Arc<Module>>,
    kernels: HandleTable<KernelObject>,
}

impl std::fmt::Debug for RocmBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocmBackend")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl RocmBackend {
    fn with_source(source: LibrarySource) -> RocmBackend {
        RocmBackend {
            source,
            instance: OnceLock::new(),
            opened: Mutex::new(HashMap::new()),
            devices: HandleTable::new(NAME, ObjectKind::Device),
            buffers: HandleTable::new(NAME, ObjectKind::Buffer),
            streams: HandleTable::new(NAME, ObjectKind::Stream),
            events: HandleTable::new(NAME, ObjectKind::Event),
            modules: HandleTable::new(NAME, ObjectKind::Module),
            kernels: HandleTable::new(NAME, ObjectKind::Kernel),
        }
    }

    /// The system's HIP runtime: `libamdhip64.so`, then `.so.7`, `.so.6` and `.so.5`, found
    /// by the dynamic loader (`LD_LIBRARY_PATH`, `/etc/ld.so.conf.d`).
    pub fn from_env() -> RocmBackend {
        RocmBackend::with_source(LibrarySource::System)
    }

    /// The HIP runtime (or a library exporting its API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> RocmBackend {
        RocmBackend::with_source(LibrarySource::Path(path.into()))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::create(&self.source).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn adapter_index(&self, index: u32) -> Result<(&Arc<Instance>, usize)> {
        let instance = self.instance()?;
        let count = instance.adapters.len();
        if index as usize >= count {
            return Err(Error::not_found(format!(
                "rocm device {index} does not exist; this backend has {count} device(s)"
            )));
        }
        Ok((instance, index as usize))
    }

    fn device(&self, device: DeviceHandle) -> Result<Arc<Gpu>> {
        Ok(Arc::clone(&*self.devices.get(device.0)?))
    }

    fn stream_and_buffer(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
    ) -> Result<(Arc<Stream>, Arc<DeviceBuffer>)> {
        let stream = self.streams.get(stream.0)?;
        let buffer = self.buffer_on(&stream.gpu, buffer)?;
        Ok((stream, buffer))
    }

    fn buffer_on(&self, gpu: &Arc<Gpu>, buffer: BufferHandle) -> Result<Arc<DeviceBuffer>> {
        let object = self.buffers.get(buffer.0)?;
        if !Arc::ptr_eq(&object.gpu, gpu) {
            return Err(Error::invalid_handle(format!(
                "buffer {:#x} belongs to another rocm device than the stream",
                buffer.0
            )));
        }
        Ok(object)
    }

    fn event_on(&self, gpu: &Arc<Gpu>, event: EventHandle) -> Result<Arc<Event>> {
        let object = self.events.get(event.0)?;
        if !Arc::ptr_eq(&object.gpu, gpu) {
            return Err(Error::invalid_handle(format!(
                "event {:#x} belongs to another rocm device than the stream",
                event.0
            )));
        }
        Ok(object)
    }
}

fn check_range(what: &str, buffer: &DeviceBuffer, offset: u64, size: u64) -> Result<()> {
    xhal_core::error::check_range(what, offset, size, buffer.size)
}

impl Drop for RocmBackend {
    fn drop(&mut self) {
        for stream in self.streams.drain() {
            let _ = stream.synchronize();
        }
    }
}

impl Backend for RocmBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_core::abi::XHAL_ABI_MAJOR, xhal_core::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        let (instance, index) = self.adapter_index(index)?;
        let adapter = &instance.adapters[index];
        let mut info = adapter.info.clone();
        info.free_memory = match self.opened.lock().get(&(index as u32)).and_then(Weak::upgrade) {
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

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        let (instance, adapter_index) = self.adapter_index(index)?;
        let mut opened = self.opened.lock();
        let gpu = match opened.get(&index).and_then(Weak::upgrade) {
            Some(gpu) => gpu,
            None => {
                let gpu = Arc::new(Gpu::open(Arc::clone(instance), adapter_index)?);
                opened.insert(index, Arc::downgrade(&gpu));
                gpu
            }
        };
        Ok(DeviceHandle(self.devices.insert_with(|_| Ok(gpu))?))
    }

    fn device_close(&self, device: DeviceHandle) {
        let _ = self.devices.remove(device.0);
    }

    fn device_memory_usage(&self, device: DeviceHandle) -> Result<xhal_core::MemoryUsage> {
        let (free, total) = self.device(device)?.memory_info()?;
        Ok(xhal_core::MemoryUsage { free, total })
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let gpu = self.device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("a buffer of 0 bytes holds nothing"));
        }
        let buffer = DeviceBuffer::new(&gpu, size)?;
        Ok(BufferHandle(self.buffers.insert_with(|_| Ok(buffer))?))
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        let _ = self.buffers.remove(buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let gpu = self.device(device)?;
        let stream = Stream::new(&gpu)?;
        Ok(StreamHandle(self.streams.insert_with(|_| Ok(stream))?))
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        if let Ok(stream) = self.streams.remove(stream.0) {
            if let Err(error) = stream.synchronize() {
                tracing::warn!(%error, "a destroyed stream's work failed");
            }
        }
    }

    unsafe fn stream_write(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let (stream, buffer) = self.stream_and_buffer(stream, buffer)?;
        check_range("write", &buffer, offset, size)?;
        if source.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "write of {size} bytes from a null host pointer"
            )));
        }
        // SAFETY: the caller accepted `stream_write`'s contract; the range was checked.
        unsafe { stream.write(&buffer, offset, source, size) }
    }

    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let (stream, buffer) = self.stream_and_buffer(stream, buffer)?;
        check_range("read", &buffer, offset, size)?;
        if destination.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "read of {size} bytes into a null host pointer"
            )));
        }
        // SAFETY: the caller accepted `stream_read`'s contract; the range was checked.
        unsafe { stream.read(&buffer, offset, destination, size) }
    }

    fn stream_copy(
        &self,
        stream: StreamHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let (stream, source) = self.stream_and_buffer(stream, source)?;
        let destination = self.buffer_on(&stream.gpu, destination)?;
        check_range("copy source", &source, source_offset, size)?;
        check_range("copy destination", &destination, destination_offset, size)?;
        stream.copy(&source, source_offset, &destination, destination_offset, size)
    }

    fn stream_fill(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let (stream, buffer) = self.stream_and_buffer(stream, buffer)?;
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "a fill pattern has 1, 2 or 4 bytes, not {}",
                pattern.len()
            )));
        }
        let length = pattern.len() as u64;
        if !offset.is_multiple_of(length) || !size.is_multiple_of(length) {
            return Err(Error::invalid_argument(format!(
                "fill: offset {offset} and size {size} must be multiples of the {length}-byte pattern"
            )));
        }
        check_range("fill", &buffer, offset, size)?;
        stream.fill(&buffer, offset, size, pattern)
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let stream = self.streams.get(stream.0)?;
        let kernel = self.kernels.get(launch.kernel.0)?;
        if !Arc::ptr_eq(kernel.gpu(), &stream.gpu) {
            return Err(Error::invalid_handle(format!(
                "kernel {:#x} was loaded on another rocm device than the stream",
                launch.kernel.0
            )));
        }
        let mut buffers = Vec::with_capacity(launch.buffers.len());
        for (index, argument) in launch.buffers.iter().enumerate() {
            let buffer = self.buffer_on(&stream.gpu, argument.buffer)?;
            check_range(
                &format!("buffer argument {index}"),
                &buffer,
                argument.offset,
                argument.size,
            )?;
            if argument.size == 0 {
                return Err(Error::invalid_argument(format!(
                    "buffer argument {index} is a view of 0 bytes; a kernel cannot bind no memory"
                )));
            }
            buffers.push((buffer, *argument));
        }
        kernel.launch(&stream, launch.workgroups, &buffers, launch.scalars)
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.streams.get(stream.0)?;
        let event = self.event_on(&stream.gpu, event)?;
        stream.record_event(&event)
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.streams.get(stream.0)?;
        let event = self.event_on(&stream.gpu, event)?;
        stream.wait_event(&event)
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.streams.get(stream.0)?.synchronize()
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        self.streams.get(stream.0)?.query()
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        let gpu = self.device(device)?;
        let event = Event::new(&gpu, timing)?;
        Ok(EventHandle(self.events.insert_with(|_| Ok(event))?))
    }

    fn event_destroy(&self, event: EventHandle) {
        let _ = self.events.remove(event.0);
    }

    fn event_query(&self, event: EventHandle) -> Result<bool> {
        self.events.get(event.0)?.query()
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        self.events.get(event.0)?.synchronize()
    }

    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        let first = self.events.get(start.0)?;
        let last = self.events.get(end.0)?;
        Event::elapsed_nanoseconds(&first, start.0, &last, end.0)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let gpu = self.device(device)?;
        let module = Arc::new(Module::load(&gpu, format, code)?);
        Ok(ModuleHandle(self.modules.insert_with(|_| Ok(module))?))
    }

    fn module_destroy(&self, module: ModuleHandle) {
        let _ = self.modules.remove(module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let module = self.modules.get(module.0)?;
        let kernel = module.kernel(name)?;
        Ok(KernelHandle(self.kernels.insert_with(|_| Ok(kernel))?))
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        let _ = self.kernels.remove(kernel.0);
    }
}
