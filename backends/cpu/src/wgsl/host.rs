//! Host-visible memory as a kernel sees it: buffer views and the scalar block.
//!
//! A buffer the kernel may write is locked exclusively for the launch and viewed as
//! `AtomicU32` words, so workgroups running on several threads can load, store and update
//! it at once without a data race: racy WGSL programs get unspecified values, never UB.
//! Every access is `Relaxed`; WGSL promises no ordering between workgroups. A buffer the
//! kernel only reads is locked shared and read as plain bytes: nobody writes it meanwhile.
//! Device memory is little-endian whatever the host, so words are converted with
//! `from_le`/`to_le` (no-ops on little-endian hosts).

use super::half::{f16_bits_to_f32, f32_to_f16_bits};
use super::program::{AtomicOp, HostKind};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// The bytes behind a view.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HostBytes<'a> {
    /// Read-only: exactly the view's bytes.
    Shared(&'a [u8]),
    /// Read-write: the words covering the view, starting at its first byte (views start on
    /// a 4-byte boundary).
    Exclusive(&'a [AtomicU32]),
}

/// A running launch's buffer views, on the stack for up to 8.
pub(crate) type HostViews<'a> = smallvec::SmallVec<[HostView<'a>; 8]>;

/// One buffer argument (or the scalar block) of a running launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostView<'a> {
    pub(crate) bytes: HostBytes<'a>,
    /// The view's size in bytes: every access must end within it.
    pub(crate) size: usize,
}

impl HostView<'_> {
    fn word(&self, byte: usize) -> Option<u32> {
        match self.bytes {
            HostBytes::Shared(bytes) => {
                let word = bytes.get(byte..byte.checked_add(4)?)?;
                Some(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            }
            HostBytes::Exclusive(words) => {
                if !byte.is_multiple_of(4) {
                    return None;
                }
                Some(u32::from_le(words.get(byte / 4)?.load(Relaxed)))
            }
        }
    }

    /// The word (or `f16`, widened to `f32` bits) at `byte`; `None` when it is not inside
    /// the view.
    pub(crate) fn load(&self, byte: usize, kind: HostKind) -> Option<u32> {
        match kind {
            HostKind::Word => {
                if byte.checked_add(4)? > self.size {
                    return None;
                }
                self.word(byte)
            }
            HostKind::F16 => {
                if byte.checked_add(2)? > self.size || !byte.is_multiple_of(2) {
                    return None;
                }
                let half = match self.bytes {
                    HostBytes::Shared(bytes) => {
                        let pair = bytes.get(byte..byte + 2)?;
                        u16::from_le_bytes([pair[0], pair[1]])
                    }
                    HostBytes::Exclusive(words) => {
                        let word = u32::from_le(words.get(byte / 4)?.load(Relaxed));
                        (word >> (8 * (byte % 4))) as u16
                    }
                };
                Some(f16_bits_to_f32(half).to_bits())
            }
        }
    }

    /// Stores at `byte`; `None` when it is not inside the view or the view is read-only.
    pub(crate) fn store(&self, byte: usize, kind: HostKind, value: u32) -> Option<()> {
        let HostBytes::Exclusive(words) = self.bytes else {
            return None;
        };
        match kind {
            HostKind::Word => {
                if byte.checked_add(4)? > self.size || !byte.is_multiple_of(4) {
                    return None;
                }
                words.get(byte / 4)?.store(value.to_le(), Relaxed);
            }
            HostKind::F16 => {
                if byte.checked_add(2)? > self.size || !byte.is_multiple_of(2) {
                    return None;
                }
                let half = u32::from(f32_to_f16_bits(f32::from_bits(value)));
                let shift = 8 * (byte % 4) as u32;
                let mask = 0xffffu32 << shift;
                // The other half of the word may belong to another invocation: replace
                // only ours, atomically.
                let word = words.get(byte / 4)?;
                let _ = word.fetch_update(Relaxed, Relaxed, |old| {
                    let old = u32::from_le(old);
                    Some(((old & !mask) | (half << shift)).to_le())
                });
            }
        }
        Some(())
    }

    /// An atomic read-modify-write of the word at `byte`: the old value, and for a
    /// compare-exchange whether it exchanged.
    pub(crate) fn atomic(&self, byte: usize, op: AtomicOp, value: u32, compare: u32) -> Option<(u32, bool)> {
        let HostBytes::Exclusive(words) = self.bytes else {
            return None;
        };
        if byte.checked_add(4)? > self.size || !byte.is_multiple_of(4) {
            return None;
        }
        let word = words.get(byte / 4)?;
        if cfg!(target_endian = "little") {
            let old = match op {
                AtomicOp::Add => word.fetch_add(value, Relaxed),
                AtomicOp::Sub => word.fetch_sub(value, Relaxed),
                AtomicOp::And => word.fetch_and(value, Relaxed),
                AtomicOp::Or => word.fetch_or(value, Relaxed),
                AtomicOp::Xor => word.fetch_xor(value, Relaxed),
                AtomicOp::MinU => word.fetch_min(value, Relaxed),
                AtomicOp::MaxU => word.fetch_max(value, Relaxed),
                AtomicOp::Exchange => word.swap(value, Relaxed),
                AtomicOp::CompareExchange => {
                    return Some(match word.compare_exchange(compare, value, Relaxed, Relaxed) {
                        Ok(old) => (old, true),
                        Err(old) => (old, false),
                    })
                }
                AtomicOp::MinI | AtomicOp::MaxI => update(word, op, value),
            };
            return Some((old, false));
        }
        if op == AtomicOp::CompareExchange {
            return Some(
                match word.compare_exchange(compare.to_le(), value.to_le(), Relaxed, Relaxed) {
                    Ok(old) => (u32::from_le(old), true),
                    Err(old) => (u32::from_le(old), false),
                },
            );
        }
        Some((update(word, op, value), false))
    }
}

/// A read-modify-write by compare-exchange, for operations without a native instruction
/// (signed min/max) and for big-endian hosts.
fn update(word: &AtomicU32, op: AtomicOp, value: u32) -> u32 {
    let result = word.fetch_update(Relaxed, Relaxed, |old| {
        Some(apply(op, u32::from_le(old), value, 0).0.to_le())
    });
    let old = match result {
        Ok(old) | Err(old) => old,
    };
    u32::from_le(old)
}

/// The new value of a word after `op`, and whether a compare-exchange exchanged: the
/// sequential semantics, shared with workgroup-memory atomics.
pub(crate) fn apply(op: AtomicOp, old: u32, value: u32, compare: u32) -> (u32, bool) {
    match op {
        AtomicOp::Add => (old.wrapping_add(value), false),
        AtomicOp::Sub => (old.wrapping_sub(value), false),
        AtomicOp::And => (old & value, false),
        AtomicOp::Or => (old | value, false),
        AtomicOp::Xor => (old ^ value, false),
        AtomicOp::MinI => ((old as i32).min(value as i32) as u32, false),
        AtomicOp::MaxI => ((old as i32).max(value as i32) as u32, false),
        AtomicOp::MinU => (old.min(value), false),
        AtomicOp::MaxU => (old.max(value), false),
        AtomicOp::Exchange => (value, false),
        AtomicOp::CompareExchange if old == compare => (value, true),
        AtomicOp::CompareExchange => (old, false),
    }
}
