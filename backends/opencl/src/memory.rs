//! Buffers: device allocations, and the sub-buffers a launch binds for views at an offset.

use crate::device::Gpu;
use crate::ffi::{self, Mem};
use crate::OpenClDriver;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Error, Object, Result};

/// A `cl_mem` this backend owns one reference to.
pub(crate) struct MemObject(pub(crate) Mem);

// OpenCL memory objects may be used from any thread.
// SAFETY: see above.
unsafe impl Send for MemObject {}
// SAFETY: see above.
unsafe impl Sync for MemObject {}

/// A device allocation.
pub struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) mem: MemObject,
    pub(crate) size: u64,
}

impl DriverBuffer<OpenClDriver> for DeviceBuffer {
    fn allocate(_driver: &OpenClDriver, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
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
                "{size} bytes requested on {}, whose largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) is {limit} bytes",
                adapter.info.name
            )));
        }
        let bytes = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes do not fit in this host's address space")))?;
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: no host pointer; the context is live.
        let mem = unsafe {
            (gpu.api().create_buffer)(
                gpu.context,
                ffi::CL_MEM_READ_WRITE,
                bytes,
                std::ptr::null_mut(),
                &mut code,
            )
        };
        ffi::check(code, || format!("allocating {size} bytes on {}", adapter.info.name))?;
        adapter.allocated.fetch_add(size, Ordering::Relaxed);
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            mem: MemObject(mem),
            size,
        })
    }

    /// The memory object a kernel sees for bytes `offset..offset + size`: the buffer itself
    /// for the whole of it, else a sub-buffer. A sub-buffer's origin must be aligned to
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, which the device reports as its buffer offset
    /// alignment, so the checked adapter has refused any other offset.
    pub(crate) fn view(&self, offset: u64, size: u64, what: &str) -> Result<View> {
        if offset == 0 && size == self.size {
            return Ok(View {
                mem: self.mem.0,
                _sub_buffer: None,
            });
        }
        let region = ffi::BufferRegion {
            origin: offset as usize,
            size: size as usize,
        };
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: the region lies in the buffer (the adapter checked the view) and outlives the call.
        let mem = unsafe {
            (self.gpu.api().create_sub_buffer)(
                self.mem.0,
                ffi::CL_MEM_READ_WRITE,
                ffi::CL_BUFFER_CREATE_TYPE_REGION,
                (&region as *const ffi::BufferRegion).cast::<c_void>(),
                &mut code,
            )
        };
        ffi::check(code, || {
            format!("making a sub-buffer of bytes {offset}..{} for {what}", offset + size)
        })?;
        Ok(View {
            mem,
            _sub_buffer: Some(SubBuffer {
                gpu: Arc::clone(&self.gpu),
                mem: MemObject(mem),
            }),
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.adapter().allocated.fetch_sub(self.size, Ordering::Relaxed);
        // SAFETY: this backend's one reference; OpenCL keeps the memory until queued commands
        // that use it have finished.
        unsafe { (self.gpu.api().release_mem_object)(self.mem.0) };
    }
}

/// A sub-buffer made for one launch.
pub(crate) struct SubBuffer {
    gpu: Arc<Gpu>,
    mem: MemObject,
}

impl Drop for SubBuffer {
    fn drop(&mut self) {
        // SAFETY: as for `DeviceBuffer`; commands enqueued with it hold it until they finish.
        unsafe { (self.gpu.api().release_mem_object)(self.mem.0) };
    }
}

/// What a kernel argument binds: a buffer or a sub-buffer of it.
pub(crate) struct View {
    pub(crate) mem: Mem,
    /// The sub-buffer, released when the view goes (after the launch is enqueued).
    _sub_buffer: Option<SubBuffer>,
}
