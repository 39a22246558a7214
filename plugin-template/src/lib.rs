//! `hostmem`: a small but real xhal accelerator, and the starting point for a vendor plugin.
//!
//! Device memory is host RAM, each stream a host thread ([`HostQueue`]), and WGSL kernels run
//! on the CPU backend's executor ([`xhal_cpu::executor`]); it passes `xhal-cts`. Every place
//! a real device would call its driver is marked `VENDOR:`, with what the ABI demands there.
//!
//! [`Checked`] wraps this [`Driver`] and checks everything the host passes before a method
//! here runs (docs/plugin-guide.md lists the checks), so what stays here is what only the
//! device knows. Any thread may call any method, concurrently; errors are returned, never
//! panicked; queued work keeps an `Arc` of every object it uses.
//!
//! Copies, fills and launches are each checked and prepared once, into an [`Operation`] that
//! the stream's thread runs: the eager calls enqueue it once, and a [`CommandList`] (ABI 1.4,
//! what graphs replay) keeps its operations and enqueues them all with one submission.

use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{
    Checked, ClockSample, Command, DeviceInfo, DeviceType, Driver, DriverBuffer, DriverCommandList, DriverDevice,
    DriverKernel, DriverModule, DriverStream, Error, Features, HostEvent, HostQueue, KernelFormat, Launch, Object,
    OwnedLaunch, Result,
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

/// Bytes of memory the device offers: a budget, taken from the host as buffers are allocated.
pub const DEVICE_MEMORY: u64 = 256 << 20;

/// The backend as the host sees it: this driver behind the checked adapter.
pub type HostmemBackend = Checked<HostmemDriver>;

/// Creates the backend when the host first queries the plugin.
///
/// VENDOR: initialise the driver here. A missing driver is not a failure of the plugin: its
/// `device_count` says why (`DriverUnavailable`), so `xhal doctor` can print it.
fn create() -> Result<HostmemBackend> {
    Ok(Checked::new(HostmemDriver::from_env()))
}

xhal_backend::export_plugin!(create);

/// The `hostmem` driver.
pub struct HostmemDriver {
    /// How kernels run (`XHAL_CPU_MODE`), or why it could not be read (module loads fail).
    kernel_mode: Result<KernelMode>,
    /// Kernels' time limit (`XHAL_KERNEL_TIMEOUT`), or why it could not be read (launches fail).
    /// Each kernel takes it when it is got.
    limits: Result<RunLimits>,
    /// Bytes of [`DEVICE_MEMORY`] in use; the last owner of a buffer gives its bytes back.
    used: Arc<AtomicU64>,
}

impl HostmemDriver {
    /// A driver configured from the environment. A malformed `XHAL_CPU_MODE` or
    /// `XHAL_KERNEL_TIMEOUT` fails only the module loads or launches that need it.
    pub fn from_env() -> HostmemDriver {
        HostmemDriver::with_kernel_settings(KernelMode::from_env(), RunLimits::from_env())
    }

    /// A driver with the given kernel settings, or the errors reading them gave.
    pub fn with_kernel_settings(kernel_mode: Result<KernelMode>, limits: Result<RunLimits>) -> HostmemDriver {
        HostmemDriver {
            kernel_mode,
            limits,
            used: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// One allocation. VENDOR: keep your driver's allocation here, and free it in `Drop`.
pub struct Buffer {
    /// Whole 4-byte words, so the executor can use the memory in place.
    words: RwLock<Vec<u32>>,
    size: u64,
    used: Arc<AtomicU64>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.used.fetch_sub(self.size, Ordering::AcqRel);
    }
}

/// One entry point, with what its launches need.
pub struct Kernel(HostKernel, Vec<KernelBinding>, Result<RunLimits>);

/// A host pointer handed to an enqueue call, carried to the stream's thread.
struct HostPointer(*mut u8);

// SAFETY: `DriverStream::write`/`read`'s contract keeps the memory valid and untouched by
// anyone else until the copy completes, whichever thread performs it.
unsafe impl Send for HostPointer {}

/// The bytes `offset..offset + size`; the adapter checked the range.
fn byte_range(offset: u64, size: u64) -> std::ops::Range<usize> {
    offset as usize..(offset + size) as usize
}

impl Driver for HostmemDriver {
    type Device = ();
    type Buffer = Buffer;
    type Stream = HostQueue;
    type Event = HostEvent;
    type Module = HostModule;
    type Kernel = Kernel;
    const NAME: &'static str = BACKEND_NAME;
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        // VENDOR: ask the driver. No driver: `Err(Error::new(ErrorKind::DriverUnavailable,
        // "libfoo.so.1 not found: install ..."))`, which the host reports as zero devices.
        Ok(1)
    }

    fn device_info(&self, index: u32, _opened: Option<&()>) -> Result<DeviceInfo> {
        // VENDOR: report what the device really is and allows. The suite checks these numbers
        // (a limit it cannot reach fails), and applications choose devices by them. The uuid
        // must stay the same across runs; `features` only what kernels can really use.
        let mut uuid = [0u8; 16];
        let name = &BACKEND_NAME.as_bytes()[..BACKEND_NAME.len().min(12)];
        uuid[..name.len()].copy_from_slice(name);
        (uuid[6], uuid[8]) = (0x80 | (uuid[6] & 0x0f), 0x80 | (uuid[8] & 0x3f));
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
            // The executor works on 4-byte words.
            buffer_offset_alignment: 4,
            // What the executor implements: 64-bit integers and floats, f16, 32-bit atomics;
            // timestamps come from the host clock.
            features: Features::F16 | Features::F64 | Features::I64 | Features::ATOMICS_32 | Features::TIMESTAMPS,
            kernel_formats: vec![KernelFormat::WGSL],
        })
    }

    fn device_open(&self, _index: u32) -> Result<()> {
        // VENDOR: create the driver's context here; release it in the device type's `Drop`.
        Ok(())
    }
}

/// VENDOR: what an opened device can tell about itself (its free memory) goes here.
impl DriverDevice<HostmemDriver> for () {
    /// VENDOR: read the device's timestamp clock and the host's monotonic clock together
    /// (the driver's calibration call, or the round trip of an event on an idle queue), so
    /// that traces place device times on the host's clock. `HostEvent`s are timed on the host
    /// clock itself, so this device's clock is the host's.
    fn clock(_device: &Arc<Object<()>>) -> Result<ClockSample> {
        Ok(ClockSample::host())
    }

    /// VENDOR: true where the device has a native way to record work once and submit it many
    /// times (Vulkan command buffers, CUDA or HIP graphs, Level Zero regular command lists,
    /// `cl_khr_command_buffer`). The host then makes each run of a graph's copies, fills and
    /// launches one [`CommandList`]. Answer false for a device without them: the host replays
    /// graphs operation by operation, which is correct everywhere and only costs host time.
    fn has_command_lists(_device: &Arc<Object<()>>) -> bool {
        true
    }

    /// The adapter has checked every command as the same stream call would be checked (handles,
    /// devices, ranges, fill patterns, views), so this only prepares them: each becomes the
    /// operation the eager call would enqueue, and what only the device can refuse (a launch's
    /// arguments against its kernel) is refused now, once, rather than at every submission.
    fn build_command_list(
        _driver: &HostmemDriver,
        _device: &Arc<Object<()>>,
        commands: &[Command<HostmemDriver>],
    ) -> Result<Box<dyn DriverCommandList<HostmemDriver>>> {
        // VENDOR: begin the native list here (vkBeginCommandBuffer with SIMULTANEOUS_USE,
        // cuGraphCreate, zeCommandListCreate), record each command into it in order (a copy, a
        // fill, a dispatch with its arguments bound), then end it (vkEndCommandBuffer,
        // cuGraphInstantiate, zeCommandListClose), so that a submission is one driver call.
        let operations = commands
            .iter()
            .map(|command| match command {
                Command::Copy {
                    source,
                    source_offset,
                    destination,
                    destination_offset,
                    size,
                } => Ok(copy_operation(
                    source,
                    *source_offset,
                    destination,
                    *destination_offset,
                    *size,
                )),
                Command::Fill {
                    buffer,
                    offset,
                    size,
                    pattern,
                } => Ok(fill_operation(buffer, *offset, *size, pattern)),
                Command::Launch(launch) => launch_operation(&launch.borrowed()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(CommandList {
            operations: Mutex::new(Arc::new(operations)),
        }))
    }
}

/// A copy, fill or launch, checked and bound to its buffers once, for the stream's thread to
/// run: the eager calls enqueue one, and a [`CommandList`] runs its own at every submission.
/// An error it returns becomes the stream's sticky error.
pub type Operation = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// A command list: the operations of its commands, in order. An update replaces the whole
/// vector (copy on write), so a submission still queued runs the operations it was submitted
/// with, and the list may be submitted again, to any stream, before earlier submissions end.
///
/// VENDOR: keep the native list here (the `VkCommandBuffer` and its descriptor sets, the
/// `CUgraphExec`, the `ze_command_list_handle_t`), released in `Drop`. Queued submissions must
/// keep it alive: hold it behind an `Arc` that `submit` clones into the stream's work, or let
/// the driver track it as in use (a fence of the last submission).
pub struct CommandList {
    operations: Mutex<Arc<Vec<Operation>>>,
}

impl DriverCommandList<HostmemDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<HostQueue>>) -> Result<()> {
        let operations = Arc::clone(&self.operations.lock());
        // VENDOR: submit the native list to the stream's queue, without waiting for it
        // (vkQueueSubmit, cuGraphLaunch, zeCommandQueueExecuteCommandLists). Here one item of
        // work runs every operation in order; the first that fails stops the list and becomes
        // the stream's sticky error, as it would had each been enqueued alone.
        stream.enqueue(move || operations.iter().try_for_each(|operation| operation()))
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<HostmemDriver>) -> Result<()> {
        // The adapter checked that command `index` is a launch of the same kernel with views of
        // the same sizes and a scalar block of the same size, and that no submission of the list
        // is pending. VENDOR: rewrite that launch's arguments in the native list
        // (cuGraphExecKernelNodeSetParams, a new descriptor set and push constants).
        let prepared = launch_operation(&launch.borrowed())?;
        let mut operations = self.operations.lock();
        let mut updated = Vec::clone(&operations);
        let slot = updated
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("a {BACKEND_NAME} command list has no command {index}")))?;
        *slot = prepared;
        *operations = Arc::new(updated);
        Ok(())
    }
}

/// The copy of `size` bytes that `DriverStream::copy` enqueues and a command list runs.
fn copy_operation(
    source: &Arc<Object<Buffer>>,
    source_offset: u64,
    destination: &Arc<Object<Buffer>>,
    destination_offset: u64,
    size: u64,
) -> Operation {
    let (source, destination) = (Arc::clone(source), Arc::clone(destination));
    // VENDOR: the driver's device-to-device copy; the ranges may overlap (memmove).
    Arc::new(move || {
        // Through a host copy, so no two buffer locks are ever held at once.
        let bytes = bytemuck::cast_slice::<u32, u8>(&source.words.read())[byte_range(source_offset, size)].to_vec();
        let mut words = destination.words.write();
        bytemuck::cast_slice_mut::<u32, u8>(&mut words)[byte_range(destination_offset, size)].copy_from_slice(&bytes);
        Ok(())
    })
}

/// The fill that `DriverStream::fill` enqueues and a command list runs.
fn fill_operation(buffer: &Arc<Object<Buffer>>, offset: u64, size: u64, pattern: &[u8]) -> Operation {
    let (buffer, pattern) = (Arc::clone(buffer), pattern.to_vec());
    // VENDOR: the driver's fill (memset) command.
    Arc::new(move || {
        let mut words = buffer.words.write();
        for chunk in
            bytemuck::cast_slice_mut::<u32, u8>(&mut words)[byte_range(offset, size)].chunks_exact_mut(pattern.len())
        {
            chunk.copy_from_slice(&pattern);
        }
        Ok(())
    })
}

/// The launch that `DriverStream::launch` enqueues and a command list runs, or why the kernel
/// refuses these arguments.
fn launch_operation(launch: &Launch<'_, HostmemDriver>) -> Result<Operation> {
    // One memory per distinct buffer, in handle order (the order the work locks them in,
    // so two launches sharing buffers never deadlock); views of one buffer alias.
    let mut memories: Vec<Arc<Object<Buffer>>> = launch.buffers.iter().map(|view| Arc::clone(&view.buffer)).collect();
    memories.sort_by_key(|buffer| buffer.handle());
    memories.dedup_by_key(|buffer| buffer.handle());
    let arguments: Vec<HostArgument> = launch
        .buffers
        .iter()
        .map(|view| HostArgument {
            memory: memories.partition_point(|buffer| buffer.handle() < view.buffer.handle()),
            offset: view.offset as usize,
            size: view.size as usize,
        })
        .collect();
    let (kernel, scalars, workgroups) = (Arc::clone(launch.kernel), launch.scalars.to_vec(), launch.workgroups);
    let run = HostLaunch {
        workgroups,
        arguments: &arguments,
        scalars: &scalars,
        limits: launch.kernel.2.clone()?,
    };
    // Everything that can be refused is refused now, by the call that made the mistake.
    let sizes: Vec<usize> = memories.iter().map(|buffer| buffer.size() as usize).collect();
    kernel.0.check(&run, &sizes)?;
    let limits = run.limits;
    // VENDOR: the driver's kernel launch: bind buffer i to parameter i and pass the scalar
    // block by value (docs/abi.md, "Argument ABI"). A fault the device reports while
    // running is returned from the work as `KernelFault`; the stream then makes it sticky.
    Ok(Arc::new(move || {
        let mut guards: Vec<_> = memories.iter().map(|buffer| buffer.words.write()).collect();
        let mut host: Vec<HostMemory<'_>> = Vec::with_capacity(guards.len());
        for (memory, words) in guards.iter_mut().enumerate() {
            let size = memories[memory].size() as usize;
            let bytes = bytemuck::cast_slice_mut::<u32, u8>(words);
            let bound = arguments
                .iter()
                .zip(&kernel.1)
                .filter(|(argument, _)| argument.memory == memory);
            host.push(match bound.into_iter().any(|(_, binding)| binding.writes) {
                // Whole words, so the executor writes in place: the padding is the buffer's own.
                true => HostMemory::ReadWrite(&mut bytes[..size.div_ceil(4) * 4]),
                false => HostMemory::ReadOnly(&bytes[..size]),
            });
        }
        let run = HostLaunch {
            workgroups,
            arguments: &arguments,
            scalars: &scalars,
            limits,
        };
        kernel.0.run(&run, &mut host)
    }))
}

impl DriverBuffer<HostmemDriver> for Buffer {
    fn allocate(driver: &HostmemDriver, _device: &Arc<Object<()>>, size: u64) -> Result<Buffer> {
        // VENDOR: the driver's allocation. Failure is `OutOfMemory` with the sizes, not a crash.
        let used = &driver.used;
        used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
            in_use.checked_add(size).filter(|after| *after <= DEVICE_MEMORY)
        })
        .map_err(|in_use| {
            Error::out_of_memory(format!(
                "requested {size} bytes, device has {} of {DEVICE_MEMORY} free",
                DEVICE_MEMORY.saturating_sub(in_use)
            ))
        })?;
        // From here on the buffer's `Drop` gives the bytes back, whatever happens.
        let buffer = Buffer {
            words: RwLock::new(Vec::new()),
            size,
            used: Arc::clone(used),
        };
        let (words, mut storage) = (size.div_ceil(4) as usize, buffer.words.write());
        let refused = |_| Error::out_of_memory(format!("the host refused {size} bytes"));
        storage.try_reserve_exact(words).map_err(refused)?;
        storage.resize(words, 0);
        drop(storage);
        Ok(buffer)
    }
}

impl DriverStream<HostmemDriver> for HostQueue {
    fn create(_driver: &HostmemDriver, _device: &Arc<Object<()>>) -> Result<HostQueue> {
        // VENDOR: the driver's stream (a `CUstream`, a command queue) replaces the host queue:
        // enqueue becomes its asynchronous call, synchronize and query its wait and poll.
        HostQueue::spawn(format!("{BACKEND_NAME}-stream"))
    }

    fn sticky_error(stream: &Arc<Object<HostQueue>>) -> Result<()> {
        HostQueue::sticky_error(stream)
    }

    unsafe fn write(
        stream: &Arc<Object<HostQueue>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let (buffer, source) = (Arc::clone(buffer), HostPointer(source.cast_mut()));
        // VENDOR: the driver's asynchronous host-to-device copy. The host memory stays valid
        // until the copy completes, not beyond: never keep the pointer longer.
        stream.enqueue(move || {
            let source = source;
            // SAFETY: the caller of `write` keeps `size` bytes at `source` valid and
            // unchanged until this copy completes.
            let bytes = unsafe { std::slice::from_raw_parts(source.0.cast_const(), size as usize) };
            let mut words = buffer.words.write();
            bytemuck::cast_slice_mut::<u32, u8>(&mut words)[byte_range(offset, size)].copy_from_slice(bytes);
            Ok(())
        })
    }

    unsafe fn read(
        stream: &Arc<Object<HostQueue>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let (buffer, destination) = (Arc::clone(buffer), HostPointer(destination));
        // VENDOR: the driver's asynchronous device-to-host copy.
        stream.enqueue(move || {
            let destination = destination;
            // SAFETY: the caller of `read` keeps `size` bytes at `destination` valid and
            // untouched by anyone else until this copy completes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(destination.0, size as usize) };
            let words = buffer.words.read();
            bytes.copy_from_slice(&bytemuck::cast_slice::<u32, u8>(&words)[byte_range(offset, size)]);
            Ok(())
        })
    }

    fn copy(
        stream: &Arc<Object<HostQueue>>,
        source: &Arc<Object<Buffer>>,
        source_offset: u64,
        destination: &Arc<Object<Buffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        // VENDOR: enqueue the driver's copy on the stream (cuMemcpyAsync, vkCmdCopyBuffer).
        let copy = copy_operation(source, source_offset, destination, destination_offset, size);
        stream.enqueue(move || copy())
    }

    fn fill(
        stream: &Arc<Object<HostQueue>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        // VENDOR: enqueue the driver's fill on the stream (cuMemsetD32Async, vkCmdFillBuffer).
        let fill = fill_operation(buffer, offset, size, pattern);
        stream.enqueue(move || fill())
    }

    fn launch(stream: &Arc<Object<HostQueue>>, launch: &Launch<'_, HostmemDriver>) -> Result<()> {
        // VENDOR: enqueue the driver's launch on the stream (cuLaunchKernel, vkCmdDispatch).
        let launch = launch_operation(launch)?;
        stream.enqueue(move || launch())
    }

    fn record_event(stream: &Arc<Object<HostQueue>>, event: &Arc<Object<HostEvent>>) -> Result<()> {
        // VENDOR: the driver's event record (cuEventRecord and the like). Events here are
        // xhal-backend's `HostEvent`, timed by the host clock; a device with its own events
        // implements `DriverEvent` for them, timing from the device's clock.
        stream.record(event)
    }

    fn wait_event(stream: &Arc<Object<HostQueue>>, event: &Arc<Object<HostEvent>>) -> Result<()> {
        // VENDOR: the driver's cross-stream wait; it must not block the calling thread.
        stream.wait(event)
    }

    fn synchronize(stream: &Arc<Object<HostQueue>>) -> Result<()> {
        HostQueue::synchronize(stream)
    }

    fn query(stream: &Arc<Object<HostQueue>>) -> Result<bool> {
        HostQueue::query(stream)
    }
}

impl DriverModule<HostmemDriver> for HostModule {
    fn load(
        driver: &HostmemDriver,
        _device: &Arc<Object<()>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<HostModule> {
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
        HostModule::load(code, driver.kernel_mode.clone()?)
    }
}

impl DriverKernel<HostmemDriver> for Kernel {
    fn get(driver: &HostmemDriver, module: &Arc<Object<HostModule>>, name: &str) -> Result<Kernel> {
        let kernel = module.kernel(name)?;
        let bindings = kernel.bindings();
        Ok(Kernel(kernel, bindings, driver.limits.clone()))
    }
}
