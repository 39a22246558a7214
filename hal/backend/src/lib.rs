//! xhal-backend: what a backend author needs, and nothing of the application runtime.
//!
//! - [`Driver`]: the typed trait a Rust backend implements: its own device, buffer, stream,
//!   event, module and kernel types, handed over already checked.
//! - [`Checked`]: the one adapter that turns any driver into a [`Backend`], owning the handle
//!   tables and doing every argument check once, with the same messages for every backend.
//! - [`Backend`]: the handle-based contract that mirrors the C ABI one to one, which the
//!   plugin export and the host's loader speak. A backend may implement it directly when it
//!   must (a plugin that wraps another plugin), but then it owns every check itself.
//! - [`export_plugin!`] and [`register_static_backend!`]: a backend as a plugin library, or
//!   linked into a program.
//! - [`HostQueue`] and [`HostEvent`]: streams and events on a host thread, for a device
//!   without hardware queues (an emulator, or a device driven by blocking calls).
//! - [`function_table!`]: a vendor library's entry points, declared by hand and resolved at
//!   run time ([`ffi`]), for backends that need no vendor SDK to build; [`LazyInstance`], the
//!   API loaded from its [`LibrarySource`] on first use.
//! - [`Error`], [`ErrorKind`], [`handles`] and the ABI itself ([`abi`]).
//!
//! ```text
//! driver (typed, trusts its caller) ── Checked<D> ── Backend ─┬─ export_plugin! ── C ABI ── host
//!                                                             └─ register_static_backend! ── host
//! ```

// Handles cross the C ABI as pointers and carry their kind in their top byte.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("xhal supports 64-bit targets only");

pub mod backend;
pub mod checked;
pub mod clock;
pub mod driver;
pub mod error;
pub mod export;
pub mod ffi;
pub mod handles;
pub mod host_queue;
pub mod library;
mod logging;
pub mod registry;

pub use backend::{
    Backend, BackendInfo, BufferArg, BufferHandle, CommandListHandle, DeviceHandle, DeviceInfo, DeviceType,
    EventHandle, Features, KernelFormat, KernelHandle, LaunchArgs, MemoryUsage, ModuleHandle, StreamHandle,
    StreamPriorities,
};
pub use checked::Checked;
pub use clock::{ClockSample, ElapsedTimer, ReferenceClock};
pub use driver::{
    BufferView, Command, CopyOverlap, Driver, DriverBuffer, DriverCommandList, DriverDevice, DriverEvent, DriverKernel,
    DriverModule, DriverStream, Launch, Object, OwnedLaunch,
};
pub use error::{Error, ErrorKind, Result};
pub use host_queue::{HostEvent, HostQueue};
pub use library::{LazyInstance, LibrarySource};
pub use logging::init_logging;

#[doc(hidden)]
pub use inventory;
/// The `libloading` that [`function_table!`] opens libraries with.
pub use libloading;
pub use xhal_abi as abi;
