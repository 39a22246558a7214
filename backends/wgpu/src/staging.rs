//! Staging buffers kept for reuse between transfers.
//!
//! A large write through `queue.write_buffer`, or a read through a staging buffer made for it,
//! allocates host-visible memory per call. On some stacks that memory is fresh pages each time
//! (wgpu's GL backend also clears every new buffer), and a 64 MiB transfer then spends most of
//! its time faulting them in: xhal's 64 MiB write and read on llvmpipe's GL ran at a quarter of
//! the speed of a program that kept one staging buffer. A device keeps a few idle staging
//! buffers per direction instead, as such a program would.

use parking_lot::Mutex;

/// Idle buffers a pool keeps, at most.
const IDLE_BUFFERS: usize = 4;
/// Bytes of idle buffers a pool keeps, at most.
const IDLE_BYTES: u64 = 256 << 20;
/// The smallest staging buffer made, so that small transfers share a few buffers.
pub(crate) const MINIMUM_STAGING_BYTES: u64 = 64 << 10;

/// Idle staging buffers of one usage. Write buffers wait mapped, so a write copies into one
/// at once; read buffers wait unmapped, ready for the GPU to copy into.
#[derive(Default)]
pub(crate) struct StagingPool {
    idle: Mutex<Vec<wgpu::Buffer>>,
}

impl StagingPool {
    /// The smallest idle buffer of at least `size` bytes, taken out of the pool.
    pub(crate) fn take(&self, size: u64) -> Option<wgpu::Buffer> {
        let mut idle = self.idle.lock();
        let best = idle
            .iter()
            .enumerate()
            .filter(|(_, buffer)| buffer.size() >= size)
            .min_by_key(|(_, buffer)| buffer.size())
            .map(|(index, _)| index)?;
        Some(idle.swap_remove(best))
    }

    /// Returns a buffer to the pool; the largest idle buffers go when the pool is over budget.
    pub(crate) fn give_back(&self, buffer: wgpu::Buffer) {
        let mut idle = self.idle.lock();
        idle.push(buffer);
        while idle.len() > IDLE_BUFFERS || idle.iter().map(wgpu::Buffer::size).sum::<u64>() > IDLE_BYTES {
            let Some(largest) = idle
                .iter()
                .enumerate()
                .max_by_key(|(_, buffer)| buffer.size())
                .map(|(index, _)| index)
            else {
                break;
            };
            idle.swap_remove(largest);
        }
    }
}

/// The size to make a staging buffer for a transfer of `size` bytes: at least
/// [`MINIMUM_STAGING_BYTES`], and whole words, as mapped buffers must be.
pub(crate) fn staging_size(size: u64) -> u64 {
    size.max(MINIMUM_STAGING_BYTES)
        .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
}
