//! An opened device: a HIP device ordinal, made current before each call that needs it.

use crate::ffi;
use crate::instance::{Adapter, Instance};
use crate::RocmDriver;
use std::sync::Arc;
use xhal_backend::{DriverDevice, MemoryUsage, Object, Result};

/// An opened device: a HIP device ordinal.
pub struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
}

impl Gpu {
    /// Opens adapter `index`: makes it current once, so a device the runtime cannot use
    /// fails here rather than at the first allocation.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let gpu = Gpu { instance, index };
        gpu.bind()?;
        Ok(gpu)
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

    /// Makes this device the calling thread's current HIP device. HIP keeps the current
    /// device per thread, and xhal may call from any thread, so every call that allocates
    /// or creates something on "the current device" comes after this.
    pub(crate) fn bind(&self) -> Result<()> {
        let ordinal = self.adapter().ordinal;
        // SAFETY: an ordinal below the runtime's device count.
        let code = unsafe { (self.api().set_device)(ordinal) };
        self.api().check(code, "hipSetDevice", || {
            format!("making {} (HIP device {ordinal}) current", self.name())
        })
    }

    /// Free and total memory as the runtime sees them (other processes included). `device_info`
    /// asks it of a plain opened device, outside the role trait, so the query lives here.
    pub(crate) fn memory_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t.
        let code = unsafe { (self.api().mem_get_info)(&mut free, &mut total) };
        self.api().check(code, "hipMemGetInfo", || {
            format!("reading the free memory of {}", self.name())
        })?;
        Ok((free as u64, total as u64))
    }
}

impl DriverDevice<RocmDriver> for Arc<Gpu> {
    fn memory_usage(device: &Arc<Object<Arc<Gpu>>>) -> Result<MemoryUsage> {
        let (free, total) = device.memory_info()?;
        Ok(MemoryUsage { free, total })
    }
}
