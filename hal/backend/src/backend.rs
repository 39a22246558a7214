//! The contract a backend implements, in Rust.
//!
//! [`Backend`] mirrors the C ABI one to one: objects are named by opaque [`Handle`]s, every
//! call takes `&self`, and a backend may be called from any thread. That keeps the plugin
//! export and the loaded-plugin adapter thin, and lets a backend check every handle it is
//! given (the CPU reference backend does: a freed or foreign handle is an error).
//!
//! Validation happens once, in `xhal-core`, before a backend is called: ranges are in bounds,
//! sizes are non-zero, buffers belong to the stream's device. A backend may rely on that, but
//! the reference backend checks again, because it is the specification others are held to.

use crate::error::Result;
use xhal_abi as abi;

/// Declares an opaque handle type: a non-zero `u64` that only the backend that made it can read.
macro_rules! handle_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        pub struct $name(pub u64);
    };
}

handle_type!(
    /// An opened device.
    DeviceHandle
);
handle_type!(
    /// A raw device allocation.
    BufferHandle
);
handle_type!(
    /// An in-order queue of work.
    StreamHandle
);
handle_type!(
    /// A point in a stream.
    EventHandle
);
handle_type!(
    /// Loaded kernel code.
    ModuleHandle
);
handle_type!(
    /// One entry point of a module.
    KernelHandle
);
handle_type!(
    /// A recorded list of copies, fills and launches (ABI 1.4).
    CommandListHandle
);

/// What kind of device this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceType {
    /// A CPU.
    Cpu,
    /// A GPU sharing memory with the host.
    IntegratedGpu,
    /// A GPU with its own memory.
    DiscreteGpu,
    /// Another kind of accelerator.
    Accelerator,
    /// Anything else, or a value this host does not know.
    Other,
}

impl DeviceType {
    /// From an `XHAL_DEVICE_TYPE_*` value; unknown values become `Other`.
    pub fn from_abi(value: u32) -> DeviceType {
        match value {
            abi::XHAL_DEVICE_TYPE_CPU => DeviceType::Cpu,
            abi::XHAL_DEVICE_TYPE_INTEGRATED_GPU => DeviceType::IntegratedGpu,
            abi::XHAL_DEVICE_TYPE_DISCRETE_GPU => DeviceType::DiscreteGpu,
            abi::XHAL_DEVICE_TYPE_ACCELERATOR => DeviceType::Accelerator,
            _ => DeviceType::Other,
        }
    }

    /// The `XHAL_DEVICE_TYPE_*` value.
    pub fn to_abi(self) -> u32 {
        match self {
            DeviceType::Cpu => abi::XHAL_DEVICE_TYPE_CPU,
            DeviceType::IntegratedGpu => abi::XHAL_DEVICE_TYPE_INTEGRATED_GPU,
            DeviceType::DiscreteGpu => abi::XHAL_DEVICE_TYPE_DISCRETE_GPU,
            DeviceType::Accelerator => abi::XHAL_DEVICE_TYPE_ACCELERATOR,
            DeviceType::Other => abi::XHAL_DEVICE_TYPE_OTHER,
        }
    }

    /// Name used by selectors and reports: `cpu`, `integrated_gpu`, `discrete_gpu`, `accelerator`, `other`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::IntegratedGpu => "integrated_gpu",
            DeviceType::DiscreteGpu => "discrete_gpu",
            DeviceType::Accelerator => "accelerator",
            DeviceType::Other => "other",
        }
    }

    /// True for both kinds of GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, DeviceType::IntegratedGpu | DeviceType::DiscreteGpu)
    }
}

impl std::fmt::Display for DeviceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Optional capabilities of a device, as `XHAL_FEATURE_*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features(pub u64);

impl Features {
    /// 16-bit floats in kernels.
    pub const F16: Features = Features(abi::XHAL_FEATURE_F16);
    /// 64-bit floats in kernels.
    pub const F64: Features = Features(abi::XHAL_FEATURE_F64);
    /// 64-bit integers in kernels.
    pub const I64: Features = Features(abi::XHAL_FEATURE_I64);
    /// 32-bit atomics.
    pub const ATOMICS_32: Features = Features(abi::XHAL_FEATURE_ATOMICS_32);
    /// 64-bit atomics.
    pub const ATOMICS_64: Features = Features(abi::XHAL_FEATURE_ATOMICS_64);
    /// Timing events.
    pub const TIMESTAMPS: Features = Features(abi::XHAL_FEATURE_TIMESTAMPS);
    /// Host-mappable memory.
    pub const HOST_MAPPABLE: Features = Features(abi::XHAL_FEATURE_HOST_MAPPABLE);
    /// Kernels take `var<uniform>` bindings natively (ABI 1.2); core lowers them to read-only
    /// storage for a device without it.
    pub const UNIFORM_BUFFERS: Features = Features(abi::XHAL_FEATURE_UNIFORM_BUFFERS);

    /// Every feature this host knows, with its name.
    pub const ALL: [(Features, &'static str); 8] = [
        (Features::F16, "f16"),
        (Features::F64, "f64"),
        (Features::I64, "i64"),
        (Features::ATOMICS_32, "atomics32"),
        (Features::ATOMICS_64, "atomics64"),
        (Features::TIMESTAMPS, "timestamps"),
        (Features::HOST_MAPPABLE, "host_mappable"),
        (Features::UNIFORM_BUFFERS, "uniform_buffers"),
    ];

    /// True when every bit of `other` is set here.
    pub fn contains(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// The names of the features set, in the order of [`Features::ALL`].
    pub fn names(self) -> Vec<&'static str> {
        Features::ALL
            .iter()
            .filter(|(bit, _)| self.contains(*bit))
            .map(|(_, name)| *name)
            .collect()
    }

    /// The names of the features set, then any bits this host does not know as one hex value,
    /// so that nothing a backend reports is silently dropped.
    pub fn describe(self) -> Vec<String> {
        let mut names: Vec<String> = self.names().into_iter().map(str::to_owned).collect();
        let known = Features::ALL.iter().fold(0u64, |bits, (feature, _)| bits | feature.0);
        let unknown = self.0 & !known;
        if unknown != 0 {
            names.push(format!("{unknown:#x}"));
        }
        names
    }

    /// The feature called `name`, if this host knows it.
    pub fn from_name(name: &str) -> Option<Features> {
        Features::ALL
            .iter()
            .find(|(_, known)| *known == name)
            .map(|(bit, _)| *bit)
    }
}

impl std::ops::BitOr for Features {
    type Output = Features;
    fn bitor(self, rhs: Features) -> Features {
        Features(self.0 | rhs.0)
    }
}

/// A kernel code format, as an `XHAL_KERNEL_FORMAT_*` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelFormat(pub u32);

impl KernelFormat {
    /// WGSL source.
    pub const WGSL: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_WGSL);
    /// SPIR-V, Vulkan shader flavour.
    pub const SPIRV_SHADER: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_SPIRV_SHADER);
    /// SPIR-V, OpenCL kernel flavour.
    pub const SPIRV_KERNEL: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_SPIRV_KERNEL);
    /// PTX.
    pub const PTX: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_PTX);
    /// cubin.
    pub const CUBIN: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_CUBIN);
    /// AMD code object.
    pub const HSACO: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_HSACO);
    /// CUDA C++ source.
    pub const CUDA_C: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_CUDA_C);
    /// HIP C++ source.
    pub const HIP_C: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_HIP_C);
    /// OpenCL C source.
    pub const OPENCL_C: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_OPENCL_C);
    /// The CPU backend's built-in test kernels.
    pub const CPU_BUILTIN: KernelFormat = KernelFormat(abi::XHAL_KERNEL_FORMAT_CPU_BUILTIN);

    const NAMES: [(KernelFormat, &'static str); 10] = [
        (KernelFormat::WGSL, "wgsl"),
        (KernelFormat::SPIRV_SHADER, "spirv-shader"),
        (KernelFormat::SPIRV_KERNEL, "spirv-kernel"),
        (KernelFormat::PTX, "ptx"),
        (KernelFormat::CUBIN, "cubin"),
        (KernelFormat::HSACO, "hsaco"),
        (KernelFormat::CUDA_C, "cuda-c"),
        (KernelFormat::HIP_C, "hip-c"),
        (KernelFormat::OPENCL_C, "opencl-c"),
        (KernelFormat::CPU_BUILTIN, "cpu-builtin"),
    ];

    /// The format's name (`wgsl`, `spirv-shader`...), or `vendor-0x...` for unknown values.
    pub fn name(self) -> String {
        KernelFormat::NAMES
            .iter()
            .find(|(format, _)| *format == self)
            .map(|(_, name)| (*name).to_string())
            .unwrap_or_else(|| format!("vendor-{:#x}", self.0))
    }

    /// The format called `name`.
    pub fn from_name(name: &str) -> Option<KernelFormat> {
        KernelFormat::NAMES
            .iter()
            .find(|(_, known)| *known == name)
            .map(|(format, _)| *format)
    }
}

impl std::fmt::Display for KernelFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Everything a backend tells about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Marketing name.
    pub name: String,
    /// Vendor name.
    pub vendor: String,
    /// PCI vendor id, or 0.
    pub vendor_id: u32,
    /// PCI device id, or 0.
    pub device_id: u32,
    /// Kind of device.
    pub device_type: DeviceType,
    /// Identity stable across runs.
    pub uuid: [u8; 16],
    /// PCI bus id, where the device has one.
    pub pci_bus_id: Option<String>,
    /// Driver version.
    pub driver_version: String,
    /// Memory in bytes.
    pub total_memory: u64,
    /// Free memory in bytes at the time of asking.
    pub free_memory: u64,
    /// Largest single allocation in bytes.
    pub max_allocation_size: u64,
    /// Largest workgroup per dimension.
    pub max_workgroup_size: [u32; 3],
    /// Most invocations per workgroup.
    pub max_workgroup_invocations: u32,
    /// Most workgroups per dimension.
    pub max_workgroup_count: [u32; 3],
    /// Workgroup memory in bytes.
    pub max_workgroup_memory: u32,
    /// Subgroup width.
    pub subgroup_size: u32,
    /// Most buffer arguments per launch.
    pub max_buffer_arguments: u32,
    /// Largest scalar block in bytes.
    pub max_scalar_block_size: u32,
    /// Alignment of buffer-argument offsets in bytes.
    pub buffer_offset_alignment: u32,
    /// Optional capabilities.
    pub features: Features,
    /// Accepted kernel formats, most preferred first.
    pub kernel_formats: Vec<KernelFormat>,
}

impl DeviceInfo {
    /// The uuid in the usual 8-4-4-4-12 hex form.
    pub fn uuid_string(&self) -> String {
        let hex: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

/// The information exactly as reported, with names added where the raw value is a code: the
/// uuid as text, features and kernel formats both as names and as raw values, so a report
/// shows what the backend said even when this host does not know a bit or a format.
impl serde::Serialize for DeviceInfo {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("DeviceInfo", 24)?;
        out.serialize_field("name", &self.name)?;
        out.serialize_field("vendor", &self.vendor)?;
        out.serialize_field("vendor_id", &self.vendor_id)?;
        out.serialize_field("device_id", &self.device_id)?;
        out.serialize_field("type", self.device_type.name())?;
        out.serialize_field("uuid", &self.uuid_string())?;
        out.serialize_field("pci_bus_id", &self.pci_bus_id)?;
        out.serialize_field("driver_version", &self.driver_version)?;
        out.serialize_field("total_memory", &self.total_memory)?;
        out.serialize_field("free_memory", &self.free_memory)?;
        out.serialize_field("max_allocation_size", &self.max_allocation_size)?;
        out.serialize_field("max_workgroup_size", &self.max_workgroup_size)?;
        out.serialize_field("max_workgroup_invocations", &self.max_workgroup_invocations)?;
        out.serialize_field("max_workgroup_count", &self.max_workgroup_count)?;
        out.serialize_field("max_workgroup_memory", &self.max_workgroup_memory)?;
        out.serialize_field("subgroup_size", &self.subgroup_size)?;
        out.serialize_field("max_buffer_arguments", &self.max_buffer_arguments)?;
        out.serialize_field("max_scalar_block_size", &self.max_scalar_block_size)?;
        out.serialize_field("buffer_offset_alignment", &self.buffer_offset_alignment)?;
        out.serialize_field("features", &self.features.describe())?;
        out.serialize_field("feature_bits", &self.features.0)?;
        let formats: Vec<String> = self.kernel_formats.iter().map(|format| format.name()).collect();
        out.serialize_field("kernel_formats", &formats)?;
        let codes: Vec<u32> = self.kernel_formats.iter().map(|format| format.0).collect();
        out.serialize_field("kernel_format_codes", &codes)?;
        out.end()
    }
}

/// One buffer argument of a launch: a raw allocation and the byte range the kernel sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferArg {
    /// The allocation.
    pub buffer: BufferHandle,
    /// Offset of the view in bytes.
    pub offset: u64,
    /// Length of the view in bytes.
    pub size: u64,
}

/// A kernel launch, following the xhal argument ABI.
#[derive(Debug, Clone, Copy)]
pub struct LaunchArgs<'a> {
    /// The kernel.
    pub kernel: KernelHandle,
    /// Workgroups in x, y, z.
    pub workgroups: [u32; 3],
    /// Buffer arguments in parameter order.
    pub buffers: &'a [BufferArg],
    /// The scalar block (WGSL layout rules).
    pub scalars: &'a [u8],
}

/// A device's memory as its driver reports it at one moment (`cuMemGetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes the device could still allocate.
    pub free: u64,
    /// Bytes of memory the device has.
    pub total: u64,
}

/// The stream priorities a device schedules by (ABI 1.5), numbered as CUDA numbers them: a
/// lower number is more urgent, `least` is what a plain stream has (always 0), `greatest <= 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPriorities {
    /// The priority of a stream made without one: the least urgent.
    pub least: i32,
    /// The most urgent priority, numerically lower than or equal to `least`.
    pub greatest: i32,
}

impl StreamPriorities {
    /// What a device that schedules every stream alike has: one priority, 0.
    pub const SINGLE: StreamPriorities = StreamPriorities { least: 0, greatest: 0 };

    /// Whether `priority` is one of the device's priorities.
    pub fn contains(self, priority: i32) -> bool {
        (self.greatest..=self.least).contains(&priority)
    }

    /// `priority` moved into the range, as CUDA clamps a stream's priority.
    pub fn clamp(self, priority: i32) -> i32 {
        priority.clamp(self.greatest, self.least)
    }
}

/// Name and version of a backend, and the ABI it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// Backend name: `cpu`, `vulkan`, `cuda`...
    pub name: String,
    /// Version of the backend's code.
    pub version: String,
    /// ABI version (major, minor) the backend implements.
    pub abi_version: (u32, u32),
}

/// A backend: the whole contract a plugin fulfils, in Rust.
///
/// Every method may be called from any thread. Handles come only from this backend; core
/// never passes a destroyed handle, but a strict backend reports one as
/// [`ErrorKind::InvalidHandle`](crate::ErrorKind::InvalidHandle) rather than trusting it.
/// Enqueueing methods (`stream_*` except `synchronize` and `query`) must not block on the
/// work they enqueue. Errors found while the work executes stick to the stream: they are
/// returned by the next `stream_synchronize`, by waits on events recorded after the failure,
/// and by every later call on that stream.
pub trait Backend: Send + Sync + 'static {
    /// Name, version and ABI version.
    fn info(&self) -> BackendInfo;

    /// Number of devices. A missing driver is an error of kind `DriverUnavailable` with the reason.
    fn device_count(&self) -> Result<u32>;
    /// Describes device `index` without opening it.
    fn device_info(&self, index: u32) -> Result<DeviceInfo>;
    /// Opens device `index`.
    fn device_open(&self, index: u32) -> Result<DeviceHandle>;
    /// Closes a device.
    fn device_close(&self, device: DeviceHandle);
    /// The device's free and total memory now (ABI 1.1). The default says the backend cannot
    /// tell.
    fn device_memory_usage(&self, device: DeviceHandle) -> Result<MemoryUsage> {
        let _ = device;
        Err(crate::Error::unsupported(format!(
            "backend `{}` does not report its devices' memory usage",
            self.info().name
        )))
    }

    /// The device's timestamp clock read together with the host's (ABI 1.3). The default says
    /// the device has no absolute timestamps.
    fn device_clock(&self, device: DeviceHandle) -> Result<crate::ClockSample> {
        let _ = device;
        Err(crate::Error::unsupported(format!(
            "backend `{}` has no device clock to calibrate",
            self.info().name
        )))
    }

    /// Allocates `size` (> 0) bytes.
    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle>;
    /// Frees an allocation no queued work uses any more.
    fn buffer_free(&self, buffer: BufferHandle);

    /// Creates a stream.
    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle>;
    /// The device's stream priorities (ABI 1.5). The default says the device schedules every
    /// stream alike; core then gives every stream priority 0.
    fn device_stream_priorities(&self, device: DeviceHandle) -> Result<StreamPriorities> {
        let _ = device;
        Err(crate::Error::unsupported(format!(
            "backend `{}` schedules every stream alike (no stream priorities)",
            self.info().name
        )))
    }
    /// Creates a stream of `priority`, one of [`device_stream_priorities`](Backend::device_stream_priorities)
    /// (ABI 1.5). The default says the device has no priorities.
    fn stream_create_with_priority(&self, device: DeviceHandle, priority: i32) -> Result<StreamHandle> {
        let _ = (device, priority);
        Err(crate::Error::unsupported(format!(
            "backend `{}` schedules every stream alike (no stream priorities)",
            self.info().name
        )))
    }
    /// Waits for the stream's work, then destroys it.
    fn stream_destroy(&self, stream: StreamHandle);
    /// Enqueues a host-to-device copy.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes that stay valid and unchanged until the
    /// write completes.
    unsafe fn stream_write(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a device-to-host copy.
    ///
    /// # Safety
    /// `destination` must point to `size` writable bytes that stay valid, and are not touched
    /// by anyone else, until the read completes.
    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a device-to-device copy; the ranges may overlap.
    fn stream_copy(
        &self,
        stream: StreamHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a fill of `size` bytes with a 1-, 2- or 4-byte `pattern`.
    fn stream_fill(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()>;
    /// Enqueues a kernel launch.
    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()>;
    /// Enqueues a record of `event`.
    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()>;
    /// Makes later work on `stream` wait for the event's most recent record.
    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()>;
    /// Blocks until the stream is idle; returns its sticky error if any.
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()>;
    /// True when everything enqueued has completed.
    fn stream_query(&self, stream: StreamHandle) -> Result<bool>;

    /// Creates an event; `timing` asks for timestamps.
    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle>;
    /// Destroys an event.
    fn event_destroy(&self, event: EventHandle);
    /// True when the most recent record completed (or none was made).
    fn event_query(&self, event: EventHandle) -> Result<bool>;
    /// Blocks until the most recent record completed.
    fn event_synchronize(&self, event: EventHandle) -> Result<()>;
    /// Nanoseconds from `start` to `end`; both completed timing events.
    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64>;
    /// When the latest record of a completed timing event completed, on the device's timestamp
    /// clock, in nanoseconds (ABI 1.3). The default says the device has no absolute timestamps.
    fn event_timestamp(&self, event: EventHandle) -> Result<u64> {
        let _ = event;
        Err(crate::Error::unsupported(format!(
            "backend `{}` has no absolute event timestamps",
            self.info().name
        )))
    }

    /// Loads kernel code.
    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle>;
    /// Destroys a module.
    fn module_destroy(&self, module: ModuleHandle);
    /// Finds an entry point.
    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle>;
    /// Releases a kernel.
    fn kernel_destroy(&self, kernel: KernelHandle);

    /// Creates an empty command list on `device`, open for appends (ABI 1.4). The default says
    /// the backend has none; core then replays graphs operation by operation.
    fn command_list_create(&self, device: DeviceHandle) -> Result<CommandListHandle> {
        let _ = device;
        Err(crate::Error::unsupported(format!(
            "backend `{}` has no command lists",
            self.info().name
        )))
    }
    /// Appends a device-to-device copy to an open list, with `stream_copy`'s rules.
    fn command_list_append_copy(
        &self,
        list: CommandListHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let _ = (list, source, source_offset, destination, destination_offset, size);
        Err(no_command_lists(self))
    }
    /// Appends a fill to an open list, with `stream_fill`'s rules.
    fn command_list_append_fill(
        &self,
        list: CommandListHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let _ = (list, buffer, offset, size, pattern);
        Err(no_command_lists(self))
    }
    /// Appends a launch to an open list, with `stream_launch`'s rules.
    fn command_list_append_launch(&self, list: CommandListHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let _ = (list, launch);
        Err(no_command_lists(self))
    }
    /// Closes a list for appends and readies it for submission.
    fn command_list_finish(&self, list: CommandListHandle) -> Result<()> {
        let _ = list;
        Err(no_command_lists(self))
    }
    /// Replaces the arguments of launch `index` of a finished list with no pending submission:
    /// same kernel, same count of views each of the same size, a scalar block of the same size.
    fn command_list_update_launch(&self, list: CommandListHandle, index: u32, launch: &LaunchArgs<'_>) -> Result<()> {
        let _ = (list, index, launch);
        Err(no_command_lists(self))
    }
    /// Enqueues every command of a finished list on `stream`.
    fn stream_submit_command_list(&self, stream: StreamHandle, list: CommandListHandle) -> Result<()> {
        let _ = (stream, list);
        Err(no_command_lists(self))
    }
    /// Destroys a list with no pending submission.
    fn command_list_destroy(&self, list: CommandListHandle) {
        let _ = list;
    }

    /// Maps `size` (> 0) bytes of `buffer` from `offset` for the host (ABI 1.4): `flags` is a
    /// non-empty set of `XHAL_MAP_READ` and `XHAL_MAP_WRITE`. No queued work may use the
    /// buffer while it is mapped. The default says the backend cannot map.
    fn buffer_map(&self, buffer: BufferHandle, offset: u64, size: u64, flags: u32) -> Result<*mut u8> {
        let _ = (buffer, offset, size, flags);
        Err(crate::Error::unsupported(format!(
            "backend `{}` cannot map device memory for the host",
            self.info().name
        )))
    }

    /// `size` (> 0) bytes of host memory the device's transfers reach directly (ABI 1.4). The
    /// default says the device has none; core then uses ordinary host memory.
    fn host_memory_allocate(&self, device: DeviceHandle, size: u64) -> Result<*mut u8> {
        let _ = (device, size);
        Err(crate::Error::unsupported(format!(
            "backend `{}` has no host memory of its own (pinned memory)",
            self.info().name
        )))
    }

    /// Frees memory `host_memory_allocate` returned, once no queued transfer uses it.
    fn host_memory_free(&self, device: DeviceHandle, pointer: *mut u8) {
        let _ = (device, pointer);
    }

    /// Ends a mapping `buffer_map` returned `pointer` for.
    fn buffer_unmap(&self, buffer: BufferHandle, pointer: *mut u8) -> Result<()> {
        let _ = (buffer, pointer);
        Err(crate::Error::unsupported(format!(
            "backend `{}` cannot map device memory for the host",
            self.info().name
        )))
    }
}

/// What a backend without command lists answers to every command-list call.
fn no_command_lists<B: Backend + ?Sized>(backend: &B) -> crate::Error {
    crate::Error::unsupported(format!("backend `{}` has no command lists", backend.info().name))
}
