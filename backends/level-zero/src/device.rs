//! An opened device: one Level Zero context for the device, shared by every object made on it.

use crate::ffi::{self, ContextHandle};
use crate::instance::{Adapter, Instance};
use crate::LevelZeroDriver;
use std::sync::Arc;
use xhal_backend::{ClockSample, Command, DriverCommandList, DriverDevice, Error, Object, Result, StreamPriorities};

/// An opened device: one context of its driver.
pub struct Gpu {
    instance: Arc<Instance>,
    index: usize,
    pub(crate) context: ContextHandle,
    /// Host memory handed to the application (`host_memory_allocate`): start and length.
    /// Transfers whose host range lies inside one copy directly, without staging.
    pinned: parking_lot::Mutex<Vec<(usize, usize)>>,
}

// A Level Zero context may be used from any thread; this backend destroys it once, on drop.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Creates a context on adapter `index`'s driver.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let adapter = &instance.adapters[index];
        let desc = ffi::ContextDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_CONTEXT_DESC,
            p_next: std::ptr::null(),
            flags: 0,
        };
        let mut context = std::ptr::null_mut();
        // SAFETY: a driver the loader listed, a filled descriptor and a place for the handle.
        let code = unsafe { (instance.api.context_create)(adapter.driver, &desc, &mut context) };
        ffi::check(code, "zeContextCreate", || format!("opening {}", adapter.info.name))?;
        if context.is_null() {
            return Err(Error::internal(format!(
                "zeContextCreate returned no context for {}",
                adapter.info.name
            )));
        }
        Ok(Gpu {
            instance,
            index,
            context,
            pinned: parking_lot::Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn adapter(&self) -> &Adapter {
        &self.instance.adapters[self.index]
    }

    pub(crate) fn api(&self) -> &ffi::Api {
        &self.instance.api
    }

    pub(crate) fn name(&self) -> &str {
        &self.adapter().info.name
    }

    /// Whether `size` bytes at `address` lie inside host memory this device handed out, so a
    /// transfer can use them without staging.
    pub(crate) fn is_pinned(&self, address: usize, size: usize) -> bool {
        self.pinned
            .lock()
            .iter()
            .any(|&(start, length)| address >= start && address.saturating_add(size) <= start + length)
    }
}

// `memory_usage` keeps its default: this backend does not report its devices' memory usage.
impl DriverDevice<LevelZeroDriver> for Arc<Gpu> {
    /// A queue's priority in Level Zero is normal or high (its low priority, below a plain
    /// stream's, has no place in CUDA's numbering): 0 and -1.
    fn stream_priorities(_device: &Arc<Object<Arc<Gpu>>>) -> Result<StreamPriorities> {
        Ok(StreamPriorities { least: 0, greatest: -1 })
    }

    /// `zeMemAllocHost`: host memory the device's copy engines read and write directly.
    fn host_memory_allocate(device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<*mut u8> {
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes of host memory do not fit this host")))?;
        let desc = ffi::HostMemAllocDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
            p_next: std::ptr::null(),
            flags: 0,
        };
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a live context, a filled descriptor, a place for the pointer. 64 bytes is
        // the ABI's alignment; drivers align host allocations to pages anyway, and asking for
        // more than a driver supports fails the allocation.
        let code = unsafe { (device.api().mem_alloc_host)(device.context, &desc, length, 64, &mut pointer) };
        ffi::check(code, "zeMemAllocHost", || {
            format!("allocating {size} bytes of host memory for {}", device.name())
        })?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "zeMemAllocHost returned no memory for {size} bytes for {}",
                device.name()
            )));
        }
        device.pinned.lock().push((pointer as usize, length));
        Ok(pointer.cast())
    }

    fn host_memory_free(device: &Arc<Object<Arc<Gpu>>>, pointer: *mut u8) {
        device.pinned.lock().retain(|&(start, _)| start != pointer as usize);
        // SAFETY: allocated by this context; no queued transfer uses it any more (the host's promise).
        unsafe { (device.api().mem_free)(device.context, pointer.cast()) };
    }

    /// Where the loader exports `zeCommandListImmediateAppendCommandListsExp` and the driver
    /// lists its extension (`command_list.rs`).
    fn has_command_lists(device: &Arc<Object<Arc<Gpu>>>) -> bool {
        device.adapter().command_lists
    }

    fn build_command_list(
        _driver: &LevelZeroDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        commands: &[Command<LevelZeroDriver>],
    ) -> Result<Box<dyn DriverCommandList<LevelZeroDriver>>> {
        if !device.adapter().command_lists {
            return Err(Error::unsupported(format!(
                "{} cannot run regular command lists from its streams (no {} in its Level Zero driver and loader)",
                device.name(),
                crate::ffi::ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME
            )));
        }
        Ok(Box::new(crate::command_list::CommandList::build(device, commands)?))
    }

    /// The round trip of `zeDeviceGetGlobalTimestamps`: its device timestamp is placed at the
    /// middle of the call on the host's monotonic clock. Its own host timestamp is not used:
    /// which host clock that is, is the driver's choice.
    fn clock(device: &Arc<Object<Arc<Gpu>>>) -> Result<ClockSample> {
        let resolution = device.adapter().timer_resolution_ns;
        ClockSample::by_round_trip(CALIBRATION_TRIES, || {
            Ok(device.global_ticks()?.saturating_mul(resolution))
        })
    }
}

/// Round trips a clock reading takes the shortest of.
const CALIBRATION_TRIES: usize = 3;

impl Gpu {
    /// The device's global timestamp counter now, in ticks.
    pub(crate) fn global_ticks(&self) -> Result<u64> {
        let Some(read) = self.api().device_get_global_timestamps else {
            return Err(Error::unsupported(format!(
                "the Level Zero loader has no zeDeviceGetGlobalTimestamps (API 1.1), so {} has no device clock",
                self.name()
            )));
        };
        let (mut host, mut device) = (0u64, 0u64);
        // SAFETY: a device of this driver; two plain out values.
        let code = unsafe { read(self.adapter().device, &mut host, &mut device) };
        ffi::check(code, "zeDeviceGetGlobalTimestamps", || {
            format!("reading the clock of {}", self.name())
        })?;
        Ok(device)
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: every object made in the context holds an `Arc<Gpu>`, so none is left.
        unsafe { (self.instance.api.context_destroy)(self.context) };
    }
}
