//! How WGSL values are laid out in the interpreter: lane words ("slots") and host bytes.
//!
//! A value of any constructible type is a flat list of 32-bit slots: a 32-bit scalar (or a
//! `bool`, or an `f16` widened to `f32`) takes one, a 64-bit scalar two (low word first);
//! vectors, matrices (column-major), arrays and structs are their components in order.
//! Registers, per-invocation memory (function and private variables) and workgroup memory
//! all use this slot layout. Host-visible memory (storage buffers and the scalar block)
//! uses WGSL's byte layout instead, as naga computed it.

use naga::{ArraySize, Handle, Scalar, ScalarKind, Type, TypeInner, VectorSize};
use xhal_backend::{Error, Result};

/// The scalar types the interpreter computes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Num {
    Bool,
    I32,
    U32,
    F32,
    /// Held widened to `f32` in a slot; 2 bytes in host memory.
    F16,
    I64,
    U64,
    F64,
}

impl Num {
    /// The type of a naga scalar, if the interpreter implements it.
    pub(crate) fn of(scalar: Scalar) -> Result<Num> {
        Ok(match (scalar.kind, scalar.width) {
            (ScalarKind::Bool, _) => Num::Bool,
            (ScalarKind::Sint, 4) => Num::I32,
            (ScalarKind::Uint, 4) => Num::U32,
            (ScalarKind::Float, 4) => Num::F32,
            (ScalarKind::Float, 2) => Num::F16,
            (ScalarKind::Sint, 8) => Num::I64,
            (ScalarKind::Uint, 8) => Num::U64,
            (ScalarKind::Float, 8) => Num::F64,
            (kind, width) => {
                return Err(Error::unsupported(format!(
                    "the cpu backend does not implement {width}-byte {kind:?} scalars"
                )))
            }
        })
    }

    /// Slots (32-bit words) one value takes.
    pub(crate) fn words(self) -> u32 {
        match self {
            Num::I64 | Num::U64 | Num::F64 => 2,
            _ => 1,
        }
    }

    /// Bytes one value takes in host memory.
    pub(crate) fn host_bytes(self) -> u32 {
        match self {
            Num::F16 => 2,
            Num::I64 | Num::U64 | Num::F64 => 8,
            _ => 4,
        }
    }

    pub(crate) fn is_float(self) -> bool {
        matches!(self, Num::F16 | Num::F32 | Num::F64)
    }

    pub(crate) fn is_signed(self) -> bool {
        matches!(self, Num::I32 | Num::I64)
    }

    pub(crate) fn is_wide(self) -> bool {
        self.words() == 2
    }
}

/// One scalar inside a value: where it sits in the slot layout and in the host layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leaf {
    pub(crate) num: Num,
    pub(crate) slot: u32,
    pub(crate) byte: u32,
}

/// Most leaves one value may have; a larger value (a big array loaded whole) is refused
/// rather than turned into that many instructions.
const MAX_LEAVES: usize = 1 << 16;

/// Type questions the compiler asks, answered from the module's type arena.
pub(crate) struct Types<'m> {
    pub(crate) arena: &'m naga::UniqueArena<Type>,
}

impl<'m> Types<'m> {
    pub(crate) fn inner(&self, handle: Handle<Type>) -> &'m TypeInner {
        &self.arena[handle].inner
    }

    /// Slots a value of this type takes (see the module documentation).
    pub(crate) fn slots(&self, inner: &TypeInner) -> Result<u32> {
        Ok(match *inner {
            TypeInner::Scalar(scalar) | TypeInner::Atomic(scalar) => Num::of(scalar)?.words(),
            TypeInner::Vector { size, scalar } => size as u32 * Num::of(scalar)?.words(),
            TypeInner::Matrix { columns, rows, scalar } => columns as u32 * rows as u32 * Num::of(scalar)?.words(),
            TypeInner::Array { base, size, .. } => {
                let count = array_length(size)?
                    .ok_or_else(|| Error::unsupported("a runtime-sized array can only live in a storage buffer"))?;
                count
                    .checked_mul(self.slots(self.inner(base))?)
                    .ok_or_else(|| Error::unsupported("a value larger than 2^32 words"))?
            }
            TypeInner::Struct { ref members, .. } => {
                let mut total = 0u32;
                for member in members {
                    total = total
                        .checked_add(self.slots(self.inner(member.ty))?)
                        .ok_or_else(|| Error::unsupported("a value larger than 2^32 words"))?;
                }
                total
            }
            ref other => {
                return Err(Error::unsupported(format!(
                    "the cpu backend cannot hold a value of type {}",
                    describe(other)
                )))
            }
        })
    }

    /// Slot offset of member `index` of a struct.
    pub(crate) fn member_slot(&self, members: &[naga::StructMember], index: usize) -> Result<u32> {
        let mut offset = 0;
        for member in members.iter().take(index) {
            offset += self.slots(self.inner(member.ty))?;
        }
        Ok(offset)
    }

    /// Every scalar of a value of type `inner`, in slot order.
    pub(crate) fn leaves(&self, inner: &TypeInner) -> Result<Vec<Leaf>> {
        let mut leaves = Vec::new();
        self.collect_leaves(inner, 0, 0, &mut leaves)?;
        Ok(leaves)
    }

    fn collect_leaves(&self, inner: &TypeInner, slot: u32, byte: u32, out: &mut Vec<Leaf>) -> Result<()> {
        if out.len() > MAX_LEAVES {
            return Err(Error::unsupported(format!(
                "a value with more than {MAX_LEAVES} scalars loaded or stored whole"
            )));
        }
        match *inner {
            TypeInner::Scalar(scalar) | TypeInner::Atomic(scalar) => out.push(Leaf {
                num: Num::of(scalar)?,
                slot,
                byte,
            }),
            TypeInner::Vector { size, scalar } => {
                let num = Num::of(scalar)?;
                for i in 0..size as u32 {
                    out.push(Leaf {
                        num,
                        slot: slot + i * num.words(),
                        byte: byte + i * num.host_bytes(),
                    });
                }
            }
            TypeInner::Matrix { columns, rows, scalar } => {
                let num = Num::of(scalar)?;
                let column_stride = column_stride(rows, num);
                for c in 0..columns as u32 {
                    for r in 0..rows as u32 {
                        out.push(Leaf {
                            num,
                            slot: slot + (c * rows as u32 + r) * num.words(),
                            byte: byte + c * column_stride + r * num.host_bytes(),
                        });
                    }
                }
            }
            TypeInner::Array { base, size, stride } => {
                let count = array_length(size)?
                    .ok_or_else(|| Error::unsupported("a runtime-sized array cannot be loaded or stored whole"))?;
                let element = self.inner(base);
                let element_slots = self.slots(element)?;
                for i in 0..count {
                    self.collect_leaves(element, slot + i * element_slots, byte + i * stride, out)?;
                }
            }
            TypeInner::Struct { ref members, .. } => {
                let mut member_slot = slot;
                for member in members {
                    let member_inner = self.inner(member.ty);
                    self.collect_leaves(member_inner, member_slot, byte + member.offset, out)?;
                    member_slot += self.slots(member_inner)?;
                }
            }
            ref other => {
                return Err(Error::unsupported(format!(
                    "the cpu backend cannot load or store a value of type {}",
                    describe(other)
                )))
            }
        }
        Ok(())
    }
}

/// Bytes between the columns of a matrix in host memory: the alignment of a column vector.
pub(crate) fn column_stride(rows: VectorSize, num: Num) -> u32 {
    let lanes = if rows == VectorSize::Bi { 2 } else { 4 };
    lanes * num.host_bytes()
}

/// The element count of a fixed-size array; `None` for a runtime-sized one.
pub(crate) fn array_length(size: ArraySize) -> Result<Option<u32>> {
    match size {
        ArraySize::Constant(count) => Ok(Some(count.get())),
        ArraySize::Dynamic => Ok(None),
        ArraySize::Pending(_) => Err(Error::unsupported(
            "an array sized by a pipeline-overridable constant (the cpu backend takes no pipeline constants)",
        )),
    }
}

/// A short description of a type for error messages.
pub(crate) fn describe(inner: &TypeInner) -> String {
    match *inner {
        TypeInner::Scalar(scalar) => scalar_name(scalar),
        TypeInner::Vector { size, scalar } => format!("vec{}<{}>", size as u32, scalar_name(scalar)),
        TypeInner::Matrix { columns, rows, scalar } => {
            format!("mat{}x{}<{}>", columns as u32, rows as u32, scalar_name(scalar))
        }
        TypeInner::Atomic(scalar) => format!("atomic<{}>", scalar_name(scalar)),
        TypeInner::Array { size, .. } => match size {
            ArraySize::Constant(count) => format!("an array of {count} elements"),
            _ => "a runtime-sized array".to_string(),
        },
        TypeInner::Struct { .. } => "a struct".to_string(),
        TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. } => "a pointer".to_string(),
        TypeInner::Image { .. } => "a texture".to_string(),
        TypeInner::Sampler { .. } => "a sampler".to_string(),
        _ => "an opaque type".to_string(),
    }
}

fn scalar_name(scalar: Scalar) -> String {
    let prefix = match scalar.kind {
        ScalarKind::Bool => return "bool".to_string(),
        ScalarKind::Sint => "i",
        ScalarKind::Uint => "u",
        ScalarKind::Float => "f",
        ScalarKind::AbstractInt => return "abstract-int".to_string(),
        ScalarKind::AbstractFloat => return "abstract-float".to_string(),
    };
    format!("{prefix}{}", u32::from(scalar.width) * 8)
}
