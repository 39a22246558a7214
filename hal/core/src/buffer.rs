//! Typed device buffers.

use crate::allocator::Block;
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// The memory behind a buffer. Streams hold it while queued work uses it, so dropping a
/// [`Buffer`] never frees memory under a running kernel or copy.
pub(crate) struct BufferMemory {
    pub(crate) device: Arc<DeviceShared>,
    /// `None` for a zero-size buffer, which owns no device memory.
    pub(crate) block: Option<Block>,
    /// Size the user asked for, in bytes; accesses are checked against this, not the block.
    pub(crate) size: u64,
    /// Live host mappings of the memory: while any exists, no work may be queued on it.
    pub(crate) maps: AtomicU32,
    /// Queued operations that use the memory and are not yet known complete: while any
    /// exists, the memory may not be mapped.
    pub(crate) queued: AtomicU32,
    /// Which streams those operations are queued on, for stream-ordered reuse.
    pub(crate) queued_on: Mutex<QueuedStreams>,
    /// The block went to the allocator for its stream's reuse when the buffer was dropped
    /// (queued work still held the memory); the memory's own drop must not release it again.
    pub(crate) handed_back: AtomicBool,
}

/// The streams a buffer's queued uses are on.
#[derive(Default)]
pub(crate) struct QueuedStreams {
    /// Queued uses.
    count: u32,
    /// The serial of the stream of every one of them, when there is one such stream.
    stream: Option<u64>,
    /// A use is on another stream too, or on none in particular (a graph replay's).
    several: bool,
}

impl BufferMemory {
    pub(crate) fn new(device: Arc<DeviceShared>, block: Option<Block>, size: u64) -> BufferMemory {
        BufferMemory {
            device,
            block,
            size,
            maps: AtomicU32::new(0),
            queued: AtomicU32::new(0),
            queued_on: Mutex::new(QueuedStreams::default()),
            handed_back: AtomicBool::new(false),
        }
    }

    /// The buffer that owns this memory is being dropped. Where the memory's only other
    /// holders are queued uses on one stream, its block goes to the allocator for that
    /// stream's allocations now, instead of for anyone once the work completes.
    fn hand_back_to_stream(self: &Arc<Self>) {
        let Some(block) = &self.block else { return };
        if !self.device.allocator.keeps_stream_ordered() {
            return;
        }
        let users = self.queued_on.lock();
        let Some(stream) = users.stream.filter(|_| users.count > 0 && !users.several) else {
            return;
        };
        // Every holder but the buffer is a queued use on `stream` (a graph, a launch being
        // built or a mapping would be one more). A use made or ended meanwhile changes the
        // count or the holders only after the other, so a race can only make the two differ:
        // the memory then waits for its work, as without this.
        if Arc::strong_count(self) != 1 + users.count as usize || self.maps.load(Ordering::SeqCst) != 0 {
            return;
        }
        self.handed_back.store(true, Ordering::SeqCst);
        self.device.allocator.release_to_stream(
            stream,
            Block {
                handle: block.handle,
                size: block.size,
            },
        );
        if crate::trace::is_active() {
            crate::trace::memory_counter(&self.device);
        }
    }
}

/// One queued operation's use of a buffer's memory, held in its stream's in-flight list until
/// the stream is known idle. Counting these is what lets a mapping be refused while work may
/// still touch the memory, and work be refused while the memory is mapped: each side counts
/// itself first, then looks at the other, so two threads racing cannot both go ahead.
pub(crate) struct QueuedUse(Arc<BufferMemory>);

impl QueuedUse {
    /// The use of `memory` by an operation queued on the stream with serial `stream` (`None`:
    /// on several), or an error naming `what` when it is mapped.
    pub(crate) fn new(memory: &Arc<BufferMemory>, what: &str, stream: Option<u64>) -> Result<QueuedUse> {
        memory.queued.fetch_add(1, Ordering::SeqCst);
        let queued = QueuedUse(Arc::clone(memory));
        {
            let mut users = memory.queued_on.lock();
            if users.count == 0 {
                users.stream = stream;
                users.several = stream.is_none();
            } else if users.stream != stream {
                users.several = true;
            }
            users.count += 1;
        }
        let maps = memory.maps.load(Ordering::SeqCst);
        if maps > 0 {
            return Err(Error::invalid_argument(format!(
                "{what} is mapped for the host ({maps} live mapping(s)); drop the mapping before queuing work that \
                 uses the buffer"
            )));
        }
        Ok(queued)
    }
}

impl Drop for QueuedUse {
    fn drop(&mut self) {
        {
            let mut users = self.0.queued_on.lock();
            users.count -= 1;
            if users.count == 0 {
                *users = QueuedStreams::default();
            }
        }
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for BufferMemory {
    fn drop(&mut self) {
        if self.handed_back.load(Ordering::SeqCst) {
            return;
        }
        if let Some(block) = self.block.take() {
            self.device.allocator.release(block);
            if crate::trace::is_active() {
                crate::trace::memory_counter(&self.device);
            }
        }
    }
}

/// A buffer of `len` elements of `T` in device memory. The host reaches its contents only
/// through stream operations.
pub struct Buffer<T> {
    pub(crate) memory: Arc<BufferMemory>,
    len: usize,
    _element: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("device", &self.memory.device.label())
            .field("len", &self.len)
            .field("element", &std::any::type_name::<T>())
            .finish()
    }
}

/// Byte count of `count` elements of `T`, or an error naming `what` when it overflows.
pub(crate) fn bytes_of<T>(count: usize, what: &str) -> Result<u64> {
    (count as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| {
            Error::out_of_bounds(format!(
                "{what}: {count} elements of {} bytes overflow u64",
                std::mem::size_of::<T>()
            ))
        })
}

impl<T: bytemuck::Pod> Buffer<T> {
    /// A buffer of `len` elements; with `stream`, it may reuse memory that work queued on that
    /// stream still uses, and the returned memory counts as used by that stream until it is
    /// known idle (the caller holds the `QueuedUse` there).
    pub(crate) fn allocate(
        device: Arc<DeviceShared>,
        len: usize,
        stream: Option<u64>,
    ) -> Result<(Buffer<T>, Option<QueuedUse>)> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::invalid_argument(format!(
                "buffers of zero-sized type {} hold nothing",
                std::any::type_name::<T>()
            )));
        }
        let size = bytes_of::<T>(len, "allocation")?;
        let _span = crate::trace::span("api", "allocate", || {
            vec![("device", device.label().into()), ("bytes", size.into())]
        });
        let max = device.info.max_allocation_size;
        if max > 0 && size > max {
            return Err(Error::out_of_memory(format!(
                "requested {size} bytes on {}, whose largest allocation is {max} bytes",
                device.label()
            )));
        }
        let (block, ordered) = if size == 0 {
            (None, false)
        } else {
            let (block, ordered) = device.allocator.allocate_for(size, stream)?;
            (Some(block), ordered)
        };
        if crate::trace::is_active() {
            crate::trace::memory_counter(&device);
        }
        let memory = Arc::new(BufferMemory::new(device, block, size));
        // Work the stream queued before may still use the block: the memory is in use by the
        // stream until it is idle, so the host cannot map it meanwhile.
        let queued = match stream.filter(|_| ordered) {
            Some(serial) => Some(QueuedUse::new(&memory, "", Some(serial))?),
            None => None,
        };
        Ok((
            Buffer {
                memory,
                len,
                _element: PhantomData,
            },
            queued,
        ))
    }
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        self.memory.hand_back_to_stream();
    }
}

impl<T> Buffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.memory.size
    }

    /// `backend:index` of the device the buffer lives on.
    pub fn device_label(&self) -> String {
        self.memory.device.label()
    }

    /// Maps the whole buffer for the host to read, without a copy: see [`BufferSlice::map`].
    pub fn map(&self) -> Result<Mapped<'_, T>>
    where
        T: bytemuck::Pod,
    {
        BufferSlice::from(self).map()
    }

    /// Maps elements `range` of the buffer for the host to read and write, without a copy, on
    /// a device whose memory the host can address ([`Features::HOST_MAPPABLE`](crate::Features)).
    /// The buffer is borrowed mutably while the mapping lives, so no launch or copy can name
    /// it; work queued before must be known complete ([`Stream::synchronize`](crate::Stream)
    /// on the streams that used it), or the mapping is refused. What the host writes is seen
    /// by the work queued after the mapping is dropped.
    pub fn map_mut(&mut self, range: impl RangeBounds<usize>) -> Result<MappedMut<'_, T>>
    where
        T: bytemuck::Pod,
    {
        let view = self.slice(range);
        let (pointer, len) = map_view(&view, true)?;
        Ok(MappedMut {
            memory: &self.memory,
            pointer: pointer.cast::<T>(),
            len,
        })
    }

    /// A view of elements `range` (`2..6`, `4..`, `..`) of the buffer: what
    /// [`Stream::write`](crate::Stream::write), [`read`](crate::Stream::read),
    /// [`copy`](crate::Stream::copy), [`fill`](crate::Stream::fill) and
    /// [`Launch::buffer`](crate::Launch::buffer) take. A range outside the buffer is reported,
    /// naming it, by the call that uses the view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> BufferSlice<'_, T> {
        let start = match range.start_bound() {
            Bound::Included(&start) => Some(start),
            Bound::Excluded(&start) => start.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&end) => end.checked_add(1),
            Bound::Excluded(&end) => Some(end),
            Bound::Unbounded => Some(self.len),
        };
        BufferSlice {
            buffer: self,
            start: start.unwrap_or(usize::MAX),
            end: end.unwrap_or(usize::MAX),
        }
    }
}

/// Elements `start..end` of a [`Buffer`]; made by [`Buffer::slice`], or from `&Buffer` for the
/// whole buffer.
pub struct BufferSlice<'a, T> {
    pub(crate) buffer: &'a Buffer<T>,
    start: usize,
    end: usize,
}

impl<T> Clone for BufferSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for BufferSlice<'_, T> {}

impl<T> std::fmt::Debug for BufferSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferSlice")
            .field("buffer", self.buffer)
            .field("elements", &(self.start..self.end))
            .finish()
    }
}

impl<'a, T> From<&'a Buffer<T>> for BufferSlice<'a, T> {
    fn from(buffer: &'a Buffer<T>) -> BufferSlice<'a, T> {
        BufferSlice {
            buffer,
            start: 0,
            end: buffer.len,
        }
    }
}

impl<'a, T> BufferSlice<'a, T> {
    /// The buffer viewed.
    pub fn buffer(&self) -> &'a Buffer<T> {
        self.buffer
    }

    /// The elements viewed, as a range of the buffer's.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }

    /// Number of elements viewed (0 for a reversed range, which every use refuses).
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// True when the view holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maps the view for the host to read, without a copy, on a device whose memory the host
    /// can address ([`Features::HOST_MAPPABLE`](crate::Features)). Work queued before that
    /// uses the buffer must be known complete ([`Stream::synchronize`](crate::Stream) on the
    /// streams that used it), or the mapping is refused; while the mapping lives, work that
    /// names the buffer is refused. Several mappings of one buffer may live at once.
    pub fn map(&self) -> Result<Mapped<'a, T>>
    where
        T: bytemuck::Pod,
    {
        let (pointer, len) = map_view(self, false)?;
        Ok(Mapped {
            memory: &self.buffer.memory,
            pointer: pointer.cast::<T>(),
            len,
        })
    }

    /// Byte offset and size of the view, checked against the buffer; `what` names the use.
    pub(crate) fn byte_span(&self, what: &str) -> Result<(u64, u64)> {
        if self.start > self.end {
            return Err(Error::out_of_bounds(format!(
                "{what}: element range {}..{} is reversed",
                self.start, self.end
            )));
        }
        if self.end > self.buffer.len {
            return Err(Error::out_of_bounds(format!(
                "{what}: elements {}..{} reach past the end of a buffer of {} elements",
                self.start, self.end, self.buffer.len
            )));
        }
        let offset = bytes_of::<T>(self.start, what)?;
        let size = bytes_of::<T>(self.len(), what)?;
        crate::error::check_range(what, offset, size, self.buffer.memory.size)?;
        Ok((offset, size))
    }

    /// The first `count` elements of the view, or an error when it holds fewer: the place a
    /// transfer of `count` elements lands in.
    pub(crate) fn prefix(&self, count: usize, what: &str) -> Result<BufferSlice<'a, T>> {
        self.byte_span(what)?;
        if count > self.len() {
            return Err(Error::out_of_bounds(format!(
                "{what}: {count} elements do not fit a view of {} elements (elements {}..{} of the buffer)",
                self.len(),
                self.start,
                self.end
            )));
        }
        Ok(BufferSlice {
            buffer: self.buffer,
            start: self.start,
            end: self.start + count,
        })
    }
}

/// Maps `view` through the backend and counts the mapping: the host address of its first
/// element and its length in elements. An empty view maps to no memory.
fn map_view<T: bytemuck::Pod>(view: &BufferSlice<'_, T>, write: bool) -> Result<(*mut u8, usize)> {
    let what = if write { "map for writing" } else { "map" };
    let (offset, size) = view.byte_span(what)?;
    let memory = &view.buffer.memory;
    let device = &memory.device;
    if !device.info.features.contains(crate::Features::HOST_MAPPABLE) {
        return Err(Error::unsupported(format!(
            "{} ({}) cannot map its memory for the host (it lacks the host_mappable feature); move data with \
             Stream::write and Stream::read",
            device.label(),
            device.info.name
        )));
    }
    let Some(block) = memory.block.as_ref().filter(|_| size > 0) else {
        return Ok((std::ptr::NonNull::<T>::dangling().as_ptr().cast::<u8>(), 0));
    };
    memory.maps.fetch_add(1, Ordering::SeqCst);
    let queued = memory.queued.load(Ordering::SeqCst);
    if queued > 0 {
        memory.maps.fetch_sub(1, Ordering::SeqCst);
        return Err(Error::invalid_argument(format!(
            "the buffer is used by {queued} queued operation(s) not yet known complete; synchronize the streams \
             that use it before mapping it"
        )));
    }
    let flags = if write {
        crate::abi::XHAL_MAP_READ | crate::abi::XHAL_MAP_WRITE
    } else {
        crate::abi::XHAL_MAP_READ
    };
    let pointer = match device.backend.buffer_map(block.handle, offset, size, flags) {
        Ok(pointer) => pointer,
        Err(error) => {
            memory.maps.fetch_sub(1, Ordering::SeqCst);
            return Err(error);
        }
    };
    if pointer.align_offset(std::mem::align_of::<T>()) != 0 {
        unmap(memory, pointer);
        return Err(Error::internal(format!(
            "{} mapped the buffer at {pointer:p}, which is not aligned for {}",
            device.label(),
            std::any::type_name::<T>()
        )));
    }
    Ok((pointer, view.len()))
}

/// Ends a mapping made by [`map_view`].
fn unmap(memory: &BufferMemory, pointer: *mut u8) {
    if let Some(block) = &memory.block {
        if let Err(error) = memory.device.backend.buffer_unmap(block.handle, pointer) {
            tracing::warn!(%error, device = %memory.device.label(), "unmapping a buffer failed");
        }
    }
    memory.maps.fetch_sub(1, Ordering::SeqCst);
}

/// A range of a buffer mapped for the host to read ([`BufferSlice::map`]): a `&[T]` of the
/// device's memory. Dropping it ends the mapping.
pub struct Mapped<'a, T> {
    memory: &'a Arc<BufferMemory>,
    pointer: *const T,
    len: usize,
}

impl<T> Deref for Mapped<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the backend mapped `len` elements at `pointer`, aligned for `T` (checked),
        // and no queued work may touch them while the mapping lives (counted both ways).
        unsafe { std::slice::from_raw_parts(self.pointer, self.len) }
    }
}

impl<T> Drop for Mapped<'_, T> {
    fn drop(&mut self) {
        if self.len > 0 {
            unmap(self.memory, self.pointer.cast_mut().cast::<u8>());
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Mapped<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A range of a buffer mapped for the host to read and write ([`Buffer::map_mut`]): a
/// `&mut [T]` of the device's memory. Dropping it ends the mapping, and work queued after sees
/// what was written.
pub struct MappedMut<'a, T> {
    memory: &'a Arc<BufferMemory>,
    pointer: *mut T,
    len: usize,
}

impl<T> Deref for MappedMut<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: as for `Mapped`; the buffer is borrowed mutably for the mapping's life.
        unsafe { std::slice::from_raw_parts(self.pointer, self.len) }
    }
}

impl<T> DerefMut for MappedMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as for `Mapped`, and this mapping is the only way to the bytes: the buffer is
        // borrowed mutably while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.pointer, self.len) }
    }
}

impl<T> Drop for MappedMut<'_, T> {
    fn drop(&mut self) {
        if self.len > 0 {
            unmap(self.memory, self.pointer.cast::<u8>());
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for MappedMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
