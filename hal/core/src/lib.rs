//! xhal-core: the application runtime: the application API, discovery and the plugin loader,
//! device selection and the caching allocator.
//!
//! Applications normally depend on the `xhal` crate, which re-exports this one and links the
//! CPU reference backend so that a device always exists. The crate's root is the application
//! API; what a backend author needs (the `Backend` and `Driver` traits, handles, the export
//! macro) is `xhal-backend`, reachable here as [`backend`].
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
mod graph;
mod module;
mod pinned;
pub mod plugin;
mod runtime;
pub mod select;
mod stream;
pub mod trace;

pub use allocator::MemoryStats;
pub use buffer::{Buffer, BufferSlice, Mapped, MappedMut};
pub use device::Device;
pub use error::{Error, ErrorKind, Result};
pub use event::Event;
pub use graph::{Graph, GraphBuilder, GraphEvent, GraphStream, LaunchNode};
pub use module::{Kernel, Launch, Module};
pub use pinned::PinnedBuffer;
pub use runtime::{
    BackendEntry, BackendSource, DeviceEntry, DiscoveryReport, PluginAttempt, PluginOutcome, Runtime, RuntimeBuilder,
    StaticFailure,
};
pub use select::{Candidate, DeviceSelector, Explanation, Policy, Selector};
pub use stream::Stream;
/// What a backend author needs: `xhal-backend`, for code that drives a backend below the
/// application API (the conformance suite, tools, tests).
pub use xhal_backend as backend;
pub use xhal_backend::error;
pub use xhal_backend::{
    BackendInfo, ClockSample, DeviceInfo, DeviceType, Features, KernelFormat, MemoryUsage, StreamPriorities,
};

pub use bytemuck;
pub use xhal_abi as abi;
/// Portable kernels: WGSL parsing, reflection, translation and bundles.
pub use xhal_kernel as kernel;
pub use xhal_kernel::{EntryPointInfo, ModuleBundle};
