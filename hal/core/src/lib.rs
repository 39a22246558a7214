//! xhal-core: the application API, the backend traits, the plugin export and loader, device
//! selection and the caching allocator.
//!
//! Applications normally depend on the `xhal` crate, which re-exports this one and links the
//! CPU reference backend so that a device always exists.

pub mod backend;
pub mod error;
pub mod plugin;
pub mod registry;
pub mod select;

pub use backend::{
    Backend, BackendInfo, BufferArg, BufferHandle, DeviceHandle, DeviceInfo, DeviceType, EventHandle, Features,
    KernelFormat, KernelHandle, LaunchArgs, ModuleHandle, StreamHandle,
};
pub use error::{Error, ErrorKind, Result};

#[doc(hidden)]
pub use inventory;
pub use xhal_abi as abi;
