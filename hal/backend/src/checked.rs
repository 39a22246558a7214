//! The checked adapter: any [`Driver`] as a handle-based [`Backend`].
//!
//! It owns the handle tables and does, once for every Rust backend, the checks listed in
//! [`driver`](crate::driver): handles, device ownership, ranges, fill patterns, null host
//! pointers, empty commands and views, and synchronising streams before they go. Each check
//! fails with an error that names the handle, the bound and what was expected.

use crate::backend::{
    Backend, BackendInfo, BufferHandle, CommandListHandle, DeviceHandle, DeviceInfo, EventHandle, KernelFormat,
    KernelHandle, LaunchArgs, MemoryUsage, ModuleHandle, StreamHandle, StreamPriorities,
};
use crate::driver::{
    BufferView, Command, Driver, DriverBuffer, DriverCommandList, DriverDevice, DriverEvent, DriverKernel,
    DriverModule, DriverStream, Launch, Object, OwnedLaunch,
};
use crate::error::{check_range, Error, Result};
use crate::handles::{HandleTable, ObjectKind};
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;
use std::sync::{Arc, Weak};

/// A stream and an object on its device, both live, as the driver receives them.
type OnStream<S, T> = (Arc<Object<S>>, Arc<Object<T>>);

/// A [`Driver`] behind the checks every backend needs; it implements [`Backend`], so the
/// plugin export (`export_plugin!`) and static registration take it as they take any backend.
pub struct Checked<D: Driver> {
    driver: D,
    devices: HandleTable<Object<D::Device>>,
    /// Each device index's opened device while any handle to it is live: every open of an
    /// index shares one, as the ABI's devices share their memory and queues.
    opened: Mutex<Vec<Weak<Object<D::Device>>>>,
    /// Each opened device index's buffer offset alignment, which launches are checked against.
    alignments: RwLock<Vec<u64>>,
    buffers: HandleTable<Object<D::Buffer>>,
    streams: HandleTable<Object<D::Stream>>,
    events: HandleTable<Object<D::Event>>,
    modules: HandleTable<Object<D::Module>>,
    kernels: HandleTable<Object<D::Kernel>>,
    command_lists: HandleTable<Object<CommandList<D>>>,
    /// Live mappings: buffer handle and host address.
    mappings: Mutex<Vec<(u64, usize)>>,
    /// Live host memory: device index and address.
    host_memory: Mutex<Vec<(u32, usize)>>,
}

/// A command list as the adapter keeps it: the commands appended so far, then, once finished,
/// the driver's native list built from them. The commands stay, so updates can be checked
/// against them and what they name stays alive as long as the list.
pub struct CommandList<D: Driver> {
    device: Arc<Object<D::Device>>,
    state: Mutex<ListState<D>>,
}

struct ListState<D: Driver> {
    commands: Vec<Command<D>>,
    native: Option<Box<dyn DriverCommandList<D>>>,
    /// Streams a submission of the list may still be pending on; an update waits for them.
    submitted_to: Vec<Weak<Object<D::Stream>>>,
}

impl<D: Driver> Checked<D> {
    /// The driver behind the checked adapter.
    pub fn new(driver: D) -> Checked<D> {
        Checked {
            driver,
            devices: HandleTable::new(D::NAME, ObjectKind::Device),
            opened: Mutex::new(Vec::new()),
            alignments: RwLock::new(Vec::new()),
            buffers: HandleTable::new(D::NAME, ObjectKind::Buffer),
            streams: HandleTable::new(D::NAME, ObjectKind::Stream),
            events: HandleTable::new(D::NAME, ObjectKind::Event),
            modules: HandleTable::new(D::NAME, ObjectKind::Module),
            kernels: HandleTable::new(D::NAME, ObjectKind::Kernel),
            command_lists: HandleTable::new(D::NAME, ObjectKind::CommandList),
            mappings: Mutex::new(Vec::new()),
            host_memory: Mutex::new(Vec::new()),
        }
    }

    /// The driver, for backend-specific calls (test hooks, native interop).
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The live stream named by `stream`, as the driver sees it.
    pub fn stream(&self, stream: StreamHandle) -> Result<Arc<Object<D::Stream>>> {
        self.streams.get(stream.0)
    }

    /// The live buffer named by `buffer`, as the driver sees it.
    pub fn buffer(&self, buffer: BufferHandle) -> Result<Arc<Object<D::Buffer>>> {
        self.buffers.get(buffer.0)
    }

    /// The live device named by `device`, as the driver sees it.
    pub fn device(&self, device: DeviceHandle) -> Result<Arc<Object<D::Device>>> {
        self.devices.get(device.0)
    }

    /// The live event named by `event`, as the driver sees it.
    pub fn event(&self, event: EventHandle) -> Result<Arc<Object<D::Event>>> {
        self.events.get(event.0)
    }

    /// The live kernel named by `kernel`, as the driver sees it.
    pub fn kernel(&self, kernel: KernelHandle) -> Result<Arc<Object<D::Kernel>>> {
        self.kernels.get(kernel.0)
    }

    fn device_index(&self, index: u32) -> Result<()> {
        let count = self.driver.device_count()?;
        if index < count {
            return Ok(());
        }
        Err(Error::not_found(format!(
            "{} device {index} does not exist; this backend has {count} device(s)",
            D::NAME
        )))
    }

    /// `object` (a buffer, event or kernel) if it was made on the stream's device.
    fn on_stream_device<T>(
        stream: &Object<D::Stream>,
        object: Arc<Object<T>>,
        kind: ObjectKind,
    ) -> Result<Arc<Object<T>>> {
        Self::on_device(stream.device_index(), "stream", object, kind)
    }

    /// `object` if it was made on device `device`, where `user` (a stream, a command list) is.
    fn on_device<T>(device: u32, user: &str, object: Arc<Object<T>>, kind: ObjectKind) -> Result<Arc<Object<T>>> {
        if object.device_index() == device {
            return Ok(object);
        }
        Err(Error::invalid_handle(format!(
            "{} {:#x} belongs to {} device {}, the {user} is on device {device}",
            kind.name(),
            object.handle(),
            D::NAME,
            object.device_index(),
        )))
    }

    /// The kernel and buffer views of a launch on device `device`, checked as `stream_launch`
    /// checks them: every object on that device, every view in bounds, non-empty and aligned.
    fn resolve_launch(&self, device: u32, user: &str, launch: &LaunchArgs<'_>) -> Result<OwnedLaunch<D>> {
        let kernel = Self::on_device(device, user, self.kernels.get(launch.kernel.0)?, ObjectKind::Kernel)?;
        let alignment = self.alignments.read().get(device as usize).copied().unwrap_or(1);
        let mut buffers = Vec::with_capacity(launch.buffers.len());
        for (index, argument) in launch.buffers.iter().enumerate() {
            let buffer = Self::on_device(device, user, self.buffers.get(argument.buffer.0)?, ObjectKind::Buffer)?;
            // The message is only formatted for a view that is refused: launches are hot.
            if check_range("", argument.offset, argument.size, buffer.size()).is_err() {
                let what = format!("buffer argument {index} (buffer {:#x})", buffer.handle());
                check_range(&what, argument.offset, argument.size, buffer.size())?;
            }
            if argument.size == 0 {
                return Err(Error::invalid_argument(format!(
                    "buffer argument {index} is a view of 0 bytes; a kernel cannot bind no memory"
                )));
            }
            if !argument.offset.is_multiple_of(alignment) {
                return Err(Error::invalid_argument(format!(
                    "buffer argument {index} starts at byte {}, which is not a multiple of {alignment}, the buffer \
                     offset alignment of {} device {device}: a kernel reads the view's types at their alignment from \
                     its start",
                    argument.offset,
                    D::NAME,
                )));
            }
            buffers.push(BufferView {
                buffer,
                offset: argument.offset,
                size: argument.size,
            });
        }
        Ok(OwnedLaunch {
            kernel,
            workgroups: launch.workgroups,
            buffers,
            scalars: launch.scalars.to_vec(),
        })
    }

    /// A fill pattern of 1, 2 or 4 bytes, with `offset` and `size` whole patterns.
    fn check_fill(buffer: u64, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "a fill pattern has 1, 2 or 4 bytes, not {}",
                pattern.len()
            )));
        }
        let width = pattern.len() as u64;
        if !offset.is_multiple_of(width) || !size.is_multiple_of(width) {
            return Err(Error::invalid_argument(format!(
                "fill of buffer {buffer:#x}: offset {offset} and size {size} must be multiples of the {width}-byte pattern"
            )));
        }
        Ok(())
    }

    /// Appends `command` to the open list `list`.
    fn append(&self, list: &Object<CommandList<D>>, command: Command<D>) -> Result<()> {
        let mut state = list.state.lock();
        if state.native.is_some() {
            return Err(Error::invalid_argument(format!(
                "command list {:#x} is finished; a finished list takes no more commands",
                list.handle()
            )));
        }
        state.commands.push(command);
        Ok(())
    }

    fn stream_and_buffer(&self, stream: StreamHandle, buffer: BufferHandle) -> Result<OnStream<D::Stream, D::Buffer>> {
        let stream = self.streams.get(stream.0)?;
        let buffer = Self::on_stream_device(&stream, self.buffers.get(buffer.0)?, ObjectKind::Buffer)?;
        Ok((stream, buffer))
    }

    fn stream_and_event(&self, stream: StreamHandle, event: EventHandle) -> Result<OnStream<D::Stream, D::Event>> {
        let stream = self.streams.get(stream.0)?;
        let event = Self::on_stream_device(&stream, self.events.get(event.0)?, ObjectKind::Event)?;
        Ok((stream, event))
    }

    /// Makes `value` a live object on `device` in `table`, and returns its handle.
    fn insert<T>(table: &HandleTable<Object<T>>, device: u32, size: u64, value: T) -> Result<u64> {
        table.insert_with(|handle| Ok(Object::new(handle, device, size, value)))
    }

    /// Takes a destroyed object's handle out of its table; a destroy never fails, so a stale
    /// handle is only logged.
    fn release<T>(table: &HandleTable<T>, raw: u64) -> Option<Arc<T>> {
        // The ABI lets every destroy take null.
        if raw == 0 {
            return None;
        }
        table
            .remove(raw)
            .map_err(|error| tracing::warn!(%error, "ignored a destroy call"))
            .ok()
    }

    fn synchronize_before_drop(&self, stream: &Arc<Object<D::Stream>>) {
        if let Err(error) = D::Stream::synchronize(stream) {
            // The stream's calls already returned this error; its destruction only notes it.
            tracing::debug!(%error, stream = stream.handle(), "a destroyed stream's work failed");
        }
    }
}

impl<D: Driver> Drop for Checked<D> {
    /// The host never unloads a plugin, but it may drop a backend: the driver cancels what it
    /// can, then every stream's work completes before the driver goes.
    fn drop(&mut self) {
        self.driver.shut_down();
        for stream in self.streams.drain() {
            self.synchronize_before_drop(&stream);
        }
    }
}

/// Checks that `update` may replace launch `index`, `previous`: the same kernel, as many views
/// each of the same size, and a scalar block of the same size, so the native list's layout
/// (descriptor sets, argument blocks) still fits.
fn check_same_shape<D: Driver>(index: u32, previous: &OwnedLaunch<D>, update: &OwnedLaunch<D>) -> Result<()> {
    if !Arc::ptr_eq(&previous.kernel, &update.kernel) {
        return Err(Error::invalid_argument(format!(
            "launch {index} of the command list runs kernel {:#x}; an update may change its arguments, not its kernel \
             (given {:#x})",
            previous.kernel.handle(),
            update.kernel.handle()
        )));
    }
    if previous.buffers.len() != update.buffers.len() {
        return Err(Error::invalid_argument(format!(
            "launch {index} of the command list binds {} buffer(s); the update gives {}",
            previous.buffers.len(),
            update.buffers.len()
        )));
    }
    for (position, (before, after)) in previous.buffers.iter().zip(&update.buffers).enumerate() {
        if before.size != after.size {
            return Err(Error::invalid_argument(format!(
                "buffer argument {position} of launch {index} is a view of {} bytes; an update must give a view of \
                 the same size, not {}",
                before.size, after.size
            )));
        }
    }
    if previous.scalars.len() != update.scalars.len() {
        return Err(Error::invalid_argument(format!(
            "launch {index} of the command list has a scalar block of {} bytes; the update gives {}",
            previous.scalars.len(),
            update.scalars.len()
        )));
    }
    Ok(())
}

/// `check_range` for a range of `buffer`, naming the buffer when the range is refused.
fn in_buffer<T>(what: &str, offset: u64, size: u64, buffer: &Object<T>) -> Result<()> {
    check_range(what, offset, size, buffer.size())
        .map_err(|error| error.context(format_args!("buffer {:#x}", buffer.handle())))
}

fn null_pointer(what: &str, size: u64, buffer: u64) -> Error {
    Error::invalid_argument(format!(
        "{what} of {size} bytes with buffer {buffer:#x} through a null host pointer"
    ))
}

impl<D: Driver> Backend for Checked<D> {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: D::NAME.to_string(),
            version: D::VERSION.to_string(),
            abi_version: (crate::abi::XHAL_ABI_MAJOR, crate::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        self.driver.device_count()
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        self.device_index(index)?;
        let opened = self.opened.lock().get(index as usize).and_then(Weak::upgrade);
        self.driver
            .device_info(index, opened.as_deref().map(|device| &**device))
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        self.device_index(index)?;
        let mut opened = self.opened.lock();
        if let Some(device) = opened.get(index as usize).and_then(Weak::upgrade) {
            return self.devices.insert_shared(device).map(DeviceHandle);
        }
        let buffer_offset_alignment = u64::from(self.driver.device_info(index, None)?.buffer_offset_alignment).max(1);
        let device = self.driver.device_open(index)?;
        {
            let mut alignments = self.alignments.write();
            if alignments.len() <= index as usize {
                alignments.resize(index as usize + 1, 1);
            }
            alignments[index as usize] = buffer_offset_alignment;
        }
        let handle = Self::insert(&self.devices, index, 0, device)?;
        if opened.len() <= index as usize {
            opened.resize_with(index as usize + 1, Weak::new);
        }
        opened[index as usize] = Arc::downgrade(&self.devices.get(handle)?);
        Ok(DeviceHandle(handle))
    }

    fn device_close(&self, device: DeviceHandle) {
        Self::release(&self.devices, device.0);
    }

    fn device_memory_usage(&self, device: DeviceHandle) -> Result<MemoryUsage> {
        D::Device::memory_usage(&self.device(device)?)
    }

    fn device_clock(&self, device: DeviceHandle) -> Result<crate::ClockSample> {
        D::Device::clock(&self.device(device)?)
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let device = self.device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("a buffer of 0 bytes holds nothing"));
        }
        let buffer = D::Buffer::allocate(&self.driver, &device, size)?;
        Self::insert(&self.buffers, device.device_index(), size, buffer).map(BufferHandle)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        // Only the handle goes: queued work still holding the buffer keeps it alive.
        Self::release(&self.buffers, buffer.0);
        // Freeing a buffer ends its mappings.
        self.mappings.lock().retain(|&(handle, _)| handle != buffer.0);
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let device = self.device(device)?;
        let stream = D::Stream::create(&self.driver, &device)?;
        Self::insert(&self.streams, device.device_index(), 0, stream).map(StreamHandle)
    }

    fn device_stream_priorities(&self, device: DeviceHandle) -> Result<StreamPriorities> {
        let device = self.device(device)?;
        let priorities = D::Device::stream_priorities(&device)?;
        if priorities.least != 0 || priorities.greatest > 0 {
            return Err(Error::internal(format!(
                "{} device {} reported stream priorities from {} (least) to {} (greatest): the ABI asks for 0 \
                 to a number at most 0",
                D::NAME,
                device.device_index(),
                priorities.least,
                priorities.greatest
            )));
        }
        Ok(priorities)
    }

    fn stream_create_with_priority(&self, device: DeviceHandle, priority: i32) -> Result<StreamHandle> {
        let device = self.device(device)?;
        let priorities = D::Device::stream_priorities(&device)?;
        if !priorities.contains(priority) {
            return Err(Error::invalid_argument(format!(
                "stream priority {priority} is outside {} device {}'s range, {} (least urgent) to {} (most urgent)",
                D::NAME,
                device.device_index(),
                priorities.least,
                priorities.greatest
            )));
        }
        let stream = D::Stream::create_with_priority(&self.driver, &device, priority)?;
        Self::insert(&self.streams, device.device_index(), 0, stream).map(StreamHandle)
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        // The ABI: queued work completes first, then the stream goes.
        if let Some(stream) = Self::release(&self.streams, stream.0) {
            self.synchronize_before_drop(&stream);
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
        in_buffer("write", offset, size, &buffer)?;
        if size == 0 {
            return D::Stream::sticky_error(&stream);
        }
        if source.is_null() {
            return Err(null_pointer("write", size, buffer.handle()));
        }
        // SAFETY: the caller accepted `stream_write`'s contract; the range is in bounds and
        // the pointer non-null, as the driver's contract asks.
        unsafe { D::Stream::write(&stream, &buffer, offset, source, size) }
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
        in_buffer("read", offset, size, &buffer)?;
        if size == 0 {
            return D::Stream::sticky_error(&stream);
        }
        if destination.is_null() {
            return Err(null_pointer("read", size, buffer.handle()));
        }
        // SAFETY: as in `stream_write`.
        unsafe { D::Stream::read(&stream, &buffer, offset, destination, size) }
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
        let destination = Self::on_stream_device(&stream, self.buffers.get(destination.0)?, ObjectKind::Buffer)?;
        in_buffer("copy source", source_offset, size, &source)?;
        in_buffer("copy destination", destination_offset, size, &destination)?;
        if size == 0 {
            return D::Stream::sticky_error(&stream);
        }
        D::Stream::copy(&stream, &source, source_offset, &destination, destination_offset, size)
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
        Self::check_fill(buffer.handle(), offset, size, pattern)?;
        in_buffer("fill", offset, size, &buffer)?;
        if size == 0 {
            return D::Stream::sticky_error(&stream);
        }
        D::Stream::fill(&stream, &buffer, offset, size, pattern)
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let stream = self.streams.get(stream.0)?;
        let kernel = Self::on_stream_device(&stream, self.kernels.get(launch.kernel.0)?, ObjectKind::Kernel)?;
        let alignment = self
            .alignments
            .read()
            .get(stream.device_index() as usize)
            .copied()
            .unwrap_or(1);
        let mut buffers: SmallVec<[BufferView<D::Buffer>; 8]> = SmallVec::new();
        for (index, argument) in launch.buffers.iter().enumerate() {
            let buffer = Self::on_stream_device(&stream, self.buffers.get(argument.buffer.0)?, ObjectKind::Buffer)?;
            // The message is only formatted for a view that is refused: launches are hot.
            if check_range("", argument.offset, argument.size, buffer.size()).is_err()
                || argument.size == 0
                || !argument.offset.is_multiple_of(alignment)
            {
                // The slow path names what is wrong, exactly as a command list's append does.
                self.resolve_launch(stream.device_index(), "stream", launch)?;
                return Err(Error::internal(format!(
                    "buffer argument {index} was refused without a reason"
                )));
            }
            buffers.push(BufferView {
                buffer,
                offset: argument.offset,
                size: argument.size,
            });
        }
        let checked = Launch {
            kernel: &kernel,
            workgroups: launch.workgroups,
            buffers: &buffers,
            scalars: launch.scalars,
        };
        D::Stream::launch(&stream, &checked)
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let (stream, event) = self.stream_and_event(stream, event)?;
        D::Stream::record_event(&stream, &event)
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let (stream, event) = self.stream_and_event(stream, event)?;
        D::Stream::wait_event(&stream, &event)
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        D::Stream::synchronize(&self.streams.get(stream.0)?)
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        D::Stream::query(&self.streams.get(stream.0)?)
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        let device = self.device(device)?;
        let event = D::Event::create(&self.driver, &device, timing)?;
        Self::insert(&self.events, device.device_index(), 0, event).map(EventHandle)
    }

    fn event_destroy(&self, event: EventHandle) {
        Self::release(&self.events, event.0);
    }

    fn event_query(&self, event: EventHandle) -> Result<bool> {
        D::Event::query(&self.events.get(event.0)?)
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        D::Event::synchronize(&self.events.get(event.0)?)
    }

    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        let start = self.events.get(start.0)?;
        let end = self.events.get(end.0)?;
        D::Event::elapsed_time(&start, &end)
    }

    fn event_timestamp(&self, event: EventHandle) -> Result<u64> {
        D::Event::timestamp(&self.events.get(event.0)?)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let device = self.device(device)?;
        let module = D::Module::load(&self.driver, &device, format, code)?;
        Self::insert(&self.modules, device.device_index(), 0, module).map(ModuleHandle)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        // Kernels taken from the module keep what they need: destroying it never breaks them.
        Self::release(&self.modules, module.0);
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let module = self.modules.get(module.0)?;
        let kernel = D::Kernel::get(&self.driver, &module, name)?;
        Self::insert(&self.kernels, module.device_index(), 0, kernel).map(KernelHandle)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        Self::release(&self.kernels, kernel.0);
    }

    fn command_list_create(&self, device: DeviceHandle) -> Result<CommandListHandle> {
        let device = self.device(device)?;
        if !D::Device::has_command_lists(&device) {
            return Err(Error::unsupported(format!(
                "{} device {} has no command lists",
                D::NAME,
                device.device_index()
            )));
        }
        let index = device.device_index();
        let list = CommandList {
            device,
            state: Mutex::new(ListState {
                commands: Vec::new(),
                native: None,
                submitted_to: Vec::new(),
            }),
        };
        Self::insert(&self.command_lists, index, 0, list).map(CommandListHandle)
    }

    fn command_list_append_copy(
        &self,
        list: CommandListHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let list = self.command_lists.get(list.0)?;
        let device = list.device_index();
        let source = Self::on_device(device, "command list", self.buffers.get(source.0)?, ObjectKind::Buffer)?;
        let destination = Self::on_device(
            device,
            "command list",
            self.buffers.get(destination.0)?,
            ObjectKind::Buffer,
        )?;
        in_buffer("copy source", source_offset, size, &source)?;
        in_buffer("copy destination", destination_offset, size, &destination)?;
        if size == 0 {
            return Err(Error::invalid_argument(
                "a command list copy of 0 bytes does nothing; leave it out",
            ));
        }
        let command = Command::Copy {
            source,
            source_offset,
            destination,
            destination_offset,
            size,
        };
        self.append(&list, command)
    }

    fn command_list_append_fill(
        &self,
        list: CommandListHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let list = self.command_lists.get(list.0)?;
        let buffer = Self::on_device(
            list.device_index(),
            "command list",
            self.buffers.get(buffer.0)?,
            ObjectKind::Buffer,
        )?;
        Self::check_fill(buffer.handle(), offset, size, pattern)?;
        in_buffer("fill", offset, size, &buffer)?;
        if size == 0 {
            return Err(Error::invalid_argument(
                "a command list fill of 0 bytes does nothing; leave it out",
            ));
        }
        let command = Command::Fill {
            buffer,
            offset,
            size,
            pattern: pattern.to_vec(),
        };
        self.append(&list, command)
    }

    fn command_list_append_launch(&self, list: CommandListHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let list = self.command_lists.get(list.0)?;
        let launch = self.resolve_launch(list.device_index(), "command list", launch)?;
        self.append(&list, Command::Launch(launch))
    }

    fn command_list_finish(&self, list: CommandListHandle) -> Result<()> {
        let list = self.command_lists.get(list.0)?;
        let mut state = list.state.lock();
        if state.native.is_some() {
            return Err(Error::invalid_argument(format!(
                "command list {:#x} is already finished",
                list.handle()
            )));
        }
        let native = D::Device::build_command_list(&self.driver, &list.device, &state.commands)?;
        state.native = Some(native);
        Ok(())
    }

    fn command_list_update_launch(&self, list: CommandListHandle, index: u32, launch: &LaunchArgs<'_>) -> Result<()> {
        let list = self.command_lists.get(list.0)?;
        let launch = self.resolve_launch(list.device_index(), "command list", launch)?;
        let mut state = list.state.lock();
        let state = &mut *state;
        let Some(native) = &state.native else {
            return Err(Error::invalid_argument(format!(
                "command list {:#x} is not finished; update a launch once the list is finished",
                list.handle()
            )));
        };
        let count = state.commands.len();
        let Some(command) = state.commands.get_mut(index as usize) else {
            return Err(Error::out_of_bounds(format!(
                "command list {:#x} has {count} command(s); there is no command {index}",
                list.handle()
            )));
        };
        let Command::Launch(previous) = command else {
            return Err(Error::invalid_argument(format!(
                "command {index} of command list {:#x} is a copy or a fill, not a launch",
                list.handle()
            )));
        };
        check_same_shape(index, previous, &launch)?;
        // No submission may be pending while a native list changes under it.
        for stream in state.submitted_to.drain(..).filter_map(|stream| stream.upgrade()) {
            self.synchronize_before_drop(&stream);
        }
        native.update_launch(index as usize, &launch)?;
        *previous = launch;
        Ok(())
    }

    fn stream_submit_command_list(&self, stream: StreamHandle, list: CommandListHandle) -> Result<()> {
        let stream = self.streams.get(stream.0)?;
        let list = Self::on_stream_device(&stream, self.command_lists.get(list.0)?, ObjectKind::CommandList)?;
        let mut state = list.state.lock();
        let Some(native) = &state.native else {
            return Err(Error::invalid_argument(format!(
                "command list {:#x} is not finished; finish it before submitting it",
                list.handle()
            )));
        };
        native.submit(&stream)?;
        if !state
            .submitted_to
            .iter()
            .any(|known| std::ptr::eq(known.as_ptr(), Arc::as_ptr(&stream)))
        {
            state.submitted_to.retain(|known| known.strong_count() > 0);
            state.submitted_to.push(Arc::downgrade(&stream));
        }
        Ok(())
    }

    fn buffer_map(&self, buffer: BufferHandle, offset: u64, size: u64, flags: u32) -> Result<*mut u8> {
        let object = self.buffers.get(buffer.0)?;
        let known = crate::abi::XHAL_MAP_READ | crate::abi::XHAL_MAP_WRITE;
        if flags == 0 || flags & !known != 0 {
            return Err(Error::invalid_argument(format!(
                "map flags {flags:#x}: expected XHAL_MAP_READ (1), XHAL_MAP_WRITE (2) or both"
            )));
        }
        in_buffer("map", offset, size, &object)?;
        if size == 0 {
            return Err(Error::invalid_argument(format!(
                "a mapping of 0 bytes of buffer {:#x} gives the host nothing to read or write",
                object.handle()
            )));
        }
        let pointer = D::Buffer::map(&object, offset, size, flags & crate::abi::XHAL_MAP_WRITE != 0)?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "{} mapped buffer {:#x} at a null address",
                D::NAME,
                object.handle()
            )));
        }
        self.mappings.lock().push((object.handle(), pointer as usize));
        Ok(pointer)
    }

    fn host_memory_allocate(&self, device: DeviceHandle, size: u64) -> Result<*mut u8> {
        let device = self.device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("host memory of 0 bytes holds nothing"));
        }
        let pointer = D::Device::host_memory_allocate(&device, size)?;
        if pointer.is_null() || !(pointer as usize).is_multiple_of(64) {
            return Err(Error::internal(format!(
                "{} device {} returned host memory at {pointer:p}: null, or not 64-byte aligned",
                D::NAME,
                device.device_index()
            )));
        }
        self.host_memory.lock().push((device.device_index(), pointer as usize));
        Ok(pointer)
    }

    fn host_memory_free(&self, device: DeviceHandle, pointer: *mut u8) {
        if pointer.is_null() {
            return;
        }
        let Ok(device) = self.device(device) else {
            tracing::warn!("host memory freed through a device that is not open; ignored");
            return;
        };
        let mut live = self.host_memory.lock();
        let Some(position) = live
            .iter()
            .position(|&(index, address)| index == device.device_index() && address == pointer as usize)
        else {
            tracing::warn!(?pointer, "freeing host memory this device did not allocate; ignored");
            return;
        };
        live.swap_remove(position);
        drop(live);
        D::Device::host_memory_free(&device, pointer);
    }

    fn buffer_unmap(&self, buffer: BufferHandle, pointer: *mut u8) -> Result<()> {
        let object = self.buffers.get(buffer.0)?;
        {
            let mut mappings = self.mappings.lock();
            let Some(position) = mappings
                .iter()
                .position(|&(handle, address)| handle == object.handle() && address == pointer as usize)
            else {
                return Err(Error::invalid_argument(format!(
                    "{pointer:p} is not a live mapping of buffer {:#x}: unmap only what buffer_map returned, once",
                    object.handle()
                )));
            };
            mappings.swap_remove(position);
        }
        D::Buffer::unmap(&object, pointer)
    }

    fn command_list_destroy(&self, list: CommandListHandle) {
        // Submitted work keeps what it uses alive (the driver's contract), so only the handle
        // and the adapter's record go.
        Self::release(&self.command_lists, list.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BufferArg, DeviceType, Features};
    use crate::error::ErrorKind;
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Two devices of host memory whose streams run every command at once; it counts what
    /// reaches it, so a test can tell that a refused call never did.
    #[derive(Default)]
    struct Toy {
        calls: Arc<AtomicU32>,
        synchronized: Arc<AtomicU32>,
        opens: AtomicU32,
    }

    struct ToyStream {
        calls: Arc<AtomicU32>,
        synchronized: Arc<AtomicU32>,
        sticky: Mutex<Option<Error>>,
    }

    impl ToyStream {
        fn called(&self) -> Result<()> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    impl Driver for Toy {
        type Device = ();
        type Buffer = Mutex<Vec<u8>>;
        type Stream = ToyStream;
        type Event = ();
        type Module = ();
        type Kernel = ();
        const NAME: &'static str = "toy";
        const VERSION: &'static str = "0";

        fn device_count(&self) -> Result<u32> {
            Ok(2)
        }
        fn device_info(&self, index: u32, _opened: Option<&()>) -> Result<DeviceInfo> {
            Ok(DeviceInfo {
                name: format!("toy {index}"),
                vendor: "toy".into(),
                vendor_id: 0,
                device_id: 0,
                device_type: DeviceType::Cpu,
                uuid: [0; 16],
                pci_bus_id: None,
                driver_version: "0".into(),
                total_memory: 1 << 20,
                free_memory: 1 << 20,
                max_allocation_size: 1 << 20,
                max_workgroup_size: [1; 3],
                max_workgroup_invocations: 1,
                max_workgroup_count: [1; 3],
                max_workgroup_memory: 0,
                subgroup_size: 1,
                max_buffer_arguments: 4,
                max_scalar_block_size: 0,
                buffer_offset_alignment: 16,
                features: Features::default(),
                kernel_formats: vec![KernelFormat::WGSL],
            })
        }
        fn device_open(&self, _index: u32) -> Result<()> {
            self.opens.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    impl DriverDevice<Toy> for () {}

    impl DriverBuffer<Toy> for Mutex<Vec<u8>> {
        fn allocate(_driver: &Toy, _device: &Arc<Object<()>>, size: u64) -> Result<Self> {
            Ok(Mutex::new(vec![0; size as usize]))
        }
    }

    type ToyBuffer = Arc<Object<Mutex<Vec<u8>>>>;

    impl DriverStream<Toy> for ToyStream {
        fn create(driver: &Toy, _device: &Arc<Object<()>>) -> Result<ToyStream> {
            Ok(ToyStream {
                calls: Arc::clone(&driver.calls),
                synchronized: Arc::clone(&driver.synchronized),
                sticky: Mutex::new(None),
            })
        }
        fn sticky_error(stream: &Arc<Object<ToyStream>>) -> Result<()> {
            stream.sticky.lock().clone().map_or(Ok(()), Err)
        }
        unsafe fn write(
            stream: &Arc<Object<Self>>,
            buffer: &ToyBuffer,
            offset: u64,
            source: *const u8,
            size: u64,
        ) -> Result<()> {
            stream.called()?;
            // SAFETY: the adapter checked the pointer non-null; the caller keeps the bytes valid.
            let bytes = unsafe { std::slice::from_raw_parts(source, size as usize) };
            buffer.lock()[offset as usize..(offset + size) as usize].copy_from_slice(bytes);
            Ok(())
        }
        unsafe fn read(
            stream: &Arc<Object<Self>>,
            buffer: &ToyBuffer,
            offset: u64,
            destination: *mut u8,
            size: u64,
        ) -> Result<()> {
            stream.called()?;
            // SAFETY: as in `write`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(destination, size as usize) };
            bytes.copy_from_slice(&buffer.lock()[offset as usize..(offset + size) as usize]);
            Ok(())
        }
        fn copy(stream: &Arc<Object<Self>>, _: &ToyBuffer, _: u64, _: &ToyBuffer, _: u64, _: u64) -> Result<()> {
            stream.called()
        }
        fn fill(stream: &Arc<Object<Self>>, buffer: &ToyBuffer, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
            stream.called()?;
            let mut bytes = buffer.lock();
            for chunk in bytes[offset as usize..(offset + size) as usize].chunks_exact_mut(pattern.len()) {
                chunk.copy_from_slice(pattern);
            }
            Ok(())
        }
        fn launch(stream: &Arc<Object<Self>>, launch: &Launch<'_, Toy>) -> Result<()> {
            assert!(launch.buffers.iter().all(|view| view.size > 0));
            stream.called()
        }
        fn record_event(stream: &Arc<Object<Self>>, _event: &Arc<Object<()>>) -> Result<()> {
            stream.called()
        }
        fn wait_event(stream: &Arc<Object<Self>>, _event: &Arc<Object<()>>) -> Result<()> {
            stream.called()
        }
        fn synchronize(stream: &Arc<Object<Self>>) -> Result<()> {
            stream.synchronized.fetch_add(1, Ordering::Relaxed);
            Self::sticky_error(stream)
        }
        fn query(_stream: &Arc<Object<Self>>) -> Result<bool> {
            Ok(true)
        }
    }

    impl DriverEvent<Toy> for () {
        fn create(_driver: &Toy, _device: &Arc<Object<()>>, _timing: bool) -> Result<()> {
            Ok(())
        }
        fn query(_event: &Arc<Object<()>>) -> Result<bool> {
            Ok(true)
        }
        fn synchronize(_event: &Arc<Object<()>>) -> Result<()> {
            Ok(())
        }
        fn elapsed_time(_start: &Arc<Object<()>>, _end: &Arc<Object<()>>) -> Result<u64> {
            Ok(0)
        }
    }

    impl DriverModule<Toy> for () {
        fn load(_driver: &Toy, _device: &Arc<Object<()>>, _format: KernelFormat, _code: &[u8]) -> Result<()> {
            Ok(())
        }
    }

    impl DriverKernel<Toy> for () {
        fn get(_driver: &Toy, _module: &Arc<Object<()>>, _name: &str) -> Result<()> {
            Ok(())
        }
    }

    fn calls(backend: &Checked<Toy>) -> u32 {
        backend.driver().calls.load(Ordering::Relaxed)
    }

    #[test]
    fn a_round_trip_reaches_the_driver_with_checked_objects() {
        let backend = Checked::new(Toy::default());
        let device = backend.device_open(1).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 8).unwrap();
        let input = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let mut output = [0u8; 8];
        // SAFETY: both arrays outlive these calls, and the toy driver copies at once.
        unsafe {
            backend.stream_write(stream, buffer, 0, input.as_ptr(), 8).unwrap();
            backend.stream_fill(stream, buffer, 4, 4, &[9, 9]).unwrap();
            backend.stream_read(stream, buffer, 0, output.as_mut_ptr(), 8).unwrap();
        }
        assert_eq!(output, [1, 2, 3, 4, 9, 9, 9, 9]);
        assert_eq!(backend.buffer(buffer).unwrap().device_index(), 1);
    }

    #[test]
    fn opens_of_one_index_share_one_device_while_any_is_live() {
        let backend = Checked::new(Toy::default());
        let opens = || backend.driver().opens.load(Ordering::Relaxed);
        let first = backend.device_open(0).unwrap();
        let second = backend.device_open(0).unwrap();
        assert_ne!(first, second, "each open has its own handle");
        assert_eq!(opens(), 1, "the second open shares the first's device");
        backend.device_open(1).unwrap();
        assert_eq!(opens(), 2, "another index is another device");
        backend.device_close(first);
        let buffer = backend.buffer_allocate(second, 4).unwrap();
        assert_eq!(backend.buffer(buffer).unwrap().device_index(), 0);
        backend.device_close(second);
        // No handle to index 0 is live: the next open opens the device again.
        backend.device_open(0).unwrap();
        assert_eq!(opens(), 3);
    }

    #[test]
    fn a_device_index_past_the_count_is_not_found() {
        let backend = Checked::new(Toy::default());
        let error = backend.device_open(2).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert_eq!(
            error.message(),
            "toy device 2 does not exist; this backend has 2 device(s)"
        );
        assert_eq!(backend.device_info(7).unwrap_err().kind(), ErrorKind::NotFound);
    }

    #[test]
    fn objects_of_another_device_are_refused_naming_both_devices() {
        let backend = Checked::new(Toy::default());
        let first = backend.device_open(0).unwrap();
        let second = backend.device_open(1).unwrap();
        let stream = backend.stream_create(first).unwrap();
        let foreign = backend.buffer_allocate(second, 16).unwrap();
        let own = backend.buffer_allocate(first, 16).unwrap();
        let error = backend.stream_fill(stream, foreign, 0, 16, &[0]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidHandle);
        assert_eq!(
            error.message(),
            format!(
                "buffer {:#x} belongs to toy device 1, the stream is on device 0",
                foreign.0
            )
        );
        let copy = backend.stream_copy(stream, own, 0, foreign, 0, 4).unwrap_err();
        assert!(copy.message().contains("belongs to toy device 1"), "{copy}");
        let event = backend.event_create(second, false).unwrap();
        let record = backend.stream_record_event(stream, event).unwrap_err();
        assert!(record.message().starts_with("event "), "{record}");
        assert!(backend.stream_wait_event(stream, event).is_err());
        let module = backend.module_load(second, KernelFormat::WGSL, b"").unwrap();
        let kernel = backend.kernel_get(module, "main").unwrap();
        let launch = LaunchArgs {
            kernel,
            workgroups: [1; 3],
            buffers: &[],
            scalars: &[],
        };
        let error = backend.stream_launch(stream, &launch).unwrap_err();
        assert!(error.message().starts_with("kernel "), "{error}");
        assert_eq!(calls(&backend), 0, "no refused call may reach the driver");
    }

    #[test]
    fn ranges_patterns_and_pointers_are_checked_before_the_driver() {
        let backend = Checked::new(Toy::default());
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 64).unwrap();
        let zero = backend.buffer_allocate(device, 0).unwrap_err();
        assert_eq!(zero.kind(), ErrorKind::InvalidArgument);

        let past = backend.stream_fill(stream, buffer, 60, 8, &[0]).unwrap_err();
        assert_eq!(past.kind(), ErrorKind::OutOfBounds);
        assert_eq!(
            past.message(),
            format!(
                "buffer {:#x}: fill: bytes 60..68 reach past the end of a 64-byte buffer",
                buffer.0
            )
        );
        let overflow = backend.stream_copy(stream, buffer, u64::MAX, buffer, 0, 2).unwrap_err();
        assert!(overflow.message().contains("overflows u64"), "{overflow}");
        let pattern = backend.stream_fill(stream, buffer, 0, 64, &[1, 2, 3]).unwrap_err();
        assert_eq!(pattern.message(), "a fill pattern has 1, 2 or 4 bytes, not 3");
        let unaligned = backend.stream_fill(stream, buffer, 2, 8, &[1, 2, 3, 4]).unwrap_err();
        assert!(
            unaligned.message().contains("multiples of the 4-byte pattern"),
            "{unaligned}"
        );
        // SAFETY: null pointers are refused before anything reads or writes through them.
        let (write, read) = unsafe {
            (
                backend
                    .stream_write(stream, buffer, 0, std::ptr::null(), 4)
                    .unwrap_err(),
                backend
                    .stream_read(stream, buffer, 0, std::ptr::null_mut(), 4)
                    .unwrap_err(),
            )
        };
        assert_eq!(write.kind(), ErrorKind::InvalidArgument);
        assert!(write.message().contains("null host pointer"), "{write}");
        assert!(read.message().contains("null host pointer"), "{read}");
        assert_eq!(calls(&backend), 0, "no refused call may reach the driver");
    }

    #[test]
    fn empty_commands_return_the_sticky_error_without_reaching_the_driver() {
        let backend = Checked::new(Toy::default());
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 64).unwrap();
        // SAFETY: a command of 0 bytes never touches the pointer, so null is allowed.
        unsafe { backend.stream_write(stream, buffer, 64, std::ptr::null(), 0).unwrap() };
        backend.stream_copy(stream, buffer, 0, buffer, 8, 0).unwrap();
        backend.stream_fill(stream, buffer, 0, 0, &[1]).unwrap();
        assert_eq!(calls(&backend), 0);
        *backend.stream(stream).unwrap().sticky.lock() = Some(Error::kernel_fault("the kernel faulted"));
        let sticky = backend.stream_fill(stream, buffer, 0, 0, &[1]).unwrap_err();
        assert_eq!(sticky.kind(), ErrorKind::KernelFault);
        // An empty range still has to start inside the buffer.
        let past = backend.stream_copy(stream, buffer, 65, buffer, 0, 0).unwrap_err();
        assert_eq!(past.kind(), ErrorKind::OutOfBounds);
    }

    #[test]
    fn launch_views_must_be_in_bounds_non_empty_and_aligned() {
        let backend = Checked::new(Toy::default());
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 64).unwrap();
        let module = backend.module_load(device, KernelFormat::WGSL, b"").unwrap();
        let kernel = backend.kernel_get(module, "main").unwrap();
        let launch_with = |offset: u64, size: u64| {
            let views = [BufferArg { buffer, offset, size }];
            let launch = LaunchArgs {
                kernel,
                workgroups: [1; 3],
                buffers: &views,
                scalars: &[],
            };
            backend.stream_launch(stream, &launch)
        };
        let empty = launch_with(16, 0).unwrap_err();
        assert!(empty.message().contains("a view of 0 bytes"), "{empty}");
        let past = launch_with(32, 64).unwrap_err();
        assert_eq!(past.kind(), ErrorKind::OutOfBounds);
        assert!(
            past.message()
                .starts_with(&format!("buffer argument 0 (buffer {:#x}): bytes 32..96", buffer.0)),
            "{past}"
        );
        let unaligned = launch_with(8, 8).unwrap_err();
        assert!(unaligned.message().contains("not a multiple of 16"), "{unaligned}");
        assert_eq!(calls(&backend), 0);
        launch_with(16, 16).unwrap();
        assert_eq!(calls(&backend), 1);
    }

    #[test]
    fn streams_are_synchronized_before_they_go_and_destroys_of_stale_handles_are_ignored() {
        let backend = Checked::new(Toy::default());
        let device = backend.device_open(0).unwrap();
        let destroyed = backend.stream_create(device).unwrap();
        let _kept = backend.stream_create(device).unwrap();
        backend.stream_destroy(destroyed);
        assert_eq!(backend.driver().synchronized.load(Ordering::Relaxed), 1);
        backend.stream_destroy(destroyed);
        assert_eq!(backend.driver().synchronized.load(Ordering::Relaxed), 1);
        let stale = backend.stream_synchronize(destroyed).unwrap_err();
        assert!(stale.message().contains("destroyed"), "{stale}");
        // Dropping the adapter synchronizes the one stream still live.
        let synchronized = Arc::clone(&backend.driver().synchronized);
        drop(backend);
        assert_eq!(synchronized.load(Ordering::Relaxed), 2);
    }
}
