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

// Handles cross the C ABI as pointers and the CPU backend tags them in their top byte.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("xhal supports 64-bit targets only");

pub mod allocator;
pub mod backend;
mod buffer;
mod device;
pub mod error;
mod event;
pub mod handles;
mod module;
pub mod plugin;
pub mod registry;
mod runtime;
pub mod select;
mod stream;

pub use allocator::MemoryStats;
pub use backend::{
    Backend, BackendInfo, BufferArg, BufferHandle, DeviceHandle, DeviceInfo, DeviceType, EventHandle, Features,
    KernelFormat, KernelHandle, LaunchArgs, MemoryUsage, ModuleHandle, StreamHandle,
};
pub use buffer::Buffer;
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

pub use bytemuck;
#[doc(hidden)]
pub use inventory;
pub use xhal_abi as abi;
/// Portable kernels: WGSL parsing, reflection, translation and bundles.
pub use xhal_kernel as kernel;
pub use xhal_kernel::{EntryPointInfo, ModuleBundle};
