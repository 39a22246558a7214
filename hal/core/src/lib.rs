//! xhal-core: the application API, the backend traits, the plugin export and loader, device
//! selection and the caching allocator.
//!
//! Applications normally depend on the `xhal` crate, which re-exports this one and links the
//! CPU reference backend so that a device always exists.
//!
//! ```text
//! Runtime ── discovers ──> backends (built in, or plugins behind the C ABI)
//!    └── choose(Selector) ──> Device ──> Buffer<T>, Stream, Event, Module ──> Kernel
//!                                          Stream: write/read/copy/fill/launch/record/wait
//! ```

pub mod allocator;
mod buffer;
mod device;
mod event;
mod module;
pub mod plugin;
mod runtime;
pub mod select;
mod stream;

pub use allocator::MemoryStats;
pub use buffer::{Buffer, BufferSlice};
pub use device::Device;
pub use error::{Error, ErrorKind, Result};
pub use event::Event;
pub use module::{Kernel, Launch, Module};
pub use runtime::{
    BackendEntry, BackendSource, DeviceEntry, DiscoveryReport, PluginAttempt, PluginOutcome, Runtime, RuntimeBuilder,
    StaticFailure,
};
pub use select::{Candidate, DeviceSelector, Explanation, Policy, Selector};
pub use stream::Stream;
pub use xhal_backend::{backend, error, handles, registry};
pub use xhal_backend::{export_plugin, register_static_backend};
pub use xhal_backend::{
    Backend, BackendInfo, BufferArg, BufferHandle, DeviceHandle, DeviceInfo, DeviceType, EventHandle, Features,
    KernelFormat, KernelHandle, LaunchArgs, MemoryUsage, ModuleHandle, StreamHandle,
};

pub use bytemuck;
pub use xhal_abi as abi;
/// Portable kernels: WGSL parsing, reflection, translation and bundles.
pub use xhal_kernel as kernel;
pub use xhal_kernel::{EntryPointInfo, ModuleBundle};
