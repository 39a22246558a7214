//! Streams and events on timeline semaphores.
//!
//! A stream records its operations into a command buffer and submits them in batches: when the
//! stream must make progress (synchronize, query, an event record, a host read through
//! staging) or when [`BATCH_LIMIT`] commands are waiting. Every submission signals the
//! stream's timeline semaphore with the next value, so "everything up to submission n is done"
//! is one counter. An event record is such a value; a wait on an event is a semaphore wait in
//! the stream's next submission.
//!
//! Host writes copy the data into staging memory when they are enqueued, and host reads copy
//! out of staging when their submission is seen to complete; both are ordered with the
//! stream's other work by the GPU copy between staging and the buffer. When the stream is idle
//! and the buffer's memory is mapped (lavapipe, integrated GPUs), the host copies directly.

use crate::device::Gpu;
use crate::instance::vk_error;
use crate::memory::{DeviceBuffer, MappedPtr, MemoryKind};
use crate::module::Pipeline;
use crate::reflect::BindingKind;
use crate::VulkanDriver;
use ash::vk;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use xhal_backend::{CopyOverlap, DriverEvent, DriverStream, Error, Features, Launch, Object, Result};

/// Commands recorded before a stream submits without being asked to.
const BATCH_LIMIT: u32 = 256;
/// Descriptor sets per descriptor pool.
const SETS_PER_POOL: u32 = 256;
/// Descriptors of each type (storage buffer, uniform buffer) per descriptor pool.
const DESCRIPTORS_PER_POOL: u32 = 2048;

/// Something queued work needs alive until it completes.
pub(crate) type Keep = Arc<dyn Send + Sync>;

/// A timeline semaphore, shared by its stream and every event recorded on it.
pub(crate) struct Timeline {
    gpu: Arc<Gpu>,
    semaphore: vk::Semaphore,
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.gpu.wait_for_queue_idle();
        // SAFETY: whoever could still wait on the semaphore holds this `Arc`, and the queue is
        // done with every submission that named it.
        unsafe { self.gpu.device.destroy_semaphore(self.semaphore, None) };
    }
}

impl Timeline {
    fn new(gpu: &Arc<Gpu>) -> Result<Timeline> {
        let mut kind = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let create_info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: plain object creation on a live device.
        let semaphore = unsafe { gpu.device.create_semaphore(&create_info, None) }
            .map_err(|result| vk_error("creating a timeline semaphore", result))?;
        Ok(Timeline {
            gpu: Arc::clone(gpu),
            semaphore,
        })
    }

    fn counter(&self) -> Result<u64> {
        // SAFETY: the semaphore is live while `self` is.
        unsafe { self.gpu.device.get_semaphore_counter_value(self.semaphore) }
            .map_err(|result| vk_error("reading a timeline semaphore", result))
    }

    fn wait(&self, value: u64) -> Result<()> {
        let semaphores = [self.semaphore];
        let values = [value];
        let wait_info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: the semaphore is live while `self` is; every value waited for was submitted
        // for signalling (or signalled from the host when its submission failed).
        unsafe { self.gpu.device.wait_semaphores(&wait_info, u64::MAX) }
            .map_err(|result| vk_error("waiting for a timeline semaphore", result))
    }
}

/// A device-to-host copy finished on the host once its submission completes.
struct HostRead {
    staging: Arc<DeviceBuffer>,
    destination: MappedPtr,
    size: usize,
}

impl HostRead {
    fn finish(&self) {
        if let Some(source) = self.staging.allocation.mapped {
            // SAFETY: staging memory is mapped and coherent, the GPU copy into it completed,
            // and the caller of `stream_read` promised `size` writable bytes at `destination`
            // until the read completes, which is now.
            unsafe { std::ptr::copy_nonoverlapping(source.0, self.destination.0, self.size) };
        }
    }
}

/// What the last launch of a recording bound: a launch of the same pipeline with the same
/// views binds nothing again.
#[derive(PartialEq)]
struct Bound {
    pipeline: vk::Pipeline,
    views: Vec<(vk::Buffer, u64, u64)>,
}

struct Recording {
    command_buffer: vk::CommandBuffer,
    commands: u32,
    /// Whether a command touches buffer memory, so that the batch ends with a barrier to the host.
    touches_memory: bool,
    bound: Option<Bound>,
    descriptor_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    host_reads: Vec<HostRead>,
}

struct Submission {
    value: u64,
    command_buffer: Option<vk::CommandBuffer>,
    descriptor_pools: Vec<vk::DescriptorPool>,
    _keep: Vec<Keep>,
    host_reads: Vec<HostRead>,
}

struct StreamState {
    command_pool: vk::CommandPool,
    spare_command_buffers: Vec<vk::CommandBuffer>,
    spare_descriptor_pools: Vec<vk::DescriptorPool>,
    recording: Option<Recording>,
    /// Whether a command that accesses buffer memory was recorded since the last barrier, in
    /// this recording or an earlier submission: the next such command needs a barrier first.
    /// Pipeline barriers are not free (lavapipe drains its queue at each), so commands that
    /// touch no buffer (a launch without buffer arguments) neither need nor leave one.
    unordered_access: bool,
    /// Semaphore values the next submission waits for.
    waits: Vec<(Arc<Timeline>, u64)>,
    /// The value of the last submission.
    submitted: u64,
    in_flight: VecDeque<Submission>,
    sticky: Option<Error>,
}

/// A stream's object.
pub struct Stream {
    pub(crate) gpu: Arc<Gpu>,
    timeline: Arc<Timeline>,
    state: Mutex<StreamState>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        let submitted = state.submitted;
        if self.timeline.wait(submitted).is_err() {
            tracing::warn!("a stream was destroyed while its work could not be waited for");
        }
        self.gpu.wait_for_queue_idle();
        // SAFETY: the stream's work completed (or the device is lost), so no pool is in use.
        unsafe {
            let device = &self.gpu.device;
            let mut pools = std::mem::take(&mut state.spare_descriptor_pools);
            if let Some(recording) = state.recording.take() {
                pools.extend(recording.descriptor_pools);
            }
            for submission in state.in_flight.drain(..) {
                pools.extend(submission.descriptor_pools);
            }
            for pool in pools {
                device.destroy_descriptor_pool(pool, None);
            }
            device.destroy_command_pool(state.command_pool, None);
        }
    }
}

/// The byte range of a host copy as a `usize`.
fn host_size(size: u64) -> Result<usize> {
    usize::try_from(size).map_err(|_| Error::out_of_bounds(format!("{size} bytes do not fit in this host's memory")))
}

/// A barrier making earlier transfer and shader writes visible to later transfers and shaders.
pub(crate) fn barrier(device: &ash::Device, command_buffer: vk::CommandBuffer) {
    let access = vk::AccessFlags::SHADER_READ
        | vk::AccessFlags::SHADER_WRITE
        | vk::AccessFlags::TRANSFER_READ
        | vk::AccessFlags::TRANSFER_WRITE;
    let memory = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(access)];
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    // SAFETY: the command buffer is recording, on this device.
    unsafe {
        device.cmd_pipeline_barrier(
            command_buffer,
            stages,
            stages,
            vk::DependencyFlags::empty(),
            &memory,
            &[],
            &[],
        )
    }
}

impl Stream {
    /// Refuses work on a stream with a sticky error; a validation message becomes one.
    fn check_usable(&self, state: &mut StreamState) -> Result<()> {
        if let Some(error) = self.gpu.validation_error() {
            state.sticky.get_or_insert(error);
        }
        match &state.sticky {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// The recording command buffer, begun if there is none.
    fn recording<'s>(&self, state: &'s mut StreamState) -> Result<&'s mut Recording> {
        if state.recording.is_none() {
            let device = &self.gpu.device;
            let command_buffer = match state.spare_command_buffers.pop() {
                Some(command_buffer) => command_buffer,
                None => {
                    let allocate_info = vk::CommandBufferAllocateInfo::default()
                        .command_pool(state.command_pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1);
                    // SAFETY: the pool is this stream's, used only under its lock.
                    unsafe { device.allocate_command_buffers(&allocate_info) }
                        .map_err(|result| vk_error("allocating a command buffer", result))?[0]
                }
            };
            let begin_info = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: the command buffer is new or was reset when its submission retired.
            if let Err(result) = unsafe { device.begin_command_buffer(command_buffer, &begin_info) } {
                state.spare_command_buffers.push(command_buffer);
                return Err(vk_error("beginning a command buffer", result));
            }
            state.recording = Some(Recording {
                command_buffer,
                commands: 0,
                touches_memory: false,
                bound: None,
                descriptor_pools: Vec::new(),
                keep: Vec::new(),
                host_reads: Vec::new(),
            });
        }
        match state.recording.as_mut() {
            Some(recording) => Ok(recording),
            None => Err(Error::internal("a stream lost its command buffer")),
        }
    }

    /// The recording command buffer, ready for a command that accesses buffer memory: ordered
    /// after every earlier access by a barrier when one is needed.
    fn recording_for_access<'s>(&self, state: &'s mut StreamState) -> Result<&'s mut Recording> {
        let needs_barrier = state.unordered_access;
        let recording = self.recording(state)?;
        if needs_barrier {
            barrier(&self.gpu.device, recording.command_buffer);
        }
        recording.touches_memory = true;
        state.unordered_access = true;
        match state.recording.as_mut() {
            Some(recording) => Ok(recording),
            None => Err(Error::internal("a stream lost its command buffer")),
        }
    }

    /// Counts a recorded command and submits when the batch is full.
    fn recorded(&self, state: &mut StreamState) -> Result<()> {
        let full = state
            .recording
            .as_mut()
            .map(|recording| {
                recording.commands += 1;
                recording.commands >= BATCH_LIMIT
            })
            .unwrap_or(false);
        if full {
            self.submit(state)?;
        }
        Ok(())
    }

    /// Submits what was recorded and the pending waits, signalling the next timeline value.
    fn submit(&self, state: &mut StreamState) -> Result<u64> {
        self.submit_with(state, None)
    }

    /// Enqueues a command list's command buffer: one submission of what the stream recorded
    /// before it, then the list, which begins with a barrier ordering it after that work.
    pub(crate) fn submit_list(&self, command_buffer: vk::CommandBuffer, list: Keep) -> Result<()> {
        let mut state = self.state.lock();
        self.check_usable(&mut state)?;
        self.submit_with(&mut state, Some((command_buffer, list)))?;
        // The list wrote memory: the stream's next access waits for it behind a barrier.
        state.unordered_access = true;
        Ok(())
    }

    /// [`submit`](Stream::submit), with a command list's buffer after the recording.
    fn submit_with(&self, state: &mut StreamState, list: Option<(vk::CommandBuffer, Keep)>) -> Result<u64> {
        let device = &self.gpu.device;
        let value = state.submitted + 1;
        let recording = state.recording.take();
        let mut failure = None;
        let mut command_buffers = Vec::new();
        if let Some(recording) = &recording {
            let host_barrier = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::HOST_READ)];
            // SAFETY: the command buffer is recording, on this device; after the barrier the
            // host sees every write of the batch once the submission completes.
            unsafe {
                if recording.touches_memory {
                    device.cmd_pipeline_barrier(
                        recording.command_buffer,
                        vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                        vk::PipelineStageFlags::HOST,
                        vk::DependencyFlags::empty(),
                        &host_barrier,
                        &[],
                        &[],
                    );
                }
                if let Err(result) = device.end_command_buffer(recording.command_buffer) {
                    failure = Some(vk_error("ending a command buffer", result));
                }
            }
            command_buffers.push(recording.command_buffer);
        }
        let list_keep = list.map(|(command_buffer, keep)| {
            command_buffers.push(command_buffer);
            keep
        });
        let waits = std::mem::take(&mut state.waits);
        let wait_semaphores: Vec<vk::Semaphore> = waits.iter().map(|(timeline, _)| timeline.semaphore).collect();
        let wait_values: Vec<u64> = waits.iter().map(|(_, value)| *value).collect();
        let wait_stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; waits.len()];
        let signal_semaphores = [self.timeline.semaphore];
        let signal_values = [value];
        if failure.is_none() {
            let mut timeline_info = vk::TimelineSemaphoreSubmitInfo::default()
                .wait_semaphore_values(&wait_values)
                .signal_semaphore_values(&signal_values);
            let submit_info = [vk::SubmitInfo::default()
                .wait_semaphores(&wait_semaphores)
                .wait_dst_stage_mask(&wait_stages)
                .command_buffers(&command_buffers)
                .signal_semaphores(&signal_semaphores)
                .push_next(&mut timeline_info)];
            // SAFETY: the command buffer is executable, every semaphore is live (the waits'
            // timelines are kept by the submission), and the queue is used under its lock.
            let submitted = self
                .gpu
                .with_queue(|queue| unsafe { device.queue_submit(queue, &submit_info, vk::Fence::null()) });
            if let Err(result) = submitted {
                failure = Some(vk_error("submitting work to the queue", result));
            }
        }
        state.submitted = value;
        let (command_buffer, descriptor_pools, mut keep, host_reads) = match recording {
            Some(recording) => (
                Some(recording.command_buffer),
                recording.descriptor_pools,
                recording.keep,
                recording.host_reads,
            ),
            None => (None, Vec::new(), Vec::new(), Vec::new()),
        };
        keep.extend(waits.into_iter().map(|(timeline, _)| timeline as Keep));
        keep.extend(list_keep);
        state.in_flight.push_back(Submission {
            value,
            command_buffer,
            descriptor_pools,
            _keep: keep,
            host_reads,
        });
        if let Some(error) = failure {
            // Nothing will signal this value now; signal it from the host so that no wait hangs.
            let signal_info = vk::SemaphoreSignalInfo::default()
                .semaphore(self.timeline.semaphore)
                .value(value);
            // SAFETY: the value is above every value signalled before on this semaphore.
            if let Err(result) = unsafe { device.signal_semaphore(&signal_info) } {
                tracing::error!(%result, "cannot signal a failed submission's timeline value");
            }
            state.sticky.get_or_insert(error.clone());
            return Err(error);
        }
        Ok(value)
    }

    /// Finishes the submissions up to `completed`: host reads, then recycling.
    fn retire(&self, state: &mut StreamState, completed: u64) {
        let device = &self.gpu.device;
        while state
            .in_flight
            .front()
            .is_some_and(|submission| submission.value <= completed)
        {
            let Some(submission) = state.in_flight.pop_front() else {
                break;
            };
            for read in &submission.host_reads {
                read.finish();
            }
            // SAFETY: the submission completed, so its command buffer and pools are unused.
            unsafe {
                if let Some(command_buffer) = submission.command_buffer {
                    if device
                        .reset_command_buffer(command_buffer, vk::CommandBufferResetFlags::empty())
                        .is_ok()
                    {
                        state.spare_command_buffers.push(command_buffer);
                    }
                }
                for pool in submission.descriptor_pools {
                    if device
                        .reset_descriptor_pool(pool, vk::DescriptorPoolResetFlags::empty())
                        .is_ok()
                    {
                        state.spare_descriptor_pools.push(pool);
                    } else {
                        device.destroy_descriptor_pool(pool, None);
                    }
                }
            }
        }
    }

    /// Retires what completed and tells whether the stream has nothing left to do.
    fn idle(&self, state: &mut StreamState) -> Result<bool> {
        if state.recording.is_some() || !state.waits.is_empty() {
            return Ok(false);
        }
        if state.in_flight.is_empty() {
            return Ok(true);
        }
        let completed = self.timeline.counter()?;
        self.retire(state, completed);
        Ok(state.in_flight.is_empty())
    }

    /// Finishes host reads of completed submissions; for events seen complete.
    pub(crate) fn retire_completed(&self) -> Result<()> {
        let mut state = self.state.lock();
        let completed = self.timeline.counter()?;
        self.retire(&mut state, completed);
        Ok(())
    }

    /// A descriptor set of `layout` from the recording's pools, adding a pool when they are full.
    fn descriptor_set(&self, state: &mut StreamState, layout: vk::DescriptorSetLayout) -> Result<vk::DescriptorSet> {
        let device = &self.gpu.device;
        let layouts = [layout];
        let current = self.recording(state)?.descriptor_pools.last().copied();
        if let Some(pool) = current {
            let allocate_info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&layouts);
            // SAFETY: the pool is this stream's, used under its lock.
            if let Ok(sets) = unsafe { device.allocate_descriptor_sets(&allocate_info) } {
                return Ok(sets[0]);
            }
        }
        let pool = match state.spare_descriptor_pools.pop() {
            Some(pool) => pool,
            None => {
                // Pools are reused by any pipeline, so each holds both kinds; allocation from
                // a pool short of either kind fails and a fresh pool is taken.
                let sizes = [BindingKind::Storage, BindingKind::Uniform].map(|kind| vk::DescriptorPoolSize {
                    ty: kind.descriptor_type(),
                    descriptor_count: DESCRIPTORS_PER_POOL,
                });
                let pool_info = vk::DescriptorPoolCreateInfo::default()
                    .max_sets(SETS_PER_POOL)
                    .pool_sizes(&sizes);
                // SAFETY: plain object creation on a live device.
                unsafe { device.create_descriptor_pool(&pool_info, None) }
                    .map_err(|result| vk_error("creating a descriptor pool", result))?
            }
        };
        self.recording(state)?.descriptor_pools.push(pool);
        let allocate_info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: as above; the pool is empty.
        unsafe { device.allocate_descriptor_sets(&allocate_info) }
            .map(|sets| sets[0])
            .map_err(|result| vk_error("allocating a descriptor set", result))
    }
}

impl DriverStream<VulkanDriver> for Stream {
    fn create(_driver: &VulkanDriver, device: &Arc<Object<Arc<Gpu>>>) -> Result<Stream> {
        let gpu: &Arc<Gpu> = device;
        let timeline = Arc::new(Timeline::new(gpu)?);
        let pool_info = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
            .queue_family_index(gpu.adapter.queue_family);
        // SAFETY: plain object creation on a live device.
        let command_pool = unsafe { gpu.device.create_command_pool(&pool_info, None) }
            .map_err(|result| vk_error("creating a command pool", result))?;
        Ok(Stream {
            gpu: Arc::clone(gpu),
            timeline,
            state: Mutex::new(StreamState {
                command_pool,
                spare_command_buffers: Vec::new(),
                spare_descriptor_pools: Vec::new(),
                recording: None,
                unordered_access: false,
                waits: Vec::new(),
                submitted: 0,
                in_flight: VecDeque::new(),
                sticky: None,
            }),
        })
    }

    /// The stream's sticky error, if any (a validation message becomes one): what a command
    /// with nothing to do returns.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.check_usable(&mut stream.state.lock())
    }

    /// Enqueues a host-to-device copy.
    ///
    /// # Safety
    /// `source` must point to `size` readable bytes for the duration of the call.
    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        let length = host_size(size)?;
        if let Some(mapped) = buffer.allocation.mapped.filter(|_| stream.gpu.direct_copies) {
            if stream.idle(&mut state)? {
                // SAFETY: the stream is idle, so nothing it ordered before still uses the
                // bytes; the range was checked against the buffer; the caller vouches for `source`.
                unsafe { std::ptr::copy_nonoverlapping(source, mapped.0.add(offset as usize), length) };
                return Ok(());
            }
        }
        let staging = Arc::new(DeviceBuffer::new(&stream.gpu, size, MemoryKind::Staging)?);
        let Some(staging_memory) = staging.allocation.mapped else {
            return Err(Error::internal("staging memory is not mapped"));
        };
        // SAFETY: the staging allocation holds `size` bytes; the caller vouches for `source`.
        unsafe { std::ptr::copy_nonoverlapping(source, staging_memory.0, length) };
        let recording = stream.recording_for_access(&mut state)?;
        let region = [vk::BufferCopy {
            src_offset: staging.allocation.offset,
            dst_offset: buffer.allocation.offset + offset,
            size,
        }];
        // SAFETY: both ranges lie inside their buffers; the command buffer is recording.
        unsafe {
            stream.gpu.device.cmd_copy_buffer(
                recording.command_buffer,
                staging.allocation.buffer,
                buffer.allocation.buffer,
                &region,
            )
        };
        recording.keep.push(staging);
        recording.keep.push(Arc::clone(buffer) as Keep);
        stream.recorded(&mut state)
    }

    /// Enqueues a device-to-host copy.
    ///
    /// # Safety
    /// `destination` must point to `size` writable bytes until the read completes.
    unsafe fn read(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        let length = host_size(size)?;
        if let Some(mapped) = buffer.allocation.mapped.filter(|_| stream.gpu.direct_copies) {
            if stream.idle(&mut state)? {
                // SAFETY: the stream is idle, so every write it ordered before is done and
                // visible (each batch ends with a barrier to the host); the caller vouches for
                // `destination`.
                unsafe { std::ptr::copy_nonoverlapping(mapped.0.add(offset as usize), destination, length) };
                return Ok(());
            }
        }
        let staging = Arc::new(DeviceBuffer::new(&stream.gpu, size, MemoryKind::Staging)?);
        let recording = stream.recording_for_access(&mut state)?;
        let region = [vk::BufferCopy {
            src_offset: buffer.allocation.offset + offset,
            dst_offset: staging.allocation.offset,
            size,
        }];
        // SAFETY: both ranges lie inside their buffers; the command buffer is recording.
        unsafe {
            stream.gpu.device.cmd_copy_buffer(
                recording.command_buffer,
                buffer.allocation.buffer,
                staging.allocation.buffer,
                &region,
            )
        };
        recording.keep.push(Arc::clone(buffer) as Keep);
        recording.host_reads.push(HostRead {
            staging,
            destination: MappedPtr(destination),
            size: length,
        });
        recording.commands += 1;
        // The host copy happens when the submission is seen to complete, so submit now.
        stream.submit(&mut state).map(|_| ())
    }

    /// Enqueues a device-to-device copy; the ranges may overlap.
    fn copy(
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: &Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        // Vulkan forbids overlapping regions, a copy onto itself included.
        let bounce =
            if CopyOverlap::of(source, source_offset, destination, destination_offset, size) != CopyOverlap::Disjoint {
                Some(Arc::new(DeviceBuffer::new(&stream.gpu, size, MemoryKind::Device)?))
            } else {
                None
            };
        let device = &stream.gpu.device;
        let recording = stream.recording_for_access(&mut state)?;
        let from = (source.allocation.buffer, source.allocation.offset + source_offset);
        let to = (
            destination.allocation.buffer,
            destination.allocation.offset + destination_offset,
        );
        let copy = |from: (vk::Buffer, u64), to: (vk::Buffer, u64)| {
            let region = [vk::BufferCopy {
                src_offset: from.1,
                dst_offset: to.1,
                size,
            }];
            // SAFETY: both ranges lie inside their buffers and do not overlap; the command
            // buffer is recording.
            unsafe { device.cmd_copy_buffer(recording.command_buffer, from.0, to.0, &region) };
        };
        match &bounce {
            // Vulkan forbids overlapping regions in one copy, so go through a scratch buffer.
            Some(bounce) => {
                let middle = (bounce.allocation.buffer, bounce.allocation.offset);
                copy(from, middle);
                barrier(device, recording.command_buffer);
                copy(middle, to);
            }
            None => copy(from, to),
        }
        recording.keep.push(Arc::clone(source) as Keep);
        recording.keep.push(Arc::clone(destination) as Keep);
        if let Some(bounce) = bounce {
            recording.keep.push(bounce);
        }
        stream.recorded(&mut state)
    }

    /// Enqueues a fill with a 1-, 2- or 4-byte pattern; `offset` and `size` are multiples of
    /// the pattern's length.
    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        let recording = stream.recording_for_access(&mut state)?;
        let staging =
            crate::command_list::record_fill(&stream.gpu, recording.command_buffer, buffer, offset, size, pattern)?;
        if let Some(staging) = staging {
            recording.keep.push(staging);
        }
        recording.keep.push(Arc::clone(buffer) as Keep);
        stream.recorded(&mut state)
    }

    /// Enqueues a kernel launch.
    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, VulkanDriver>) -> Result<()> {
        let pipeline: &Arc<Pipeline> = launch.kernel;
        let (workgroups, buffers, scalars) = (launch.workgroups, launch.buffers, launch.scalars);
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        pipeline.check_launch(workgroups, buffers, scalars)?;
        if workgroups.contains(&0) {
            return Ok(());
        }
        let device = &stream.gpu.device;
        let bound = Bound {
            pipeline: pipeline.pipeline,
            views: buffers
                .iter()
                .map(|view| {
                    (
                        view.buffer.allocation.buffer,
                        view.buffer.allocation.offset + view.offset,
                        view.size,
                    )
                })
                .collect(),
        };
        let rebind = stream.recording(&mut state)?.bound.as_ref() != Some(&bound);
        let descriptor_set = if buffers.is_empty() || !rebind {
            None
        } else {
            Some(stream.descriptor_set(&mut state, pipeline.set_layout)?)
        };
        if let Some(set) = descriptor_set {
            write_descriptor_set(device, set, pipeline, &bound.views);
        }
        // A kernel without buffer arguments touches only its own workgroup memory.
        let recording = if buffers.is_empty() {
            stream.recording(&mut state)?
        } else {
            stream.recording_for_access(&mut state)?
        };
        // SAFETY: the pipeline, layout and set are live and kept until the work completes; the
        // command buffer is recording.
        unsafe {
            record_dispatch(
                device,
                recording.command_buffer,
                pipeline,
                rebind,
                descriptor_set,
                scalars,
                workgroups,
            )
        };
        recording.bound = Some(bound);
        recording.keep.push(Arc::clone(pipeline) as Keep);
        for view in buffers {
            recording.keep.push(Arc::clone(&view.buffer) as Keep);
        }
        stream.recorded(&mut state)
    }

    /// Records `event`: it completes when everything enqueued before it has.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        let timestamp = if event.timing && stream.gpu.adapter.info.features.contains(Features::TIMESTAMPS) {
            let query = Arc::new(TimestampQuery::new(&stream.gpu)?);
            let recording = stream.recording(&mut state)?;
            // SAFETY: the pool is fresh and kept until the work completes; the command buffer is recording.
            unsafe {
                stream
                    .gpu
                    .device
                    .cmd_reset_query_pool(recording.command_buffer, query.pool, 0, 1);
                stream.gpu.device.cmd_write_timestamp(
                    recording.command_buffer,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    query.pool,
                    0,
                );
            }
            recording.keep.push(Arc::clone(&query) as Keep);
            recording.commands += 1;
            Some(query)
        } else {
            None
        };
        let value = stream.submit(&mut state)?;
        *event.latest.lock() = Some(Arc::new(EventRecord {
            timeline: Arc::clone(&stream.timeline),
            value,
            stream: Arc::downgrade(stream),
            timestamp,
        }));
        Ok(())
    }

    /// Makes later work wait for the event's most recent record.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let mut state = stream.state.lock();
        stream.check_usable(&mut state)?;
        let Some(record) = event.latest() else {
            return Ok(());
        };
        if Arc::ptr_eq(&record.timeline, &stream.timeline) {
            // Recorded on this stream: already ordered.
            return Ok(());
        }
        // Work enqueued before the wait must not be held up by it.
        if state.recording.is_some() {
            stream.submit(&mut state)?;
        }
        state.waits.push((Arc::clone(&record.timeline), record.value));
        Ok(())
    }

    /// Blocks until the stream is idle; returns its sticky error if any.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let target = {
            let mut state = stream.state.lock();
            if state.recording.is_some() || !state.waits.is_empty() {
                // A failure here is sticky and returned below, after the earlier work is done.
                let _ = stream.submit(&mut state);
            }
            state.submitted
        };
        let waited = stream.timeline.wait(target);
        let mut state = stream.state.lock();
        let completed = match waited {
            Ok(()) => target,
            Err(error) => {
                state.sticky.get_or_insert(error);
                stream.timeline.counter().unwrap_or(0)
            }
        };
        stream.retire(&mut state, completed);
        stream.check_usable(&mut state)
    }

    /// True when everything enqueued has completed.
    ///
    /// Work still being recorded is submitted once the submitted work is done, not before: a
    /// caller polling the stream still sees it make progress, and one that queries often while
    /// enqueueing (core does, to release what finished work held) does not break the batches.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        let mut completed = stream.timeline.counter()?;
        stream.retire(&mut state, completed);
        let pending = state.recording.is_some() || !state.waits.is_empty();
        if pending && state.in_flight.is_empty() {
            let _ = stream.submit(&mut state);
            completed = stream.timeline.counter()?;
            stream.retire(&mut state, completed);
        }
        stream.check_usable(&mut state)?;
        Ok(completed >= state.submitted && state.recording.is_none() && state.waits.is_empty())
    }
}

/// A one-query timestamp pool, fresh for each timed record.
pub(crate) struct TimestampQuery {
    gpu: Arc<Gpu>,
    pool: vk::QueryPool,
}

impl TimestampQuery {
    fn new(gpu: &Arc<Gpu>) -> Result<TimestampQuery> {
        let create_info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(1);
        // SAFETY: plain object creation on a live device.
        let pool = unsafe { gpu.device.create_query_pool(&create_info, None) }
            .map_err(|result| vk_error("creating a timestamp query pool", result))?;
        Ok(TimestampQuery {
            gpu: Arc::clone(gpu),
            pool,
        })
    }

    fn ticks(&self) -> Result<u64> {
        let mut ticks = [0u64; 1];
        // SAFETY: the query was written by completed work.
        unsafe {
            self.gpu
                .device
                .get_query_pool_results(self.pool, 0, &mut ticks, vk::QueryResultFlags::TYPE_64)
        }
        .map_err(|result| vk_error("reading a timestamp", result))?;
        Ok(self.gpu.masked_ticks(ticks[0]))
    }
}

impl Drop for TimestampQuery {
    fn drop(&mut self) {
        // SAFETY: queued work holds this object until it completes.
        unsafe { self.gpu.device.destroy_query_pool(self.pool, None) };
    }
}

/// One record of an event.
pub(crate) struct EventRecord {
    timeline: Arc<Timeline>,
    value: u64,
    stream: Weak<Object<Stream>>,
    timestamp: Option<Arc<TimestampQuery>>,
}

impl EventRecord {
    fn complete(&self) -> Result<bool> {
        if self.timeline.counter()? < self.value {
            return Ok(false);
        }
        // The host reads before the record must have landed when the event says complete.
        if let Some(stream) = self.stream.upgrade() {
            stream.retire_completed()?;
        }
        Ok(true)
    }
}

/// An event's object.
pub struct Event {
    pub(crate) gpu: Arc<Gpu>,
    timing: bool,
    latest: Mutex<Option<Arc<EventRecord>>>,
}

impl Event {
    fn latest(&self) -> Option<Arc<EventRecord>> {
        self.latest.lock().clone()
    }

    fn check_validation(&self) -> Result<()> {
        match self.gpu.validation_error() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn timed_record(&self, role: &str, id: u64) -> Result<Arc<EventRecord>> {
        if !self.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was created without timing; create it with timing to measure elapsed time"
            )));
        }
        let Some(record) = self.latest() else {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x} was never recorded"
            )));
        };
        if !record.complete()? {
            return Err(Error::invalid_argument(format!(
                "{role} event {id:#x}: event not yet complete"
            )));
        }
        Ok(record)
    }
}

impl DriverEvent<VulkanDriver> for Event {
    fn create(_driver: &VulkanDriver, device: &Arc<Object<Arc<Gpu>>>, timing: bool) -> Result<Event> {
        let gpu: &Arc<Gpu> = device;
        Ok(Event {
            gpu: Arc::clone(gpu),
            timing,
            latest: Mutex::new(None),
        })
    }

    /// True when the latest record completed, or none was made.
    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        event.check_validation()?;
        match event.latest() {
            None => Ok(true),
            Some(record) => record.complete(),
        }
    }

    /// Blocks until the latest record completed.
    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        event.check_validation()?;
        if let Some(record) = event.latest() {
            record.timeline.wait(record.value)?;
            record.complete()?;
        }
        event.check_validation()
    }

    /// Nanoseconds from `start`'s latest record to `end`'s.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        let (start_id, end_id) = (start.handle(), end.handle());
        let started = start.timed_record("start", start_id)?;
        let ended = end.timed_record("end", end_id)?;
        let (Some(first), Some(last)) = (&started.timestamp, &ended.timestamp) else {
            return Err(Error::unsupported(format!(
                "{} has no timestamps for compute work",
                start.gpu.adapter.info.name
            )));
        };
        let (first, last) = (first.ticks()?, last.ticks()?);
        if last < first {
            return Err(Error::invalid_argument(format!(
                "end event {end_id:#x} completed before start event {start_id:#x}"
            )));
        }
        let nanoseconds = (last - first) as f64 * start.gpu.adapter.timestamp_period;
        Ok(nanoseconds.round() as u64)
    }

    /// The record's timestamp query, in nanoseconds of the device's clock.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        let record = event.timed_record("the", event.handle())?;
        let Some(query) = &record.timestamp else {
            return Err(Error::unsupported(format!(
                "{} has no timestamps for compute work",
                event.gpu.adapter.info.name
            )));
        };
        Ok(event.gpu.nanoseconds(query.ticks()?))
    }
}

/// Points every binding of `set`, a fresh set of `pipeline`'s layout used by no submitted work,
/// at its view: `(buffer, offset, range)` in binding order.
pub(crate) fn write_descriptor_set(
    device: &ash::Device,
    set: vk::DescriptorSet,
    pipeline: &Pipeline,
    views: &[(vk::Buffer, u64, u64)],
) {
    let infos: Vec<[vk::DescriptorBufferInfo; 1]> = views
        .iter()
        .map(|&(buffer, offset, range)| [vk::DescriptorBufferInfo { buffer, offset, range }])
        .collect();
    let writes: Vec<vk::WriteDescriptorSet<'_>> = (0u32..)
        .zip(infos.iter().zip(&pipeline.entry.bindings))
        .map(|(binding, (info, kind))| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(binding)
                .descriptor_type(kind.descriptor_type())
                .buffer_info(info)
        })
        .collect();
    // SAFETY: the set is fresh and used by no submitted work (the caller's contract); every
    // buffer is live.
    unsafe { device.update_descriptor_sets(&writes, &[]) };
}

/// Records a dispatch of `pipeline`: binds it (when `rebind`) and `set` (when given), pushes
/// `scalars` as push constants zero-padded to the layout's range, and dispatches `workgroups`.
///
/// # Safety
/// `command_buffer` is recording; the pipeline, its layout and `set` stay live until the
/// commands recorded complete; `scalars` fit the pipeline's push-constant range.
pub(crate) unsafe fn record_dispatch(
    device: &ash::Device,
    command_buffer: vk::CommandBuffer,
    pipeline: &Pipeline,
    rebind: bool,
    set: Option<vk::DescriptorSet>,
    scalars: &[u8],
    workgroups: [u32; 3],
) {
    let mut push_constants = vec![0u8; pipeline.push_constant_bytes as usize];
    push_constants[..scalars.len()].copy_from_slice(scalars);
    // SAFETY: the caller's contract; the push-constant bytes are the layout's range.
    unsafe {
        if rebind {
            device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, pipeline.pipeline);
        }
        if let Some(set) = set {
            device.cmd_bind_descriptor_sets(
                command_buffer,
                vk::PipelineBindPoint::COMPUTE,
                pipeline.layout,
                0,
                &[set],
                &[],
            );
        }
        if !push_constants.is_empty() {
            device.cmd_push_constants(
                command_buffer,
                pipeline.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &push_constants,
            );
        }
        device.cmd_dispatch(command_buffer, workgroups[0], workgroups[1], workgroups[2]);
    }
}
