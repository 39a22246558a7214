//! Member, element and component access, and loads and stores through pointers.

use super::compile::{Compiler, FnCtx, Index, Known, Ptr, Space, Val};
use super::program::{At, Bound, Container, HostKind, HostSpace, Instr, Reg};
use super::types::{array_length, column_stride, describe, Num};
use naga::{Expression, Handle, TypeInner};
use xhal_backend::{Error, Result};

impl<'m> Compiler<'m> {
    pub(super) fn access(&mut self, f: &mut FnCtx<'m>, base: Handle<Expression>, index: Index) -> Result<Val> {
        let base_ty = self.ty(f, base);
        match self.expr(f, base)? {
            Val::Ptr(pointer) => Ok(Val::Ptr(self.access_pointer(&pointer, index)?)),
            value => self.access_value(&value, base_ty, index),
        }
    }

    /// A pointer to a member, element, column or component of what `pointer` points at.
    fn access_pointer(&mut self, pointer: &Ptr, index: Index) -> Result<Ptr> {
        let host = matches!(pointer.space, Space::Host(_));
        let (element, unit, bound, container) = match pointer.pointee {
            TypeInner::Struct { ref members, .. } => {
                let Index::Const(member) = index else {
                    return Err(Error::internal("a struct indexed at run time"));
                };
                let item = members
                    .get(member as usize)
                    .ok_or_else(|| Error::internal("a struct member out of range"))?;
                let offset = if host {
                    item.offset
                } else {
                    self.types.member_slot(members, member as usize)?
                };
                return Ok(Ptr {
                    base: pointer.base.wrapping_add(offset),
                    pointee: self.types.inner(item.ty).clone(),
                    ..pointer.clone()
                });
            }
            TypeInner::Array { base, size, stride } => {
                let element = self.types.inner(base).clone();
                let unit = if host { stride } else { self.types.slots(&element)? };
                let bound = match (array_length(size)?, pointer.space) {
                    (Some(count), _) => Bound::Fixed(count),
                    (None, Space::Host(HostSpace::Binding(binding))) => Bound::Runtime {
                        binding,
                        header: pointer.base,
                        stride,
                    },
                    (None, _) => return Err(Error::internal("a runtime-sized array outside a buffer")),
                };
                (element, unit, bound, Container::Array)
            }
            TypeInner::Vector { size, scalar } => {
                let num = Num::of(scalar)?;
                let unit = if host { num.host_bytes() } else { num.words() };
                (
                    TypeInner::Scalar(scalar),
                    unit,
                    Bound::Fixed(size as u32),
                    Container::Vector,
                )
            }
            TypeInner::Matrix { columns, rows, scalar } => {
                let num = Num::of(scalar)?;
                let unit = if host {
                    column_stride(rows, num)
                } else {
                    rows as u32 * num.words()
                };
                (
                    TypeInner::Vector { size: rows, scalar },
                    unit,
                    Bound::Fixed(columns as u32),
                    Container::Matrix,
                )
            }
            ref other => {
                return Err(Error::internal(format!("indexing a pointer to {}", describe(other))));
            }
        };
        match (index, bound) {
            (Index::Const(i), Bound::Fixed(count)) if i < count => Ok(Ptr {
                base: pointer.base.wrapping_add(i.wrapping_mul(unit)),
                pointee: element,
                ..pointer.clone()
            }),
            (Index::Const(i), Bound::Fixed(count)) => Err(Error::invalid_argument(format!(
                "constant index {i} is out of bounds ({})",
                container.describe(u64::from(count))
            ))),
            (index, bound) => {
                let (reg, signed) = match index {
                    Index::Const(i) => (self.constant(i)?, false),
                    Index::Lane { reg, signed } => (reg, signed),
                };
                let dst = self.checked_index(At {
                    base: pointer.offset,
                    index: reg,
                    stride: unit,
                    bound,
                    container,
                    place: pointer.place,
                    signed,
                })?;
                Ok(Ptr {
                    offset: Some(dst),
                    pointee: element,
                    ..pointer.clone()
                })
            }
        }
    }

    /// A member, element, column or component of a value.
    fn access_value(&mut self, value: &Val, ty: &TypeInner, index: Index) -> Result<Val> {
        let (element_slots, count, container) = match *ty {
            TypeInner::Struct { ref members, .. } => {
                let Index::Const(member) = index else {
                    return Err(Error::internal("a struct indexed at run time"));
                };
                let item = members
                    .get(member as usize)
                    .ok_or_else(|| Error::internal("a struct member out of range"))?;
                let start = self.types.member_slot(members, member as usize)? as usize;
                let length = self.types.slots(self.types.inner(item.ty))? as usize;
                return pick_slots(value, &(start..start + length).collect::<Vec<_>>());
            }
            TypeInner::Array { base, size, .. } => {
                let count = array_length(size)?.ok_or_else(|| Error::internal("a runtime-sized array value"))?;
                (self.types.slots(self.types.inner(base))?, count, Container::Array)
            }
            TypeInner::Vector { size, scalar } => (Num::of(scalar)?.words(), size as u32, Container::Vector),
            TypeInner::Matrix { columns, rows, scalar } => (
                rows as u32 * Num::of(scalar)?.words(),
                columns as u32,
                Container::Matrix,
            ),
            ref other => return Err(Error::internal(format!("indexing {}", describe(other)))),
        };
        let width = element_slots as usize;
        match index {
            Index::Const(i) if i < count => {
                let start = i as usize * width;
                pick_slots(value, &(start..start + width).collect::<Vec<_>>())
            }
            Index::Const(i) => Err(Error::invalid_argument(format!(
                "constant index {i} is out of bounds ({})",
                container.describe(u64::from(count))
            ))),
            Index::Lane { reg, signed } => {
                let regs = self.regs(value)?;
                let place = self.place(format!("a value of type {}", describe(ty)));
                let mut out = Vec::with_capacity(width);
                for k in 0..width {
                    let choices: Vec<Reg> = (0..count as usize)
                        .map(|e| regs.get(e * width + k).copied().unwrap_or(0))
                        .collect();
                    let dst = self.alloc()?;
                    self.push(Instr::Pick {
                        dst,
                        index: reg,
                        choices: choices.into_boxed_slice(),
                        container,
                        place,
                        signed,
                    })?;
                    out.push(dst);
                }
                Ok(Val::Regs(out))
            }
        }
    }

    // ---- memory --------------------------------------------------------------------------

    pub(super) fn load(&mut self, pointer: &Ptr) -> Result<Val> {
        let leaves = self.types.leaves(&pointer.pointee)?;
        let slots = self.types.slots(&pointer.pointee)? as usize;
        let mut out = vec![0; slots];
        for leaf in leaves {
            for word in 0..leaf.num.words() {
                let kind = if leaf.num == Num::F16 {
                    HostKind::F16
                } else {
                    HostKind::Word
                };
                let byte = pointer.base.wrapping_add(leaf.byte + 4 * word);
                let known = match pointer.space {
                    Space::Host(HostSpace::Immediate) => Some(Known::Immediate {
                        byte,
                        offset: pointer.offset,
                        kind,
                    }),
                    _ => None,
                };
                if let Some(reg) = known.and_then(|key| self.known(&key)) {
                    if let Some(slot) = out.get_mut((leaf.slot + word) as usize) {
                        *slot = reg;
                    }
                    continue;
                }
                let dst = self.alloc()?;
                let instr = match pointer.space {
                    Space::Lane => Instr::LoadLane {
                        dst,
                        column: pointer.base.wrapping_add(leaf.slot + word),
                        offset: pointer.offset,
                    },
                    Space::Shared => Instr::LoadShared {
                        dst,
                        word: pointer.base.wrapping_add(leaf.slot + word),
                        offset: pointer.offset,
                    },
                    Space::Host(space) => Instr::LoadHost {
                        dst,
                        space,
                        byte,
                        offset: pointer.offset,
                        kind,
                    },
                };
                self.push(instr)?;
                if let Some(key) = known {
                    self.remember(key, dst, &[pointer.offset]);
                }
                if let Some(slot) = out.get_mut((leaf.slot + word) as usize) {
                    *slot = dst;
                }
            }
        }
        Ok(Val::Regs(out))
    }

    pub(super) fn store(&mut self, pointer: &Ptr, value: &Val) -> Result<()> {
        let leaves = self.types.leaves(&pointer.pointee)?;
        let operands = self.operands(value)?;
        for leaf in leaves {
            for word in 0..leaf.num.words() {
                let src = operands
                    .get((leaf.slot + word) as usize)
                    .copied()
                    .ok_or_else(|| Error::internal("a stored value is smaller than its type"))?;
                let instr = match pointer.space {
                    Space::Lane => Instr::StoreLane {
                        column: pointer.base.wrapping_add(leaf.slot + word),
                        offset: pointer.offset,
                        src,
                    },
                    Space::Shared => Instr::StoreShared {
                        word: pointer.base.wrapping_add(leaf.slot + word),
                        offset: pointer.offset,
                        src,
                    },
                    Space::Host(space) => Instr::StoreHost {
                        space,
                        byte: pointer.base.wrapping_add(leaf.byte + 4 * word),
                        offset: pointer.offset,
                        kind: if leaf.num == Num::F16 {
                            HostKind::F16
                        } else {
                            HostKind::Word
                        },
                        src,
                    },
                };
                self.push(instr)?;
            }
        }
        Ok(())
    }
}

/// Slots `picks` of a value, without instructions.
pub(super) fn pick_slots(value: &Val, picks: &[usize]) -> Result<Val> {
    let missing = || Error::internal("a component out of range");
    match value {
        Val::Regs(regs) => picks
            .iter()
            .map(|i| regs.get(*i).copied().ok_or_else(missing))
            .collect::<Result<_>>()
            .map(Val::Regs),
        Val::Const(words) => picks
            .iter()
            .map(|i| words.get(*i).copied().ok_or_else(missing))
            .collect::<Result<_>>()
            .map(Val::Const),
        Val::Ptr(_) => Err(Error::internal("a pointer used as a composite value")),
    }
}
