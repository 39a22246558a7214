//! An opened device: where buffers, streams, events and modules are created.

use crate::allocator::{CachingAllocator, MemoryStats};
use crate::backend::{Backend, DeviceHandle, DeviceInfo, Features, KernelFormat};
use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::module::Module;
use crate::stream::Stream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_kernel::ModuleBundle;

/// Shared state of an opened device. Every object made on the device holds it, so the
/// device closes only after the last of them is gone.
pub(crate) struct DeviceShared {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) backend_name: String,
    pub(crate) index: u32,
    pub(crate) handle: DeviceHandle,
    pub(crate) info: DeviceInfo,
    pub(crate) allocator: CachingAllocator,
    /// Unique in the process: two opened devices never share it, so objects of one device
    /// cannot be handed to another even when both come from the same backend.
    pub(crate) id: u64,
    /// `backend:index`, made once for the records of a trace.
    pub(crate) trace_label: Arc<str>,
}

impl DeviceShared {
    pub(crate) fn label(&self) -> String {
        format!("{}:{}", self.backend_name, self.index)
    }

    /// Checks that an object made on `owner` may be used with this device.
    pub(crate) fn check_same_device(&self, owner: &DeviceShared, what: &str) -> Result<()> {
        if owner.id == self.id {
            Ok(())
        } else {
            Err(Error::invalid_handle(format!(
                "{what} belongs to device {} ({}), but is used on device {} ({})",
                owner.label(),
                owner.info.name,
                self.label(),
                self.info.name
            )))
        }
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // Cached blocks must go back before the device closes under them.
        self.allocator.empty_cache();
        self.backend.device_close(self.handle);
    }
}

/// An opened device. Cheap to clone; all clones are the same device.
#[derive(Clone)]
pub struct Device {
    pub(crate) shared: Arc<DeviceShared>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("label", &self.label())
            .field("name", &self.shared.info.name)
            .finish()
    }
}

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

impl Device {
    /// Opens device `index` of `backend`.
    pub(crate) fn open(backend: Arc<dyn Backend>, backend_name: &str, index: u32) -> Result<Device> {
        let info = backend.device_info(index)?;
        let handle = backend.device_open(index)?;
        tracing::debug!(backend = backend_name, index, name = %info.name, "opened device");
        let allocator = CachingAllocator::new(backend.clone(), handle, info.max_allocation_size);
        Ok(Device {
            shared: Arc::new(DeviceShared {
                backend,
                backend_name: backend_name.to_owned(),
                index,
                handle,
                info,
                allocator,
                id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
                trace_label: Arc::from(format!("{backend_name}:{index}")),
            }),
        })
    }

    /// `len` zeroed elements of host memory for transfers: page-locked where the device has
    /// such memory (ABI 1.4, [`PinnedBuffer::is_pinned`](crate::PinnedBuffer::is_pinned)),
    /// ordinary host memory where it does not. [`Stream::write_from_pinned`](crate::Stream::write_from_pinned)
    /// and [`Stream::read_into_pinned`](crate::Stream::read_into_pinned) queue transfers from
    /// and to it without waiting.
    pub fn alloc_pinned<T: bytemuck::Pod>(&self, len: usize) -> Result<crate::PinnedBuffer<T>> {
        crate::PinnedBuffer::allocate(self.shared.clone(), len)
    }

    /// A builder that records stream work into a [`Graph`](crate::Graph) replayed many times.
    pub fn graph(&self) -> crate::GraphBuilder {
        crate::GraphBuilder::new(self.shared.clone())
    }

    /// Everything the backend reported about the device when it was opened.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.shared.info.name
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &str {
        &self.shared.backend_name
    }

    /// Index of the device within its backend.
    pub fn index(&self) -> u32 {
        self.shared.index
    }

    /// `backend:index`, as a selector would name it.
    pub fn label(&self) -> String {
        self.shared.label()
    }

    /// Whether the device has every feature in `features`.
    pub fn has_features(&self, features: Features) -> bool {
        self.shared.info.features.contains(features)
    }

    /// Allocates a buffer of `len` elements. A zero-length buffer is valid and owns no device
    /// memory; any non-empty access to it is out of bounds. Contents start undefined (the CPU
    /// reference backend fills fresh memory with a poison pattern).
    pub fn alloc<T: bytemuck::Pod>(&self, len: usize) -> Result<Buffer<T>> {
        Buffer::allocate(self.shared.clone(), len, None).map(|(buffer, _)| buffer)
    }

    /// Allocates a buffer and fills it with `data`, waiting until the data is on the device.
    pub fn alloc_from<T: bytemuck::Pod>(&self, stream: &Stream, data: &[T]) -> Result<Buffer<T>> {
        let buffer = self.alloc::<T>(data.len())?;
        stream.write(&buffer, data)?;
        Ok(buffer)
    }

    /// Creates an in-order stream, of the device's least urgent priority (0).
    pub fn create_stream(&self) -> Result<Stream> {
        Stream::create(self.shared.clone())
    }

    /// The stream priorities the device schedules by (ABI 1.5): a lower number is more urgent,
    /// as in CUDA; `least` (0) is what [`create_stream`](Device::create_stream) gives.
    /// [`StreamPriorities::SINGLE`](crate::StreamPriorities::SINGLE) on a device that schedules
    /// every stream alike, such as one whose plugin predates ABI 1.5.
    pub fn stream_priorities(&self) -> Result<crate::StreamPriorities> {
        match self.shared.backend.device_stream_priorities(self.shared.handle) {
            Ok(priorities) => Ok(priorities),
            Err(error) if error.kind() == crate::ErrorKind::Unsupported => Ok(crate::StreamPriorities::SINGLE),
            Err(error) => Err(error.context(format!("stream priorities of {}", self.label()))),
        }
    }

    /// Creates an in-order stream whose work the device prefers to that of less urgent streams
    /// when both are ready: a hint about order, never about results. `priority` outside the
    /// device's [`stream_priorities`](Device::stream_priorities) is clamped into them, as CUDA
    /// clamps it, so that code written for one device's range runs on every device;
    /// [`Stream::priority`] says what the stream got.
    pub fn create_stream_with_priority(&self, priority: i32) -> Result<Stream> {
        let priorities = self.stream_priorities()?;
        if priorities == crate::StreamPriorities::SINGLE {
            return Stream::create(self.shared.clone());
        }
        Stream::create_with_priority(self.shared.clone(), priorities.clamp(priority))
    }

    /// Creates an event; it records timestamps when the device supports them.
    pub fn create_event(&self) -> Result<Event> {
        let timing = self.has_features(Features::TIMESTAMPS);
        Event::create(self.shared.clone(), timing)
    }

    /// Creates an event without timestamps (cheaper on some devices).
    pub fn create_event_without_timing(&self) -> Result<Event> {
        Event::create(self.shared.clone(), false)
    }

    /// Loads kernel code in `format`, as the device takes it. Such a module has no
    /// reflection: launches are checked only by the backend. Prefer [`Device::load_wgsl`].
    pub fn load_module(&self, format: KernelFormat, code: &[u8]) -> Result<Module> {
        Module::load(self.shared.clone(), format, code, None)
    }

    /// Loads a WGSL kernel: parsed, validated and reflected on the host, then handed to the
    /// device in the best format it accepts (WGSL itself, or a translation). Launches of its
    /// kernels are checked against the reflected interface.
    pub fn load_wgsl(&self, source: &str) -> Result<Module> {
        self.load_bundle(&ModuleBundle::from_wgsl(source))
    }

    /// [`Device::load_wgsl`] with values for the module's `override` constants, by name (or
    /// by `@id`, written as a number): `&[("block_size", 16.0), ("scale", 0.5)]`. A value is
    /// a number as WebGPU gives pipeline constants (booleans as 0 and 1) and must fit the
    /// override's type; a name the module does not declare is an error that lists those it
    /// does. Overrides without a value keep their defaults; one with neither is an error
    /// naming it. The workgroup size may depend on them.
    pub fn load_wgsl_with_overrides(&self, source: &str, overrides: &[(&str, f64)]) -> Result<Module> {
        let values: Vec<(String, f64)> = overrides
            .iter()
            .map(|&(name, value)| (name.to_owned(), value))
            .collect();
        let source = xhal_kernel::apply_overrides(source, &values)?;
        self.load_wgsl(&source)
    }

    /// Loads the variant of `bundle` that suits this device (see [`ModuleBundle::pick`]):
    /// a native variant first, then a portable IR made from the WGSL, then source.
    pub fn load_bundle(&self, bundle: &ModuleBundle) -> Result<Module> {
        let accepted: Vec<u32> = self.shared.info.kernel_formats.iter().map(|format| format.0).collect();
        let refuse_missing = |required: u64| {
            let missing = Features(required & !self.shared.info.features.0);
            if missing.0 == 0 {
                return Ok(());
            }
            Err(Error::unsupported(format!(
                "the kernel needs {} which device {} ({}) does not have",
                missing.names().join(", "),
                self.label(),
                self.name()
            )))
        };
        // Before translating: a translator may refuse the very feature the device lacks
        // (Kernel SPIR-V has no 64-bit atomics), and the error should name the feature.
        if let Ok(Some(required)) = bundle.wgsl_required_features() {
            refuse_missing(required)?;
        }
        let options = xhal_kernel::TranslateOptions {
            native_uniforms: self.has_features(Features::UNIFORM_BUFFERS),
        };
        let resolved = bundle
            .resolve_with(&accepted, options)
            .map_err(|error| Error::from(error).context(format!("loading a kernel for {}", self.label())))?;
        refuse_missing(resolved.required_features)?;
        tracing::debug!(
            device = %self.label(),
            format = %KernelFormat(resolved.format),
            translated = resolved.translated,
            "loading kernel"
        );
        Module::load(
            self.shared.clone(),
            KernelFormat(resolved.format),
            &resolved.bytes,
            resolved.reflection,
        )
    }

    /// The device's free and total memory as its driver reports them now
    /// (`torch.cuda.mem_get_info`). `Unsupported` from a backend that cannot tell, such as a
    /// plugin built for ABI 1.0. Memory the caching allocator holds for reuse counts as used.
    pub fn memory_usage(&self) -> Result<crate::MemoryUsage> {
        self.shared
            .backend
            .device_memory_usage(self.shared.handle)
            .map_err(|error| error.context(format!("memory usage of {}", self.label())))
    }

    /// The device's timestamp clock read together with the host's monotonic clock: what places
    /// [`Event::device_timestamp`](crate::Event::device_timestamp) values on the host's clock
    /// ([`ClockSample::to_instant`](crate::ClockSample::to_instant)). `Unsupported` from a
    /// device without absolute timestamps, such as a plugin built before ABI 1.3.
    pub fn clock(&self) -> Result<crate::ClockSample> {
        self.shared
            .backend
            .device_clock(self.shared.handle)
            .map_err(|error| error.context(format!("clock of {}", self.label())))
    }

    /// Allocator statistics, as PyTorch names them.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared.allocator.stats()
    }

    /// Bytes in live buffers (`torch.cuda.memory_allocated`).
    pub fn memory_allocated(&self) -> u64 {
        self.memory_stats().allocated
    }

    /// Bytes held from the backend (`torch.cuda.memory_reserved`).
    pub fn memory_reserved(&self) -> u64 {
        self.memory_stats().reserved
    }

    /// Peak of `memory_allocated` (`torch.cuda.max_memory_allocated`).
    pub fn max_memory_allocated(&self) -> u64 {
        self.memory_stats().peak_allocated
    }

    /// Frees cached blocks back to the backend (`torch.cuda.empty_cache`).
    pub fn empty_cache(&self) {
        self.shared.allocator.empty_cache();
    }

    /// Resets the peak statistics (`torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peak_memory_stats(&self) {
        self.shared.allocator.reset_peak_stats();
    }
}
