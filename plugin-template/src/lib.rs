//! `hostmem`: a small but real xhal accelerator, and the starting point for a vendor plugin.
//!
//! Device memory is host RAM, each stream is a worker thread running its queue in order, and
//! kernels (WGSL) run on the CPU backend's executor ([`xhal_cpu::executor`]). It passes
//! `xhal-cts`. Every place where a real device would call its driver is marked `VENDOR:`,
//! with what the ABI demands there; replace the host-memory code under each mark with your
//! driver's calls and keep the rest.
//!
//! Rules that hold for every entry point (docs/abi.md has them all):
//! - Any thread may call any entry at any time, concurrently: every table here is
//!   thread-safe, and no entry holds a lock while it waits for the device.
//! - Handles are opaque, never null, never reused while alive; a stale or foreign handle is
//!   `InvalidHandle`, never a crash ([`HandleTable`] does this).
//! - Errors are returned, never panicked: the export macro catches a panic and turns it into
//!   an `Internal` error, but a panic on a stream thread would be lost, so workers catch theirs.
//! - Destroy entries accept a null (0) handle and never fail.

mod event;
mod stream;

use event::Event;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stream::{Command, Stream};
use xhal_core::bytemuck;
use xhal_core::handles::{HandleTable, ObjectKind};
use xhal_core::{
    Backend, BackendInfo, BufferHandle, DeviceHandle, DeviceInfo, DeviceType, Error, EventHandle, Features,
    KernelFormat, KernelHandle, LaunchArgs, ModuleHandle, Result, StreamHandle,
};
use xhal_cpu::executor::{HostArgument, HostKernel, HostLaunch, HostMemory, HostModule, KernelBinding, RunLimits};
use xhal_cpu::KernelMode;

/// The backend's name: selectors say `hostmem:0`, and the plugin file must be
/// `libxhal_hostmem.so` or the loader refuses it. It is the package's name without `xhal-`,
/// so that renaming the package (as `cargo generate` does) renames the backend.
pub const BACKEND_NAME: &str = match env!("CARGO_PKG_NAME").as_bytes() {
    [b'x', b'h', b'a', b'l', b'-', name @ ..] if !name.is_empty() => match std::str::from_utf8(name) {
        Ok(name) => name,
        Err(_) => panic!("the package name is not UTF-8"),
    },
    _ => panic!("the package must be named xhal-BACKEND, so that its library is libxhal_BACKEND"),
};

/// Bytes of memory the device offers. A budget, not a reservation: memory is taken from the
/// host as buffers are allocated.
pub const DEVICE_MEMORY: u64 = 256 << 20;

/// Buffer-argument offsets must be multiples of this (the executor works on 4-byte words).
const BUFFER_OFFSET_ALIGNMENT: u32 = 4;

/// Creates the backend when the host first queries the plugin.
///
/// VENDOR: initialise the driver here (open its library, count devices). A missing driver is
/// not a failure of the plugin: return a backend whose `device_count` is an error of kind
/// `DriverUnavailable` with the reason, so `xhal doctor` can print it. Never abort or panic.
fn create() -> Result<HostmemBackend> {
    HostmemBackend::new()
}

xhal_core::export_plugin!(create);

/// The `hostmem` backend.
pub struct HostmemBackend {
    /// How WGSL kernels run (`XHAL_CPU_MODE`: interpreted, or compiled to C), or why the
    /// variable could not be read: then every module load fails with that error.
    kernel_mode: Result<KernelMode>,
    /// Time limit and bounds checking for kernels (`XHAL_KERNEL_TIMEOUT`), or why the variable
    /// could not be read: then every launch fails with that error.
    limits: Result<RunLimits>,
    /// Bytes of [`DEVICE_MEMORY`] in use, shared with every buffer so that the last owner of a
    /// buffer (a handle or queued work) gives its bytes back.
    used: Arc<AtomicU64>,
    devices: HandleTable<u32>,
    buffers: HandleTable<Buffer>,
    streams: HandleTable<Stream>,
    events: HandleTable<Event>,
    modules: HandleTable<HostModule>,
    kernels: HandleTable<Kernel>,
}

impl HostmemBackend {
    /// A backend configured from the environment. A malformed `XHAL_CPU_MODE` or
    /// `XHAL_KERNEL_TIMEOUT` does not stop it from starting (memory and streams do not need
    /// them): the module loads or launches that need the value fail, naming the variable.
    pub fn new() -> Result<HostmemBackend> {
        Ok(HostmemBackend::with_kernel_settings(
            KernelMode::from_env(),
            RunLimits::from_env(),
        ))
    }

    fn with_kernel_settings(kernel_mode: Result<KernelMode>, limits: Result<RunLimits>) -> HostmemBackend {
        HostmemBackend {
            kernel_mode,
            limits,
            used: Arc::new(AtomicU64::new(0)),
            devices: HandleTable::new(BACKEND_NAME, ObjectKind::Device),
            buffers: HandleTable::new(BACKEND_NAME, ObjectKind::Buffer),
            streams: HandleTable::new(BACKEND_NAME, ObjectKind::Stream),
            events: HandleTable::new(BACKEND_NAME, ObjectKind::Event),
            modules: HandleTable::new(BACKEND_NAME, ObjectKind::Module),
            kernels: HandleTable::new(BACKEND_NAME, ObjectKind::Kernel),
        }
    }

    fn check_device_index(index: u32) -> Result<()> {
        if index == 0 {
            return Ok(());
        }
        Err(Error::not_found(format!(
            "{BACKEND_NAME} device {index} does not exist; this backend has 1 device"
        )))
    }

    /// The stream, refused at once when it has a sticky error.
    fn usable_stream(&self, stream: StreamHandle) -> Result<Arc<Stream>> {
        let stream = self.streams.get(stream.0)?;
        stream.check_usable()?;
        Ok(stream)
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

impl Drop for HostmemBackend {
    /// The host never unloads a plugin, but it may drop the backend: stop every worker first.
    fn drop(&mut self) {
        for stream in self.streams.drain() {
            stream.shut_down();
        }
    }
}

/// One allocation. Queued work holds an `Arc` to it, so freeing the handle never frees memory
/// that a queued copy or kernel still uses.
pub(crate) struct Buffer {
    id: u64,
    size: usize,
    /// Whole 4-byte words, so the executor can use the memory in place.
    ///
    /// VENDOR: a real device keeps its driver's allocation here (a device pointer, a
    /// `cl_mem`...). Allocation failure must be `OutOfMemory` with the sizes, not a crash.
    words: RwLock<Vec<u32>>,
    used: Arc<AtomicU64>,
}

impl Buffer {
    fn allocate(id: u64, size: u64, used: &Arc<AtomicU64>) -> Result<Buffer> {
        used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
            in_use.checked_add(size).filter(|after| *after <= DEVICE_MEMORY)
        })
        .map_err(|in_use| {
            Error::out_of_memory(format!(
                "requested {size} bytes, device has {} of {DEVICE_MEMORY} free",
                DEVICE_MEMORY.saturating_sub(in_use)
            ))
        })?;
        let release = |error: Error| {
            used.fetch_sub(size, Ordering::AcqRel);
            error
        };
        let words = usize::try_from(size.div_ceil(4))
            .map_err(|_| release(Error::out_of_memory(format!("{size} bytes do not fit this host"))))?;
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(words)
            .map_err(|_| release(Error::out_of_memory(format!("the host refused {size} bytes"))))?;
        storage.resize(words, 0);
        Ok(Buffer {
            id,
            size: size as usize,
            words: RwLock::new(storage),
            used: Arc::clone(used),
        })
    }

    /// The byte range `offset..offset + size`, or `OutOfBounds` naming the buffer.
    fn range(&self, what: &str, offset: u64, size: u64) -> Result<std::ops::Range<usize>> {
        xhal_core::error::check_range(what, offset, size, self.size as u64)?;
        Ok(offset as usize..(offset + size) as usize)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.used.fetch_sub(self.size as u64, Ordering::AcqRel);
    }
}

/// A kernel handle's object: the executor's kernel and its reflected bindings.
struct Kernel {
    code: HostKernel,
    bindings: Vec<KernelBinding>,
}

/// A host pointer handed to an enqueue call, carried to the stream's thread.
#[derive(Clone, Copy)]
struct HostPointer(*mut u8);

// SAFETY: `stream_write`/`stream_read`'s contract keeps the memory valid and untouched by
// anyone else until the copy completes, whichever thread performs it.
unsafe impl Send for HostPointer {}

impl Backend for HostmemBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: BACKEND_NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_core::abi::XHAL_ABI_MAJOR, xhal_core::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        // VENDOR: ask the driver. No driver: `Err(Error::new(ErrorKind::DriverUnavailable,
        // "libfoo.so.1 not found: install ..."))`, which the host reports as zero devices.
        Ok(1)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        HostmemBackend::check_device_index(index)?;
        // VENDOR: report what the device really is and allows. The suite checks these numbers
        // (a limit it cannot reach fails), and applications choose devices by them. The uuid
        // must stay the same across runs; `features` only what kernels can really use.
        let mut uuid = [0u8; 16];
        for (slot, byte) in uuid.iter_mut().zip(BACKEND_NAME.bytes().take(12)) {
            *slot = byte;
        }
        uuid[6] = 0x80 | (uuid[6] & 0x0f);
        uuid[8] = 0x80 | (uuid[8] & 0x3f);
        uuid[12..].copy_from_slice(&index.to_be_bytes());
        Ok(DeviceInfo {
            name: format!("{BACKEND_NAME} device {index}"),
            vendor: BACKEND_NAME.to_string(),
            vendor_id: 0,
            device_id: 0,
            device_type: DeviceType::Cpu,
            uuid,
            pci_bus_id: None,
            driver_version: env!("CARGO_PKG_VERSION").to_string(),
            total_memory: DEVICE_MEMORY,
            free_memory: DEVICE_MEMORY.saturating_sub(self.used.load(Ordering::Acquire)),
            max_allocation_size: DEVICE_MEMORY,
            max_workgroup_size: [1024, 1024, 64],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_workgroup_memory: 32768,
            subgroup_size: 1,
            max_buffer_arguments: 32,
            max_scalar_block_size: 256,
            buffer_offset_alignment: BUFFER_OFFSET_ALIGNMENT,
            // What the executor implements: 64-bit integers and floats, f16, 32-bit atomics;
            // timestamps come from the host clock.
            features: Features::F16 | Features::F64 | Features::I64 | Features::ATOMICS_32 | Features::TIMESTAMPS,
            kernel_formats: vec![KernelFormat::WGSL],
        })
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        HostmemBackend::check_device_index(index)?;
        // VENDOR: create the driver's context here. Opening twice gives two handles.
        self.devices.insert_with(|_| Ok(index)).map(DeviceHandle)
    }

    fn device_close(&self, device: DeviceHandle) {
        // VENDOR: release the context once nothing made from it remains.
        HostmemBackend::release(&self.devices, device.0);
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        self.devices.get(device.0)?;
        self.buffers
            .insert_with(|id| Buffer::allocate(id, size, &self.used))
            .map(BufferHandle)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        // Only the handle goes: queued work still holding the buffer keeps it alive.
        HostmemBackend::release(&self.buffers, buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        self.devices.get(device.0)?;
        self.streams.insert_with(Stream::spawn).map(StreamHandle)
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        // The ABI: queued work completes first, then the stream goes.
        if let Some(stream) = HostmemBackend::release(&self.streams, stream.0) {
            stream.finish_and_join();
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
        let buffer = self.buffers.get(buffer.0)?;
        let range = buffer.range("write", offset, size)?;
        if source.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "write of {size} bytes to buffer {:#x} from a null host pointer",
                buffer.id
            )));
        }
        let source = HostPointer(source.cast_mut());
        // VENDOR: enqueue the driver's asynchronous host-to-device copy. The host memory stays
        // valid until the copy completes, not beyond: never keep the pointer longer.
        stream.enqueue(Command::Work(Box::new(move || {
            let source = source;
            // SAFETY: the caller of `stream_write` keeps `size` bytes at `source` valid and
            // unchanged until this copy completes.
            let bytes = unsafe { std::slice::from_raw_parts(source.0.cast_const(), range.len()) };
            let mut words = buffer.words.write();
            bytemuck::cast_slice_mut::<u32, u8>(&mut words)[range].copy_from_slice(bytes);
            Ok(())
        })))
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
        let buffer = self.buffers.get(buffer.0)?;
        let range = buffer.range("read", offset, size)?;
        if destination.is_null() && size > 0 {
            return Err(Error::invalid_argument(format!(
                "read of {size} bytes from buffer {:#x} into a null host pointer",
                buffer.id
            )));
        }
        let destination = HostPointer(destination);
        // VENDOR: the driver's asynchronous device-to-host copy.
        stream.enqueue(Command::Work(Box::new(move || {
            let destination = destination;
            // SAFETY: the caller of `stream_read` keeps `size` bytes at `destination` valid and
            // untouched by anyone else until this copy completes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(destination.0, range.len()) };
            let words = buffer.words.read();
            bytes.copy_from_slice(&bytemuck::cast_slice::<u32, u8>(&words)[range]);
            Ok(())
        })))
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
        let source = self.buffers.get(source.0)?;
        let destination = self.buffers.get(destination.0)?;
        let source_range = source.range("copy source", source_offset, size)?;
        let destination_range = destination.range("copy destination", destination_offset, size)?;
        // VENDOR: the driver's device-to-device copy; the ranges may overlap (memmove).
        stream.enqueue(Command::Work(Box::new(move || {
            if source.id == destination.id {
                let mut words = source.words.write();
                bytemuck::cast_slice_mut::<u32, u8>(&mut words).copy_within(source_range, destination_range.start);
            } else {
                // Two locks: always taken in handle order, like every path holding several,
                // so two copies in opposite directions never deadlock.
                let (from, mut to) = if source.id < destination.id {
                    let from = source.words.read();
                    (from, destination.words.write())
                } else {
                    let to = destination.words.write();
                    (source.words.read(), to)
                };
                bytemuck::cast_slice_mut::<u32, u8>(&mut to)[destination_range]
                    .copy_from_slice(&bytemuck::cast_slice::<u32, u8>(&from)[source_range]);
            }
            Ok(())
        })))
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
        let buffer = self.buffers.get(buffer.0)?;
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill pattern of {} bytes; it must be 1, 2 or 4 bytes",
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
        let range = buffer.range("fill", offset, size)?;
        let pattern = pattern.to_vec();
        // VENDOR: the driver's fill (memset) command.
        stream.enqueue(Command::Work(Box::new(move || {
            let mut words = buffer.words.write();
            for chunk in bytemuck::cast_slice_mut::<u32, u8>(&mut words)[range].chunks_exact_mut(pattern.len()) {
                chunk.copy_from_slice(&pattern);
            }
            Ok(())
        })))
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let kernel = self.kernels.get(launch.kernel.0)?;
        // One memory per distinct buffer, so views of the same buffer alias as on a device.
        let mut memories: Vec<Arc<Buffer>> = Vec::new();
        let mut arguments = Vec::with_capacity(launch.buffers.len());
        for argument in launch.buffers {
            let buffer = self.buffers.get(argument.buffer.0)?;
            let memory = match memories.iter().position(|held| held.id == buffer.id) {
                Some(position) => position,
                None => {
                    memories.push(buffer);
                    memories.len() - 1
                }
            };
            let too_large = || {
                Error::out_of_bounds(format!(
                    "a buffer view of {} bytes does not fit this host",
                    argument.size
                ))
            };
            arguments.push(HostArgument {
                memory,
                offset: usize::try_from(argument.offset).map_err(|_| too_large())?,
                size: usize::try_from(argument.size).map_err(|_| too_large())?,
            });
        }
        let limits = self.limits.clone()?;
        let scalars = launch.scalars.to_vec();
        let run = HostLaunch {
            workgroups: launch.workgroups,
            arguments: &arguments,
            scalars: &scalars,
            limits,
        };
        // Everything that can be refused is refused now, by the call that made the mistake.
        let sizes: Vec<usize> = memories.iter().map(|buffer| buffer.size).collect();
        kernel.code.check(&run, &sizes)?;
        let workgroups = launch.workgroups;
        // VENDOR: the driver's kernel launch: bind buffer i to parameter i and pass the scalar
        // block by value (docs/abi.md, "Argument ABI"). A fault the device reports while
        // running is returned from here as `KernelFault`; the stream then makes it sticky.
        stream.enqueue(Command::Work(Box::new(move || {
            let mut writes = vec![false; memories.len()];
            for (argument, binding) in arguments.iter().zip(&kernel.bindings) {
                if let Some(slot) = writes.get_mut(argument.memory) {
                    *slot |= binding.writes;
                }
            }
            // Locks in handle order, so two launches sharing buffers never deadlock.
            let mut order: Vec<usize> = (0..memories.len()).collect();
            order.sort_by_key(|&index| memories[index].id);
            let mut read_guards = Vec::new();
            let mut write_guards = Vec::new();
            for index in order {
                if writes[index] {
                    write_guards.push((index, memories[index].words.write()));
                } else {
                    read_guards.push((index, memories[index].words.read()));
                }
            }
            let mut host: Vec<(usize, HostMemory<'_>)> = Vec::with_capacity(memories.len());
            for (index, guard) in &read_guards {
                let size = memories[*index].size;
                host.push((
                    *index,
                    HostMemory::ReadOnly(&bytemuck::cast_slice::<u32, u8>(guard)[..size]),
                ));
            }
            for (index, guard) in &mut write_guards {
                let size = memories[*index].size;
                let bytes = bytemuck::cast_slice_mut::<u32, u8>(guard);
                // Whole words, so the executor runs in place: the padding past `size` is ours.
                let whole = bytes.len().min(size.div_ceil(4) * 4);
                host.push((*index, HostMemory::ReadWrite(&mut bytes[..whole])));
            }
            host.sort_by_key(|(index, _)| *index);
            let mut host: Vec<HostMemory<'_>> = host.into_iter().map(|(_, memory)| memory).collect();
            let run = HostLaunch {
                workgroups,
                arguments: &arguments,
                scalars: &scalars,
                limits,
            };
            kernel.code.run(&run, &mut host)
        })))
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let event = self.events.get(event.0)?;
        // VENDOR: the driver's event record (cuEventRecord and the like).
        stream.enqueue_with(|| Some(Command::Record(event.begin_record())))
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let stream = self.usable_stream(stream)?;
        let event = self.events.get(event.0)?;
        // VENDOR: the driver's cross-stream wait; it must not block the calling thread.
        // An event never recorded is complete: there is nothing to wait for.
        stream.enqueue_with(|| event.latest().map(|signal| Command::Wait(event.id(), signal)))
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.streams.get(stream.0)?.synchronize()
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        self.streams.get(stream.0)?.query()
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        self.devices.get(device.0)?;
        self.events
            .insert_with(|id| Ok(Event::new(id, timing)))
            .map(EventHandle)
    }

    fn event_destroy(&self, event: EventHandle) {
        HostmemBackend::release(&self.events, event.0);
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
        self.devices.get(device.0)?;
        if format != KernelFormat::WGSL {
            // VENDOR: accept the format your compiler takes (list it in `kernel_formats`);
            // the host translates WGSL to it before calling you.
            return Err(Error::unsupported(format!(
                "kernel format {format} is not supported by {BACKEND_NAME}; accepted formats: {}",
                KernelFormat::WGSL
            )));
        }
        // VENDOR: build the module with the driver's compiler. A build error is
        // `InvalidArgument` carrying the compiler's log; `code` is only borrowed for this call.
        let module = HostModule::load(code, self.kernel_mode.clone()?)?;
        self.modules.insert_with(|_| Ok(module)).map(ModuleHandle)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        // Kernels taken from the module keep what they need: destroying it never breaks them.
        HostmemBackend::release(&self.modules, module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let code = self.modules.get(module.0)?.kernel(name)?;
        let bindings = code.bindings();
        self.kernels
            .insert_with(|_| Ok(Kernel { code, bindings }))
            .map(KernelHandle)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        HostmemBackend::release(&self.kernels, kernel.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_core::{BufferArg, ErrorKind};

    const DOUBLE: &str = "
        @group(0) @binding(0) var<storage, read_write> data: array<u32>;
        @compute @workgroup_size(64)
        fn double(@builtin(global_invocation_id) id: vec3<u32>) {
            if id.x < arrayLength(&data) { data[id.x] = data[id.x] * 2u; }
        }
    ";

    #[test]
    fn a_kernel_runs_between_a_write_and_a_read() {
        let backend = HostmemBackend::new().unwrap();
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 400).unwrap();
        let input: Vec<u8> = (0u32..100).flat_map(u32::to_le_bytes).collect();
        let mut output = vec![0u8; 400];
        let module = backend
            .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
            .unwrap();
        let kernel = backend.kernel_get(module, "double").unwrap();
        let views = [BufferArg {
            buffer,
            offset: 0,
            size: 400,
        }];
        // SAFETY: `input` and `output` outlive the synchronize below.
        unsafe { backend.stream_write(stream, buffer, 0, input.as_ptr(), 400).unwrap() };
        let launch = LaunchArgs {
            kernel,
            workgroups: [2, 1, 1],
            buffers: &views,
            scalars: &[],
        };
        backend.stream_launch(stream, &launch).unwrap();
        // SAFETY: as above.
        unsafe {
            backend
                .stream_read(stream, buffer, 0, output.as_mut_ptr(), 400)
                .unwrap()
        };
        backend.stream_synchronize(stream).unwrap();
        let expected: Vec<u8> = (0u32..100).flat_map(|value| (value * 2).to_le_bytes()).collect();
        assert_eq!(output, expected);
        backend.stream_destroy(stream);
    }

    #[test]
    fn a_malformed_kernel_setting_fails_the_calls_that_need_it_naming_it() {
        let malformed = |variable: &str| Error::invalid_argument(format!("{variable} is malformed"));
        let backend = HostmemBackend::with_kernel_settings(
            Err(malformed("XHAL_CPU_MODE")),
            Err(malformed("XHAL_KERNEL_TIMEOUT")),
        );
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 16).unwrap();
        backend.stream_fill(stream, buffer, 0, 16, &[1]).unwrap();
        backend.stream_synchronize(stream).unwrap();
        let load = backend
            .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
            .unwrap_err();
        assert!(load.message().contains("XHAL_CPU_MODE"), "{load}");

        let backend =
            HostmemBackend::with_kernel_settings(Ok(KernelMode::Interpret), Err(malformed("XHAL_KERNEL_TIMEOUT")));
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 16).unwrap();
        let module = backend
            .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
            .unwrap();
        let kernel = backend.kernel_get(module, "double").unwrap();
        let views = [BufferArg {
            buffer,
            offset: 0,
            size: 16,
        }];
        let launch = LaunchArgs {
            kernel,
            workgroups: [1, 1, 1],
            buffers: &views,
            scalars: &[],
        };
        let error = backend.stream_launch(stream, &launch).unwrap_err();
        assert!(error.message().contains("XHAL_KERNEL_TIMEOUT"), "{error}");
    }

    #[test]
    fn misuse_is_refused_at_enqueue_and_memory_is_accounted() {
        let backend = HostmemBackend::new().unwrap();
        assert_eq!(backend.device_open(1).unwrap_err().kind(), ErrorKind::NotFound);
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let too_much = backend.buffer_allocate(device, DEVICE_MEMORY + 1).unwrap_err();
        assert_eq!(too_much.kind(), ErrorKind::OutOfMemory, "{too_much}");
        let buffer = backend.buffer_allocate(device, 64).unwrap();
        assert_eq!(backend.device_info(0).unwrap().free_memory, DEVICE_MEMORY - 64);
        let fill = backend.stream_fill(stream, buffer, 0, 64, &[1, 2, 3]).unwrap_err();
        assert!(fill.message().contains("1, 2 or 4 bytes"), "{fill}");
        let past = backend.stream_fill(stream, buffer, 60, 8, &[0]).unwrap_err();
        assert_eq!(past.kind(), ErrorKind::OutOfBounds, "{past}");
        let module = backend
            .module_load(device, KernelFormat::WGSL, DOUBLE.as_bytes())
            .unwrap();
        let kernel = backend.kernel_get(module, "double").unwrap();
        let launch = LaunchArgs {
            kernel,
            workgroups: [1, 1, 1],
            buffers: &[],
            scalars: &[],
        };
        let missing = backend.stream_launch(stream, &launch).unwrap_err();
        assert!(missing.message().contains("expects 1 buffer argument"), "{missing}");
        backend.buffer_free(buffer);
        backend.stream_synchronize(stream).unwrap();
        assert_eq!(backend.device_info(0).unwrap().free_memory, DEVICE_MEMORY);
    }
}
