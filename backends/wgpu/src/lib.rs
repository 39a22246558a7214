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
//! [`WgpuDriver`] implements xhal's typed [`Driver`] and trusts what it is handed; the
//! backend the host sees, [`WgpuBackend`], is the driver behind xhal's checked adapter, which
//! checks handles, device ownership, ranges and alignment first:
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
use xhal_backend::{BackendInfo, Checked, DeviceInfo, Driver, Error, KernelFormat, Launch, Object, Result};

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
    /// Every open of an adapter shares its one wgpu device.
    type Device = Arc<DeviceShared>;
    type Buffer = Buffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    /// Shared by every kernel of a module that names the same entry point.
    type Kernel = Arc<KernelPipeline>;

    const NAME: &'static str = "wgpu";

    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: Self::NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            abi_version: (xhal_backend::abi::XHAL_ABI_MAJOR, xhal_backend::abi::XHAL_ABI_MINOR),
        }
    }

    fn device_count(&self) -> Result<u32> {
        self.instance.device_count()
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        Ok(self.instance.device_info(index))
    }

    fn device_open(&self, index: u32) -> Result<Arc<DeviceShared>> {
        self.instance.open(index)
    }

    fn buffer_allocate(&self, device: &Arc<Object<Arc<DeviceShared>>>, size: u64) -> Result<Buffer> {
        Buffer::allocate(device, size)
    }

    fn stream_create(&self, device: &Arc<Object<Arc<DeviceShared>>>) -> Result<Stream> {
        Stream::new(Arc::clone(device))
    }

    fn stream_sticky_error(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.check_usable()
    }

    unsafe fn stream_write(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_bounds(format!("a write of {size} bytes exceeds this host's address space")))?;
        // SAFETY: the caller guarantees `size` readable bytes at `source` until the write
        // completes; they are copied into wgpu's staging memory before this call returns.
        let data = unsafe { std::slice::from_raw_parts(source, length) };
        stream.write(buffer, offset, data)
    }

    unsafe fn stream_read(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract for `destination` is exactly `Stream::read`'s.
        unsafe { stream.read(buffer, offset, destination, size) }
    }

    fn stream_copy(
        &self,
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<Buffer>>,
        source_offset: u64,
        destination: &Arc<Object<Buffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        stream.copy(source, source_offset, destination, destination_offset, size)
    }

    fn stream_fill(
        &self,
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        stream.fill(buffer, offset, size, pattern)
    }

    fn stream_launch(&self, stream: &Arc<Object<Stream>>, launch: &Launch<'_, Self>) -> Result<()> {
        stream.launch(launch.kernel, launch.workgroups, launch.buffers, launch.scalars)
    }

    fn stream_record_event(&self, stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        event.set_latest(stream.record(event.timing)?);
        Ok(())
    }

    fn stream_wait_event(&self, stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        match event.latest() {
            Some(signal) => stream.wait_for(&signal, event.handle()),
            None => stream.check_usable(),
        }
    }

    fn stream_synchronize(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.synchronize()
    }

    fn stream_query(&self, stream: &Arc<Object<Stream>>) -> Result<bool> {
        stream.query()
    }

    fn event_create(&self, device: &Arc<Object<Arc<DeviceShared>>>, timing: bool) -> Result<Event> {
        Event::new(Arc::clone(device), timing)
    }

    fn event_query(&self, event: &Arc<Object<Event>>) -> Result<bool> {
        event.query(event.handle())
    }

    fn event_synchronize(&self, event: &Arc<Object<Event>>) -> Result<()> {
        event.synchronize(event.handle())
    }

    fn event_elapsed_time(&self, start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        Event::elapsed_time(start, end)
    }

    fn module_load(
        &self,
        device: &Arc<Object<Arc<DeviceShared>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Module> {
        Module::load(device, format, code)
    }

    fn kernel_get(&self, module: &Arc<Object<Module>>, name: &str) -> Result<Arc<KernelPipeline>> {
        module.kernel(module.handle(), name)
    }
}
