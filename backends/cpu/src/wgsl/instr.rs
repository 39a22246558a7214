//! Executing one straight-line instruction for the active lanes of a workgroup.

use super::exec::{internal, Machine, Stop};
use super::host::{self, HostBytes};
use super::mask::{cell_columns, column, column_refs, columns, first_out_of_bounds, Active};
use super::program::{At, AtomicSpace, Bound, HostKind, HostSpace, Instr, Operand, Reg};
use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use xhal_backend::Error;

type Exec<T = ()> = Result<T, Stop>;

impl Machine<'_> {
    /// Runs one instruction: pure ones on every lane (inactive lanes compute harmless
    /// garbage, which is cheaper than masking), memory ones on the active lanes only (see
    /// [`Instr`] for the one exception).
    pub(super) fn exec(&mut self, instr: &Instr, active: Active<'_>) -> Exec {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU has AVX2 and FMA (see `Machine::new`).
            return unsafe { self.exec_avx2(instr, active) };
        }
        self.exec_baseline(instr, active)
    }

    /// The instruction loops compiled for AVX2: twice the lanes per vector of baseline
    /// x86-64, and single instructions for 32-bit multiplication, unsigned minimum and
    /// maximum, which baseline code spells with several.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn exec_avx2(&mut self, instr: &Instr, active: Active<'_>) -> Exec {
        self.exec_any(instr, active)
    }

    fn exec_baseline(&mut self, instr: &Instr, active: Active<'_>) -> Exec {
        self.exec_any(instr, active)
    }

    #[inline(always)]
    fn exec_any(&mut self, instr: &Instr, active: Active<'_>) -> Exec {
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
            Instr::UnSet { op, column, a } => {
                if active.full {
                    let cells = Cell::from_mut(self.regs.as_mut_slice()).as_slice_of_cells();
                    let [column, a] = cell_columns(cells, lanes, [column, a])?;
                    op.run_in_place(column, [a]);
                } else {
                    let [a] = column_refs(&self.regs, lanes, [a])?;
                    op.run(&mut self.scratch, [a]);
                    self.set_from_scratch(column, active)?;
                }
            }
            Instr::BinSet { op, column, a, b } => {
                if active.full {
                    let cells = Cell::from_mut(self.regs.as_mut_slice()).as_slice_of_cells();
                    let [column, a, b] = cell_columns(cells, lanes, [column, a, b])?;
                    op.run_in_place(column, [a, b]);
                } else {
                    let [a, b] = column_refs(&self.regs, lanes, [a, b])?;
                    op.run(&mut self.scratch, [a, b]);
                    self.set_from_scratch(column, active)?;
                }
            }
            Instr::TernSet { op, column, a, b, c } => {
                if active.full {
                    let cells = Cell::from_mut(self.regs.as_mut_slice()).as_slice_of_cells();
                    let [column, a, b, c] = cell_columns(cells, lanes, [column, a, b, c])?;
                    op.run_in_place(column, [a, b, c]);
                } else {
                    let [a, b, c] = column_refs(&self.regs, lanes, [a, b, c])?;
                    op.run(&mut self.scratch, [a, b, c]);
                    self.set_from_scratch(column, active)?;
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
            Instr::Index { dst, at } => {
                let limit = self.check_index(&at, active)?;
                let At {
                    base, index, stride, ..
                } = at;
                // Without clamping, a power-of-two stride is a shift: cheaper per vector
                // than the minimum and multiplication on baseline x86-64.
                let shift = match (limit, stride.is_power_of_two()) {
                    (u32::MAX, true) => Some(stride.trailing_zeros()),
                    _ => None,
                };
                match (base, shift) {
                    (Some(base), Some(shift)) => {
                        let (dst, [index, base]) = self.columns(dst, [index, base])?;
                        for ((d, i), b) in dst.iter_mut().zip(index).zip(base) {
                            *d = b.wrapping_add(*i << shift);
                        }
                    }
                    (None, Some(shift)) => {
                        let (dst, [index]) = self.columns(dst, [index])?;
                        for (d, i) in dst.iter_mut().zip(index) {
                            *d = *i << shift;
                        }
                    }
                    (Some(base), None) => {
                        let (dst, [index, base]) = self.columns(dst, [index, base])?;
                        for ((d, i), b) in dst.iter_mut().zip(index).zip(base) {
                            *d = b.wrapping_add((*i).min(limit).wrapping_mul(stride));
                        }
                    }
                    (None, None) => {
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
                    let window = shared.get(word as usize..).unwrap_or_default();
                    let (dst, [offsets]) = columns(&mut self.regs, lanes, dst, [offset])?;
                    // With every lane's address inside workgroup memory, inactive lanes may
                    // load too: the destination is this instruction's own register.
                    if load_shared(dst, offsets, window) {
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
            Instr::LoadSharedAt { dst, word, at } => {
                if let (true, None, 1, Bound::Fixed(length)) = (active.full, at.base, at.stride, at.bound) {
                    // The common case (an index into a workgroup array of words, every lane
                    // active): the index is the offset, and one pass both checks the bound
                    // and finds the pattern.
                    let window = self.shared.get(word as usize..).unwrap_or_default();
                    let (dst, [indices]) = columns(&mut self.regs, lanes, dst, [at.index])?;
                    let (bits, pattern) = scan(indices, 1);
                    if bits < length && length as usize <= window.len() {
                        load_pattern(dst, indices, window, pattern);
                        return Ok(());
                    }
                }
                let limit = self.check_index(&at, active)?;
                let At {
                    base, index, stride, ..
                } = at;
                let shared = self.shared.as_slice();
                let window = shared.get(word as usize..).unwrap_or_default();
                let offsets = self.scratch.as_mut_slice();
                let (dst, [indices, bases]) = match base {
                    Some(base) => columns(&mut self.regs, lanes, dst, [index, base])?,
                    None => {
                        let (dst, [indices]) = columns(&mut self.regs, lanes, dst, [index])?;
                        (dst, [indices, &[][..]])
                    }
                };
                element_offsets(offsets, indices, base.map(|_| bases), limit, stride);
                if load_shared(dst, offsets, window) {
                    return Ok(());
                }
                let broken = || internal("a workgroup address out of range");
                active.each(|lane| {
                    let offset = *offsets.get(lane).ok_or_else(broken)?;
                    *dst.get_mut(lane).ok_or_else(broken)? = *window.get(offset as usize).ok_or_else(broken)?;
                    Ok::<(), Error>(())
                })?;
            }
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
                    let window = shared.get_mut(word as usize..).unwrap_or_default();
                    if within(offsets, window.len()) {
                        // Every lane's address is inside workgroup memory (checked once).
                        if scan(offsets, 1).1 == Pattern::Consecutive {
                            let blocks = values.as_chunks::<8>().0.iter().zip(offsets.as_chunks::<8>().0);
                            for (v, o) in blocks {
                                if let Some(run) = window.get_mut(o[0] as usize..o[0] as usize + 8) {
                                    run.copy_from_slice(v);
                                }
                            }
                        } else {
                            for (o, v) in offsets.iter().zip(values) {
                                if let Some(slot) = window.get_mut(*o as usize) {
                                    *slot = *v;
                                }
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
                                if scan(offsets, 4).1 == Pattern::Consecutive {
                                    // Runs of eight consecutive words (rows of a 2D workgroup).
                                    let blocks = dst.as_chunks_mut::<8>().0.iter_mut().zip(offsets.as_chunks::<8>().0);
                                    for (d, o) in blocks {
                                        let first = (base + o[0] as usize) / 4;
                                        if let Some(run) = words.get(first..first + 8) {
                                            for (d, w) in d.iter_mut().zip(run) {
                                                *d = u32::from_le(w.load(Relaxed));
                                            }
                                        }
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
                                if scan(offsets, 4).1 == Pattern::Consecutive {
                                    // Runs of eight consecutive words (rows of a 2D workgroup).
                                    let blocks = dst.as_chunks_mut::<8>().0.iter_mut().zip(offsets.as_chunks::<8>().0);
                                    for (d, o) in blocks {
                                        let first = base + o[0] as usize;
                                        if let Some(run) = bytes.get(first..first + 32) {
                                            for (d, w) in d.iter_mut().zip(run.as_chunks::<4>().0) {
                                                *d = u32::from_le_bytes(*w);
                                            }
                                        }
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
    #[inline(always)]
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

    /// Checks `at`'s index on the active lanes; the largest index to use (lenient mode
    /// clamps out-of-bounds ones, strict mode faults).
    #[inline(always)]
    fn check_index(&self, at: &At, active: Active<'_>) -> Exec<u32> {
        let length = match at.bound {
            Bound::Fixed(length) => u64::from(length),
            Bound::Runtime {
                binding,
                header,
                stride,
            } => self.runtime_length(binding, header, stride)?,
        };
        let indices = column(&self.regs, self.lanes, at.index)?;
        let Some(i) = first_out_of_bounds(indices, active, length) else {
            return Ok(u32::MAX);
        };
        if self.launch.strict || length == 0 {
            return Err(self.out_of_bounds(at.place, i, at.signed, at.container.describe(length)));
        }
        // Lenient mode: WGSL allows an out-of-bounds access to touch any element of the
        // same array, so clamp (as robust-buffer-access drivers do).
        Ok(u32::try_from(length - 1).unwrap_or(u32::MAX))
    }

    /// Copies the scratch column into register `column` on the active lanes.
    fn set_from_scratch(&mut self, column: Reg, active: Active<'_>) -> Exec {
        let lanes = self.lanes;
        let start = column as usize * lanes;
        let target = self
            .regs
            .get_mut(start..start + lanes)
            .ok_or_else(|| internal("a register out of range"))?;
        let scratch = &self.scratch;
        active.each(|lane| {
            if let (Some(t), Some(s)) = (target.get_mut(lane), scratch.get(lane)) {
                *t = *s;
            }
            Ok::<(), Stop>(())
        })
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
#[inline(always)]
fn span(base: usize, offsets: &[u32], size: usize) -> Option<usize> {
    let bits = offsets.iter().fold(0u32, |bits, o| bits | *o);
    if (base | bits as usize) & 3 != 0 {
        return None;
    }
    // Every offset is at most the OR of all of them: usually enough, and cheaper than a max.
    if let Some(end) = base.checked_add(bits as usize + 4).filter(|end| *end <= size) {
        return Some(end);
    }
    let max = offsets.iter().copied().fold(0u32, u32::max);
    let end = base.checked_add(max as usize)?.checked_add(4)?;
    (end <= size).then_some(end)
}

/// When lane `l` addresses byte `base + offsets[0] + 4 * l` (consecutive words, the
/// commonest pattern), that first address. Branch-free over the lanes, so it vectorises.
/// Only meaningful after [`span`] accepted the same offsets: the lanes' words then lie, in
/// order, from the first address to the span's end.
#[inline(always)]
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

/// `offsets[lane] = bases[lane] + min(indices[lane], limit) * stride` (no bases: 0).
#[inline(always)]
fn element_offsets(offsets: &mut [u32], indices: &[u32], bases: Option<&[u32]>, limit: u32, stride: u32) {
    // Specialised so that the common cases (nothing to clamp, a stride of one word) cost no
    // per-lane minimum or multiplication.
    match (limit, stride, bases) {
        (u32::MAX, 1, None) => {
            for (o, i) in offsets.iter_mut().zip(indices) {
                *o = *i;
            }
        }
        (u32::MAX, 1, Some(bases)) => {
            for ((o, i), b) in offsets.iter_mut().zip(indices).zip(bases) {
                *o = b.wrapping_add(*i);
            }
        }
        (_, _, None) => {
            for (o, i) in offsets.iter_mut().zip(indices) {
                *o = (*i).min(limit).wrapping_mul(stride);
            }
        }
        (_, _, Some(bases)) => {
            for ((o, i), b) in offsets.iter_mut().zip(indices).zip(bases) {
                *o = b.wrapping_add((*i).min(limit).wrapping_mul(stride));
            }
        }
    }
}

/// Whether every offset is below `len`: the OR of the offsets bounds them all and costs one
/// cheap vector pass; only when it is not enough, the exact maximum.
#[inline(always)]
fn within(offsets: &[u32], len: usize) -> bool {
    let bits = offsets.iter().fold(0u32, |bits, o| bits | *o);
    (bits as usize) < len || (offsets.iter().copied().fold(0u32, u32::max) as usize) < len
}

/// How lanes address memory, the same in every block of eight lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// One address per block (a broadcast): a row index across a 2D workgroup.
    Same,
    /// Addresses `step` apart from the block's first: a column index.
    Consecutive,
    /// Anything else, or a lane count that is not a multiple of eight.
    Mixed,
}

/// The OR of `offsets` (which bounds each of them) and the [`Pattern`] of every block of
/// eight, in one vectorisable pass over the lanes: each lane is compared with the one
/// before it, except at the start of a block.
#[inline(always)]
fn scan(offsets: &[u32], step: u32) -> (u32, Pattern) {
    let Some(first) = offsets.first() else {
        return (0, Pattern::Mixed);
    };
    let (mut bits, mut same, mut consecutive) = (*first, 0u32, 0u32);
    for (l, (o, p)) in offsets.iter().skip(1).zip(offsets).enumerate() {
        // All ones inside a block, zero at the first lane of the next one (lane l + 1).
        let inside = 0u32.wrapping_sub(u32::from(!(l + 1).is_multiple_of(8)));
        let difference = o.wrapping_sub(*p);
        bits |= o;
        same |= difference & inside;
        consecutive |= (difference ^ step) & inside;
    }
    let pattern = if !offsets.len().is_multiple_of(8) {
        Pattern::Mixed
    } else if same == 0 {
        Pattern::Same
    } else if consecutive == 0 {
        Pattern::Consecutive
    } else {
        Pattern::Mixed
    };
    (bits, pattern)
}

/// Every lane of a workgroup-memory load of `window[offsets[lane]]`; false (nothing
/// written) when some lane's offset is outside the window.
#[inline(always)]
fn load_shared(dst: &mut [u32], offsets: &[u32], window: &[u32]) -> bool {
    let (bits, pattern) = scan(offsets, 1);
    let inside = (bits as usize) < window.len() || within(offsets, window.len());
    if dst.len() != offsets.len() || !inside {
        return false;
    }
    load_pattern(dst, offsets, window, pattern);
    true
}

/// `dst[lane] = window[offsets[lane]]`, where every offset is inside the window and the
/// offsets follow `pattern`.
#[inline(always)]
fn load_pattern(dst: &mut [u32], offsets: &[u32], window: &[u32], pattern: Pattern) {
    let blocks = dst.as_chunks_mut::<8>().0.iter_mut().zip(offsets.as_chunks::<8>().0);
    match pattern {
        Pattern::Same => {
            for (d, o) in blocks {
                d.fill(window.get(o[0] as usize).copied().unwrap_or(0));
            }
        }
        Pattern::Consecutive => {
            for (d, o) in blocks {
                let start = o[0] as usize;
                match window.get(start..start + 8) {
                    Some(run) => d.copy_from_slice(run),
                    None => d.fill(0),
                }
            }
        }
        Pattern::Mixed => {
            for (d, o) in dst.iter_mut().zip(offsets) {
                *d = window.get(*o as usize).copied().unwrap_or(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_the_pattern_of_every_block_and_bounds_the_offsets() {
        let rows: Vec<u32> = (0..32).map(|lane| 100 + lane / 8).collect();
        assert_eq!(scan(&rows, 1), (103 | 100 | 101 | 102, Pattern::Same));
        let columns: Vec<u32> = (0..32).map(|lane| 40 * (lane / 8) + lane % 8).collect();
        assert_eq!(scan(&columns, 1).1, Pattern::Consecutive);
        let words: Vec<u32> = (0..16).map(|lane| 4 * lane + 64 * (lane / 8)).collect();
        assert_eq!(scan(&words, 4).1, Pattern::Consecutive);
        assert_eq!(scan(&words, 1).1, Pattern::Mixed);
        let mut broken = columns.clone();
        broken[13] = 0;
        assert_eq!(scan(&broken, 1).1, Pattern::Mixed);
        // A partial last block is never a pattern (the block loops skip it).
        assert_eq!(scan(&rows[..12], 1).1, Pattern::Mixed);
        let bits = scan(&columns, 1).0;
        assert!(columns.iter().all(|offset| *offset <= bits));
    }
}
