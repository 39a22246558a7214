//! Device allocations (buffers) and the host allocations that stage transfers.

use crate::device::Gpu;
use crate::ffi;
use crate::LevelZeroDriver;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Error, Object, Result};

/// A device allocation (`zeMemAllocDevice`).
pub struct DeviceBuffer {
    gpu: Arc<Gpu>,
    pointer: *mut c_void,
    size: u64,
}

// Device memory is addressed from any thread; it is freed once, on drop, after every stream
// command using it has retired (commands hold the buffer).
// SAFETY: see above.
unsafe impl Send for DeviceBuffer {}
// SAFETY: see above.
unsafe impl Sync for DeviceBuffer {}

/// A `usize` for a size or offset of a buffer that exists in this address space.
pub(crate) fn host_size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what}: {value} does not fit in a size_t")))
}

impl DriverBuffer<LevelZeroDriver> for DeviceBuffer {
    fn allocate(_driver: &LevelZeroDriver, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
        DeviceBuffer::new(device, size)
    }
}

impl DeviceBuffer {
    /// Allocates `size` bytes on `gpu`: a buffer the adapter asked for, or a copy's temporary
    /// buffer (`stream.rs`), which has no device object to allocate through.
    pub(crate) fn new(gpu: &Arc<Gpu>, size: u64) -> Result<DeviceBuffer> {
        let adapter = gpu.adapter();
        let limit = adapter.info.max_allocation_size;
        if size > limit {
            return Err(Error::out_of_memory(format!(
                "{size} bytes requested on {}, whose largest allocation (maxMemAllocSize) is {limit} bytes",
                adapter.info.name
            )));
        }
        let bytes = host_size(size, "buffer size")?;
        let desc = ffi::DeviceMemAllocDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
            p_next: std::ptr::null(),
            flags: 0,
            ordinal: 0,
        };
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a live context and device, a filled descriptor, a place for the pointer.
        let code = unsafe {
            (gpu.api().mem_alloc_device)(
                gpu.context,
                &desc,
                bytes,
                crate::instance::BUFFER_OFFSET_ALIGNMENT as usize,
                adapter.device,
                &mut pointer,
            )
        };
        ffi::check(code, "zeMemAllocDevice", || {
            format!("allocating {size} bytes on {}", adapter.info.name)
        })?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "zeMemAllocDevice returned no memory for {size} bytes on {}",
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

    /// The device address of byte `offset`.
    pub(crate) fn address(&self, offset: u64) -> *mut c_void {
        // The checked adapter checked the offset against the buffer's size, so this stays
        // inside it.
        self.pointer.cast::<u8>().wrapping_add(offset as usize).cast()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.adapter().allocated.fetch_sub(self.size, Ordering::Relaxed);
        // SAFETY: allocated by this context; no queued command uses it any more (see above).
        unsafe { (self.gpu.api().mem_free)(self.gpu.context, self.pointer) };
    }
}

/// A host allocation (`zeMemAllocHost`) that the device reads and writes: the staging of one
/// transfer.
pub(crate) struct HostStaging {
    gpu: Arc<Gpu>,
    pub(crate) pointer: *mut u8,
    pub(crate) size: usize,
}

// As for `DeviceBuffer`.
// SAFETY: see above.
unsafe impl Send for HostStaging {}
// SAFETY: see above.
unsafe impl Sync for HostStaging {}

impl HostStaging {
    pub(crate) fn new(gpu: &Arc<Gpu>, size: usize) -> Result<HostStaging> {
        let desc = ffi::HostMemAllocDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
            p_next: std::ptr::null(),
            flags: 0,
        };
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a live context, a filled descriptor, a place for the pointer.
        let code = unsafe { (gpu.api().mem_alloc_host)(gpu.context, &desc, size.max(1), 64, &mut pointer) };
        ffi::check(code, "zeMemAllocHost", || {
            format!("allocating {size} bytes of host staging memory for {}", gpu.name())
        })?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "zeMemAllocHost returned no memory for {size} bytes for {}",
                gpu.name()
            )));
        }
        Ok(HostStaging {
            gpu: Arc::clone(gpu),
            pointer: pointer.cast(),
            size,
        })
    }
}

impl Drop for HostStaging {
    fn drop(&mut self) {
        // SAFETY: allocated by this context; the command using it has retired.
        unsafe { (self.gpu.api().mem_free)(self.gpu.context, self.pointer.cast()) };
    }
}
