//! Streams as HIP streams, events as HIP events.
//!
//! Streams are created non-blocking (`hipStreamNonBlocking`), so they never wait for work on
//! HIP's null stream that something else in the process enqueued. Every command is one
//! asynchronous HIP call on the stream. An error that belongs to the device's execution
//! (a kernel fault, an illegal address, a lost device), whether a synchronize, a query, an
//! event wait or a later enqueue reports it, becomes the stream's sticky error: every later
//! call on the stream returns it.

use crate::device::Gpu;
use crate::ffi::{self, HipEvent, HipStream};
use crate::memory::DeviceBuffer;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{Error, ErrorKind, Result};

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
}

impl StreamState {
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
        self.state.lock().retained.clear();
    }
}

impl Stream {
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Stream> {
        gpu.bind()?;
        let mut raw: HipStream = std::ptr::null_mut();
        // SAFETY: writes one stream handle.
        let code = unsafe { (gpu.api().stream_create_with_flags)(&mut raw, ffi::HIP_STREAM_NON_BLOCKING) };
        gpu.api().check(code, "hipStreamCreateWithFlags", || {
            format!("creating a stream on {}", gpu.name())
        })?;
        Ok(Stream {
            gpu: Arc::clone(gpu),
            raw,
            state: Arc::new(Mutex::new(StreamState {
                sticky: None,
                retained: Vec::new(),
            })),
        })
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

    /// The error found while executing, if any: what an empty command on this stream returns.
    pub(crate) fn sticky_error(&self) -> Result<()> {
        self.state.lock().sticky_error().map_or(Ok(()), Err)
    }

    /// Blocks until everything enqueued has completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let mut state = self.state.lock();
        self.gpu.bind()?;
        // Drain even with a sticky error known, so no command uses host memory after this returns.
        // SAFETY: the stream is live.
        let code = unsafe { (self.gpu.api().stream_synchronize)(self.raw) };
        let result = self.gpu.api().check(code, "hipStreamSynchronize", || {
            format!("waiting for a stream on {}", self.gpu.name())
        });
        state.retained.clear();
        if let Some(error) = state.sticky_error() {
            return Err(error);
        }
        result.map_err(|error| state.stick(error))
    }

    /// True when everything enqueued has completed.
    pub(crate) fn query(&self) -> Result<bool> {
        let mut state = self.state.lock();
        if let Some(error) = state.sticky_error() {
            return Err(error);
        }
        self.gpu.bind()?;
        // SAFETY: the stream is live.
        let code = unsafe { (self.gpu.api().stream_query)(self.raw) };
        match code {
            ffi::HIP_SUCCESS => {
                state.retained.clear();
                Ok(true)
            }
            ffi::HIP_ERROR_NOT_READY => Ok(false),
            _ => Err(state.stick(self.gpu.api().error(
                &format!("asking whether a stream on {} is idle", self.gpu.name()),
                "hipStreamQuery",
                code,
            ))),
        }
    }

    /// Keeps `buffer` alive until the stream is next seen idle.
    fn retain(&self, buffer: DeviceBuffer) {
        self.state.lock().retained.push(buffer);
    }

    /// Records `event` after everything enqueued so far.
    pub(crate) fn record_event(&self, event: &Event) -> Result<()> {
        self.enqueue(
            "hipEventRecord",
            || format!("recording an event on {}", self.gpu.name()),
            // SAFETY: both handles are live and belong to one device.
            |stream| unsafe { (self.gpu.api().event_record)(event.raw, stream) },
        )?;
        *event.record.lock() = Some(Arc::new(Record {
            stream: Arc::clone(&self.state),
        }));
        Ok(())
    }

    /// Makes later commands wait for `event`'s most recent record.
    pub(crate) fn wait_event(&self, event: &Event) -> Result<()> {
        if event.record.lock().is_none() {
            return Ok(());
        }
        self.enqueue(
            "hipStreamWaitEvent",
            || format!("waiting for an event on {}", self.gpu.name()),
            // SAFETY: both handles are live; flags must be 0.
            |stream| unsafe { (self.gpu.api().stream_wait_event)(stream, event.raw, 0) },
        )
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
    pub(crate) fn new(gpu: &Arc<Gpu>, timing: bool) -> Result<Event> {
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

    pub(crate) fn query(&self) -> Result<bool> {
        Ok(self.poll()?.unwrap_or(true))
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        let record = self.record.lock().clone();
        let Some(record) = record else {
            return Ok(());
        };
        // SAFETY: the event is live.
        let code = unsafe { (self.gpu.api().event_synchronize)(self.raw) };
        if code != ffi::HIP_SUCCESS {
            return Err(record.fail(
                self.gpu
                    .api()
                    .error("waiting for an event", "hipEventSynchronize", code),
            ));
        }
        Ok(())
    }

    fn check_timed(&self, role: &str, id: u64) -> Result<()> {
        if !self.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was created without timing; create it with timing to measure elapsed time"
            )));
        }
        match self.poll()? {
            None => Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was never recorded"
            ))),
            Some(false) => Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            ))),
            Some(true) => Ok(()),
        }
    }

    /// Nanoseconds between the two records.
    pub(crate) fn elapsed_nanoseconds(start: &Event, start_id: u64, end: &Event, end_id: u64) -> Result<u64> {
        start.check_timed("start", start_id)?;
        end.check_timed("end", end_id)?;
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
}

/// A `usize` for a HIP size; ranges were checked against buffers that exist in this address
/// space, so this only fails on inputs no buffer could have.
fn host_size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what}: {value} does not fit in a size_t")))
}

/// Copies and fills. The checked adapter hands over ranges of more than 0 bytes that lie
/// inside their buffers, and fill patterns of 1, 2 or 4 bytes that divide offset and size.
impl Stream {
    /// Enqueues a write of `size` bytes from `source`.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes that stay valid and unchanged until the
    /// write completes (the Driver trait's contract).
    pub(crate) unsafe fn write(&self, buffer: &DeviceBuffer, offset: u64, source: *const u8, size: u64) -> Result<()> {
        let bytes = host_size(size, "write size")?;
        self.enqueue(
            "hipMemcpyHtoDAsync",
            || format!("writing {size} bytes at byte {offset} on {}", self.gpu.name()),
            // SAFETY: asynchronous; the caller keeps `source` valid until the write completes.
            // HIP takes the source as `void*` but does not write through it.
            |stream| unsafe {
                (self.gpu.api().memcpy_htod_async)(buffer.at(offset), source.cast_mut().cast(), bytes, stream)
            },
        )
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
        let bytes = host_size(size, "read size")?;
        self.enqueue(
            "hipMemcpyDtoHAsync",
            || format!("reading {size} bytes at byte {offset} on {}", self.gpu.name()),
            // SAFETY: asynchronous; the caller keeps `destination` valid until the read completes.
            |stream| unsafe {
                (self.gpu.api().memcpy_dtoh_async)(destination.cast(), buffer.at(offset), bytes, stream)
            },
        )
    }

    /// Enqueues a device copy. A HIP copy between overlapping ranges is undefined, so those
    /// go through a temporary allocation, kept until the stream is idle.
    pub(crate) fn copy(
        &self,
        source: &DeviceBuffer,
        source_offset: u64,
        destination: &DeviceBuffer,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let overlapping = std::ptr::eq(source, destination)
            && source_offset < destination_offset + size
            && destination_offset < source_offset + size;
        if overlapping && source_offset == destination_offset {
            // A copy onto itself changes nothing, but still runs in order like a command.
            return self.copy_raw(source, source_offset, destination, destination_offset, 0);
        }
        if overlapping {
            let temporary = DeviceBuffer::new(&self.gpu, size)?;
            self.copy_raw(source, source_offset, &temporary, 0, size)?;
            let copied = self.copy_raw(&temporary, 0, destination, destination_offset, size);
            self.retain(temporary);
            return copied;
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

    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of it.
    pub(crate) fn fill(&self, buffer: &DeviceBuffer, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
        let bytes = host_size(size, "fill size")?;
        let doing = || {
            format!(
                "filling {size} bytes at byte {offset} with a {}-byte pattern on {}",
                pattern.len(),
                self.gpu.name()
            )
        };
        let api = self.gpu.api();
        let target = buffer.at(offset);
        match *pattern {
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [byte] => self.enqueue("hipMemsetD8Async", doing, |stream| unsafe {
                (api.memset_d8_async)(target, byte, bytes, stream)
            }),
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [first, second] => self.enqueue("hipMemsetD16Async", doing, |stream| unsafe {
                (api.memset_d16_async)(target, u16::from_ne_bytes([first, second]), bytes / 2, stream)
            }),
            // SAFETY: the range lies in a live buffer; the count is in elements.
            [first, second, third, fourth] => self.enqueue("hipMemsetD32Async", doing, |stream| unsafe {
                (api.memset_d32_async)(
                    target,
                    i32::from_ne_bytes([first, second, third, fourth]),
                    bytes / 4,
                    stream,
                )
            }),
            _ => Err(Error::invalid_argument(format!(
                "a fill pattern has 1, 2 or 4 bytes, not {}",
                pattern.len()
            ))),
        }
    }
}
