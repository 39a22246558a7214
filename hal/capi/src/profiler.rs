//! Device activity for profilers: every copy, fill and kernel the devices ran while collection
//! was on, with device times on the host's clock and the correlation id the enqueuing thread
//! had set, so that a framework's profiler can link each to the operation that queued it. The
//! PyTorch device's torch.profiler support is built on these.

use std::ffi::c_char;

use crate::{call, invalid, write_out, xhal_status_t};

/// One operation a device ran while activities were collected.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_activity_t {
    /// `sizeof(xhal_activity_t)`, set by the caller in each element it passes.
    pub struct_size: usize,
    /// The kernel's entry point, or the operation (`copy`, `fill`, `write`, ...), NUL-terminated
    /// (cut to 95 bytes).
    pub name: [c_char; 96],
    /// `kernel`, `copy`, `fill`, `write`, `read` or another of the trace's categories.
    pub category: [c_char; 16],
    /// The device's label (`vulkan:0`).
    pub device: [c_char; 32],
    /// The stream's number in the trace (the same for every operation of one stream).
    pub stream: u64,
    /// When the device started and finished it, in nanoseconds since the Unix epoch.
    pub start_ns: i64,
    /// See `start_ns`.
    pub end_ns: i64,
    /// What the enqueuing thread last passed to `xhal_profiler_set_correlation` (0: nothing).
    pub correlation: u64,
}

/// The size of `xhal_activity_t` in version 1.2.
const ACTIVITY_V1_2: usize = std::mem::size_of::<xhal_activity_t>();

fn copy_text<const N: usize>(text: &str, out: &mut [c_char; N]) {
    let bytes = text.as_bytes();
    let mut count = bytes.len().min(N - 1);
    // Never cut a UTF-8 character in two.
    while count > 0 && count < bytes.len() && (bytes[count] & 0xC0) == 0x80 {
        count -= 1;
    }
    for (slot, &byte) in out.iter_mut().zip(&bytes[..count]) {
        *slot = byte as c_char;
    }
    out[count] = 0;
}

/// Starts collecting device activities, in this process, until `xhal_profiler_stop`. One
/// collection at a time. Each operation's device times are read when its stream is next known
/// idle (synchronize a device's streams before taking them).
#[no_mangle]
pub extern "C" fn xhal_profiler_start() -> xhal_status_t {
    call("xhal_profiler_start", xhal::trace::start_collecting)
}

/// Stops collecting; what was collected stays for `xhal_profiler_take`. `dropped`, when not
/// null, receives how many activities were left out for want of room (more than a million
/// between two takes).
///
/// # Safety
///
/// `dropped` is null or points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_profiler_stop(dropped: *mut u64) -> xhal_status_t {
    call("xhal_profiler_stop", || {
        let count = xhal::trace::stop_collecting()?;
        if dropped.is_null() {
            return Ok(());
        }
        // SAFETY: the caller passes a writable u64 (checked not null).
        unsafe { write_out(dropped, count, "dropped") }
    })
}

/// Tags the operations the calling thread enqueues from now on with `correlation` (0: none),
/// which their activities carry.
#[no_mangle]
pub extern "C" fn xhal_profiler_set_correlation(correlation: u64) -> xhal_status_t {
    call("xhal_profiler_set_correlation", || {
        xhal::trace::set_correlation(correlation);
        Ok(())
    })
}

/// Moves up to `capacity` of the activities collected so far (oldest first) into `activities`
/// and sets `*count` to how many; call again until it is 0. Each element's `struct_size` must
/// be set.
///
/// # Safety
///
/// `activities` has `capacity` writable elements (it may be null when `capacity` is 0), and
/// `count` points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_profiler_take(
    activities: *mut xhal_activity_t,
    capacity: usize,
    count: *mut usize,
) -> xhal_status_t {
    call("xhal_profiler_take", || {
        if count.is_null() {
            return Err(invalid("count is a null pointer"));
        }
        if activities.is_null() && capacity > 0 {
            return Err(invalid(format!("activities is a null pointer for {capacity} elements")));
        }
        for i in 0..capacity {
            // SAFETY: the caller gives `capacity` elements; each must say its size.
            let size = unsafe { std::ptr::addr_of!((*activities.add(i)).struct_size).read() };
            if size < ACTIVITY_V1_2 {
                return Err(invalid(format!(
                    "activities[{i}].struct_size is {size}; set it to sizeof(xhal_activity_t) ({ACTIVITY_V1_2})"
                )));
            }
        }
        let taken = xhal::trace::take_activities(capacity);
        for (i, activity) in taken.iter().enumerate() {
            let mut out = xhal_activity_t {
                struct_size: ACTIVITY_V1_2,
                name: [0; 96],
                category: [0; 16],
                device: [0; 32],
                stream: activity.stream,
                start_ns: activity.start_unix_ns,
                end_ns: activity.end_unix_ns,
                correlation: activity.correlation,
            };
            copy_text(&activity.name, &mut out.name);
            copy_text(activity.category, &mut out.category);
            copy_text(&activity.device, &mut out.device);
            // SAFETY: i < taken.len() <= capacity elements the caller gave.
            unsafe { activities.add(i).write(out) };
        }
        // SAFETY: the caller passes a writable size_t (checked not null).
        unsafe { write_out(count, taken.len(), "count") }
    })
}
