//! xhal's Level Zero backend, with the loader `libze_loader.so.1` opened at run time.
//!
//! `zeInit` (GPU drivers only), then every device of every driver is an xhal device. The
//! Level Zero API is a hand-declared function table resolved with `libloading` (no
//! `level-zero-sys` exists), so nothing Level Zero is needed to build: a machine without the
//! loader, or with the loader but no driver behind it (Debian's `libze1` alone), gets a
//! `DriverUnavailable` error with the reason.
//!
//! Each opened device has one context. Buffers are `zeMemAllocDevice` allocations; writes and
//! reads go through `zeMemAllocHost` staging memory. Streams are immediate command lists,
//! asynchronous and in order; events are barriers that signal an event of a host-visible
//! pool (with kernel timestamps when timing is asked), and elapsed time is the difference of
//! their global end timestamps times the device's timer resolution.
//!
//! Command lists (ABI 1.4) are regular command lists, recorded once and run from a stream's
//! immediate list with `zeCommandListImmediateAppendCommandListsExp`, where the loader and the
//! driver have that extension; elsewhere core replays graphs operation by operation.
//!
//! Kernels arrive as Kernel SPIR-V (`spirv-kernel`), which xhal-kernel writes from WGSL. They
//! follow the xhal argument ABI: buffer argument `i` is pointer parameter `i`, set with
//! `zeKernelSetArgumentValue` to the view's device address (base plus offset), and the scalar
//! block, when the kernel has scalars, is one more by-value parameter. A kernel that reads
//! buffer lengths ends with a by-value struct of one `u64` per buffer, the byte length of each
//! bound view, which the backend fills. The parameters and the workgroup size
//! (`OpExecutionMode LocalSize`) are read from the SPIR-V, since Level Zero reports neither's
//! meaning. An entry point is looked up by `xhal_kernel::c::c_symbol(name)` (the name the
//! writer gives it: `main` is `main_`), then by its own name.
//!
//! [`LevelZeroDriver`] implements xhal-backend's typed [`Driver`]; [`LevelZeroBackend`] is it
//! behind the checked adapter, which checks handles, device ownership, ranges, fill patterns,
//! host pointers and view alignment before the driver runs, and synchronizes streams before
//! they go. The driver checks what only Level Zero and the kernel's SPIR-V can tell: memory
//! left, builds, parameters and workgroup limits.
#![deny(missing_docs)]

mod command_list;
mod device;
mod ffi;
mod instance;
mod memory;
mod module;
mod reflect;
mod stream;

use device::Gpu;
use instance::Instance;
use memory::DeviceBuffer;
use module::{KernelObject, Module};
use std::sync::Arc;
use stream::{Event, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, LazyInstance, LibrarySource, Result};

/// Names the loader library to open instead of the system's.
const LOADER_VARIABLE: &str = "XHAL_LEVEL_ZERO_LOADER";

xhal_backend::register_static_backend!(LevelZeroDriver::NAME, create_static);
xhal_backend::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(LevelZeroBackend::new(LevelZeroDriver::from_env())))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<LevelZeroBackend> {
    xhal_backend::init_logging();
    Ok(LevelZeroBackend::new(LevelZeroDriver::from_env()))
}

/// The Level Zero backend: [`LevelZeroDriver`] behind the checked adapter, as the plugin
/// export and static registration make it: `LevelZeroBackend::new(LevelZeroDriver::from_env())`.
pub type LevelZeroBackend = Checked<LevelZeroDriver>;

/// The Level Zero driver. See the crate documentation.
#[derive(Debug)]
pub struct LevelZeroDriver {
    /// Made on first use, so constructing the driver never touches Level Zero.
    instance: LazyInstance<Instance>,
}

impl LevelZeroDriver {
    fn with_source(source: LibrarySource) -> LevelZeroDriver {
        LevelZeroDriver {
            instance: LazyInstance::new(source),
        }
    }

    /// The library named by `XHAL_LEVEL_ZERO_LOADER` where that is set (a loader installed
    /// elsewhere, or a library exporting the same API), else the system's Level Zero loader
    /// (`libze_loader.so.1`), which finds drivers through its own configuration
    /// (`ZE_ENABLE_ALT_DRIVERS`, the installed `libze_intel_gpu.so.1`).
    pub fn from_env() -> LevelZeroDriver {
        match std::env::var_os(LOADER_VARIABLE) {
            Some(path) if !path.is_empty() => LevelZeroDriver::with_library_path(path),
            _ => LevelZeroDriver::with_source(LibrarySource::System),
        }
    }

    /// The Level Zero loader (or a library exporting the same API) at `path`.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> LevelZeroDriver {
        LevelZeroDriver::with_source(LibrarySource::path(path))
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance.get(Instance::create)
    }
}

// The object types are `pub` in private modules: the trait's associated types must be public,
// and outside the crate they stay opaque, reached only through the adapter.
impl Driver for LevelZeroDriver {
    type Device = Arc<Gpu>;
    type Buffer = DeviceBuffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    type Kernel = KernelObject;
    const NAME: &'static str = "level-zero";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32, _opened: Option<&Arc<Gpu>>) -> Result<DeviceInfo> {
        Ok(self.instance()?.adapters[index as usize].describe())
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        // One context per device index, shared by every open of it while any is live (the
        // adapter does that): memory of one context cannot be used in another, and the adapter
        // lets objects of every open of an index mix.
        Gpu::open(Arc::clone(self.instance()?), index as usize).map(Arc::new)
    }
}
