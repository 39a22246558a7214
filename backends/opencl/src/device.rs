//! An opened device (an OpenCL context holding one device) and its buffers.

use crate::ffi::{self, Context, Mem};
use crate::instance::{Adapter, Instance, DRIVER_LOCK};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_core::{Error, Result};

/// An opened device: one context holding the one device.
pub(crate) struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
    pub(crate) context: Context,
}

// An OpenCL context may be used from any thread; this backend releases it once, on drop.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Creates a context for adapter `index`.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let adapter = &instance.adapters[index];
        let properties = [
            0x1084isize, // CL_CONTEXT_PLATFORM
            adapter.platform as isize,
            0,
        ];
        let mut code = ffi::CL_SUCCESS;
        let _driver = DRIVER_LOCK.lock();
        // SAFETY: the property list is zero-terminated and the device comes from the platform.
        let context = unsafe {
            (instance.api.create_context)(
                properties.as_ptr(),
                1,
                &adapter.device,
                None,
                std::ptr::null_mut(),
                &mut code,
            )
        };
        ffi::check(code, || format!("creating an OpenCL context for {}", adapter.info.name))?;
        if context.is_null() {
            return Err(Error::internal(format!(
                "creating an OpenCL context for {} returned no context",
                adapter.info.name
            )));
        }
        Ok(Gpu {
            instance,
            index,
            context,
        })
    }

    pub(crate) fn adapter(&self) -> &Adapter {
        &self.instance.adapters[self.index]
    }

    pub(crate) fn api(&self) -> &ffi::Api {
        &self.instance.api
    }

    pub(crate) fn name(&self) -> &str {
        &self.adapter().info.name
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _driver = DRIVER_LOCK.lock();
        // SAFETY: every object made in the context holds an `Arc<Gpu>`, so none is left.
        unsafe { (self.instance.api.release_context)(self.context) };
    }
}

/// A `cl_mem` this backend owns one reference to.
pub(crate) struct MemObject(pub(crate) Mem);

// OpenCL memory objects may be used from any thread.
// SAFETY: see above.
unsafe impl Send for MemObject {}
// SAFETY: see above.
unsafe impl Sync for MemObject {}

/// A device allocation.
pub(crate) struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) mem: MemObject,
    pub(crate) size: u64,
}

impl DeviceBuffer {
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
    /// for the whole of it, else a sub-buffer, whose origin must be aligned to
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN`.
    pub(crate) fn view(&self, offset: u64, size: u64, what: &str) -> Result<View> {
        if offset == 0 && size == self.size {
            return Ok(View {
                mem: self.mem.0,
                _sub_buffer: None,
            });
        }
        let adapter = self.gpu.adapter();
        let alignment = adapter.base_address_alignment;
        if !offset.is_multiple_of(alignment) {
            return Err(Error::invalid_argument(format!(
                "{what} starts at byte {offset}, which is not a multiple of {alignment}, the base address alignment \
                 (CL_DEVICE_MEM_BASE_ADDR_ALIGN) of {}: OpenCL kernels take buffers as pointers, and an offset view \
                 is a sub-buffer, which must start there",
                adapter.info.name
            )));
        }
        let region = ffi::BufferRegion {
            origin: offset as usize,
            size: size as usize,
        };
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: the region lies in the buffer (checked by the caller) and outlives the call.
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
