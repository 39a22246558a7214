//! An opened device: an OpenCL context holding one device.

use crate::ffi::{self, CommandQueue, Context};
use crate::instance::{Adapter, Instance, DRIVER_LOCK};
use crate::OpenClDriver;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{ClockSample, Command, DriverCommandList, DriverDevice, Error, Object, Result};

/// An opened device: one context holding the one device.
pub struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
    pub(crate) context: Context,
    /// The queue clock readings use ([`DriverDevice::clock`]), made on first use.
    calibration: Mutex<Option<QueueHandle>>,
}

// An OpenCL context may be used from any thread; this backend releases it once, on drop.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Creates a context for adapter `index`.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let adapter = &instance.adapters[index];
        let properties = [
            0x1084isize, // CL_CONTEXT_PLATFORM
            adapter.platform as isize,
            0,
        ];
        let mut code = ffi::CL_SUCCESS;
        let _driver = DRIVER_LOCK.lock();
        // SAFETY: the property list is zero-terminated and the device comes from the platform.
        let context = unsafe {
            (instance.api.create_context)(
                properties.as_ptr(),
                1,
                &adapter.device,
                None,
                std::ptr::null_mut(),
                &mut code,
            )
        };
        ffi::check(code, || format!("creating an OpenCL context for {}", adapter.info.name))?;
        if context.is_null() {
            return Err(Error::internal(format!(
                "creating an OpenCL context for {} returned no context",
                adapter.info.name
            )));
        }
        Ok(Gpu {
            instance,
            index,
            context,
            calibration: Mutex::new(None),
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

    /// The profiling queue clock readings use, made on first use: idle but for them, so its
    /// markers complete as soon as they are enqueued.
    fn calibration_queue(&self) -> Result<CommandQueue> {
        let mut slot = self.calibration.lock();
        if let Some(queue) = *slot {
            return Ok(queue.0);
        }
        let mut code = ffi::CL_SUCCESS;
        let adapter = self.adapter();
        // SAFETY: the context holds the device.
        let queue = unsafe {
            (self.api().create_command_queue)(self.context, adapter.device, ffi::CL_QUEUE_PROFILING_ENABLE, &mut code)
        };
        ffi::check(code, || format!("creating a calibration queue on {}", self.name()))?;
        *slot = Some(QueueHandle(queue));
        Ok(queue)
    }
}

/// A command queue handle kept behind the device's lock.
#[derive(Clone, Copy)]
struct QueueHandle(CommandQueue);

// `memory_usage` keeps its default: this backend does not report its devices' memory usage.
impl DriverDevice<OpenClDriver> for Arc<Gpu> {
    /// Where the device has `cl_khr_command_buffer` with simultaneous use.
    fn has_command_lists(device: &Arc<Object<Arc<Gpu>>>) -> bool {
        device.adapter().command_buffers.is_some()
    }

    fn build_command_list(
        _driver: &OpenClDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        commands: &[Command<OpenClDriver>],
    ) -> Result<Box<dyn DriverCommandList<OpenClDriver>>> {
        let Some(api) = device.adapter().command_buffers else {
            return Err(Error::unsupported(format!(
                "{} has no cl_khr_command_buffer with simultaneous use",
                device.name()
            )));
        };
        Ok(Box::new(crate::command_list::CommandList::build(api, commands)?))
    }

    /// The round trip of a marker on a queue of the device's own. `clGetDeviceAndHostTimer`
    /// would be the direct way, but its host clock is the platform's choice (and PoCL's CPU
    /// device has none), while a marker's `CL_PROFILING_COMMAND_END` is on the clock events
    /// are read on by definition.
    fn clock(device: &Arc<Object<Arc<Gpu>>>) -> Result<ClockSample> {
        let gpu: &Arc<Gpu> = device;
        if !gpu.adapter().profiling {
            return Err(Error::unsupported(format!(
                "{} cannot profile its command queues (CL_QUEUE_PROFILING_ENABLE), so it has no device clock",
                gpu.name()
            )));
        }
        let queue = gpu.calibration_queue()?;
        ClockSample::by_round_trip(CALIBRATION_TRIES, || crate::stream::marker_end_time(gpu, queue))
    }
}

/// Round trips a clock reading takes the shortest of.
const CALIBRATION_TRIES: usize = 3;

impl Drop for Gpu {
    fn drop(&mut self) {
        let _driver = DRIVER_LOCK.lock();
        if let Some(queue) = self.calibration.lock().take() {
            // SAFETY: the queue's markers were each waited for; nothing else uses it.
            unsafe { (self.instance.api.release_command_queue)(queue.0) };
        }
        // SAFETY: every object made in the context holds an `Arc<Gpu>`, so none is left.
        unsafe { (self.instance.api.release_context)(self.context) };
    }
}
