//! Streams as in-order command queues, events as markers.
//!
//! Every command is enqueued without blocking and the queue is flushed at once, so work starts
//! without a synchronize and another queue may wait for it. The stream keeps the event of its
//! last command: the stream is idle when that completed, and an error found while executing
//! (a negative execution status) becomes the stream's sticky error.

use crate::ffi::{self, ClEventId, ClInt, CommandQueue};
use crate::gpu::{DeviceBuffer, Gpu};
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_core::{Error, Result};

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

/// The error for a command whose execution status is the negative `status`.
fn execution_error(status: ClInt) -> Error {
    let error = ffi::cl_error("a command failed while executing", status);
    Error::new(xhal_core::ErrorKind::KernelFault, error.message().to_string())
}

struct StreamState {
    /// The most recent command's event.
    last: Option<Arc<ClEvent>>,
    /// An error found while executing: returned by every later call.
    sticky: Option<Error>,
}

/// An in-order command queue.
pub(crate) struct Stream {
    pub(crate) gpu: Arc<Gpu>,
    queue: CommandQueue,
    state: Mutex<StreamState>,
}

// Command queues may be used from any thread; the state is behind a lock.
// SAFETY: see above.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the queue is live; nothing else releases it.
        unsafe {
            (self.gpu.api().finish)(self.queue);
            (self.gpu.api().release_command_queue)(self.queue);
        }
    }
}

impl Stream {
    /// An in-order queue on the device, with profiling where the device has it (timing events
    /// read the times of the markers they record).
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Stream> {
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
            state: Mutex::new(StreamState {
                last: None,
                sticky: None,
            }),
        })
    }

    /// Enqueues one command through `call`, which receives the queue and where to put the
    /// command's event, and returns the OpenCL status; `doing` names the command for errors.
    /// Returns the command's event, which is also the stream's last.
    pub(crate) fn enqueue(
        &self,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(CommandQueue, *mut ClEventId) -> ClInt,
    ) -> Result<Arc<ClEvent>> {
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
        state.last = Some(Arc::clone(&event));
        // SAFETY: the queue is live. Flushing starts the work now, and lets other queues wait
        // for it.
        let code = unsafe { (self.gpu.api().flush)(self.queue) };
        ffi::check(code, || format!("flushing the command queue on {}", self.gpu.name()))?;
        Ok(event)
    }

    /// The last command's failure, made sticky.
    fn note_failure(state: &mut StreamState, error: Error) -> Error {
        state.sticky.get_or_insert(error).clone()
    }

    /// Blocks until everything enqueued has completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let mut state = self.state.lock();
        if let Some(error) = &state.sticky {
            // Still drain, so no command uses host memory after this returns.
            // SAFETY: the queue is live.
            unsafe { (self.gpu.api().finish)(self.queue) };
            return Err(error.clone());
        }
        // SAFETY: the queue is live.
        let code = unsafe { (self.gpu.api().finish)(self.queue) };
        if let Some(last) = state.last.clone() {
            let status = last.status()?;
            if status < 0 {
                return Err(Self::note_failure(&mut state, execution_error(status)));
            }
        }
        if let Err(error) = ffi::check(code, || format!("waiting for the command queue on {}", self.gpu.name())) {
            return Err(Self::note_failure(&mut state, error));
        }
        state.last = None;
        Ok(())
    }

    /// True when everything enqueued has completed.
    pub(crate) fn query(&self) -> Result<bool> {
        let mut state = self.state.lock();
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        let Some(last) = state.last.clone() else {
            return Ok(true);
        };
        let status = last.status()?;
        if status < 0 {
            return Err(Self::note_failure(&mut state, execution_error(status)));
        }
        if status == ffi::CL_COMPLETE {
            state.last = None;
        }
        Ok(status == ffi::CL_COMPLETE)
    }

    /// Records `event` as a marker after everything enqueued so far.
    pub(crate) fn record_event(&self, event: &Event) -> Result<()> {
        let marker = self.enqueue(
            || format!("recording an event on {}", self.gpu.name()),
            |queue, out| {
                // SAFETY: no wait list; the marker's event is written to `out`.
                unsafe { (self.gpu.api().enqueue_marker_with_wait_list)(queue, 0, std::ptr::null(), out) }
            },
        )?;
        *event.record.lock() = Some(marker);
        Ok(())
    }

    /// Makes later commands wait for `event`'s most recent record.
    pub(crate) fn wait_event(&self, event: &Event) -> Result<()> {
        let Some(record) = event.record.lock().clone() else {
            return Ok(());
        };
        self.enqueue(
            || format!("waiting for an event on {}", self.gpu.name()),
            |queue, out| {
                // SAFETY: a one-event wait list of a live event.
                unsafe { (self.gpu.api().enqueue_barrier_with_wait_list)(queue, 1, &record.id, out) }
            },
        )
        .map(drop)
    }
}

/// A point on a stream: its most recent record is a marker's event.
pub(crate) struct Event {
    pub(crate) gpu: Arc<Gpu>,
    timing: bool,
    record: Mutex<Option<Arc<ClEvent>>>,
}

impl Event {
    pub(crate) fn new(gpu: &Arc<Gpu>, timing: bool) -> Result<Event> {
        if timing && !gpu.adapter().profiling {
            return Err(Error::unsupported(format!(
                "{} cannot profile its command queues (CL_QUEUE_PROFILING_ENABLE), so events cannot measure time",
                gpu.name()
            )));
        }
        Ok(Event {
            gpu: Arc::clone(gpu),
            timing,
            record: Mutex::new(None),
        })
    }

    fn latest(&self) -> Option<Arc<ClEvent>> {
        self.record.lock().clone()
    }

    pub(crate) fn query(&self) -> Result<bool> {
        let Some(record) = self.latest() else {
            return Ok(true);
        };
        let status = record.status()?;
        if status < 0 {
            return Err(execution_error(status));
        }
        Ok(status == ffi::CL_COMPLETE)
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.latest() {
            Some(record) => record.wait(),
            None => Ok(()),
        }
    }

    fn timed_record(&self, role: &str, id: u64) -> Result<Arc<ClEvent>> {
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
        let status = record.status()?;
        if status < 0 {
            return Err(execution_error(status));
        }
        if status != ffi::CL_COMPLETE {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            )));
        }
        Ok(record)
    }

    /// Nanoseconds between the ends of the two markers.
    pub(crate) fn elapsed_nanoseconds(start: &Event, start_id: u64, end: &Event, end_id: u64) -> Result<u64> {
        let first = start.timed_record("start", start_id)?.end_time()?;
        let last = end.timed_record("end", end_id)?.end_time()?;
        if last < first {
            return Err(Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x}"
            )));
        }
        Ok(last - first)
    }
}

/// A `usize` for an OpenCL size or offset; ranges were checked against buffers that exist in
/// this address space, so this only fails on inputs no buffer could have.
fn host_size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what}: {value} does not fit in a size_t")))
}

/// Copies and fills. Ranges were checked against the buffers by the caller.
impl Stream {
    /// Enqueues a write of `size` bytes from `source`.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes that stay valid and unchanged until the
    /// write completes (the Backend trait's contract).
    pub(crate) unsafe fn write(&self, buffer: &DeviceBuffer, offset: u64, source: *const u8, size: u64) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let (offset_bytes, size_bytes) = (host_size(offset, "write offset")?, host_size(size, "write size")?);
        self.enqueue(
            || format!("writing {size} bytes at byte {offset} on {}", self.gpu.name()),
            |queue, out| {
                // SAFETY: non-blocking; the caller keeps `source` valid until the write completes.
                unsafe {
                    (self.gpu.api().enqueue_write_buffer)(
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
    pub(crate) unsafe fn read(
        &self,
        buffer: &DeviceBuffer,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let (offset_bytes, size_bytes) = (host_size(offset, "read offset")?, host_size(size, "read size")?);
        self.enqueue(
            || format!("reading {size} bytes at byte {offset} on {}", self.gpu.name()),
            |queue, out| {
                // SAFETY: non-blocking; the caller keeps `destination` valid until the read completes.
                unsafe {
                    (self.gpu.api().enqueue_read_buffer)(
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
    pub(crate) fn copy(
        &self,
        source: &DeviceBuffer,
        source_offset: u64,
        destination: &DeviceBuffer,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let overlapping = std::ptr::eq(source, destination)
            && source_offset < destination_offset + size
            && destination_offset < source_offset + size;
        if overlapping && source_offset != destination_offset {
            let temporary = DeviceBuffer::new(&self.gpu, size)?;
            self.copy_raw(source, source_offset, &temporary, 0, size)?;
            // OpenCL keeps the temporary alive until the commands using it finish.
            return self.copy_raw(&temporary, 0, destination, destination_offset, size);
        }
        if overlapping {
            // A copy onto itself changes nothing, but still orders like a command.
            return self
                .enqueue(
                    || format!("copying {size} bytes onto themselves on {}", self.gpu.name()),
                    |queue, out| {
                        // SAFETY: no wait list.
                        unsafe { (self.gpu.api().enqueue_marker_with_wait_list)(queue, 0, std::ptr::null(), out) }
                    },
                )
                .map(drop);
        }
        self.copy_raw(source, source_offset, destination, destination_offset, size)
    }

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

    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of it.
    pub(crate) fn fill(&self, buffer: &DeviceBuffer, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let (offset_bytes, size_bytes) = (host_size(offset, "fill offset")?, host_size(size, "fill size")?);
        self.enqueue(
            || {
                format!(
                    "filling {size} bytes at byte {offset} with a {}-byte pattern on {}",
                    pattern.len(),
                    self.gpu.name()
                )
            },
            |queue, out| {
                // SAFETY: OpenCL copies the pattern before the call returns.
                unsafe {
                    (self.gpu.api().enqueue_fill_buffer)(
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
}
