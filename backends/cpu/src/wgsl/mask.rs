//! Lane sets and register columns.

use super::compile::MAX_LANES;
use super::exec::internal;
use super::program::Reg;
use std::cell::Cell;
use xhal_backend::Error;

const MASK_WORDS: usize = MAX_LANES / 64;

/// A set of lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mask(pub(super) [u64; MASK_WORDS]);

impl Mask {
    pub(super) const EMPTY: Mask = Mask([0; MASK_WORDS]);

    pub(super) fn full(lanes: usize) -> Mask {
        let mut mask = Mask::EMPTY;
        for (w, word) in mask.0.iter_mut().enumerate() {
            let start = w * 64;
            if lanes >= start + 64 {
                *word = u64::MAX;
            } else if lanes > start {
                *word = (1u64 << (lanes - start)) - 1;
            }
        }
        mask
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|word| *word == 0)
    }

    #[inline]
    pub(super) fn or(&self, other: &Mask) -> Mask {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        out
    }

    /// Whether both masks hold the same lanes (without a call to `memcmp`, which is what
    /// `==` on the words becomes).
    #[inline]
    pub(super) fn same(&self, other: &Mask) -> bool {
        self.0.iter().zip(other.0).fold(0, |differ, (a, b)| differ | (a ^ b)) == 0
    }

    #[inline]
    pub(super) fn and_not(&self, other: &Mask) -> Mask {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a &= !b;
        }
        out
    }
}

/// The destination column and `N` source columns of a register file, which must all differ
/// from it (the compiler never reuses a register, so an overlap is a bug, reported as one).
#[inline(always)]
pub(super) fn columns<const N: usize>(
    regs: &mut [u32],
    lanes: usize,
    dst: Reg,
    sources: [Reg; N],
) -> Result<(&mut [u32], [&[u32]; N]), Error> {
    let d = dst as usize;
    let broken = || internal("an instruction's destination overlaps its operands");
    let (low, rest) = regs.split_at_mut_checked(d * lanes).ok_or_else(broken)?;
    let (target, high) = rest.split_at_mut_checked(lanes).ok_or_else(broken)?;
    let (low, high): (&[u32], &[u32]) = (low, high);
    let mut out: [&[u32]; N] = [&[]; N];
    for (slot, source) in out.iter_mut().zip(sources) {
        let s = source as usize;
        *slot = if s < d {
            low.get(s * lanes..(s + 1) * lanes)
        } else if s > d {
            high.get((s - d - 1) * lanes..(s - d) * lanes)
        } else {
            None
        }
        .ok_or_else(broken)?;
    }
    Ok((target, out))
}

/// Columns of a register file, for reading only.
#[inline(always)]
pub(super) fn column_refs<const N: usize>(regs: &[u32], lanes: usize, sources: [Reg; N]) -> Result<[&[u32]; N], Error> {
    let mut out: [&[u32]; N] = [&[]; N];
    for (slot, reg) in out.iter_mut().zip(sources) {
        *slot = column(regs, lanes, reg)?;
    }
    Ok(out)
}

/// Columns of a register file seen as cells, which may be the same column.
#[inline(always)]
pub(super) fn cell_columns<const N: usize>(
    regs: &[Cell<u32>],
    lanes: usize,
    sources: [Reg; N],
) -> Result<[&[Cell<u32>]; N], Error> {
    let mut out: [&[Cell<u32>]; N] = [&[]; N];
    for (slot, reg) in out.iter_mut().zip(sources) {
        let start = reg as usize * lanes;
        *slot = regs
            .get(start..start + lanes)
            .ok_or_else(|| internal("a register out of range"))?;
    }
    Ok(out)
}

/// Column `reg` of a register file.
#[inline(always)]
pub(super) fn column(regs: &[u32], lanes: usize, reg: Reg) -> Result<&[u32], Error> {
    let start = reg as usize * lanes;
    regs.get(start..start + lanes)
        .ok_or_else(|| internal("a register out of range"))
}

/// The lanes one instruction acts on: all of them, or those of a mask.
#[derive(Clone, Copy)]
pub(super) struct Active<'m> {
    pub(super) mask: &'m Mask,
    pub(super) lanes: usize,
    pub(super) full: bool,
}

impl Active<'_> {
    /// Calls `f` for each active lane in increasing order, stopping at the first error.
    /// The full case is a plain counted loop, the common one.
    #[inline(always)]
    pub(super) fn each<E>(&self, mut f: impl FnMut(usize) -> Result<(), E>) -> Result<(), E> {
        if self.full {
            for lane in 0..self.lanes {
                f(lane)?;
            }
            return Ok(());
        }
        for (w, word) in self.mask.0.iter().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                f(w * 64 + bits.trailing_zeros() as usize)?;
                bits &= bits - 1;
            }
        }
        Ok(())
    }
}

/// The first active lane's index that is not below `length`.
#[inline(always)]
pub(super) fn first_out_of_bounds(indices: &[u32], active: Active<'_>, length: u64) -> Option<u32> {
    // Every index is at most the OR of all of them, which one cheap vectorised pass gives:
    // below `length`, every lane (active or not) is in bounds. Unsigned maxima cost several
    // instructions per vector on baseline x86-64, so they only run when this cannot decide.
    let bits = indices.iter().fold(0u32, |bits, i| bits | *i);
    if u64::from(bits) < length {
        return None;
    }
    if active.full {
        let max = indices.iter().copied().fold(0u32, u32::max);
        if u64::from(max) < length {
            return None;
        }
        return indices.iter().copied().find(|i| u64::from(*i) >= length);
    }
    let mut found = None;
    let _ = active.each(|lane| match indices.get(lane) {
        Some(i) if u64::from(*i) >= length => {
            found = Some(*i);
            Err(())
        }
        _ => Ok(()),
    });
    found
}
