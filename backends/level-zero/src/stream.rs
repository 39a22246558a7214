//! Streams as immediate command lists, events as barriers that signal a Level Zero event;
//! kernel launches (the arguments set on the kernel, then an appended launch).
//!
//! A stream is one immediate command list on a compute queue group, asynchronous, in order
//! (`ZE_COMMAND_QUEUE_FLAG_IN_ORDER` where the driver's API is 1.9 or later; on older
//! drivers a barrier goes between every two commands, since commands of a list may otherwise
//! overlap). Every command is submitted as it is appended.
//!
//! Level Zero frees memory at once (`zeMemFree` does not wait for queued work), so the stream
//! keeps what each command uses (buffers, staging memory, events it waits for) until it sees
//! the command complete: at a synchronize, a query that finds the list idle, or a wait for an
//! event recorded after it. Writes are copied into host staging memory when they are
//! enqueued; reads land in host staging memory and are copied to their destination when
//! their completion is seen. Errors from the list's host synchronization stick to the stream,
//! and so do those an append reports of the device or the work (a lost device, device memory
//! a submission could not get: [`ffi::is_execution_failure`]); an append refused for any other
//! reason enqueued nothing and leaves the stream as it was.

use crate::device::Gpu;
use crate::ffi::{self, CommandListHandle, EventHandle, EventPoolHandle};
use crate::memory::{host_size, DeviceBuffer, HostStaging};
use crate::module::lengths_block;
use crate::LevelZeroDriver;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;
use xhal_backend::{CopyOverlap, DriverEvent, DriverStream, Error, ErrorKind, Launch, Object, Result};

/// A Level Zero event in a pool of its own, host-visible, with kernel timestamps when asked.
pub(crate) struct ZeEvent {
    gpu: Arc<Gpu>,
    pool: EventPoolHandle,
    pub(crate) event: EventHandle,
}

// Events are signalled by the device and read from any thread.
// SAFETY: see above.
unsafe impl Send for ZeEvent {}
// SAFETY: see above.
unsafe impl Sync for ZeEvent {}

impl ZeEvent {
    pub(crate) fn new(gpu: &Arc<Gpu>, timestamps: bool) -> Result<ZeEvent> {
        let api = gpu.api();
        let mut flags = ffi::ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
        if timestamps {
            flags |= ffi::ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP;
        }
        let desc = ffi::EventPoolDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
            p_next: std::ptr::null(),
            flags,
            count: 1,
        };
        let mut device = gpu.adapter().device;
        let mut pool = std::ptr::null_mut();
        // SAFETY: a live context, one device of it, a filled descriptor.
        let code = unsafe { (api.event_pool_create)(gpu.context, &desc, 1, &mut device, &mut pool) };
        ffi::check(code, "zeEventPoolCreate", || {
            format!("creating an event pool on {}", gpu.name())
        })?;
        let desc = ffi::EventDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_EVENT_DESC,
            p_next: std::ptr::null(),
            index: 0,
            signal: ffi::ZE_EVENT_SCOPE_FLAG_HOST,
            wait: ffi::ZE_EVENT_SCOPE_FLAG_HOST,
        };
        let mut event = std::ptr::null_mut();
        // SAFETY: index 0 of a pool of one.
        let code = unsafe { (api.event_create)(pool, &desc, &mut event) };
        if let Err(error) = ffi::check(code, "zeEventCreate", || format!("creating an event on {}", gpu.name())) {
            // SAFETY: the pool holds no event.
            unsafe { (api.event_pool_destroy)(pool) };
            return Err(error);
        }
        Ok(ZeEvent {
            gpu: Arc::clone(gpu),
            pool,
            event,
        })
    }

    /// Whether the event is signalled.
    pub(crate) fn is_signalled(&self) -> Result<bool> {
        // SAFETY: a live event.
        let code = unsafe { (self.gpu.api().event_query_status)(self.event) };
        match code {
            ffi::ZE_RESULT_SUCCESS => Ok(true),
            ffi::ZE_RESULT_NOT_READY => Ok(false),
            code => Err(ffi::ze_error(
                "zeEventQueryStatus",
                "asking whether an event is signalled",
                code,
            )),
        }
    }

    /// Blocks until the event is signalled.
    pub(crate) fn wait(&self) -> Result<()> {
        // SAFETY: a live event; UINT64_MAX waits without a timeout.
        let code = unsafe { (self.gpu.api().event_host_synchronize)(self.event, u64::MAX) };
        ffi::check(code, "zeEventHostSynchronize", || {
            format!("waiting for an event on {}", self.gpu.name())
        })
    }

    /// Makes a signalled event unsignalled again, for a command that signals it next.
    ///
    /// The caller knows that no queued command signals or waits for it.
    pub(crate) fn reset(&self) -> Result<()> {
        // SAFETY: a live event that no queued command uses (the caller's promise).
        let code = unsafe { (self.gpu.api().event_host_reset)(self.event) };
        ffi::check(code, "zeEventHostReset", || {
            format!("resetting an event on {}", self.gpu.name())
        })
    }

    /// The global end timestamp of the command that signalled the event, in ticks.
    fn end_ticks(&self) -> Result<u64> {
        let mut result = ffi::KernelTimestampResult::default();
        // SAFETY: a signalled event of a timestamp pool; the result is plain data.
        let code = unsafe { (self.gpu.api().event_query_kernel_timestamp)(self.event, &mut result) };
        ffi::check(code, "zeEventQueryKernelTimestamp", || {
            "reading an event's timestamp".to_string()
        })?;
        Ok(result.global.kernel_end)
    }
}

impl Drop for ZeEvent {
    fn drop(&mut self) {
        // SAFETY: no queued command refers to the event any more (commands hold it).
        unsafe {
            (self.gpu.api().event_destroy)(self.event);
            (self.gpu.api().event_pool_destroy)(self.pool);
        }
    }
}

/// What a command needs until it completes.
pub(crate) type KeepAlive = Box<dyn Any + Send + Sync>;

/// A read whose bytes are in staging memory until the read is seen complete.
struct ReadBack {
    staging: HostStaging,
    destination: *mut u8,
}

// The destination is the caller's, valid until the read completes (the trait's contract).
// SAFETY: see above.
unsafe impl Send for ReadBack {}

struct Pending {
    number: u64,
    _keep: Vec<KeepAlive>,
    read_back: Option<ReadBack>,
}

pub(crate) struct StreamState {
    pending: VecDeque<Pending>,
    next_command: u64,
    /// An error found while executing: returned by every later call.
    sticky: Option<Error>,
}

impl StreamState {
    /// The error of an append to the stream's list that `function` answered with `code`: it
    /// sticks to the stream where it says that the device or the work failed.
    fn append_failed(&mut self, function: &str, doing: impl std::fmt::Display, code: ffi::ZeResult) -> Error {
        let error = ffi::ze_error(function, doing, code);
        if ffi::is_execution_failure(code) {
            self.sticky.get_or_insert(error).clone()
        } else {
            error
        }
    }

    /// Retires the commands numbered below `bound` (all with `None`): their reads are copied
    /// out and what they used is released.
    fn retire(&mut self, bound: Option<u64>) {
        while let Some(front) = self.pending.front() {
            if bound.is_some_and(|bound| front.number >= bound) {
                break;
            }
            let Some(done) = self.pending.pop_front() else {
                break;
            };
            if let Some(read) = done.read_back {
                // SAFETY: the read completed, so the staging memory holds its bytes; the caller
                // keeps the destination valid until then.
                unsafe { std::ptr::copy_nonoverlapping(read.staging.pointer, read.destination, read.staging.size) };
            }
        }
    }
}

/// An immediate command list.
pub struct Stream {
    pub(crate) gpu: Arc<Gpu>,
    list: CommandListHandle,
    /// Shared with the records of events on this stream.
    state: Arc<Mutex<StreamState>>,
}

// The list is only appended to under the state's lock.
// SAFETY: see above.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the checked adapter synchronized the stream before its last reference went,
        // so the list is idle; nothing else destroys it.
        unsafe { (self.gpu.api().command_list_destroy)(self.list) };
    }
}

impl Stream {
    /// Appends one command through `call`, which receives the list and returns the name of
    /// the Level Zero call and its result; `doing` names the command for errors. `keep` lives
    /// until the command completes. Returns the command's number.
    /// Whether the stream failed while executing (its sticky error is set): work it had
    /// been handed may still be running, half done.
    pub(crate) fn failed(&self) -> bool {
        self.state.lock().sticky.is_some()
    }

    pub(crate) fn enqueue(
        &self,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(CommandListHandle) -> (&'static str, ffi::ZeResult),
        keep: Vec<KeepAlive>,
    ) -> Result<u64> {
        let mut state = self.state.lock();
        self.enqueue_locked(&mut state, doing, call, keep, None)
    }

    fn enqueue_locked(
        &self,
        state: &mut StreamState,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(CommandListHandle) -> (&'static str, ffi::ZeResult),
        keep: Vec<KeepAlive>,
        read_back: Option<ReadBack>,
    ) -> Result<u64> {
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        if !self.gpu.adapter().in_order_lists && state.next_command > 0 {
            // SAFETY: a barrier with no events on a live list.
            let code = unsafe {
                (self.gpu.api().command_list_append_barrier)(self.list, std::ptr::null_mut(), 0, std::ptr::null_mut())
            };
            if code != ffi::ZE_RESULT_SUCCESS {
                let doing = format!("ordering the commands of a stream on {}", self.gpu.name());
                return Err(state.append_failed("zeCommandListAppendBarrier", doing, code));
            }
        }
        let (function, code) = call(self.list);
        if code != ffi::ZE_RESULT_SUCCESS {
            return Err(state.append_failed(function, doing(), code));
        }
        let number = state.next_command;
        state.next_command += 1;
        state.pending.push_back(Pending {
            number,
            _keep: keep,
            read_back,
        });
        Ok(number)
    }

    /// Blocks until the list is idle (or `timeout` nanoseconds pass: `Ok(false)`).
    fn wait_idle(&self, state: &mut StreamState, timeout: u64) -> Result<bool> {
        let api = self.gpu.api();
        let code = match api.command_list_host_synchronize {
            // SAFETY: a live list, appended to only under the lock this caller holds.
            Some(synchronize) => unsafe { synchronize(self.list, timeout) },
            None => {
                // No zeCommandListHostSynchronize: a barrier signals an event when everything
                // before it has completed.
                let marker = ZeEvent::new(&self.gpu, false)?;
                // SAFETY: a barrier signalling a live event.
                let code =
                    unsafe { (api.command_list_append_barrier)(self.list, marker.event, 0, std::ptr::null_mut()) };
                if code != ffi::ZE_RESULT_SUCCESS {
                    let doing = format!("marking the end of a stream's work on {}", self.gpu.name());
                    return Err(state.append_failed("zeCommandListAppendBarrier", doing, code));
                }
                // SAFETY: a live event.
                let code = unsafe { (api.event_host_synchronize)(marker.event, timeout) };
                if code == ffi::ZE_RESULT_NOT_READY {
                    // Keep the event until the barrier signalling it completes.
                    let number = state.next_command;
                    state.next_command += 1;
                    state.pending.push_back(Pending {
                        number,
                        _keep: vec![Box::new(marker)],
                        read_back: None,
                    });
                }
                code
            }
        };
        match code {
            ffi::ZE_RESULT_SUCCESS => {
                state.retire(None);
                Ok(true)
            }
            ffi::ZE_RESULT_NOT_READY => Ok(false),
            code => {
                let function = if api.command_list_host_synchronize.is_some() {
                    "zeCommandListHostSynchronize"
                } else {
                    "zeEventHostSynchronize"
                };
                let error = ffi::ze_error(function, format!("waiting for a stream on {}", self.gpu.name()), code);
                let error = Error::new(
                    if error.kind() == ErrorKind::Internal {
                        ErrorKind::KernelFault
                    } else {
                        error.kind()
                    },
                    error.message().to_string(),
                );
                Err(state.sticky.get_or_insert(error).clone())
            }
        }
    }

    /// Appends one copy between device ranges that do not overlap; `keep` holds both buffers
    /// (a temporary one has no handle, so the caller says what to hold).
    fn copy_raw(
        &self,
        source: &DeviceBuffer,
        source_offset: u64,
        destination: &DeviceBuffer,
        destination_offset: u64,
        size: u64,
        keep: Vec<KeepAlive>,
    ) -> Result<()> {
        let bytes = host_size(size, "copy size")?;
        let (from, to) = (source.address(source_offset), destination.address(destination_offset));
        self.enqueue(
            || {
                format!(
                    "copying {size} bytes from byte {source_offset} to byte {destination_offset} on {}",
                    self.gpu.name()
                )
            },
            |list| {
                // SAFETY: device memory of this context, in range, not overlapping.
                unsafe { append_copy(self.gpu.api(), list, to, from.cast_const(), bytes) }
            },
            keep,
        )
        .map(drop)
    }
}

impl DriverStream<LevelZeroDriver> for Stream {
    fn create(driver: &LevelZeroDriver, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        Self::create_with_priority(driver, device, 0)
    }

    /// An immediate command list on a queue of normal priority, or of high priority for -1.
    fn create_with_priority(
        _driver: &LevelZeroDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        priority: i32,
    ) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        let adapter = gpu.adapter();
        let desc = ffi::CommandQueueDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
            p_next: std::ptr::null(),
            ordinal: adapter.compute_ordinal,
            index: 0,
            flags: if adapter.in_order_lists {
                ffi::ZE_COMMAND_QUEUE_FLAG_IN_ORDER
            } else {
                0
            },
            mode: ffi::ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
            priority: if priority < 0 {
                ffi::ZE_COMMAND_QUEUE_PRIORITY_HIGH
            } else {
                ffi::ZE_COMMAND_QUEUE_PRIORITY_NORMAL
            },
        };
        let mut list = std::ptr::null_mut();
        // SAFETY: a live context and its device, a filled descriptor.
        let code = unsafe { (gpu.api().command_list_create_immediate)(gpu.context, adapter.device, &desc, &mut list) };
        ffi::check(code, "zeCommandListCreateImmediate", || {
            format!("creating a stream of priority {priority} on {}", gpu.name())
        })?;
        Ok(Stream {
            gpu: Arc::clone(gpu),
            list,
            state: Arc::new(Mutex::new(StreamState {
                pending: VecDeque::new(),
                next_command: 0,
                sticky: None,
            })),
        })
    }

    /// The error that stuck to the stream, if any.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        match &stream.state.lock().sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    // Copies and fills. The checked adapter checked every range against its buffer, and never
    // hands over a command of 0 bytes.

    /// Copies `size` bytes from `source` into staging memory now, and appends the copy from
    /// there to the buffer.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes for the duration of the call.
    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let bytes = host_size(size, "write size")?;
        if stream.gpu.is_pinned(source as usize, bytes) {
            let destination = buffer.address(offset);
            return stream
                .enqueue(
                    || {
                        format!(
                            "writing {size} bytes from host memory at byte {offset} on {}",
                            stream.gpu.name()
                        )
                    },
                    |list| {
                        // SAFETY: device memory and host memory of this context, in range; the
                        // caller keeps the source unchanged until the copy completes.
                        unsafe { append_copy(stream.gpu.api(), list, destination, source.cast(), bytes) }
                    },
                    vec![Box::new(Arc::clone(buffer))],
                )
                .map(drop);
        }
        let staging = HostStaging::new(&stream.gpu, bytes)?;
        // SAFETY: the caller vouches for `source`; the staging memory holds `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(source, staging.pointer, bytes) };
        let destination = buffer.address(offset);
        let from = staging.pointer;
        stream
            .enqueue(
                || format!("writing {size} bytes at byte {offset} on {}", stream.gpu.name()),
                |list| {
                    // SAFETY: device memory and host staging memory of this context, in range.
                    unsafe { append_copy(stream.gpu.api(), list, destination, from.cast(), bytes) }
                },
                vec![Box::new(staging), Box::new(Arc::clone(buffer))],
            )
            .map(drop)
    }

    /// Appends a copy from the buffer into staging memory, copied to `destination` when the
    /// read is seen complete.
    ///
    /// # Safety
    /// `destination` must point to `size` writable bytes that stay valid, and untouched by
    /// anyone else, until the read completes (a synchronize, or a wait for an event after it).
    unsafe fn read(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let bytes = host_size(size, "read size")?;
        if stream.gpu.is_pinned(destination as usize, bytes) {
            let source = buffer.address(offset);
            return stream
                .enqueue(
                    || {
                        format!(
                            "reading {size} bytes at byte {offset} into host memory on {}",
                            stream.gpu.name()
                        )
                    },
                    |list| {
                        // SAFETY: device memory and host memory of this context, in range; the
                        // caller leaves the destination alone until the copy completes.
                        unsafe { append_copy(stream.gpu.api(), list, destination.cast(), source, bytes) }
                    },
                    vec![Box::new(Arc::clone(buffer))],
                )
                .map(drop);
        }
        let staging = HostStaging::new(&stream.gpu, bytes)?;
        let source = buffer.address(offset);
        let into = staging.pointer;
        let mut state = stream.state.lock();
        stream
            .enqueue_locked(
                &mut state,
                || format!("reading {size} bytes at byte {offset} on {}", stream.gpu.name()),
                |list| {
                    // SAFETY: device memory and host staging memory of this context, in range.
                    unsafe { append_copy(stream.gpu.api(), list, into.cast(), source, bytes) }
                },
                vec![Box::new(Arc::clone(buffer))],
                Some(ReadBack { staging, destination }),
            )
            .map(drop)
    }

    /// Appends a device copy; overlapping ranges of one buffer go through a temporary buffer,
    /// since Level Zero refuses them.
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
            // A copy onto itself changes nothing; the list is in order, so nothing to append.
            return Ok(());
        }
        if overlap == CopyOverlap::Overlapping {
            let temporary = Arc::new(DeviceBuffer::new(&stream.gpu, size)?);
            stream.copy_raw(
                source,
                source_offset,
                &temporary,
                0,
                size,
                vec![Box::new(Arc::clone(source)), Box::new(Arc::clone(&temporary))],
            )?;
            return stream.copy_raw(
                &temporary,
                0,
                destination,
                destination_offset,
                size,
                vec![Box::new(Arc::clone(&temporary)), Box::new(Arc::clone(destination))],
            );
        }
        stream.copy_raw(
            source,
            source_offset,
            destination,
            destination_offset,
            size,
            vec![Box::new(Arc::clone(source)), Box::new(Arc::clone(destination))],
        )
    }

    /// Appends a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of it.
    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let bytes = host_size(size, "fill size")?;
        // The pattern lives in host memory the device reads until the fill completes.
        let staging = HostStaging::new(&stream.gpu, pattern.len())?;
        // SAFETY: the staging memory holds the pattern's length.
        unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), staging.pointer, pattern.len()) };
        let (target, from, length) = (buffer.address(offset), staging.pointer, pattern.len());
        stream
            .enqueue(
                || {
                    format!(
                        "filling {size} bytes at byte {offset} with a {length}-byte pattern on {}",
                        stream.gpu.name()
                    )
                },
                |list| {
                    // SAFETY: device memory of this context, in range; the pattern stays alive.
                    let code = unsafe {
                        (stream.gpu.api().command_list_append_memory_fill)(
                            list,
                            target,
                            from.cast_const().cast(),
                            length,
                            bytes,
                            std::ptr::null_mut(),
                            0,
                            std::ptr::null_mut(),
                        )
                    };
                    ("zeCommandListAppendMemoryFill", code)
                },
                vec![Box::new(staging), Box::new(Arc::clone(buffer))],
            )
            .map(drop)
    }

    /// Sets the arguments of the kernel and appends the launch to `stream`.
    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, LevelZeroDriver>) -> Result<()> {
        check_launch(launch)?;
        let api = stream.gpu.api();
        let native = launch.kernel.kernel.lock();
        set_arguments(*native, launch)?;
        let workgroups = launch.workgroups;
        stream
            .enqueue(
                || describe_launch(launch),
                |list| {
                    // SAFETY: every argument was set above, under the kernel's lock, which is
                    // held until the launch is appended.
                    unsafe { append_launch(api, list, *native, workgroups) }
                },
                launch_holds(launch),
            )
            .map(drop)
    }

    /// Records `event` as a barrier that signals a new Level Zero event when everything
    /// appended so far has completed.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let marker = Arc::new(ZeEvent::new(&stream.gpu, event.timing)?);
        let held = Arc::clone(&marker);
        let number = stream.enqueue(
            || format!("recording an event on {}", stream.gpu.name()),
            |list| {
                // SAFETY: a barrier signalling a live event, which the command holds.
                let code = unsafe {
                    (stream.gpu.api().command_list_append_barrier)(list, marker.event, 0, std::ptr::null_mut())
                };
                ("zeCommandListAppendBarrier", code)
            },
            vec![Box::new(held)],
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
        let mut handle = record.marker.event;
        stream
            .enqueue(
                || format!("waiting for an event on {}", stream.gpu.name()),
                |list| {
                    // SAFETY: a one-event list of a live event, which the command holds.
                    let code = unsafe { (stream.gpu.api().command_list_append_wait_on_events)(list, 1, &mut handle) };
                    ("zeCommandListAppendWaitOnEvents", code)
                },
                vec![Box::new(Arc::clone(&record))],
            )
            .map(drop)
    }

    /// Blocks until everything appended has completed.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let mut state = stream.state.lock();
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        if state.pending.is_empty() {
            return Ok(());
        }
        stream.wait_idle(&mut state, u64::MAX).map(drop)
    }

    /// True when everything appended has completed.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        if state.pending.is_empty() {
            return Ok(true);
        }
        stream.wait_idle(&mut state, 0)
    }
}

/// One record of an event: the Level Zero event the barrier signals, the barrier's number on
/// its stream, and the stream's state, to retire what completed before it.
pub(crate) struct Record {
    marker: Arc<ZeEvent>,
    number: u64,
    stream: Arc<Mutex<StreamState>>,
}

impl Record {
    /// Given that the marker is signalled: the commands before it are complete.
    fn completed(&self) -> Result<()> {
        let mut state = self.stream.lock();
        state.retire(Some(self.number));
        match &state.sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

/// A point on a stream: its most recent record.
pub struct Event {
    gpu: Arc<Gpu>,
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
        if !record.marker.is_signalled()? {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            )));
        }
        record.completed()?;
        Ok(record)
    }
}

impl DriverEvent<LevelZeroDriver> for Event {
    fn create(_driver: &LevelZeroDriver, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        let gpu: &Arc<Gpu> = device;
        Ok(Event {
            gpu: Arc::clone(gpu),
            timing,
            record: Mutex::new(None),
        })
    }

    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        let Some(record) = event.latest() else {
            return Ok(true);
        };
        if !record.marker.is_signalled()? {
            return Ok(false);
        }
        record.completed()?;
        Ok(true)
    }

    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        let Some(record) = event.latest() else {
            return Ok(());
        };
        record.marker.wait()?;
        record.completed()
    }

    /// Nanoseconds between the two barriers' ends, from their kernel timestamps and the
    /// device's timer resolution.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        let (start_id, end_id) = (start.handle(), end.handle());
        let first = start.timed_record("start", start_id)?.marker.end_ticks()?;
        let last = end.timed_record("end", end_id)?.marker.end_ticks()?;
        let adapter = start.gpu.adapter();
        elapsed_from_ticks(first, last, adapter.kernel_timestamp_bits, adapter.timer_resolution_ns).ok_or_else(|| {
            Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x} (or the device's {}-bit timestamp \
                 counter wrapped between them)",
                adapter.kernel_timestamp_bits
            ))
        })
    }

    /// The barrier's global end timestamp in nanoseconds. A kernel timestamp may have fewer
    /// valid bits than the device's clock (32 on many GPUs), so it is unwrapped against a
    /// reading of that clock taken now: the record completed less than one wrap ago.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        let ticks = event.timed_record("the", event.handle())?.marker.end_ticks()?;
        let now = event.gpu.global_ticks()?;
        let adapter = event.gpu.adapter();
        let unwrapped = unwrap_ticks(ticks, now, adapter.kernel_timestamp_bits);
        Ok(unwrapped.saturating_mul(adapter.timer_resolution_ns))
    }
}

/// The full counter value, at or before `now`, whose low `bits` are those of `ticks`.
pub(crate) fn unwrap_ticks(ticks: u64, now: u64, bits: u32) -> u64 {
    if bits == 0 || bits >= 64 {
        return ticks;
    }
    let mask = (1u64 << bits) - 1;
    let behind = (now & mask).wrapping_sub(ticks & mask) & mask;
    now.wrapping_sub(behind)
}

/// Nanoseconds from `first` to `last`, ticks of a counter of which `bits` are valid, of
/// `resolution_ns` nanoseconds each; `None` where `last` comes before `first`. A counter that
/// wrapped in between cannot be told from an end before the start, so it is refused too.
pub(crate) fn elapsed_from_ticks(first: u64, last: u64, bits: u32, resolution_ns: u64) -> Option<u64> {
    let mask = if bits == 0 || bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let ticks = (last & mask).checked_sub(first & mask)?;
    Some(ticks.saturating_mul(resolution_ns))
}

/// Checks a launch's arguments against its kernel's parameters, and its workgroup counts
/// against the device's limits: what Level Zero would refuse less clearly, or not at all.
pub(crate) fn check_launch(launch: &Launch<'_, LevelZeroDriver>) -> Result<()> {
    let kernel = launch.kernel;
    let name = &kernel.name;
    kernel.check_arguments(launch.buffers.len(), launch.scalars)?;
    let limits = kernel.module.gpu.adapter().info.max_workgroup_count;
    for axis in 0..3 {
        let count = launch.workgroups[axis];
        if count == 0 {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: workgroup count in {} is 0; every dimension needs at least 1",
                ["x", "y", "z"][axis]
            )));
        }
        if count > limits[axis] {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: {count} workgroups in {} is more than {} allows ({})",
                ["x", "y", "z"][axis],
                kernel.module.gpu.name(),
                limits[axis]
            )));
        }
    }
    Ok(())
}

/// Sets the arguments of `launch` on `native`, its kernel's handle: the view addresses, the
/// scalar block and the buffer lengths. The caller holds the kernel's lock from here until the
/// launch is appended, since Level Zero takes the arguments when a launch is appended, to a
/// stream or to a command list, and they are state shared by every launch of the kernel.
pub(crate) fn set_arguments(native: ffi::KernelHandle, launch: &Launch<'_, LevelZeroDriver>) -> Result<()> {
    let (kernel, buffers, scalars) = (launch.kernel, launch.buffers, launch.scalars);
    let name = &kernel.name;
    let api = kernel.module.gpu.api();
    let set = |index: usize, size: usize, value: *const c_void, what: &str| -> Result<()> {
        // SAFETY: `size` readable bytes at `value`; Level Zero copies them.
        let code = unsafe { (api.kernel_set_argument_value)(native, index as u32, size, value) };
        ffi::check(code, "zeKernelSetArgumentValue", || {
            format!("setting {what} as argument {index} of kernel `{name}`")
        })
    };
    for (index, view) in buffers.iter().enumerate() {
        let address = view.buffer.address(view.offset);
        set(
            index,
            std::mem::size_of::<*mut c_void>(),
            (&address as *const *mut c_void).cast(),
            &format!("buffer argument {index}"),
        )?;
    }
    let mut index = buffers.len();
    if !scalars.is_empty() {
        set(
            index,
            scalars.len(),
            scalars.as_ptr().cast(),
            &format!("the {}-byte scalar block", scalars.len()),
        )?;
        index += 1;
    }
    if kernel.takes_lengths() {
        let lengths = lengths_block(buffers.iter().map(|view| view.size));
        set(
            index,
            lengths.len(),
            lengths.as_ptr().cast(),
            &format!("the {}-byte buffer lengths", lengths.len()),
        )?;
    }
    Ok(())
}

/// What a launch holds until it completes: Level Zero must not destroy a kernel (or its
/// module) the device still references, nor free the memory it reads, so its buffers and its
/// kernel, and through it the module.
pub(crate) fn launch_holds(launch: &Launch<'_, LevelZeroDriver>) -> Vec<KeepAlive> {
    let mut keep: Vec<KeepAlive> = launch
        .buffers
        .iter()
        .map(|view| Box::new(Arc::clone(&view.buffer)) as KeepAlive)
        .collect();
    keep.push(Box::new(Arc::clone(launch.kernel)));
    keep
}

/// A launch in words, for the error of a failed append.
pub(crate) fn describe_launch(launch: &Launch<'_, LevelZeroDriver>) -> String {
    let (workgroups, size) = (launch.workgroups, launch.kernel.workgroup_size);
    format!(
        "launching kernel `{}` with {}x{}x{} workgroups of {}x{}x{}",
        launch.kernel.name, workgroups[0], workgroups[1], workgroups[2], size[0], size[1], size[2]
    )
}

/// Appends a launch of `native` over `workgroups` to `list`, and names the call, as
/// `Stream::enqueue` takes it.
///
/// # Safety
/// `native` is a live kernel of the list's context whose every argument is set, and whose lock
/// the caller holds.
pub(crate) unsafe fn append_launch(
    api: &ffi::Api,
    list: CommandListHandle,
    native: ffi::KernelHandle,
    workgroups: [u32; 3],
) -> (&'static str, ffi::ZeResult) {
    let groups = ffi::GroupCount {
        x: workgroups[0],
        y: workgroups[1],
        z: workgroups[2],
    };
    // SAFETY: the caller's contract; the group count outlives the call; no events.
    let code = unsafe {
        (api.command_list_append_launch_kernel)(list, native, &groups, std::ptr::null_mut(), 0, std::ptr::null_mut())
    };
    ("zeCommandListAppendLaunchKernel", code)
}

/// Appends a copy of `bytes` bytes from `from` to `to` on `list`, and names the call, as
/// `Stream::enqueue` takes it.
///
/// # Safety
/// Both ranges are memory of the list's context that the device may access, in range, and
/// they do not overlap.
pub(crate) unsafe fn append_copy(
    api: &ffi::Api,
    list: ffi::CommandListHandle,
    to: *mut std::ffi::c_void,
    from: *const std::ffi::c_void,
    bytes: usize,
) -> (&'static str, ffi::ZeResult) {
    // SAFETY: the caller's contract; no signal event and no waits.
    let code = unsafe {
        (api.command_list_append_memory_copy)(list, to, from, bytes, std::ptr::null_mut(), 0, std::ptr::null_mut())
    };
    ("zeCommandListAppendMemoryCopy", code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_follows_ticks_and_refuses_an_end_before_the_start() {
        assert_eq!(elapsed_from_ticks(100, 250, 64, 2), Some(300));
        // Bits above the valid ones are ignored.
        assert_eq!(elapsed_from_ticks(0xff00_0000_0000_0005, 0x9, 32, 10), Some(40));
        assert_eq!(elapsed_from_ticks(5, 5, 0, 83), Some(0));
        // An end before the start, or a counter that wrapped, is refused.
        assert_eq!(elapsed_from_ticks(250, 100, 64, 2), None);
        assert_eq!(elapsed_from_ticks(0xffff_fff0, 0x10, 32, 1), None);
    }

    #[test]
    fn kernel_timestamps_unwrap_against_the_clock_read_after_them() {
        assert_eq!(unwrap_ticks(500, 900, 64), 500);
        // 32 valid bits: the event's low bits, in the latest wrap at or before now.
        assert_eq!(unwrap_ticks(0x0000_0010, 0x7_0000_0020, 32), 0x7_0000_0010);
        assert_eq!(unwrap_ticks(0xffff_fff0, 0x7_0000_0020, 32), 0x6_ffff_fff0);
        assert_eq!(unwrap_ticks(0x20, 0x20, 32), 0x20);
    }
}
