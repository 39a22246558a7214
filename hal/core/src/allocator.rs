//! The caching allocator: every backend gets it for free, on top of its raw allocate/free.
//!
//! Device allocations are slow on real drivers (and synchronising on some), so freed blocks
//! are kept in a cache keyed by their rounded size and handed out again. Statistics follow
//! the names PyTorch users know: allocated, reserved, peak, `empty_cache`,
//! `reset_peak_stats`. Set `XHAL_CACHING_ALLOCATOR=0` to pass every request straight to the
//! backend (useful to find use-after-free bugs with a strict backend).

use crate::backend::{Backend, BufferHandle, DeviceHandle};
use crate::error::{ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
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
    stats: MemoryStats,
}

/// Caching allocator for one opened device.
pub struct CachingAllocator {
    backend: Arc<dyn Backend>,
    device: DeviceHandle,
    /// The device's largest allocation; rounding never asks for more than this.
    max_allocation: u64,
    caching: bool,
    state: Mutex<State>,
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

    /// Allocates at least `size` (> 0) bytes. When the backend is out of memory, the cache is
    /// emptied and the request tried once more.
    pub fn allocate(&self, size: u64) -> Result<Block> {
        let rounded = self.rounded_size(size);
        if self.caching {
            let mut state = self.state.lock();
            let reused = state.free.get_mut(&rounded).and_then(Vec::pop);
            if let Some(handle) = reused {
                if state.free.get(&rounded).is_some_and(Vec::is_empty) {
                    state.free.remove(&rounded);
                }
                state.stats.cache_hits += 1;
                state.stats.cached_blocks -= 1;
                Self::count_allocated(&mut state.stats, rounded);
                return Ok(Block { handle, size: rounded });
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
        Ok(Block { handle, size: rounded })
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

    fn cached_bytes(&self) -> u64 {
        let state = self.state.lock();
        state.free.iter().map(|(size, blocks)| size * blocks.len() as u64).sum()
    }

    /// Frees every cached block back to the backend.
    pub fn empty_cache(&self) {
        let free = {
            let mut state = self.state.lock();
            let free = std::mem::take(&mut state.free);
            let bytes: u64 = free.iter().map(|(size, blocks)| size * blocks.len() as u64).sum();
            state.stats.reserved -= bytes;
            state.stats.cached_blocks = 0;
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
        self.empty_cache();
    }
}
