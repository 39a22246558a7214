//! One simulated device: its memory budget and the limits it reports.

use crate::memory::AlignedBytes;
use crate::CpuDriver;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_backend::{
    ClockSample, Command, DeviceInfo, DeviceType, DriverCommandList, DriverDevice, Error, Features, KernelFormat,
    MemoryUsage, Object, Result, StreamPriorities,
};

/// Workgroups per dimension a launch may ask for.
pub(crate) const MAX_WORKGROUP_COUNT: [u32; 3] = [65535; 3];
/// Buffer arguments one launch may bind.
pub(crate) const MAX_BUFFER_ARGUMENTS: u32 = 32;
/// Largest scalar block in bytes.
pub(crate) const MAX_SCALAR_BLOCK_SIZE: u32 = 256;
/// Buffer-argument offsets must be multiples of this, as on the strictest GPUs we target.
pub(crate) const BUFFER_OFFSET_ALIGNMENT: u32 = 4;

/// The memory budget of one device, shared by its buffers so that a buffer gives its bytes
/// back when its last user (a handle or queued work) lets go of it. An opened device is its
/// index's budget: every open of one index shares it.
#[derive(Debug)]
pub struct DeviceMemory {
    index: u32,
    total: u64,
    used: AtomicU64,
    /// Blocks of freed buffers that were never written, by length: still poisoned, so the
    /// next allocation of that length takes one as it is.
    clean: Mutex<CleanBlocks>,
}

/// Host memory the clean-block cache of one device may hold.
const CLEAN_CACHE_BYTES: usize = 64 << 20;

#[derive(Debug, Default)]
struct CleanBlocks {
    by_length: HashMap<usize, Vec<AlignedBytes>>,
    bytes: usize,
}

impl DeviceMemory {
    pub(crate) fn new(index: u32, total: u64) -> DeviceMemory {
        DeviceMemory {
            index,
            total,
            used: AtomicU64::new(0),
            clean: Mutex::new(CleanBlocks::default()),
        }
    }

    /// A cached block of `length` bytes that holds only the poison, if there is one.
    pub(crate) fn clean_block(&self, length: usize) -> Option<AlignedBytes> {
        let mut clean = self.clean.lock();
        let block = clean.by_length.get_mut(&length)?.pop()?;
        clean.bytes -= block.capacity();
        Some(block)
    }

    /// Keeps a block that holds only the poison for the next allocation of its length, while
    /// the cache has room; frees it otherwise.
    pub(crate) fn keep_clean_block(&self, block: AlignedBytes) {
        let mut clean = self.clean.lock();
        if block.is_empty() || clean.bytes + block.capacity() > CLEAN_CACHE_BYTES {
            return;
        }
        clean.bytes += block.capacity();
        clean.by_length.entry(block.len()).or_default().push(block);
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    pub(crate) fn free(&self) -> u64 {
        self.total.saturating_sub(self.used())
    }

    /// Takes `size` bytes from the budget, or says how much there is.
    pub(crate) fn reserve(&self, size: u64) -> Result<()> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(size).filter(|after| *after <= self.total)
            })
            .map(|_| ())
            .map_err(|used| {
                Error::out_of_memory(format!(
                    "requested {size} bytes, device has {} of {} free",
                    self.total.saturating_sub(used),
                    self.total
                ))
            })
    }

    pub(crate) fn release(&self, size: u64) {
        self.used.fetch_sub(size, Ordering::AcqRel);
    }

    pub(crate) fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: format!("xhal CPU reference device {}", self.index),
            vendor: "xhal".to_string(),
            vendor_id: 0,
            device_id: 0,
            device_type: DeviceType::Cpu,
            uuid: device_uuid(self.index),
            pci_bus_id: None,
            driver_version: env!("CARGO_PKG_VERSION").to_string(),
            total_memory: self.total,
            free_memory: self.free(),
            max_allocation_size: self.total,
            max_workgroup_size: [1024, 1024, 64],
            max_workgroup_invocations: 1024,
            max_workgroup_count: MAX_WORKGROUP_COUNT,
            max_workgroup_memory: 32768,
            subgroup_size: 1,
            max_buffer_arguments: MAX_BUFFER_ARGUMENTS,
            max_scalar_block_size: MAX_SCALAR_BLOCK_SIZE,
            buffer_offset_alignment: BUFFER_OFFSET_ALIGNMENT,
            // What the WGSL interpreter implements: 64-bit integers and floats, `f16`, and
            // 32-bit atomics (64-bit atomics are not implemented).
            features: Features::F16
                | Features::F64
                | Features::I64
                | Features::ATOMICS_32
                | Features::TIMESTAMPS
                | Features::HOST_MAPPABLE,
            kernel_formats: vec![KernelFormat::WGSL, KernelFormat::CPU_BUILTIN],
        }
    }
}

impl DriverDevice<CpuDriver> for Arc<DeviceMemory> {
    /// Two: ordinary streams (0) and urgent ones (-1), whose launches pause ordinary ones
    /// and take their helper threads (see `pool`).
    fn stream_priorities(_device: &Arc<Object<Arc<DeviceMemory>>>) -> Result<StreamPriorities> {
        Ok(StreamPriorities { least: 0, greatest: -1 })
    }

    fn memory_usage(device: &Arc<Object<Arc<DeviceMemory>>>) -> Result<MemoryUsage> {
        Ok(MemoryUsage {
            free: device.free(),
            total: device.total,
        })
    }

    /// The device is the host: its event timestamps are read on the host's monotonic clock.
    fn clock(_device: &Arc<Object<Arc<DeviceMemory>>>) -> Result<ClockSample> {
        Ok(ClockSample::host())
    }

    /// Every command is checked and prepared once, when the list is built: a submission queues
    /// one operation, however many commands the list holds.
    fn has_command_lists(_device: &Arc<Object<Arc<DeviceMemory>>>) -> bool {
        true
    }

    fn build_command_list(
        _driver: &CpuDriver,
        _device: &Arc<Object<Arc<DeviceMemory>>>,
        commands: &[Command<CpuDriver>],
    ) -> Result<Box<dyn DriverCommandList<CpuDriver>>> {
        Ok(Box::new(crate::stream::CommandList::build(commands)?))
    }
}

/// A uuid that depends only on the device index, so a CPU device keeps its identity across
/// runs and machines: the bytes of "xhal-cpu" with the RFC 9562 version-8 (vendor-defined)
/// and variant bits set, then the index, big-endian.
pub(crate) fn device_uuid(index: u32) -> [u8; 16] {
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(b"xhal-cpu");
    uuid[6] = 0x80 | (uuid[6] & 0x0f);
    uuid[8] = 0x80;
    uuid[12..].copy_from_slice(&index.to_be_bytes());
    uuid
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_backend::ErrorKind;

    #[test]
    fn uuids_are_stable_and_distinct_per_index() {
        assert_eq!(device_uuid(0), device_uuid(0));
        assert_ne!(device_uuid(0), device_uuid(1));
        let info = DeviceMemory::new(1, 1024).info();
        assert_eq!(info.uuid_string(), "7868616c-2d63-8075-8000-000000000001");
    }

    #[test]
    fn reserve_refuses_more_than_is_free_and_names_the_numbers() {
        let memory = DeviceMemory::new(0, 100);
        memory.reserve(60).unwrap();
        let error = memory.reserve(50).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory);
        assert_eq!(error.message(), "requested 50 bytes, device has 40 of 100 free");
        memory.release(60);
        assert_eq!(memory.free(), 100);
        assert!(memory.reserve(u64::MAX).is_err());
    }
}
