//! Buffers from the caching allocator, their addresses, and the allocator's statistics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::handles::{self, Object};
use crate::runtime::xhal_device_t;
use crate::stream::xhal_stream_t;
use crate::{call, fill_sized, write_out, xhal_status_t};

/// Device memory. Opaque; from `xhal_buffer_alloc`.
pub struct xhal_buffer_t {
    _private: [u8; 0],
}

pub(crate) struct BufferObject {
    pub(crate) buffer: xhal::Buffer<u8>,
    pub(crate) address: u64,
}

/// Where the next buffer's addresses start. Addresses are never reused, so an address from a
/// freed buffer resolves to nothing rather than to a newer buffer.
static NEXT_ADDRESS: AtomicU64 = AtomicU64::new(FIRST_ADDRESS);
/// High enough that no address is mistaken for a small integer, and page aligned.
const FIRST_ADDRESS: u64 = 1 << 44;
/// Buffers' address ranges start this aligned, with at least this much unused between them,
/// so one-past-the-end of one buffer is never the start of the next.
const ADDRESS_ALIGNMENT: u64 = 1 << 12;

/// Allocates `size` bytes of device memory from the device's caching allocator: freed blocks
/// are reused without returning to the driver. A size of 0 gives a buffer of no bytes. The
/// contents are undefined until written.
///
/// # Safety
///
/// `buffer` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_buffer_alloc(
    device: *const xhal_device_t,
    size: u64,
    buffer: *mut *mut xhal_buffer_t,
) -> xhal_status_t {
    call("xhal_buffer_alloc", || {
        refuse_null_out(buffer)?;
        let object = handles::device(device as usize, "device")?;
        let allocated = object.device.alloc::<u8>(byte_length(size)?)?;
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { publish(allocated, size, buffer) }
    })
}

/// Allocates `size` bytes for work on `stream`, as `xhal_buffer_alloc` does, except that the
/// memory may be a block freed while work queued on this same stream still used it: the
/// stream's later work runs after that work, so the block is reused at once instead of after
/// the work completes (PyTorch's stream-ordered allocation). Work on another stream that uses
/// the buffer must first wait for this stream (`xhal_stream_record_event` here,
/// `xhal_stream_wait_event` there), and so must a graph replayed on another stream that uses
/// it; the host cannot map it until this stream is idle.
/// While the stream captures a graph, this is `xhal_buffer_alloc` on its device.
///
/// # Safety
///
/// `buffer` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_buffer_alloc(
    stream: *const xhal_stream_t,
    size: u64,
    buffer: *mut *mut xhal_buffer_t,
) -> xhal_status_t {
    call("xhal_stream_buffer_alloc", || {
        refuse_null_out(buffer)?;
        let object = handles::stream(stream as usize, "stream")?;
        let length = byte_length(size)?;
        // A capture's work runs at its replays, on whatever stream replays it: memory only this
        // stream's order makes safe could be reused under it. The capture state stays locked
        // until the buffer exists, so that a capture cannot begin in between.
        let capture = object.capture.lock();
        let allocated = if capture.is_some() {
            object.device.alloc::<u8>(length)?
        } else {
            object.stream.alloc::<u8>(length)?
        };
        drop(capture);
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { publish(allocated, size, buffer) }
    })
}

/// An error before anything is allocated when there is nowhere to put the buffer's handle.
fn refuse_null_out(buffer: *mut *mut xhal_buffer_t) -> xhal::Result<()> {
    if buffer.is_null() {
        return Err(xhal::Error::invalid_argument(
            "buffer is a null pointer; pass where to write the result",
        ));
    }
    Ok(())
}

fn byte_length(size: u64) -> xhal::Result<usize> {
    usize::try_from(size)
        .map_err(|_| xhal::Error::out_of_memory(format!("{size} bytes do not fit this host's address space")))
}

/// Gives `allocated` a handle and an address range, and writes the handle to `buffer`.
///
/// # Safety
///
/// `buffer` points to writable storage for a handle.
unsafe fn publish(allocated: xhal::Buffer<u8>, size: u64, buffer: *mut *mut xhal_buffer_t) -> xhal::Result<()> {
    let span = size
        .div_ceil(ADDRESS_ALIGNMENT)
        .saturating_add(1)
        .saturating_mul(ADDRESS_ALIGNMENT);
    let address = NEXT_ADDRESS.fetch_add(span, Ordering::Relaxed);
    let handle = handles::insert(Object::Buffer(Arc::new(BufferObject {
        buffer: allocated,
        address,
    })));
    handles::register_address(address, address + size, handle);
    // SAFETY: the caller passes writable storage for a handle.
    unsafe { write_out(buffer, handle as *mut xhal_buffer_t, "buffer") }
}

/// Frees a buffer (null is accepted). Freeing a buffer a kernel is still using is safe: its
/// memory returns to the device's cache once the work already queued on it has completed, or,
/// where that work is all on one stream, at once to that stream's `xhal_stream_buffer_alloc`,
/// whose later work runs after it.
#[no_mangle]
pub extern "C" fn xhal_buffer_free(buffer: *mut xhal_buffer_t) -> xhal_status_t {
    call("xhal_buffer_free", || {
        handles::remove(buffer as usize, "buffer", "buffer").map(drop)
    })
}

/// The buffer's size in bytes.
///
/// # Safety
///
/// `size` points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_buffer_size(buffer: *const xhal_buffer_t, size: *mut u64) -> xhal_status_t {
    call("xhal_buffer_size", || {
        let object = handles::buffer(buffer as usize, "buffer")?;
        // SAFETY: the caller passes a writable u64.
        unsafe { write_out(size, object.buffer.size_bytes(), "size") }
    })
}

/// The buffer's address: a number unique to this buffer for the life of the process, with
/// the buffer's bytes at `address` to `address + size`, for programs that keep pointers and
/// do arithmetic on them (as PyTorch does with a tensor's `data_ptr`).
/// `xhal_resolve_address` turns any address within it back into the buffer and an offset.
/// It is not a host pointer: the host reads device memory only through a stream.
///
/// # Safety
///
/// `address` points to a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_buffer_address(buffer: *const xhal_buffer_t, address: *mut u64) -> xhal_status_t {
    call("xhal_buffer_address", || {
        let object = handles::buffer(buffer as usize, "buffer")?;
        // SAFETY: the caller passes a writable u64.
        unsafe { write_out(address, object.address, "address") }
    })
}

/// The live buffer whose addresses hold `address` (from its start to one past its end), and
/// the offset of `address` in it; `XHAL_ERROR_NOT_FOUND` when no live buffer holds it.
///
/// # Safety
///
/// `buffer` and `offset` point to writable storage.
#[no_mangle]
pub unsafe extern "C" fn xhal_resolve_address(
    address: u64,
    buffer: *mut *mut xhal_buffer_t,
    offset: *mut u64,
) -> xhal_status_t {
    call("xhal_resolve_address", || {
        let (handle, within) = handles::resolve_address(address)
            .ok_or_else(|| xhal::Error::not_found(format!("address {address:#x} is not in a live buffer")))?;
        // SAFETY: the caller passes writable storage for both.
        unsafe {
            write_out(buffer, handle as *mut xhal_buffer_t, "buffer")?;
            write_out(offset, within, "offset")
        }
    })
}

/// The caching allocator's statistics, in the words PyTorch uses for its own.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_memory_stats_t {
    /// `sizeof(xhal_memory_stats_t)`, set by the caller.
    pub struct_size: usize,
    /// Bytes in blocks handed out to live buffers (rounded sizes).
    pub allocated: u64,
    /// Bytes held from the driver: allocated plus cached.
    pub reserved: u64,
    /// Highest `allocated` since the device opened or the last reset.
    pub peak_allocated: u64,
    /// Highest `reserved` since the device opened or the last reset.
    pub peak_reserved: u64,
    /// Live blocks handed out.
    pub active_blocks: u64,
    /// Blocks waiting in the cache.
    pub cached_blocks: u64,
    /// Allocations served from the cache.
    pub cache_hits: u64,
    /// Allocations that went to the driver.
    pub backend_allocations: u64,
}

const MEMORY_STATS_V1_0: usize = std::mem::offset_of!(xhal_memory_stats_t, backend_allocations) + 8;

/// The device's allocator statistics.
///
/// # Safety
///
/// `stats` points to a writable `xhal_memory_stats_t` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn xhal_device_memory_stats(
    device: *const xhal_device_t,
    stats: *mut xhal_memory_stats_t,
) -> xhal_status_t {
    call("xhal_device_memory_stats", || {
        let object = handles::device(device as usize, "device")?;
        let s = object.device.memory_stats();
        let value = xhal_memory_stats_t {
            struct_size: std::mem::size_of::<xhal_memory_stats_t>(),
            allocated: s.allocated,
            reserved: s.reserved,
            peak_allocated: s.peak_allocated,
            peak_reserved: s.peak_reserved,
            active_blocks: s.active_blocks,
            cached_blocks: s.cached_blocks,
            cache_hits: s.cache_hits,
            backend_allocations: s.backend_allocations,
        };
        // SAFETY: the caller passes a writable struct of its struct_size.
        unsafe { fill_sized(stats, value, MEMORY_STATS_V1_0, "stats") }
    })
}

/// Returns the device's cached blocks to the driver.
#[no_mangle]
pub extern "C" fn xhal_device_empty_cache(device: *const xhal_device_t) -> xhal_status_t {
    call("xhal_device_empty_cache", || {
        handles::device(device as usize, "device")?.device.empty_cache();
        Ok(())
    })
}

/// Starts the peaks of `xhal_memory_stats_t` again from the current values.
#[no_mangle]
pub extern "C" fn xhal_device_reset_peak_memory_stats(device: *const xhal_device_t) -> xhal_status_t {
    call("xhal_device_reset_peak_memory_stats", || {
        handles::device(device as usize, "device")?
            .device
            .reset_peak_memory_stats();
        Ok(())
    })
}
