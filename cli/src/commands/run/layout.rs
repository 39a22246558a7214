//! Where each value of a buffer or scalar goes, down to the scalar.
//!
//! Reflection names a buffer's element type but says nothing of a struct's members, so the
//! layout comes from the validated naga module that reflection was made from (which xhal
//! re-exports for this): a vector is its components, a matrix its columns' components, a
//! struct its members', an array its elements'. Padding (the fourth word of a `vec3<f32>`,
//! the tail of a struct) holds no value: it is written as zero and not printed.

use super::values::ScalarType;
use xhal::kernel::naga::{self, AddressSpace, ArraySize, Handle, TypeInner};
use xhal::kernel::{BufferBindingInfo, BufferSize, ScalarBlockInfo};

/// Most scalars one element (or a buffer's fixed part) may flatten to. A fixed-size type is
/// described value by value, so a huge one would take memory for nothing; nobody types a
/// million-value struct on a command line, and `file:` takes any size.
const MAX_SLOTS: usize = 1 << 20;

/// One value: its byte offset and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub offset: u64,
    pub ty: ScalarType,
}

/// The values of a buffer: a fixed part (`header`), then, for an array, its elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Values before the array: a struct's members before its trailing runtime array, or
    /// every value of a buffer that is not an array (a struct, a vector, an atomic).
    pub header: Vec<Slot>,
    /// Bytes before the array (for a buffer that is not an array: its whole size).
    pub header_bytes: u64,
    pub element: Option<ElementShape>,
}

/// The elements of a top-level array, or of a struct's trailing runtime-sized array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementShape {
    /// WGSL spelling of the element type.
    pub type_name: String,
    /// The element's values, offsets from the element's start.
    pub slots: Vec<Slot>,
    /// Bytes from one element to the next.
    pub stride: u64,
    /// The number of elements of a fixed-size array; `None` for a runtime-sized one, whose
    /// length the argument decides.
    pub count: Option<u64>,
}

impl Shape {
    /// Values in one element (0 when the buffer is not an array).
    pub fn values_per_element(&self) -> usize {
        self.element.as_ref().map_or(0, |element| element.slots.len())
    }

    /// Bytes of a buffer with `elements` elements.
    pub fn bytes_for(&self, elements: u64) -> Option<u64> {
        let stride = self.element.as_ref().map_or(0, |element| element.stride);
        elements.checked_mul(stride)?.checked_add(self.header_bytes)
    }

    /// Where value `index` goes and its type, counting the header's values first.
    pub fn slot(&self, index: u64) -> Option<Slot> {
        let header = self.header.len() as u64;
        if index < header {
            return self.header.get(index as usize).copied();
        }
        let element = self.element.as_ref()?;
        let per_element = element.slots.len() as u64;
        if per_element == 0 {
            return None;
        }
        let rest = index - header;
        let slot = element.slots.get((rest % per_element) as usize)?;
        let offset = (rest / per_element)
            .checked_mul(element.stride)?
            .checked_add(self.header_bytes)?
            .checked_add(slot.offset)?;
        Some(Slot { offset, ty: slot.ty })
    }

    /// Every scalar type the buffer holds, each once, in order of first appearance.
    pub fn scalar_types(&self) -> Vec<ScalarType> {
        let element_slots = self.element.iter().flat_map(|element| element.slots.iter());
        let mut types: Vec<ScalarType> = Vec::new();
        for slot in self.header.iter().chain(element_slots) {
            if !types.contains(&slot.ty) {
                types.push(slot.ty);
            }
        }
        types
    }
}

/// The layout of buffer argument `binding`, from the naga module it was reflected from
/// ([`xhal::kernel::WgslModule::naga_module`], where every buffer is at
/// `@group(0) @binding(argument)`).
pub fn buffer_shape(module: &naga::Module, binding: &BufferBindingInfo) -> Result<Shape, String> {
    let variable = module
        .global_variables
        .iter()
        .map(|(_, variable)| variable)
        .find(|variable| {
            matches!(variable.space, AddressSpace::Storage { .. } | AddressSpace::Uniform)
                && variable.name.as_deref() == Some(binding.name.as_str())
                && variable
                    .binding
                    .is_some_and(|b| b.group == 0 && b.binding == binding.argument)
        })
        .ok_or_else(|| {
            format!(
                "the module has no buffer `{}` at argument {}",
                binding.name, binding.argument
            )
        })?;
    match (&module.types[variable.ty].inner, binding.size) {
        (&TypeInner::Array { base, size, stride }, _) => {
            let count = match size {
                ArraySize::Constant(count) => Some(u64::from(count.get())),
                ArraySize::Dynamic => None,
                ArraySize::Pending(_) => return Err("its array length is an unresolved override".to_owned()),
            };
            Ok(Shape {
                header: Vec::new(),
                header_bytes: 0,
                element: Some(element_shape(module, base, stride, count)?),
            })
        }
        (TypeInner::Struct { members, .. }, BufferSize::Runtime { header_bytes, .. }) => {
            // The last member is the runtime-sized array; the ones before it are the header.
            let Some((last, before)) = members.split_last() else {
                return Err("an empty struct".to_owned());
            };
            let TypeInner::Array { base, stride, .. } = module.types[last.ty].inner else {
                return Err("a struct whose last member is not an array".to_owned());
            };
            let mut header = Vec::new();
            for member in before {
                flatten(module, member.ty, u64::from(member.offset), &mut header)?;
            }
            Ok(Shape {
                header,
                header_bytes,
                element: Some(element_shape(module, base, stride, None)?),
            })
        }
        (_, BufferSize::Fixed(bytes)) => {
            let mut header = Vec::new();
            flatten(module, variable.ty, 0, &mut header)?;
            Ok(Shape {
                header,
                header_bytes: bytes,
                element: None,
            })
        }
        (_, BufferSize::Runtime { .. }) => Err("a runtime-sized type that is not an array".to_owned()),
    }
}

fn element_shape(
    module: &naga::Module,
    base: Handle<naga::Type>,
    stride: u32,
    count: Option<u64>,
) -> Result<ElementShape, String> {
    let mut slots = Vec::new();
    flatten(module, base, 0, &mut slots)?;
    Ok(ElementShape {
        type_name: type_name(module, base),
        slots,
        stride: u64::from(stride),
        count,
    })
}

/// The values of member `index` of the scalar block, offsets from the member's start.
pub fn scalar_member_slots(module: &naga::Module, block: &ScalarBlockInfo, index: usize) -> Result<Vec<Slot>, String> {
    let variable = module
        .global_variables
        .iter()
        .map(|(_, variable)| variable)
        .find(|variable| {
            variable.space == AddressSpace::Immediate && variable.name.as_deref() == Some(block.name.as_str())
        })
        .ok_or_else(|| format!("the module has no var<immediate> `{}`", block.name))?;
    let ty = match &module.types[variable.ty].inner {
        TypeInner::Struct { members, .. } => members
            .get(index)
            .map(|member| member.ty)
            .ok_or_else(|| format!("`{}` has no member {index}", block.type_name))?,
        // A block that is a single scalar or vector is its own one member.
        _ => variable.ty,
    };
    let mut slots = Vec::new();
    flatten(module, ty, 0, &mut slots)?;
    Ok(slots)
}

/// Appends the scalars of a value of type `ty` placed at `offset`.
fn flatten(module: &naga::Module, ty: Handle<naga::Type>, offset: u64, out: &mut Vec<Slot>) -> Result<(), String> {
    let scalar_type = |scalar: naga::Scalar| {
        ScalarType::from_naga(scalar).ok_or_else(|| {
            format!(
                "it holds {}, which has no value the command line can give",
                type_name(module, ty)
            )
        })
    };
    let push = |out: &mut Vec<Slot>, slot: Slot| {
        if out.len() >= MAX_SLOTS {
            return Err(format!(
                "its type has more than {MAX_SLOTS} values, too many to describe one by one; give it as `file:PATH`"
            ));
        }
        out.push(slot);
        Ok(())
    };
    match module.types[ty].inner {
        TypeInner::Scalar(scalar) | TypeInner::Atomic(scalar) => push(
            out,
            Slot {
                offset,
                ty: scalar_type(scalar)?,
            },
        ),
        TypeInner::Vector { size, scalar } => {
            let ty = scalar_type(scalar)?;
            for component in 0..size as u64 {
                push(
                    out,
                    Slot {
                        offset: offset + component * ty.size() as u64,
                        ty,
                    },
                )?;
            }
            Ok(())
        }
        TypeInner::Matrix { columns, rows, scalar } => {
            let ty = scalar_type(scalar)?;
            // Columns are vectors placed at their alignment: a vec3 column takes 4 scalars.
            let column_stride = match rows {
                naga::VectorSize::Bi => 2,
                _ => 4,
            } * ty.size() as u64;
            for column in 0..columns as u64 {
                for row in 0..rows as u64 {
                    let at = offset + column * column_stride + row * ty.size() as u64;
                    push(out, Slot { offset: at, ty })?;
                }
            }
            Ok(())
        }
        TypeInner::Array {
            base,
            size: ArraySize::Constant(count),
            stride,
        } => {
            for index in 0..u64::from(count.get()) {
                flatten(module, base, offset + index * u64::from(stride), out)?;
            }
            Ok(())
        }
        TypeInner::Struct { ref members, .. } => {
            for member in members {
                flatten(module, member.ty, offset + u64::from(member.offset), out)?;
            }
            Ok(())
        }
        _ => Err(format!(
            "it holds {}, which has no value the command line can give",
            type_name(module, ty)
        )),
    }
}

/// WGSL spelling of a type, as reflection writes it.
fn type_name(module: &naga::Module, ty: Handle<naga::Type>) -> String {
    use naga::common::wgsl::TypeContext as _;
    module.to_ctx().type_to_string(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "
        struct Particle { position: vec3<f32>, mass: f32, id: u32 }
        struct Counted { count: atomic<u32>, flags: vec2<u32>, items: array<i32> }
        struct Params { m: mat3x3<f32>, scale: f32 }
        var<immediate> params: Params;
        @group(0) @binding(0) var<storage, read_write> particles: array<Particle>;
        @group(0) @binding(1) var<storage, read_write> counted: Counted;
        @group(0) @binding(2) var<storage, read_write> table: array<vec3<f32>, 4>;
        @group(0) @binding(3) var<storage, read_write> single: vec2<f32>;
        @compute @workgroup_size(1)
        fn main() {
            particles[0].mass = params.scale + params.m[0][0];
            atomicAdd(&counted.count, 1u);
            counted.items[0] = 1;
            table[0] = vec3<f32>(1.0);
            single = vec2<f32>(1.0);
        }
    ";

    fn slots(list: &[(u64, ScalarType)]) -> Vec<Slot> {
        list.iter().map(|&(offset, ty)| Slot { offset, ty }).collect()
    }

    #[test]
    fn layouts_follow_wgsl_rules() {
        let module = xhal::kernel::parse_wgsl(SOURCE).unwrap_or_else(|error| panic!("{error}"));
        let entry = &module.entry_points()[0];
        let naga = module.naga_module();
        let shape = |i: usize| buffer_shape(naga, &entry.buffers[i]).unwrap_or_else(|error| panic!("{error}"));
        use ScalarType::{F32, I32, U32};

        let particles = shape(0);
        assert!(particles.header.is_empty());
        let element = particles.element.as_ref().map(|e| (e.slots.clone(), e.stride, e.count));
        assert_eq!(
            element,
            Some((slots(&[(0, F32), (4, F32), (8, F32), (12, F32), (16, U32)]), 32, None))
        );
        assert_eq!(particles.slot(6), Some(Slot { offset: 36, ty: F32 }));

        let counted = shape(1);
        assert_eq!(counted.header, slots(&[(0, U32), (8, U32), (12, U32)]));
        assert_eq!(counted.header_bytes, 16);
        assert_eq!(counted.slot(4), Some(Slot { offset: 20, ty: I32 }));
        assert_eq!(counted.scalar_types(), [U32, I32]);

        let table = shape(2);
        assert_eq!(table.element.as_ref().map(|e| (e.stride, e.count)), Some((16, Some(4))));
        assert_eq!(table.bytes_for(4), Some(64));

        let single = shape(3);
        assert_eq!(single.header, slots(&[(0, F32), (4, F32)]));
        assert_eq!(single.header_bytes, 8);

        let block = entry.scalars.as_ref().unwrap_or_else(|| panic!("no scalar block"));
        let matrix = scalar_member_slots(naga, block, 0).unwrap_or_else(|error| panic!("{error}"));
        let offsets: Vec<u64> = matrix.iter().map(|slot| slot.offset).collect();
        assert_eq!(offsets, [0, 4, 8, 16, 20, 24, 32, 36, 40]);
        assert_eq!(scalar_member_slots(naga, block, 1), Ok(slots(&[(0, F32)])));
    }
}
