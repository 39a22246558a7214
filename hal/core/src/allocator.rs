//! The caching allocator: every backend gets it for free, on top of its raw allocate/free.
//!
//! Device allocations are slow on real drivers (and synchronising on some), so freed blocks
//! are kept in a cache keyed by their rounded size and handed out again. Statistics follow
//! the names PyTorch users know: allocated, reserved, peak, `empty_cache`,
//! `reset_peak_stats`. Set `XHAL_CACHING_ALLOCATOR=0` to pass every request straight to the
//! backend (useful to find use-after-free bugs with a strict backend).
//!
//! Freed memory that queued work on exactly one stream still uses is *stream-ordered*: it may
//! be handed at once to an allocation for that same stream ([`Stream::alloc`](crate::Stream)),
//! whose work runs after the old work in the stream's order, as PyTorch's CUDA allocator does.
//! Any other allocation gets it only once that stream is known idle. Without this, a host that
//! queues ahead of the device finds none of its freed memory reusable and asks the backend for
//! fresh memory on every allocation.

use crate::backend::{Backend, BufferHandle, DeviceHandle};
use crate::error::{ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sizes up to this are rounded to [`SMALL_ROUNDING`]; larger ones to [`LARGE_ROUNDING`].
const SMALL_LIMIT: u64 = 1 << 20;
/// Rounding of small requests, so that nearby sizes share cached blocks.
const SMALL_ROUNDING: u64 = 512;
/// Rounding of large requests.
const LARGE_ROUNDING: u64 = 2 << 20;

/// Memory statistics of one device's allocator, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryStats {
    /// Bytes in blocks handed out to live buffers (rounded sizes).
    pub allocated: u64,
    /// Bytes held from the backend: allocated plus cached.
    pub reserved: u64,
    /// Highest `allocated` since creation or the last `reset_peak_stats`.
    pub peak_allocated: u64,
    /// Highest `reserved` since creation or the last `reset_peak_stats`.
    pub peak_reserved: u64,
    /// Live blocks handed out.
    pub active_blocks: u64,
    /// Blocks waiting in the cache.
    pub cached_blocks: u64,
    /// Allocations served from the cache.
    pub cache_hits: u64,
    /// Allocations that went to the backend.
    pub backend_allocations: u64,
}

/// A raw allocation handed out by the allocator.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    /// The backend's buffer.
    pub handle: BufferHandle,
    /// Size of the backend allocation (the request, rounded up).
    pub size: u64,
}

#[derive(Default)]
struct State {
    /// Free blocks by size; exact-size reuse keeps fragmentation accounting simple.
    free: BTreeMap<u64, Vec<BufferHandle>>,
    /// Stream-ordered blocks: by stream serial, then size. Queued work on that stream may
    /// still use them, so only that stream's allocations take them, until it is known idle.
    stream_free: HashMap<u64, BTreeMap<u64, Vec<BufferHandle>>>,
    stats: MemoryStats,
}

/// Takes a block of `size` from `free`, dropping an emptied entry.
fn take_block(free: &mut BTreeMap<u64, Vec<BufferHandle>>, size: u64) -> Option<BufferHandle> {
    let blocks = free.get_mut(&size)?;
    let handle = blocks.pop();
    if blocks.is_empty() {
        free.remove(&size);
    }
    handle
}

/// Caching allocator for one opened device.
pub struct CachingAllocator {
    backend: Arc<dyn Backend>,
    device: DeviceHandle,
    /// The device's largest allocation; rounding never asks for more than this.
    max_allocation: u64,
    caching: bool,
    state: Mutex<State>,
    /// Blocks in [`State::stream_free`], read without the lock so that a stream going idle
    /// with none of them costs no lock.
    stream_blocks: AtomicU64,
}

impl CachingAllocator {
    /// An allocator for `device`; caching unless `XHAL_CACHING_ALLOCATOR=0`.
    pub fn new(backend: Arc<dyn Backend>, device: DeviceHandle, max_allocation: u64) -> CachingAllocator {
        let caching = std::env::var("XHAL_CACHING_ALLOCATOR").map_or(true, |value| value != "0");
        CachingAllocator::with_caching(backend, device, max_allocation, caching)
    }

    /// An allocator with caching explicitly on or off. `max_allocation` 0 means no limit.
    pub fn with_caching(
        backend: Arc<dyn Backend>,
        device: DeviceHandle,
        max_allocation: u64,
        caching: bool,
    ) -> CachingAllocator {
        CachingAllocator {
            backend,
            device,
            max_allocation: if max_allocation == 0 { u64::MAX } else { max_allocation },
            caching,
            state: Mutex::new(State::default()),
            stream_blocks: AtomicU64::new(0),
        }
    }

    /// The size a request of `size` bytes occupies.
    pub fn rounded_size(&self, size: u64) -> u64 {
        if !self.caching {
            return size;
        }
        let rounding = if size <= SMALL_LIMIT {
            SMALL_ROUNDING
        } else {
            LARGE_ROUNDING
        };
        let rounded = size.div_ceil(rounding).saturating_mul(rounding);
        // A request the device can serve must not become one it cannot.
        if rounded > self.max_allocation && size <= self.max_allocation {
            size
        } else {
            rounded
        }
    }

    /// Allocates at least `size` (> 0) bytes for work queued on the stream with serial
    /// `stream` (any stream's for `None`), preferring memory freed while that stream's queued
    /// work still used it. Returns whether the block is such memory: work the stream has
    /// queued may still use it, so the host must not touch it before the stream is idle. When
    /// the backend is out of memory, the cache is emptied and the request tried once more.
    pub(crate) fn allocate_for(&self, size: u64, stream: Option<u64>) -> Result<(Block, bool)> {
        let rounded = self.rounded_size(size);
        if self.caching {
            let mut state = self.state.lock();
            let ordered = stream.and_then(|serial| {
                let lists = state.stream_free.get_mut(&serial)?;
                let handle = take_block(lists, rounded);
                if lists.is_empty() {
                    state.stream_free.remove(&serial);
                }
                handle
            });
            if ordered.is_some() {
                self.stream_blocks.fetch_sub(1, Ordering::Relaxed);
            }
            let reused = ordered
                .map(|handle| (handle, true))
                .or_else(|| take_block(&mut state.free, rounded).map(|handle| (handle, false)));
            if let Some((handle, ordered)) = reused {
                state.stats.cache_hits += 1;
                state.stats.cached_blocks -= 1;
                Self::count_allocated(&mut state.stats, rounded);
                return Ok((Block { handle, size: rounded }, ordered));
            }
        }
        let handle = match self.backend.buffer_allocate(self.device, rounded) {
            Ok(handle) => handle,
            Err(error) if error.kind() == ErrorKind::OutOfMemory && self.cached_bytes() > 0 => {
                tracing::debug!(size = rounded, "out of memory; emptying the cache and trying again");
                self.empty_cache();
                self.backend.buffer_allocate(self.device, rounded)?
            }
            Err(error) => return Err(error),
        };
        let mut state = self.state.lock();
        state.stats.backend_allocations += 1;
        state.stats.reserved += rounded;
        state.stats.peak_reserved = state.stats.peak_reserved.max(state.stats.reserved);
        Self::count_allocated(&mut state.stats, rounded);
        Ok((Block { handle, size: rounded }, false))
    }

    fn count_allocated(stats: &mut MemoryStats, size: u64) {
        stats.allocated += size;
        stats.active_blocks += 1;
        stats.peak_allocated = stats.peak_allocated.max(stats.allocated);
    }

    /// Returns a block. No queued work may use it any more.
    pub fn release(&self, block: Block) {
        let mut state = self.state.lock();
        state.stats.allocated -= block.size;
        state.stats.active_blocks -= 1;
        if self.caching {
            state.free.entry(block.size).or_default().push(block.handle);
            state.stats.cached_blocks += 1;
        } else {
            state.stats.reserved -= block.size;
            drop(state);
            self.backend.buffer_free(block.handle);
        }
    }

    /// Whether a block freed while queued work uses it can be kept for its stream.
    pub(crate) fn keeps_stream_ordered(&self) -> bool {
        self.caching
    }

    /// Returns a block that queued work on the stream with serial `stream`, and on no other,
    /// may still use: only that stream's allocations get it until [`stream_idle`](Self::stream_idle).
    pub(crate) fn release_to_stream(&self, stream: u64, block: Block) {
        let mut state = self.state.lock();
        state.stats.allocated -= block.size;
        state.stats.active_blocks -= 1;
        state.stats.cached_blocks += 1;
        state
            .stream_free
            .entry(stream)
            .or_default()
            .entry(block.size)
            .or_default()
            .push(block.handle);
        self.stream_blocks.fetch_add(1, Ordering::Relaxed);
    }

    /// The stream with serial `stream` is known idle (or destroyed): the blocks kept for it
    /// join the cache every allocation draws from.
    pub(crate) fn stream_idle(&self, stream: u64) {
        if self.stream_blocks.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut state = self.state.lock();
        let Some(lists) = state.stream_free.remove(&stream) else {
            return;
        };
        for (size, handles) in lists {
            self.stream_blocks.fetch_sub(handles.len() as u64, Ordering::Relaxed);
            state.free.entry(size).or_default().extend(handles);
        }
    }

    fn cached_bytes(&self) -> u64 {
        let state = self.state.lock();
        state.free.iter().map(|(size, blocks)| size * blocks.len() as u64).sum()
    }

    /// Frees every cached block back to the backend, except those queued work on a stream may
    /// still use: they follow once their stream is known idle (after its synchronize).
    pub fn empty_cache(&self) {
        let free = {
            let mut state = self.state.lock();
            let free = std::mem::take(&mut state.free);
            let bytes: u64 = free.iter().map(|(size, blocks)| size * blocks.len() as u64).sum();
            let blocks: u64 = free.values().map(|blocks| blocks.len() as u64).sum();
            state.stats.reserved -= bytes;
            state.stats.cached_blocks -= blocks;
            free
        };
        for handle in free.into_values().flatten() {
            self.backend.buffer_free(handle);
        }
    }

    /// Current statistics.
    pub fn stats(&self) -> MemoryStats {
        self.state.lock().stats
    }

    /// Resets the peaks to the current values.
    pub fn reset_peak_stats(&self) {
        let mut state = self.state.lock();
        state.stats.peak_allocated = state.stats.allocated;
        state.stats.peak_reserved = state.stats.reserved;
    }
}

impl Drop for CachingAllocator {
    fn drop(&mut self) {
        // The device is closing: every stream of it is gone, so no queued work remains.
        let streams: Vec<u64> = self.state.lock().stream_free.keys().copied().collect();
        for stream in streams {
            self.stream_idle(stream);
        }
        self.empty_cache();
    }
}
