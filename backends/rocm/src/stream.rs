//! Streams as HIP streams, events as HIP events.
//!
//! Streams are created non-blocking (`hipStreamNonBlocking`), so they never wait for work on
//! HIP's null stream that something else in the process enqueued. Every command is one
//! asynchronous HIP call on the stream. An error that belongs to the device's execution
//! (a kernel fault, an illegal address, a lost device), whether a synchronize, a query, an
//! event wait or a later enqueue reports it, becomes the stream's sticky error: every later
//! call on the stream returns it.
//!
//! Kernel launches are the stream's; the argument ABI and the checks of a launch's arguments
//! against the kernel's parameters are in `module.rs`. [`LaunchParameters`] is a launch checked
//! and laid out for `hipModuleLaunchKernel`, which command lists (`command_list.rs`) capture too.

use crate::command_list::Executable;
use crate::device::Gpu;
use crate::ffi::{self, HipEvent, HipFunction, HipStream};
use crate::memory::DeviceBuffer;
use crate::module::{lengths_block, KernelObject, UNSIZED_SCALAR_AREA};
use crate::RocmDriver;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::Arc;
use xhal_backend::{BufferView, CopyOverlap, DriverEvent, DriverStream, Error, ErrorKind, Launch, Object, Result};

/// Whether an error from HIP belongs to the work that executed (and so sticks to the stream)
/// rather than to the call that reported it.
fn is_execution_error(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::KernelFault | ErrorKind::DeviceLost | ErrorKind::Timeout
    )
}

pub(crate) struct StreamState {
    /// An error found while executing.
    sticky: Option<Error>,
    /// Temporary allocations that queued commands use, freed once the stream is idle:
    /// freeing sooner would wait for the device (hipFree synchronises).
    retained: Vec<DeviceBuffer>,
    /// Executable graphs launched here, kept until the stream is idle: older HIP runtimes
    /// (ROCm 5's `delete pGraphExec`) free an executable graph at once in hipGraphExecDestroy,
    /// launches pending or not.
    launched_graphs: Vec<Arc<Executable>>,
    /// Kernels launched here, each holding its module, kept until the stream is idle:
    /// `hipModuleUnload` does not wait for pending launches.
    launched_kernels: Vec<Arc<Object<KernelObject>>>,
}

impl StreamState {
    /// Whatever queued work used is no longer in use.
    fn idle(&mut self) {
        self.retained.clear();
        self.launched_graphs.clear();
        self.launched_kernels.clear();
    }

    fn stick(&mut self, error: Error) -> Error {
        self.sticky.get_or_insert(error).clone()
    }

    fn sticky_error(&self) -> Option<Error> {
        self.sticky.clone()
    }
}

/// A HIP stream.
pub struct Stream {
    pub(crate) gpu: Arc<Gpu>,
    raw: HipStream,
    /// Shared with the records of events on this stream.
    state: Arc<Mutex<StreamState>>,
}

// HIP streams may be used from any thread; the state is behind a lock.
// SAFETY: see above.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: the stream is live and only released here. The checked adapter synchronised
        // it before letting it go, so no queued work still uses the retained temporaries.
        unsafe { (self.gpu.api().stream_destroy)(self.raw) };
        self.state.lock().idle();
    }
}

impl Stream {
    fn wrap(gpu: &Arc<Gpu>, raw: HipStream) -> Stream {
        Stream {
            gpu: Arc::clone(gpu),
            raw,
            state: Arc::new(Mutex::new(StreamState {
                sticky: None,
                retained: Vec::new(),
                launched_graphs: Vec::new(),
                launched_kernels: Vec::new(),
            })),
        }
    }

    /// Enqueues one command through `call` (HIP function `function`), which receives the
    /// stream; `doing` names the command for errors.
    pub(crate) fn enqueue(
        &self,
        function: &str,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(HipStream) -> ffi::HipError,
    ) -> Result<()> {
        let mut state = self.state.lock();
        if let Some(error) = state.sticky_error() {
            return Err(error);
        }
        self.gpu.bind()?;
        let code = call(self.raw);
        if let Err(error) = self.gpu.api().check(code, function, doing) {
            // HIP reports an earlier kernel's fault from whichever call comes next.
            return Err(if is_execution_error(&error) {
                state.stick(error)
            } else {
                error
            });
        }
        Ok(())
    }

    /// Keeps `buffer` alive until the stream is next seen idle.
    fn retain(&self, buffer: DeviceBuffer) {
        self.state.lock().retained.push(buffer);
    }

    /// Keeps `graph`, just launched here, alive until the stream is next seen idle.
    pub(crate) fn retain_graph(&self, graph: &Arc<Executable>) {
        let mut state = self.state.lock();
        if !state.launched_graphs.iter().any(|kept| Arc::ptr_eq(kept, graph)) {
            state.launched_graphs.push(Arc::clone(graph));
        }
    }

    fn copy_raw(
        &self,
        source: &DeviceBuffer,
        source_offset: u64,
        destination: &DeviceBuffer,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let bytes = host_size(size, "copy size")?;
        self.enqueue(
            "hipMemcpyDtoDAsync",
            || {
                format!(
                    "copying {size} bytes from byte {source_offset} to byte {destination_offset} on {}",
                    self.gpu.name()
                )
            },
            // SAFETY: both buffers are live and the ranges were checked.
            |stream| unsafe {
                (self.gpu.api().memcpy_dtod_async)(
                    destination.at(destination_offset),
                    source.at(source_offset),
                    bytes,
                    stream,
                )
            },
        )
    }
}

/// Copies, fills and launches. The checked adapter hands over ranges of more than 0 bytes that
/// lie inside their buffers, and fill patterns of 1, 2 or 4 bytes that divide offset and size.
impl DriverStream<RocmDriver> for Stream {
    fn create(_driver: &RocmDriver, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let mut raw: HipStream = std::ptr::null_mut();
        // SAFETY: writes one stream handle.
        let code = unsafe { (gpu.api().stream_create_with_flags)(&mut raw, ffi::HIP_STREAM_NON_BLOCKING) };
        gpu.api().check(code, "hipStreamCreateWithFlags", || {
            format!("creating a stream on {}", gpu.name())
        })?;
        Ok(Stream::wrap(gpu, raw))
    }

    /// A non-blocking stream of `priority` (`hipStreamCreateWithPriority`).
    fn create_with_priority(_driver: &RocmDriver, device: &Arc<Object<Arc<Gpu>>>, priority: i32) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        let Some(create) = gpu.api().stream_create_with_priority else {
            return Err(Error::unsupported(format!(
                "this HIP runtime has no hipStreamCreateWithPriority for {}",
                gpu.name()
            )));
        };
        gpu.bind()?;
        let mut raw: HipStream = std::ptr::null_mut();
        // SAFETY: writes one stream handle.
        let code = unsafe { create(&mut raw, ffi::HIP_STREAM_NON_BLOCKING, priority) };
        gpu.api().check(code, "hipStreamCreateWithPriority", || {
            format!("creating a stream of priority {priority} on {}", gpu.name())
        })?;
        Ok(Stream::wrap(gpu, raw))
    }

    /// The error found while executing, if any: what an empty command on this stream returns.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.state.lock().sticky_error().map_or(Ok(()), Err)
    }

    /// Enqueues a write of `size` bytes from `source`.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes that stay valid and unchanged until the
    /// write completes (the Driver trait's contract).
    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let bytes = host_size(size, "write size")?;
        stream.enqueue(
            "hipMemcpyHtoDAsync",
            || format!("writing {size} bytes at byte {offset} on {}", stream.gpu.name()),
            // SAFETY: asynchronous; the caller keeps `source` valid until the write completes.
            // HIP takes the source as `void*` but does not write through it.
            |raw| unsafe {
                (stream.gpu.api().memcpy_htod_async)(buffer.at(offset), source.cast_mut().cast(), bytes, raw)
            },
        )
    }

    /// Enqueues a read of `size` bytes into `destination`.
    ///
    /// # Safety
    /// `destination` must point to `size` writable bytes that stay valid, and untouched by
    /// anyone else, until the read completes.
    unsafe fn read(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let bytes = host_size(size, "read size")?;
        stream.enqueue(
            "hipMemcpyDtoHAsync",
            || format!("reading {size} bytes at byte {offset} on {}", stream.gpu.name()),
            // SAFETY: asynchronous; the caller keeps `destination` valid until the read completes.
            |raw| unsafe { (stream.gpu.api().memcpy_dtoh_async)(destination.cast(), buffer.at(offset), bytes, raw) },
        )
    }

    /// Enqueues a device copy. A HIP copy between overlapping ranges is undefined, so those
    /// go through a temporary allocation, kept until the stream is idle.
    fn copy(
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: &Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let overlap = CopyOverlap::of(source, source_offset, destination, destination_offset, size);
        if overlap == CopyOverlap::SameRange {
            // A copy onto itself changes nothing, but still runs in order like a command.
            return stream.copy_raw(source, source_offset, destination, destination_offset, 0);
        }
        if overlap == CopyOverlap::Overlapping {
            let temporary = DeviceBuffer::new(&stream.gpu, size)?;
            stream.copy_raw(source, source_offset, &temporary, 0, size)?;
            let copied = stream.copy_raw(&temporary, 0, destination, destination_offset, size);
            stream.retain(temporary);
            return copied;
        }
        stream.copy_raw(source, source_offset, destination, destination_offset, size)
    }

    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of it.
    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let bytes = host_size(size, "fill size")?;
        let doing = || {
            format!(
                "filling {size} bytes at byte {offset} with a {}-byte pattern on {}",
                pattern.len(),
                stream.gpu.name()
            )
        };
        let api = stream.gpu.api();
        let target = buffer.at(offset);
        match *pattern {
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [byte] => stream.enqueue("hipMemsetD8Async", doing, |raw| unsafe {
                (api.memset_d8_async)(target, byte, bytes, raw)
            }),
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [first, second] => stream.enqueue("hipMemsetD16Async", doing, |raw| unsafe {
                (api.memset_d16_async)(target, u16::from_ne_bytes([first, second]), bytes / 2, raw)
            }),
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [first, second, third, fourth] => stream.enqueue("hipMemsetD32Async", doing, |raw| unsafe {
                (api.memset_d32_async)(
                    target,
                    i32::from_ne_bytes([first, second, third, fourth]),
                    bytes / 4,
                    raw,
                )
            }),
            _ => Err(Error::invalid_argument(format!(
                "a fill pattern has 1, 2 or 4 bytes, not {}",
                pattern.len()
            ))),
        }
    }

    /// Enqueues the kernel with `launch.workgroups` workgroups (see `module.rs` for the
    /// argument ABI and the checks of the arguments against the kernel's parameters). The
    /// stream keeps the kernel, and so its module, until it is idle.
    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, RocmDriver>) -> Result<()> {
        let parameters = LaunchParameters::new(launch.kernel, launch.workgroups, launch.buffers, launch.scalars)?;
        let api = launch.kernel.module.gpu.api();
        stream.enqueue(
            "hipModuleLaunchKernel",
            || parameters.describe(),
            // SAFETY: the parameters were checked against the kernel; the stream is live and
            // of the kernel's device, which `enqueue` made current; HIP copies the values
            // before returning.
            |raw| unsafe { parameters.launch(api, raw) },
        )?;
        let mut state = stream.state.lock();
        if !state
            .launched_kernels
            .iter()
            .any(|kept| Arc::ptr_eq(kept, launch.kernel))
        {
            state.launched_kernels.push(Arc::clone(launch.kernel));
        }
        Ok(())
    }

    /// Records `event` after everything enqueued so far.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        stream.enqueue(
            "hipEventRecord",
            || format!("recording an event on {}", stream.gpu.name()),
            // SAFETY: both handles are live and belong to one device.
            |raw| unsafe { (stream.gpu.api().event_record)(event.raw, raw) },
        )?;
        *event.record.lock() = Some(Arc::new(Record {
            stream: Arc::clone(&stream.state),
        }));
        Ok(())
    }

    /// Makes later commands wait for `event`'s most recent record.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        if event.record.lock().is_none() {
            return Ok(());
        }
        stream.enqueue(
            "hipStreamWaitEvent",
            || format!("waiting for an event on {}", stream.gpu.name()),
            // SAFETY: both handles are live; flags must be 0.
            |raw| unsafe { (stream.gpu.api().stream_wait_event)(raw, event.raw, 0) },
        )
    }

    /// Blocks until everything enqueued has completed.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let mut state = stream.state.lock();
        stream.gpu.bind()?;
        // Drain even with a sticky error known, so no command uses host memory after this returns.
        // SAFETY: the stream is live.
        let code = unsafe { (stream.gpu.api().stream_synchronize)(stream.raw) };
        let result = stream.gpu.api().check(code, "hipStreamSynchronize", || {
            format!("waiting for a stream on {}", stream.gpu.name())
        });
        state.idle();
        if let Some(error) = state.sticky_error() {
            return Err(error);
        }
        result.map_err(|error| state.stick(error))
    }

    /// True when everything enqueued has completed.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        if let Some(error) = state.sticky_error() {
            return Err(error);
        }
        stream.gpu.bind()?;
        // SAFETY: the stream is live.
        let code = unsafe { (stream.gpu.api().stream_query)(stream.raw) };
        match code {
            ffi::HIP_SUCCESS => {
                state.idle();
                Ok(true)
            }
            ffi::HIP_ERROR_NOT_READY => Ok(false),
            _ => Err(state.stick(stream.gpu.api().error(
                &format!("asking whether a stream on {} is idle", stream.gpu.name()),
                "hipStreamQuery",
                code,
            ))),
        }
    }
}

/// One record of an event: the state of the stream it was recorded on, which a failure the
/// event's wait finds sticks to.
struct Record {
    stream: Arc<Mutex<StreamState>>,
}

impl Record {
    /// Makes an error HIP reported about the recorded work the stream's sticky error.
    fn fail(&self, error: Error) -> Error {
        if is_execution_error(&error) {
            self.stream.lock().stick(error)
        } else {
            error
        }
    }
}

/// A HIP event.
pub struct Event {
    pub(crate) gpu: Arc<Gpu>,
    raw: HipEvent,
    timing: bool,
    /// The most recent record; waits work on a copy, so recording again never waits for them.
    record: Mutex<Option<Arc<Record>>>,
}

// HIP events may be used from any thread.
// SAFETY: see above.
unsafe impl Send for Event {}
// SAFETY: see above.
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: this backend's event, released once; HIP defers the release of a recorded
        // event until its work completes.
        unsafe { (self.gpu.api().event_destroy)(self.raw) };
    }
}

impl Event {
    /// `Some(true)` once the record completed, `Some(false)` while pending, `None` when the
    /// event was never recorded.
    fn poll(&self) -> Result<Option<bool>> {
        let record = self.record.lock().clone();
        let Some(record) = record else {
            return Ok(None);
        };
        // SAFETY: the event is live.
        let code = unsafe { (self.gpu.api().event_query)(self.raw) };
        match code {
            ffi::HIP_SUCCESS => Ok(Some(true)),
            ffi::HIP_ERROR_NOT_READY => Ok(Some(false)),
            _ => Err(record.fail(
                self.gpu
                    .api()
                    .error("asking whether an event completed", "hipEventQuery", code),
            )),
        }
    }

    fn check_timed(event: &Arc<Object<Event>>, role: &str) -> Result<()> {
        let id = event.handle();
        if !event.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was created without timing; create it with timing to measure elapsed time"
            )));
        }
        match event.poll()? {
            None => Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was never recorded"
            ))),
            Some(false) => Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            ))),
            Some(true) => Ok(()),
        }
    }
}

impl DriverEvent<RocmDriver> for Event {
    fn create(_driver: &RocmDriver, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let flags = if timing {
            ffi::HIP_EVENT_DEFAULT
        } else {
            ffi::HIP_EVENT_DISABLE_TIMING
        };
        let mut raw: HipEvent = std::ptr::null_mut();
        // SAFETY: writes one event handle.
        let code = unsafe { (gpu.api().event_create_with_flags)(&mut raw, flags) };
        gpu.api().check(code, "hipEventCreateWithFlags", || {
            format!("creating an event on {}", gpu.name())
        })?;
        Ok(Event {
            gpu: Arc::clone(gpu),
            raw,
            timing,
            record: Mutex::new(None),
        })
    }

    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        Ok(event.poll()?.unwrap_or(true))
    }

    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        let record = event.record.lock().clone();
        let Some(record) = record else {
            return Ok(());
        };
        // SAFETY: the event is live.
        let code = unsafe { (event.gpu.api().event_synchronize)(event.raw) };
        if code != ffi::HIP_SUCCESS {
            return Err(record.fail(
                event
                    .gpu
                    .api()
                    .error("waiting for an event", "hipEventSynchronize", code),
            ));
        }
        Ok(())
    }

    /// Nanoseconds between the two records.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        let (start_id, end_id) = (start.handle(), end.handle());
        Event::check_timed(start, "start")?;
        Event::check_timed(end, "end")?;
        let mut milliseconds: f32 = 0.0;
        // SAFETY: both events are live, recorded and complete.
        let code = unsafe { (start.gpu.api().event_elapsed_time)(&mut milliseconds, start.raw, end.raw) };
        start.gpu.api().check(code, "hipEventElapsedTime", || {
            format!("measuring the time from event {start_id:#x} to event {end_id:#x}")
        })?;
        if milliseconds < 0.0 || !milliseconds.is_finite() {
            return Err(Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x} ({milliseconds} ms)"
            )));
        }
        Ok((f64::from(milliseconds) * 1e6).round() as u64)
    }

    /// Its elapsed time from the device clock's reference event.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        Event::check_timed(event, "the")?;
        event.gpu.event_timestamp(event.raw)
    }
}

/// A `usize` for a HIP size; ranges were checked against buffers that exist in this address
/// space, so this only fails on inputs no buffer could have.
fn host_size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what}: {value} does not fit in a size_t")))
}

/// A launch's parameters as `hipModuleLaunchKernel` takes them, checked against the kernel and
/// the device's limits: the buffers' addresses (with the views' offsets), the scalar block
/// (in an area of [`UNSIZED_SCALAR_AREA`] bytes where the kernel's does not say its size) and,
/// where the kernel takes them, the buffers' lengths.
pub(crate) struct LaunchParameters {
    function: HipFunction,
    name: String,
    workgroups: [u32; 3],
    size: [u32; 3],
    addresses: Vec<*mut c_void>,
    scalar_area: Vec<u8>,
    lengths: Vec<u8>,
}

// The function handle is a runtime object usable from any thread; the rest is plain data (the
// addresses are device addresses, never dereferenced here).
// SAFETY: see above.
unsafe impl Send for LaunchParameters {}
// SAFETY: see above.
unsafe impl Sync for LaunchParameters {}

impl LaunchParameters {
    pub(crate) fn new(
        kernel: &KernelObject,
        workgroups: [u32; 3],
        buffers: &[BufferView<DeviceBuffer>],
        scalars: &[u8],
    ) -> Result<LaunchParameters> {
        let name = &kernel.name;
        kernel.check_arguments(buffers.len(), scalars)?;
        let info = &kernel.module.gpu.adapter().info;
        for axis in 0..3 {
            let count = workgroups[axis];
            let most = info.max_workgroup_count[axis];
            if count == 0 || count > most {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: {count} workgroups in {}; {} launches 1 to {most} there",
                    ["x", "y", "z"][axis],
                    info.name
                )));
            }
            // HIP counts a launch in invocations along each axis, which must fit in 32 bits,
            // whatever the grid limit says; refused here rather than by the enqueue.
            let invocations = u64::from(count) * u64::from(kernel.workgroup_size[axis]);
            if invocations > u64::from(u32::MAX) {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: {count} workgroups of {} invocations in {} make {invocations} invocations; HIP \
                     launches at most {} along each axis",
                    kernel.workgroup_size[axis],
                    ["x", "y", "z"][axis],
                    u32::MAX
                )));
            }
        }
        let mut scalar_area: Vec<u8> = Vec::new();
        if !scalars.is_empty() {
            scalar_area.extend_from_slice(scalars);
            if !kernel.scalar_size_known() {
                scalar_area.resize(UNSIZED_SCALAR_AREA, 0);
            }
        }
        let lengths = if kernel.takes_lengths() {
            lengths_block(buffers.iter().map(|view| view.size))
        } else {
            Vec::new()
        };
        Ok(LaunchParameters {
            function: kernel.function,
            name: name.clone(),
            workgroups,
            size: kernel.workgroup_size,
            addresses: buffers.iter().map(|view| view.buffer.at(view.offset)).collect(),
            scalar_area,
            lengths,
        })
    }

    /// What the launch is, for errors.
    pub(crate) fn describe(&self) -> String {
        let (workgroups, size) = (self.workgroups, self.size);
        format!(
            "launching kernel `{}` with {}x{}x{} workgroups of {}x{}x{}",
            self.name, workgroups[0], workgroups[1], workgroups[2], size[0], size[1], size[2]
        )
    }

    /// `hipModuleLaunchKernel` on `stream`.
    ///
    /// # Safety
    /// The kernel's device is current, and `stream` is a live stream of it.
    pub(crate) unsafe fn launch(&self, api: &ffi::Api, stream: HipStream) -> ffi::HipError {
        // kernelParams holds one pointer per parameter, to the parameter's value; it is
        // `void**`, but HIP only reads the values.
        let mut parameters: Vec<*mut c_void> = self
            .addresses
            .iter()
            .map(|address| (address as *const *mut c_void).cast_mut().cast::<c_void>())
            .collect();
        if !self.scalar_area.is_empty() {
            parameters.push(self.scalar_area.as_ptr().cast_mut().cast());
        }
        if !self.lengths.is_empty() {
            parameters.push(self.lengths.as_ptr().cast_mut().cast());
        }
        let (workgroups, size) = (self.workgroups, self.size);
        // SAFETY: one pointer per parameter, each to a value of the parameter's size (checked
        // in `new`); HIP copies the values before returning; the caller vouches for the stream.
        unsafe {
            (api.module_launch_kernel)(
                self.function,
                workgroups[0],
                workgroups[1],
                workgroups[2],
                size[0],
                size[1],
                size[2],
                0,
                stream,
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }
}
