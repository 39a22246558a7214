//! Device buffers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Object, Result};

use crate::device::DeviceShared;
use crate::WgpuDriver;

/// Rounds `bytes` up to wgpu's copy granularity, 4 bytes.
pub(crate) fn align_up4(bytes: u64) -> u64 {
    bytes.div_ceil(4) * 4
}

/// Rounds `bytes` down to wgpu's copy granularity, 4 bytes.
pub(crate) fn align_down4(bytes: u64) -> u64 {
    bytes / 4 * 4
}

/// Names buffers for the device's bind group cache; never reused, unlike addresses.
static NEXT_BUFFER_SERIAL: AtomicU64 = AtomicU64::new(1);

/// One allocation. Its wgpu buffer is a whole number of 4-byte words, so every byte range
/// of the allocation can be widened to whole words without leaving the buffer.
pub struct Buffer {
    pub(crate) serial: u64,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) buffer: wgpu::Buffer,
    reserved: u64,
}

impl DriverBuffer<WgpuDriver> for Buffer {
    fn allocate(_driver: &WgpuDriver, device: &Arc<Object<Arc<DeviceShared>>>, size: u64) -> Result<Buffer> {
        let device: &Arc<DeviceShared> = device;
        device.check_alive()?;
        let reserved = align_up4(size);
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
                serial: NEXT_BUFFER_SERIAL.fetch_add(1, Ordering::Relaxed),
                device: Arc::clone(device),
                buffer,
                reserved,
            }),
            Err(error) => {
                device.unreserve(reserved);
                Err(error.context(format!("allocating {size} bytes")))
            }
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // The wgpu buffer itself lives on inside wgpu until submitted work stops using it.
        self.device.forget_buffer(self.serial);
        self.device.unreserve(self.reserved);
    }
}
