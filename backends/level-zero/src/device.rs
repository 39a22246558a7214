//! An opened device (one Level Zero context for the device), its device allocations and the
//! host allocations that stage transfers.

use crate::ffi::{self, ContextHandle};
use crate::instance::{Adapter, Instance};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_core::{Error, Result};

/// An opened device: one context of its driver.
pub(crate) struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
    pub(crate) context: ContextHandle,
}

// A Level Zero context may be used from any thread; this backend destroys it once, on drop.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Creates a context on adapter `index`'s driver.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let adapter = &instance.adapters[index];
        let desc = ffi::ContextDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_CONTEXT_DESC,
            p_next: std::ptr::null(),
            flags: 0,
        };
        let mut context = std::ptr::null_mut();
        // SAFETY: a driver the loader listed, a filled descriptor and a place for the handle.
        let code = unsafe { (instance.api.context_create)(adapter.driver, &desc, &mut context) };
        ffi::check(code, "zeContextCreate", || format!("opening {}", adapter.info.name))?;
        if context.is_null() {
            return Err(Error::internal(format!(
                "zeContextCreate returned no context for {}",
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
        // SAFETY: every object made in the context holds an `Arc<Gpu>`, so none is left.
        unsafe { (self.instance.api.context_destroy)(self.context) };
    }
}

/// A device allocation (`zeMemAllocDevice`).
pub(crate) struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) pointer: *mut c_void,
    pub(crate) size: u64,
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

impl DeviceBuffer {
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
        // The offset was checked against the buffer's size, so this stays inside it.
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
