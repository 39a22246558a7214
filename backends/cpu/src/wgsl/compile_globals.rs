//! The entry point's interface: built-in inputs, global variables (buffer bindings, the
//! scalar block, workgroup and private memory) and compile-time constants.

use super::compile::{expression_name, Compiler, Ptr, Space, Val};
use super::program::{BindingInfo, Builtin, HostSpace, Instr, Reg};
use super::types::Num;
use naga::common::wgsl::TypeContext;
use naga::valid::{FunctionInfo, GlobalUse};
use naga::{AddressSpace, Expression, Handle, TypeInner};
use xhal_backend::{Error, Result};

/// Workgroup memory by WGSL's layout (the device's `max_workgroup_memory`).
const MAX_WORKGROUP_BYTES: u64 = 32768;

impl<'m> Compiler<'m> {
    pub(super) fn workgroup_size(&self, entry: &naga::EntryPoint) -> Result<[u32; 3]> {
        let mut size = entry.workgroup_size;
        if let Some(overrides) = entry.workgroup_size_overrides {
            for (dimension, expression) in size.iter_mut().zip(overrides) {
                if let Some(expression) = expression {
                    let words = self.global_const(expression)?;
                    *dimension = words.first().copied().unwrap_or(0);
                }
            }
        }
        Ok(size)
    }

    pub(super) fn bind_builtins(
        &mut self,
        binding: Option<&naga::Binding>,
        ty: Handle<naga::Type>,
        regs: &[Reg],
        out: &mut Vec<(Builtin, Vec<Reg>)>,
    ) -> Result<()> {
        match binding {
            Some(naga::Binding::BuiltIn(builtin)) => {
                let builtin = match builtin {
                    naga::BuiltIn::GlobalInvocationId => Builtin::GlobalInvocationId,
                    naga::BuiltIn::LocalInvocationId => Builtin::LocalInvocationId,
                    naga::BuiltIn::LocalInvocationIndex => Builtin::LocalInvocationIndex,
                    naga::BuiltIn::WorkGroupId => Builtin::WorkgroupId,
                    naga::BuiltIn::NumWorkGroups => Builtin::NumWorkgroups,
                    naga::BuiltIn::WorkGroupSize => Builtin::WorkgroupSize,
                    other => return Err(Error::unsupported(format!("the built-in input {other:?}"))),
                };
                out.push((builtin, regs.to_vec()));
                Ok(())
            }
            Some(naga::Binding::Location { .. }) => {
                Err(Error::unsupported("a @location input in a compute entry point"))
            }
            None => match self.types.inner(ty) {
                TypeInner::Struct { members, .. } => {
                    let mut slot = 0usize;
                    for member in members {
                        let count = self.types.slots(self.types.inner(member.ty))? as usize;
                        let part = regs.get(slot..slot + count).unwrap_or_default();
                        self.bind_builtins(member.binding.as_ref(), member.ty, part, out)?;
                        slot += count;
                    }
                    Ok(())
                }
                _ => Err(Error::unsupported("an entry-point argument without a binding")),
            },
        }
    }

    pub(super) fn globals(&mut self, info: &FunctionInfo, layouter: &naga::proc::Layouter) -> Result<Globals> {
        let mut globals = Globals::default();
        let mut storage = Vec::new();
        let mut workgroup_bytes = 0u64;
        for (handle, var) in self.module.global_variables.iter() {
            if info[handle].is_empty() {
                continue;
            }
            let name = var.name.clone().unwrap_or_else(|| format!("global{}", handle.index()));
            let pointee = self.types.inner(var.ty).clone();
            let ptr = match var.space {
                AddressSpace::Storage { access } => {
                    let binding = var
                        .binding
                        .ok_or_else(|| Error::invalid_argument(format!("storage buffer `{name}` has no @binding")))?;
                    if binding.group != 0 {
                        return Err(Error::invalid_argument(format!(
                            "`{name}` is at @group({}) @binding({}); xhal kernels use only @group(0)",
                            binding.group, binding.binding
                        )));
                    }
                    let writes = info[handle].intersects(GlobalUse::WRITE | GlobalUse::ATOMIC)
                        && access.contains(naga::StorageAccess::STORE);
                    let layout = layouter[var.ty];
                    storage.push((
                        binding.binding,
                        BindingInfo {
                            name: name.clone(),
                            type_name: self.module.to_ctx().type_to_string(var.ty),
                            writes,
                            min_size: self.min_binding_size(&pointee, layout)?,
                        },
                    ));
                    let place = self.place(format!("binding {} (`{name}`)", binding.binding));
                    Ptr {
                        space: Space::Host(HostSpace::Binding(binding.binding)),
                        base: 0,
                        offset: None,
                        pointee,
                        place,
                    }
                }
                AddressSpace::Immediate => {
                    globals.immediate_size = layouter[var.ty].size as usize;
                    globals.immediate_name = Some(name.clone());
                    let place = self.place(format!("the scalar block (`{name}`)"));
                    Ptr {
                        space: Space::Host(HostSpace::Immediate),
                        base: 0,
                        offset: None,
                        pointee,
                        place,
                    }
                }
                AddressSpace::WorkGroup => {
                    let layout = layouter[var.ty];
                    let align = u64::from(layout.alignment * 1);
                    workgroup_bytes = workgroup_bytes.div_ceil(align) * align + u64::from(layout.size);
                    let base = globals.shared_words;
                    globals.shared_words = base
                        .checked_add(self.types.slots(&pointee)?)
                        .ok_or_else(|| Error::unsupported("workgroup memory larger than 2^32 words"))?;
                    let place = self.place(format!("workgroup variable `{name}`"));
                    Ptr {
                        space: Space::Shared,
                        base,
                        offset: None,
                        pointee,
                        place,
                    }
                }
                AddressSpace::Private => {
                    let regs = self.alloc_n(self.types.slots(&pointee)?)?;
                    self.variable_registers(&regs);
                    let init = match var.init {
                        Some(init) => self.global_const(init)?,
                        None => vec![0; regs.len()],
                    };
                    for (reg, value) in regs.iter().zip(init) {
                        globals.prologue.push(Instr::Fill { dst: *reg, value });
                    }
                    let place = self.place(format!("private variable `{name}`"));
                    Ptr {
                        space: Space::Lane,
                        base: regs.first().copied().unwrap_or(0),
                        offset: None,
                        pointee,
                        place,
                    }
                }
                AddressSpace::Uniform => {
                    return Err(Error::invalid_argument(format!(
                        "`{name}` is a uniform buffer; xhal kernels take buffers as `var<storage>` and scalars in \
                         one `var<immediate>`"
                    )))
                }
                AddressSpace::Handle => {
                    return Err(Error::unsupported(format!(
                        "`{name}` is a texture, sampler or other handle; the cpu backend runs kernels on storage \
                         buffers only"
                    )))
                }
                other => {
                    return Err(Error::unsupported(format!(
                        "`{name}` is in the {other:?} address space, which compute kernels cannot use"
                    )))
                }
            };
            if let Some(slot) = self.globals.get_mut(handle.index()) {
                *slot = Some(Val::Ptr(ptr));
            }
        }
        if workgroup_bytes > MAX_WORKGROUP_BYTES {
            return Err(Error::unsupported(format!(
                "the kernel uses {workgroup_bytes} bytes of workgroup memory; the device has {MAX_WORKGROUP_BYTES}"
            )));
        }
        storage.sort_by_key(|(binding, _)| *binding);
        for (expected, (binding, info)) in storage.into_iter().enumerate() {
            if binding as usize != expected {
                return Err(Error::invalid_argument(format!(
                    "the kernel uses @binding({binding}) (`{}`) but not @binding({expected}); buffer arguments are \
                     positional, so the buffers an entry point uses must be @binding(0) to @binding(n-1)",
                    info.name
                )));
            }
            globals.bindings.push(info);
        }
        Ok(globals)
    }

    /// WebGPU's minimum binding size: a runtime-sized array counts as one element, and a
    /// struct holding one rounds up to its alignment.
    fn min_binding_size(&self, inner: &TypeInner, layout: naga::proc::TypeLayout) -> Result<u64> {
        let align = u64::from(layout.alignment * 1);
        Ok(match *inner {
            TypeInner::Array {
                size: naga::ArraySize::Dynamic,
                stride,
                ..
            } => u64::from(stride),
            TypeInner::Struct { ref members, span } => match members.last() {
                Some(last) => match *self.types.inner(last.ty) {
                    TypeInner::Array {
                        size: naga::ArraySize::Dynamic,
                        stride,
                        ..
                    } => (u64::from(last.offset) + u64::from(stride)).div_ceil(align) * align,
                    _ => u64::from(span),
                },
                None => u64::from(span),
            },
            _ => u64::from(layout.size),
        })
    }

    // ---- constants ----------------------------------------------------------------------

    /// The words of a constant expression in the module's global arena.
    pub(super) fn global_const(&self, handle: Handle<Expression>) -> Result<Vec<u32>> {
        let arena = &self.module.global_expressions;
        Ok(match arena[handle] {
            Expression::Literal(literal) => literal_words(literal)?,
            Expression::Constant(constant) => self.global_const(self.module.constants[constant].init)?,
            Expression::Override(handle) => {
                let item = &self.module.overrides[handle];
                let init = item.init.ok_or_else(|| {
                    Error::unsupported(format!(
                        "override `{}` has no default value, and the cpu backend takes no pipeline constants",
                        item.name.as_deref().unwrap_or("?")
                    ))
                })?;
                self.global_const(init)?
            }
            Expression::ZeroValue(ty) => vec![0; self.types.slots(self.types.inner(ty))? as usize],
            Expression::Compose { ref components, .. } => {
                let mut words = Vec::new();
                for component in components {
                    words.extend(self.global_const(*component)?);
                }
                words
            }
            Expression::Splat { size, value } => self.global_const(value)?.repeat(size as usize),
            Expression::Swizzle { size, vector, pattern } => {
                let words = self.global_const(vector)?;
                let width = match *self.info[vector].inner_with(&self.module.types) {
                    TypeInner::Vector { scalar, .. } => Num::of(scalar)?.words() as usize,
                    _ => 1,
                };
                let mut out = Vec::new();
                for component in pattern.iter().take(size as usize) {
                    let start = *component as usize * width;
                    out.extend(words.get(start..start + width).unwrap_or_default());
                }
                out
            }
            ref other => {
                return Err(Error::unsupported(format!(
                    "the constant expression {} (the cpu backend evaluates literals, constants and composites)",
                    expression_name(other)
                )))
            }
        })
    }
}

#[derive(Default)]
pub(super) struct Globals {
    pub(super) bindings: Vec<BindingInfo>,
    pub(super) immediate_size: usize,
    pub(super) immediate_name: Option<String>,
    pub(super) shared_words: u32,
    pub(super) prologue: Vec<Instr>,
}

/// A literal's slot words.
pub(super) fn literal_words(literal: naga::Literal) -> Result<Vec<u32>> {
    let wide = |value: u64| vec![value as u32, (value >> 32) as u32];
    Ok(match literal {
        naga::Literal::F64(value) => wide(value.to_bits()),
        naga::Literal::F32(value) => vec![value.to_bits()],
        naga::Literal::F16(value) => vec![value.to_f32().to_bits()],
        naga::Literal::U32(value) => vec![value],
        naga::Literal::I32(value) => vec![value as u32],
        naga::Literal::U64(value) => wide(value),
        naga::Literal::I64(value) => wide(value as u64),
        naga::Literal::Bool(value) => vec![u32::from(value)],
        other => {
            return Err(Error::unsupported(format!(
                "the literal {other:?} (16-bit integers and abstract numbers are not implemented)"
            )))
        }
    })
}
