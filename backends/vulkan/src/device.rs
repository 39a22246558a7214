//! An opened Vulkan device: the logical device, its queue, and the memory types its buffers
//! come from (the allocator itself is in [`memory`](crate::memory)).

use crate::instance::{vk_error, Adapter, Instance};
use crate::memory::{MemoryType, Pool};
use crate::VulkanDriver;
use ash::vk;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{ClockSample, Command, DriverCommandList, DriverDevice, Error, Object, Result};

/// An opened device. Shared by every handle to it and by every object made on it, so it is
/// destroyed only after them.
pub struct Gpu {
    pub(crate) instance: Arc<Instance>,
    pub(crate) adapter: Adapter,
    pub(crate) device: ash::Device,
    queue: Mutex<vk::Queue>,
    pub(crate) device_memory: MemoryType,
    pub(crate) staging_memory: MemoryType,
    /// Sub-allocation blocks, one pool per [`MemoryKind`](crate::memory::MemoryKind).
    pub(crate) pools: Mutex<[Pool; 2]>,
    pub(crate) buffer_usage: vk::BufferUsageFlags,
    /// Whether host copies may go straight through a mapping when the stream is idle.
    pub(crate) direct_copies: bool,
    /// Reads the device's timestamps with the host's clock, where the device can.
    calibration: Option<ash::ext::calibrated_timestamps::Device>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("device", &self.adapter.info.name).finish()
    }
}

/// The device's memory usage is not reported: the default says so.
impl DriverDevice<VulkanDriver> for Arc<Gpu> {
    /// Command lists are reusable command buffers: a submission is one `vkQueueSubmit`.
    fn has_command_lists(_device: &Arc<Object<Arc<Gpu>>>) -> bool {
        true
    }

    fn build_command_list(
        _driver: &VulkanDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        commands: &[Command<VulkanDriver>],
    ) -> Result<Box<dyn DriverCommandList<VulkanDriver>>> {
        Ok(Box::new(crate::command_list::CommandList::build(device, commands)?))
    }

    /// `vkGetCalibratedTimestampsEXT` of the device's and the `CLOCK_MONOTONIC` domains.
    fn clock(device: &Arc<Object<Arc<Gpu>>>) -> Result<ClockSample> {
        let Some(calibration) = &device.calibration else {
            return Err(Error::unsupported(format!(
                "{} cannot read its timestamps together with the host's clock \
                 (VK_EXT_calibrated_timestamps with the device and CLOCK_MONOTONIC domains)",
                device.adapter.info.name
            )));
        };
        let domains = [
            vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::DEVICE),
            vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::CLOCK_MONOTONIC),
        ];
        // SAFETY: the extension is enabled on this live device; both domains are calibrateable.
        let (timestamps, max_deviation) = unsafe { calibration.get_calibrated_timestamps(&domains) }
            .map_err(|result| vk_error("reading calibrated timestamps", result))?;
        Ok(ClockSample {
            device_ns: device.nanoseconds(device.masked_ticks(timestamps[0])),
            host_ns: timestamps[1],
            uncertainty_ns: max_deviation,
        })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: every object made on this device holds an `Arc<Gpu>`, so none is left but
        // the blocks, which no work uses once the device is idle.
        let _ = unsafe { self.device.device_wait_idle() };
        self.release_all_blocks();
        // SAFETY: as above; the blocks went with the rest.
        unsafe { self.device.destroy_device(None) };
    }
}

impl Gpu {
    /// A timestamp with the bits the queue does not write cleared.
    pub(crate) fn masked_ticks(&self, ticks: u64) -> u64 {
        match self.adapter.timestamp_valid_bits {
            bits @ 1..=63 => ticks & ((1u64 << bits) - 1),
            _ => ticks,
        }
    }

    /// Timestamp ticks as nanoseconds of the device's clock.
    pub(crate) fn nanoseconds(&self, ticks: u64) -> u64 {
        let period = self.adapter.timestamp_period;
        if period == 1.0 {
            ticks
        } else {
            (ticks as f64 * period).round() as u64
        }
    }

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
        let extensions = if adapter.calibrated_timestamps {
            vec![ash::ext::calibrated_timestamps::NAME.as_ptr()]
        } else {
            Vec::new()
        };
        let create_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_infos)
            .enabled_extension_names(&extensions)
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
        let calibration = adapter
            .calibrated_timestamps
            .then(|| ash::ext::calibrated_timestamps::Device::new(&instance.instance, &device));
        Ok(Gpu {
            instance,
            adapter,
            device,
            calibration,
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
}
