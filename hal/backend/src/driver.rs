//! The typed contract a Rust backend implements: [`Driver`].
//!
//! A driver works on its own typed objects and trusts what it is handed. The checked adapter,
//! [`Checked`](crate::Checked), turns any driver into the handle-based [`Backend`](crate::Backend)
//! that the plugin export and the loader speak, and does every check once before a driver
//! method runs:
//!
//! - every handle names a live object of the right kind ([`HandleTable`](crate::handles::HandleTable));
//! - every buffer, event and kernel belongs to the stream's device;
//! - every byte range lies inside its buffer, without overflow;
//! - a fill pattern has 1, 2 or 4 bytes and the range is a whole number of patterns;
//! - a host pointer is non-null where bytes are copied through it;
//! - a buffer of 0 bytes is refused, a copy of 0 bytes never reaches the driver (the adapter
//!   returns the stream's sticky error instead, as an empty command would), a kernel view of
//!   0 bytes is refused, and a view's offset is a multiple of the device's alignment;
//! - a stream is synchronised before it is dropped, and every stream before the driver goes.
//!
//! What stays with the driver is what only the device knows: whether memory is left, whether
//! code compiles, whether the arguments fit the kernel's parameters, and the stream's sticky
//! error.

use crate::backend::{DeviceInfo, KernelFormat, MemoryUsage};
use crate::error::{Error, Result};
use std::ops::Deref;
use std::sync::Arc;

/// One live object as the adapter keeps it: the driver's value, its handle and the device it
/// was made on. Drivers receive objects as `&Arc<Object<T>>` and may clone the `Arc` into
/// queued work, which keeps the object alive after its handle is destroyed.
#[derive(Debug)]
pub struct Object<T> {
    handle: u64,
    device: u32,
    size: u64,
    value: T,
}

impl<T> Object<T> {
    pub(crate) fn new(handle: u64, device: u32, size: u64, value: T) -> Object<T> {
        Object {
            handle,
            device,
            size,
            value,
        }
    }

    /// The handle the application names this object by, for messages.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// The index of the device the object was made on.
    pub fn device_index(&self) -> u32 {
        self.device
    }

    /// A buffer's size in bytes, as allocated (0 for objects other than buffers).
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl<T> Deref for Object<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// One buffer argument of a launch, resolved and checked: in bounds, non-empty, aligned, on
/// the stream's device.
pub struct BufferView<B> {
    /// The buffer.
    pub buffer: Arc<Object<B>>,
    /// First byte of the view, a multiple of the device's buffer offset alignment.
    pub offset: u64,
    /// Length of the view in bytes, more than 0.
    pub size: u64,
}

/// How a copy's two ranges relate: most native copies refuse ranges of one buffer that
/// overlap, so a driver copies those through a temporary, and may skip a copy onto itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyOverlap {
    /// Different buffers, or ranges of one buffer that share no byte.
    Disjoint,
    /// The same bytes of the same buffer: the copy changes nothing.
    SameRange,
    /// Ranges of one buffer that share bytes.
    Overlapping,
}

impl CopyOverlap {
    /// How `size` bytes from `source_offset` of `source` relate to the same count at
    /// `destination_offset` of `destination` (both in bounds, as the adapter checked).
    pub fn of<B>(
        source: &Arc<Object<B>>,
        source_offset: u64,
        destination: &Arc<Object<B>>,
        destination_offset: u64,
        size: u64,
    ) -> CopyOverlap {
        if !Arc::ptr_eq(source, destination) || source_offset.abs_diff(destination_offset) >= size {
            CopyOverlap::Disjoint
        } else if source_offset == destination_offset {
            CopyOverlap::SameRange
        } else {
            CopyOverlap::Overlapping
        }
    }
}

/// A launch whose handles the adapter resolved and checked.
pub struct Launch<'a, D: Driver> {
    /// The kernel, made on the stream's device.
    pub kernel: &'a Arc<Object<D::Kernel>>,
    /// Workgroups in x, y, z.
    pub workgroups: [u32; 3],
    /// Buffer arguments in parameter order.
    pub buffers: &'a [BufferView<D::Buffer>],
    /// The scalar block (WGSL layout rules); the driver checks it against the kernel.
    pub scalars: &'a [u8],
}

/// A backend's typed implementation: the backend as a whole. Each object kind implements its
/// own role trait ([`DriverDevice`], [`DriverBuffer`], [`DriverStream`], [`DriverEvent`],
/// [`DriverModule`], [`DriverKernel`]) in the backend's room for it (`device.rs`,
/// `memory.rs`, `stream.rs`, `module.rs`), so no method is written twice. See the module
/// documentation for what the adapter has checked before each method runs; the driver may rely
/// on all of it.
///
/// Every method may be called from any thread, concurrently. Enqueueing methods must not
/// block on the work they enqueue. Errors found while the work executes stick to the stream:
/// they are returned by the next `synchronize`, by waits on events recorded after the
/// failure, and by every later call on that stream.
///
/// Objects are dropped when the last `Arc` to them goes: a driver releases its native object
/// in `Drop`, and keeps an `Arc` in any queued work that still uses it.
///
/// The associated types must be public types (Rust refuses private types in a public
/// trait's associated types); declare them `pub` inside a private module, so they stay
/// opaque outside the crate.
pub trait Driver: Send + Sync + Sized + 'static {
    /// An opened device.
    type Device: DriverDevice<Self>;
    /// A device allocation.
    type Buffer: DriverBuffer<Self>;
    /// An in-order queue of work.
    type Stream: DriverStream<Self>;
    /// A point in a stream.
    type Event: DriverEvent<Self>;
    /// Loaded kernel code.
    type Module: DriverModule<Self>;
    /// One entry point of a module.
    type Kernel: DriverKernel<Self>;

    /// The backend's name, as selectors and handle errors say it: `cuda`, `vulkan`...
    const NAME: &'static str;
    /// The backend's version, as `xhal info` shows it: usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;

    /// The backend is being dropped: a driver that can cancel queued work (a stopped kernel,
    /// skipped copies whose records still complete) does so here, so that dropping a backend
    /// never waits on a long kernel. The adapter then synchronises every stream. The default
    /// cancels nothing, so the queued work runs to its end.
    fn shut_down(&self) {}

    /// Number of devices. A missing driver is an error of kind `DriverUnavailable` with the reason.
    fn device_count(&self) -> Result<u32>;
    /// Describes device `index`; the index is below `device_count`. `opened` is the device as
    /// it is open now, if it is, for figures only an opened device knows (its free memory).
    fn device_info(&self, index: u32, opened: Option<&Self::Device>) -> Result<DeviceInfo>;
    /// Opens device `index`; the index is below `device_count` and the device is not open now:
    /// the adapter shares one opened device among every open of an index while any is live.
    fn device_open(&self, index: u32) -> Result<Self::Device>;
}

/// An opened device (`device.rs`).
pub trait DriverDevice<D: Driver>: Sized + Send + Sync + 'static {
    /// The device's free and total memory now. The default says the backend cannot tell.
    fn memory_usage(device: &Arc<Object<Self>>) -> Result<MemoryUsage> {
        let _ = device;
        Err(Error::unsupported(format!(
            "backend `{}` does not report its devices' memory usage",
            D::NAME
        )))
    }

    /// The device's timestamp clock, the clock of [`DriverEvent::timestamp`], read together
    /// with the host's monotonic clock ([`ClockSample`](crate::ClockSample)). The default
    /// says the device has no absolute timestamps; the host then times traced operations with
    /// `elapsed_time` from an anchor it records itself.
    fn clock(device: &Arc<Object<Self>>) -> Result<crate::ClockSample> {
        let _ = device;
        Err(Error::unsupported(format!(
            "backend `{}` has no device clock to calibrate",
            D::NAME
        )))
    }

    /// `size` (> 0) bytes of host memory this device's transfers reach directly (page-locked:
    /// `cuMemHostAlloc`, `hipHostMalloc`, `zeMemAllocHost`), at least 64-byte aligned. Writes
    /// and reads whose host range lies inside it may copy without staging. The default says the
    /// device has none.
    fn host_memory_allocate(device: &Arc<Object<Self>>, size: u64) -> Result<*mut u8> {
        let _ = (device, size);
        Err(Error::unsupported(format!(
            "backend `{}` has no host memory of its own (pinned memory)",
            D::NAME
        )))
    }

    /// Frees memory [`host_memory_allocate`](DriverDevice::host_memory_allocate) returned (the
    /// adapter checked that it did, on this device); no queued transfer uses it any more.
    fn host_memory_free(device: &Arc<Object<Self>>, pointer: *mut u8) {
        let _ = (device, pointer);
    }

    /// The stream priorities this device schedules by (ABI 1.5): `cuCtxGetStreamPriorityRange`,
    /// `hipDeviceGetStreamPriorityRange`, a Level Zero queue's priority. The default says it
    /// schedules every stream alike; a driver that overrides it also implements
    /// [`DriverStream::create_with_priority`].
    fn stream_priorities(device: &Arc<Object<Self>>) -> Result<crate::StreamPriorities> {
        let _ = device;
        Err(Error::unsupported(format!(
            "backend `{}` schedules every stream alike (no stream priorities)",
            D::NAME
        )))
    }

    /// Whether [`build_command_list`](DriverDevice::build_command_list) works on this device.
    /// The default says no: core then replays graphs operation by operation, which is correct
    /// everywhere and only costs host time.
    fn has_command_lists(device: &Arc<Object<Self>>) -> bool {
        let _ = device;
        false
    }

    /// Builds the device's native form of a recorded list of commands, each checked as the
    /// same command enqueued on a stream would be, to be submitted any number of times. Only
    /// called where [`has_command_lists`](DriverDevice::has_command_lists) is true.
    fn build_command_list(
        driver: &D,
        device: &Arc<Object<Self>>,
        commands: &[Command<D>],
    ) -> Result<Box<dyn DriverCommandList<D>>> {
        let _ = (driver, device, commands);
        Err(Error::unsupported(format!(
            "backend `{}` has no command lists",
            D::NAME
        )))
    }
}

/// One command of a command list, resolved and checked by the adapter as the same stream
/// operation would be (ranges in bounds, fill pattern, views aligned and non-empty).
pub enum Command<D: Driver> {
    /// A device-to-device copy of `size` (> 0) bytes; the ranges may overlap.
    Copy {
        /// Where the bytes come from.
        source: Arc<Object<D::Buffer>>,
        /// First byte read.
        source_offset: u64,
        /// Where they go.
        destination: Arc<Object<D::Buffer>>,
        /// First byte written.
        destination_offset: u64,
        /// Bytes copied.
        size: u64,
    },
    /// A fill of `size` (> 0) bytes with `pattern` (1, 2 or 4 bytes).
    Fill {
        /// The buffer filled.
        buffer: Arc<Object<D::Buffer>>,
        /// First byte, a multiple of the pattern's length.
        offset: u64,
        /// Bytes filled, a multiple of the pattern's length.
        size: u64,
        /// The pattern.
        pattern: Vec<u8>,
    },
    /// A kernel launch.
    Launch(OwnedLaunch<D>),
}

/// A launch the adapter resolved and checked, owning its arguments, as a command list keeps it.
pub struct OwnedLaunch<D: Driver> {
    /// The kernel.
    pub kernel: Arc<Object<D::Kernel>>,
    /// Workgroups in x, y, z.
    pub workgroups: [u32; 3],
    /// Buffer arguments in parameter order.
    pub buffers: Vec<BufferView<D::Buffer>>,
    /// The scalar block.
    pub scalars: Vec<u8>,
}

impl<D: Driver> OwnedLaunch<D> {
    /// The launch as a stream's [`DriverStream::launch`] takes it.
    pub fn borrowed(&self) -> Launch<'_, D> {
        Launch {
            kernel: &self.kernel,
            workgroups: self.workgroups,
            buffers: &self.buffers,
            scalars: &self.scalars,
        }
    }
}

/// A device's native command list, built by [`DriverDevice::build_command_list`]. The adapter
/// keeps the [`Command`]s it was built from alive as long as the list.
pub trait DriverCommandList<D: Driver>: Send + Sync + 'static {
    /// Enqueues every command on `stream` (on the list's device), in order, after the work
    /// already queued; a failing command makes the stream's error sticky. As for any queued
    /// work, what the submission uses stays alive until it completes, even if the list is
    /// dropped first: keep the native objects behind an `Arc` the queued work clones.
    fn submit(&self, stream: &Arc<Object<D::Stream>>) -> Result<()>;
    /// Replaces launch `index` (its position among all commands) for later submissions. The
    /// adapter has checked that it is a launch of the same kernel with views of the same sizes
    /// and a scalar block of the same size, and has waited for every stream the list was
    /// submitted to, so no submission is pending.
    fn update_launch(&self, index: usize, launch: &OwnedLaunch<D>) -> Result<()>;
}

/// A device allocation (`memory.rs`).
pub trait DriverBuffer<D: Driver>: Sized + Send + Sync + 'static {
    /// Allocates `size` bytes, more than 0.
    fn allocate(driver: &D, device: &Arc<Object<D::Device>>, size: u64) -> Result<Self>;

    /// The host address of byte `offset` of the buffer, valid for `size` (> 0, in bounds)
    /// bytes until [`unmap`](DriverBuffer::unmap): for a device whose memory the host can
    /// address (`Features::HOST_MAPPABLE`). A read mapping (`write` false, or both) shows the
    /// writes of completed work; the host's writes are seen by work enqueued after the unmap.
    /// No queued work uses the buffer while it is mapped (the host's promise). The default
    /// says the device cannot map.
    fn map(buffer: &Arc<Object<Self>>, offset: u64, size: u64, write: bool) -> Result<*mut u8> {
        let _ = (buffer, offset, size, write);
        Err(Error::unsupported(format!(
            "backend `{}` cannot map device memory for the host",
            D::NAME
        )))
    }

    /// Ends a mapping of the buffer that [`map`](DriverBuffer::map) returned `pointer` for (the
    /// adapter checked that it is one). The default has nothing to flush.
    fn unmap(buffer: &Arc<Object<Self>>, pointer: *mut u8) -> Result<()> {
        let _ = (buffer, pointer);
        Ok(())
    }
}

/// An in-order queue of work (`stream.rs`).
pub trait DriverStream<D: Driver>: Sized + Send + Sync + 'static {
    /// Creates a stream.
    fn create(driver: &D, device: &Arc<Object<D::Device>>) -> Result<Self>;
    /// Creates a stream of `priority`, which the adapter checked lies in the device's
    /// [`stream_priorities`](DriverDevice::stream_priorities). The default, for a device
    /// without priorities, says so.
    fn create_with_priority(driver: &D, device: &Arc<Object<D::Device>>, priority: i32) -> Result<Self> {
        let _ = (driver, device, priority);
        Err(Error::unsupported(format!(
            "backend `{}` schedules every stream alike (no stream priorities)",
            D::NAME
        )))
    }
    /// The stream's sticky error, if any: what a command of 0 bytes returns, since the adapter
    /// does not hand such a command to the driver. The default has no sticky state to report.
    fn sticky_error(stream: &Arc<Object<Self>>) -> Result<()> {
        let _ = stream;
        Ok(())
    }
    /// Enqueues a host-to-device copy of `size` (> 0) bytes to `offset`, in bounds.
    ///
    /// # Safety
    /// `source` is non-null and points to `size` readable bytes that stay valid and unchanged
    /// until the write completes.
    unsafe fn write(
        stream: &Arc<Object<Self>>,
        buffer: &Arc<Object<D::Buffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a device-to-host copy of `size` (> 0) bytes from `offset`, in bounds.
    ///
    /// # Safety
    /// `destination` is non-null and points to `size` writable bytes that stay valid, and are
    /// not touched by anyone else, until the read completes.
    unsafe fn read(
        stream: &Arc<Object<Self>>,
        buffer: &Arc<Object<D::Buffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a device-to-device copy of `size` (> 0) bytes; both ranges are in bounds and
    /// may overlap.
    fn copy(
        stream: &Arc<Object<Self>>,
        source: &Arc<Object<D::Buffer>>,
        source_offset: u64,
        destination: &Arc<Object<D::Buffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()>;
    /// Enqueues a fill of `size` (> 0) bytes with a 1-, 2- or 4-byte `pattern`; `offset` and
    /// `size` are multiples of the pattern's length and in bounds.
    fn fill(
        stream: &Arc<Object<Self>>,
        buffer: &Arc<Object<D::Buffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()>;
    /// Enqueues a kernel launch. The driver checks the arguments against the kernel's
    /// parameters (count, kinds, scalar block) and the workgroup counts against its limits.
    fn launch(stream: &Arc<Object<Self>>, launch: &Launch<'_, D>) -> Result<()>;
    /// Enqueues a record of `event`, made on the stream's device.
    fn record_event(stream: &Arc<Object<Self>>, event: &Arc<Object<D::Event>>) -> Result<()>;
    /// Makes later work on `stream` wait for the event's most recent record.
    fn wait_event(stream: &Arc<Object<Self>>, event: &Arc<Object<D::Event>>) -> Result<()>;
    /// Blocks until the stream is idle; returns its sticky error if any.
    fn synchronize(stream: &Arc<Object<Self>>) -> Result<()>;
    /// True when everything enqueued has completed.
    fn query(stream: &Arc<Object<Self>>) -> Result<bool>;
}

/// A point in a stream (`stream.rs`, beside the stream that records it).
pub trait DriverEvent<D: Driver>: Sized + Send + Sync + 'static {
    /// Creates an event; `timing` asks for timestamps.
    fn create(driver: &D, device: &Arc<Object<D::Device>>, timing: bool) -> Result<Self>;
    /// True when the most recent record completed (or none was made).
    fn query(event: &Arc<Object<Self>>) -> Result<bool>;
    /// Blocks until the most recent record completed.
    fn synchronize(event: &Arc<Object<Self>>) -> Result<()>;
    /// Nanoseconds from `start` to `end`; the driver checks that both are completed timing
    /// events.
    fn elapsed_time(start: &Arc<Object<Self>>, end: &Arc<Object<Self>>) -> Result<u64>;
    /// When the latest record completed, in nanoseconds on the device's timestamp clock
    /// ([`DriverDevice::clock`]); misuse as for `elapsed_time`. The default says the device
    /// has no absolute timestamps.
    fn timestamp(event: &Arc<Object<Self>>) -> Result<u64> {
        let _ = event;
        Err(Error::unsupported(format!(
            "backend `{}` has no absolute event timestamps",
            D::NAME
        )))
    }
}

/// Loaded kernel code (`module.rs`).
pub trait DriverModule<D: Driver>: Sized + Send + Sync + 'static {
    /// Loads kernel code; `code` is only borrowed for the call.
    fn load(driver: &D, device: &Arc<Object<D::Device>>, format: KernelFormat, code: &[u8]) -> Result<Self>;
}

/// One entry point of a module (`module.rs`).
pub trait DriverKernel<D: Driver>: Sized + Send + Sync + 'static {
    /// Finds an entry point. The kernel keeps what it needs: destroying the module never
    /// breaks it.
    fn get(driver: &D, module: &Arc<Object<D::Module>>, name: &str) -> Result<Self>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_classified_by_buffer_and_shared_bytes() {
        let one = Arc::new(Object::new(1, 0, 64, ()));
        let other = Arc::new(Object::new(2, 0, 64, ()));
        assert_eq!(CopyOverlap::of(&one, 0, &other, 0, 64), CopyOverlap::Disjoint);
        assert_eq!(
            CopyOverlap::of(&one, 0, &one, 32, 32),
            CopyOverlap::Disjoint,
            "touching, not sharing"
        );
        assert_eq!(CopyOverlap::of(&one, 0, &one, 31, 32), CopyOverlap::Overlapping);
        assert_eq!(CopyOverlap::of(&one, 40, &one, 8, 33), CopyOverlap::Overlapping);
        assert_eq!(CopyOverlap::of(&one, 8, &one, 8, 16), CopyOverlap::SameRange);
    }
}
