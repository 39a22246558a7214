//! Buffers: device allocations, and the sub-buffers a launch binds for views at an offset.

use crate::device::Gpu;
use crate::ffi::{self, Mem};
use crate::OpenClDriver;
use parking_lot::Mutex;
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

/// How many sub-buffers a buffer keeps for the views launched on most recently.
const SUB_BUFFER_CACHE: usize = 16;

/// A device allocation.
pub struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) mem: MemObject,
    pub(crate) size: u64,
    /// The sub-buffers of recent views, as `(offset, size, sub-buffer)`, oldest first: a view
    /// launched on again (a caching allocator's block, a loop's slice) reuses its sub-buffer
    /// instead of making and releasing one per launch, which costs more than the launch.
    sub_buffers: Mutex<Vec<(u64, u64, Arc<SubBuffer>)>>,
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
            sub_buffers: Mutex::new(Vec::new()),
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
        let mut cached = self.sub_buffers.lock();
        if let Some((_, _, sub_buffer)) = cached.iter().find(|(at, length, _)| (*at, *length) == (offset, size)) {
            return Ok(View {
                mem: sub_buffer.mem.0,
                _sub_buffer: Some(Arc::clone(sub_buffer)),
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
        let sub_buffer = Arc::new(SubBuffer {
            gpu: Arc::clone(&self.gpu),
            mem: MemObject(mem),
        });
        if cached.len() == SUB_BUFFER_CACHE {
            // Commands enqueued with the oldest keep it alive until they finish.
            cached.remove(0);
        }
        cached.push((offset, size, Arc::clone(&sub_buffer)));
        Ok(View {
            mem,
            _sub_buffer: Some(sub_buffer),
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.adapter().allocated.fetch_sub(self.size, Ordering::Relaxed);
        // The sub-buffers go first: a buffer is deleted only after its sub-buffers.
        self.sub_buffers.get_mut().clear();
        // SAFETY: this backend's one reference; OpenCL keeps the memory until queued commands
        // that use it have finished.
        unsafe { (self.gpu.api().release_mem_object)(self.mem.0) };
    }
}

/// A sub-buffer of a view, shared by the launches that bind it.
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
    /// The sub-buffer, held while the view is (the enqueued launch holds the `cl_mem`).
    _sub_buffer: Option<Arc<SubBuffer>>,
}
