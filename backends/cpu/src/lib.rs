//! xhal's CPU reference backend: strict, deterministic, always present.
//!
//! This backend is the executable specification the other backends are held to. It checks
//! every handle, range and argument itself even though `xhal-core` already did, poisons fresh
//! memory with [`POISON_PATTERN`], faults (instead of clamping) when a kernel would index past
//! its buffer view, and gives every stream its own worker thread so that streams really run
//! concurrently and ordering bugs show up here first.
//!
//! Objects are named by opaque, never-reused handles; the host never sees a pointer into
//! device memory. Configure it with [`CpuConfig`] or the `XHAL_CPU_DEVICES` and
//! `XHAL_CPU_MEMORY` environment variables.
//!
//! Kernels are WGSL compute shaders (format `wgsl`), interpreted with the language's full
//! compute semantics: all invocations of a workgroup run in lockstep over lanes, workgroups
//! run in parallel across cores, an out-of-bounds index is a `KernelFault` naming the
//! kernel, binding and index, and a kernel running past [`KERNEL_TIMEOUT_VARIABLE`] is
//! stopped with `Timeout`. The [`BuiltinKernel`]s (format `cpu-builtin`) remain for tests
//! that need a kernel without a compiler.
//!
//! WGSL kernels also run compiled: translated to C, built by the system C compiler into a
//! cached shared object, one call per workgroup on every core, with the same bounds faults
//! and time limit. [`MODE_VARIABLE`] (`XHAL_CPU_MODE=interpret|compile|auto`, default
//! `auto`) chooses; see [`KernelMode`].
//!
//! [`executor`] exposes the WGSL executor on its own, so that a backend whose memory is host
//! memory can run kernels over its own byte slices.
//!
//! This crate is a library that exports no plugin symbol: `xhal` links it as the built-in
//! `cpu` backend, `backends/cpu-plugin` exports it as `libxhal_cpu.so`, and another plugin
//! may wrap or reuse it and export a table of its own.
#![deny(missing_docs)]

mod config;
mod device;
mod event;
pub mod executor;
mod kernels;
mod memory;
mod native;
mod stream;
mod wgsl;

pub use wgsl::interpreter_fallbacks;

#[cfg(test)]
mod tests;

pub use config::{
    default_memory_per_device, CpuConfig, DEFAULT_KERNEL_TIMEOUT, DEVICES_VARIABLE, FALLBACK_MEMORY_PER_DEVICE,
    KERNEL_TIMEOUT_VARIABLE, MEMORY_VARIABLE,
};
pub use kernels::BuiltinKernel;
pub use memory::POISON_PATTERN;
pub use native::{
    compile_stats, CompileStats, KernelMode, CACHE_DIR_VARIABLE, CFLAGS_VARIABLE, COMPILER_VARIABLE, MODE_VARIABLE,
};

use config::KernelTimeout;
use device::DeviceMemory;
use event::Event;
use kernels::{Kernel, Module, PreparedLaunch};
use memory::{Buffer, FillPattern, HostDestination, HostSource};
use std::sync::Arc;
use std::time::Duration;
use stream::{Operation, Stream};
use xhal_core::handles::{HandleTable, ObjectKind};
use xhal_core::{
    Backend, BackendInfo, BufferHandle, DeviceHandle, DeviceInfo, Error, EventHandle, KernelFormat, KernelHandle,
    LaunchArgs, ModuleHandle, Result, StreamHandle,
};

xhal_core::register_static_backend!("cpu", create_static);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CpuBackend::from_env()?))
}

/// The CPU reference backend. See the crate documentation.
pub struct CpuBackend {
    config: CpuConfig,
    kernel_timeout: KernelTimeout,
    strict_bounds: bool,
    /// How WGSL kernels run, or why [`MODE_VARIABLE`] could not be read (then every WGSL
    /// module load fails with that error).
    kernel_mode: Result<KernelMode>,
    /// Created on first use, so a huge `devices` count costs nothing until a device is used.
    devices: parking_lot::Mutex<std::collections::HashMap<u32, Arc<DeviceMemory>>>,
    opened_devices: HandleTable<Arc<DeviceMemory>>,
    buffers: HandleTable<Buffer>,
    streams: HandleTable<Stream>,
    events: HandleTable<Event>,
    modules: HandleTable<Module>,
    kernels: HandleTable<Kernel>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("config", &self.config)
            .field("kernel_timeout", &self.kernel_timeout)
            .field("strict_bounds", &self.strict_bounds)
            .field("kernel_mode", &self.kernel_mode)
            .finish_non_exhaustive()
    }
}

impl CpuBackend {
    /// A backend with exactly this shape. The kernel time limit comes from
    /// [`KERNEL_TIMEOUT_VARIABLE`] (a malformed value fails each WGSL launch, naming the
    /// variable); [`with_kernel_timeout`](CpuBackend::with_kernel_timeout) overrides it.
    pub fn with_config(config: CpuConfig) -> CpuBackend {
        CpuBackend {
            config,
            kernel_timeout: KernelTimeout::from_lookup(|name| std::env::var_os(name)),
            strict_bounds: true,
            kernel_mode: KernelMode::from_lookup(|name| std::env::var_os(name)),
            devices: parking_lot::Mutex::default(),
            opened_devices: HandleTable::new("cpu", ObjectKind::Device),
            buffers: HandleTable::new("cpu", ObjectKind::Buffer),
            streams: HandleTable::new("cpu", ObjectKind::Stream),
            events: HandleTable::new("cpu", ObjectKind::Event),
            modules: HandleTable::new("cpu", ObjectKind::Module),
            kernels: HandleTable::new("cpu", ObjectKind::Kernel),
        }
    }

    /// A backend configured by [`CpuConfig::from_env`].
    pub fn from_env() -> Result<CpuBackend> {
        Ok(CpuBackend::with_config(CpuConfig::from_env()?))
    }

    /// The same backend with WGSL kernels limited to `limit` of run time, whatever
    /// [`KERNEL_TIMEOUT_VARIABLE`] says.
    pub fn with_kernel_timeout(mut self, limit: Duration) -> CpuBackend {
        self.kernel_timeout = KernelTimeout::Limit(limit);
        self
    }

    /// The same backend with strict bounds checking on (the default) or off. Strict, an
    /// out-of-bounds index in a WGSL kernel fails the launch with `KernelFault`, naming the
    /// kernel, the binding and the index. Off, the index is clamped to the array, which is
    /// one of the outcomes WGSL allows and what robust-buffer-access GPUs do.
    pub fn with_strict_bounds(mut self, strict: bool) -> CpuBackend {
        self.strict_bounds = strict;
        self
    }

    /// The same backend running WGSL kernels as `mode` says, whatever [`MODE_VARIABLE`] says.
    pub fn with_kernel_mode(mut self, mode: KernelMode) -> CpuBackend {
        self.kernel_mode = Ok(mode);
        self
    }

    /// How this backend runs WGSL kernels (an error when [`MODE_VARIABLE`] is malformed).
    pub fn kernel_mode(&self) -> Result<KernelMode> {
        self.kernel_mode.clone()
    }

    /// The configuration this backend was built with.
    pub fn config(&self) -> CpuConfig {
        self.config
    }

    fn device_memory(&self, index: u32) -> Result<Arc<DeviceMemory>> {
        if index >= self.config.devices {
            return Err(Error::not_found(format!(
                "cpu device {index} does not exist; this backend has {} device(s)",
                self.config.devices
            )));
        }
        let memory_per_device = self.config.memory_per_device;
        let mut devices = self.devices.lock();
        let memory = devices
            .entry(index)
            .or_insert_with(|| Arc::new(DeviceMemory::new(index, memory_per_device)));
        Ok(Arc::clone(memory))
    }

    fn opened_device(&self, device: DeviceHandle) -> Result<Arc<DeviceMemory>> {
        self.opened_devices.get(device.0).map(|memory| Arc::clone(&*memory))
    }

    /// The stream, refusing it at once when it has a sticky error.
    fn usable_stream(&self, stream: StreamHandle) -> Result<Arc<Stream>> {
        let stream = self.streams.get(stream.0)?;
        stream.check_usable()?;
        Ok(stream)
    }

    fn buffer_for(&self, stream: &Stream, buffer: BufferHandle) -> Result<Arc<Buffer>> {
        let buffer = self.buffers.get(buffer.0)?;
        same_device(ObjectKind::Buffer, buffer.id(), buffer.device_index(), stream)?;
        Ok(buffer)
    }

    fn event_for(&self, stream: &Stream, event: EventHandle) -> Result<Arc<Event>> {
        let event = self.events.get(event.0)?;
        same_device(ObjectKind::Event, event.id(), event.device_index(), stream)?;
        Ok(event)
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
    if device_index == stream.device_index() {
        return Ok(());
    }
    Err(Error::invalid_handle(format!(
        "{} {id:#x} belongs to cpu device {device_index}, the stream is on device {}",
        kind.name(),
        stream.device_index()
    )))
}

impl Drop for CpuBackend {
    /// Cancels every stream's remaining work first and joins the workers second, so that a
    /// stream waiting on another never holds up the shutdown.
    fn drop(&mut self) {
        let streams = self.streams.drain();
        for stream in &streams {
            stream.begin_shutdown(true);
        }
        for stream in &streams {
            stream.join();
        }
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "cpu".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_core::abi::XHAL_ABI_MAJOR, xhal_core::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.config.devices)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        Ok(self.device_memory(index)?.info())
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        let memory = self.device_memory(index)?;
        self.opened_devices.insert_with(|_| Ok(memory)).map(DeviceHandle)
    }

    fn device_close(&self, device: DeviceHandle) {
        CpuBackend::release(&self.opened_devices, device.0);
    }

    fn device_memory_usage(&self, device: DeviceHandle) -> Result<xhal_core::MemoryUsage> {
        let memory = self.opened_device(device)?;
        Ok(xhal_core::MemoryUsage {
            free: memory.free(),
            total: self.config.memory_per_device,
        })
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let memory = self.opened_device(device)?;
        self.buffers
            .insert_with(|id| Buffer::allocate(id, &memory, size))
            .map(BufferHandle)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        CpuBackend::release(&self.buffers, buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let index = self.opened_device(device)?.index();
        self.streams
            .insert_with(|id| Stream::spawn(id, index))
            .map(StreamHandle)
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        if let Some(stream) = CpuBackend::release(&self.streams, stream.0) {
            stream.destroy();
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
        let stream = self.usable_stream(stream)?;
        let buffer = self.buffer_for(&stream, buffer)?;
        let range = buffer.byte_range("write", offset, size)?;
        if source.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "write of {size} bytes to buffer {:#x} from a null host pointer",
                buffer.id()
            )));
        }
        // SAFETY: our caller accepted `stream_write`'s contract for `source`, which is exactly
        // what `HostSource::new` requires.
        let source = unsafe { HostSource::new(source) };
        stream.enqueue(Operation::Write { buffer, range, source })
    }

    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let buffer = self.buffer_for(&stream, buffer)?;
        let range = buffer.byte_range("read", offset, size)?;
        if destination.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "read of {size} bytes from buffer {:#x} into a null host pointer",
                buffer.id()
            )));
        }
        // SAFETY: our caller accepted `stream_read`'s contract for `destination`, which is
        // exactly what `HostDestination::new` requires.
        let destination = unsafe { HostDestination::new(destination) };
        stream.enqueue(Operation::Read {
            buffer,
            range,
            destination,
        })
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
        let stream = self.usable_stream(stream)?;
        let source = self.buffer_for(&stream, source)?;
        let destination = self.buffer_for(&stream, destination)?;
        let source_range = source.byte_range("copy source", source_offset, size)?;
        let destination_range = destination.byte_range("copy destination", destination_offset, size)?;
        stream.enqueue(Operation::Copy {
            source,
            source_range,
            destination,
            destination_start: destination_range.start,
        })
    }

    fn stream_fill(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let buffer = self.buffer_for(&stream, buffer)?;
        let pattern = FillPattern::new(pattern)?;
        if !offset.is_multiple_of(pattern.len()) || !size.is_multiple_of(pattern.len()) {
            return Err(Error::invalid_argument(format!(
                "fill of buffer {:#x}: offset {offset} and size {size} must be multiples of the {}-byte pattern",
                buffer.id(),
                pattern.len()
            )));
        }
        let range = buffer.byte_range("fill", offset, size)?;
        stream.enqueue(Operation::Fill { buffer, range, pattern })
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let kernel = self.kernels.get(launch.kernel.0)?;
        same_device(ObjectKind::Kernel, launch.kernel.0, kernel.device_index, &stream)?;
        let mut buffers = Vec::with_capacity(launch.buffers.len());
        for argument in launch.buffers {
            let buffer = self.buffer_for(&stream, argument.buffer)?;
            buffers.push((buffer, argument.offset, argument.size));
        }
        let prepared = PreparedLaunch::new(
            &kernel.code,
            launch.workgroups,
            buffers,
            launch.scalars,
            &self.kernel_timeout,
            self.strict_bounds,
        )?;
        stream.enqueue(Operation::Launch(prepared))
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let event = self.event_for(&stream, event)?;
        stream.enqueue_with(|| {
            Some(Operation::Record {
                signal: event.begin_record(),
            })
        })
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let event = self.event_for(&stream, event)?;
        stream.enqueue_with(|| {
            event.latest().map(|signal| Operation::Wait {
                event_id: event.id(),
                signal,
            })
        })
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.streams.get(stream.0)?.synchronize()
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        self.streams.get(stream.0)?.query()
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        let index = self.opened_device(device)?.index();
        self.events
            .insert_with(|id| Ok(Event::new(id, index, timing)))
            .map(EventHandle)
    }

    fn event_destroy(&self, event: EventHandle) {
        CpuBackend::release(&self.events, event.0);
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
        Event::elapsed_nanoseconds(&start, &end)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let index = self.opened_device(device)?.index();
        let module = match format {
            KernelFormat::WGSL => Module::wgsl(index, code, self.kernel_mode.clone()?)?,
            KernelFormat::CPU_BUILTIN => Module::parse(index, code)?,
            _ => {
                return Err(Error::unsupported(format!(
                    "kernel format {format} is not supported by the cpu backend; accepted formats: {}, {}",
                    KernelFormat::WGSL,
                    KernelFormat::CPU_BUILTIN
                )))
            }
        };
        self.modules.insert_with(|_| Ok(module)).map(ModuleHandle)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        CpuBackend::release(&self.modules, module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let loaded = self.modules.get(module.0)?;
        let code = loaded.kernel(module.0, name)?;
        let kernel = Kernel {
            code,
            device_index: loaded.device_index(),
        };
        self.kernels.insert_with(|_| Ok(kernel)).map(KernelHandle)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        CpuBackend::release(&self.kernels, kernel.0);
    }
}
