//! An opened device: its primary context, its allocation stream and its pool of pinned
//! staging memory.

use crate::ffi::{self, call, sys, CUcontext, CUevent, CUstream};
use crate::instance::{Adapter, Instance};
use crate::CudaDriver;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::Arc;
use xhal_backend::{
    ClockSample, Command, DriverCommandList, DriverDevice, ElapsedTimer, Error, MemoryUsage, Object, ReferenceClock,
    Result, StreamPriorities,
};

/// Bytes of one pinned staging block: transfers are split into blocks of this size, so the
/// host copy of one block overlaps the DMA of the one before.
pub(crate) const STAGING_BLOCK: usize = 4 << 20;
/// Free staging blocks kept for reuse per device; more are returned to the driver.
const STAGING_KEPT: usize = 64;

/// An opened device: its primary context, retained for as long as this lives.
pub struct Gpu {
    pub(crate) instance: Arc<Instance>,
    index: usize,
    pub(crate) context: CUcontext,
    /// Where pool allocations and frees are ordered, where the device has memory pools.
    pub(crate) allocation_stream: Option<CUstream>,
    staging: Mutex<Vec<PinnedBlock>>,
    /// Pinned memory handed to the application (`host_memory_allocate`): start and length.
    /// Transfers whose host range lies inside one copy directly, without staging.
    pub(crate) pinned: Mutex<Vec<(usize, usize)>>,
    /// The device's clock for traces: CUDA events measure only elapsed time.
    clock: ReferenceClock<CUevent>,
    /// The stream the clock's marks are recorded on, made on first use: idle but for them.
    clock_stream: Mutex<Option<CUstream>>,
}

// The primary context and the allocation stream may be used from any thread (each call makes
// the context current on the calling thread first); the staging pool is behind a lock.
// SAFETY: see above.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Retains the primary context of adapter `index`.
    pub(crate) fn open(instance: Arc<Instance>, index: usize) -> Result<Gpu> {
        let adapter = &instance.adapters[index];
        let name = adapter.info.name.clone();
        let mut context: CUcontext = std::ptr::null_mut();
        call(
            "cuDevicePrimaryCtxRetain",
            || format!("opening {name}"),
            // SAFETY: writes one context for a device the driver listed.
            || unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, adapter.device) },
        )?;
        let mut gpu = Gpu {
            instance: Arc::clone(&instance),
            index,
            context,
            allocation_stream: None,
            staging: Mutex::new(Vec::new()),
            pinned: Mutex::new(Vec::new()),
            clock: ReferenceClock::default(),
            clock_stream: Mutex::new(None),
        };
        if adapter.memory_pools {
            gpu.bind()?;
            let mut stream: CUstream = std::ptr::null_mut();
            call(
                "cuStreamCreate",
                || format!("creating the allocation stream on {name}"),
                // SAFETY: writes one stream in the current (primary) context.
                || unsafe { sys::cuStreamCreate(&mut stream, ffi::STREAM_NON_BLOCKING) },
            )?;
            gpu.allocation_stream = Some(stream);
        }
        Ok(gpu)
    }

    pub(crate) fn adapter(&self) -> &Adapter {
        &self.instance.adapters[self.index]
    }

    pub(crate) fn name(&self) -> &str {
        &self.adapter().info.name
    }

    /// Makes the device's primary context current on the calling thread: every driver call
    /// about the device's objects needs it.
    pub(crate) fn bind(&self) -> Result<()> {
        let context = self.context;
        // SAFETY: a context retained by this device.
        call(
            "cuCtxSetCurrent",
            || format!("making the context of {} current", self.name()),
            || unsafe { sys::cuCtxSetCurrent(context) },
        )
    }

    /// Free device memory, where the context answers.
    pub(crate) fn free_memory(&self) -> Option<u64> {
        self.memory_usage().ok().map(|usage| usage.free)
    }

    /// Free and total device memory, as `cuMemGetInfo` reports them now. `device_info` asks
    /// it of a plain opened device, outside the role trait, so the query lives here.
    pub(crate) fn memory_usage(&self) -> Result<MemoryUsage> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        call(
            "cuMemGetInfo_v2",
            || format!("reading the memory usage of {}", self.name()),
            // SAFETY: writes two sizes for the current context.
            || unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
        )?;
        Ok(MemoryUsage {
            free: free as u64,
            total: total as u64,
        })
    }

    /// Whether `size` bytes at `address` lie inside pinned memory this device handed out, so a
    /// transfer can use them without staging.
    pub(crate) fn is_pinned(&self, address: usize, size: usize) -> bool {
        self.pinned
            .lock()
            .iter()
            .any(|&(start, length)| address >= start && address.saturating_add(size) <= start + length)
    }

    /// A pinned block of at least `size` bytes, from the pool where one is free.
    pub(crate) fn staging_block(&self, size: usize) -> Result<PinnedBlock> {
        {
            let mut free = self.staging.lock();
            if let Some(position) = free.iter().position(|block| block.size >= size) {
                return Ok(free.swap_remove(position));
            }
        }
        self.bind()?;
        let size = size.max(STAGING_BLOCK);
        let mut pointer: *mut c_void = std::ptr::null_mut();
        call(
            "cuMemHostAlloc",
            || format!("pinning {size} staging bytes for {}", self.name()),
            // SAFETY: writes one host pointer to `size` pinned bytes.
            || unsafe { sys::cuMemHostAlloc(&mut pointer, size, ffi::HOST_ALLOC_PORTABLE) },
        )?;
        Ok(PinnedBlock {
            pointer: pointer.cast(),
            size,
        })
    }

    /// Returns a staging block whose transfers have completed.
    pub(crate) fn recycle_staging(&self, block: PinnedBlock) {
        let mut free = self.staging.lock();
        if free.len() < STAGING_KEPT && block.size == STAGING_BLOCK {
            free.push(block);
        } else {
            drop(free);
            block.release();
        }
    }
}

impl DriverDevice<CudaDriver> for Arc<Gpu> {
    fn memory_usage(device: &Arc<Object<Arc<Gpu>>>) -> Result<MemoryUsage> {
        Gpu::memory_usage(device)
    }

    /// The context's range, as `cuCtxGetStreamPriorityRange` gives it: 0 to -5 on recent GPUs.
    fn stream_priorities(device: &Arc<Object<Arc<Gpu>>>) -> Result<StreamPriorities> {
        let gpu: &Arc<Gpu> = device;
        gpu.bind()?;
        let (mut least, mut greatest) = (0i32, 0i32);
        call(
            "cuCtxGetStreamPriorityRange",
            || format!("reading the stream priorities of {}", gpu.name()),
            // SAFETY: two valid out pointers, in the current context.
            || unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
        )?;
        Ok(StreamPriorities { least, greatest })
    }

    /// Where the driver has stream capture and executable graphs (CUDA 11.4 and later).
    fn has_command_lists(device: &Arc<Object<Arc<Gpu>>>) -> bool {
        device.adapter().graphs
    }

    fn build_command_list(
        _driver: &CudaDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        commands: &[Command<CudaDriver>],
    ) -> Result<Box<dyn DriverCommandList<CudaDriver>>> {
        Ok(Box::new(crate::command_list::CommandList::build(device, commands)?))
    }

    /// `cuMemHostAlloc` (portable): page-locked memory the copy engines read and write directly.
    fn host_memory_allocate(device: &Arc<Object<Arc<Gpu>>>, size: u64) -> Result<*mut u8> {
        device.bind()?;
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("{size} bytes of pinned memory do not fit this host")))?;
        let mut pointer: *mut c_void = std::ptr::null_mut();
        call(
            "cuMemHostAlloc",
            || format!("pinning {size} bytes of host memory for {}", device.name()),
            // SAFETY: writes one host pointer to `length` pinned bytes.
            || unsafe { sys::cuMemHostAlloc(&mut pointer, length, ffi::HOST_ALLOC_PORTABLE) },
        )?;
        device.pinned.lock().push((pointer as usize, length));
        Ok(pointer.cast())
    }

    fn host_memory_free(device: &Arc<Object<Arc<Gpu>>>, pointer: *mut u8) {
        device.pinned.lock().retain(|&(start, _)| start != pointer as usize);
        let pointer = pointer.cast::<c_void>();
        // SAFETY: memory from cuMemHostAlloc that no transfer uses any more (the host's promise).
        if let Err(error) = call("cuMemFreeHost", ffi::quiet, || unsafe { sys::cuMemFreeHost(pointer) }) {
            tracing::warn!(%error, "pinned host memory was not freed");
        }
    }

    /// A clock counted from a reference event (CUDA events measure only elapsed time),
    /// read by the round trip of a timing event on a stream of its own.
    fn clock(device: &Arc<Object<Arc<Gpu>>>) -> Result<ClockSample> {
        device.bind()?;
        let gpu: &Gpu = device;
        gpu.clock.sample(gpu)
    }
}

impl Gpu {
    /// When a completed timing event completed, on the device's clock.
    pub(crate) fn event_timestamp(&self, event: CUevent) -> Result<u64> {
        self.bind()?;
        self.clock.timestamp(self, event)
    }
}

impl ElapsedTimer for Gpu {
    type Event = CUevent;

    fn mark(&self) -> Result<CUevent> {
        let stream = {
            let mut slot = self.clock_stream.lock();
            match *slot {
                Some(stream) => stream,
                None => {
                    let mut stream: CUstream = std::ptr::null_mut();
                    call(
                        "cuStreamCreate",
                        || format!("creating the clock stream on {}", self.name()),
                        // SAFETY: writes one stream in the current (primary) context.
                        || unsafe { sys::cuStreamCreate(&mut stream, ffi::STREAM_NON_BLOCKING) },
                    )?;
                    *slot = Some(stream);
                    stream
                }
            }
        };
        let mut event: CUevent = std::ptr::null_mut();
        call(
            "cuEventCreate",
            || format!("creating a clock event on {}", self.name()),
            // SAFETY: writes one timing event in the current context.
            || unsafe { sys::cuEventCreate(&mut event, 0) },
        )?;
        // SAFETY: a live event and stream of this context.
        let recorded = call("cuEventRecord", ffi::quiet, || unsafe {
            sys::cuEventRecord(event, stream)
        })
        .and_then(|()| {
            // SAFETY: the event was just recorded.
            call("cuEventSynchronize", ffi::quiet, || unsafe {
                sys::cuEventSynchronize(event)
            })
        });
        if let Err(error) = recorded {
            self.destroy(event);
            return Err(error);
        }
        Ok(event)
    }

    fn elapsed_ns(&self, from: CUevent, to: CUevent) -> Result<i64> {
        let mut milliseconds = 0f32;
        // SAFETY: two completed timing events of this context.
        call("cuEventElapsedTime", ffi::quiet, || unsafe {
            sys::cuEventElapsedTime(&mut milliseconds, from, to)
        })?;
        Ok((f64::from(milliseconds) * 1e6).round() as i64)
    }

    fn destroy(&self, event: CUevent) {
        // SAFETY: an event `mark` made, destroyed once.
        let _ = call("cuEventDestroy_v2", ffi::quiet, || unsafe {
            sys::cuEventDestroy_v2(event)
        });
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.bind();
        for block in self.staging.get_mut().drain(..) {
            block.release();
        }
        self.clock.release(&*self);
        if let Some(stream) = self.clock_stream.get_mut().take() {
            // SAFETY: the clock stream's marks were each waited for.
            let _ = call("cuStreamDestroy_v2", ffi::quiet, || unsafe {
                sys::cuStreamDestroy_v2(stream)
            });
        }
        if let Some(stream) = self.allocation_stream {
            // SAFETY: the stream is this device's; every buffer holding the device is gone.
            let _ = call("cuStreamDestroy_v2", ffi::quiet, || unsafe {
                sys::cuStreamSynchronize(stream);
                sys::cuStreamDestroy_v2(stream)
            });
        }
        let device = self.adapter().device;
        // SAFETY: releases the one retain this device made.
        let _ = call("cuDevicePrimaryCtxRelease_v2", ffi::quiet, || unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(device)
        });
    }
}

/// Pinned host memory from `cuMemHostAlloc`, freed with `release`.
pub(crate) struct PinnedBlock {
    pub(crate) pointer: *mut u8,
    pub(crate) size: usize,
}

// Pinned memory is plain host memory; whoever holds the block owns it.
// SAFETY: see above.
unsafe impl Send for PinnedBlock {}

impl PinnedBlock {
    fn release(self) {
        let pointer = self.pointer.cast::<c_void>();
        // SAFETY: memory from cuMemHostAlloc that no transfer uses any more.
        if let Err(error) = call("cuMemFreeHost", ffi::quiet, || unsafe { sys::cuMemFreeHost(pointer) }) {
            tracing::warn!(%error, "a pinned staging block was not freed");
        }
    }
}
