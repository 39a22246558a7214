//! Device buffers and the data operations on them.
//!
//! Device memory is little-endian, whatever the host: kernels read and write elements with
//! `from_le_bytes` / `to_le_bytes`, so a program sees the same bytes on every machine.

use crate::device::DeviceMemory;
use crate::pool::Pool;
use crate::CpuDriver;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use xhal_backend::error::check_range;
use xhal_backend::{DriverBuffer, Error, Object, Result};

/// What a fresh allocation holds: this `u32`, little-endian, repeated (bytes `EF BE AD DE`),
/// truncated at the end of the buffer. Real devices hand out whatever was there before; the
/// reference backend hands out something recognisable, so a program that reads memory it
/// never wrote gets an obviously wrong answer instead of a lucky zero.
pub const POISON_PATTERN: u32 = 0xDEAD_BEEF;

/// One device allocation.
#[derive(Debug)]
pub struct Buffer {
    /// The handle the application names this buffer by. The adapter issues it after the
    /// allocation, so the buffer learns it when first handed to the driver ([`Buffer::named`]);
    /// messages name it, and paths that lock several buffers lock them in its order.
    handle: OnceLock<u64>,
    size: u64,
    memory: Arc<DeviceMemory>,
    bytes: RwLock<AlignedBytes>,
    /// Set by every path that may change the bytes ([`Buffer::bytes_mut`]): a buffer freed
    /// without it still holds only the poison, so its block is kept for the next allocation
    /// of its size instead of being poisoned again.
    written: AtomicBool,
}

impl Buffer {
    /// The buffer behind the adapter's object, for queued work to hold; it learns its handle here.
    pub(crate) fn named(object: &Object<Arc<Buffer>>) -> Arc<Buffer> {
        let buffer: &Arc<Buffer> = object;
        // Set once: an object keeps one handle for life, so a second set has nothing to change.
        let _ = buffer.handle.set(object.handle());
        Arc::clone(buffer)
    }

    /// The buffer's handle, which orders lock taking and names it in messages. Every path to
    /// queued work goes through [`Buffer::named`] first; until then, the allocation's address
    /// stands in, unique among live buffers and never a handle (handles carry a kind byte).
    pub(crate) fn id(&self) -> u64 {
        self.handle
            .get()
            .copied()
            .unwrap_or(std::ptr::from_ref(self) as usize as u64)
    }

    /// The bytes, for kernels (and for tests that need to hold a buffer still).
    pub(crate) fn bytes(&self) -> &RwLock<AlignedBytes> {
        &self.bytes
    }

    /// The bytes locked for writing: the one way to change them, so the buffer knows it no
    /// longer holds only the poison.
    pub(crate) fn bytes_mut(&self) -> RwLockWriteGuard<'_, AlignedBytes> {
        self.written.store(true, Ordering::Relaxed);
        self.bytes.write()
    }

    /// Checks `offset..offset + size` against this buffer and converts it to host indices.
    /// `what` names the operation in the error ("write", "copy source"...). Launches still
    /// check their views with it (`kernels`), after the adapter already did.
    pub(crate) fn byte_range(&self, what: impl std::fmt::Display, offset: u64, size: u64) -> Result<Range<usize>> {
        // The message is written only for an error: this runs for every argument of a launch.
        if offset.checked_add(size).is_none_or(|end| end > self.size) {
            check_range(&format!("{what} on buffer {:#x}", self.id()), offset, size, self.size)?;
        }
        host_range(offset, size)
    }

    pub(crate) fn write_from_host(&self, range: Range<usize>, source: HostSource) {
        let mut bytes = self.bytes_mut();
        // An empty write could come with a null pointer, which even a 0-byte `ptr::copy` forbids
        // (the adapter never hands one over, but this costs nothing).
        let Some(target) = bytes.get_mut(range).filter(|target| !target.is_empty()) else {
            return;
        };
        // SAFETY: the caller of `stream_write` promised `source` points to `target.len()`
        // readable bytes that stay valid until this write completes, which is now. `ptr::copy`
        // rather than `copy_nonoverlapping` because nothing stops a caller pointing into
        // memory we cannot see; the host never gets a pointer into `target` itself.
        unsafe { std::ptr::copy(source.0, target.as_mut_ptr(), target.len()) };
    }

    pub(crate) fn read_to_host(&self, range: Range<usize>, destination: HostDestination) {
        let bytes = self.bytes.read();
        let Some(source) = bytes.get(range).filter(|source| !source.is_empty()) else {
            return;
        };
        // SAFETY: the caller of `stream_read` promised `destination` points to `source.len()`
        // writable bytes that nobody else touches until this read completes, which is now.
        unsafe { std::ptr::copy(source.as_ptr(), destination.0, source.len()) };
    }

    /// Copies `source_range` of `source` to `destination` at `destination_start`; the ranges
    /// may overlap, even within one buffer.
    pub(crate) fn copy(source: &Buffer, source_range: Range<usize>, destination: &Buffer, destination_start: usize) {
        let length = source_range.len();
        let destination_range = destination_start..destination_start + length;
        if source.id() == destination.id() {
            let mut bytes = destination.bytes_mut();
            if bytes.get(destination_range).is_some() && bytes.get(source_range.clone()).is_some() {
                bytes.copy_within(source_range, destination_start);
            }
            return;
        }
        // Every path that holds two buffer locks takes them in handle order, so two copies in
        // opposite directions on two streams cannot deadlock.
        let (from, mut to) = if source.id() < destination.id() {
            let from = source.bytes.read();
            (from, destination.bytes_mut())
        } else {
            let to = destination.bytes_mut();
            (source.bytes.read(), to)
        };
        if let (Some(from), Some(to)) = (from.get(source_range), to.get_mut(destination_range)) {
            copy_on_every_core(to, from);
        }
    }

    pub(crate) fn fill(&self, range: Range<usize>, pattern: FillPattern) {
        let mut bytes = self.bytes_mut();
        if let Some(target) = bytes.get_mut(range) {
            fill_with(target, pattern.as_bytes());
        }
    }
}

/// Copies of at least this many bytes between two buffers are shared among the launch pool's
/// threads, a chunk at a time: one core's copy reaches about half of what the machine's
/// memory does (a 16 MiB copy took 1.2 ms on one of this machine's two cores, 0.65 ms on
/// both), and a GPU copies with all of its memory bandwidth too.
const SHARED_COPY_BYTES: usize = 4 << 20;
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// `to.copy_from_slice(from)`, on the pool's threads for a large copy. Each chunk is taken
/// (once) from its own lock, so the threads share no bytes; a thread checks whether an urgent
/// launch wants the cores before it takes a chunk, and the submitter copies whatever chunks
/// the helpers leave.
fn copy_on_every_core(to: &mut [u8], from: &[u8]) {
    /// A chunk of the destination and the source's bytes for it.
    type ChunkPair<'a> = (&'a mut [u8], &'a [u8]);
    if to.len() < SHARED_COPY_BYTES || Pool::threads() < 2 {
        to.copy_from_slice(from);
        return;
    }
    let chunks: Vec<Mutex<Option<ChunkPair>>> = to
        .chunks_mut(COPY_CHUNK_BYTES)
        .zip(from.chunks(COPY_CHUNK_BYTES))
        .map(|pair| Mutex::new(Some(pair)))
        .collect();
    let next = AtomicUsize::new(0);
    let job = || loop {
        if Pool::get().should_leave() {
            return;
        }
        let Some(chunk) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return;
        };
        if let Some((to, from)) = chunk.lock().take() {
            to.copy_from_slice(from);
        }
    };
    Pool::get().run(&job, Pool::threads() - 1);
}

/// Repeats `pattern` over `target`, cutting the last repeat short where it does not fit.
///
/// One tiny copy per element would be slow: instead the first block of the target is built
/// by doubling, and the rest copied from it in block-sized pieces (from a block still in
/// cache). BLOCK is a multiple of every pattern length (1, 2 or 4 bytes).
fn fill_with(target: &mut [u8], pattern: &[u8]) {
    const BLOCK: usize = 4096;
    let unit = pattern.len().min(target.len());
    if unit == 0 {
        return;
    }
    target[..unit].copy_from_slice(&pattern[..unit]);
    let block = target.len().min(BLOCK);
    let mut filled = unit;
    while filled < block {
        let count = filled.min(block - filled);
        target.copy_within(..count, filled);
        filled += count;
    }
    while filled < target.len() {
        let count = block.min(target.len() - filled);
        target.copy_within(..count, filled);
        filled += count;
    }
}

impl DriverBuffer<CpuDriver> for Arc<Buffer> {
    /// Takes `size` bytes (more than 0) from the device's budget and from the host, poisoned.
    fn allocate(_driver: &CpuDriver, device: &Arc<Object<Arc<DeviceMemory>>>, size: u64) -> Result<Arc<Buffer>> {
        let memory: &Arc<DeviceMemory> = device;
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("requested {size} bytes, more than this host can address")))?;
        memory.reserve(size)?;
        let bytes = match memory.clean_block(length) {
            Some(bytes) => bytes,
            None => match AlignedBytes::try_new(length) {
                Ok(mut bytes) => {
                    fill_with(&mut bytes, &POISON_PATTERN.to_le_bytes());
                    bytes
                }
                Err(reason) => {
                    memory.release(size);
                    return Err(Error::out_of_memory(format!(
                        "requested {size} bytes, the host could not provide them: {reason}"
                    )));
                }
            },
        };
        Ok(Arc::new(Buffer {
            handle: OnceLock::new(),
            size,
            memory: Arc::clone(memory),
            bytes: RwLock::new(bytes),
            written: AtomicBool::new(false),
        }))
    }

    /// Device memory is host memory: a mapping is the address of the bytes. The host touches
    /// them only while no queued work uses the buffer (its promise), so no lock is held.
    fn map(buffer: &Arc<Object<Arc<Buffer>>>, offset: u64, size: u64, write: bool) -> Result<*mut u8> {
        let range = buffer.byte_range("map", offset, size)?;
        let mut bytes = if write {
            buffer.bytes_mut()
        } else {
            buffer.bytes.write()
        };
        let target = bytes
            .get_mut(range)
            .ok_or_else(|| Error::internal("a checked mapping fell outside its buffer"))?;
        Ok(target.as_mut_ptr())
    }
}

impl Drop for Buffer {
    /// Returns the bytes to the device's budget, and a block that still holds only the poison
    /// to the device's cache of clean blocks.
    fn drop(&mut self) {
        self.memory.release(self.size);
        if !*self.written.get_mut() {
            let bytes = std::mem::replace(self.bytes.get_mut(), AlignedBytes::empty());
            self.memory.keep_clean_block(bytes);
        }
    }
}

/// One 16-byte, 16-aligned unit of buffer storage.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
struct Chunk([u8; 16]);

/// A buffer's bytes, 16-byte aligned and padded to a whole number of 16-byte chunks.
///
/// Kernels view a locked buffer as `AtomicU32` words (see [`AlignedBytes::as_atomic_words`]),
/// which needs 4-byte alignment and whole words; a `Box<[u8]>` promises neither. The padding
/// past `len` is never visible as bytes, only as the tail of the last word.
#[derive(Debug)]
pub(crate) struct AlignedBytes {
    chunks: Box<[Chunk]>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes, or why the host could not provide them.
    /// No bytes, allocating nothing.
    fn empty() -> AlignedBytes {
        AlignedBytes {
            chunks: Box::new([]),
            len: 0,
        }
    }

    /// Bytes of the whole allocation, padding included.
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.len() * 16
    }

    fn try_new(len: usize) -> std::result::Result<AlignedBytes, std::collections::TryReserveError> {
        let mut chunks = Vec::new();
        chunks.try_reserve_exact(len.div_ceil(16))?;
        chunks.resize(len.div_ceil(16), Chunk::default());
        Ok(AlignedBytes {
            chunks: chunks.into_boxed_slice(),
            len,
        })
    }

    /// The whole allocation (padding included) as little-endian words that several threads
    /// may read and write at once. Taking `&mut self` proves nobody else can reach the bytes
    /// while the words are in use, so every access to them is atomic.
    pub(crate) fn as_atomic_words(&mut self) -> &[AtomicU32] {
        let words = self.chunks.len() * 4;
        let pointer = self.chunks.as_mut_ptr().cast::<AtomicU32>();
        // SAFETY: the chunks are `words * 4` initialised bytes, 16-aligned (so 4-aligned), and
        // `AtomicU32` has the size, alignment and bit validity of `u32`, so every 4 bytes are a
        // valid `AtomicU32`. The exclusive borrow of `self` lasts as long as the returned
        // slice, so no non-atomic access to these bytes can happen while it lives.
        unsafe { std::slice::from_raw_parts(pointer, words) }
    }
}

impl Deref for AlignedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let pointer = self.chunks.as_ptr().cast::<u8>();
        // SAFETY: the chunks hold `chunks.len() * 16 >= len` initialised bytes (`Chunk` is
        // plain bytes with no padding), borrowed for as long as `self` is.
        unsafe { std::slice::from_raw_parts(pointer, self.len) }
    }
}

impl DerefMut for AlignedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        let pointer = self.chunks.as_mut_ptr().cast::<u8>();
        // SAFETY: as in `deref`, and the borrow is exclusive because `self` is.
        unsafe { std::slice::from_raw_parts_mut(pointer, self.len) }
    }
}

/// `offset..offset + size` as host indices, for a range already checked against its buffer.
pub(crate) fn host_range(offset: u64, size: u64) -> Result<Range<usize>> {
    // Both fit: the end is within the buffer's size, which was a `usize` when allocated.
    let start = to_index(offset)?;
    let end = to_index(offset.saturating_add(size))?;
    Ok(start..end)
}

fn to_index(value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("byte offset {value} does not fit this host")))
}

/// A 1-, 2- or 4-byte fill pattern (the adapter checked its length), copied at enqueue time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FillPattern {
    bytes: [u8; 4],
    length: usize,
}

impl FillPattern {
    pub(crate) fn new(pattern: &[u8]) -> FillPattern {
        let length = pattern.len().min(4);
        let mut bytes = [0u8; 4];
        bytes[..length].copy_from_slice(&pattern[..length]);
        FillPattern { bytes, length }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.length]
    }
}

/// Host memory a `stream_write` reads when it executes on the stream's worker thread.
#[derive(Debug)]
pub(crate) struct HostSource(*const u8);

impl HostSource {
    /// # Safety
    /// `pointer` must satisfy `Driver::stream_write`'s contract: readable for the write's
    /// size, valid and unchanged until the write completes.
    pub(crate) unsafe fn new(pointer: *const u8) -> HostSource {
        HostSource(pointer)
    }
}

// SAFETY: the pointer is only dereferenced by the worker that executes the write, and the
// `stream_write` contract keeps the memory valid and unchanged until then, from any thread.
unsafe impl Send for HostSource {}

/// Host memory a `stream_read` fills when it executes on the stream's worker thread.
#[derive(Debug)]
pub(crate) struct HostDestination(*mut u8);

impl HostDestination {
    /// # Safety
    /// `pointer` must satisfy `Driver::stream_read`'s contract: writable for the read's
    /// size, valid and untouched by anyone else until the read completes.
    pub(crate) unsafe fn new(pointer: *mut u8) -> HostDestination {
        HostDestination(pointer)
    }
}

// SAFETY: the pointer is only dereferenced by the worker that executes the read, and the
// `stream_read` contract gives that worker exclusive use of the memory until then.
unsafe impl Send for HostDestination {}
