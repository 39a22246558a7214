//! Streams: in-order queues of copies, fills, launches and event operations (CUDA semantics).

use crate::backend::{BufferArg, LaunchArgs, StreamHandle};
use crate::buffer::{Buffer, BufferMemory, BufferSlice, QueuedUse};
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::module::{BufferBinding, Launch};
use crate::pinned::PinnedBuffer;
use crate::trace::{self, HostSpan, StreamTrace};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

/// Something queued work needs alive until it completes: a buffer's memory, a kernel, an
/// event, or host data handed over for an asynchronous write.
// The values are held only for their `Drop`: what they keep alive, and the use they count.
#[allow(dead_code)]
enum InFlight {
    /// A kernel, an event, host data, a graph.
    Object(Arc<dyn Send + Sync>),
    /// A buffer's memory, counted as a queued use of it (no allocation beyond the `Arc`).
    Memory(QueuedUse),
}

/// Values a launch passes with [`Launch::uniform`], with their argument positions.
type StagedValues<'l> = SmallVec<[(usize, &'l Arc<[u8]>); 4]>;

/// When this many objects are held for queued work, a cheap query checks whether the stream
/// went idle so they can go, instead of letting them pile up until the next synchronize.
const IN_FLIGHT_TRIM_THRESHOLD: usize = 1024;

struct StreamState {
    destroyed: bool,
    /// Where values passed with [`Launch::uniform`] are staged.
    uniforms: UniformArena,
    /// An error found while executing: returned by every later call.
    sticky: Option<Error>,
    in_flight: Vec<InFlight>,
    /// The length of `in_flight` at which the next enqueue asks whether the stream went idle.
    /// It doubles after each query that finds work still running, so a burst of N enqueues
    /// pays about log2(N / threshold) queries, not one per threshold's worth of objects: a
    /// query costs a driver call (tens of microseconds on some), which spread over 1,024
    /// enqueues was still most of core's share of each.
    next_trim_check: usize,
    /// What the trace being recorded needs of this stream (its device spans).
    trace: Option<StreamTrace>,
    /// The helper streams of graphs replayed here: their work joins this stream's, so an
    /// error found on one of them is this stream's too.
    linked: Vec<std::sync::Weak<StreamShared>>,
}

impl StreamState {
    /// Drops what queued work held, once the stream is known idle; memory kept for this
    /// stream's reuse becomes anyone's.
    fn release_in_flight(&mut self, device: &DeviceShared, serial: u64) {
        self.in_flight.clear();
        self.next_trim_check = IN_FLIGHT_TRIM_THRESHOLD;
        device.allocator.stream_idle(serial);
    }

    /// The stream is known idle: its traced operations get their device spans.
    fn resolve_trace(&mut self, device: &DeviceShared, stream: StreamHandle) {
        if let Some(trace) = &mut self.trace {
            trace.resolve_idle(device, stream);
        }
    }
}

/// How the trace shows an enqueued operation.
struct Traced<'e> {
    name: &'static str,
    category: &'static str,
    bytes: u64,
    event: Option<(&'e Event, EventRole)>,
}

/// What an event operation does, for the flows between streams.
#[derive(Clone, Copy)]
enum EventRole {
    Record,
    Wait,
}

impl Traced<'_> {
    const fn transfer(name: &'static str, bytes: u64) -> Traced<'static> {
        Traced {
            name,
            category: "copy",
            bytes,
            event: None,
        }
    }
}

pub(crate) struct StreamShared {
    device: Arc<DeviceShared>,
    handle: StreamHandle,
    /// The stream's number in the process, as traces show it.
    serial: u64,
    /// The device's priority of the stream: 0 unless made with one (ABI 1.5).
    priority: i32,
    /// Held across each backend call, so destroy cannot race with an enqueue.
    state: Mutex<StreamState>,
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if !state.destroyed {
            // The backend waits for queued work before destroying the stream.
            self.device.backend.stream_destroy(self.handle);
        }
        if let Some(mut trace) = state.trace.take() {
            trace.release(&*self.device.backend);
        }
        // The queued work is done (or the stream was destroyed before): what it held goes,
        // and memory kept for the stream's reuse becomes anyone's.
        state.in_flight.clear();
        self.device.allocator.stream_idle(self.serial);
    }
}

static NEXT_STREAM_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An in-order queue of work on one device. Clones share the same stream, so it can be
/// handed to several threads; [`Stream::destroy`] ends it for all of them.
#[derive(Clone)]
pub struct Stream {
    shared: Arc<StreamShared>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("device", &self.shared.device.label())
            .finish()
    }
}

impl Stream {
    pub(crate) fn create(device: Arc<DeviceShared>) -> Result<Stream> {
        let handle = device.backend.stream_create(device.handle)?;
        Ok(Stream::wrap(device, handle, 0))
    }

    /// A stream of `priority`, which lies in the device's priorities.
    pub(crate) fn create_with_priority(device: Arc<DeviceShared>, priority: i32) -> Result<Stream> {
        let handle = device.backend.stream_create_with_priority(device.handle, priority)?;
        Ok(Stream::wrap(device, handle, priority))
    }

    fn wrap(device: Arc<DeviceShared>, handle: StreamHandle, priority: i32) -> Stream {
        Stream {
            shared: Arc::new(StreamShared {
                device,
                handle,
                priority,
                serial: NEXT_STREAM_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                state: Mutex::new(StreamState {
                    destroyed: false,
                    uniforms: UniformArena::default(),
                    sticky: None,
                    in_flight: Vec::new(),
                    next_trim_check: IN_FLIGHT_TRIM_THRESHOLD,
                    trace: None,
                    linked: Vec::new(),
                }),
            }),
        }
    }

    /// The stream's priority on its device: 0 for a stream made without one, otherwise the
    /// requested priority clamped into [`Device::stream_priorities`](crate::Device::stream_priorities).
    pub fn priority(&self) -> i32 {
        self.shared.priority
    }

    /// `backend:index` of the stream's device.
    pub fn device_label(&self) -> String {
        self.shared.device.label()
    }

    pub(crate) fn device(&self) -> &DeviceShared {
        &self.shared.device
    }

    pub(crate) fn shared_weak(&self) -> std::sync::Weak<StreamShared> {
        Arc::downgrade(&self.shared)
    }

    pub(crate) fn from_weak(shared: &std::sync::Weak<StreamShared>) -> Option<Stream> {
        shared.upgrade().map(|shared| Stream { shared })
    }

    /// The stream's error, if its work failed: asks the backend without waiting.
    pub(crate) fn check_sticky(&self) -> Result<()> {
        self.query().map(|_| ())
    }

    /// Makes `error` this stream's sticky error, unless it already has one.
    pub(crate) fn poison(&self, error: Error) {
        self.shared.state.lock().sticky.get_or_insert(error);
    }

    /// Notes graph helper streams whose errors this stream takes on at its next synchronize.
    pub(crate) fn link_helpers(&self, helpers: &[Stream]) {
        let mut state = self.shared.state.lock();
        for helper in helpers {
            let weak = Arc::downgrade(&helper.shared);
            if !state.linked.iter().any(|known| known.ptr_eq(&weak)) {
                state.linked.retain(|known| known.strong_count() > 0);
                state.linked.push(weak);
            }
        }
    }

    /// Keeps `keep` alive until the stream is known idle, as queued work's objects are.
    pub(crate) fn hold_until_idle(&self, keep: Arc<dyn Send + Sync>) {
        let mut state = self.shared.state.lock();
        self.keep_in_flight(&mut state, [InFlight::Object(keep)]);
    }

    /// Enqueues a run of a graph's recorded commands (`call` submits them), keeping `keep`
    /// alive until they complete.
    pub(crate) fn enqueue_graph_segment(
        &self,
        keep: Option<Arc<dyn Send + Sync>>,
        call: impl FnOnce(&DeviceShared, StreamHandle) -> Result<()>,
    ) -> Result<()> {
        let traced = Traced {
            name: "graph",
            category: "graph",
            bytes: 0,
            event: None,
        };
        self.enqueue("graph replay", traced, keep.map(InFlight::Object), call)
    }

    /// Runs `call` under the stream's lock after the destroyed and sticky checks, then keeps
    /// `keep` alive until the work completes.
    fn enqueue(
        &self,
        operation: &str,
        traced: Traced<'_>,
        keep: impl IntoIterator<Item = InFlight>,
        call: impl FnOnce(&DeviceShared, StreamHandle) -> Result<()>,
    ) -> Result<()> {
        let mut state = self.shared.state.lock();
        Self::check_usable(&state, operation)?;
        // Taken before the call: the device may run the operation before the call returns.
        let submitted = trace::is_active().then(Instant::now);
        call(&self.shared.device, self.shared.handle)?;
        if let Some(submitted) = submitted {
            let args = vec![("bytes", traced.bytes.into())];
            let what = (traced.name.into(), traced.category);
            self.trace_enqueued(&mut state, what, submitted, args, traced.event);
        }
        self.keep_in_flight(&mut state, keep);
        Ok(())
    }

    /// Notes an enqueued operation for its device span; a record starts a flow to the waits
    /// it releases, and a wait ends the flow of the record it waits for.
    fn trace_enqueued(
        &self,
        state: &mut StreamState,
        (name, category): (Cow<'static, str>, &'static str),
        submitted: Instant,
        args: trace::Args,
        event: Option<(&Event, EventRole)>,
    ) {
        let device = &self.shared.device;
        let Some(trace) = StreamTrace::current(&mut state.trace, device, self.shared.serial) else {
            return;
        };
        let (flow_in, flow_out) = match event {
            Some((event, EventRole::Record)) => (None, Some(event.begin_trace_flow())),
            Some((event, EventRole::Wait)) => (event.trace_flow(), None),
            None => (None, None),
        };
        trace.enqueued(
            device,
            self.shared.handle,
            (name, category),
            submitted,
            args,
            (flow_in, flow_out),
        );
    }

    /// Holds `keep` until the stream is known idle, trimming the list now and then.
    fn keep_in_flight(&self, state: &mut StreamState, keep: impl IntoIterator<Item = InFlight>) {
        state.in_flight.extend(keep);
        if state.in_flight.len() >= state.next_trim_check {
            if let Ok(true) = self.shared.device.backend.stream_query(self.shared.handle) {
                state.release_in_flight(&self.shared.device, self.shared.serial);
                state.resolve_trace(&self.shared.device, self.shared.handle);
            }
            state.next_trim_check = (state.in_flight.len() * 2).max(IN_FLIGHT_TRIM_THRESHOLD);
        }
    }

    fn check_usable(state: &StreamState, operation: &str) -> Result<()> {
        if state.destroyed {
            return Err(Error::invalid_handle(format!("{operation} on a destroyed stream")));
        }
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        Ok(())
    }

    /// The host span of an application call on this stream (nothing while tracing is off).
    fn span(&self, operation: &'static str, bytes: u64) -> HostSpan {
        trace::span("api", operation, || {
            vec![
                ("device", Arc::clone(&self.shared.device.trace_label).into()),
                ("stream", self.shared.serial.into()),
                ("bytes", bytes.into()),
            ]
        })
    }

    fn check_buffer<T>(&self, buffer: &Buffer<T>, what: &str) -> Result<()> {
        self.shared.device.check_same_device(&buffer.memory.device, what)
    }

    /// The queued use of a buffer's memory, refused while the buffer is mapped.
    fn memory_of<T>(&self, buffer: &Buffer<T>, what: &str) -> Result<InFlight> {
        QueuedUse::new(&buffer.memory, what, Some(self.shared.serial)).map(InFlight::Memory)
    }

    /// Copies `data` to the start of `destination` (a [`Buffer`], or a view from
    /// [`Buffer::slice`], which must hold `data.len()` elements), and returns once the data is on the device
    /// (waiting for the work queued before it, as CUDA's pageable copies do).
    pub fn write<'a, T: bytemuck::Pod>(&self, destination: impl Into<BufferSlice<'a, T>>, data: &[T]) -> Result<()> {
        let destination = destination.into().prefix(data.len(), "write")?;
        self.check_buffer(destination.buffer, "write destination")?;
        let (byte_offset, size) = destination.byte_span("write")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("write", size);
        let buffer = destination.buffer;
        self.enqueue(
            "write",
            Traced::transfer("write", size),
            [self.memory_of(buffer, "the write destination")?],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                // SAFETY: `data` outlives the write: this function synchronizes before returning.
                unsafe {
                    device
                        .backend
                        .stream_write(stream, handle, byte_offset, data.as_ptr().cast(), size)
                }
            },
        )?;
        self.synchronize()
    }

    /// Queues a copy of `data` to the start of `destination` and returns at once; the stream
    /// owns `data` until the copy completes.
    pub fn write_owned<'a, T: bytemuck::Pod + Send + Sync>(
        &self,
        destination: impl Into<BufferSlice<'a, T>>,
        data: Vec<T>,
    ) -> Result<()> {
        let destination = destination.into().prefix(data.len(), "write")?;
        self.check_buffer(destination.buffer, "write destination")?;
        let (byte_offset, size) = destination.byte_span("write")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("write_owned", size);
        let buffer = destination.buffer;
        let data: Arc<Vec<T>> = Arc::new(data);
        let source = data.as_ptr().cast::<u8>();
        self.enqueue(
            "write",
            Traced::transfer("write", size),
            [self.memory_of(buffer, "the write destination")?, InFlight::Object(data)],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                // SAFETY: the Vec is held in the stream's in-flight list until the stream is
                // known idle, and its heap storage does not move.
                unsafe { device.backend.stream_write(stream, handle, byte_offset, source, size) }
            },
        )
    }

    /// Queues a copy of every element of `source` (host memory for transfers, from
    /// [`Device::alloc_pinned`](crate::Device::alloc_pinned)) to the start of `destination`,
    /// which must hold them, and returns at once: the stream holds `source` until the copy
    /// completes, and [`PinnedBuffer::as_mut_slice`] is refused until then.
    pub fn write_from_pinned<'a, T: bytemuck::Pod>(
        &self,
        destination: impl Into<BufferSlice<'a, T>>,
        source: &PinnedBuffer<T>,
    ) -> Result<()> {
        self.write_from_pinned_range(destination, source, 0..source.len())
    }

    /// As [`Stream::write_from_pinned`], for elements `range` of `source`.
    pub fn write_from_pinned_range<'a, T: bytemuck::Pod>(
        &self,
        destination: impl Into<BufferSlice<'a, T>>,
        source: &PinnedBuffer<T>,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        self.shared
            .device
            .check_same_device(source.device(), "the pinned source")?;
        let count = range
            .end
            .checked_sub(range.start)
            .filter(|_| range.end <= source.len())
            .ok_or_else(|| {
                Error::out_of_bounds(format!(
                    "write: elements {}..{} of a pinned buffer of {}",
                    range.start,
                    range.end,
                    source.len()
                ))
            })?;
        let destination = destination.into().prefix(count, "write")?;
        self.check_buffer(destination.buffer, "write destination")?;
        let (byte_offset, size) = destination.byte_span("write")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("write_from_pinned", size);
        let buffer = destination.buffer;
        let (address, held) = source.queue_use(range, false)?;
        self.enqueue(
            "write",
            Traced::transfer("write", size),
            [
                self.memory_of(buffer, "the write destination")?,
                InFlight::Object(Arc::new(held)),
            ],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                // SAFETY: the pinned memory is held, and counted as read, in the stream's
                // in-flight list until the stream is known idle; the host cannot change it
                // meanwhile (`as_mut_slice` is refused while the count is not 0).
                unsafe { device.backend.stream_write(stream, handle, byte_offset, address, size) }
            },
        )
    }

    /// Queues a copy of the elements of `source` into the start of `destination` (host memory
    /// for transfers), which must hold them, and returns at once: the stream holds
    /// `destination` until the copy completes, and [`PinnedBuffer::as_slice`] is refused until
    /// then (synchronize the stream, then read it).
    pub fn read_into_pinned<'a, T: bytemuck::Pod>(
        &self,
        source: impl Into<BufferSlice<'a, T>>,
        destination: &mut PinnedBuffer<T>,
    ) -> Result<()> {
        self.read_into_pinned_at(source, destination, 0)
    }

    /// As [`Stream::read_into_pinned`], into `destination` from element `start` on.
    pub fn read_into_pinned_at<'a, T: bytemuck::Pod>(
        &self,
        source: impl Into<BufferSlice<'a, T>>,
        destination: &mut PinnedBuffer<T>,
        start: usize,
    ) -> Result<()> {
        self.shared
            .device
            .check_same_device(destination.device(), "the pinned destination")?;
        let source = source.into();
        let end = start.checked_add(source.len()).filter(|&end| end <= destination.len());
        let Some(end) = end else {
            return Err(Error::out_of_bounds(format!(
                "read: {} elements from element {start} on do not fit a pinned buffer of {}",
                source.len(),
                destination.len()
            )));
        };
        self.check_buffer(source.buffer, "read source")?;
        let (byte_offset, size) = source.byte_span("read")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("read_into_pinned", size);
        let buffer = source.buffer;
        let (address, held) = destination.queue_use(start..end, true)?;
        self.enqueue(
            "read",
            Traced::transfer("read", size),
            [
                self.memory_of(buffer, "the read source")?,
                InFlight::Object(Arc::new(held)),
            ],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                // SAFETY: the pinned memory is held, and counted as written, in the stream's
                // in-flight list until the stream is known idle; the host cannot touch it
                // meanwhile (`as_slice` and `as_mut_slice` are refused while the count is not 0).
                unsafe { device.backend.stream_read(stream, handle, byte_offset, address, size) }
            },
        )
    }

    /// Fills `out` from the start of `source` (a [`Buffer`], or a view from
    /// [`Buffer::slice`], which must hold `out.len()` elements), and returns once they have
    /// arrived.
    pub fn read<'a, T: bytemuck::Pod>(&self, source: impl Into<BufferSlice<'a, T>>, out: &mut [T]) -> Result<()> {
        let source = source.into().prefix(out.len(), "read")?;
        self.check_buffer(source.buffer, "read source")?;
        let (byte_offset, size) = source.byte_span("read")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("read", size);
        let buffer = source.buffer;
        self.enqueue(
            "read",
            Traced::transfer("read", size),
            [self.memory_of(buffer, "the read source")?],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                // SAFETY: `out` is borrowed mutably for this whole function, which synchronizes
                // before returning, so nothing else touches it while the read is in flight.
                unsafe {
                    device
                        .backend
                        .stream_read(stream, handle, byte_offset, out.as_mut_ptr().cast(), size)
                }
            },
        )?;
        self.synchronize()
    }

    /// Reads the elements of `source` (a [`Buffer`] or a view) into a new vector.
    pub fn read_to_vec<'a, T: bytemuck::Pod>(&self, source: impl Into<BufferSlice<'a, T>>) -> Result<Vec<T>> {
        let source = source.into();
        let mut out = vec![T::zeroed(); source.len()];
        self.read(source, &mut out)?;
        Ok(out)
    }

    /// Queues a copy of the elements of `source` to the start of `destination`, which must
    /// hold them. The ranges may overlap, even within one buffer.
    pub fn copy<'a, 'b, T: bytemuck::Pod>(
        &self,
        source: impl Into<BufferSlice<'a, T>>,
        destination: impl Into<BufferSlice<'b, T>>,
    ) -> Result<()> {
        let source = source.into();
        let destination = destination.into().prefix(source.len(), "copy destination")?;
        self.check_buffer(source.buffer, "copy source")?;
        self.check_buffer(destination.buffer, "copy destination")?;
        let (source_bytes, size) = source.byte_span("copy source")?;
        let (destination_bytes, _) = destination.byte_span("copy destination")?;
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("copy", size);
        let (source, destination) = (source.buffer, destination.buffer);
        self.enqueue(
            "copy",
            Traced::transfer("copy", size),
            [
                self.memory_of(source, "the copy source")?,
                self.memory_of(destination, "the copy destination")?,
            ],
            |device, stream| {
                let from = Self::block_of(source)?;
                let to = Self::block_of(destination)?;
                device
                    .backend
                    .stream_copy(stream, from, source_bytes, to, destination_bytes, size)
            },
        )
    }

    /// Queues a fill of every element of `destination` (a [`Buffer`] or a view) with `value`,
    /// whose size must be 1, 2 or 4 bytes.
    pub fn fill<'a, T: bytemuck::Pod>(&self, destination: impl Into<BufferSlice<'a, T>>, value: T) -> Result<()> {
        let pattern = bytemuck::bytes_of(&value);
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill patterns are 1, 2 or 4 bytes; {} is {} bytes",
                std::any::type_name::<T>(),
                pattern.len()
            )));
        }
        self.fill_pattern(destination, pattern)
    }

    /// Queues a fill of the bytes of `destination` with `pattern` repeated: 1, 2 or 4 bytes,
    /// whose size divides the view's byte offset and length. For memory whose element type
    /// is not the pattern's (bytes holding `f32` values, say).
    pub fn fill_pattern<'a, T: 'a>(&self, destination: impl Into<BufferSlice<'a, T>>, pattern: &[u8]) -> Result<()> {
        let destination = destination.into();
        self.check_buffer(destination.buffer, "fill destination")?;
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill patterns are 1, 2 or 4 bytes, not {}",
                pattern.len()
            )));
        }
        let (byte_offset, size) = destination.byte_span("fill")?;
        let width = pattern.len() as u64;
        if byte_offset % width != 0 || size % width != 0 {
            return Err(Error::invalid_argument(format!(
                "fill: a {width}-byte pattern needs a byte offset and length that are multiples of {width}, \
                 not {byte_offset} and {size}"
            )));
        }
        if size == 0 {
            return Ok(());
        }
        let _span = self.span("fill", size);
        let buffer = destination.buffer;
        let traced = Traced {
            name: "fill",
            category: "fill",
            bytes: size,
            event: None,
        };
        self.enqueue(
            "fill",
            traced,
            [self.memory_of(buffer, "the fill destination")?],
            |device, stream| {
                let handle = Self::block_of(buffer)?;
                device.backend.stream_fill(stream, handle, byte_offset, size, pattern)
            },
        )
    }

    /// Queues a kernel launch. Arguments were checked when the [`Launch`] was built; the
    /// device limits and ownership are checked here.
    pub fn launch(&self, launch: &Launch<'_>) -> Result<()> {
        let kernel = launch.kernel();
        let _span = trace::span("api", "launch", || {
            let [x, y, z] = launch.workgroup_count();
            vec![
                ("kernel", kernel.name().to_string().into()),
                ("workgroups", format!("{x}x{y}x{z}").into()),
                ("device", Arc::clone(&self.shared.device.trace_label).into()),
                ("stream", self.shared.serial.into()),
            ]
        });
        let device = &self.shared.device;
        device
            .check_same_device(&kernel.module_device(), "")
            .or_else(|_| device.check_same_device(&kernel.module_device(), &format!("kernel `{}`", kernel.name())))?;
        let scalars = launch.validate_for(device)?;
        let serial = self.shared.serial;
        // On the stack for up to 8 buffers: a launch allocates nothing of its own.
        let mut keep: SmallVec<[InFlight; 10]> = SmallVec::new();
        let mut args: SmallVec<[BufferArg; 8]> = SmallVec::new();
        // Staged values, with their argument positions, placed once the stream is locked.
        let mut staged: StagedValues<'_> = SmallVec::new();
        for (position, binding) in launch.buffers().iter().enumerate() {
            match binding {
                BufferBinding::View { memory, offset, size } => {
                    let what = || format!("buffer argument {position} of kernel `{}`", kernel.name());
                    device
                        .check_same_device(&memory.device, "")
                        .or_else(|_| device.check_same_device(&memory.device, &what()))?;
                    let Some(block) = &memory.block else {
                        return Err(Error::invalid_argument(format!(
                            "{} is a zero-length buffer; a kernel cannot bind no memory",
                            what()
                        )));
                    };
                    args.push(BufferArg {
                        buffer: block.handle,
                        offset: *offset,
                        size: *size,
                    });
                    keep.push(InFlight::Memory(
                        QueuedUse::new(memory, "", Some(serial))
                            .or_else(|_| QueuedUse::new(memory, &what(), Some(serial)))?,
                    ));
                }
                BufferBinding::Staged(bytes) => {
                    staged.push((position, bytes));
                    // Replaced below, under the stream's lock.
                    args.push(BufferArg {
                        buffer: crate::backend::BufferHandle(0),
                        offset: 0,
                        size: bytes.len() as u64,
                    });
                }
            }
        }
        keep.push(InFlight::Object(kernel.keepalive()));
        let mut state = self.shared.state.lock();
        Self::check_usable(&state, "launch")?;
        // Each staged value is written into the arena and the launch queued under one lock,
        // so the arena's slots are handed out in the order the stream runs its work: a slot
        // is only reused by a write queued after every launch that read it.
        let submitted = trace::is_active().then(Instant::now);
        let queued = (|| {
            for (position, bytes) in staged {
                let (memory, handle, offset) = state.uniforms.place(device, bytes.len() as u64)?;
                // Held before the write is queued: should a later step fail, a write already
                // queued may still read them.
                keep.push(InFlight::Object(memory));
                keep.push(InFlight::Object(Arc::new(Arc::clone(bytes))));
                // SAFETY: the bytes are held in the stream's in-flight list until the stream is
                // known idle, whether or not the launch is queued, and an `Arc<[u8]>` does not
                // move them.
                unsafe {
                    device.backend.stream_write(
                        self.shared.handle,
                        handle,
                        offset,
                        bytes.as_ptr(),
                        bytes.len() as u64,
                    )?
                };
                args[position].buffer = handle;
                args[position].offset = offset;
            }
            device.backend.stream_launch(
                self.shared.handle,
                &LaunchArgs {
                    kernel: kernel.handle(),
                    workgroups: launch.workgroup_count(),
                    buffers: &args,
                    scalars: &scalars,
                },
            )
        })();
        if let (Ok(()), Some(submitted)) = (&queued, submitted) {
            let [x, y, z] = launch.workgroup_count();
            let args = vec![("workgroups", format!("{x}x{y}x{z}").into())];
            let what = (kernel.name().to_string().into(), "kernel");
            self.trace_enqueued(&mut state, what, submitted, args, None);
        }
        self.keep_in_flight(&mut state, keep);
        queued
    }

    /// Queues a record of `event`: it completes when everything queued before it has.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.check_usable("record")?;
        let _span = self.span("record", 0);
        self.shared.device.check_same_device(event.device(), "event")?;
        let traced = Traced {
            name: "record",
            category: "sync",
            bytes: 0,
            event: Some((event, EventRole::Record)),
        };
        self.enqueue(
            "record event",
            traced,
            [InFlight::Object(event.keepalive())],
            |device, stream| device.backend.stream_record_event(stream, event.handle()),
        )
    }

    /// Makes work queued after this call wait for the event's most recent record. Never
    /// blocks the host.
    pub fn wait(&self, event: &Event) -> Result<()> {
        event.check_usable("wait")?;
        let _span = self.span("wait", 0);
        self.shared.device.check_same_device(event.device(), "event")?;
        let traced = Traced {
            name: "wait",
            category: "wait",
            bytes: 0,
            event: Some((event, EventRole::Wait)),
        };
        self.enqueue(
            "wait for event",
            traced,
            [InFlight::Object(event.keepalive())],
            |device, stream| device.backend.stream_wait_event(stream, event.handle()),
        )
    }

    /// Allocates a buffer of `len` elements for work on this stream. It may reuse memory freed
    /// while work queued here still used it: this stream's later work runs after that work,
    /// so reuse needs no wait, as with PyTorch's stream-ordered CUDA allocator. Work queued on
    /// another stream that uses the buffer must first be ordered after this stream's (an
    /// [`Event`] recorded here and waited for there), and the host cannot map the buffer
    /// until this stream is known idle. [`Device::alloc`](crate::Device::alloc) gives memory
    /// free of any stream's work.
    ///
    /// A stream whose work failed gives memory free of any stream's work, as
    /// [`Device::alloc`](crate::Device::alloc) does: its queued work's order is no longer a
    /// guarantee.
    pub fn alloc<T: bytemuck::Pod>(&self, len: usize) -> Result<Buffer<T>> {
        let ordered = {
            let state = self.shared.state.lock();
            if state.destroyed {
                return Err(Error::invalid_handle("alloc on a destroyed stream"));
            }
            state.sticky.is_none()
        };
        // Allocated without the stream's lock, so that a slow backend allocation does not hold
        // up other threads' work on the stream.
        let serial = ordered.then_some(self.shared.serial);
        let (buffer, queued) = Buffer::allocate(Arc::clone(&self.shared.device), len, serial)?;
        if let Some(queued) = queued {
            let mut state = self.shared.state.lock();
            // Destroyed meanwhile: its work is done (or abandoned with it), so the memory needs
            // no use held for it.
            if !state.destroyed {
                self.keep_in_flight(&mut state, [InFlight::Memory(queued)]);
            }
        }
        Ok(buffer)
    }

    /// Blocks until everything queued has completed. An error found while executing is
    /// returned here and by every later call on this stream.
    pub fn synchronize(&self) -> Result<()> {
        let _span = self.span("synchronize", 0);
        let mut state = self.shared.state.lock();
        if state.destroyed {
            return Err(Error::invalid_handle("synchronize on a destroyed stream"));
        }
        // Even with a sticky error known, ask the backend to drain: the caller may be about to
        // release host memory that queued work still points at.
        let result = self.shared.device.backend.stream_synchronize(self.shared.handle);
        // Only a clean synchronize proves the queue drained. After a failure the objects stay
        // held (until the stream is destroyed) in case a misbehaving backend still uses them.
        if result.is_ok() {
            state.release_in_flight(&self.shared.device, self.shared.serial);
            state.resolve_trace(&self.shared.device, self.shared.handle);
            // Graph helpers joined this stream, so their work is done: a failure there is ours.
            if state.sticky.is_none() {
                let linked: Vec<Stream> = state.linked.iter().filter_map(Stream::from_weak).collect();
                for helper in linked {
                    if let Err(error) = helper.check_sticky() {
                        state.sticky = Some(error);
                        break;
                    }
                }
            }
        }
        if let Some(error) = &state.sticky {
            return Err(error.clone());
        }
        if let Err(error) = &result {
            state.sticky = Some(error.clone());
        }
        result
    }

    /// True when everything queued has completed.
    pub fn query(&self) -> Result<bool> {
        let mut state = self.shared.state.lock();
        Self::check_usable(&state, "query")?;
        match self.shared.device.backend.stream_query(self.shared.handle) {
            Ok(idle) => {
                if idle {
                    state.release_in_flight(&self.shared.device, self.shared.serial);
                    state.resolve_trace(&self.shared.device, self.shared.handle);
                }
                Ok(idle)
            }
            Err(error) => {
                state.sticky = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Waits for queued work, then destroys the stream for every clone. Returns the stream's
    /// error if its work failed. Later calls on any clone fail with `InvalidHandle`.
    pub fn destroy(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        if state.destroyed {
            return Err(Error::invalid_handle("destroy on a destroyed stream"));
        }
        let result = match &state.sticky {
            Some(error) => Err(error.clone()),
            None => self.shared.device.backend.stream_synchronize(self.shared.handle),
        };
        if result.is_ok() {
            state.resolve_trace(&self.shared.device, self.shared.handle);
        }
        if let Some(mut trace) = state.trace.take() {
            trace.release(&*self.shared.device.backend);
        }
        self.shared.device.backend.stream_destroy(self.shared.handle);
        state.destroyed = true;
        state.release_in_flight(&self.shared.device, self.shared.serial);
        result
    }

    fn block_of<T>(buffer: &Buffer<T>) -> Result<crate::backend::BufferHandle> {
        buffer
            .memory
            .block
            .as_ref()
            .map(|block| block.handle)
            .ok_or_else(|| Error::internal("a non-empty access reached a zero-length buffer"))
    }
}

/// Device memory a stream stages [`Launch::uniform`] values in: one buffer, filled front to
/// back and started again from the front when full. The stream runs its work in order, so a
/// write into a slot runs after every launch queued before it, those that read the slot's
/// last value included: the ring needs no fences.
#[derive(Default)]
struct UniformArena {
    buffer: Option<Buffer<u8>>,
    /// Where the next value may start.
    cursor: u64,
}

/// Bytes of a stream's uniform arena: WebGPU's largest uniform binding, so any value that fits
/// one binding fits the arena.
const UNIFORM_ARENA_BYTES: u64 = 64 << 10;

impl UniformArena {
    /// A slot of `len` bytes: the memory to hold while queued work uses it, its backend
    /// handle, and the byte offset. The first value allocates the arena; a value larger than
    /// the arena gets memory of its own.
    fn place(
        &mut self,
        device: &Arc<DeviceShared>,
        len: u64,
    ) -> Result<(Arc<BufferMemory>, crate::backend::BufferHandle, u64)> {
        let handle_of = |buffer: &Buffer<u8>| Self::handle(buffer).map(|handle| (buffer.memory.clone(), handle));
        if len > UNIFORM_ARENA_BYTES {
            let (own, _) = Buffer::<u8>::allocate(device.clone(), len as usize, None)?;
            let (memory, handle) = handle_of(&own)?;
            return Ok((memory, handle, 0));
        }
        let buffer = match &self.buffer {
            Some(buffer) => buffer,
            None => self
                .buffer
                .insert(Buffer::<u8>::allocate(device.clone(), UNIFORM_ARENA_BYTES as usize, None)?.0),
        };
        // WebGPU's uniform offset alignment (256) covers every backend's, and whatever the
        // device asks for views.
        let alignment = u64::from(device.info.buffer_offset_alignment.max(256));
        let mut offset = self.cursor.div_ceil(alignment) * alignment;
        if offset + len > UNIFORM_ARENA_BYTES {
            offset = 0;
        }
        self.cursor = offset + len;
        let (memory, handle) = handle_of(buffer)?;
        Ok((memory, handle, offset))
    }

    fn handle(buffer: &Buffer<u8>) -> Result<crate::backend::BufferHandle> {
        buffer
            .memory
            .block
            .as_ref()
            .map(|block| block.handle)
            .ok_or_else(|| Error::internal("the uniform arena has no memory"))
    }
}
