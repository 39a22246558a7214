//! An opened Vulkan device: the logical device, its queue, and its memory.
//!
//! Memory comes from a simple block allocator: buffers up to [`SUBALLOCATION_LIMIT`] are
//! carved out of [`BLOCK_SIZE`] blocks (one `VkDeviceMemory` and one `VkBuffer` spanning it),
//! so many small buffers cost no `vkAllocateMemory` each; bigger ones get their own
//! allocation. Every allocation is named by a `VkBuffer` and an offset into it.

use crate::instance::{vk_error, Adapter, Instance};
use ash::vk;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_core::{Error, Result};

/// Size of a sub-allocation block.
const BLOCK_SIZE: u64 = 64 << 20;
/// Largest buffer carved out of a block; bigger ones get their own `VkDeviceMemory`.
const SUBALLOCATION_LIMIT: u64 = 8 << 20;
/// Alignment of every sub-allocation: at least any storage- or uniform-buffer offset alignment
/// a device may ask for (Vulkan caps both at 256), so a view's offset stays aligned after
/// adding ours.
const SUBALLOCATION_ALIGNMENT: u64 = 256;

/// What memory an allocation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryKind {
    /// Buffers kernels use: device-local.
    Device,
    /// Staging for host copies: host-visible and coherent.
    Staging,
}

/// A host address inside mapped memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MappedPtr(pub(crate) *mut u8);

// SAFETY: the pointer names device memory mapped for the allocation's lifetime; every access
// to it is ordered by the stream that owns the work, as for any other device memory.
unsafe impl Send for MappedPtr {}
// SAFETY: as above.
unsafe impl Sync for MappedPtr {}

#[derive(Debug)]
enum Placement {
    Block { kind: MemoryKind, block: u64, padded: u64 },
    Dedicated { memory: vk::DeviceMemory },
}

/// A range of device memory, bound to a `VkBuffer` at `offset`.
#[derive(Debug)]
pub(crate) struct Allocation {
    pub(crate) buffer: vk::Buffer,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    /// Host address of byte `offset`, when the memory is host-visible and coherent.
    pub(crate) mapped: Option<MappedPtr>,
    placement: Placement,
}

struct Block {
    memory: vk::DeviceMemory,
    buffer: vk::Buffer,
    mapped: Option<MappedPtr>,
    /// Free ranges: offset to length.
    free: BTreeMap<u64, u64>,
    used: u64,
}

impl Block {
    fn take(&mut self, size: u64) -> Option<u64> {
        let (&offset, &length) = self.free.iter().find(|(_, &length)| length >= size)?;
        self.free.remove(&offset);
        if length > size {
            self.free.insert(offset + size, length - size);
        }
        self.used += size;
        Some(offset)
    }

    fn give_back(&mut self, offset: u64, size: u64) {
        self.used -= size;
        let mut start = offset;
        let mut length = size;
        if let Some((&before, &before_length)) = self.free.range(..offset).next_back() {
            if before + before_length == offset {
                self.free.remove(&before);
                start = before;
                length += before_length;
            }
        }
        if let Some(&after_length) = self.free.get(&(offset + size)) {
            self.free.remove(&(offset + size));
            length += after_length;
        }
        self.free.insert(start, length);
    }
}

#[derive(Default)]
struct Pool {
    blocks: BTreeMap<u64, Block>,
    next_block: u64,
}

/// One memory type and what it offers.
#[derive(Debug, Clone, Copy)]
struct MemoryType {
    index: u32,
    mapped: bool,
}

/// An opened device. Shared by every handle to it and by every object made on it, so it is
/// destroyed only after them.
pub(crate) struct Gpu {
    pub(crate) instance: Arc<Instance>,
    pub(crate) adapter: Adapter,
    pub(crate) device: ash::Device,
    queue: Mutex<vk::Queue>,
    device_memory: MemoryType,
    staging_memory: MemoryType,
    pools: Mutex<[Pool; 2]>,
    buffer_usage: vk::BufferUsageFlags,
    /// Whether host copies may go straight through a mapping when the stream is idle.
    pub(crate) direct_copies: bool,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("device", &self.adapter.info.name).finish()
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: every object made on this device holds an `Arc<Gpu>`, so none is left but
        // the blocks, which no work uses once the device is idle.
        unsafe {
            let _ = self.device.device_wait_idle();
            for pool in self.pools.get_mut().iter_mut() {
                for (_, block) in std::mem::take(&mut pool.blocks) {
                    self.device.destroy_buffer(block.buffer, None);
                    self.device.free_memory(block.memory, None);
                    self.adapter.allocated.fetch_sub(BLOCK_SIZE, Ordering::Relaxed);
                }
            }
            self.device.destroy_device(None);
        }
    }
}

impl Gpu {
    /// Creates the logical device with one compute queue and the features the device's
    /// claims need.
    pub(crate) fn open(instance: Arc<Instance>, adapter: Adapter, direct_copies: bool) -> Result<Gpu> {
        let enable = adapter.enable;
        let priorities = [1.0f32];
        let queue_infos = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(adapter.queue_family)
            .queue_priorities(&priorities)];
        let core_features = vk::PhysicalDeviceFeatures::default()
            .shader_float64(enable.float64)
            .shader_int64(enable.int64)
            .shader_int16(enable.int16);
        let mut features11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(enable.storage_buffer_16bit)
            .uniform_and_storage_buffer16_bit_access(enable.uniform_and_storage_buffer_16bit);
        let mut features12 = vk::PhysicalDeviceVulkan12Features::default()
            .timeline_semaphore(true)
            .shader_float16(enable.float16)
            .shader_buffer_int64_atomics(enable.buffer_int64_atomics)
            .shader_shared_int64_atomics(enable.shared_int64_atomics);
        let mut features13 = vk::PhysicalDeviceVulkan13Features::default()
            .shader_zero_initialize_workgroup_memory(enable.zero_initialize_workgroup_memory);
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .features(core_features)
            .push_next(&mut features11)
            .push_next(&mut features12);
        if enable.zero_initialize_workgroup_memory {
            features = features.push_next(&mut features13);
        }
        let create_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_infos)
            .push_next(&mut features);
        // SAFETY: the physical device belongs to this instance; only features it reported are enabled.
        let device = unsafe { instance.instance.create_device(adapter.physical, &create_info, None) }
            .map_err(|result| vk_error(&format!("creating a Vulkan device on {}", adapter.info.name), result))?;
        // SAFETY: queue 0 of the family was requested above.
        let queue = unsafe { device.get_device_queue(adapter.queue_family, 0) };
        // Any buffer may be bound as a kernel's uniform buffer as well as its storage buffer.
        let buffer_usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let memory_type_bits = {
            let probe_info = vk::BufferCreateInfo::default()
                .size(4096)
                .usage(buffer_usage)
                .sharing_mode(vk::SharingMode::EXCLUSIVE);
            // SAFETY: a throwaway buffer on a live device, destroyed at once.
            unsafe {
                let probe = device.create_buffer(&probe_info, None);
                match probe {
                    Ok(probe) => {
                        let bits = device.get_buffer_memory_requirements(probe).memory_type_bits;
                        device.destroy_buffer(probe, None);
                        bits
                    }
                    Err(result) => {
                        device.destroy_device(None);
                        return Err(vk_error("creating a probe buffer", result));
                    }
                }
            }
        };
        let memory = &adapter.memory;
        let types = &memory.memory_types[..memory.memory_type_count as usize];
        let usable = |index: usize| memory_type_bits & (1 << index) != 0;
        let coherent = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let pick = |required: vk::MemoryPropertyFlags, preferred: vk::MemoryPropertyFlags| {
            let candidates = || {
                types
                    .iter()
                    .enumerate()
                    .filter(|(index, kind)| usable(*index) && kind.property_flags.contains(required))
            };
            candidates()
                .find(|(_, kind)| kind.property_flags.contains(preferred))
                .or_else(|| candidates().next())
                .map(|(index, kind)| MemoryType {
                    index: index as u32,
                    mapped: kind.property_flags.contains(coherent),
                })
        };
        let device_memory = pick(
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
        )
        .or_else(|| pick(vk::MemoryPropertyFlags::empty(), vk::MemoryPropertyFlags::empty()));
        let staging_memory = pick(coherent, vk::MemoryPropertyFlags::HOST_CACHED);
        let (Some(device_memory), Some(staging_memory)) = (device_memory, staging_memory) else {
            // SAFETY: nothing was made on the device yet.
            unsafe { device.destroy_device(None) };
            return Err(Error::unsupported(format!(
                "{} has no memory type for storage buffers that is device-local and one that is host-visible",
                adapter.info.name
            )));
        };
        tracing::debug!(
            device = %adapter.info.name,
            ?device_memory,
            ?staging_memory,
            "opened a Vulkan device"
        );
        Ok(Gpu {
            instance,
            adapter,
            device,
            queue: Mutex::new(queue),
            device_memory,
            staging_memory,
            pools: Mutex::new([Pool::default(), Pool::default()]),
            buffer_usage,
            direct_copies,
        })
    }

    /// Waits until the queue has finished with everything submitted to it, before objects a
    /// submission named (a stream's command pool, a timeline semaphore) are destroyed. The
    /// timeline value a submission signals is not enough: Mesa's queue (lavapipe's included)
    /// still reads a submission's wait semaphores after signalling, and destroying one then
    /// crashed the queue's thread.
    pub(crate) fn wait_for_queue_idle(&self) {
        // SAFETY: the queue is used under its lock.
        if let Err(result) = self.with_queue(|queue| unsafe { self.device.queue_wait_idle(queue) }) {
            tracing::warn!(%result, "waiting for the queue to go idle failed");
        }
    }

    /// Runs `submit` with the queue, which Vulkan requires to be used by one thread at a time.
    pub(crate) fn with_queue<T>(&self, submit: impl FnOnce(vk::Queue) -> T) -> T {
        let queue = self.queue.lock();
        submit(*queue)
    }

    /// The validation layer's messages since the last look, as an error.
    pub(crate) fn validation_error(&self) -> Option<Error> {
        self.instance.validation.take_error()
    }

    fn memory_type(&self, kind: MemoryKind) -> MemoryType {
        match kind {
            MemoryKind::Device => self.device_memory,
            MemoryKind::Staging => self.staging_memory,
        }
    }

    /// Allocates `size` (> 0) bytes.
    pub(crate) fn allocate(&self, size: u64, kind: MemoryKind) -> Result<Allocation> {
        let limit = self.adapter.max_memory_allocation_size;
        if size > limit {
            return Err(Error::out_of_memory(format!(
                "cannot allocate {size} bytes on {}: the largest allocation (maxMemoryAllocationSize, capped by the largest heap) is {limit} bytes",
                self.adapter.info.name
            )));
        }
        if size <= SUBALLOCATION_LIMIT {
            self.allocate_in_block(size, kind)
        } else {
            self.allocate_dedicated(size, kind)
        }
    }

    /// Returns an allocation's memory.
    pub(crate) fn free(&self, allocation: &Allocation) {
        match allocation.placement {
            Placement::Block { kind, block, padded } => {
                let mut pools = self.pools.lock();
                let pool = &mut pools[kind as usize];
                let Some(owner) = pool.blocks.get_mut(&block) else {
                    return;
                };
                let base = allocation.offset;
                owner.give_back(base, padded);
                // Keep one empty block per kind for the next small buffer; free the others.
                let empty_blocks = pool.blocks.values().filter(|block| block.used == 0).count();
                if owner_is_empty(pool, block) && empty_blocks > 1 {
                    if let Some(block) = pool.blocks.remove(&block) {
                        self.release_block(block);
                    }
                }
            }
            Placement::Dedicated { memory } => {
                // SAFETY: the buffer and memory were made by `allocate_dedicated` and no queued
                // work uses them any more (streams hold allocations until their work retires).
                unsafe {
                    self.device.destroy_buffer(allocation.buffer, None);
                    self.device.free_memory(memory, None);
                }
                self.adapter.allocated.fetch_sub(allocation.size, Ordering::Relaxed);
            }
        }
    }

    fn release_block(&self, block: Block) {
        // SAFETY: the block is empty, so no allocation, and hence no queued work, uses it.
        unsafe {
            self.device.destroy_buffer(block.buffer, None);
            self.device.free_memory(block.memory, None);
        }
        self.adapter.allocated.fetch_sub(BLOCK_SIZE, Ordering::Relaxed);
    }

    fn allocate_in_block(&self, size: u64, kind: MemoryKind) -> Result<Allocation> {
        let padded = size.div_ceil(SUBALLOCATION_ALIGNMENT) * SUBALLOCATION_ALIGNMENT;
        let mut pools = self.pools.lock();
        let pool = &mut pools[kind as usize];
        let mut found = None;
        for (&id, block) in pool.blocks.iter_mut() {
            if let Some(offset) = block.take(padded) {
                found = Some((id, offset));
                break;
            }
        }
        let (id, offset) = match found {
            Some(found) => found,
            None => {
                let (buffer, memory, mapped) = self.create_memory(BLOCK_SIZE, kind)?;
                let mut block = Block {
                    memory,
                    buffer,
                    mapped,
                    free: BTreeMap::from([(0, BLOCK_SIZE)]),
                    used: 0,
                };
                let offset = block.take(padded).unwrap_or(0);
                let id = pool.next_block;
                pool.next_block += 1;
                pool.blocks.insert(id, block);
                (id, offset)
            }
        };
        let block = &pool.blocks[&id];
        Ok(Allocation {
            buffer: block.buffer,
            offset,
            size,
            // SAFETY: `offset` lies inside the block's mapping.
            mapped: block
                .mapped
                .map(|base| MappedPtr(unsafe { base.0.add(offset as usize) })),
            placement: Placement::Block {
                kind,
                block: id,
                padded,
            },
        })
    }

    fn allocate_dedicated(&self, size: u64, kind: MemoryKind) -> Result<Allocation> {
        let (buffer, memory, mapped) = self.create_memory(size, kind)?;
        Ok(Allocation {
            buffer,
            offset: 0,
            size,
            mapped,
            placement: Placement::Dedicated { memory },
        })
    }

    /// A `VkBuffer` of `size` bytes with its own memory, mapped when host-visible.
    fn create_memory(&self, size: u64, kind: MemoryKind) -> Result<(vk::Buffer, vk::DeviceMemory, Option<MappedPtr>)> {
        let memory_type = self.memory_type(kind);
        let total = self.adapter.info.total_memory;
        let held = self.adapter.allocated.load(Ordering::Relaxed);
        if held.saturating_add(size) > total {
            return Err(Error::out_of_memory(format!(
                "cannot allocate {size} bytes on {}: {held} of its {total} bytes are in use",
                self.adapter.info.name
            )));
        }
        let device = &self.device;
        let buffer_info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(self.buffer_usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: plain object creation on a live device; every failure path below destroys
        // what was made before it.
        unsafe {
            let buffer = device
                .create_buffer(&buffer_info, None)
                .map_err(|result| vk_error(&format!("creating a buffer of {size} bytes"), result))?;
            let requirements = device.get_buffer_memory_requirements(buffer);
            let allocate_info = vk::MemoryAllocateInfo::default()
                .allocation_size(requirements.size)
                .memory_type_index(memory_type.index);
            let memory = match device.allocate_memory(&allocate_info, None) {
                Ok(memory) => memory,
                Err(result) => {
                    device.destroy_buffer(buffer, None);
                    return Err(match result {
                        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                            Error::out_of_memory(format!(
                                "the driver refused {size} bytes on {}: {result}",
                                self.adapter.info.name
                            ))
                        }
                        other => vk_error(&format!("allocating {size} bytes"), other),
                    });
                }
            };
            if let Err(result) = device.bind_buffer_memory(buffer, memory, 0) {
                device.destroy_buffer(buffer, None);
                device.free_memory(memory, None);
                return Err(vk_error("binding buffer memory", result));
            }
            let mapped = if memory_type.mapped {
                match device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) {
                    Ok(pointer) => Some(MappedPtr(pointer.cast())),
                    Err(result) => {
                        device.destroy_buffer(buffer, None);
                        device.free_memory(memory, None);
                        return Err(vk_error("mapping memory", result));
                    }
                }
            } else {
                None
            };
            self.adapter.allocated.fetch_add(size, Ordering::Relaxed);
            Ok((buffer, memory, mapped))
        }
    }
}

fn owner_is_empty(pool: &Pool, block: u64) -> bool {
    pool.blocks.get(&block).is_some_and(|block| block.used == 0)
}

/// A device allocation that frees itself when the last user lets go.
#[derive(Debug)]
pub(crate) struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) allocation: Allocation,
}

impl DeviceBuffer {
    pub(crate) fn new(gpu: &Arc<Gpu>, size: u64, kind: MemoryKind) -> Result<DeviceBuffer> {
        let allocation = gpu.allocate(size, kind)?;
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            allocation,
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.free(&self.allocation);
    }
}
