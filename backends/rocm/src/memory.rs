//! Buffers: device allocations with `hipMalloc` and `hipFree`.

use crate::device::Gpu;
use crate::ffi::{self, DevicePointer};
use crate::RocmDriver;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Error, Object, Result};

/// A device allocation.
pub struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) pointer: DevicePointer,
    pub(crate) size: u64,
}

// A device pointer is an address, usable from any thread; this backend frees it once.
// SAFETY: see above.
unsafe impl Send for DeviceBuffer {}
// SAFETY: see above.
unsafe impl Sync for DeviceBuffer {}

impl DriverBuffer<RocmDriver> for DeviceBuffer {
    fn allocate(_driver: &RocmDriver, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
        DeviceBuffer::new(device, size)
    }
}

impl DeviceBuffer {
    /// `size` bytes with `hipMalloc`. A stream's overlapping copy allocates its temporary here
    /// too, from a plain opened device, so the allocation lives outside the role trait.
    pub(crate) fn new(gpu: &Arc<Gpu>, size: u64) -> Result<DeviceBuffer> {
        let adapter = gpu.adapter();
        let limit = adapter.info.max_allocation_size;
        if size > limit {
            return Err(Error::out_of_memory(format!(
                "{size} bytes requested on {}, which has {limit} bytes of memory",
                adapter.info.name
            )));
        }
        let bytes = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes do not fit in this host's address space")))?;
        gpu.bind()?;
        let mut pointer: DevicePointer = std::ptr::null_mut();
        // SAFETY: writes one device pointer.
        let code = unsafe { (gpu.api().malloc)(&mut pointer, bytes) };
        gpu.api().check(code, "hipMalloc", || {
            format!("allocating {size} bytes on {}", adapter.info.name)
        })?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "allocating {size} bytes on {}: hipMalloc succeeded but returned no memory",
                adapter.info.name
            )));
        }
        adapter.allocated.fetch_add(size, Ordering::Relaxed);
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            pointer,
            size,
        })
    }

    /// The device address of byte `offset` (checked against the size by the caller).
    pub(crate) fn at(&self, offset: u64) -> DevicePointer {
        self.pointer.wrapping_byte_add(offset as usize)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.adapter().allocated.fetch_sub(self.size, Ordering::Relaxed);
        if self.gpu.bind().is_err() {
            return;
        }
        // SAFETY: this backend's one allocation. hipFree synchronises the device first (AMD's
        // documentation of hipFree), so no queued work still uses the memory.
        let code = unsafe { (self.gpu.api().free)(self.pointer) };
        if code != ffi::HIP_SUCCESS {
            tracing::warn!(
                error = %self.gpu.api().error("freeing a buffer", "hipFree", code),
                "a device allocation could not be freed"
            );
        }
    }
}
