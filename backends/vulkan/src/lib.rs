//! xhal's Vulkan backend, on ash, with `libvulkan.so.1` opened at run time.
//!
//! Every physical device with a compute queue and Vulkan 1.2 (for timeline semaphores) is an
//! xhal device. Kernels arrive as SPIR-V (preferred; reflected and validated with naga before
//! the driver sees them) or WGSL (translated host-side with xhal-kernel). Buffer argument `i`
//! is descriptor set 0, binding `i`, a storage-buffer descriptor or, for a `Uniform` block (a
//! `var<uniform>`), a uniform-buffer one; the scalar block is the push-constant block.
//!
//! Streams record into command buffers and submit in batches ordered by a timeline semaphore
//! per stream; events are values on those semaphores, timed with timestamp queries where the
//! device has them. Memory is device-local, sub-allocated from large blocks, with staging for
//! host copies (or direct copies through the mapping where device memory is host-visible).
//!
//! With `XHAL_VULKAN_VALIDATION=1` the Khronos validation layer is enabled; each of its
//! messages is logged and makes the next call on the device fail, so a test that provokes
//! one cannot pass.
//!
//! [`VulkanDriver`] implements [`Driver`], and each object type its role trait in the module
//! below that holds it; [`VulkanBackend`] is the driver behind xhal-backend's checked adapter,
//! which resolves handles and checks every argument first:
//! `VulkanBackend::new(VulkanDriver::from_env())`.
//!
//! - `instance`: the loader, the instance and the devices described before they are opened;
//! - `device`: an opened device (its `VkDevice`, queue and memory types);
//! - `memory`: buffers, sub-allocated from blocks;
//! - `stream`: streams and events;
//! - `module`: modules, pipelines and what a launch must satisfy;
//! - `reflect`: reading each SPIR-V entry point's bindings, push constants and workgroup memory.
#![deny(missing_docs)]

mod command_list;
mod device;
mod instance;
mod memory;
mod module;
mod reflect;
mod stream;

pub use instance::VALIDATION_VARIABLE;

/// Set to `0` to send every host copy through staging memory and a GPU copy, as on a device
/// whose memory the host cannot map; for testing that path on devices where it can.
pub const DIRECT_COPIES_VARIABLE: &str = "XHAL_VULKAN_DIRECT_COPIES";

use device::Gpu;
use instance::Instance;
use memory::DeviceBuffer;
use module::{Module, Pipeline};
use std::sync::Arc;
use stream::{Event, Stream};
use xhal_backend::{Backend, Checked, DeviceInfo, Driver, LazyInstance, LibrarySource, Result};

/// The Vulkan backend as the host sees it: [`VulkanDriver`] behind the checked adapter.
pub type VulkanBackend = Checked<VulkanDriver>;

xhal_backend::register_static_backend!("vulkan", create_static);
xhal_backend::export_plugin!(create_plugin);

fn create_static() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(VulkanBackend::new(VulkanDriver::from_env())))
}

/// The plugin's constructor (see `export_plugin!`).
fn create_plugin() -> Result<VulkanBackend> {
    xhal_backend::init_logging();
    Ok(VulkanBackend::new(VulkanDriver::from_env()))
}

/// The Vulkan driver. See the crate documentation.
pub struct VulkanDriver {
    validation: bool,
    direct_copies: bool,
    /// Made on first use, so constructing the driver never touches the loader.
    instance: LazyInstance<Instance>,
    /// Every pipeline handed out, for tests that look behind a kernel handle core keeps to itself.
    #[cfg(test)]
    pipelines: parking_lot::Mutex<Vec<std::sync::Weak<Pipeline>>>,
}

impl std::fmt::Debug for VulkanDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanDriver")
            .field("instance", &self.instance)
            .field("validation", &self.validation)
            .finish_non_exhaustive()
    }
}

impl VulkanDriver {
    fn with_source(source: LibrarySource, validation: bool) -> VulkanDriver {
        VulkanDriver {
            instance: LazyInstance::new(source),
            validation,
            direct_copies: true,
            #[cfg(test)]
            pipelines: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// The system's Vulkan loader, with validation when [`VALIDATION_VARIABLE`] is `1`.
    pub fn from_env() -> VulkanDriver {
        let validation = std::env::var(VALIDATION_VARIABLE).is_ok_and(|value| value.trim() == "1");
        let direct_copies = std::env::var(DIRECT_COPIES_VARIABLE).map_or(true, |value| value.trim() != "0");
        VulkanDriver::with_source(LibrarySource::System, validation).with_direct_copies(direct_copies)
    }

    /// The Vulkan loader at `path` instead of the system's.
    pub fn with_library_path(path: impl Into<std::path::PathBuf>) -> VulkanDriver {
        VulkanDriver::with_source(LibrarySource::path(path), false)
    }

    /// The same driver with the validation layer on or off.
    pub fn with_validation(mut self, validation: bool) -> VulkanDriver {
        self.validation = validation;
        self
    }

    /// The same driver copying between the host and mapped device memory directly when the
    /// stream is idle (the default), or always through staging memory and a GPU copy.
    pub fn with_direct_copies(mut self, direct: bool) -> VulkanDriver {
        self.direct_copies = direct;
        self
    }

    fn instance(&self) -> Result<&Arc<Instance>> {
        self.instance.get(|source| Instance::create(source, self.validation))
    }

    /// The pipelines handed out by `DriverKernel::get` that are still alive.
    #[cfg(test)]
    fn live_pipelines(&self) -> Vec<Arc<Pipeline>> {
        self.pipelines
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect()
    }
}

impl Driver for VulkanDriver {
    /// Held by every object made on the device, so it is destroyed only after them.
    type Device = Arc<Gpu>;
    type Buffer = DeviceBuffer;
    type Stream = Stream;
    type Event = Event;
    type Module = Module;
    /// Cached in its module, so getting a kernel twice makes one pipeline.
    type Kernel = Arc<Pipeline>;

    const NAME: &'static str = "vulkan";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn device_count(&self) -> Result<u32> {
        Ok(self.instance()?.adapters.len() as u32)
    }

    fn device_info(&self, index: u32, _opened: Option<&Arc<Gpu>>) -> Result<DeviceInfo> {
        Ok(self.instance()?.adapters[index as usize].info_now())
    }

    fn device_open(&self, index: u32) -> Result<Arc<Gpu>> {
        let instance = self.instance()?;
        let gpu = Gpu::open(
            Arc::clone(instance),
            instance.adapters[index as usize].clone(),
            self.direct_copies,
        )?;
        Ok(Arc::new(gpu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reflect::BindingKind;
    use xhal_core::{Launch, Runtime};

    /// Storage, uniform, storage: bindings (0, 1), (0, 4) and (1, 0) as arguments 0, 1, 2.
    const UNIFORM_BETWEEN_STORAGE: &str = r#"
struct Params { count: u32, scale: f32 }
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(1) @binding(0) var<storage, read_write> output: array<f32>;
@compute @workgroup_size(8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.count { output[id.x] = input[id.x] * params.scale; }
}
"#;

    /// The backend (with the validation layer where it is installed), and a runtime that
    /// reaches it through the public API only, or `None` where the machine has no Vulkan device.
    fn backend_and_runtime() -> Option<(Arc<VulkanBackend>, Runtime)> {
        let mut backend = Arc::new(VulkanBackend::new(VulkanDriver::from_env().with_validation(true)));
        if backend.device_count().is_err() {
            backend = Arc::new(VulkanBackend::new(VulkanDriver::from_env()));
        }
        if let Err(error) = backend.device_count() {
            eprintln!("SKIPPED: no Vulkan device here, so this test checked nothing: {error}");
            return None;
        }
        let runtime = Runtime::builder()
            .without_static_backends()
            .without_plugin_search()
            .backend(Arc::clone(&backend) as Arc<dyn Backend>)
            .build()
            .ok()?;
        Some((backend, runtime))
    }

    #[test]
    fn wgsl_uniforms_reach_the_pipeline_as_uniform_descriptors() {
        let Some((backend, runtime)) = backend_and_runtime() else {
            return;
        };
        let device = runtime.open("vulkan:0").unwrap();
        let _kernel = device
            .load_wgsl(UNIFORM_BETWEEN_STORAGE)
            .unwrap()
            .kernel("main")
            .unwrap();
        let pipelines = backend.driver().live_pipelines();
        assert_eq!(pipelines.len(), 1);
        // Core translated with native uniforms, so the SPIR-V the backend got has a Uniform
        // block and the set layout a uniform-buffer descriptor for it.
        assert_eq!(
            pipelines[0].entry.bindings,
            [BindingKind::Storage, BindingKind::Uniform, BindingKind::Storage]
        );
    }

    #[test]
    fn uniform_views_past_max_uniform_buffer_range_are_refused_naming_the_argument() {
        let Some((backend, runtime)) = backend_and_runtime() else {
            return;
        };
        let Ok(instance) = backend.driver().instance() else {
            return;
        };
        let limit = instance.adapters[0].max_uniform_buffer_range;
        let device = runtime.open("vulkan:0").unwrap();
        let bytes = limit + u64::from(device.info().buffer_offset_alignment);
        if bytes > device.info().max_allocation_size.min(1 << 30) {
            eprintln!("SKIPPED: maxUniformBufferRange is {limit} bytes, too many to allocate past in a test");
            return;
        }
        let bytes = usize::try_from(bytes).unwrap();
        let kernel = device
            .load_wgsl(UNIFORM_BETWEEN_STORAGE)
            .unwrap()
            .kernel("main")
            .unwrap();
        let stream = device.create_stream().unwrap();
        let input = device.alloc::<f32>(8).unwrap();
        let output = device.alloc::<f32>(8).unwrap();
        let params = device.alloc::<u8>(bytes).unwrap();
        let launch = |range: std::ops::Range<usize>| {
            stream.launch(
                &Launch::new(&kernel)
                    .workgroups(1, 1, 1)
                    .buffer(&input)
                    .buffer(params.slice(range))
                    .buffer(&output),
            )
        };
        let error = launch(0..bytes).unwrap_err();
        assert_eq!(error.kind(), xhal_core::ErrorKind::Unsupported, "{error}");
        for needed in [
            "buffer argument 1",
            "maxUniformBufferRange",
            &limit.to_string(),
            &bytes.to_string(),
        ] {
            assert!(error.message().contains(needed), "`{needed}` is missing from: {error}");
        }
        // A view of exactly the limit binds; the same bytes as storage would have too.
        launch(0..limit as usize).unwrap();
        stream.synchronize().unwrap();
    }
}
