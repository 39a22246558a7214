//! Streams (transfers, fills, copies, launches, ordering) and events.

use std::ffi::c_void;
use std::sync::Arc;

use crate::handles::{self, Object};
use crate::memory::{xhal_buffer_t, BufferObject};
use crate::runtime::xhal_device_t;
use crate::{call, invalid, write_out, xhal_status_t, Result};

/// An in-order queue of work on one device. Opaque; from `xhal_stream_create` or
/// `xhal_device_default_stream`.
pub struct xhal_stream_t {
    _private: [u8; 0],
}

/// A point in a stream's work. Opaque; from `xhal_event_create`.
pub struct xhal_event_t {
    _private: [u8; 0],
}

pub(crate) struct StreamObject {
    pub(crate) stream: xhal::Stream,
    pub(crate) device: xhal::Device,
    /// The device's default stream belongs to its device handle, which destroys it.
    pub(crate) is_default: bool,
    /// The graph its work is recorded into, between xhal_stream_begin_capture and
    /// xhal_stream_end_capture (graph.rs).
    pub(crate) capture: crate::graph::CaptureState,
}

pub(crate) struct EventObject {
    event: xhal::Event,
}

/// A new stream on `device`.
///
/// # Safety
///
/// `stream` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_create(
    device: *const xhal_device_t,
    stream: *mut *mut xhal_stream_t,
) -> xhal_status_t {
    call("xhal_stream_create", || {
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { create_stream(device, stream, xhal::Device::create_stream) }
    })
}

/// Makes a stream of `device` with `make` and writes its handle to `stream`, which is checked
/// first, so that a null out pointer never leaves a stream no one can destroy.
///
/// # Safety
///
/// `stream`, when not null, points to writable storage for a handle.
unsafe fn create_stream(
    device: *const xhal_device_t,
    stream: *mut *mut xhal_stream_t,
    make: impl FnOnce(&xhal::Device) -> Result<xhal::Stream>,
) -> Result<()> {
    if stream.is_null() {
        return Err(invalid(
            "stream is a null pointer; pass where to write the result".to_string(),
        ));
    }
    let object = handles::device(device as usize, "device")?;
    let created = make(&object.device)?;
    let handle = handles::insert(Object::Stream(Arc::new(StreamObject {
        stream: created,
        device: object.device.clone(),
        is_default: false,
        capture: Default::default(),
    })));
    // SAFETY: checked non-null above; the caller passes writable storage.
    unsafe { write_out(stream, handle as *mut xhal_stream_t, "stream") }
}

/// The stream priorities of `device` (C API 1.3), numbered as CUDA numbers them: a lower number
/// is more urgent; `least` (0) is what `xhal_stream_create` gives, `greatest` the most urgent.
/// Both are 0 on a device that schedules every stream alike.
///
/// # Safety
///
/// `least` and `greatest` point to writable `int32_t`s.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_stream_priorities(
    device: *const xhal_device_t,
    least: *mut i32,
    greatest: *mut i32,
) -> xhal_status_t {
    call("xhal_device_stream_priorities", || {
        if least.is_null() || greatest.is_null() {
            return Err(invalid(format!(
                "{} is a null pointer; pass where to write the result",
                if least.is_null() { "least" } else { "greatest" }
            )));
        }
        let object = handles::device(device as usize, "device")?;
        let priorities = object.device.stream_priorities()?;
        // SAFETY: both checked non-null above; the caller passes writable storage.
        unsafe {
            write_out(least, priorities.least, "least")?;
            write_out(greatest, priorities.greatest, "greatest")
        }
    })
}

/// A new stream on `device` whose work the device prefers to that of less urgent streams
/// (C API 1.3). `priority` outside `xhal_device_stream_priorities` is clamped into them, as CUDA
/// clamps it; `xhal_stream_priority` says what the stream got.
///
/// # Safety
///
/// `stream` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_create_with_priority(
    device: *const xhal_device_t,
    priority: i32,
    stream: *mut *mut xhal_stream_t,
) -> xhal_status_t {
    call("xhal_stream_create_with_priority", || {
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { create_stream(device, stream, |device| device.create_stream_with_priority(priority)) }
    })
}

/// The stream's priority on its device (C API 1.3): 0 unless it was made with one.
///
/// # Safety
///
/// `priority` points to a writable `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_priority(stream: *const xhal_stream_t, priority: *mut i32) -> xhal_status_t {
    call("xhal_stream_priority", || {
        let object = handles::stream(stream as usize, "stream")?;
        // SAFETY: the caller passes writable storage.
        unsafe { write_out(priority, object.stream.priority(), "priority") }
    })
}

/// The device handle's default stream. It belongs to the device handle: it is not destroyed
/// with `xhal_stream_destroy`, and its handle ends with the device's.
///
/// # Safety
///
/// `stream` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_default_stream(
    device: *const xhal_device_t,
    stream: *mut *mut xhal_stream_t,
) -> xhal_status_t {
    call("xhal_device_default_stream", || {
        let object = handles::device(device as usize, "device")?;
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(stream, object.default_stream as *mut xhal_stream_t, "stream") }
    })
}

/// Destroys a stream (null is accepted) after the work queued on it has completed.
#[no_mangle]
pub extern "C" fn xhal_stream_destroy(stream: *mut xhal_stream_t) -> xhal_status_t {
    call("xhal_stream_destroy", || {
        let object = handles::stream(stream as usize, "stream");
        if let Ok(object) = &object {
            if object.is_default {
                return Err(invalid(
                    "this is a device's default stream, which belongs to its device handle; destroy the device instead",
                ));
            }
        }
        if let Some(Object::Stream(object)) = handles::remove(stream as usize, "stream", "stream")? {
            object.stream.destroy()?;
        }
        Ok(())
    })
}

struct Resolved {
    stream: Arc<StreamObject>,
    buffers: smallvec::SmallVec<[Arc<BufferObject>; 8]>,
}

fn resolve(stream: *const xhal_stream_t, buffers: &[(*const xhal_buffer_t, &str)]) -> Result<Resolved> {
    let stream = handles::stream(stream as usize, "stream")?;
    let buffers = handles::buffers(buffers.iter().map(|(b, what)| (*b as usize, *what)), str::to_owned)?;
    Ok(Resolved { stream, buffers })
}

/// Bytes `offset..offset + size` of `buffer`, as a view the stream operations take; a range
/// past the end is an error naming it.
pub(crate) fn byte_range(buffer: &BufferObject, offset: u64, size: u64, what: &str) -> Result<std::ops::Range<usize>> {
    let length = buffer.buffer.size_bytes();
    match offset.checked_add(size) {
        Some(end) if end <= length => Ok(offset as usize..end as usize),
        _ => Err(xhal::Error::out_of_bounds(format!(
            "{what}: bytes {offset} to {offset} + {size} reach past the end of a buffer of {length} bytes"
        ))),
    }
}

/// A host pointer argument for `size` bytes: non-null unless `size` is 0.
fn host_range<'a>(pointer: *const c_void, size: u64, what: &str) -> Result<&'a [u8]> {
    if size == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(invalid(format!("{what} is a null pointer for {size} bytes")));
    }
    let size = usize::try_from(size).map_err(|_| invalid(format!("{what}: {size} bytes do not fit this host")))?;
    // SAFETY: every caller's contract says `pointer` has `size` readable bytes, and it is not
    // null.
    Ok(unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), size) })
}

/// Copies `size` bytes from host memory `source` into `destination` at `offset`, and returns
/// once they are on the device (after the work queued before it, as a pageable copy does in
/// CUDA).
///
/// # Safety
///
/// `source` has `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_write(
    stream: *const xhal_stream_t,
    destination: *const xhal_buffer_t,
    offset: u64,
    source: *const c_void,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_write", || {
        let r = resolve(stream, &[(destination, "destination")])?;
        let range = byte_range(&r.buffers[0], offset, size, "destination")?;
        let data = host_range(source, size, "source")?;
        r.stream.refuse_while_capturing("a write from host memory")?;
        r.stream.stream.write(r.buffers[0].buffer.slice(range), data)
    })
}

/// Queues a copy of `size` bytes from host memory `source` into `destination` at `offset` and
/// returns at once: the bytes are copied out of `source` before this returns, so the program
/// may reuse it immediately.
///
/// # Safety
///
/// `source` has `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_write_async(
    stream: *const xhal_stream_t,
    destination: *const xhal_buffer_t,
    offset: u64,
    source: *const c_void,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_write_async", || {
        let r = resolve(stream, &[(destination, "destination")])?;
        let range = byte_range(&r.buffers[0], offset, size, "destination")?;
        let data = host_range(source, size, "source")?.to_vec();
        r.stream.refuse_while_capturing("a write from host memory")?;
        r.stream.stream.write_owned(r.buffers[0].buffer.slice(range), data)
    })
}

/// Copies `size` bytes of `source` at `offset` into host memory `destination`, and returns
/// once they have arrived (after the work queued before it).
///
/// # Safety
///
/// `destination` has `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_read(
    stream: *const xhal_stream_t,
    source: *const xhal_buffer_t,
    offset: u64,
    destination: *mut c_void,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_read", || {
        let r = resolve(stream, &[(source, "source")])?;
        let range = byte_range(&r.buffers[0], offset, size, "source")?;
        if size == 0 {
            return Ok(());
        }
        if destination.is_null() {
            return Err(invalid(format!("destination is a null pointer for {size} bytes")));
        }
        // SAFETY: the caller gives `size` writable bytes at `destination` (not null, and
        // `size` fits a usize since it fit the buffer's range).
        let out = unsafe { std::slice::from_raw_parts_mut(destination.cast::<u8>(), range.len()) };
        r.stream.refuse_while_capturing("a read to host memory")?;
        r.stream.stream.read(r.buffers[0].buffer.slice(range), out)
    })
}

/// Queues a copy of `size` bytes from `source` at `source_offset` to `destination` at
/// `destination_offset`. The buffers may be the same, and the ranges may overlap.
#[no_mangle]
pub extern "C" fn xhal_stream_copy(
    stream: *const xhal_stream_t,
    source: *const xhal_buffer_t,
    source_offset: u64,
    destination: *const xhal_buffer_t,
    destination_offset: u64,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_copy", || {
        let r = resolve(stream, &[(source, "source"), (destination, "destination")])?;
        let from = byte_range(&r.buffers[0], source_offset, size, "source")?;
        let to = byte_range(&r.buffers[1], destination_offset, size, "destination")?;
        let (source, destination) = (r.buffers[0].buffer.slice(from), r.buffers[1].buffer.slice(to));
        if let Some(recorded) = r.stream.if_capturing(|c| c.builder.copy(c.lane, source, destination)) {
            return recorded;
        }
        r.stream.stream.copy(source, destination)
    })
}

/// Queues a fill of `size` bytes of `destination` at `offset` with the repeated
/// `pattern_size` bytes of `pattern` (1, 2 or 4); `offset` and `size` are multiples of
/// `pattern_size`.
///
/// # Safety
///
/// `pattern` has `pattern_size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_fill(
    stream: *const xhal_stream_t,
    destination: *const xhal_buffer_t,
    offset: u64,
    size: u64,
    pattern: *const c_void,
    pattern_size: usize,
) -> xhal_status_t {
    call("xhal_stream_fill", || {
        let r = resolve(stream, &[(destination, "destination")])?;
        let range = byte_range(&r.buffers[0], offset, size, "destination")?;
        if !matches!(pattern_size, 1 | 2 | 4) {
            return Err(invalid(format!("pattern_size is {pattern_size}; it must be 1, 2 or 4")));
        }
        let bytes = host_range(pattern, pattern_size as u64, "pattern")?;
        let destination = r.buffers[0].buffer.slice(range);
        if let Some(recorded) = r
            .stream
            .if_capturing(|c| c.builder.fill_pattern(c.lane, destination, bytes))
        {
            return recorded;
        }
        r.stream.stream.fill_pattern(destination, bytes)
    })
}

/// Queues a record of `event`: it completes when the work queued before it does.
#[no_mangle]
pub extern "C" fn xhal_stream_record_event(stream: *const xhal_stream_t, event: *const xhal_event_t) -> xhal_status_t {
    call("xhal_stream_record_event", || {
        let event_handle = event as usize;
        let stream = handles::stream(stream as usize, "stream")?;
        let event = handles::event(event_handle, "event")?;
        if let Some(recorded) = stream.if_capturing(|c| c.record(event_handle)) {
            return recorded;
        }
        stream.stream.record(&event.event)
    })
}

/// Makes the work queued on `stream` after this wait for the latest record of `event`, which
/// may be on another stream of the same device.
#[no_mangle]
pub extern "C" fn xhal_stream_wait_event(stream: *const xhal_stream_t, event: *const xhal_event_t) -> xhal_status_t {
    call("xhal_stream_wait_event", || {
        let event_handle = event as usize;
        let stream = handles::stream(stream as usize, "stream")?;
        let event = handles::event(event_handle, "event")?;
        if let Some(recorded) = stream.if_capturing(|c| c.wait(event_handle, &event.event)) {
            return recorded;
        }
        stream.stream.wait(&event.event)
    })
}

/// Blocks until the work queued on `stream` has completed; returns the error of any of it
/// that failed (which then sticks to the stream).
#[no_mangle]
pub extern "C" fn xhal_stream_synchronize(stream: *const xhal_stream_t) -> xhal_status_t {
    call("xhal_stream_synchronize", || {
        let stream = handles::stream(stream as usize, "stream")?;
        stream.refuse_while_capturing("synchronizing the stream")?;
        stream.stream.synchronize()
    })
}

/// Whether the work queued on `stream` has completed: `*complete` is 1 or 0.
///
/// # Safety
///
/// `complete` points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_query(stream: *const xhal_stream_t, complete: *mut i32) -> xhal_status_t {
    call("xhal_stream_query", || {
        let stream = handles::stream(stream as usize, "stream")?;
        stream.refuse_while_capturing("querying the stream")?;
        let done = stream.stream.query()?;
        // SAFETY: the caller passes a writable int.
        unsafe { write_out(complete, i32::from(done), "complete") }
    })
}

/// `xhal_event_create` flags: the event records timestamps, for `xhal_event_elapsed_ms`.
pub const XHAL_EVENT_TIMING: u32 = 1;

/// A new event on `device`; `flags` is 0 or `XHAL_EVENT_TIMING`.
///
/// # Safety
///
/// `event` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_event_create(
    device: *const xhal_device_t,
    flags: u32,
    event: *mut *mut xhal_event_t,
) -> xhal_status_t {
    call("xhal_event_create", || {
        let object = handles::device(device as usize, "device")?;
        let created = match flags {
            0 => object.device.create_event_without_timing()?,
            XHAL_EVENT_TIMING => object.device.create_event()?,
            _ => {
                return Err(invalid(format!(
                    "flags {flags:#x}: the flags are 0 or XHAL_EVENT_TIMING (1)"
                )))
            }
        };
        let handle = handles::insert(Object::Event(Arc::new(EventObject { event: created })));
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(event, handle as *mut xhal_event_t, "event") }
    })
}

/// Destroys an event (null is accepted).
#[no_mangle]
pub extern "C" fn xhal_event_destroy(event: *mut xhal_event_t) -> xhal_status_t {
    call("xhal_event_destroy", || {
        if let Some(Object::Event(object)) = handles::remove(event as usize, "event", "event")? {
            object.event.destroy()?;
        }
        Ok(())
    })
}

/// Whether the latest record of `event` has completed (1), or not (0); an event never
/// recorded counts as complete.
///
/// # Safety
///
/// `complete` points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn xhal_event_query(event: *const xhal_event_t, complete: *mut i32) -> xhal_status_t {
    call("xhal_event_query", || {
        let done = handles::event(event as usize, "event")?.event.query()?;
        // SAFETY: the caller passes a writable int.
        unsafe { write_out(complete, i32::from(done), "complete") }
    })
}

/// Blocks until the latest record of `event` has completed.
#[no_mangle]
pub extern "C" fn xhal_event_synchronize(event: *const xhal_event_t) -> xhal_status_t {
    call("xhal_event_synchronize", || {
        handles::event(event as usize, "event")?.event.synchronize()
    })
}

/// Milliseconds from `start` to `end`, both recorded, completed and made with
/// `XHAL_EVENT_TIMING`.
///
/// # Safety
///
/// `milliseconds` points to a writable `double`.
#[no_mangle]
pub unsafe extern "C" fn xhal_event_elapsed_ms(
    start: *const xhal_event_t,
    end: *const xhal_event_t,
    milliseconds: *mut f64,
) -> xhal_status_t {
    call("xhal_event_elapsed_ms", || {
        let start = handles::event(start as usize, "start")?;
        let end = handles::event(end as usize, "end")?;
        let elapsed = end.event.elapsed_since(&start.event)?;
        // SAFETY: the caller passes a writable double.
        unsafe { write_out(milliseconds, elapsed.as_secs_f64() * 1e3, "milliseconds") }
    })
}
