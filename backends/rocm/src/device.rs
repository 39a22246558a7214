//! An opened device: a HIP device ordinal, made current before each call that needs it.

use crate::ffi::{self, HipEvent, HipStream};
use crate::instance::{Adapter, Instance};
use crate::RocmDriver;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{
    ClockSample, Command, DriverCommandList, DriverDevice, ElapsedTimer, Error, MemoryUsage, Object, ReferenceClock,
    Result, StreamPriorities,
};

/// An opened device: a HIP device ordinal.
pub struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
    /// The device's clock for traces: HIP events measure only elapsed time.
    clock: ReferenceClock<HipEvent>,
    /// The stream the clock's marks are recorded on, made on first use: idle but for them.
    clock_stream: Mutex<Option<HipStream>>,
}

// HIP streams and events may be used from any thread; the clock's are behind locks.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Opens adapter `index`: makes it current once, so a device the runtime cannot use
    /// fails here rather than at the first allocation.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let gpu = Gpu {
            instance,
            index,
            clock: ReferenceClock::default(),
            clock_stream: Mutex::new(None),
        };
        gpu.bind()?;
        Ok(gpu)
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

    /// Makes this device the calling thread's current HIP device. HIP keeps the current
    /// device per thread, and xhal may call from any thread, so every call that allocates
    /// or creates something on "the current device" comes after this.
    pub(crate) fn bind(&self) -> Result<()> {
        let ordinal = self.adapter().ordinal;
        // SAFETY: an ordinal below the runtime's device count.
        let code = unsafe { (self.api().set_device)(ordinal) };
        self.api().check(code, "hipSetDevice", || {
            format!("making {} (HIP device {ordinal}) current", self.name())
        })
    }

    /// Free and total memory as the runtime sees them (other processes included). `device_info`
    /// asks it of a plain opened device, outside the role trait, so the query lives here.
    pub(crate) fn memory_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t.
        let code = unsafe { (self.api().mem_get_info)(&mut free, &mut total) };
        self.api().check(code, "hipMemGetInfo", || {
            format!("reading the free memory of {}", self.name())
        })?;
        Ok((free as u64, total as u64))
    }
}

impl DriverDevice<RocmDriver> for Arc<Gpu> {
    fn memory_usage(device: &Arc<Object<Arc<Gpu>>>) -> Result<MemoryUsage> {
        let (free, total) = device.memory_info()?;
        Ok(MemoryUsage { free, total })
    }

    /// Where the runtime has stream capture and executable graphs, and captures kernel
    /// launches (ROCm 5.3 and later).
    fn has_command_lists(device: &Arc<Object<Arc<Gpu>>>) -> bool {
        device.instance.graphs.is_some()
    }

    fn build_command_list(
        _driver: &RocmDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        commands: &[Command<RocmDriver>],
    ) -> Result<Box<dyn DriverCommandList<RocmDriver>>> {
        Ok(Box::new(crate::command_list::CommandList::build(device, commands)?))
    }

    /// The current device's range (`hipDeviceGetStreamPriorityRange`): 0 to -1 on AMD GPUs.
    fn stream_priorities(device: &Arc<Object<Arc<Gpu>>>) -> Result<StreamPriorities> {
        let api = device.api();
        let (Some(range), Some(_)) = (api.device_get_stream_priority_range, api.stream_create_with_priority) else {
            return Err(Error::unsupported(format!(
                "this HIP runtime has no stream priorities for {}",
                device.name()
            )));
        };
        device.bind()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: two valid out pointers, for the device just made current.
        let code = unsafe { range(&mut least, &mut greatest) };
        api.check(code, "hipDeviceGetStreamPriorityRange", || {
            format!("reading the stream priorities of {}", device.name())
        })?;
        Ok(StreamPriorities { least, greatest })
    }

    /// `hipHostMalloc` (portable): page-locked memory HIP's copies reach without staging.
    fn host_memory_allocate(device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<*mut u8> {
        let api = device.api();
        let (Some(malloc), Some(_)) = (api.host_malloc, api.host_free) else {
            return Err(Error::unsupported(format!(
                "this HIP runtime has no hipHostMalloc for {}",
                device.name()
            )));
        };
        device.bind()?;
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes of pinned memory do not fit this host")))?;
        let mut pointer: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: writes one host pointer to `length` page-locked bytes; 1 is hipHostMallocPortable.
        let code = unsafe { malloc(&mut pointer, length, 1) };
        api.check(code, "hipHostMalloc", || {
            format!("pinning {size} bytes of host memory for {}", device.name())
        })?;
        Ok(pointer.cast())
    }

    fn host_memory_free(device: &Arc<Object<Arc<Gpu>>>, pointer: *mut u8) {
        if let Some(free) = device.api().host_free {
            // SAFETY: memory from hipHostMalloc that no transfer uses any more (the host's promise).
            let code = unsafe { free(pointer.cast()) };
            if let Err(error) = device
                .api()
                .check(code, "hipHostFree", || "freeing pinned host memory".to_string())
            {
                tracing::warn!(%error, "pinned host memory was not freed");
            }
        }
    }

    /// A clock counted from a reference event (HIP events measure only elapsed time), read
    /// by the round trip of a timing event on a stream of its own.
    fn clock(device: &Arc<Object<Arc<Gpu>>>) -> Result<ClockSample> {
        device.bind()?;
        let gpu: &Gpu = device;
        gpu.clock.sample(gpu)
    }
}

impl Gpu {
    /// When a completed timing event completed, on the device's clock.
    pub(crate) fn event_timestamp(&self, event: HipEvent) -> Result<u64> {
        self.bind()?;
        self.clock.timestamp(self, event)
    }
}

impl ElapsedTimer for Gpu {
    type Event = HipEvent;

    fn mark(&self) -> Result<HipEvent> {
        let api = self.api();
        let stream = {
            let mut slot = self.clock_stream.lock();
            match *slot {
                Some(stream) => stream,
                None => {
                    let mut stream: HipStream = std::ptr::null_mut();
                    // SAFETY: writes one stream handle on the current device.
                    let code = unsafe { (api.stream_create_with_flags)(&mut stream, ffi::HIP_STREAM_NON_BLOCKING) };
                    api.check(code, "hipStreamCreateWithFlags", || {
                        format!("creating the clock stream on {}", self.name())
                    })?;
                    *slot = Some(stream);
                    stream
                }
            }
        };
        let mut event: HipEvent = std::ptr::null_mut();
        // SAFETY: writes one timing event handle.
        let code = unsafe { (api.event_create_with_flags)(&mut event, ffi::HIP_EVENT_DEFAULT) };
        api.check(code, "hipEventCreateWithFlags", || {
            format!("creating a clock event on {}", self.name())
        })?;
        // SAFETY: a live event and stream of this device.
        let code = unsafe { (api.event_record)(event, stream) };
        let recorded = api.check(code, "hipEventRecord", String::new).and_then(|()| {
            // SAFETY: the event was just recorded.
            let code = unsafe { (api.event_synchronize)(event) };
            api.check(code, "hipEventSynchronize", String::new)
        });
        if let Err(error) = recorded {
            self.destroy(event);
            return Err(error);
        }
        Ok(event)
    }

    fn elapsed_ns(&self, from: HipEvent, to: HipEvent) -> Result<i64> {
        let mut milliseconds = 0f32;
        // SAFETY: two completed timing events of this device.
        let code = unsafe { (self.api().event_elapsed_time)(&mut milliseconds, from, to) };
        self.api().check(code, "hipEventElapsedTime", String::new)?;
        Ok((f64::from(milliseconds) * 1e6).round() as i64)
    }

    fn destroy(&self, event: HipEvent) {
        // SAFETY: an event `mark` made, destroyed once.
        unsafe { (self.api().event_destroy)(event) };
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.bind().is_err() {
            return;
        }
        self.clock.release(&*self);
        if let Some(stream) = self.clock_stream.get_mut().take() {
            // SAFETY: the clock stream's marks were each waited for.
            unsafe { (self.api().stream_destroy)(stream) };
        }
    }
}
