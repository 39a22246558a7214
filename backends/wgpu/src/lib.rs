//! xhal backend on wgpu: one xhal device per wgpu adapter, whatever API sits underneath
//! (Vulkan, GL, Metal, DX12).
//!
//! Kernels are WGSL (format `wgsl`), handed to wgpu as written; the argument ABI maps
//! directly: buffer `i` is `@group(0) @binding(i)` and the scalar block is the kernel's
//! `var<immediate>`, set with `ComputePass::set_immediates`. Streams record into command
//! encoders and submit to the device's one queue; events are submission indices plus the
//! completions (work done, reads copied out) that must finish with them. Reads go through
//! mappable staging buffers; copies, fills and writes that are not 4-byte aligned run a
//! small transfer kernel, since wgpu only moves whole words.
//!
//! Every wgpu call runs inside error scopes and its errors come back as xhal errors on the
//! call or its stream; wgpu's default handler, which panics, is replaced for whatever
//! escapes. The device name carries the wgpu backend, as in `llvmpipe (LLVM 15.0.6, 256
//! bits) (Vulkan)`, so known-failure declarations can name one API.
//!
//! [`WgpuDriver`] implements xhal's typed [`Driver`], and each object type its role trait in
//! the module that holds it (`device`, `memory`, `stream`, `module`); they trust what they are
//! handed. The backend the host sees, [`WgpuBackend`], is the driver behind xhal's checked
//! adapter, which checks handles, device ownership, ranges and alignment first:
//! `WgpuBackend::new(WgpuDriver::from_env())`.
#![deny(missing_docs)]

mod completion;
mod device;
mod instance;
mod memory;
mod module;
mod staging;
mod stream;
mod validation;
#[cfg(all(unix, not(target_vendor = "apple"), not(target_os = "android")))]
mod wayland_log;

use std::sync::Arc;
use xhal_backend::{Checked, DeviceInfo, Driver, Result};

use device::DeviceShared;
use instance::Instance;
use memory::Buffer;
use module::{KernelPipeline, Module};
use stream::{Event, Stream};

xhal_backend::register_static_backend!("wgpu", create_static);
xhal_backend::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn xhal_backend::Backend>> {
    Ok(Arc::new(WgpuBackend::new(WgpuDriver::from_env())))
}

fn create_plugin() -> Result<WgpuBackend> {
    xhal_backend::init_logging();
    Ok(WgpuBackend::new(WgpuDriver::from_env()))
}

/// The wgpu backend as the host sees it: [`WgpuDriver`] behind xhal's checked adapter.
pub type WgpuBackend = Checked<WgpuDriver>;

/// The wgpu driver. See the crate documentation.
#[derive(Debug)]
pub struct WgpuDriver {
    instance: Instance,
}

impl Default for WgpuDriver {
    fn default() -> Self {
        WgpuDriver::from_env()
    }
}

impl WgpuDriver {
    /// Enumerates the adapters of every wgpu backend, as `WGPU_BACKEND`, `WGPU_DEBUG` and
    /// `WGPU_VALIDATION` say. A missing driver leaves no adapter; it never fails here,
    /// `device_count` says why.
    pub fn from_env() -> WgpuDriver {
        WgpuDriver {
            instance: Instance::from_env(),
        }
    }
}

impl Driver for WgpuDriver {
    /// Held by every object made on the device.
    type Device = Arc<DeviceShared>;
    type Buffer = Buffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    /// Shared by every kernel of a module that names the same entry point.
    type Kernel = Arc<KernelPipeline>;

    const NAME: &'static str = "wgpu";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        self.instance.device_count()
    }

    fn device_info(&self, index: u32, _opened: Option<&Arc<DeviceShared>>) -> Result<DeviceInfo> {
        Ok(self.instance.device_info(index))
    }

    fn device_open(&self, index: u32) -> Result<Arc<DeviceShared>> {
        DeviceShared::open(self.instance.adapter(index)).map(Arc::new)
    }
}
