//! An opened wgpu device: its queue, error capture, memory accounting and the transfer
//! kernel that moves bytes wherever copies need not be 4-byte aligned.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use xhal_backend::{ClockSample, DeviceInfo, DriverDevice, Error, ErrorKind, Features, Object, Result};

use crate::instance::{AdapterEntry, TRANSFER_IMMEDIATE_BYTES};
use crate::staging::StagingPool;
use crate::WgpuDriver;

/// A buffer argument as a bind group sees it: buffer serial, offset, bound size.
pub(crate) type BindingKey = (u64, u64, u64);

/// Bind groups kept for reuse, at most this many per device.
const CACHED_BIND_GROUPS: usize = 64;

/// A bind group of one pipeline for one set of buffer arguments.
struct CachedBindGroup {
    pipeline: u64,
    key: Vec<BindingKey>,
    group: wgpu::BindGroup,
}

/// One wgpu device, shared by every object made on it.
pub struct DeviceShared {
    pub(crate) info: DeviceInfo,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) limits: wgpu::Limits,
    /// Why the device was lost, once it was.
    lost: Arc<Mutex<Option<String>>>,
    /// Errors wgpu reported outside any error scope; the next stream to synchronise reports them.
    uncaptured: Arc<Mutex<Vec<String>>>,
    allocated: AtomicU64,
    transfer: OnceLock<std::result::Result<TransferKernel, Error>>,
    /// Bound as the unused source of a fill, which may not bind its destination twice.
    pub(crate) placeholder: wgpu::Buffer,
    /// Launches that repeat their arguments reuse the bind group, as code written for wgpu
    /// directly would; most recently used last.
    bind_groups: Mutex<Vec<CachedBindGroup>>,
    /// Idle staging buffers for large writes, kept mapped.
    pub(crate) write_staging: Arc<StagingPool>,
    /// Idle staging buffers for reads.
    pub(crate) read_staging: Arc<StagingPool>,
}

/// wgpu does not report memory usage: the default says so.
impl DriverDevice<WgpuDriver> for Arc<DeviceShared> {
    /// The round trip of a timestamp written on a stream of its own: wgpu has no call that
    /// reads the device's clock with the host's.
    fn clock(device: &Arc<Object<Arc<DeviceShared>>>) -> Result<ClockSample> {
        let device: &Arc<DeviceShared> = device;
        if !device.info.features.contains(Features::TIMESTAMPS) {
            return Err(Error::unsupported(format!(
                "{} has no timestamps, so no device clock",
                device.name()
            )));
        }
        ClockSample::by_round_trip(CALIBRATION_TRIES, || crate::stream::Stream::clock_mark(device))
    }
}

/// Round trips a clock reading takes the shortest of.
const CALIBRATION_TRIES: usize = 3;

impl DeviceShared {
    /// Timestamp ticks as nanoseconds of the device's clock.
    pub(crate) fn nanoseconds(&self, ticks: u64) -> u64 {
        let period = f64::from(self.queue.get_timestamp_period());
        if period == 1.0 {
            ticks
        } else {
            (ticks as f64 * period).round() as u64
        }
    }
}

impl DeviceShared {
    pub(crate) fn open(entry: &AdapterEntry) -> Result<DeviceShared> {
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("xhal"),
            required_features: entry.features,
            required_limits: entry.limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(entry.adapter.request_device(&descriptor)).map_err(|error| {
            Error::new(
                ErrorKind::DriverUnavailable,
                format!("wgpu could not open {}: {error}", entry.info.name),
            )
        })?;
        let lost = Arc::new(Mutex::new(None));
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        {
            let lost = Arc::clone(&lost);
            device.set_device_lost_callback(move |reason, message| {
                *lost.lock() = Some(format!("{reason:?}: {message}"));
            });
        }
        {
            // wgpu's default handler panics. Every call here runs inside error scopes, so
            // this only sees what escapes them; it is kept and reported, never dropped.
            let uncaptured = Arc::clone(&uncaptured);
            device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
                tracing::error!(%error, "uncaptured wgpu error");
                uncaptured.lock().push(error.to_string());
            }));
        }
        let placeholder = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("xhal placeholder"),
            size: 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        Ok(DeviceShared {
            info: entry.info.clone(),
            device,
            queue,
            limits: entry.limits.clone(),
            lost,
            uncaptured,
            allocated: AtomicU64::new(0),
            transfer: OnceLock::new(),
            placeholder,
            bind_groups: Mutex::new(Vec::new()),
            write_staging: Arc::default(),
            read_staging: Arc::default(),
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.info.name
    }

    /// `DeviceLost` once the device is gone.
    pub(crate) fn check_alive(&self) -> Result<()> {
        match self.lost.lock().as_ref() {
            Some(reason) => Err(Error::new(
                ErrorKind::DeviceLost,
                format!("wgpu device {} was lost ({reason})", self.name()),
            )),
            None => Ok(()),
        }
    }

    /// The errors wgpu reported outside any scope since the last call, as one error.
    pub(crate) fn take_uncaptured(&self) -> Option<Error> {
        let errors = std::mem::take(&mut *self.uncaptured.lock());
        if errors.is_empty() {
            return None;
        }
        Some(Error::internal(format!(
            "wgpu reported on device {}: {}",
            self.name(),
            errors.join("; ")
        )))
    }

    /// Counts `size` bytes against the device's memory, or refuses them as out of memory.
    pub(crate) fn reserve(&self, size: u64) -> Result<()> {
        let total = self.info.total_memory;
        let limit = self.info.max_allocation_size;
        if size > limit {
            return Err(Error::out_of_memory(format!(
                "an allocation of {size} bytes exceeds the largest buffer of {}, {limit} bytes",
                self.name()
            )));
        }
        let mut current = self.allocated.load(Ordering::Relaxed);
        loop {
            let wanted = current.checked_add(size).filter(|wanted| *wanted <= total);
            let Some(wanted) = wanted else {
                return Err(Error::out_of_memory(format!(
                    "an allocation of {size} bytes does not fit: {current} of {total} bytes of {} are in use",
                    self.name()
                )));
            };
            match self
                .allocated
                .compare_exchange_weak(current, wanted, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(actual) => current = actual,
            }
        }
    }

    pub(crate) fn unreserve(&self, size: u64) {
        self.allocated.fetch_sub(size, Ordering::Relaxed);
    }

    pub(crate) fn cached_bind_group(&self, pipeline: u64, key: &[BindingKey]) -> Option<wgpu::BindGroup> {
        let mut cache = self.bind_groups.lock();
        let position = cache
            .iter()
            .rposition(|cached| cached.pipeline == pipeline && cached.key == key)?;
        let hit = cache.remove(position);
        let group = hit.group.clone();
        cache.push(hit);
        Some(group)
    }

    pub(crate) fn cache_bind_group(&self, pipeline: u64, key: Vec<BindingKey>, group: wgpu::BindGroup) {
        let mut cache = self.bind_groups.lock();
        if cache.len() >= CACHED_BIND_GROUPS {
            cache.remove(0);
        }
        cache.push(CachedBindGroup { pipeline, key, group });
    }

    /// Drops the cached bind groups that name a freed buffer, so the cache never keeps its
    /// memory alive.
    pub(crate) fn forget_buffer(&self, buffer: u64) {
        self.bind_groups
            .lock()
            .retain(|cached| cached.key.iter().all(|(serial, _, _)| *serial != buffer));
    }

    /// Drops the cached bind groups of a pipeline that is gone.
    pub(crate) fn forget_pipeline(&self, pipeline: u64) {
        self.bind_groups.lock().retain(|cached| cached.pipeline != pipeline);
    }

    /// Runs `operation` inside wgpu error scopes and returns what it produced, or the first
    /// error wgpu reported while it ran.
    pub(crate) fn capture<T>(&self, what: &str, operation: impl FnOnce() -> T) -> Result<T> {
        let out_of_memory = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = operation();
        // Scopes are popped innermost first; on native wgpu the futures are ready at once.
        let errors = [
            pollster::block_on(validation.pop()),
            pollster::block_on(internal.pop()),
            pollster::block_on(out_of_memory.pop()),
        ];
        match errors.into_iter().flatten().next() {
            None => Ok(value),
            Some(error) => Err(self.convert(what, error)),
        }
    }

    fn convert(&self, what: &str, error: wgpu::Error) -> Error {
        self.check_alive().err().unwrap_or_else(|| match &error {
            wgpu::Error::OutOfMemory { .. } => {
                Error::out_of_memory(format!("{what} on {}: wgpu ran out of memory: {error}", self.name()))
            }
            wgpu::Error::Validation { description, .. } => {
                Error::internal(format!("{what} on {}: wgpu refused it: {description}", self.name()))
            }
            wgpu::Error::Internal { description, .. } => {
                Error::internal(format!("{what} on {}: wgpu internal error: {description}", self.name()))
            }
        })
    }

    pub(crate) fn transfer_kernel(&self) -> Result<&TransferKernel> {
        self.transfer
            .get_or_init(|| TransferKernel::new(self))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Waits for submission `index` (or everything submitted) and runs the callbacks it
    /// makes ready.
    pub(crate) fn wait(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: index,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|error| {
                self.check_alive()
                    .err()
                    .unwrap_or_else(|| Error::internal(format!("waiting for work on {} failed: {error}", self.name())))
            })
    }

    /// Runs the callbacks of whatever has completed, without blocking.
    pub(crate) fn poll(&self) -> Result<()> {
        self.device.poll(wgpu::PollType::Poll).map(|_| ()).map_err(|error| {
            self.check_alive()
                .err()
                .unwrap_or_else(|| Error::internal(format!("polling {} failed: {error}", self.name())))
        })
    }
}

/// Copies and fills at any byte offset and length: each invocation owns one 32-bit word of
/// the destination and rewrites only the bytes inside the range, so neighbouring bytes stay
/// as they were. wgpu's own copies and `write_buffer` need 4-byte alignment.
const TRANSFER_SOURCE: &str = r#"
struct Transfer {
    first_word: u32,
    word_count: u32,
    begin: u32,
    end: u32,
    source_base: u32,
    fill: u32,
    pattern: u32,
    columns: u32,
}
var<immediate> transfer: Transfer;
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> destination: array<u32>;

@compute @workgroup_size(64)
fn transfer_bytes(@builtin(global_invocation_id) id: vec3<u32>) {
    let word = id.x + id.y * transfer.columns;
    if word >= transfer.word_count {
        return;
    }
    let old = destination[transfer.first_word + word];
    var result = 0u;
    for (var lane = 0u; lane < 4u; lane++) {
        let position = word * 4u + lane;
        var byte = (old >> (8u * lane)) & 0xffu;
        if position >= transfer.begin && position < transfer.end {
            if transfer.fill != 0u {
                byte = (transfer.pattern >> (8u * lane)) & 0xffu;
            } else {
                let at = transfer.source_base + position - transfer.begin;
                byte = (source[at / 4u] >> (8u * (at % 4u))) & 0xffu;
            }
        }
        result |= byte << (8u * lane);
    }
    destination[transfer.first_word + word] = result;
}
"#;

/// Invocations per workgroup of the transfer kernel.
pub(crate) const TRANSFER_WORKGROUP: u32 = 64;

/// The transfer kernel's pipeline and layout.
pub(crate) struct TransferKernel {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

impl TransferKernel {
    fn new(device: &DeviceShared) -> Result<TransferKernel> {
        device.capture("building the transfer kernel", || {
            let module = device.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("xhal transfer"),
                source: wgpu::ShaderSource::Wgsl(TRANSFER_SOURCE.into()),
            });
            let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            };
            let layout = device
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("xhal transfer"),
                    entries: &[storage(0, true), storage(1, false)],
                });
            let pipeline_layout = device.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("xhal transfer"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: TRANSFER_IMMEDIATE_BYTES,
            });
            let pipeline = device.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("xhal transfer"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("transfer_bytes"),
                compilation_options: Default::default(),
                cache: None,
            });
            TransferKernel { pipeline, layout }
        })
    }
}
