//! Device buffers and the data operations on them.
//!
//! Device memory is little-endian, whatever the host: kernels read and write elements with
//! `from_le_bytes` / `to_le_bytes`, so a program sees the same bytes on every machine.

use crate::device::DeviceMemory;
use parking_lot::RwLock;
use std::ops::Range;
use std::sync::Arc;
use xhal_core::error::check_range;
use xhal_core::{Error, Result};

/// What a fresh allocation holds: this `u32`, little-endian, repeated (bytes `EF BE AD DE`),
/// truncated at the end of the buffer. Real devices hand out whatever was there before; the
/// reference backend hands out something recognisable, so a program that reads memory it
/// never wrote gets an obviously wrong answer instead of a lucky zero.
pub const POISON_PATTERN: u32 = 0xDEAD_BEEF;

/// One device allocation.
#[derive(Debug)]
pub(crate) struct Buffer {
    id: u64,
    size: u64,
    memory: Arc<DeviceMemory>,
    bytes: RwLock<Box<[u8]>>,
}

impl Buffer {
    /// Takes `size` bytes from the device's budget and from the host, poisoned.
    pub(crate) fn allocate(id: u64, memory: &Arc<DeviceMemory>, size: u64) -> Result<Buffer> {
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate a buffer of 0 bytes"));
        }
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_memory(format!("requested {size} bytes, more than this host can address")))?;
        memory.reserve(size)?;
        let mut bytes = Vec::new();
        if let Err(reason) = bytes.try_reserve_exact(length) {
            memory.release(size);
            return Err(Error::out_of_memory(format!(
                "requested {size} bytes, the host could not provide them: {reason}"
            )));
        }
        bytes.resize(length, 0);
        let poison = POISON_PATTERN.to_le_bytes();
        for chunk in bytes.chunks_mut(poison.len()) {
            chunk.copy_from_slice(&poison[..chunk.len()]);
        }
        Ok(Buffer {
            id,
            size,
            memory: Arc::clone(memory),
            bytes: RwLock::new(bytes.into_boxed_slice()),
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn device_index(&self) -> u32 {
        self.memory.index()
    }

    /// The bytes, for kernels (and for tests that need to hold a buffer still).
    pub(crate) fn bytes(&self) -> &RwLock<Box<[u8]>> {
        &self.bytes
    }

    /// Checks `offset..offset + size` against this buffer and converts it to host indices.
    /// `what` names the operation in the error ("write", "copy source"...).
    pub(crate) fn byte_range(&self, what: &str, offset: u64, size: u64) -> Result<Range<usize>> {
        check_range(&format!("{what} on buffer {:#x}", self.id), offset, size, self.size)?;
        // Both fit: the end is within `self.size`, which was a `usize` when allocated.
        let start = to_index(offset)?;
        let end = to_index(offset + size)?;
        Ok(start..end)
    }

    pub(crate) fn write_from_host(&self, range: Range<usize>, source: HostSource) {
        let mut bytes = self.bytes.write();
        // An empty write may come with a null pointer, which even a 0-byte `ptr::copy` forbids.
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
        if source.id == destination.id {
            let mut bytes = destination.bytes.write();
            if bytes.get(destination_range).is_some() && bytes.get(source_range.clone()).is_some() {
                bytes.copy_within(source_range, destination_start);
            }
            return;
        }
        // Every path that holds two buffer locks takes them in handle order, so two copies in
        // opposite directions on two streams cannot deadlock.
        let (from, mut to) = if source.id < destination.id {
            let from = source.bytes.read();
            (from, destination.bytes.write())
        } else {
            let to = destination.bytes.write();
            (source.bytes.read(), to)
        };
        if let (Some(from), Some(to)) = (from.get(source_range), to.get_mut(destination_range)) {
            to.copy_from_slice(from);
        }
    }

    pub(crate) fn fill(&self, range: Range<usize>, pattern: FillPattern) {
        let pattern = pattern.as_bytes();
        let mut bytes = self.bytes.write();
        let Some(target) = bytes.get_mut(range) else {
            return;
        };
        if target.is_empty() {
            return;
        }
        // One tiny copy per element would be slow: instead the first block of the target is
        // built by doubling, and the rest copied from it in block-sized pieces (from a block
        // still in cache). Every length here is a multiple of the pattern length, because
        // enqueue checked that the range is a whole number of patterns and BLOCK is a
        // multiple of every pattern length.
        const BLOCK: usize = 4096;
        let unit = pattern.len();
        target[..unit].copy_from_slice(pattern);
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
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.memory.release(self.size);
    }
}

fn to_index(value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("byte offset {value} does not fit this host")))
}

/// A 1-, 2- or 4-byte fill pattern, copied at enqueue time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FillPattern {
    bytes: [u8; 4],
    length: usize,
}

impl FillPattern {
    /// Accepts a 1-, 2- or 4-byte pattern.
    pub(crate) fn new(pattern: &[u8]) -> Result<FillPattern> {
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill pattern must be 1, 2 or 4 bytes long, got {} bytes",
                pattern.len()
            )));
        }
        let mut bytes = [0u8; 4];
        bytes[..pattern.len()].copy_from_slice(pattern);
        Ok(FillPattern {
            bytes,
            length: pattern.len(),
        })
    }

    pub(crate) fn len(self) -> u64 {
        self.length as u64
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
    /// `pointer` must satisfy `Backend::stream_write`'s contract: readable for the write's
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
    /// `pointer` must satisfy `Backend::stream_read`'s contract: writable for the read's
    /// size, valid and untouched by anyone else until the read completes.
    pub(crate) unsafe fn new(pointer: *mut u8) -> HostDestination {
        HostDestination(pointer)
    }
}

// SAFETY: the pointer is only dereferenced by the worker that executes the read, and the
// `stream_read` contract gives that worker exclusive use of the memory until then.
unsafe impl Send for HostDestination {}
