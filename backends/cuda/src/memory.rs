//! Buffers: device allocations, from the device's stream-ordered pool or `cuMemAlloc`.

use crate::device::Gpu;
use crate::ffi::{self, call, sys, CUdeviceptr};
use crate::CudaDriver;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Error, Object, Result};

/// A device allocation.
pub struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) pointer: CUdeviceptr,
    pub(crate) size: u64,
    /// From the stream-ordered pool (freed with `cuMemFreeAsync`).
    pooled: bool,
}

impl DriverBuffer<CudaDriver> for DeviceBuffer {
    fn allocate(_driver: &CudaDriver, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
        DeviceBuffer::new(device, size)
    }
}

impl DeviceBuffer {
    /// `size` bytes: from the device's stream-ordered pool where it has one, else `cuMemAlloc`.
    /// A stream's overlapping copy allocates its temporary here too, from a plain opened
    /// device, so the allocation lives outside the role trait.
    pub(crate) fn new(gpu: &Arc<Gpu>, size: u64) -> Result<DeviceBuffer> {
        let adapter = gpu.adapter();
        let bytes = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes do not fit in this host's address space")))?;
        if size > adapter.info.max_allocation_size {
            return Err(Error::out_of_memory(format!(
                "{size} bytes requested on {}, which has {} bytes of memory",
                adapter.info.name, adapter.info.total_memory
            )));
        }
        gpu.bind()?;
        let mut pointer: CUdeviceptr = 0;
        let doing = || format!("allocating {size} bytes on {}", gpu.name());
        let pooled = match gpu.allocation_stream {
            Some(stream) => {
                // SAFETY: writes one device pointer; ordered on the allocation stream.
                call("cuMemAllocAsync", doing, || unsafe {
                    sys::cuMemAllocAsync(&mut pointer, bytes, stream)
                })?;
                // Other streams may use the memory at once: wait for the allocation here.
                // SAFETY: the device's own stream.
                let synchronized = call("cuStreamSynchronize", doing, || unsafe {
                    sys::cuStreamSynchronize(stream)
                });
                if let Err(error) = synchronized {
                    // SAFETY: returns the allocation made above.
                    unsafe { sys::cuMemFreeAsync(pointer, stream) };
                    return Err(error);
                }
                true
            }
            None => {
                // SAFETY: writes one device pointer.
                call("cuMemAlloc_v2", doing, || unsafe {
                    sys::cuMemAlloc_v2(&mut pointer, bytes)
                })?;
                false
            }
        };
        adapter.allocated.fetch_add(size, Ordering::Relaxed);
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            pointer,
            size,
            pooled,
        })
    }

    /// The device address of byte `offset`.
    pub(crate) fn address(&self, offset: u64) -> CUdeviceptr {
        self.pointer + offset
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.adapter().allocated.fetch_sub(self.size, Ordering::Relaxed);
        if self.gpu.bind().is_err() {
            return;
        }
        let pointer = self.pointer;
        let freed = match (self.pooled, self.gpu.allocation_stream) {
            // SAFETY: pool memory no queued work uses (the Backend contract), freed once.
            (true, Some(stream)) => call("cuMemFreeAsync", ffi::quiet, || unsafe {
                sys::cuMemFreeAsync(pointer, stream)
            }),
            // SAFETY: as above, from cuMemAlloc.
            _ => call("cuMemFree_v2", ffi::quiet, || unsafe { sys::cuMemFree_v2(pointer) }),
        };
        if let Err(error) = freed {
            tracing::warn!(%error, "a CUDA buffer was not freed");
        }
    }
}
