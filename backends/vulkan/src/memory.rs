//! Buffers: device memory, the block sub-allocator, and the buffer objects.
//!
//! Memory comes from a simple block allocator: buffers up to [`SUBALLOCATION_LIMIT`] are
//! carved out of [`BLOCK_SIZE`] blocks (one `VkDeviceMemory` and one `VkBuffer` spanning it),
//! so many small buffers cost no `vkAllocateMemory` each; bigger ones get their own
//! allocation. Every allocation is named by a `VkBuffer` and an offset into it.

use crate::device::Gpu;
use crate::instance::vk_error;
use crate::VulkanDriver;
use ash::vk;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xhal_backend::{DriverBuffer, Error, Object, Result};

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

/// The blocks of one [`MemoryKind`].
#[derive(Default)]
pub(crate) struct Pool {
    blocks: BTreeMap<u64, Block>,
    next_block: u64,
}

/// One memory type and what it offers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryType {
    pub(crate) index: u32,
    /// Host-visible and coherent, so allocations are mapped.
    pub(crate) mapped: bool,
}

/// The allocator, over the pools and memory types the device keeps.
impl Gpu {
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

    /// Frees every block, when the device goes: no allocation, and hence no work, uses one.
    pub(crate) fn release_all_blocks(&mut self) {
        let blocks: Vec<Block> = self
            .pools
            .get_mut()
            .iter_mut()
            .flat_map(|pool| std::mem::take(&mut pool.blocks).into_values())
            .collect();
        for block in blocks {
            self.release_block(block);
        }
    }
}

fn owner_is_empty(pool: &Pool, block: u64) -> bool {
    pool.blocks.get(&block).is_some_and(|block| block.used == 0)
}

/// A device allocation that frees itself when the last user lets go: a buffer of the
/// application's, or staging and scratch memory a stream made for one command.
#[derive(Debug)]
pub struct DeviceBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) allocation: Allocation,
}

impl DeviceBuffer {
    /// An allocation of `kind`: the application's buffers, and a stream's staging and scratch
    /// memory.
    pub(crate) fn new(gpu: &Arc<Gpu>, size: u64, kind: MemoryKind) -> Result<DeviceBuffer> {
        let allocation = gpu.allocate(size, kind)?;
        Ok(DeviceBuffer {
            gpu: Arc::clone(gpu),
            allocation,
        })
    }
}

impl DriverBuffer<VulkanDriver> for DeviceBuffer {
    fn allocate(_driver: &VulkanDriver, device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<DeviceBuffer> {
        if let Some(error) = device.validation_error() {
            return Err(error);
        }
        DeviceBuffer::new(device, size, MemoryKind::Device)
    }

    /// Device memory that is host-visible and coherent (lavapipe, integrated GPUs) is mapped
    /// for the allocation's life: a mapping is an address inside it. Every submission ends with
    /// a barrier to the host, and a submission sees host writes made before it, so a mapping
    /// needs no flush or invalidation.
    fn map(buffer: &Arc<Object<DeviceBuffer>>, offset: u64, size: u64, _write: bool) -> Result<*mut u8> {
        let Some(mapped) = buffer.allocation.mapped else {
            return Err(Error::unsupported(format!(
                "{}'s storage-buffer memory is not host-visible and coherent, so its buffers cannot be mapped",
                buffer.gpu.adapter.info.name
            )));
        };
        let start = usize::try_from(offset)
            .ok()
            .filter(|start| start.checked_add(size as usize).is_some())
            .ok_or_else(|| Error::out_of_bounds(format!("a mapping at byte {offset} does not fit this host")))?;
        // SAFETY: the adapter checked `offset + size` against the buffer, whose allocation is
        // mapped from its start for its whole size.
        Ok(unsafe { mapped.0.add(start) })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.gpu.free(&self.allocation);
    }
}
