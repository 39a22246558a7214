//! xhal's Vulkan backend, on ash, with `libvulkan.so.1` opened at run time.
//!
//! Every physical device with a compute queue and Vulkan 1.2 (for timeline semaphores) is an
//! xhal device. Kernels arrive as SPIR-V (preferred; reflected and validated with naga before
//! the driver sees them) or WGSL (translated host-side with xhal-kernel). Buffer argument `i`
//! is descriptor set 0, binding `i`, a storage-buffer descriptor or, for a `Uniform` block (a
//! `var<uniform>`), a uniform-buffer one; the scalar block is the push-constant block.
//!
//! Streams record into command buffers and submit in batches ordered by a timeline semaphore
//! per stream; events are values on those semaphores, timed with timestamp queries where the
//! device has them. Memory is device-local, sub-allocated from large blocks, with staging for
//! host copies (or direct copies through the mapping where device memory is host-visible).
//!
//! With `XHAL_VULKAN_VALIDATION=1` the Khronos validation layer is enabled; each of its
//! messages is logged and makes the next call on the device fail, so a test that provokes
//! one cannot pass.
#![deny(missing_docs)]

mod gpu;
mod handles;
mod instance;
mod module;
mod stream;

pub use instance::VALIDATION_VARIABLE;

/// Set to `0` to send every host copy through staging memory and a GPU copy, as on a device
/// whose memory the host cannot map; for testing that path on devices where it can.
pub const DIRECT_COPIES_VARIABLE: &str = "XHAL_VULKAN_DIRECT_COPIES";

use gpu::{DeviceBuffer, Gpu, MemoryKind};
use handles::{HandleTable, ObjectKind};
use instance::{Instance, LoaderSource};
use module::{Module, Pipeline};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use stream::{Event, Stream};
use xhal_core::{
    Backend, BackendInfo, BufferHandle, DeviceHandle, DeviceInfo, Error, EventHandle, KernelFormat, KernelHandle,
    LaunchArgs, ModuleHandle, Result, StreamHandle,
};

xhal_core::register_static_backend!("vulkan", create_static);
xhal_core::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(VulkanBackend::from_env()))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<VulkanBackend> {
    xhal_core::plugin::init_logging();
    Ok(VulkanBackend::from_env())
}

/// The Vulkan backend. See the crate documentation.
pub struct VulkanBackend {
    source: LoaderSource,
    validation: bool,
    direct_copies: bool,
    /// Made on first use, so constructing the backend never touches the driver.
    instance: OnceLock<Result<Arc<Instance>>>,
    opened: Mutex<HashMap<u32, Weak<Gpu>>>,
    devices: HandleTable<Gpu>,
    buffers: HandleTable<DeviceBuffer>,
    streams: HandleTable<Stream>,
    events: HandleTable<Event>,
    modules: HandleTable<Module>,
    kernels: HandleTable<Pipeline>,
}

impl std::fmt::Debug for VulkanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanBackend")
            .field("source", &self.source)
            .field("validation", &self.validation)
            .finish_non_exhaustive()
    }
}

impl VulkanBackend {
    fn with_source(source: LoaderSource, validation: bool) -> VulkanBackend {
        VulkanBackend {
            source,
            validation,
            direct_copies: true,
            instance: OnceLock::new(),
            opened: Mutex::new(HashMap::new()),
            devices: HandleTable::new(ObjectKind::Device),
            buffers: HandleTable::new(ObjectKind::Buffer),
            streams: HandleTable::new(ObjectKind::Stream),
            events: HandleTable::new(ObjectKind::Event),
            modules: HandleTable::new(ObjectKind::Module),
            kernels: HandleTable::new(ObjectKind::Kernel),
        }
    }

    /// The system's Vulkan loader, with validation when [`VALIDATION_VARIABLE`] is `1`.
    pub fn from_env() -> VulkanBackend {
        let validation = std::env::var(VALIDATION_VARIABLE).is_ok_and(|value| value.trim() == "1");
        let direct_copies = std::env::var(DIRECT_COPIES_VARIABLE).map_or(true, |value| value.trim() != "0");
        VulkanBackend::with_source(LoaderSource::System, validation).with_direct_copies(direct_copies)
    }

    /// The Vulkan loader at `path` instead of the system's.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> VulkanBackend {
        VulkanBackend::with_source(LoaderSource::Path(path.into()), false)
    }

    /// The same backend with the validation layer on or off.
    pub fn with_validation(mut self, validation: bool) -> VulkanBackend {
        self.validation = validation;
        self
    }

    /// The same backend copying between the host and mapped device memory directly when the
    /// stream is idle (the default), or always through staging memory and a GPU copy.
    pub fn with_direct_copies(mut self, direct: bool) -> VulkanBackend {
        self.direct_copies = direct;
        self
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance
            .get_or_init(|| Instance::create(&self.source, self.validation).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn adapter_index(&self, index: u32) -> Result<(&Arc<Instance>, usize)> {
        let instance = self.instance()?;
        let count = instance.adapters.len();
        if index as usize >= count {
            return Err(Error::not_found(format!(
                "vulkan device {index} does not exist; this backend has {count} device(s)"
            )));
        }
        Ok((instance, index as usize))
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
                "buffer {:#x} belongs to another vulkan device than the stream",
                buffer.0
            )));
        }
        Ok(object)
    }

    fn event_on(&self, gpu: &Arc<Gpu>, event: EventHandle) -> Result<Arc<Event>> {
        let object = self.events.get(event.0)?;
        if !Arc::ptr_eq(&object.gpu, gpu) {
            return Err(Error::invalid_handle(format!(
                "event {:#x} belongs to another vulkan device than the stream",
                event.0
            )));
        }
        Ok(object)
    }
}

fn check_range(what: &str, buffer: &DeviceBuffer, offset: u64, size: u64) -> Result<()> {
    xhal_core::error::check_range(what, offset, size, buffer.allocation.size)
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        for stream in self.streams.drain() {
            let _ = stream.synchronize();
        }
    }
}

impl Backend for VulkanBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "vulkan".to_string(),
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
                let gpu = Arc::new(Gpu::open(
                    Arc::clone(instance),
                    instance.adapters[adapter_index].clone(),
                    self.direct_copies,
                )?);
                opened.insert(index, Arc::downgrade(&gpu));
                gpu
            }
        };
        Ok(DeviceHandle(self.devices.insert(gpu)))
    }

    fn device_close(&self, device: DeviceHandle) {
        self.devices.remove(device.0);
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let gpu = self.devices.get(device.0)?;
        if size == 0 {
            return Err(Error::invalid_argument("a buffer of 0 bytes holds nothing"));
        }
        if let Some(error) = gpu.validation_error() {
            return Err(error);
        }
        let buffer = DeviceBuffer::new(&gpu, size, MemoryKind::Device)?;
        Ok(BufferHandle(self.buffers.insert(Arc::new(buffer))))
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        self.buffers.remove(buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let gpu = self.devices.get(device.0)?;
        let stream = Stream::new(&gpu)?;
        Ok(StreamHandle(self.streams.insert(Arc::new(stream))))
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        if let Some(stream) = self.streams.remove(stream.0) {
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
        let pipeline = self.kernels.get(launch.kernel.0)?;
        if !Arc::ptr_eq(&pipeline.gpu, &stream.gpu) {
            return Err(Error::invalid_handle(format!(
                "kernel {:#x} was loaded on another vulkan device than the stream",
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
            buffers.push((buffer, *argument));
        }
        stream.launch(&pipeline, launch.workgroups, &buffers, launch.scalars)
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
        let gpu = self.devices.get(device.0)?;
        Ok(EventHandle(self.events.insert(Arc::new(Event::new(&gpu, timing)))))
    }

    fn event_destroy(&self, event: EventHandle) {
        self.events.remove(event.0);
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
        let gpu = self.devices.get(device.0)?;
        if let Some(error) = gpu.validation_error() {
            return Err(error);
        }
        let module = Module::load(&gpu, format, code)?;
        Ok(ModuleHandle(self.modules.insert(Arc::new(module))))
    }

    fn module_destroy(&self, module: ModuleHandle) {
        self.modules.remove(module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let pipeline = self.modules.get(module.0)?.pipeline(name)?;
        Ok(KernelHandle(self.kernels.insert(pipeline)))
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        self.kernels.remove(kernel.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use module::BindingKind;
    use xhal_core::{Launch, Runtime};

    /// Storage, uniform, storage: bindings (0, 1), (0, 4) and (1, 0) as arguments 0, 1, 2.
    const UNIFORM_BETWEEN_STORAGE: &str = r#"
struct Params { count: u32, scale: f32 }
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(1) @binding(0) var<storage, read_write> output: array<f32>;
@compute @workgroup_size(8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.count { output[id.x] = input[id.x] * params.scale; }
}
"#;

    /// The backend (with the validation layer where it is installed), and a runtime that
    /// reaches it through the public API only, or `None` where the machine has no Vulkan device.
    fn backend_and_runtime() -> Option<(Arc<VulkanBackend>, Runtime)> {
        let mut backend = Arc::new(VulkanBackend::from_env().with_validation(true));
        if backend.device_count().is_err() {
            backend = Arc::new(VulkanBackend::from_env());
        }
        if let Err(error) = backend.device_count() {
            eprintln!("SKIPPED: no Vulkan device here, so this test checked nothing: {error}");
            return None;
        }
        let runtime = Runtime::builder()
            .without_static_backends()
            .without_plugin_search()
            .backend(Arc::clone(&backend) as Arc<dyn Backend>)
            .build()
            .ok()?;
        Some((backend, runtime))
    }

    #[test]
    fn wgsl_uniforms_reach_the_pipeline_as_uniform_descriptors() {
        let Some((backend, runtime)) = backend_and_runtime() else {
            return;
        };
        let device = runtime.open("vulkan", 0).unwrap();
        let _kernel = device
            .load_wgsl(UNIFORM_BETWEEN_STORAGE)
            .unwrap()
            .kernel("main")
            .unwrap();
        let pipelines = backend.kernels.live();
        assert_eq!(pipelines.len(), 1);
        // Core translated with native uniforms, so the SPIR-V the backend got has a Uniform
        // block and the set layout a uniform-buffer descriptor for it.
        assert_eq!(
            pipelines[0].entry.bindings,
            [BindingKind::Storage, BindingKind::Uniform, BindingKind::Storage]
        );
    }

    #[test]
    fn uniform_views_past_max_uniform_buffer_range_are_refused_naming_the_argument() {
        let Some((backend, runtime)) = backend_and_runtime() else {
            return;
        };
        let Ok(instance) = backend.instance() else {
            return;
        };
        let limit = instance.adapters[0].max_uniform_buffer_range;
        let device = runtime.open("vulkan", 0).unwrap();
        let bytes = limit + u64::from(device.info().buffer_offset_alignment);
        if bytes > device.info().max_allocation_size.min(1 << 30) {
            eprintln!("SKIPPED: maxUniformBufferRange is {limit} bytes, too many to allocate past in a test");
            return;
        }
        let bytes = usize::try_from(bytes).unwrap();
        let kernel = device
            .load_wgsl(UNIFORM_BETWEEN_STORAGE)
            .unwrap()
            .kernel("main")
            .unwrap();
        let stream = device.create_stream().unwrap();
        let input = device.alloc::<f32>(8).unwrap();
        let output = device.alloc::<f32>(8).unwrap();
        let params = device.alloc::<u8>(bytes).unwrap();
        let launch = |range: std::ops::Range<usize>| {
            stream.launch(
                &Launch::new(&kernel)
                    .workgroups(1, 1, 1)
                    .buffer(&input)
                    .buffer_range(&params, range)
                    .buffer(&output),
            )
        };
        let error = launch(0..bytes).unwrap_err();
        assert_eq!(error.kind(), xhal_core::ErrorKind::Unsupported, "{error}");
        for needed in [
            "buffer argument 1",
            "maxUniformBufferRange",
            &limit.to_string(),
            &bytes.to_string(),
        ] {
            assert!(error.message().contains(needed), "`{needed}` is missing from: {error}");
        }
        // A view of exactly the limit binds; the same bytes as storage would have too.
        launch(0..limit as usize).unwrap();
        stream.synchronize().unwrap();
    }
}
