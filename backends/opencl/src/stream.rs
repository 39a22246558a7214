//! Streams as in-order command queues, events as markers; kernel launches (the arguments
//! set on the kernel, then an NDRange).
//!
//! Every command is enqueued without blocking and the queue is flushed at once, so work starts
//! without a synchronize and another queue may wait for it. The stream keeps the events of the
//! commands not yet seen complete: it is idle when the last completed, and a command that
//! failed while executing (a negative execution status) makes its error the stream's sticky
//! error, even when the commands after it went on to complete. Commands are numbered, so an
//! event recorded after a failed command reports that failure when it is waited for, on
//! drivers that let the commands after a failure complete (PoCL does).

use crate::device::Gpu;
use crate::ffi::{self, ClEventId, ClInt, ClUint, CommandQueue};
use crate::memory::{DeviceBuffer, View};
use crate::module::lengths_block;
use crate::OpenClDriver;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{CopyOverlap, DriverEvent, DriverStream, Error, Launch, Object, Result};

/// A `cl_event` this backend owns one reference to.
pub(crate) struct ClEvent {
    gpu: Arc<Gpu>,
    id: ClEventId,
}

// OpenCL events may be used and released from any thread.
// SAFETY: see above.
unsafe impl Send for ClEvent {}
// SAFETY: see above.
unsafe impl Sync for ClEvent {}

impl Drop for ClEvent {
    fn drop(&mut self) {
        // SAFETY: this backend's one reference.
        unsafe { (self.gpu.api().release_event)(self.id) };
    }
}

impl ClEvent {
    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`: `CL_COMPLETE` (0), running or queued (positive), or
    /// the error the command failed with (negative).
    fn status(&self) -> Result<ClInt> {
        // SAFETY: the event is live; the parameter is a cl_int.
        unsafe {
            ffi::info_value::<ClInt>(ffi::query_of(
                self.gpu.api().get_event_info,
                self.id,
                ffi::CL_EVENT_COMMAND_EXECUTION_STATUS,
            ))
        }
        .map_err(|code| ffi::cl_error("asking an OpenCL event's status", code))
    }

    /// Blocks until the command finished; the command's own failure is an error.
    fn wait(&self) -> Result<()> {
        // SAFETY: one live event.
        let code = unsafe { (self.gpu.api().wait_for_events)(1, &self.id) };
        let status = self.status()?;
        if status < 0 {
            return Err(execution_error(status));
        }
        ffi::check(code, || "waiting for an OpenCL event".to_string())
    }

    fn end_time(&self) -> Result<u64> {
        // SAFETY: the event is live; the parameter is a cl_ulong.
        unsafe {
            ffi::info_value::<u64>(ffi::query_of(
                self.gpu.api().get_event_profiling_info,
                self.id,
                ffi::CL_PROFILING_COMMAND_END,
            ))
        }
        .map_err(|code| ffi::cl_error("reading an event's CL_PROFILING_COMMAND_END", code))
    }
}

/// Enqueues a marker on `queue` (idle, with profiling), waits for it, and returns its
/// `CL_PROFILING_COMMAND_END`: one round trip of a device-clock reading.
pub(crate) fn marker_end_time(gpu: &Arc<Gpu>, queue: CommandQueue) -> Result<u64> {
    let mut id: ClEventId = std::ptr::null_mut();
    // SAFETY: a live queue of this device's context; `id` receives the marker's event.
    let code = unsafe { (gpu.api().enqueue_marker_with_wait_list)(queue, 0, std::ptr::null(), &mut id) };
    ffi::check(code, || format!("enqueueing a clock marker on {}", gpu.name()))?;
    let marker = ClEvent {
        gpu: Arc::clone(gpu),
        id,
    };
    // SAFETY: a live queue.
    ffi::check(unsafe { (gpu.api().flush)(queue) }, || {
        "flushing the clock queue".to_string()
    })?;
    marker.wait()?;
    marker.end_time()
}

/// The error for a command whose execution status is the negative `status`.
fn execution_error(status: ClInt) -> Error {
    let error = ffi::cl_error("a command failed while executing", status);
    Error::new(xhal_backend::ErrorKind::KernelFault, error.message().to_string())
}

/// Once this many commands' events are held, the completed ones at the front are dropped.
const PENDING_SCAN_THRESHOLD: usize = 1024;

struct StreamState {
    /// The events of the commands not yet seen complete, oldest first, with their numbers.
    pending: std::collections::VecDeque<(u64, Arc<ClEvent>)>,
    /// The number the next command gets.
    next_command: u64,
    /// The number of the first command seen failing.
    failed_command: Option<u64>,
    /// The length of `pending` at which the next enqueue drops completed events.
    next_scan: usize,
    /// An error found while executing: returned by every later call.
    sticky: Option<Error>,
}

/// An in-order command queue.
pub struct Stream {
    gpu: Arc<Gpu>,
    queue: CommandQueue,
    /// Shared with the records of events on this stream.
    state: Arc<Mutex<StreamState>>,
}

// Command queues may be used from any thread; the state is behind a lock.
// SAFETY: see above.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        // The checked adapter synchronised the stream before letting it go.
        // SAFETY: the queue is live; nothing else releases it.
        unsafe { (self.gpu.api().release_command_queue)(self.queue) };
    }
}

impl Stream {
    /// The stream's command queue.
    pub(crate) fn queue(&self) -> CommandQueue {
        self.queue
    }

    /// The device's name, for messages.
    pub(crate) fn device_name(&self) -> &str {
        self.gpu.name()
    }

    /// Enqueues one command through `call`, which receives the queue and where to put the
    /// command's event, and returns the OpenCL status; `doing` names the command for errors.
    /// Returns the command's event and number.
    pub(crate) fn enqueue(
        &self,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(CommandQueue, *mut ClEventId) -> ClInt,
    ) -> Result<(Arc<ClEvent>, u64)> {
        let mut state = self.state.lock();
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        let mut event: ClEventId = std::ptr::null_mut();
        let code = call(self.queue, &mut event);
        let doing = doing();
        ffi::check(code, || doing.clone())?;
        if event.is_null() {
            return Err(Error::internal(format!("{doing}: the driver returned no event")));
        }
        let event = Arc::new(ClEvent {
            gpu: Arc::clone(&self.gpu),
            id: event,
        });
        let number = state.next_command;
        state.next_command += 1;
        state.pending.push_back((number, Arc::clone(&event)));
        if state.pending.len() >= state.next_scan {
            // A failure found here is returned by the next call.
            let _ = Self::scan(&mut state);
            state.next_scan = state.pending.len() + PENDING_SCAN_THRESHOLD;
        }
        // SAFETY: the queue is live. Flushing starts the work now, and lets other queues wait
        // for it.
        let code = unsafe { (self.gpu.api().flush)(self.queue) };
        ffi::check(code, || format!("flushing the command queue on {}", self.gpu.name()))?;
        Ok((event, number))
    }

    /// Drops the events of the commands at the front that finished, in order, stopping at the
    /// first still queued or running; a failed one becomes the sticky error, returned here.
    fn scan(state: &mut StreamState) -> Result<()> {
        while let Some((number, front)) = state.pending.front() {
            let number = *number;
            let status = front.status()?;
            if status > ffi::CL_COMPLETE {
                break;
            }
            state.pending.pop_front();
            if status < 0 && state.sticky.is_none() {
                state.sticky = Some(execution_error(status));
                state.failed_command = Some(number);
            }
        }
        match &state.sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// Enqueues a barrier behind a user event that is then set to a failed status, so the
    /// barrier fails while executing, as a command faulting on the device would.
    pub(crate) fn inject_execution_failure(&self) -> Result<()> {
        let api = self.gpu.api();
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: the context is live.
        let user = unsafe { (api.create_user_event)(self.gpu.context, &mut code) };
        ffi::check(code, || "creating a user event".to_string())?;
        let user = ClEvent {
            gpu: Arc::clone(&self.gpu),
            id: user,
        };
        let enqueued = self.enqueue(
            || "enqueueing a barrier behind a user event".to_string(),
            |queue, out| {
                // SAFETY: a one-event wait list of a live event.
                unsafe { (api.enqueue_barrier_with_wait_list)(queue, 1, &user.id, out) }
            },
        );
        // SAFETY: a user event, set once; a negative value is an error status.
        let code = unsafe { (api.set_user_event_status)(user.id, -1) };
        enqueued?;
        ffi::check(code, || "failing a user event".to_string())
    }

    /// Enqueues one copy between ranges that do not overlap (see `copy`).
    fn copy_raw(
        &self,
        source: &DeviceBuffer,
        source_offset: u64,
        destination: &DeviceBuffer,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let from = host_size(source_offset, "copy source offset")?;
        let to = host_size(destination_offset, "copy destination offset")?;
        let bytes = host_size(size, "copy size")?;
        self.enqueue(
            || {
                format!(
                    "copying {size} bytes from byte {source_offset} to byte {destination_offset} on {}",
                    self.gpu.name()
                )
            },
            |queue, out| {
                // SAFETY: both buffers are live and the ranges were checked.
                unsafe {
                    (self.gpu.api().enqueue_copy_buffer)(
                        queue,
                        source.mem.0,
                        destination.mem.0,
                        from,
                        to,
                        bytes,
                        0,
                        std::ptr::null(),
                        out,
                    )
                }
            },
        )
        .map(drop)
    }
}

impl DriverStream<OpenClDriver> for Stream {
    /// An in-order queue on the device, with profiling where the device has it (timing events
    /// read the times of the markers they record).
    fn create(_driver: &OpenClDriver, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        let adapter = gpu.adapter();
        let properties = if adapter.profiling {
            ffi::CL_QUEUE_PROFILING_ENABLE
        } else {
            0
        };
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: the context holds the device.
        let queue = unsafe { (gpu.api().create_command_queue)(gpu.context, adapter.device, properties, &mut code) };
        ffi::check(code, || format!("creating a command queue on {}", gpu.name()))?;
        Ok(Stream {
            gpu: Arc::clone(gpu),
            queue,
            state: Arc::new(Mutex::new(StreamState {
                pending: std::collections::VecDeque::new(),
                next_command: 0,
                failed_command: None,
                next_scan: PENDING_SCAN_THRESHOLD,
                sticky: None,
            })),
        })
    }

    /// The error found while executing, which every later command returns, if any.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        match &stream.state.lock().sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    // Copies and fills. The checked adapter found every range inside its buffer and more than 0
    // bytes long.

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
        let (offset_bytes, size_bytes) = (host_size(offset, "write offset")?, host_size(size, "write size")?);
        stream
            .enqueue(
                || format!("writing {size} bytes at byte {offset} on {}", stream.gpu.name()),
                |queue, out| {
                    // SAFETY: non-blocking; the caller keeps `source` valid until the write completes.
                    unsafe {
                        (stream.gpu.api().enqueue_write_buffer)(
                            queue,
                            buffer.mem.0,
                            ffi::CL_FALSE,
                            offset_bytes,
                            size_bytes,
                            source.cast(),
                            0,
                            std::ptr::null(),
                            out,
                        )
                    }
                },
            )
            .map(drop)
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
        let (offset_bytes, size_bytes) = (host_size(offset, "read offset")?, host_size(size, "read size")?);
        stream
            .enqueue(
                || format!("reading {size} bytes at byte {offset} on {}", stream.gpu.name()),
                |queue, out| {
                    // SAFETY: non-blocking; the caller keeps `destination` valid until the read completes.
                    unsafe {
                        (stream.gpu.api().enqueue_read_buffer)(
                            queue,
                            buffer.mem.0,
                            ffi::CL_FALSE,
                            offset_bytes,
                            size_bytes,
                            destination.cast(),
                            0,
                            std::ptr::null(),
                            out,
                        )
                    }
                },
            )
            .map(drop)
    }

    /// Enqueues a device copy. OpenCL refuses overlapping ranges of one buffer, so those go
    /// through a temporary buffer.
    fn copy(
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: &Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let overlap = CopyOverlap::of(source, source_offset, destination, destination_offset, size);
        if overlap == CopyOverlap::Overlapping {
            let temporary = DeviceBuffer::new(&stream.gpu, size)?;
            stream.copy_raw(source, source_offset, &temporary, 0, size)?;
            // OpenCL keeps the temporary alive until the commands using it finish.
            return stream.copy_raw(&temporary, 0, destination, destination_offset, size);
        }
        if overlap == CopyOverlap::SameRange {
            // A copy onto itself changes nothing, but still orders like a command.
            return stream
                .enqueue(
                    || format!("copying {size} bytes onto themselves on {}", stream.gpu.name()),
                    |queue, out| {
                        // SAFETY: no wait list.
                        unsafe { (stream.gpu.api().enqueue_marker_with_wait_list)(queue, 0, std::ptr::null(), out) }
                    },
                )
                .map(drop);
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
        let (offset_bytes, size_bytes) = (host_size(offset, "fill offset")?, host_size(size, "fill size")?);
        stream
            .enqueue(
                || {
                    format!(
                        "filling {size} bytes at byte {offset} with a {}-byte pattern on {}",
                        pattern.len(),
                        stream.gpu.name()
                    )
                },
                |queue, out| {
                    // SAFETY: OpenCL copies the pattern before the call returns.
                    unsafe {
                        (stream.gpu.api().enqueue_fill_buffer)(
                            queue,
                            buffer.mem.0,
                            pattern.as_ptr().cast(),
                            pattern.len(),
                            offset_bytes,
                            size_bytes,
                            0,
                            std::ptr::null(),
                            out,
                        )
                    }
                },
            )
            .map(drop)
    }

    /// Sets the kernel's arguments and enqueues the NDRange on `stream`.
    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, OpenClDriver>) -> Result<()> {
        let (kernel, workgroups, buffers, scalars) = (launch.kernel, launch.workgroups, launch.buffers, launch.scalars);
        let (views, global) = prepare_launch(kernel, workgroups, buffers, scalars)?;
        let api = kernel.module.gpu.api();
        let native = kernel.kernel.lock();
        set_arguments(kernel, *native, &views, buffers, scalars)?;
        let name = &kernel.name;
        let local = kernel.signature.workgroup_size;
        stream
            .enqueue(
                || {
                    format!(
                        "launching kernel `{name}` with {}x{}x{} workgroups of {}x{}x{}",
                        workgroups[0], workgroups[1], workgroups[2], local[0], local[1], local[2]
                    )
                },
                |queue, out| {
                    // SAFETY: every argument was set above, under the kernel's lock; the sizes
                    // are three-element arrays, as the work dimension says.
                    unsafe {
                        (api.enqueue_nd_range_kernel)(
                            queue,
                            *native,
                            3,
                            std::ptr::null(),
                            global.as_ptr(),
                            local.as_ptr(),
                            0,
                            std::ptr::null(),
                            out,
                        )
                    }
                },
            )
            .map(drop)
        // The views (and any sub-buffers) are released here; the enqueued launch holds them.
    }

    /// Records `event` as a marker after everything enqueued so far.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let (marker, number) = stream.enqueue(
            || format!("recording an event on {}", stream.gpu.name()),
            |queue, out| {
                // SAFETY: no wait list; the marker's event is written to `out`.
                unsafe { (stream.gpu.api().enqueue_marker_with_wait_list)(queue, 0, std::ptr::null(), out) }
            },
        )?;
        *event.record.lock() = Some(Arc::new(Record {
            marker,
            number,
            stream: Arc::clone(&stream.state),
        }));
        Ok(())
    }

    /// Makes later commands wait for `event`'s most recent record.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let Some(record) = event.record.lock().clone() else {
            return Ok(());
        };
        stream
            .enqueue(
                || format!("waiting for an event on {}", stream.gpu.name()),
                |queue, out| {
                    // SAFETY: a one-event wait list of a live event.
                    unsafe { (stream.gpu.api().enqueue_barrier_with_wait_list)(queue, 1, &record.marker.id, out) }
                },
            )
            .map(drop)
    }

    /// Blocks until everything enqueued has completed.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let mut state = stream.state.lock();
        // Drain even with a sticky error known, so no command uses host memory after this returns.
        // SAFETY: the queue is live.
        let code = unsafe { (stream.gpu.api().finish)(stream.queue) };
        Stream::scan(&mut state)?;
        if let Err(error) = ffi::check(code, || {
            format!("waiting for the command queue on {}", stream.gpu.name())
        }) {
            return Err(state.sticky.get_or_insert(error).clone());
        }
        if !state.pending.is_empty() {
            // clFinish returned, so every command has finished; a status still short of that
            // is a driver fault.
            let error = Error::internal(format!(
                "the command queue on {} finished, but {} of its commands do not report completion",
                stream.gpu.name(),
                state.pending.len()
            ));
            state.pending.clear();
            return Err(state.sticky.get_or_insert(error).clone());
        }
        state.next_scan = PENDING_SCAN_THRESHOLD;
        Ok(())
    }

    /// True when everything enqueued has completed.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        Stream::scan(&mut state)?;
        if state.pending.is_empty() {
            state.next_scan = PENDING_SCAN_THRESHOLD;
        }
        Ok(state.pending.is_empty())
    }
}

/// One record of an event: a marker, its number on its stream, and the stream's state, to
/// learn whether a command before the marker failed.
pub(crate) struct Record {
    marker: Arc<ClEvent>,
    number: u64,
    stream: Arc<Mutex<StreamState>>,
}

impl Record {
    /// Given that the marker finished: the error of a command before it that failed, if any.
    fn outcome(&self) -> Result<()> {
        let status = self.marker.status()?;
        if status < 0 {
            return Err(execution_error(status));
        }
        let mut state = self.stream.lock();
        // Every command up to the marker has finished, so the scan reaches past them all.
        let _ = Stream::scan(&mut state);
        match (&state.sticky, state.failed_command) {
            (Some(error), Some(failed)) if failed < self.number => Err(error.clone()),
            _ => Ok(()),
        }
    }
}

/// A point on a stream: its most recent record is a marker's event.
pub struct Event {
    timing: bool,
    record: Mutex<Option<Arc<Record>>>,
}

impl Event {
    fn latest(&self) -> Option<Arc<Record>> {
        self.record.lock().clone()
    }

    fn timed_record(&self, role: &str, id: u64) -> Result<Arc<Record>> {
        if !self.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was created without timing; create it with timing to measure elapsed time"
            )));
        }
        let Some(record) = self.latest() else {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was never recorded"
            )));
        };
        if record.marker.status()? > ffi::CL_COMPLETE {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            )));
        }
        record.outcome()?;
        Ok(record)
    }
}

impl DriverEvent<OpenClDriver> for Event {
    fn create(_driver: &OpenClDriver, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        let gpu: &Arc<Gpu> = device;
        if timing && !gpu.adapter().profiling {
            return Err(Error::unsupported(format!(
                "{} cannot profile its command queues (CL_QUEUE_PROFILING_ENABLE), so events cannot measure time",
                gpu.name()
            )));
        }
        Ok(Event {
            timing,
            record: Mutex::new(None),
        })
    }

    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        let Some(record) = event.latest() else {
            return Ok(true);
        };
        let status = record.marker.status()?;
        if status > ffi::CL_COMPLETE {
            return Ok(false);
        }
        record.outcome()?;
        Ok(true)
    }

    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        let Some(record) = event.latest() else {
            return Ok(());
        };
        record.marker.wait()?;
        record.outcome()
    }

    /// Nanoseconds between the ends of the two markers.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        let (start_id, end_id) = (start.handle(), end.handle());
        let first = start.timed_record("start", start_id)?.marker.end_time()?;
        let last = end.timed_record("end", end_id)?.marker.end_time()?;
        if last < first {
            return Err(Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x}"
            )));
        }
        Ok(last - first)
    }

    /// The `CL_PROFILING_COMMAND_END` of the record's marker.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        event.timed_record("the", event.handle())?.marker.end_time()
    }
}

/// A `usize` for an OpenCL size or offset; ranges were checked against buffers that exist in
/// this address space, so this only fails on inputs no buffer could have.
fn host_size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what}: {value} does not fit in a size_t")))
}

/// Checks a launch against its kernel and the device, and returns the views it binds (sub-buffers
/// for views at an offset) and its global size.
pub(crate) fn prepare_launch(
    kernel: &crate::module::KernelObject,
    workgroups: [u32; 3],
    buffers: &[xhal_backend::BufferView<DeviceBuffer>],
    scalars: &[u8],
) -> Result<(Vec<View>, [usize; 3])> {
    let name = &kernel.name;
    kernel.check_arguments(buffers.len(), scalars)?;
    let adapter = kernel.module.gpu.adapter();
    let mut global = [0usize; 3];
    for axis in 0..3 {
        let count = workgroups[axis];
        if count == 0 {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: workgroup count in {} is 0; every dimension needs at least 1",
                ["x", "y", "z"][axis]
            )));
        }
        let items = u64::from(count) * kernel.signature.workgroup_size[axis] as u64;
        let limit = if adapter.address_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << adapter.address_bits) - 1
        };
        global[axis] = usize::try_from(items).ok().filter(|_| items <= limit).ok_or_else(|| {
            Error::invalid_argument(format!(
                "kernel `{name}`: {count} workgroups of {} in {} are {items} work-items, more than {} addresses \
                     ({} bits)",
                kernel.signature.workgroup_size[axis],
                ["x", "y", "z"][axis],
                adapter.info.name,
                adapter.address_bits
            ))
        })?;
    }
    let mut views = Vec::with_capacity(buffers.len());
    for (index, argument) in buffers.iter().enumerate() {
        views.push(argument.buffer.view(
            argument.offset,
            argument.size,
            &format!("buffer argument {index} of kernel `{name}`"),
        )?);
    }
    Ok((views, global))
}

/// Sets every argument of `native` (the kernel's object, locked by the caller) for a launch
/// `prepare_launch` accepted: the views, the scalar block, the buffer lengths.
pub(crate) fn set_arguments(
    kernel: &crate::module::KernelObject,
    native: ffi::Kernel,
    views: &[View],
    buffers: &[xhal_backend::BufferView<DeviceBuffer>],
    scalars: &[u8],
) -> Result<()> {
    let name = &kernel.name;
    let api = kernel.module.gpu.api();
    for (index, view) in views.iter().enumerate() {
        // SAFETY: a cl_mem argument, passed by address as OpenCL requires.
        let code = unsafe {
            (api.set_kernel_arg)(
                native,
                index as ClUint,
                std::mem::size_of::<ffi::Mem>(),
                (&view.mem as *const ffi::Mem).cast(),
            )
        };
        ffi::check(code, || {
            format!(
                "setting buffer argument {index} of kernel `{name}`{}",
                kernel.parameter_name(index)
            )
        })?;
    }
    let mut index = views.len();
    if !scalars.is_empty() {
        // SAFETY: `scalars.len()` readable bytes; OpenCL copies them.
        let code = unsafe { (api.set_kernel_arg)(native, index as ClUint, scalars.len(), scalars.as_ptr().cast()) };
        ffi::check(code, || {
            format!(
                "setting the {}-byte scalar block as parameter {index} of kernel `{name}`{}",
                scalars.len(),
                kernel.parameter_name(index)
            )
        })?;
        index += 1;
    }
    if kernel.takes_lengths() {
        let lengths = lengths_block(buffers.iter().map(|argument| argument.size));
        // SAFETY: `lengths.len()` readable bytes; OpenCL copies them.
        let code = unsafe { (api.set_kernel_arg)(native, index as ClUint, lengths.len(), lengths.as_ptr().cast()) };
        ffi::check(code, || {
            format!(
                "setting the {}-byte buffer lengths as parameter {index} of kernel `{name}`{}",
                lengths.len(),
                kernel.parameter_name(index)
            )
        })?;
    }
    Ok(())
}
