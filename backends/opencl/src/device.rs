//! An opened device: an OpenCL context holding one device.

use crate::ffi::{self, Context};
use crate::instance::{Adapter, Instance, DRIVER_LOCK};
use crate::OpenClDriver;
use std::sync::Arc;
use xhal_backend::{DriverDevice, Error, Result};

/// An opened device: one context holding the one device.
pub struct Gpu {
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

// `memory_usage` keeps its default: this backend does not report its devices' memory usage.
impl DriverDevice<OpenClDriver> for Arc<Gpu> {}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _driver = DRIVER_LOCK.lock();
        // SAFETY: every object made in the context holds an `Arc<Gpu>`, so none is left.
        unsafe { (self.instance.api.release_context)(self.context) };
    }
}
