//! Executing one straight-line instruction for the active lanes of a workgroup.

use super::exec::{internal, Machine, Stop};
use super::host::{self, HostBytes};
use super::mask::{column, columns, first_out_of_bounds, Active};
use super::program::{AtomicSpace, Bound, HostKind, HostSpace, Instr, Operand, Reg};
use std::sync::atomic::Ordering::Relaxed;
use xhal_core::Error;

type Exec<T = ()> = Result<T, Stop>;

impl Machine<'_> {
    /// Runs one instruction: pure ones on every lane (inactive lanes compute harmless
    /// garbage, which is cheaper than masking), memory ones on the active lanes only.
    pub(super) fn exec(&mut self, instr: &Instr, active: Active<'_>) -> Exec {
        let lanes = self.lanes;
        match *instr {
            Instr::Un { op, dst, a } => {
                let (dst, [a]) = self.columns(dst, [a])?;
                op.run(dst, [a]);
            }
            Instr::Bin { op, dst, a, b } => {
                let (dst, [a, b]) = self.columns(dst, [a, b])?;
                op.run(dst, [a, b]);
            }
            Instr::Tern { op, dst, a, b, c } => {
                let (dst, [a, b, c]) = self.columns(dst, [a, b, c])?;
                op.run(dst, [a, b, c]);
            }
            Instr::Lanes { f, ref args, ref dst } => {
                for lane in 0..lanes {
                    let mut words = [0u32; 8];
                    for (word, arg) in words.iter_mut().zip(args.iter()) {
                        if let Some(reg) = arg {
                            *word = self.get(*reg, lane)?;
                        }
                    }
                    let results = f(words);
                    for (result, reg) in results.iter().zip(dst.iter()) {
                        if let Some(reg) = reg {
                            self.set(*reg, lane, *result)?;
                        }
                    }
                }
            }
            Instr::Copy { dst, src } => {
                let (dst, [src]) = self.columns(dst, [src])?;
                dst.copy_from_slice(src);
            }
            Instr::Fill { dst, value } => self.fill(dst, value)?,
            Instr::Set { dst, src } => self.store_lane(dst as usize, None, src, active)?,
            Instr::Pick {
                dst,
                index,
                ref choices,
                container,
                place,
                signed,
            } => {
                let count = choices.len() as u64;
                let indices = column(&self.regs, lanes, index)?;
                let mut limit = u32::MAX;
                if let Some(i) = first_out_of_bounds(indices, active, count) {
                    if self.launch.strict || count == 0 {
                        return Err(self.out_of_bounds(place, i, signed, container.describe(count)));
                    }
                    limit = (count - 1) as u32;
                }
                for lane in 0..lanes {
                    let i = self.get(index, lane)?.min(limit) as usize;
                    let value = match choices.get(i) {
                        Some(choice) => self.get(*choice, lane)?,
                        None => 0,
                    };
                    self.set(dst, lane, value)?;
                }
            }
            Instr::Index {
                dst,
                base,
                index,
                stride,
                bound,
                container,
                place,
                signed,
            } => {
                let length = match bound {
                    Bound::Fixed(length) => u64::from(length),
                    Bound::Runtime {
                        binding,
                        header,
                        stride,
                    } => self.runtime_length(binding, header, stride)?,
                };
                let indices = column(&self.regs, lanes, index)?;
                let mut limit = u32::MAX;
                if let Some(i) = first_out_of_bounds(indices, active, length) {
                    if self.launch.strict || length == 0 {
                        return Err(self.out_of_bounds(place, i, signed, container.describe(length)));
                    }
                    // Lenient mode: WGSL allows an out-of-bounds access to touch any element
                    // of the same array, so clamp (as robust-buffer-access drivers do).
                    limit = u32::try_from(length - 1).unwrap_or(u32::MAX);
                }
                match base {
                    Some(base) => {
                        let (dst, [index, base]) = self.columns(dst, [index, base])?;
                        for ((d, i), b) in dst.iter_mut().zip(index).zip(base) {
                            *d = b.wrapping_add((*i).min(limit).wrapping_mul(stride));
                        }
                    }
                    None => {
                        let (dst, [index]) = self.columns(dst, [index])?;
                        for (d, i) in dst.iter_mut().zip(index) {
                            *d = (*i).min(limit).wrapping_mul(stride);
                        }
                    }
                }
            }
            Instr::ArrayLength {
                dst,
                binding,
                header,
                stride,
            } => {
                let length = self.runtime_length(binding, header, stride)?;
                self.fill(dst, u32::try_from(length).unwrap_or(u32::MAX))?;
            }
            Instr::LoadLane { dst, column, offset } => match offset {
                None => {
                    let (dst, [src]) = self.columns(dst, [column])?;
                    dst.copy_from_slice(src);
                }
                Some(offset) => {
                    let regs = &mut self.regs;
                    let broken = || internal("a per-invocation address out of range");
                    active.each(|lane| {
                        let at = |reg: usize| reg * lanes + lane;
                        let source = column as usize + *regs.get(at(offset as usize)).ok_or_else(broken)? as usize;
                        let value = *regs.get(at(source)).ok_or_else(broken)?;
                        *regs.get_mut(at(dst as usize)).ok_or_else(broken)? = value;
                        Ok::<(), Error>(())
                    })?;
                }
            },
            Instr::StoreLane { column, offset, src } => {
                self.store_lane(column as usize, offset, src, active)?;
            }
            Instr::LoadShared { dst, word, offset } => match offset {
                None => {
                    let value = *self
                        .shared
                        .get(word as usize)
                        .ok_or_else(|| internal("a workgroup address out of range"))?;
                    self.fill(dst, value)?;
                }
                Some(offset) => {
                    let shared = self.shared.as_slice();
                    let (dst, [offsets]) = columns(&mut self.regs, lanes, dst, [offset])?;
                    if active.full && fits(word as usize, offsets, shared.len()) {
                        // Every lane's address is inside workgroup memory (checked once).
                        let window = shared.get(word as usize..).unwrap_or_default();
                        let mut blocks = dst.chunks_exact_mut(8);
                        let mut sources = offsets.chunks_exact(8);
                        for (d, o) in (&mut blocks).zip(&mut sources) {
                            load_block(d, o, window);
                        }
                        for (d, o) in blocks.into_remainder().iter_mut().zip(sources.remainder()) {
                            *d = window.get(*o as usize).copied().unwrap_or(0);
                        }
                        return Ok(());
                    }
                    active.each(|lane| {
                        let address = word as usize + offsets[lane] as usize;
                        dst[lane] = *shared
                            .get(address)
                            .ok_or_else(|| internal("a workgroup address out of range"))?;
                        Ok::<(), Error>(())
                    })?;
                }
            },
            Instr::StoreShared { word, offset, src } => {
                let regs = &self.regs;
                let shared = self.shared.as_mut_slice();
                let offsets = match offset {
                    Some(reg) => Some(column(regs, lanes, reg)?),
                    None => None,
                };
                let values = match src {
                    Operand::Reg(reg) => Some(column(regs, lanes, reg)?),
                    Operand::Imm(_) => None,
                };
                if let (true, Some(offsets), Some(values)) = (active.full, offsets, values) {
                    if fits(word as usize, offsets, shared.len()) {
                        // Every lane's address is inside workgroup memory (checked once).
                        let base = word as usize;
                        for (o, v) in offsets.iter().zip(values) {
                            if let Some(slot) = shared.get_mut(base + *o as usize) {
                                *slot = *v;
                            }
                        }
                        return Ok(());
                    }
                }
                active.each(|lane| {
                    let address = word as usize + offsets.map_or(0, |o| o[lane] as usize);
                    let value = match (values, src) {
                        (Some(values), _) => values[lane],
                        (None, Operand::Imm(value)) => value,
                        (None, Operand::Reg(_)) => 0,
                    };
                    *shared
                        .get_mut(address)
                        .ok_or_else(|| internal("a workgroup address out of range"))? = value;
                    Ok::<(), Error>(())
                })?;
            }
            Instr::LoadHost {
                dst,
                space,
                byte,
                offset,
                kind,
            } => {
                let view = *self.view(space)?;
                let Some(offset) = offset else {
                    let value = view
                        .load(byte as usize, kind)
                        .ok_or_else(|| self.host_fault(space, byte as usize))?;
                    self.fill(dst, value)?;
                    return Ok(());
                };
                let (dst, [offsets]) = columns(&mut self.regs, lanes, dst, [offset])?;
                let base = byte as usize;
                if active.full && kind == HostKind::Word {
                    if let Some(end) = span(base, offsets, view.size) {
                        // Every lane's word is inside the view (checked once, above):
                        // straight loops without per-lane fault paths.
                        let run = contiguous(base, offsets);
                        match view.bytes {
                            HostBytes::Exclusive(words) if end <= words.len() * 4 => {
                                if let Some(run) = run.and_then(|first| words.get(first / 4..)) {
                                    // Consecutive words, one per lane: no per-lane address.
                                    for (d, w) in dst.iter_mut().zip(run) {
                                        *d = u32::from_le(w.load(Relaxed));
                                    }
                                    return Ok(());
                                }
                                for (d, o) in dst.iter_mut().zip(offsets) {
                                    let address = base + *o as usize;
                                    *d = words.get(address / 4).map_or(0, |w| u32::from_le(w.load(Relaxed)));
                                }
                                return Ok(());
                            }
                            HostBytes::Shared(bytes) if end <= bytes.len() => {
                                if let Some(run) = run.and_then(|first| bytes.get(first..end)) {
                                    // Consecutive words, one per lane: a vectorisable copy.
                                    for (d, w) in dst.iter_mut().zip(run.chunks_exact(4)) {
                                        *d = match *w {
                                            [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]),
                                            _ => 0,
                                        };
                                    }
                                    return Ok(());
                                }
                                for (d, o) in dst.iter_mut().zip(offsets) {
                                    let address = base + *o as usize;
                                    *d = match bytes.get(address..address + 4) {
                                        Some(&[b0, b1, b2, b3]) => u32::from_le_bytes([b0, b1, b2, b3]),
                                        _ => 0,
                                    };
                                }
                                return Ok(());
                            }
                            _ => {}
                        }
                    }
                }
                let result = match (view.bytes, kind) {
                    // The common case, without per-lane dispatch on the view's kind.
                    (HostBytes::Exclusive(words), HostKind::Word) => active.each(|lane| {
                        let address = base.wrapping_add(offsets[lane] as usize);
                        match words.get(address / 4) {
                            Some(word) if address.is_multiple_of(4) && address + 4 <= view.size => {
                                dst[lane] = u32::from_le(word.load(Relaxed));
                                Ok(())
                            }
                            _ => Err(address),
                        }
                    }),
                    (HostBytes::Shared(bytes), HostKind::Word) => active.each(|lane| {
                        let address = base.wrapping_add(offsets[lane] as usize);
                        match bytes.get(address..address.wrapping_add(4)) {
                            Some(&[b0, b1, b2, b3]) => {
                                dst[lane] = u32::from_le_bytes([b0, b1, b2, b3]);
                                Ok(())
                            }
                            _ => Err(address),
                        }
                    }),
                    _ => active.each(|lane| {
                        let address = base.wrapping_add(offsets[lane] as usize);
                        dst[lane] = view.load(address, kind).ok_or(address)?;
                        Ok(())
                    }),
                };
                result.map_err(|address| self.host_fault(space, address))?;
            }
            Instr::StoreHost {
                space,
                byte,
                offset,
                kind,
                src,
            } => {
                let view = *self.view(space)?;
                let regs = &self.regs;
                let offsets = match offset {
                    Some(reg) => Some(column(regs, lanes, reg)?),
                    None => None,
                };
                let values = match src {
                    Operand::Reg(reg) => Some(column(regs, lanes, reg)?),
                    Operand::Imm(_) => None,
                };
                let base = byte as usize;
                if let (HostBytes::Exclusive(words), HostKind::Word, Some(offsets), Some(values)) =
                    (view.bytes, kind, offsets, values)
                {
                    if active.full {
                        if let Some(end) = span(base, offsets, view.size) {
                            if end <= words.len() * 4 {
                                // Every lane's word is inside the view (checked once, above).
                                if let Some(run) = contiguous(base, offsets).and_then(|first| words.get(first / 4..)) {
                                    // Consecutive words, one per lane: no per-lane address.
                                    for (w, v) in run.iter().zip(values) {
                                        w.store(v.to_le(), Relaxed);
                                    }
                                    return Ok(());
                                }
                                for (o, v) in offsets.iter().zip(values) {
                                    if let Some(word) = words.get((base + *o as usize) / 4) {
                                        word.store(v.to_le(), Relaxed);
                                    }
                                }
                                return Ok(());
                            }
                        }
                    }
                    // The common case, without per-lane dispatch.
                    let result = active.each(|lane| {
                        let address = base.wrapping_add(offsets[lane] as usize);
                        match words.get(address / 4) {
                            Some(word) if address.is_multiple_of(4) && address + 4 <= view.size => {
                                word.store(values[lane].to_le(), Relaxed);
                                Ok(())
                            }
                            _ => Err(address),
                        }
                    });
                    return result.map_err(|address| self.host_fault(space, address));
                }
                let result = active.each(|lane| {
                    let address = base.wrapping_add(offsets.map_or(0, |o| o[lane] as usize));
                    let value = match (values, src) {
                        (Some(values), _) => values[lane],
                        (None, Operand::Imm(value)) => value,
                        (None, Operand::Reg(_)) => 0,
                    };
                    view.store(address, kind, value).ok_or(address)
                });
                result.map_err(|address| self.host_fault(space, address))?;
            }
            Instr::Atomic {
                space,
                address,
                offset,
                op,
                value,
                compare,
                old,
                exchanged,
            } => {
                let result = active.each(|lane| {
                    let at = (address as usize).wrapping_add(self.offset(offset, lane)?);
                    let operand = self.get(value, lane)?;
                    let expected = match compare {
                        Some(reg) => self.get(reg, lane)?,
                        None => 0,
                    };
                    let (previous, swapped) = match space {
                        AtomicSpace::Workgroup => {
                            let slot = self
                                .shared
                                .get_mut(at)
                                .ok_or_else(|| internal("a workgroup address out of range"))?;
                            let previous = *slot;
                            let (new, swapped) = host::apply(op, previous, operand, expected);
                            *slot = new;
                            (previous, swapped)
                        }
                        AtomicSpace::Host(binding) => {
                            let space = HostSpace::Binding(binding);
                            let view = *self.view(space)?;
                            match view.atomic(at, op, operand, expected) {
                                Some(result) => result,
                                None => return Err(self.host_fault(space, at)),
                            }
                        }
                    };
                    if let Some(reg) = old {
                        self.set(reg, lane, previous)?;
                    }
                    if let Some(reg) = exchanged {
                        self.set(reg, lane, u32::from(swapped))?;
                    }
                    Ok(())
                });
                result?;
            }
        }
        Ok(())
    }

    /// Writes per-invocation memory (`column + offset[lane]`) on the active lanes.
    fn store_lane(&mut self, column: usize, offset: Option<Reg>, src: Operand, active: Active<'_>) -> Exec {
        let lanes = self.lanes;
        if let (None, true) = (offset, active.full) {
            // Every lane, one column: a copy or a fill.
            match src {
                Operand::Reg(reg) => {
                    let start = reg as usize * lanes;
                    if start + lanes > self.regs.len() || (column + 1) * lanes > self.regs.len() {
                        return Err(internal("a register out of range").into());
                    }
                    self.regs.copy_within(start..start + lanes, column * lanes);
                }
                Operand::Imm(value) => self.fill(column as Reg, value)?,
            }
            return Ok(());
        }
        let regs = &mut self.regs;
        let broken = || internal("a per-invocation address out of range");
        active.each(|lane| {
            let at = |reg: usize| reg * lanes + lane;
            let target = match offset {
                Some(offset) => column + *regs.get(at(offset as usize)).ok_or_else(broken)? as usize,
                None => column,
            };
            let value = match src {
                Operand::Reg(reg) => *regs.get(at(reg as usize)).ok_or_else(broken)?,
                Operand::Imm(value) => value,
            };
            *regs.get_mut(at(target)).ok_or_else(broken)? = value;
            Ok::<(), Error>(())
        })?;
        Ok(())
    }

    fn runtime_length(&self, binding: u32, header: u32, stride: u32) -> Result<u64, Error> {
        let view = self.view(HostSpace::Binding(binding))?;
        Ok((view.size as u64).saturating_sub(u64::from(header)) / u64::from(stride.max(1)))
    }

    fn out_of_bounds(&self, place: u32, index: u32, signed: bool, container: String) -> Stop {
        let place = self.program.places.get(place as usize).map_or("?", String::as_str);
        let index = if signed {
            (index as i32).to_string()
        } else {
            index.to_string()
        };
        Stop::Fault(Error::kernel_fault(format!(
            "kernel `{}`: {place}: index {index} is out of bounds ({container})",
            self.program.name
        )))
    }

    /// An access outside a view that the index checks did not catch: only possible for a
    /// view that is too small for the fixed part of its type, which enqueue refuses.
    fn host_fault(&self, space: HostSpace, byte: usize) -> Stop {
        let (what, size) = match space {
            HostSpace::Binding(binding) => (
                format!(
                    "binding {binding} (`{}`)",
                    self.program
                        .bindings
                        .get(binding as usize)
                        .map_or("?", |info| info.name.as_str())
                ),
                self.launch.views.get(binding as usize).map_or(0, |view| view.size),
            ),
            HostSpace::Immediate => ("the scalar block".to_string(), self.launch.immediate.size),
        };
        Stop::Fault(Error::kernel_fault(format!(
            "kernel `{}`: {what}: byte offset {byte} is outside the {size}-byte view",
            self.program.name
        )))
    }
}

/// For word accesses at `base + offsets[lane]` on every lane: when every address is 4-byte
/// aligned and its word ends within `size` bytes, the end of the furthest word (so one
/// check covers all lanes); `None` when some lane may not be (the per-lane path decides).
/// Branch-free over the lanes, so it vectorises.
#[inline]
fn span(base: usize, offsets: &[u32], size: usize) -> Option<usize> {
    let (max, bits) = offsets
        .iter()
        .fold((0u32, 0u32), |(max, bits), o| (max.max(*o), bits | *o));
    let end = base.checked_add(max as usize)?.checked_add(4)?;
    ((base | bits as usize) & 3 == 0 && end <= size).then_some(end)
}

/// Whether `base + offsets[lane]` is below `len` on every lane (branch-free, vectorises).
#[inline]
fn fits(base: usize, offsets: &[u32], len: usize) -> bool {
    let max = offsets.iter().copied().fold(0u32, u32::max);
    base.checked_add(max as usize).is_some_and(|end| end < len)
}

/// When lane `l` addresses byte `base + offsets[0] + 4 * l` (consecutive words, the
/// commonest pattern), that first address. Branch-free over the lanes, so it vectorises.
/// Only meaningful after [`span`] accepted the same offsets: the lanes' words then lie, in
/// order, from the first address to the span's end.
#[inline]
fn contiguous(base: usize, offsets: &[u32]) -> Option<usize> {
    let first = *offsets.first()?;
    let mut differ = 0u32;
    for (lane, offset) in offsets.iter().enumerate() {
        differ |= offset ^ first.wrapping_add((lane as u32).wrapping_mul(4));
    }
    // No wrap-around past `u32::MAX`, so the addresses increase with the lane.
    let last = u64::from(first) + 4 * (offsets.len() as u64 - 1);
    (differ == 0 && last <= u64::from(u32::MAX)).then(|| base + first as usize)
}

/// Eight lanes of a workgroup-memory load whose addresses `offsets` are all inside
/// `window`: one word for all (a broadcast), eight consecutive words (a copy), or a gather.
#[inline(always)]
fn load_block(dst: &mut [u32], offsets: &[u32], window: &[u32]) {
    let first = offsets.first().copied().unwrap_or(0);
    let (mut same, mut consecutive) = (0u32, 0u32);
    for (lane, offset) in offsets.iter().enumerate() {
        same |= offset ^ first;
        consecutive |= offset ^ first.wrapping_add(lane as u32);
    }
    let start = first as usize;
    if same == 0 {
        dst.fill(window.get(start).copied().unwrap_or(0));
    } else if let (0, Some(source)) = (consecutive, window.get(start..start + dst.len())) {
        dst.copy_from_slice(source);
    } else {
        for (d, o) in dst.iter_mut().zip(offsets) {
            *d = window.get(*o as usize).copied().unwrap_or(0);
        }
    }
}
