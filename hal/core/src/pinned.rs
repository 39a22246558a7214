//! Host memory for transfers: page-locked ("pinned") where the device has it (ABI 1.4
//! `host_memory_allocate`), ordinary memory where it does not. Transfers to and from it are
//! queued without the host waiting ([`Stream::write_from_pinned`](crate::Stream::write_from_pinned),
//! [`Stream::read_into_pinned`](crate::Stream::read_into_pinned)), because the stream holds
//! the memory until they complete; on a device with pinned memory they also skip the staging
//! copy a transfer from ordinary memory needs.
//!
//! The host's access is checked against the transfers in flight: a transfer that writes the
//! memory (a read from the device) takes it mutably for the call and counts itself until it is
//! known complete, and [`PinnedBuffer::as_slice`] and [`PinnedBuffer::as_mut_slice`] are
//! refused while such a transfer is counted; `as_mut_slice` also while a transfer that reads it
//! (a write to the device) is.

use crate::device::DeviceShared;
use crate::error::{Error, ErrorKind, Result};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Alignment of host memory, pinned or not: what the ABI promises, and a cache line.
const ALIGNMENT: usize = 64;

pub(crate) struct PinnedMemory {
    device: Arc<DeviceShared>,
    pointer: NonNull<u8>,
    size: usize,
    /// The device allocated it; otherwise it came from the global allocator.
    pinned: bool,
    /// Queued transfers that read the memory (writes to the device), not yet known complete.
    readers: AtomicU32,
    /// Queued transfers that write the memory (reads from the device), not yet known complete.
    writers: AtomicU32,
}

// SAFETY: the memory is plain host memory owned by this value; every access to it is through
// `PinnedBuffer`, whose borrows and counters keep the host and queued transfers apart.
unsafe impl Send for PinnedMemory {}
// SAFETY: as above.
unsafe impl Sync for PinnedMemory {}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        if self.size == 0 {
            return;
        }
        if self.pinned {
            self.device
                .backend
                .host_memory_free(self.device.handle, self.pointer.as_ptr());
        } else if let Ok(layout) = std::alloc::Layout::from_size_align(self.size, ALIGNMENT) {
            // SAFETY: allocated in `allocate` with this layout, and no transfer holds it (queued
            // ones hold this value).
            unsafe { std::alloc::dealloc(self.pointer.as_ptr(), layout) };
        }
    }
}

impl PinnedMemory {
    fn allocate(device: Arc<DeviceShared>, size: usize) -> Result<PinnedMemory> {
        // No host can hold more than isize::MAX bytes in one piece (nor can a slice cover
        // them); asking a driver would only find out how well it checks.
        if size > isize::MAX as usize {
            return Err(Error::out_of_memory(format!(
                "{size} bytes of host memory do not fit this host"
            )));
        }
        let (pointer, pinned) = if size == 0 {
            (NonNull::<u8>::dangling().as_ptr(), false)
        } else {
            match device.backend.host_memory_allocate(device.handle, size as u64) {
                Ok(pointer) => (pointer, true),
                Err(error) if error.kind() == ErrorKind::Unsupported => {
                    tracing::debug!(%error, device = %device.label(), "pinned memory is ordinary host memory");
                    let layout = std::alloc::Layout::from_size_align(size, ALIGNMENT).map_err(|_| {
                        Error::out_of_memory(format!("{size} bytes of host memory do not fit this host"))
                    })?;
                    // Zeroed by the allocator, which for a large size maps zero pages lazily
                    // rather than touching every byte.
                    // SAFETY: a layout of non-zero size.
                    let pointer = unsafe { std::alloc::alloc_zeroed(layout) };
                    if pointer.is_null() {
                        return Err(Error::out_of_memory(format!(
                            "the host could not provide {size} bytes for transfers"
                        )));
                    }
                    (pointer, false)
                }
                Err(error) => return Err(error),
            }
        };
        let pointer = NonNull::new(pointer).ok_or_else(|| Error::internal("host memory at a null address"))?;
        if pinned {
            // Every element is a valid value of any `Pod` type from the start.
            // SAFETY: `size` writable bytes at `pointer`, used by nothing else yet.
            unsafe { std::ptr::write_bytes(pointer.as_ptr(), 0, size) };
        }
        Ok(PinnedMemory {
            device,
            pointer,
            size,
            pinned,
            readers: AtomicU32::new(0),
            writers: AtomicU32::new(0),
        })
    }
}

/// A queued transfer's use of pinned memory, counted until the stream knows it completed.
pub(crate) struct PinnedUse {
    memory: Arc<PinnedMemory>,
    writes: bool,
}

impl Drop for PinnedUse {
    fn drop(&mut self) {
        let counter = if self.writes {
            &self.memory.writers
        } else {
            &self.memory.readers
        };
        counter.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `len` elements of `T` in host memory for transfers (see the module documentation). Made by
/// [`Device::alloc_pinned`](crate::Device::alloc_pinned); starts zeroed.
pub struct PinnedBuffer<T> {
    pub(crate) memory: Arc<PinnedMemory>,
    len: usize,
    _element: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("device", &self.memory.device.label())
            .field("len", &self.len)
            .field("pinned", &self.memory.pinned)
            .finish()
    }
}

impl<T: bytemuck::Pod> PinnedBuffer<T> {
    pub(crate) fn allocate(device: Arc<DeviceShared>, len: usize) -> Result<PinnedBuffer<T>> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::invalid_argument(format!(
                "pinned buffers of zero-sized type {} hold nothing",
                std::any::type_name::<T>()
            )));
        }
        if std::mem::align_of::<T>() > ALIGNMENT {
            return Err(Error::invalid_argument(format!(
                "{} needs {}-byte alignment; pinned memory is aligned to {ALIGNMENT}",
                std::any::type_name::<T>(),
                std::mem::align_of::<T>()
            )));
        }
        let size = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::out_of_bounds(format!(
                "{len} elements of {} bytes overflow this host's address space",
                std::mem::size_of::<T>()
            ))
        })?;
        Ok(PinnedBuffer {
            memory: Arc::new(PinnedMemory::allocate(device, size)?),
            len,
            _element: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the device allocated the memory (page-locked: transfers skip staging); false
    /// when it is ordinary host memory because the device has none of its own.
    pub fn is_pinned(&self) -> bool {
        self.memory.pinned
    }

    /// The elements, to read: refused while a read from the device into them is queued and not
    /// yet known complete (synchronize its stream first).
    pub fn as_slice(&self) -> Result<&[T]> {
        let writers = self.memory.writers.load(Ordering::SeqCst);
        if writers > 0 {
            return Err(Error::invalid_argument(format!(
                "{writers} queued read(s) from the device still write this pinned buffer; synchronize their stream \
                 before reading it"
            )));
        }
        if self.len == 0 {
            return Ok(&[]);
        }
        // SAFETY: `len` initialised elements, aligned (64 ≥ align_of::<T>, checked); no transfer
        // writes them: none is counted, and a new one needs `&mut self`, which this borrow
        // excludes.
        Ok(unsafe { std::slice::from_raw_parts(self.memory.pointer.as_ptr().cast::<T>(), self.len) })
    }

    /// The elements, to read and write: refused while any transfer to or from them is queued
    /// and not yet known complete (synchronize its stream first).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        let (readers, writers) = (
            self.memory.readers.load(Ordering::SeqCst),
            self.memory.writers.load(Ordering::SeqCst),
        );
        if readers + writers > 0 {
            return Err(Error::invalid_argument(format!(
                "{} queued transfer(s) still use this pinned buffer; synchronize their stream before changing it",
                readers + writers
            )));
        }
        if self.len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in `as_slice`, and no transfer reads them either: a new one needs a borrow
        // of `self`, which this mutable borrow excludes.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.memory.pointer.as_ptr().cast::<T>(), self.len) })
    }

    /// The address of the first element, for a foreign-function layer (the C API) that hands
    /// the memory to a caller who keeps the rules itself: not to touch the elements while a
    /// transfer queued on them is not known complete. Rust code uses `as_slice` instead.
    pub fn host_address(&self) -> *mut T {
        self.memory.pointer.as_ptr().cast::<T>()
    }

    /// The device the memory was made for.
    pub(crate) fn device(&self) -> &DeviceShared {
        &self.memory.device
    }

    /// Counts a queued transfer's use of elements `range`, and returns their address with the
    /// use to hold until it completes.
    pub(crate) fn queue_use(&self, range: std::ops::Range<usize>, writes: bool) -> Result<(*mut u8, PinnedUse)> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::out_of_bounds(format!(
                "elements {}..{} of a pinned buffer of {} elements",
                range.start, range.end, self.len
            )));
        }
        let counter = if writes {
            &self.memory.writers
        } else {
            &self.memory.readers
        };
        counter.fetch_add(1, Ordering::SeqCst);
        let held = PinnedUse {
            memory: Arc::clone(&self.memory),
            writes,
        };
        let element = std::mem::size_of::<T>();
        // SAFETY: `range.start` elements lie inside the allocation (checked above).
        let address = unsafe { self.memory.pointer.as_ptr().add(range.start * element) };
        Ok((address, held))
    }
}
