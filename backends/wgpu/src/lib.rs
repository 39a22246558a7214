//! xhal backend on wgpu: one xhal device per wgpu adapter, whatever API sits underneath
//! (Vulkan, GL, Metal, DX12).
//!
//! Kernels are WGSL (format `wgsl`), handed to wgpu as written; the argument ABI maps
//! directly: buffer `i` is `@group(0) @binding(i)` and the scalar block is the kernel's
//! `var<immediate>`, set with `ComputePass::set_immediates`. Streams record into command
//! encoders and submit to the device's one queue; events are submission indices plus the
//! completions (work done, reads copied out) that must finish with them. Reads go through
//! mappable staging buffers; copies, fills and writes that are not 4-byte aligned run a
//! small transfer kernel, since wgpu only moves whole words.
//!
//! Every wgpu call runs inside error scopes and its errors come back as xhal errors on the
//! call or its stream; wgpu's default handler, which panics, is replaced for whatever
//! escapes. The device name carries the wgpu backend, as in `llvmpipe (LLVM 15.0.6, 256
//! bits) (Vulkan)`, so known-failure declarations can name one API.
#![deny(missing_docs)]

mod adapter;
mod completion;
mod device;
mod event;
mod kernel;
mod memory;
mod staging;
mod stream;
mod validation;
#[cfg(all(unix, not(target_vendor = "apple"), not(target_os = "android")))]
mod wayland_log;

use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use xhal_core::{
    Backend, BackendInfo, BufferHandle, DeviceHandle, DeviceInfo, Error, ErrorKind, EventHandle, KernelFormat,
    KernelHandle, LaunchArgs, ModuleHandle, Result, StreamHandle,
};

use adapter::AdapterEntry;
use device::DeviceShared;
use event::Event;
use kernel::{KernelPipeline, Module};
use memory::Buffer;
use stream::Stream;
use xhal_core::handles::{HandleTable, ObjectKind};

xhal_core::register_static_backend!("wgpu", create_static);
xhal_core::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(WgpuBackend::new()))
}

fn create_plugin() -> Result<WgpuBackend> {
    xhal_core::plugin::init_logging();
    Ok(WgpuBackend::new())
}

/// Instance flags chosen on purpose rather than from the build type. In debug builds wgpu
/// turns on both `DEBUG` (naga then writes the WGSL source into each SPIR-V module's
/// `OpSource`, as source language 10) and Vulkan validation, and the Khronos layer packaged
/// on Debian 12 (1.3.239) predates language 10 and reports every shader module as invalid.
/// So neither is on by default; `WGPU_DEBUG=1` and `WGPU_VALIDATION=1` (honoured through
/// `with_env`) turn them on, and the layer's messages are then forwarded to `tracing`, that
/// one known message downgraded (see the `validation` module). The layer only ever logs: its
/// messages never become API errors. wgpu's own validation, which turns misuse into errors,
/// is always on.
fn instance_flags() -> wgpu::InstanceFlags {
    wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL.with_env()
}

/// The wgpu backend. See the crate documentation.
pub struct WgpuBackend {
    adapters: Vec<AdapterEntry>,
    /// Why adapters were left out, for the error when none is usable.
    skipped: Vec<String>,
    /// The open wgpu device of each adapter, shared by every open of it.
    open: Mutex<Vec<Weak<DeviceShared>>>,
    devices: HandleTable<Arc<DeviceShared>>,
    buffers: HandleTable<Buffer>,
    streams: HandleTable<Stream>,
    events: HandleTable<Event>,
    modules: HandleTable<Module>,
    kernels: HandleTable<Arc<KernelPipeline>>,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.adapters.iter().map(|entry| entry.info.name.as_str()).collect();
        f.debug_struct("WgpuBackend")
            .field("adapters", &names)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl Default for WgpuBackend {
    fn default() -> Self {
        WgpuBackend::new()
    }
}

impl WgpuBackend {
    /// Enumerates the adapters of every wgpu backend. A missing driver leaves no adapter;
    /// it never fails here, `device_count` says why.
    pub fn new() -> WgpuBackend {
        let flags = instance_flags();
        if flags.contains(wgpu::InstanceFlags::VALIDATION) {
            validation::forward_wgpu_log();
        }
        let descriptor = wgpu::InstanceDescriptor {
            backends: wgpu::Backends::all().with_env(),
            flags,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        };
        #[cfg(all(unix, not(target_vendor = "apple"), not(target_os = "android")))]
        wayland_log::quiet_when_unreachable();
        let instance = wgpu::Instance::new(descriptor);
        let (adapters, skipped) = adapter::enumerate(&instance);
        let open = Mutex::new(adapters.iter().map(|_| Weak::new()).collect());
        WgpuBackend {
            adapters,
            skipped,
            open,
            devices: HandleTable::new("wgpu", ObjectKind::Device),
            buffers: HandleTable::new("wgpu", ObjectKind::Buffer),
            streams: HandleTable::new("wgpu", ObjectKind::Stream),
            events: HandleTable::new("wgpu", ObjectKind::Event),
            modules: HandleTable::new("wgpu", ObjectKind::Module),
            kernels: HandleTable::new("wgpu", ObjectKind::Kernel),
        }
    }

    fn adapter(&self, index: u32) -> Result<&AdapterEntry> {
        self.adapters.get(index as usize).ok_or_else(|| {
            Error::not_found(format!(
                "wgpu device {index} does not exist; this backend has {} device(s)",
                self.adapters.len()
            ))
        })
    }

    fn device(&self, device: DeviceHandle) -> Result<Arc<DeviceShared>> {
        self.devices.get(device.0).map(|shared| Arc::clone(&*shared))
    }

    fn stream(&self, stream: StreamHandle) -> Result<Arc<Stream>> {
        self.streams.get(stream.0)
    }

    fn buffer_for(&self, stream: &Stream, buffer: BufferHandle) -> Result<Arc<Buffer>> {
        let buffer = self.buffers.get(buffer.0)?;
        same_device(ObjectKind::Buffer, buffer.id, buffer.device.index, stream)?;
        Ok(buffer)
    }

    fn event_for(&self, stream: &Stream, event: EventHandle) -> Result<Arc<Event>> {
        let found = self.events.get(event.0)?;
        same_device(ObjectKind::Event, found.id, found.device.index, stream)?;
        Ok(found)
    }

    fn release<T>(table: &HandleTable<T>, raw: u64) -> Option<Arc<T>> {
        if raw == 0 {
            return None;
        }
        table
            .remove(raw)
            .map_err(|error| tracing::warn!(%error, "ignored a destroy call"))
            .ok()
    }
}

fn same_device(kind: ObjectKind, id: u64, device_index: u32, stream: &Stream) -> Result<()> {
    if device_index == stream.device.index {
        return Ok(());
    }
    Err(Error::invalid_handle(format!(
        "{} {id:#x} belongs to wgpu device {device_index}, the stream is on device {}",
        kind.name(),
        stream.device.index
    )))
}

impl Drop for WgpuBackend {
    fn drop(&mut self) {
        for stream in self.streams.drain() {
            if let Err(error) = stream.synchronize() {
                tracing::debug!(%error, "a stream failed before the backend shut down");
            }
        }
    }
}

impl Backend for WgpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "wgpu".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_core::abi::XHAL_ABI_MAJOR, xhal_core::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        if self.adapters.is_empty() {
            let reason = if self.skipped.is_empty() {
                "wgpu found no adapter on any backend (no Vulkan, Metal, DX12 or GL driver answered)".to_string()
            } else {
                format!(
                    "wgpu found no adapter that can run xhal kernels: {}",
                    self.skipped.join("; ")
                )
            };
            return Err(Error::new(ErrorKind::DriverUnavailable, reason));
        }
        Ok(self.adapters.len() as u32)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        Ok(self.adapter(index)?.info.clone())
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        let entry = self.adapter(index)?;
        let shared = {
            let mut open = self.open.lock();
            match open[index as usize].upgrade() {
                Some(shared) => shared,
                None => {
                    let shared = Arc::new(DeviceShared::open(index, entry)?);
                    open[index as usize] = Arc::downgrade(&shared);
                    shared
                }
            }
        };
        self.devices.insert_with(|_| Ok(shared)).map(DeviceHandle)
    }

    fn device_close(&self, device: DeviceHandle) {
        WgpuBackend::release(&self.devices, device.0);
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let device = self.device(device)?;
        self.buffers
            .insert_with(|id| Buffer::allocate(id, &device, size))
            .map(BufferHandle)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        WgpuBackend::release(&self.buffers, buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let device = self.device(device)?;
        device.check_alive()?;
        self.streams
            .insert_with(|id| Ok(Stream::new(id, device)))
            .map(StreamHandle)
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        if let Some(stream) = WgpuBackend::release(&self.streams, stream.0) {
            if let Err(error) = stream.synchronize() {
                tracing::debug!(stream = format_args!("{:#x}", stream.id), %error, "destroyed a failed stream");
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
        let stream = self.stream(stream)?;
        stream.check_usable()?;
        let buffer = self.buffer_for(&stream, buffer)?;
        buffer.check_range("write", offset, size)?;
        if size == 0 {
            return Ok(());
        }
        if source.is_null() {
            return Err(Error::invalid_argument(format!(
                "write of {size} bytes to buffer {:#x} from a null host pointer",
                buffer.id
            )));
        }
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_bounds(format!("a write of {size} bytes exceeds this host's address space")))?;
        // SAFETY: the caller guarantees `size` readable bytes at `source` until the write
        // completes; they are copied into wgpu's staging memory before this call returns.
        let data = unsafe { std::slice::from_raw_parts(source, length) };
        stream.write(&buffer, offset, data)
    }

    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        stream.check_usable()?;
        let buffer = self.buffer_for(&stream, buffer)?;
        buffer.check_range("read", offset, size)?;
        if size == 0 {
            return Ok(());
        }
        if destination.is_null() {
            return Err(Error::invalid_argument(format!(
                "read of {size} bytes from buffer {:#x} into a null host pointer",
                buffer.id
            )));
        }
        usize::try_from(size)
            .map_err(|_| Error::out_of_bounds(format!("a read of {size} bytes exceeds this host's address space")))?;
        // SAFETY: the caller's contract for `destination` is exactly `Stream::read`'s.
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
        let stream = self.stream(stream)?;
        stream.check_usable()?;
        let source = self.buffer_for(&stream, source)?;
        let destination = self.buffer_for(&stream, destination)?;
        source.check_range("copy source", source_offset, size)?;
        destination.check_range("copy destination", destination_offset, size)?;
        if size == 0 {
            return Ok(());
        }
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
        let stream = self.stream(stream)?;
        stream.check_usable()?;
        let buffer = self.buffer_for(&stream, buffer)?;
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill pattern of {} bytes; a pattern has 1, 2 or 4 bytes",
                pattern.len()
            )));
        }
        let width = pattern.len() as u64;
        if !offset.is_multiple_of(width) || !size.is_multiple_of(width) {
            return Err(Error::invalid_argument(format!(
                "fill of buffer {:#x}: offset {offset} and size {size} must be multiples of the {width}-byte pattern",
                buffer.id
            )));
        }
        buffer.check_range("fill", offset, size)?;
        if size == 0 {
            return Ok(());
        }
        stream.fill(&buffer, offset, size, pattern)
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let stream = self.stream(stream)?;
        stream.check_usable()?;
        let kernel = self.kernels.get(launch.kernel.0)?;
        same_device(ObjectKind::Kernel, launch.kernel.0, kernel.device.index, &stream)?;
        if launch.buffers.len() != kernel.buffer_count {
            return Err(Error::invalid_argument(format!(
                "kernel `{}` takes {} buffer(s), but {} were given",
                kernel.name,
                kernel.buffer_count,
                launch.buffers.len()
            )));
        }
        let limit = stream.device.limits.max_compute_workgroups_per_dimension;
        if launch.workgroups.iter().any(|&count| count > limit) {
            return Err(Error::invalid_argument(format!(
                "launch of kernel `{}` with {:?} workgroups; {} allows at most {limit} per dimension",
                kernel.name,
                launch.workgroups,
                stream.device.name()
            )));
        }
        let mut buffers = Vec::with_capacity(launch.buffers.len());
        for argument in launch.buffers {
            let buffer = self.buffer_for(&stream, argument.buffer)?;
            buffer.check_range("buffer argument", argument.offset, argument.size)?;
            buffers.push((buffer, argument.offset, argument.size));
        }
        stream.launch(&kernel, launch.workgroups, &buffers, launch.scalars)
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.stream(stream)?;
        let event = self.event_for(&stream, event)?;
        let signal = stream.record(event.timing)?;
        event.set_latest(signal);
        Ok(())
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.stream(stream)?;
        let event = self.event_for(&stream, event)?;
        match event.latest() {
            Some(signal) => stream.wait_for(&signal, event.id),
            None => stream.check_usable(),
        }
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.stream(stream)?.synchronize()
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        self.stream(stream)?.query()
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        let device = self.device(device)?;
        if timing && !device.info.features.contains(xhal_core::Features::TIMESTAMPS) {
            return Err(Error::unsupported(format!(
                "{} has no timestamps; create the event without timing",
                device.name()
            )));
        }
        self.events
            .insert_with(|id| Ok(Event::new(id, device, timing)))
            .map(EventHandle)
    }

    fn event_destroy(&self, event: EventHandle) {
        WgpuBackend::release(&self.events, event.0);
    }

    fn event_query(&self, event: EventHandle) -> Result<bool> {
        self.events.get(event.0)?.query()
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        self.events.get(event.0)?.synchronize()
    }

    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        let start = self.events.get(start.0)?;
        let end = self.events.get(end.0)?;
        if !start.timing || !end.timing {
            return Err(Error::invalid_argument(format!(
                "elapsed time needs two events created with timing; event {:#x} or {:#x} has none",
                start.id, end.id
            )));
        }
        let start_ticks = start.completed_timestamp()?;
        let end_ticks = end.completed_timestamp()?;
        if end_ticks < start_ticks {
            return Err(Error::invalid_argument(format!(
                "event {:#x} completed before event {:#x}; elapsed time runs from the earlier to the later",
                end.id, start.id
            )));
        }
        let period = f64::from(start.device.queue.get_timestamp_period());
        Ok(((end_ticks - start_ticks) as f64 * period).round() as u64)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let device = self.device(device)?;
        if format != KernelFormat::WGSL {
            return Err(Error::unsupported(format!(
                "kernel format {format} is not supported by the wgpu backend; it accepts {}",
                KernelFormat::WGSL
            )));
        }
        let module = Module::load_wgsl(&device, code)?;
        self.modules.insert_with(|_| Ok(module)).map(ModuleHandle)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        WgpuBackend::release(&self.modules, module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let loaded = self.modules.get(module.0)?;
        let pipeline = loaded.kernel(module.0, name)?;
        self.kernels.insert_with(|_| Ok(pipeline)).map(KernelHandle)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        WgpuBackend::release(&self.kernels, kernel.0);
    }
}
