//! Device buffers.

use std::sync::Arc;
use xhal_core::Result;

use crate::device::DeviceShared;

/// Rounds `bytes` up to wgpu's copy granularity, 4 bytes.
pub(crate) fn align_up4(bytes: u64) -> u64 {
    bytes.div_ceil(4) * 4
}

/// Rounds `bytes` down to wgpu's copy granularity, 4 bytes.
pub(crate) fn align_down4(bytes: u64) -> u64 {
    bytes / 4 * 4
}

/// One allocation. Its wgpu buffer is a whole number of 4-byte words, so every byte range
/// of the allocation can be widened to whole words without leaving the buffer.
pub(crate) struct Buffer {
    pub(crate) id: u64,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) size: u64,
    reserved: u64,
}

impl Buffer {
    pub(crate) fn allocate(id: u64, device: &Arc<DeviceShared>, size: u64) -> Result<Buffer> {
        device.check_alive()?;
        let reserved = align_up4(size.max(1));
        device.reserve(reserved)?;
        let created = device.capture("allocating a buffer", || {
            device.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: reserved,
                // Any buffer may be bound as a kernel's uniform as well as its storage.
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::UNIFORM
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        match created {
            Ok(buffer) => Ok(Buffer {
                id,
                device: Arc::clone(device),
                buffer,
                size,
                reserved,
            }),
            Err(error) => {
                device.unreserve(reserved);
                Err(error.context(format!("allocating {size} bytes")))
            }
        }
    }

    /// Checks that `offset..offset + size` lies inside the allocation.
    pub(crate) fn check_range(&self, what: &str, offset: u64, size: u64) -> Result<()> {
        xhal_core::error::check_range(&format!("{what} on buffer {:#x}", self.id), offset, size, self.size)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // The wgpu buffer itself lives on inside wgpu until submitted work stops using it.
        self.device.forget_buffer(self.id);
        self.device.unreserve(self.reserved);
    }
}
