//! Typed device buffers.

use crate::allocator::Block;
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// The memory behind a buffer. Streams hold it while queued work uses it, so dropping a
/// [`Buffer`] never frees memory under a running kernel or copy.
pub(crate) struct BufferMemory {
    pub(crate) device: Arc<DeviceShared>,
    /// `None` for a zero-size buffer, which owns no device memory.
    pub(crate) block: Option<Block>,
    /// Size the user asked for, in bytes; accesses are checked against this, not the block.
    pub(crate) size: u64,
}

impl Drop for BufferMemory {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.device.allocator.release(block);
            if crate::trace::is_active() {
                crate::trace::memory_counter(&self.device);
            }
        }
    }
}

/// A buffer of `len` elements of `T` in device memory. The host reaches its contents only
/// through stream operations.
pub struct Buffer<T> {
    pub(crate) memory: Arc<BufferMemory>,
    len: usize,
    _element: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("device", &self.memory.device.label())
            .field("len", &self.len)
            .field("element", &std::any::type_name::<T>())
            .finish()
    }
}

/// Byte count of `count` elements of `T`, or an error naming `what` when it overflows.
pub(crate) fn bytes_of<T>(count: usize, what: &str) -> Result<u64> {
    (count as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| {
            Error::out_of_bounds(format!(
                "{what}: {count} elements of {} bytes overflow u64",
                std::mem::size_of::<T>()
            ))
        })
}

impl<T: bytemuck::Pod> Buffer<T> {
    pub(crate) fn allocate(device: Arc<DeviceShared>, len: usize) -> Result<Buffer<T>> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::invalid_argument(format!(
                "buffers of zero-sized type {} hold nothing",
                std::any::type_name::<T>()
            )));
        }
        let size = bytes_of::<T>(len, "allocation")?;
        let _span = crate::trace::span("api", "allocate", || {
            vec![("device", device.label().into()), ("bytes", size.into())]
        });
        let max = device.info.max_allocation_size;
        if max > 0 && size > max {
            return Err(Error::out_of_memory(format!(
                "requested {size} bytes on {}, whose largest allocation is {max} bytes",
                device.label()
            )));
        }
        let block = if size == 0 {
            None
        } else {
            Some(device.allocator.allocate(size)?)
        };
        if crate::trace::is_active() {
            crate::trace::memory_counter(&device);
        }
        Ok(Buffer {
            memory: Arc::new(BufferMemory { device, block, size }),
            len,
            _element: PhantomData,
        })
    }
}

impl<T> Buffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.memory.size
    }

    /// `backend:index` of the device the buffer lives on.
    pub fn device_label(&self) -> String {
        self.memory.device.label()
    }

    /// A view of elements `range` (`2..6`, `4..`, `..`) of the buffer: what
    /// [`Stream::write`](crate::Stream::write), [`read`](crate::Stream::read),
    /// [`copy`](crate::Stream::copy), [`fill`](crate::Stream::fill) and
    /// [`Launch::buffer`](crate::Launch::buffer) take. A range outside the buffer is reported,
    /// naming it, by the call that uses the view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> BufferSlice<'_, T> {
        let start = match range.start_bound() {
            Bound::Included(&start) => Some(start),
            Bound::Excluded(&start) => start.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&end) => end.checked_add(1),
            Bound::Excluded(&end) => Some(end),
            Bound::Unbounded => Some(self.len),
        };
        BufferSlice {
            buffer: self,
            start: start.unwrap_or(usize::MAX),
            end: end.unwrap_or(usize::MAX),
        }
    }
}

/// Elements `start..end` of a [`Buffer`]; made by [`Buffer::slice`], or from `&Buffer` for the
/// whole buffer.
pub struct BufferSlice<'a, T> {
    pub(crate) buffer: &'a Buffer<T>,
    start: usize,
    end: usize,
}

impl<T> Clone for BufferSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for BufferSlice<'_, T> {}

impl<T> std::fmt::Debug for BufferSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferSlice")
            .field("buffer", self.buffer)
            .field("elements", &(self.start..self.end))
            .finish()
    }
}

impl<'a, T> From<&'a Buffer<T>> for BufferSlice<'a, T> {
    fn from(buffer: &'a Buffer<T>) -> BufferSlice<'a, T> {
        BufferSlice {
            buffer,
            start: 0,
            end: buffer.len,
        }
    }
}

impl<'a, T> BufferSlice<'a, T> {
    /// The buffer viewed.
    pub fn buffer(&self) -> &'a Buffer<T> {
        self.buffer
    }

    /// The elements viewed, as a range of the buffer's.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }

    /// Number of elements viewed (0 for a reversed range, which every use refuses).
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// True when the view holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Byte offset and size of the view, checked against the buffer; `what` names the use.
    pub(crate) fn byte_span(&self, what: &str) -> Result<(u64, u64)> {
        if self.start > self.end {
            return Err(Error::out_of_bounds(format!(
                "{what}: element range {}..{} is reversed",
                self.start, self.end
            )));
        }
        if self.end > self.buffer.len {
            return Err(Error::out_of_bounds(format!(
                "{what}: elements {}..{} reach past the end of a buffer of {} elements",
                self.start, self.end, self.buffer.len
            )));
        }
        let offset = bytes_of::<T>(self.start, what)?;
        let size = bytes_of::<T>(self.len(), what)?;
        crate::error::check_range(what, offset, size, self.buffer.memory.size)?;
        Ok((offset, size))
    }

    /// The first `count` elements of the view, or an error when it holds fewer: the place a
    /// transfer of `count` elements lands in.
    pub(crate) fn prefix(&self, count: usize, what: &str) -> Result<BufferSlice<'a, T>> {
        self.byte_span(what)?;
        if count > self.len() {
            return Err(Error::out_of_bounds(format!(
                "{what}: {count} elements do not fit a view of {} elements (elements {}..{} of the buffer)",
                self.len(),
                self.start,
                self.end
            )));
        }
        Ok(BufferSlice {
            buffer: self.buffer,
            start: self.start,
            end: self.start + count,
        })
    }
}
