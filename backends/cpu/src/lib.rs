//! xhal's CPU reference backend: strict, deterministic, always present.
//!
//! This backend is the executable specification the other backends are held to. It checks
//! every launch against its kernel (workgroup counts, buffers, scalar block) even though
//! `xhal-core` already did, poisons fresh memory with [`POISON_PATTERN`], faults (instead of
//! clamping) when a kernel would index past its buffer view, and gives every stream its own
//! worker thread so that streams really run concurrently and ordering bugs show up here first.
//!
//! [`CpuDriver`] implements [`Driver`]; [`CpuBackend`] is the driver behind the checked
//! adapter, which owns the handles (opaque, never reused; the host never sees a pointer into
//! device memory) and checks every handle, device, range, fill pattern and host pointer
//! before the driver sees them. Configure it with [`CpuConfig`] or the `XHAL_CPU_DEVICES` and
//! `XHAL_CPU_MEMORY` environment variables:
//!
//! ```
//! use xhal_backend::Backend;
//! use xhal_cpu::{CpuBackend, CpuDriver};
//!
//! let backend = CpuBackend::new(CpuDriver::from_env()?);
//! assert_eq!(backend.info().name, "cpu");
//! # Ok::<(), xhal_backend::Error>(())
//! ```
//!
//! Dropping the backend cancels every stream's queued work and cuts running kernels short
//! (`Driver::shut_down`) before the adapter synchronises the streams, so a drop never waits
//! on a long kernel.
//!
//! Kernels are WGSL compute shaders (format `wgsl`), interpreted with the language's full
//! compute semantics: all invocations of a workgroup run in lockstep over lanes, workgroups
//! run in parallel across cores, an out-of-bounds index is a `KernelFault` naming the
//! kernel, binding and index, and a kernel running past [`KERNEL_TIMEOUT_VARIABLE`] is
//! stopped with `Timeout`. The [`BuiltinKernel`]s (format `cpu-builtin`) remain for tests
//! that need a kernel without a compiler.
//!
//! WGSL kernels also run compiled: translated to C, built by the system C compiler into a
//! cached shared object, one call per workgroup on every core, with the same bounds faults
//! and time limit. [`MODE_VARIABLE`] (`XHAL_CPU_MODE=interpret|compile|auto`, default
//! `auto`) chooses; see [`KernelMode`].
//!
//! [`executor`] exposes the WGSL executor on its own, so that a backend whose memory is host
//! memory can run kernels over its own byte slices.
//!
//! This crate is a library that exports no plugin symbol: `xhal` links it as the built-in
//! `cpu` backend, `backends/cpu-plugin` exports it as `libxhal_cpu.so`, and another plugin
//! may wrap or reuse it and export a table of its own.
#![deny(missing_docs)]

mod config;
mod device;
pub mod executor;
mod kernels;
mod memory;
mod module;
mod native;
mod pool;
mod stream;
mod watchdog;
mod wgsl;

pub use wgsl::interpreter_fallbacks;

#[cfg(test)]
mod tests;

pub use config::{
    default_memory_per_device, CpuConfig, DEFAULT_KERNEL_TIMEOUT, DEVICES_VARIABLE, FALLBACK_MEMORY_PER_DEVICE,
    KERNEL_TIMEOUT_VARIABLE, MEMORY_VARIABLE,
};
pub use kernels::BuiltinKernel;
pub use memory::POISON_PATTERN;
pub use native::{
    compile_stats, CompileStats, KernelMode, CACHE_DIR_VARIABLE, CFLAGS_VARIABLE, COMPILER_VARIABLE, MODE_VARIABLE,
};

use config::KernelTimeout;
use device::DeviceMemory;
use memory::Buffer;
use module::{Kernel, Module};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use stream::{Event, LiveStreams, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, Result};

/// The CPU reference backend: [`CpuDriver`] behind the checked adapter. Make one with
/// `CpuBackend::new(CpuDriver::from_env()?)`.
pub type CpuBackend = Checked<CpuDriver>;

xhal_backend::register_static_backend!("cpu", create_static);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CpuBackend::new(CpuDriver::from_env()?)))
}

/// The CPU reference backend's driver. See the crate documentation.
pub struct CpuDriver {
    config: CpuConfig,
    kernel_timeout: KernelTimeout,
    strict_bounds: bool,
    /// How WGSL kernels run, or why [`MODE_VARIABLE`] could not be read (then every WGSL
    /// module load fails with that error).
    kernel_mode: Result<KernelMode>,
    /// Created on first use, so a huge `devices` count costs nothing until a device is used.
    devices: Mutex<HashMap<u32, Arc<DeviceMemory>>>,
    streams: LiveStreams,
}

impl std::fmt::Debug for CpuDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuDriver")
            .field("config", &self.config)
            .field("kernel_timeout", &self.kernel_timeout)
            .field("strict_bounds", &self.strict_bounds)
            .field("kernel_mode", &self.kernel_mode)
            .finish_non_exhaustive()
    }
}

impl CpuDriver {
    /// A driver with exactly this shape. The kernel time limit comes from
    /// [`KERNEL_TIMEOUT_VARIABLE`] (a malformed value fails each WGSL launch, naming the
    /// variable); [`with_kernel_timeout`](CpuDriver::with_kernel_timeout) overrides it.
    pub fn with_config(config: CpuConfig) -> CpuDriver {
        CpuDriver {
            config,
            kernel_timeout: KernelTimeout::from_lookup(|name| std::env::var_os(name)),
            strict_bounds: true,
            kernel_mode: KernelMode::from_lookup(|name| std::env::var_os(name)),
            devices: Mutex::default(),
            streams: LiveStreams::default(),
        }
    }

    /// A driver configured by [`CpuConfig::from_env`].
    pub fn from_env() -> Result<CpuDriver> {
        Ok(CpuDriver::with_config(CpuConfig::from_env()?))
    }

    /// The same driver with WGSL kernels limited to `limit` of run time, whatever
    /// [`KERNEL_TIMEOUT_VARIABLE`] says.
    pub fn with_kernel_timeout(mut self, limit: Duration) -> CpuDriver {
        self.kernel_timeout = KernelTimeout::Limit(limit);
        self
    }

    /// The same driver with strict bounds checking on (the default) or off. Strict, an
    /// out-of-bounds index in a WGSL kernel fails the launch with `KernelFault`, naming the
    /// kernel, the binding and the index. Off, the index is clamped to the array, which is
    /// one of the outcomes WGSL allows and what robust-buffer-access GPUs do.
    pub fn with_strict_bounds(mut self, strict: bool) -> CpuDriver {
        self.strict_bounds = strict;
        self
    }

    /// The same driver running WGSL kernels as `mode` says, whatever [`MODE_VARIABLE`] says.
    pub fn with_kernel_mode(mut self, mode: KernelMode) -> CpuDriver {
        self.kernel_mode = Ok(mode);
        self
    }

    /// How this driver runs WGSL kernels (an error when [`MODE_VARIABLE`] is malformed).
    pub fn kernel_mode(&self) -> Result<KernelMode> {
        self.kernel_mode.clone()
    }

    /// The configuration this driver was built with.
    pub fn config(&self) -> CpuConfig {
        self.config
    }

    /// Device `index`'s memory budget, made on first use; the adapter checked the index.
    fn device_memory(&self, index: u32) -> Arc<DeviceMemory> {
        let memory_per_device = self.config.memory_per_device;
        let mut devices = self.devices.lock();
        let memory = devices
            .entry(index)
            .or_insert_with(|| Arc::new(DeviceMemory::new(index, memory_per_device)));
        Arc::clone(memory)
    }
}

impl Driver for CpuDriver {
    type Device = Arc<DeviceMemory>;
    type Buffer = Arc<Buffer>;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    type Kernel = Kernel;
    const NAME: &'static str = "cpu";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    /// Cancels the work queued on every stream and cuts running kernels short (a `sleep_us`
    /// or a WGSL kernel, which then fails with `Timeout`), so the adapter's synchronisation of
    /// every stream returns at once. Streams refuse new work afterwards.
    fn shut_down(&self) {
        self.streams.cancel_all();
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.config.devices)
    }

    fn device_info(&self, index: u32, _opened: Option<&Arc<DeviceMemory>>) -> Result<DeviceInfo> {
        Ok(self.device_memory(index).info())
    }

    fn device_open(&self, index: u32) -> Result<Arc<DeviceMemory>> {
        Ok(self.device_memory(index))
    }
}
