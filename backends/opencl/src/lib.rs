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
//! which the device reports as its `buffer_offset_alignment`, and other offsets are refused
//! with an error naming it.
//!
//! Streams are in-order command queues (with profiling where the device has it, for timing
//! events); every command is enqueued without blocking and flushed. Events are markers;
//! waiting for one on another stream is a barrier with the marker in its wait list; elapsed
//! time is the difference of the markers' `CL_PROFILING_COMMAND_END`.
#![deny(missing_docs)]

mod ffi;
mod gpu;
mod instance;
mod layout;
mod module;
mod stream;

use gpu::{DeviceBuffer, Gpu};
use instance::{Instance, LoaderSource};
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
const NAME: &str = "opencl";

xhal_core::register_static_backend!(NAME, create_static);
xhal_core::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(OpenClBackend::from_env()))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<OpenClBackend> {
    xhal_core::plugin::init_logging();
    Ok(OpenClBackend::from_env())
}

/// The OpenCL backend. See the crate documentation.
pub struct OpenClBackend {
    source: LoaderSource,
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

impl std::fmt::Debug for OpenClBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClBackend")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl OpenClBackend {
    fn with_source(source: LoaderSource) -> OpenClBackend {
        OpenClBackend {
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

    /// The system's OpenCL loader (`libOpenCL.so.1`), which finds drivers through its own
    /// configuration (`/etc/OpenCL/vendors`, `OCL_ICD_VENDORS`).
    pub fn from_env() -> OpenClBackend {
        OpenClBackend::with_source(LoaderSource::System)
    }

    /// The OpenCL loader (or a driver library exporting the API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> OpenClBackend {
        OpenClBackend::with_source(LoaderSource::Path(path.into()))
    }

    /// Makes the stream's next command fail while executing, as a device fault would, so
    /// tests can reach the sticky-error paths on a driver where nothing faults safely.
    #[doc(hidden)]
    pub fn inject_execution_failure(&self, stream: StreamHandle) -> Result<()> {
        self.streams.get(stream.0)?.inject_execution_failure()
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
                "opencl device {index} does not exist; this backend has {count} device(s)"
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
                "buffer {:#x} belongs to another opencl device than the stream",
                buffer.0
            )));
        }
        Ok(object)
    }

    fn event_on(&self, gpu: &Arc<Gpu>, event: EventHandle) -> Result<Arc<Event>> {
        let object = self.events.get(event.0)?;
        if !Arc::ptr_eq(&object.gpu, gpu) {
            return Err(Error::invalid_handle(format!(
                "event {:#x} belongs to another opencl device than the stream",
                event.0
            )));
        }
        Ok(object)
    }
}

fn check_range(what: &str, buffer: &DeviceBuffer, offset: u64, size: u64) -> Result<()> {
    xhal_core::error::check_range(what, offset, size, buffer.size)
}

impl Drop for OpenClBackend {
    fn drop(&mut self) {
        for stream in self.streams.drain() {
            let _ = stream.synchronize();
        }
    }
}

impl Backend for OpenClBackend {
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
        info.free_memory = info
            .total_memory
            .saturating_sub(adapter.allocated.load(Ordering::Relaxed));
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
                "kernel {:#x} was loaded on another opencl device than the stream",
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
