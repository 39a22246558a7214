//! Typed device buffers.

use crate::allocator::Block;
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use std::marker::PhantomData;
use std::ops::Range;
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

    /// Byte range of the elements `range`, checked against the buffer.
    pub(crate) fn byte_range(&self, range: Range<usize>, what: &str) -> Result<(u64, u64)> {
        if range.start > range.end {
            return Err(Error::out_of_bounds(format!(
                "{what}: element range {}..{} is reversed",
                range.start, range.end
            )));
        }
        let offset = bytes_of::<T>(range.start, what)?;
        let size = bytes_of::<T>(range.end - range.start, what)?;
        crate::error::check_range(what, offset, size, self.memory.size)?;
        Ok((offset, size))
    }

    /// Byte offset and size of `count` elements starting at element `offset`.
    pub(crate) fn element_span(&self, offset: usize, count: usize, what: &str) -> Result<(u64, u64)> {
        let byte_offset = bytes_of::<T>(offset, what)?;
        let byte_size = bytes_of::<T>(count, what)?;
        crate::error::check_range(what, byte_offset, byte_size, self.memory.size)?;
        Ok((byte_offset, byte_size))
    }
}
