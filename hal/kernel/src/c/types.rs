//! C types for WGSL types: their names, sizes and zero values, and the typedefs of a module
//! (structs with explicit padding, arrays wrapped in structs, constructors).

use std::collections::HashSet;
use std::fmt::Write as _;

use naga::proc::TypeResolution;
use naga::{ArraySize, Expression, Handle, Scalar, ScalarKind, Type, TypeInner, VectorSize};

use super::writer::{ident, scalar_suffix, ArrayRepr, Writer};
use super::Dialect;
use crate::error::KernelError;
use crate::ir::scalar_wgsl;

type Res<T> = Result<T, KernelError>;

impl<'a> Writer<'a> {
    /// Refuses the types no dialect here can express.
    pub(super) fn check_types(&self) -> Res<()> {
        for (h, t) in self.m.types.iter() {
            let span = self.m.types.get_span(h);
            match &t.inner {
                TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } | TypeInner::Atomic(s) => {
                    if scalar_suffix(*s).is_none() {
                        return Err(self.unsupported_at(&format!("the type {}", scalar_wgsl(*s)), span));
                    }
                }
                TypeInner::Matrix { scalar, .. } => {
                    if *scalar != Scalar::F32 && *scalar != Scalar::F16 {
                        return Err(self.unsupported_at(&format!("matrices of {}", scalar_wgsl(*scalar)), span));
                    }
                }
                TypeInner::Pointer { .. }
                | TypeInner::ValuePointer { .. }
                | TypeInner::Array { .. }
                | TypeInner::Struct { .. } => {}
                TypeInner::Image { .. } => return Err(self.unsupported_at("textures", span)),
                TypeInner::Sampler { .. } => return Err(self.unsupported_at("samplers", span)),
                _ => return Err(self.unsupported_at("this type", span)),
            }
        }
        Ok(())
    }

    /// C size of a type (equal to WGSL's host-shareable size for host-shareable types).
    pub(super) fn c_size(&self, h: Handle<Type>) -> u32 {
        match &self.m.types[h].inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => u32::from(s.width),
            TypeInner::Vector { size, scalar } => *size as u32 * u32::from(scalar.width),
            TypeInner::Matrix { columns, rows, scalar } => {
                // A column is aligned like its vector: a three-row column takes four rows.
                let column_rows = if *rows == VectorSize::Bi { 2 } else { 4 };
                *columns as u32 * column_rows * u32::from(scalar.width)
            }
            TypeInner::Array {
                size: ArraySize::Constant(n),
                stride,
                ..
            } => n.get() * stride,
            TypeInner::Struct { span, .. } => *span,
            _ => 0,
        }
    }

    pub(super) fn inner_name(&self, inner: &TypeInner) -> Res<String> {
        match inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => Ok(format!(
                "xh_{}",
                scalar_suffix(*s).ok_or_else(|| self.unsupported(&scalar_wgsl(*s)))?
            )),
            TypeInner::Vector { size, scalar } => Ok(format!(
                "xh_{}x{}",
                scalar_suffix(*scalar).ok_or_else(|| self.unsupported(&scalar_wgsl(*scalar)))?,
                *size as u8
            )),
            TypeInner::Matrix { columns, rows, scalar } if *scalar == Scalar::F32 || *scalar == Scalar::F16 => {
                Ok(format!(
                    "xh_{}m{}x{}",
                    scalar_suffix(*scalar).unwrap_or("f32"),
                    *columns as u8,
                    *rows as u8
                ))
            }
            _ => {
                for (h, t) in self.m.types.iter() {
                    if &t.inner == inner {
                        if let Some(n) = self.names.get(&h) {
                            return Ok(n.clone());
                        }
                    }
                }
                Err(self.unsupported("a value of this type"))
            }
        }
    }

    pub(super) fn type_name(&self, h: Handle<Type>) -> Res<String> {
        match self.names.get(&h) {
            Some(n) => Ok(n.clone()),
            None => self.inner_name(&self.m.types[h].inner),
        }
    }

    pub(super) fn res_name(&self, r: &TypeResolution) -> Res<String> {
        match r {
            TypeResolution::Handle(h) => self.type_name(*h),
            TypeResolution::Value(inner) => self.inner_name(inner),
        }
    }

    /// The representation of an array type and whether it is runtime-sized.
    pub(super) fn array_of(&self, h: Handle<Type>) -> Option<(ArrayRepr, bool)> {
        match &self.m.types[h].inner {
            TypeInner::Array { size, .. } => self
                .arrays
                .get(&h)
                .map(|r| (r.clone(), matches!(size, ArraySize::Dynamic))),
            _ => None,
        }
    }

    pub(super) fn zero_of(&self, h: Handle<Type>) -> Res<String> {
        self.zero_inner(&self.m.types[h].inner, Some(h))
    }

    fn zero_inner(&self, inner: &TypeInner, h: Option<Handle<Type>>) -> Res<String> {
        Ok(match inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => zero_scalar(*s),
            TypeInner::Vector { size, scalar } => {
                let z = zero_scalar(*scalar);
                format!(
                    "xh_make_{}({})",
                    self.inner_name(inner)?,
                    vec![z; *size as usize].join(", ")
                )
            }
            TypeInner::Matrix { columns, rows, scalar } => {
                let col = self.zero_inner(
                    &TypeInner::Vector {
                        size: *rows,
                        scalar: *scalar,
                    },
                    None,
                )?;
                format!(
                    "xh_make_{}({})",
                    self.inner_name(inner)?,
                    vec![col; *columns as usize].join(", ")
                )
            }
            _ => {
                let name = match h {
                    Some(h) => self.type_name(h)?,
                    None => self.inner_name(inner)?,
                };
                format!("xh_zero_{name}()")
            }
        })
    }

    pub(super) fn write_types(&mut self, out: &mut String) -> Res<()> {
        let zero_init = if matches!(self.d, Dialect::CudaC | Dialect::HipC) {
            "{}"
        } else {
            "{0}"
        };
        // Array types that some constructor builds, each needing an `xh_make_` function of
        // one parameter per element: written for those only, so a large array type that is
        // never constructed costs nothing to compile.
        let composed = composed_types(self.m);
        for (h, t) in self.m.types.iter() {
            match &t.inner {
                TypeInner::Array { base, size, stride } => {
                    let base_name = self.type_name(*base)?;
                    let base_size = self.c_size(*base);
                    let tag = match size {
                        ArraySize::Constant(_) => format!("xh_arr{}", h.index()),
                        _ => format!("xh_rta{}", h.index()),
                    };
                    let repr = if *stride > base_size {
                        let elem = format!("{tag}_e");
                        let _ = writeln!(
                            out,
                            "typedef struct {{ {base_name} v; unsigned char pad_[{}]; }} {elem};",
                            stride - base_size
                        );
                        ArrayRepr { elem, unwrap: ".v" }
                    } else {
                        ArrayRepr {
                            elem: base_name.clone(),
                            unwrap: "",
                        }
                    };
                    self.arrays.insert(h, repr.clone());
                    if let ArraySize::Constant(n) = size {
                        let n = n.get();
                        let _ = writeln!(out, "typedef struct {{ {} a[{n}]; }} {tag};", repr.elem);
                        let _ = writeln!(
                            out,
                            "XH_STATIC_ASSERT(sizeof({tag}) == {}, \"WGSL layout\");",
                            n * stride
                        );
                        let _ = writeln!(
                            out,
                            "XH_FN {tag} xh_zero_{tag}(void) {{ {tag} r = {zero_init}; return r; }}"
                        );
                        if composed.contains(&h) && n <= MAX_CONSTRUCTED_ARRAY {
                            let params: Vec<String> = (0..n).map(|i| format!("{base_name} e{i}")).collect();
                            let sets: String = (0..n).map(|i| format!(" r.a[{i}]{} = e{i};", repr.unwrap)).collect();
                            let _ = writeln!(
                                out,
                                "XH_FN {tag} xh_make_{tag}({}) {{ {tag} r = {zero_init};{sets} return r; }}",
                                params.join(", ")
                            );
                        }
                        self.names.insert(h, tag);
                    }
                }
                TypeInner::Struct { members, span } => {
                    let tag = format!("xh_s{}_{}", h.index(), ident(t.name.as_deref(), "struct"));
                    let mut body = String::new();
                    let mut cur = 0u32;
                    let mut names = Vec::new();
                    let mut runtime = false;
                    for (k, member) in members.iter().enumerate() {
                        if member.offset > cur {
                            let _ = write!(body, " unsigned char pad{k}_[{}];", member.offset - cur);
                            cur = member.offset;
                        }
                        let name = format!("{}_", ident(member.name.as_deref(), &format!("m{k}")));
                        match self.array_of(member.ty) {
                            Some((repr, true)) => {
                                // C++ (CUDA C, HIP C) has no flexible array member, and NVRTC
                                // refuses one: a one-element trailing array stands in for it
                                // there. Nothing takes the struct's size; `arrayLength` uses
                                // the member's offset.
                                // C has one, but not as a struct's only member: a GNU
                                // zero-length array (which cc and OpenCL's clang take)
                                // stands in for it there.
                                let bound = if matches!(self.d, Dialect::CudaC | Dialect::HipC) {
                                    "1"
                                } else if names.is_empty() {
                                    "0"
                                } else {
                                    ""
                                };
                                let _ = write!(body, " {} {name}[{bound}];", repr.elem);
                                runtime = true;
                            }
                            _ => {
                                let _ = write!(body, " {} {name};", self.type_name(member.ty)?);
                                cur += self.c_size(member.ty);
                            }
                        }
                        names.push(name);
                    }
                    if !runtime && *span > cur {
                        let _ = write!(body, " unsigned char pad_end_[{}];", span - cur);
                    }
                    let _ = writeln!(out, "typedef struct {tag} {{{body} }} {tag};");
                    self.members.insert(h, names.clone());
                    self.names.insert(h, tag.clone());
                    if !runtime {
                        let _ = writeln!(out, "XH_STATIC_ASSERT(sizeof({tag}) == {span}, \"WGSL layout\");");
                        let _ = writeln!(
                            out,
                            "XH_FN {tag} xh_zero_{tag}(void) {{ {tag} r = {zero_init}; return r; }}"
                        );
                        let mut params = Vec::new();
                        let mut sets = String::new();
                        for (k, member) in members.iter().enumerate() {
                            params.push(format!("{} m{k}", self.type_name(member.ty)?));
                            let _ = write!(sets, " r.{} = m{k};", names[k]);
                        }
                        let _ = writeln!(
                            out,
                            "XH_FN {tag} xh_make_{tag}({}) {{ {tag} r = {zero_init};{sets} return r; }}",
                            params.join(", ")
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether a value of type `ty` has bytes that are not its members' (struct gaps, array
    /// strides wider than the element, a matrix's three-row columns), anywhere inside.
    pub(super) fn has_padding(&self, ty: Handle<Type>) -> bool {
        match &self.m.types[ty].inner {
            TypeInner::Struct { members, span } => {
                let mut end = 0;
                for member in members {
                    if member.offset > end || self.has_padding(member.ty) {
                        return true;
                    }
                    end = member.offset + self.c_size(member.ty);
                }
                *span > end
            }
            TypeInner::Array { base, stride, .. } => *stride > self.c_size(*base) || self.has_padding(*base),
            TypeInner::Matrix { rows, .. } => *rows == VectorSize::Tri,
            _ => false,
        }
    }

    /// C statements that store `value` (of type `ty`, which has padding) into `place` member
    /// by member, so that no padding byte of `place` is written.
    pub(super) fn padded_store(&self, place: &str, value: &str, ty: Handle<Type>, counter: &mut usize) -> Res<String> {
        if !self.has_padding(ty) {
            return Ok(format!("{place} = {value};"));
        }
        *counter += 1;
        let tmp = format!("xh_v{counter}");
        let t = self.type_name(ty)?;
        let mut body = format!("{{ {t} {tmp} = {value};");
        match &self.m.types[ty].inner {
            TypeInner::Struct { members, .. } => {
                for (k, member) in members.iter().enumerate() {
                    let name = &self.members[&ty][k];
                    let inner =
                        self.padded_store(&format!("{place}.{name}"), &format!("{tmp}.{name}"), member.ty, counter)?;
                    let _ = write!(body, " {inner}");
                }
            }
            TypeInner::Array {
                base,
                size: ArraySize::Constant(n),
                ..
            } => {
                let unwrap = self.arrays.get(&ty).map(|r| r.unwrap).unwrap_or("");
                let k = format!("xh_k{counter}");
                let inner = self.padded_store(
                    &format!("{place}.a[{k}]{unwrap}"),
                    &format!("{tmp}.a[{k}]{unwrap}"),
                    *base,
                    counter,
                )?;
                let _ = write!(body, " xh_u32 {k}; for ({k} = 0; {k} < {n}u; {k}++) {{ {inner} }}");
            }
            TypeInner::Matrix { columns, .. } => {
                for c in 0..*columns as usize {
                    let _ = write!(body, " {place}.c[{c}].v = {tmp}.c[{c}].v;");
                }
            }
            _ => return Err(self.unsupported("storing this padded type")),
        }
        body.push_str(" }");
        Ok(body)
    }
}

fn zero_scalar(s: Scalar) -> String {
    match (s.kind, s.width) {
        (ScalarKind::Bool, _) => "false".to_owned(),
        (ScalarKind::Float, 4) => "0.0f".to_owned(),
        (ScalarKind::Float, 2) => "XH_F16(0.0f)".to_owned(),
        (ScalarKind::Float, _) => "0.0".to_owned(),
        (ScalarKind::Uint, 4) => "0u".to_owned(),
        _ => "0".to_owned(),
    }
}

/// Most elements an array constructor may list: each becomes a parameter of a C function, and
/// C compilers are only required to take 127 (gcc, clang and NVRTC take far more).
pub(super) const MAX_CONSTRUCTED_ARRAY: u32 = 1024;

/// The types that a `Compose` expression builds, in any function or constant expression.
fn composed_types(module: &naga::Module) -> HashSet<Handle<Type>> {
    let mut types = HashSet::new();
    let mut visit = |expressions: &naga::Arena<Expression>| {
        for (_, expression) in expressions.iter() {
            if let Expression::Compose { ty, .. } = expression {
                types.insert(*ty);
            }
        }
    };
    visit(&module.global_expressions);
    for (_, function) in module.functions.iter() {
        visit(&function.expressions);
    }
    for entry in &module.entry_points {
        visit(&entry.function.expressions);
    }
    types
}
