//! Streams as non-blocking CUDA streams, events as CUDA events; kernel launches are the
//! stream's (the argument ABI and the checks of a launch's arguments are in `module.rs`).
//!
//! Host transfers go through pinned staging blocks, so they never block the caller on the
//! device: a write copies each block's bytes into pinned memory and enqueues its DMA; a read
//! enqueues each block's DMA and then a host function (`cuLaunchHostFunc`) that copies the
//! block out to the caller's memory when the stream reaches it. Staging blocks, and the
//! temporary buffer of an overlapping copy, are kept with an event recorded after the work
//! that uses them, and reused once that event completed.
//!
//! A fault found while executing (an illegal address, a failed launch) corrupts a CUDA
//! context, so the driver returns it from every later call; the stream keeps it as its sticky
//! error and returns it from every later call itself, before touching the driver.

use crate::device::{Gpu, PinnedBlock, STAGING_BLOCK};
use crate::ffi::{self, call, raw_call, sys, CUevent, CUresult, CUstream};
use crate::memory::DeviceBuffer;
use crate::CudaDriver;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;
use xhal_backend::{CopyOverlap, DriverEvent, DriverStream, Error, ErrorKind, Launch, Object, Result};

/// What a stream keeps until the work using it completed.
enum Retained {
    Staging(PinnedBlock),
    Buffer(DeviceBuffer),
}

pub(crate) struct StreamState {
    /// Events recorded after work that uses what they hold, oldest first.
    retained: VecDeque<(CUevent, Retained)>,
    /// Completed internal events, for reuse.
    spare_events: Vec<CUevent>,
    /// A fault found while executing: returned by every later call.
    sticky: Option<Error>,
}

// The raw events are driver handles usable from any thread.
// SAFETY: see above.
unsafe impl Send for StreamState {}

impl StreamState {
    fn usable(&self) -> Result<()> {
        match &self.sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// Keeps `error` as the sticky error when it is a fault of executing work.
    fn note(&mut self, error: Error) -> Error {
        if matches!(
            error.kind(),
            ErrorKind::KernelFault | ErrorKind::DeviceLost | ErrorKind::Timeout
        ) {
            return self.sticky.get_or_insert(error).clone();
        }
        error
    }
}

/// A CUDA stream of one device.
pub struct Stream {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) raw: CUstream,
    state: Arc<Mutex<StreamState>>,
}

// A CUDA stream may be used from any thread; the state is behind a lock.
// SAFETY: see above.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        let raw = self.raw;
        // SAFETY: the stream is live; nothing else destroys it.
        let _ = call("cuStreamSynchronize", ffi::quiet, || unsafe {
            sys::cuStreamSynchronize(raw)
        });
        let mut state = self.state.lock();
        self.release_all(&mut state);
        for event in state.spare_events.drain(..) {
            // SAFETY: an internal event no work uses any more.
            let _ = call("cuEventDestroy_v2", ffi::quiet, || unsafe {
                sys::cuEventDestroy_v2(event)
            });
        }
        // SAFETY: as above.
        let _ = call("cuStreamDestroy_v2", ffi::quiet, || unsafe {
            sys::cuStreamDestroy_v2(raw)
        });
    }
}

/// The host half of a read: copies a staging block out when the stream reaches it.
struct HostCopy {
    from: *const u8,
    to: *mut u8,
    size: usize,
}

unsafe extern "C" fn copy_out(user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Box<HostCopy>` leaked when the function was enqueued; the
    // driver calls this once. The staging block is kept until an event after this completes,
    // and the destination is valid until the read completes (the caller's contract).
    let copy = unsafe { Box::from_raw(user_data.cast::<HostCopy>()) };
    // SAFETY: see above; the two ranges are distinct allocations.
    unsafe { std::ptr::copy_nonoverlapping(copy.from, copy.to, copy.size) };
}

impl Stream {
    fn wrap(gpu: &Arc<Gpu>, raw: CUstream) -> Stream {
        Stream {
            gpu: Arc::clone(gpu),
            raw,
            state: Arc::new(Mutex::new(StreamState {
                retained: VecDeque::new(),
                spare_events: Vec::new(),
                sticky: None,
            })),
        }
    }

    /// Enqueues one command through `body` under the stream's lock, after the sticky check,
    /// with the context current. `function` names the driver call for errors.
    pub(crate) fn enqueue(
        &self,
        function: &str,
        doing: impl FnOnce() -> String,
        body: impl FnOnce(CUstream) -> CUresult,
    ) -> Result<()> {
        let mut state = self.state.lock();
        self.enqueue_locked(&mut state, function, doing, body)
    }

    fn enqueue_locked(
        &self,
        state: &mut StreamState,
        function: &str,
        doing: impl FnOnce() -> String,
        body: impl FnOnce(CUstream) -> CUresult,
    ) -> Result<()> {
        state.usable()?;
        self.gpu.bind()?;
        let raw = self.raw;
        call(function, doing, || body(raw)).map_err(|error| state.note(error))
    }

    /// Keeps `item` until the work enqueued so far completed.
    fn retain(&self, state: &mut StreamState, item: Retained) -> Result<()> {
        self.reclaim(state);
        let event = match state.spare_events.pop() {
            Some(event) => event,
            None => {
                let mut event: CUevent = std::ptr::null_mut();
                // SAFETY: writes one event in the current context.
                let created = call("cuEventCreate", ffi::quiet, || unsafe {
                    sys::cuEventCreate(&mut event, ffi::EVENT_DISABLE_TIMING)
                });
                if let Err(error) = created {
                    // Without an event to know when the work is done, wait for it.
                    self.finish_with(state, item);
                    return Err(state.note(error));
                }
                event
            }
        };
        let raw = self.raw;
        // SAFETY: an internal event and this stream, in the current context.
        match call("cuEventRecord", ffi::quiet, || unsafe {
            sys::cuEventRecord(event, raw)
        }) {
            Ok(()) => {
                state.retained.push_back((event, item));
                Ok(())
            }
            Err(error) => {
                state.spare_events.push(event);
                self.finish_with(state, item);
                Err(state.note(error))
            }
        }
    }

    /// Waits for the stream, then lets `item` go.
    fn finish_with(&self, state: &mut StreamState, item: Retained) {
        let raw = self.raw;
        // SAFETY: this stream.
        let _ = call("cuStreamSynchronize", ffi::quiet, || unsafe {
            sys::cuStreamSynchronize(raw)
        });
        self.release(item);
        let _ = state;
    }

    fn release(&self, item: Retained) {
        match item {
            Retained::Staging(block) => self.gpu.recycle_staging(block),
            Retained::Buffer(buffer) => drop(buffer),
        }
    }

    /// Lets go of what completed work held, oldest first.
    fn reclaim(&self, state: &mut StreamState) {
        while let Some((event, _)) = state.retained.front() {
            let event = *event;
            // SAFETY: an internal event, recorded on this stream.
            match raw_call("cuEventQuery", || unsafe { sys::cuEventQuery(event) }) {
                Ok(CUresult::CUDA_SUCCESS) => {
                    if let Some((event, item)) = state.retained.pop_front() {
                        state.spare_events.push(event);
                        self.release(item);
                    }
                }
                Ok(CUresult::CUDA_ERROR_NOT_READY) => break,
                Ok(code) => {
                    let error = ffi::cuda_error("cuEventQuery", code, || "a transfer failed".to_string());
                    state.note(error);
                    break;
                }
                Err(_) => break,
            }
        }
    }

    /// After the stream drained (or failed for good): everything held can go.
    fn release_all(&self, state: &mut StreamState) {
        while let Some((event, item)) = state.retained.pop_front() {
            state.spare_events.push(event);
            self.release(item);
        }
    }

    fn copy_raw(&self, from: sys::CUdeviceptr, to: sys::CUdeviceptr, size: u64) -> Result<()> {
        let bytes = host_size(size)?;
        self.enqueue(
            "cuMemcpyDtoDAsync_v2",
            || format!("copying {size} bytes on {}", self.gpu.name()),
            // SAFETY: both ranges lie in live buffers (checked by the caller).
            |stream| unsafe { sys::cuMemcpyDtoDAsync_v2(to, from, bytes, stream) },
        )
    }
}

/// Copies, fills and launches. The checked adapter has checked the ranges against the buffers.
impl DriverStream<CudaDriver> for Stream {
    /// A non-blocking stream on the device.
    fn create(_driver: &CudaDriver, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let mut raw: CUstream = std::ptr::null_mut();
        call(
            "cuStreamCreate",
            || format!("creating a stream on {}", gpu.name()),
            // SAFETY: writes one stream in the current context.
            || unsafe { sys::cuStreamCreate(&mut raw, ffi::STREAM_NON_BLOCKING) },
        )?;
        Ok(Stream::wrap(gpu, raw))
    }

    /// A non-blocking stream of `priority` (`cuStreamCreateWithPriority`).
    fn create_with_priority(_driver: &CudaDriver, device: &Arc<Object<Arc<Gpu>>>, priority: i32) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let mut raw: CUstream = std::ptr::null_mut();
        call(
            "cuStreamCreateWithPriority",
            || format!("creating a stream of priority {priority} on {}", gpu.name()),
            // SAFETY: writes one stream in the current context.
            || unsafe { sys::cuStreamCreateWithPriority(&mut raw, ffi::STREAM_NON_BLOCKING, priority) },
        )?;
        Ok(Stream::wrap(gpu, raw))
    }

    /// The fault that stuck to the stream, if one did: what an empty command returns.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.state.lock().usable()
    }

    /// Enqueues a write of `size` bytes from `source`, through pinned staging blocks.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes (it is copied before this returns).
    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let mut state = stream.state.lock();
        state.usable()?;
        let total = host_size(size)?;
        if stream.gpu.is_pinned(source as usize, total) {
            let destination = buffer.address(offset);
            let from = source.cast::<c_void>();
            // Pinned already: the copy engine reads it directly, and the caller keeps it
            // unchanged until the copy completes (its contract).
            stream.enqueue_locked(
                &mut state,
                "cuMemcpyHtoDAsync_v2",
                || format!("writing {size} pinned bytes at byte {offset} on {}", stream.gpu.name()),
                // SAFETY: pinned memory valid until the copy completes; the range is in the buffer.
                |raw| unsafe { sys::cuMemcpyHtoDAsync_v2(destination, from, total, raw) },
            )?;
            return Ok(());
        }
        let mut done = 0usize;
        while done < total {
            let length = (total - done).min(STAGING_BLOCK);
            let block = stream.gpu.staging_block(length)?;
            // SAFETY: `length` bytes of the caller's source (its contract) into a block at
            // least that large.
            unsafe { std::ptr::copy_nonoverlapping(source.add(done), block.pointer, length) };
            let destination = buffer.address(offset + done as u64);
            let from = block.pointer.cast::<c_void>().cast_const();
            let enqueued = stream.enqueue_locked(
                &mut state,
                "cuMemcpyHtoDAsync_v2",
                || format!("writing {size} bytes at byte {offset} on {}", stream.gpu.name()),
                // SAFETY: pinned memory kept until the copy completes; the range is in the buffer.
                |raw| unsafe { sys::cuMemcpyHtoDAsync_v2(destination, from, length, raw) },
            );
            if let Err(error) = enqueued {
                stream.gpu.recycle_staging(block);
                return Err(error);
            }
            stream.retain(&mut state, Retained::Staging(block))?;
            done += length;
        }
        Ok(())
    }

    /// Enqueues a read of `size` bytes into `destination`, through pinned staging blocks.
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
        let mut state = stream.state.lock();
        state.usable()?;
        let total = host_size(size)?;
        if stream.gpu.is_pinned(destination as usize, total) {
            let source = buffer.address(offset);
            let into = destination.cast::<c_void>();
            // Pinned already: the copy engine writes it directly, and the caller leaves it alone
            // until the read completes (its contract).
            return stream.enqueue_locked(
                &mut state,
                "cuMemcpyDtoHAsync_v2",
                || {
                    format!(
                        "reading {size} bytes at byte {offset} into pinned memory on {}",
                        stream.gpu.name()
                    )
                },
                // SAFETY: pinned memory valid until the copy completes; the range is in the buffer.
                |raw| unsafe { sys::cuMemcpyDtoHAsync_v2(into, source, total, raw) },
            );
        }
        let mut done = 0usize;
        while done < total {
            let length = (total - done).min(STAGING_BLOCK);
            let block = stream.gpu.staging_block(length)?;
            let source = buffer.address(offset + done as u64);
            let into = block.pointer.cast::<c_void>();
            let doing = || format!("reading {size} bytes at byte {offset} on {}", stream.gpu.name());
            let enqueued = stream.enqueue_locked(
                &mut state,
                "cuMemcpyDtoHAsync_v2",
                doing,
                // SAFETY: pinned memory kept until the copy completes; the range is in the buffer.
                |raw| unsafe { sys::cuMemcpyDtoHAsync_v2(into, source, length, raw) },
            );
            if let Err(error) = enqueued {
                stream.gpu.recycle_staging(block);
                return Err(error);
            }
            let copy = Box::into_raw(Box::new(HostCopy {
                from: block.pointer,
                // SAFETY: within the caller's `size` bytes.
                to: unsafe { destination.add(done) },
                size: length,
            }));
            let launched = stream.enqueue_locked(
                &mut state,
                "cuLaunchHostFunc",
                doing,
                // SAFETY: `copy_out` takes ownership of `copy` when the driver runs it.
                |raw| unsafe { sys::cuLaunchHostFunc(raw, Some(copy_out), copy.cast()) },
            );
            if let Err(error) = launched {
                // SAFETY: the driver did not take the function, so the box is still ours.
                drop(unsafe { Box::from_raw(copy) });
                stream.finish_with(&mut state, Retained::Staging(block));
                return Err(error);
            }
            stream.retain(&mut state, Retained::Staging(block))?;
            done += length;
        }
        Ok(())
    }

    /// Enqueues a device copy; overlapping ranges of one buffer go through a temporary buffer,
    /// since CUDA's copies do not allow overlap.
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
            return stream.state.lock().usable();
        }
        if overlap == CopyOverlap::Overlapping {
            let temporary = DeviceBuffer::new(&stream.gpu, size)?;
            stream.copy_raw(source.address(source_offset), temporary.address(0), size)?;
            stream.copy_raw(temporary.address(0), destination.address(destination_offset), size)?;
            let mut state = stream.state.lock();
            return stream.retain(&mut state, Retained::Buffer(temporary));
        }
        stream.copy_raw(
            source.address(source_offset),
            destination.address(destination_offset),
            size,
        )
    }

    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of it.
    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let address = buffer.address(offset);
        let count = host_size(size / pattern.len() as u64)?;
        let doing = || {
            format!(
                "filling {size} bytes at byte {offset} with a {}-byte pattern on {}",
                pattern.len(),
                stream.gpu.name()
            )
        };
        // The range lies in the buffer, aligned to the pattern: the buffer's base is aligned to
        // 256 bytes and the offset is a multiple of the pattern.
        match *pattern {
            // SAFETY: the range is in the buffer and aligned, as said above.
            [byte] => stream.enqueue("cuMemsetD8Async", doing, |raw| unsafe {
                sys::cuMemsetD8Async(address, byte, count, raw)
            }),
            [a, b] => {
                let value = u16::from_ne_bytes([a, b]);
                // SAFETY: the range is in the buffer and aligned, as said above.
                stream.enqueue("cuMemsetD16Async", doing, |raw| unsafe {
                    sys::cuMemsetD16Async(address, value, count, raw)
                })
            }
            [a, b, c, d] => {
                let value = u32::from_ne_bytes([a, b, c, d]);
                // SAFETY: the range is in the buffer and aligned, as said above.
                stream.enqueue("cuMemsetD32Async", doing, |raw| unsafe {
                    sys::cuMemsetD32Async(address, value, count, raw)
                })
            }
            // The checked adapter hands over only patterns of 1, 2 or 4 bytes.
            _ => Err(Error::internal(format!(
                "a {}-byte fill pattern reached the CUDA driver",
                pattern.len()
            ))),
        }
    }

    /// Launches `launch.workgroups` workgroups of the kernel (see `module.rs` for the
    /// argument ABI and the checks of the arguments against the kernel's parameters).
    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, CudaDriver>) -> Result<()> {
        let parameters = LaunchParameters::new(launch.kernel, launch.workgroups, launch.buffers, launch.scalars)?;
        // SAFETY: the parameters were checked against the kernel, and the driver copies them
        // before returning.
        stream.enqueue(
            "cuLaunchKernel",
            || parameters.describe(),
            |raw| unsafe { parameters.launch(raw) },
        )
    }

    /// Records `event` after everything enqueued so far.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let raw_event = event.raw;
        stream.enqueue(
            "cuEventRecord",
            || format!("recording an event on {}", stream.gpu.name()),
            // SAFETY: an event of this stream's device.
            |raw| unsafe { sys::cuEventRecord(raw_event, raw) },
        )?;
        *event.recorded.lock() = Some(Arc::clone(&stream.state));
        Ok(())
    }

    /// Makes later work wait for `event`'s most recent record.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        if event.recorded.lock().is_none() {
            return stream.state.lock().usable();
        }
        let raw_event = event.raw;
        stream.enqueue(
            "cuStreamWaitEvent",
            || format!("waiting for an event on {}", stream.gpu.name()),
            // SAFETY: an event of this stream's device; flags must be 0.
            |raw| unsafe { sys::cuStreamWaitEvent(raw, raw_event, 0) },
        )
    }

    /// Blocks until everything enqueued completed.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let mut state = stream.state.lock();
        if state.sticky.is_none() {
            stream.gpu.bind()?;
        }
        let raw = stream.raw;
        // Drain even with a sticky error known, so no transfer uses host memory after this.
        // SAFETY: this stream.
        let result = call(
            "cuStreamSynchronize",
            || format!("waiting for a stream on {}", stream.gpu.name()),
            || unsafe { sys::cuStreamSynchronize(raw) },
        );
        stream.release_all(&mut state);
        state.usable()?;
        result.map_err(|error| state.note(error))
    }

    /// True when everything enqueued completed.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        state.usable()?;
        stream.gpu.bind()?;
        let raw = stream.raw;
        // SAFETY: this stream.
        match raw_call("cuStreamQuery", || unsafe { sys::cuStreamQuery(raw) })? {
            CUresult::CUDA_SUCCESS => {
                stream.release_all(&mut state);
                Ok(true)
            }
            CUresult::CUDA_ERROR_NOT_READY => {
                stream.reclaim(&mut state);
                state.usable().map(|()| false)
            }
            code => Err(state.note(ffi::cuda_error("cuStreamQuery", code, || {
                format!("asking a stream on {}", stream.gpu.name())
            }))),
        }
    }
}

fn host_size(value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{value} bytes do not fit in a size_t")))
}

/// A CUDA event; `recorded` is the state of the stream it was last recorded on.
pub struct Event {
    pub(crate) gpu: Arc<Gpu>,
    raw: CUevent,
    timing: bool,
    recorded: Mutex<Option<Arc<Mutex<StreamState>>>>,
}

// CUDA events may be used from any thread.
// SAFETY: see above.
unsafe impl Send for Event {}
// SAFETY: see above.
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        let raw = self.raw;
        // SAFETY: the event is live; the driver frees it once the work recording it completed.
        let _ = call("cuEventDestroy_v2", ffi::quiet, || unsafe {
            sys::cuEventDestroy_v2(raw)
        });
    }
}

impl Event {
    /// Turns an execution error into the recording stream's sticky error.
    fn failed(&self, error: Error) -> Error {
        match self.recorded.lock().as_ref() {
            Some(stream) => stream.lock().note(error),
            None => error,
        }
    }

    fn recording_stream_error(&self) -> Result<()> {
        match self.recorded.lock().as_ref() {
            Some(stream) => stream.lock().usable(),
            None => Ok(()),
        }
    }

    fn check_timed(event: &Arc<Object<Event>>, role: &str) -> Result<()> {
        let id = event.handle();
        if !event.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was created without timing; create it with timing to measure elapsed time"
            )));
        }
        if event.recorded.lock().is_none() {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was never recorded"
            )));
        }
        if !<Event as DriverEvent<CudaDriver>>::query(event)? {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            )));
        }
        Ok(())
    }
}

impl DriverEvent<CudaDriver> for Event {
    /// An event, with timing when `timing` is set.
    fn create(_driver: &CudaDriver, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let mut raw: CUevent = std::ptr::null_mut();
        let flags = if timing { 0 } else { ffi::EVENT_DISABLE_TIMING };
        call(
            "cuEventCreate",
            || format!("creating an event on {}", gpu.name()),
            // SAFETY: writes one event in the current context.
            || unsafe { sys::cuEventCreate(&mut raw, flags) },
        )?;
        Ok(Event {
            gpu: Arc::clone(gpu),
            raw,
            timing,
            recorded: Mutex::new(None),
        })
    }

    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        if event.recorded.lock().is_none() {
            return Ok(true);
        }
        event.recording_stream_error()?;
        event.gpu.bind()?;
        let raw = event.raw;
        // SAFETY: a live event.
        match raw_call("cuEventQuery", || unsafe { sys::cuEventQuery(raw) })? {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => Err(event.failed(ffi::cuda_error("cuEventQuery", code, ffi::quiet))),
        }
    }

    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        if event.recorded.lock().is_none() {
            return Ok(());
        }
        event.gpu.bind()?;
        let raw = event.raw;
        // SAFETY: a live event.
        let waited = call("cuEventSynchronize", ffi::quiet, || unsafe {
            sys::cuEventSynchronize(raw)
        });
        waited.map_err(|error| event.failed(error))?;
        event.recording_stream_error()
    }

    /// Nanoseconds from `start` to `end` (`cuEventElapsedTime`, about half a microsecond of
    /// resolution).
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        let (start_id, end_id) = (start.handle(), end.handle());
        Event::check_timed(start, "start")?;
        Event::check_timed(end, "end")?;
        start.gpu.bind()?;
        let mut milliseconds = 0f32;
        let (first, last) = (start.raw, end.raw);
        // SAFETY: two completed timing events of one device.
        call("cuEventElapsedTime", ffi::quiet, || unsafe {
            sys::cuEventElapsedTime(&mut milliseconds, first, last)
        })?;
        if milliseconds < 0.0 {
            return Err(Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x}"
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

/// A launch's parameters as `cuLaunchKernel` takes them, checked against the kernel and the
/// device's limits: the buffers' addresses, the scalar block (zero-padded to the parameter's
/// size where it is known) and, where the kernel takes them, the buffers' lengths.
pub(crate) struct LaunchParameters {
    function: sys::CUfunction,
    name: String,
    workgroups: [u32; 3],
    size: [u32; 3],
    addresses: Vec<sys::CUdeviceptr>,
    scalar_block: Vec<u64>,
    has_scalars: bool,
    lengths: Vec<u64>,
    takes_lengths: bool,
}

// The function handle is a driver object usable from any thread; the rest is plain data.
// SAFETY: see above.
unsafe impl Send for LaunchParameters {}
// SAFETY: see above.
unsafe impl Sync for LaunchParameters {}

impl LaunchParameters {
    pub(crate) fn new(
        kernel: &crate::module::KernelObject,
        workgroups: [u32; 3],
        buffers: &[xhal_backend::BufferView<DeviceBuffer>],
        scalars: &[u8],
    ) -> Result<LaunchParameters> {
        let name = &kernel.name;
        let (scalar_size, takes_lengths) = kernel.check_arguments(buffers.len(), scalars)?;
        let info = &kernel.module.gpu.adapter().info;
        for axis in 0..3 {
            let count = workgroups[axis];
            if count == 0 {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: workgroup count in {} is 0; every dimension needs at least 1",
                    ["x", "y", "z"][axis]
                )));
            }
            if count > info.max_workgroup_count[axis] {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: {count} workgroups in {}, but {} launches at most {} (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{})",
                    ["x", "y", "z"][axis],
                    info.name,
                    info.max_workgroup_count[axis],
                    ["X", "Y", "Z"][axis]
                )));
            }
        }
        // The driver copies as many bytes as the parameter has; a zero-padded copy of the
        // block keeps it from reading past the caller's bytes where the size is unknown.
        let mut scalar_block = vec![0u64; scalars.len().max(scalar_size.unwrap_or(0)).div_ceil(8)];
        // SAFETY: the block holds at least `scalars.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(scalars.as_ptr(), scalar_block.as_mut_ptr().cast::<u8>(), scalars.len())
        };
        let mut lengths: Vec<u64> = buffers.iter().map(|view| view.size).collect();
        if lengths.is_empty() {
            lengths.push(0);
        }
        Ok(LaunchParameters {
            function: kernel.function,
            name: name.clone(),
            workgroups,
            size: kernel.workgroup_size,
            addresses: buffers.iter().map(|view| view.buffer.address(view.offset)).collect(),
            scalar_block,
            has_scalars: !scalars.is_empty(),
            lengths,
            takes_lengths,
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

    /// `cuLaunchKernel` on `stream`.
    ///
    /// # Safety
    /// The context is current and `stream` is a live stream of it.
    pub(crate) unsafe fn launch(&self, stream: CUstream) -> CUresult {
        // `kernelParams` is `void**`, but the driver only reads the values it points to.
        let mut parameters: Vec<*mut c_void> = self
            .addresses
            .iter()
            .map(|address| (address as *const sys::CUdeviceptr).cast_mut().cast::<c_void>())
            .collect();
        if self.has_scalars {
            parameters.push(self.scalar_block.as_ptr().cast_mut().cast());
        }
        if self.takes_lengths {
            parameters.push(self.lengths.as_ptr().cast_mut().cast());
        }
        let (workgroups, size) = (self.workgroups, self.size);
        // SAFETY: one pointer per parameter, each to a value of the parameter's size (checked
        // in `new` where the sizes are known); the driver copies them before returning; the
        // caller vouches for the stream.
        unsafe {
            sys::cuLaunchKernel(
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
