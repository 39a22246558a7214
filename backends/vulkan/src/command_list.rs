//! Command lists (ABI 1.4) as reusable Vulkan command buffers.
//!
//! A list records its copies, fills and dispatches once into a primary command buffer begun
//! with `SIMULTANEOUS_USE`, with its own descriptor sets, so a submission is one
//! `vkQueueSubmit` of that buffer after the stream's own recording, however many commands it
//! holds. The buffer starts with a barrier that orders it after the stream's earlier work, puts
//! one between commands that touch memory, and ends with one that makes its writes visible to
//! the host. An update re-records the whole buffer: the adapter has waited for every
//! submission first, so nothing executing uses it.

use crate::device::Gpu;
use crate::instance::vk_error;
use crate::memory::{DeviceBuffer, MemoryKind};
use crate::module::Pipeline;
use crate::reflect::BindingKind;
use crate::stream::{barrier, record_dispatch, write_descriptor_set, Keep, Stream};
use crate::VulkanDriver;
use ash::vk;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{Command, CopyOverlap, DriverCommandList, Error, Object, OwnedLaunch, Result};

/// A command as the list keeps it, to record again after an update.
enum Recordable {
    Copy {
        source: Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        size: u64,
    },
    Fill {
        buffer: Arc<Object<DeviceBuffer>>,
        offset: u64,
        size: u64,
        pattern: Vec<u8>,
    },
    Launch(OwnedLaunch<VulkanDriver>),
}

/// The native objects of a list; submissions hold them until they complete.
pub(crate) struct Native {
    gpu: Arc<Gpu>,
    command_pool: vk::CommandPool,
    pub(crate) command_buffer: vk::CommandBuffer,
    descriptor_pool: vk::DescriptorPool,
    /// Scratch memory the recorded commands use: bounce buffers of overlapping copies and the
    /// staged edge bytes of unaligned fills.
    scratch: Mutex<Vec<Arc<DeviceBuffer>>>,
}

impl Drop for Native {
    fn drop(&mut self) {
        // SAFETY: submissions hold this value until they complete, so the queue no longer uses
        // the command buffer or the descriptor sets when the last holder lets go.
        unsafe {
            let device = &self.gpu.device;
            device.destroy_descriptor_pool(self.descriptor_pool, None);
            device.destroy_command_pool(self.command_pool, None);
        }
    }
}

/// A Vulkan command list.
pub(crate) struct CommandList {
    commands: Mutex<Vec<Recordable>>,
    native: Arc<Native>,
}

impl CommandList {
    /// Records `commands` into a fresh command buffer.
    pub(crate) fn build(gpu: &Arc<Gpu>, commands: &[Command<VulkanDriver>]) -> Result<CommandList> {
        let commands: Vec<Recordable> = commands
            .iter()
            .map(|command| match command {
                Command::Copy {
                    source,
                    source_offset,
                    destination,
                    destination_offset,
                    size,
                } => Recordable::Copy {
                    source: Arc::clone(source),
                    source_offset: *source_offset,
                    destination: Arc::clone(destination),
                    destination_offset: *destination_offset,
                    size: *size,
                },
                Command::Fill {
                    buffer,
                    offset,
                    size,
                    pattern,
                } => Recordable::Fill {
                    buffer: Arc::clone(buffer),
                    offset: *offset,
                    size: *size,
                    pattern: pattern.clone(),
                },
                Command::Launch(launch) => Recordable::Launch(clone_launch(launch)),
            })
            .collect();
        for command in &commands {
            if let Recordable::Launch(launch) = command {
                launch
                    .kernel
                    .check_launch(launch.workgroups, &launch.buffers, &launch.scalars)?;
            }
        }
        let native = Arc::new(Native::new(gpu, &commands)?);
        record(&native, &commands)?;
        Ok(CommandList {
            commands: Mutex::new(commands),
            native,
        })
    }
}

fn clone_launch(launch: &OwnedLaunch<VulkanDriver>) -> OwnedLaunch<VulkanDriver> {
    OwnedLaunch {
        kernel: Arc::clone(&launch.kernel),
        workgroups: launch.workgroups,
        buffers: launch
            .buffers
            .iter()
            .map(|view| xhal_backend::BufferView {
                buffer: Arc::clone(&view.buffer),
                offset: view.offset,
                size: view.size,
            })
            .collect(),
        scalars: launch.scalars.clone(),
    }
}

impl Native {
    fn new(gpu: &Arc<Gpu>, commands: &[Recordable]) -> Result<Native> {
        let device = &gpu.device;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
            .queue_family_index(gpu.adapter.queue_family);
        // SAFETY: plain object creation on a live device.
        let command_pool = unsafe { device.create_command_pool(&pool_info, None) }
            .map_err(|result| vk_error("creating a command list's command pool", result))?;
        let allocate_info = vk::CommandBufferAllocateInfo::default()
            .command_pool(command_pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool was just made and is used only by this list.
        let command_buffer = match unsafe { device.allocate_command_buffers(&allocate_info) } {
            Ok(buffers) => buffers[0],
            Err(result) => {
                // SAFETY: the pool holds nothing in use.
                unsafe { device.destroy_command_pool(command_pool, None) };
                return Err(vk_error("allocating a command list's command buffer", result));
            }
        };
        // One set per launch with buffers, and as many descriptors of each kind as they bind.
        let (mut sets, mut storage, mut uniform) = (0u32, 0u32, 0u32);
        for command in commands {
            if let Recordable::Launch(launch) = command {
                if !launch.buffers.is_empty() {
                    sets += 1;
                    for kind in &launch.kernel.entry.bindings {
                        match kind {
                            BindingKind::Storage => storage += 1,
                            BindingKind::Uniform => uniform += 1,
                        }
                    }
                }
            }
        }
        let sizes = [(BindingKind::Storage, storage), (BindingKind::Uniform, uniform)].map(|(kind, count)| {
            vk::DescriptorPoolSize {
                ty: kind.descriptor_type(),
                descriptor_count: count.max(1),
            }
        });
        let descriptor_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(sets.max(1))
            .pool_sizes(&sizes);
        // SAFETY: plain object creation on a live device.
        let descriptor_pool = match unsafe { device.create_descriptor_pool(&descriptor_info, None) } {
            Ok(pool) => pool,
            Err(result) => {
                // SAFETY: the pool holds nothing in use.
                unsafe { device.destroy_command_pool(command_pool, None) };
                return Err(vk_error("creating a command list's descriptor pool", result));
            }
        };
        Ok(Native {
            gpu: Arc::clone(gpu),
            command_pool,
            command_buffer,
            descriptor_pool,
            scratch: Mutex::new(Vec::new()),
        })
    }
}

/// Records every command into the list's command buffer, from the start. No submission of the
/// buffer may be pending.
fn record(native: &Native, commands: &[Recordable]) -> Result<()> {
    let gpu = &native.gpu;
    let device = &gpu.device;
    let command_buffer = native.command_buffer;
    let mut scratch = native.scratch.lock();
    scratch.clear();
    // SAFETY: no submission of the buffer is pending (the caller's contract), so the buffer
    // and the sets allocated from the pool are unused.
    unsafe {
        device
            .reset_command_buffer(command_buffer, vk::CommandBufferResetFlags::empty())
            .map_err(|result| vk_error("resetting a command list's command buffer", result))?;
        device
            .reset_descriptor_pool(native.descriptor_pool, vk::DescriptorPoolResetFlags::empty())
            .map_err(|result| vk_error("resetting a command list's descriptor pool", result))?;
    }
    let begin_info = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
    // SAFETY: the buffer was just reset.
    unsafe { device.begin_command_buffer(command_buffer, &begin_info) }
        .map_err(|result| vk_error("beginning a command list's command buffer", result))?;
    // Orders the list after whatever the stream ran before it.
    barrier(device, command_buffer);
    let mut first = true;
    // What the previous launch bound: a launch of the same pipeline with the same views binds
    // nothing again, as on a stream.
    let mut bound: Option<Bound> = None;
    let mut recorded = || -> Result<()> {
        for command in commands {
            if !first {
                barrier(device, command_buffer);
            }
            first = false;
            match command {
                Recordable::Copy {
                    source,
                    source_offset,
                    destination,
                    destination_offset,
                    size,
                } => {
                    bound = None;
                    let from = (source.allocation.buffer, source.allocation.offset + source_offset);
                    let to = (
                        destination.allocation.buffer,
                        destination.allocation.offset + destination_offset,
                    );
                    let copy = |from: (vk::Buffer, u64), to: (vk::Buffer, u64)| {
                        let region = [vk::BufferCopy {
                            src_offset: from.1,
                            dst_offset: to.1,
                            size: *size,
                        }];
                        // SAFETY: both ranges lie inside their buffers and do not overlap; the
                        // command buffer is recording.
                        unsafe { device.cmd_copy_buffer(command_buffer, from.0, to.0, &region) };
                    };
                    if CopyOverlap::of(source, *source_offset, destination, *destination_offset, *size)
                        == CopyOverlap::Disjoint
                    {
                        copy(from, to);
                    } else {
                        // Vulkan forbids overlapping regions in one copy.
                        let bounce = Arc::new(DeviceBuffer::new(gpu, *size, MemoryKind::Device)?);
                        let middle = (bounce.allocation.buffer, bounce.allocation.offset);
                        copy(from, middle);
                        barrier(device, command_buffer);
                        copy(middle, to);
                        scratch.push(bounce);
                    }
                }
                Recordable::Fill {
                    buffer,
                    offset,
                    size,
                    pattern,
                } => {
                    bound = None;
                    if let Some(staging) = record_fill(gpu, command_buffer, buffer, *offset, *size, pattern)? {
                        scratch.push(staging);
                    }
                }
                Recordable::Launch(launch) => record_launch(native, launch, &mut bound)?,
            }
        }
        Ok(())
    };
    let outcome = recorded();
    let host_barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ)];
    // SAFETY: the buffer is recording; after the barrier the host sees every write of the list
    // once its submission completes.
    unsafe {
        device.cmd_pipeline_barrier(
            command_buffer,
            vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &host_barrier,
            &[],
            &[],
        )
    };
    // SAFETY: the buffer is recording.
    let ended = unsafe { device.end_command_buffer(command_buffer) }
        .map_err(|result| vk_error("ending a command list's command buffer", result));
    outcome?;
    ended
}

/// Records a fill: whole words with `vkCmdFillBuffer`, the bytes before and after them from
/// staging memory filled now. Returns the staging memory, which whoever submits the command
/// buffer keeps until it completes.
pub(crate) fn record_fill(
    gpu: &Arc<Gpu>,
    command_buffer: vk::CommandBuffer,
    buffer: &DeviceBuffer,
    offset: u64,
    size: u64,
    pattern: &[u8],
) -> Result<Option<Arc<DeviceBuffer>>> {
    let device = &gpu.device;
    let end = offset + size;
    let words_start = offset.next_multiple_of(4).min(end);
    let words_end = (end / 4 * 4).max(words_start);
    let byte_at = |position: u64| pattern[((position - offset) % pattern.len() as u64) as usize];
    let base = buffer.allocation.offset;
    if words_end > words_start {
        let word = u32::from_le_bytes([
            byte_at(words_start),
            byte_at(words_start + 1),
            byte_at(words_start + 2),
            byte_at(words_start + 3),
        ]);
        // SAFETY: the range is word-aligned (allocations are 256-byte aligned) and inside the
        // buffer; the command buffer is recording.
        unsafe {
            device.cmd_fill_buffer(
                command_buffer,
                buffer.allocation.buffer,
                base + words_start,
                words_end - words_start,
                word,
            )
        };
    }
    let edges: Vec<(u64, u64)> = [(offset, words_start), (words_end, end)]
        .into_iter()
        .filter(|(start, stop)| stop > start)
        .collect();
    if edges.is_empty() {
        return Ok(None);
    }
    let bytes: Vec<u8> = edges
        .iter()
        .flat_map(|&(start, stop)| (start..stop).map(byte_at))
        .collect();
    let staging = Arc::new(DeviceBuffer::new(gpu, bytes.len() as u64, MemoryKind::Staging)?);
    let Some(memory) = staging.allocation.mapped else {
        return Err(Error::internal("staging memory is not mapped"));
    };
    // SAFETY: the staging allocation holds exactly `bytes.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), memory.0, bytes.len()) };
    let mut staged = staging.allocation.offset;
    let regions: Vec<vk::BufferCopy> = edges
        .iter()
        .map(|&(start, stop)| {
            let region = vk::BufferCopy {
                src_offset: staged,
                dst_offset: base + start,
                size: stop - start,
            };
            staged += stop - start;
            region
        })
        .collect();
    // SAFETY: every region lies inside its buffer; the command buffer is recording.
    unsafe {
        device.cmd_copy_buffer(
            command_buffer,
            staging.allocation.buffer,
            buffer.allocation.buffer,
            &regions,
        )
    };
    Ok(Some(staging))
}

/// The pipeline and views a launch bound.
#[derive(PartialEq)]
struct Bound {
    pipeline: vk::Pipeline,
    views: Vec<(vk::Buffer, u64, u64)>,
}

/// Records a dispatch with its scalars as push constants, binding the pipeline and a descriptor
/// set of its own unless the previous launch bound the same.
fn record_launch(native: &Native, launch: &OwnedLaunch<VulkanDriver>, bound: &mut Option<Bound>) -> Result<()> {
    let pipeline: &Arc<Pipeline> = &launch.kernel;
    let workgroups = launch.workgroups;
    if workgroups.contains(&0) {
        return Ok(());
    }
    let device = &native.gpu.device;
    let command_buffer = native.command_buffer;
    let binding = Bound {
        pipeline: pipeline.pipeline,
        views: launch
            .buffers
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
    let rebind = bound.as_ref() != Some(&binding);
    let descriptor_set = if launch.buffers.is_empty() || !rebind {
        None
    } else {
        let layouts = [pipeline.set_layout];
        let allocate_info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(native.descriptor_pool)
            .set_layouts(&layouts);
        // SAFETY: the pool is the list's and was sized for one set per launch with buffers.
        let set = unsafe { device.allocate_descriptor_sets(&allocate_info) }
            .map_err(|result| vk_error("allocating a command list's descriptor set", result))?[0];
        write_descriptor_set(device, set, pipeline, &binding.views);
        Some(set)
    };
    // SAFETY: the pipeline, layout and set are live as long as the list (which holds the
    // kernel and the buffers); the command buffer is recording.
    unsafe {
        record_dispatch(
            device,
            command_buffer,
            pipeline,
            rebind,
            descriptor_set,
            &launch.scalars,
            workgroups,
        )
    };
    *bound = Some(binding);
    Ok(())
}

impl DriverCommandList<VulkanDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.submit_list(self.native.command_buffer, Arc::clone(&self.native) as Keep)
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<VulkanDriver>) -> Result<()> {
        launch
            .kernel
            .check_launch(launch.workgroups, &launch.buffers, &launch.scalars)?;
        let mut commands = self.commands.lock();
        let slot = commands
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("a vulkan command list has no command {index}")))?;
        *slot = Recordable::Launch(clone_launch(launch));
        record(&self.native, &commands)
    }
}
