//! Host memory for transfers that do not wait: page-locked where the device has such memory,
//! ordinary host memory where it does not.

use std::ffi::c_void;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::handles::{self, Object};
use crate::memory::xhal_buffer_t;
use crate::runtime::xhal_device_t;
use crate::stream::{byte_range, xhal_stream_t};
use crate::{call, write_out, xhal_status_t, Result};

/// Host memory for transfers. Opaque; from `xhal_pinned_alloc`.
pub struct xhal_pinned_t {
    _private: [u8; 0],
}

pub(crate) struct PinnedObject {
    /// Locked only to queue a transfer, which takes the buffer mutably when it writes it.
    memory: Mutex<xhal::PinnedBuffer<u8>>,
    pub(crate) address: u64,
    size: u64,
    page_locked: bool,
}

/// Allocates `size` bytes of zeroed host memory for `device`'s transfers, aligned to 64 bytes:
/// page-locked where the device has such memory (transfers then skip a staging copy), and
/// ordinary memory where it does not. `xhal_stream_write_pinned` and
/// `xhal_stream_read_pinned` queue transfers from and to it without waiting.
///
/// # Safety
///
/// `pinned` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_pinned_alloc(
    device: *const xhal_device_t,
    size: u64,
    pinned: *mut *mut xhal_pinned_t,
) -> xhal_status_t {
    call("xhal_pinned_alloc", || {
        let object = handles::device(device as usize, "device")?;
        let length = usize::try_from(size)
            .map_err(|_| xhal::Error::out_of_memory(format!("{size} bytes do not fit this host's address space")))?;
        let memory = object.device.alloc_pinned::<u8>(length)?;
        let address = memory.host_address() as u64;
        let page_locked = memory.is_pinned();
        let handle = handles::insert(Object::Pinned(Arc::new(PinnedObject {
            memory: Mutex::new(memory),
            address,
            size,
            page_locked,
        })));
        if size > 0 {
            handles::register_pinned(address, address + size, handle);
        }
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(pinned, handle as *mut xhal_pinned_t, "pinned") }
    })
}

/// Frees host memory from `xhal_pinned_alloc` (null is accepted). Transfers already queued
/// on it keep it until they complete, so freeing it under a queued transfer is safe; its
/// pointer is not valid after this returns.
#[no_mangle]
pub extern "C" fn xhal_pinned_free(pinned: *mut xhal_pinned_t) -> xhal_status_t {
    call("xhal_pinned_free", || {
        handles::remove(pinned as usize, "pinned memory", "pinned").map(drop)
    })
}

/// The memory's first byte, its size in bytes, and whether it is page-locked (1) or ordinary
/// host memory (0); any output may be null. The program may read and write the bytes, except
/// while a transfer queued on them has not completed (an event recorded after the transfer,
/// or the stream's synchronize, tells when).
///
/// # Safety
///
/// Each non-null output points to writable storage of its type.
#[no_mangle]
pub unsafe extern "C" fn xhal_pinned_info(
    pinned: *const xhal_pinned_t,
    pointer: *mut *mut c_void,
    size: *mut u64,
    page_locked: *mut i32,
) -> xhal_status_t {
    call("xhal_pinned_info", || {
        let object = handles::pinned(pinned as usize, "pinned")?;
        // SAFETY: the caller passes writable storage, or null, for each.
        unsafe {
            if !pointer.is_null() {
                write_out(pointer, object.address as *mut c_void, "pointer")?;
            }
            if !size.is_null() {
                write_out(size, object.size, "size")?;
            }
            if !page_locked.is_null() {
                write_out(page_locked, i32::from(object.page_locked), "page_locked")?;
            }
        }
        Ok(())
    })
}

/// The live pinned memory that holds host address `pointer` (from its first byte to one past
/// its last), and the offset of `pointer` in it; `XHAL_ERROR_NOT_FOUND` for any other address.
/// A program that hands out pointers into pinned memory (PyTorch does) finds its block again
/// with this.
///
/// # Safety
///
/// `pinned` and `offset` point to writable storage.
#[no_mangle]
pub unsafe extern "C" fn xhal_resolve_pinned(
    pointer: *const c_void,
    pinned: *mut *mut xhal_pinned_t,
    offset: *mut u64,
) -> xhal_status_t {
    call("xhal_resolve_pinned", || {
        let address = pointer as u64;
        let (handle, within) = handles::resolve_pinned(address)
            .ok_or_else(|| xhal::Error::not_found(format!("{address:#x} is not in live pinned memory")))?;
        // SAFETY: the caller passes writable storage for both.
        unsafe {
            write_out(pinned, handle as *mut xhal_pinned_t, "pinned")?;
            write_out(offset, within, "offset")
        }
    })
}

/// Bytes `offset..offset + size` of `pinned`, or an error naming the range.
fn pinned_range(object: &PinnedObject, offset: u64, size: u64, what: &str) -> Result<std::ops::Range<usize>> {
    match offset.checked_add(size) {
        Some(end) if end <= object.size => Ok(offset as usize..end as usize),
        _ => Err(xhal::Error::out_of_bounds(format!(
            "{what}: bytes {offset} to {offset} + {size} reach past the end of pinned memory of {} bytes",
            object.size
        ))),
    }
}

/// Queues a copy of `size` bytes of `source` (pinned memory of the stream's device) from
/// `source_offset` into `destination` at `offset`, and returns at once, without copying the
/// bytes first: the program must not change them until the copy completes.
#[no_mangle]
pub extern "C" fn xhal_stream_write_pinned(
    stream: *const xhal_stream_t,
    destination: *const xhal_buffer_t,
    offset: u64,
    source: *const xhal_pinned_t,
    source_offset: u64,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_write_pinned", || {
        let stream = handles::stream(stream as usize, "stream")?;
        let buffer = handles::buffer(destination as usize, "destination")?;
        let pinned = handles::pinned(source as usize, "source")?;
        let range = byte_range(&buffer, offset, size, "destination")?;
        let from = pinned_range(&pinned, source_offset, size, "source")?;
        // A replay could not know that the pinned bytes are the ones to send again.
        stream.refuse_while_capturing("a write from pinned memory")?;
        let memory = pinned.memory.lock();
        stream
            .stream
            .write_from_pinned_range(buffer.buffer.slice(range), &memory, from)
    })
}

/// Queues a copy of `size` bytes of `source` from `offset` into `destination` (pinned memory
/// of the stream's device) at `destination_offset`, and returns at once: the bytes are there
/// once the stream reaches this point (record an event after it, or synchronize the stream).
#[no_mangle]
pub extern "C" fn xhal_stream_read_pinned(
    stream: *const xhal_stream_t,
    source: *const xhal_buffer_t,
    offset: u64,
    destination: *const xhal_pinned_t,
    destination_offset: u64,
    size: u64,
) -> xhal_status_t {
    call("xhal_stream_read_pinned", || {
        let stream = handles::stream(stream as usize, "stream")?;
        let buffer = handles::buffer(source as usize, "source")?;
        let pinned = handles::pinned(destination as usize, "destination")?;
        let range = byte_range(&buffer, offset, size, "source")?;
        let into = pinned_range(&pinned, destination_offset, size, "destination")?;
        stream.refuse_while_capturing("a read to pinned memory")?;
        let mut memory = pinned.memory.lock();
        stream
            .stream
            .read_into_pinned_at(buffer.buffer.slice(range), &mut memory, into.start)
    })
}
