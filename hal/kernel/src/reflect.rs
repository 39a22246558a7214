//! Reflection of compute entry points against the xhal argument ABI.
//!
//! The ABI (see the crate docs): the buffer arguments of a launch are the resource bindings
//! an entry point uses, storage and uniform buffers alike, in ascending (group, binding)
//! order, so gaps and several groups are allowed; the scalar block is the kernel's one
//! `var<immediate>`. Reflection is per entry
//! point and covers only the globals that entry point uses, directly or through the functions
//! it calls (naga's analysis already merges callee uses into the caller), because that is
//! what a launch of that entry point must supply.

use naga::common::wgsl::TypeContext as _;
use naga::proc::Layouter;
use naga::valid::{GlobalUse, ModuleInfo};
use naga::{AddressSpace, ArraySize, Handle, ScalarKind, TypeInner};

use crate::error::{KernelError, KernelErrorKind};

/// Reflection of one compute entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPointInfo {
    /// The entry point's function name.
    pub name: String,
    /// `@workgroup_size(x, y, z)`, with overrides replaced by their defaults and omitted
    /// dimensions as 1.
    pub workgroup_size: [u32; 3],
    /// The buffer arguments, in launch order ((group, binding) ascending):
    /// `buffers[i].argument == i`.
    pub buffers: Vec<BufferBindingInfo>,
    /// The scalar block, when this entry point uses the module's `var<immediate>`.
    pub scalars: Option<ScalarBlockInfo>,
    /// Bytes of `var<workgroup>` memory this entry point uses (each variable's WGSL size,
    /// placed at its alignment, summed), to compare with the device's shared-memory limit.
    pub workgroup_memory_bytes: u64,
}

impl EntryPointInfo {
    /// Invocations per workgroup: the product of the three workgroup dimensions.
    pub fn invocations_per_workgroup(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| u64::from(d)).product()
    }

    /// Size in bytes of the scalar block a launch must pass (0 when there is none).
    pub fn scalar_block_size(&self) -> u32 {
        self.scalars.as_ref().map_or(0, |s| s.size)
    }

    /// Whether a launch sees the same interface in `self` and `other`: the same entry point
    /// name, workgroup size and workgroup memory, buffers at the same argument positions with
    /// the same access, writes, sizes and strides, and a scalar block with the same size,
    /// alignment and member offsets. Names of variables, types and members are ignored: they
    /// do not reach a launch, and naga's WGSL writer renames ones that clash with WGSL's
    /// reserved words. So are the declared group and binding numbers and whether a read-only
    /// buffer is a uniform: a module with its bindings renumbered to positions, or its
    /// uniforms lowered to read-only storage, takes the same launches.
    pub fn same_interface(&self, other: &EntryPointInfo) -> bool {
        let buffer_shape = |b: &BufferBindingInfo| {
            (
                b.argument,
                b.access,
                b.writes,
                b.size,
                b.alignment,
                b.element.as_ref().map(|e| (e.stride, e.size)),
            )
        };
        let scalar_shape = |s: &ScalarBlockInfo| {
            (
                s.size,
                s.alignment,
                s.members.iter().map(|m| (m.offset, m.size)).collect::<Vec<_>>(),
            )
        };
        self.name == other.name
            && self.workgroup_size == other.workgroup_size
            && self.workgroup_memory_bytes == other.workgroup_memory_bytes
            && self.buffers.len() == other.buffers.len()
            && self
                .buffers
                .iter()
                .zip(&other.buffers)
                .all(|(a, b)| buffer_shape(a) == buffer_shape(b))
            && self.scalars.as_ref().map(scalar_shape) == other.scalars.as_ref().map(scalar_shape)
    }
}

/// How a kernel may access a buffer argument, from its declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferAccess {
    /// `var<storage, read>` (or `var<storage>`), or `var<uniform>`: the kernel only reads.
    Read,
    /// `var<storage, read_write>`: the kernel may read and write.
    ReadWrite,
}

/// The element of an array buffer: the top-level array, or a struct's trailing array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementInfo {
    /// WGSL spelling of the element type (`f32`, `vec3<f32>`, `Particle`).
    pub type_name: String,
    /// Bytes from one element to the next (WGSL rules: `vec3<f32>` has stride 16).
    pub stride: u32,
    /// Bytes the element itself occupies (`vec3<f32>`: 12); at most `stride`.
    pub size: u32,
}

/// How big a buffer argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferSize {
    /// A fixed-size type: a scalar, vector, struct or `array<T, N>`, of this many bytes.
    Fixed(u64),
    /// A runtime-sized array (`array<T>`), alone or as a struct's last member: `header_bytes`
    /// (the offset of the array; 0 for a bare array) followed by any number of elements
    /// `stride` bytes apart. `arrayLength` counts the elements that fit in the bound view.
    Runtime {
        /// Bytes before the array.
        header_bytes: u64,
        /// Bytes per element.
        stride: u32,
    },
}

/// Which address space a buffer argument is declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferSpace {
    /// `var<storage, ...>`.
    Storage,
    /// `var<uniform>`: read-only, of a fixed-size type laid out by the uniform address
    /// space's rules (which WGSL checks when the module is validated).
    Uniform,
}

/// One buffer argument of an entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferBindingInfo {
    /// The argument's position in a launch: its index among the bindings the entry point
    /// uses, in ascending (group, binding) order.
    pub argument: u32,
    /// `@group(g)` as declared.
    pub group: u32,
    /// `@binding(n)` as declared.
    pub binding: u32,
    /// Storage or uniform.
    pub space: BufferSpace,
    /// The variable's name in the WGSL source.
    pub name: String,
    /// Declared access mode.
    pub access: BufferAccess,
    /// Whether this entry point (or a function it calls) stores to the buffer or uses atomics
    /// on it; a `read_write` buffer the kernel only reads has `false`.
    pub writes: bool,
    /// WGSL spelling of the store type (`array<f32>`, `Particles`).
    pub type_name: String,
    /// The array element, for a top-level array (sized or not) or a struct whose last member
    /// is a runtime-sized array.
    pub element: Option<ElementInfo>,
    /// Fixed size, or header and stride of a runtime-sized array.
    pub size: BufferSize,
    /// Alignment of the store type in bytes (WGSL rules).
    pub alignment: u32,
}

impl BufferBindingInfo {
    /// Where the source declares it, for messages: `binding 2` in group 0, else
    /// `@group(1) @binding(0)`.
    pub fn declared_binding(&self) -> String {
        if self.group == 0 {
            format!("binding {}", self.binding)
        } else {
            format!("@group({}) @binding({})", self.group, self.binding)
        }
    }

    /// Fewest bytes a bound buffer view must have: WebGPU's *minimum buffer binding size*.
    ///
    /// For a fixed-size type, its size. For a type holding a runtime-sized array, the size of
    /// the same type with the array given exactly one element (`array<T>` becomes
    /// `array<T, 1>`), which for a struct rounds up to the struct's alignment. WebGPU requires
    /// this at bind time, so xhal enforces the same rule on every backend: a kernel that
    /// compiles for wgpu then never meets a view that only other backends would take.
    pub fn min_size(&self) -> u64 {
        match self.size {
            BufferSize::Fixed(bytes) => bytes,
            BufferSize::Runtime { header_bytes, stride } => {
                let unaligned = header_bytes.saturating_add(u64::from(stride));
                let align = u64::from(self.alignment.max(1));
                unaligned.div_ceil(align).saturating_mul(align)
            }
        }
    }

    /// Elements of the runtime-sized array that fit in a view of `view_bytes` bytes (what
    /// `arrayLength` returns in the kernel), or `None` for a fixed-size buffer.
    pub fn runtime_element_count(&self, view_bytes: u64) -> Option<u64> {
        match self.size {
            BufferSize::Fixed(_) => None,
            BufferSize::Runtime { header_bytes, stride } => {
                Some(view_bytes.saturating_sub(header_bytes) / u64::from(stride.max(1)))
            }
        }
    }
}

/// The scalar block: layout of the kernel's `var<immediate>`, by WGSL (std430-like) rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarBlockInfo {
    /// The variable's name in the WGSL source.
    pub name: String,
    /// WGSL spelling of its type (`Params`, `u32`, `vec4<f32>`).
    pub type_name: String,
    /// Size in bytes by WGSL's `SizeOf` (a struct's size rounds up to its alignment; a
    /// `vec3<f32>` alone is 12): the number of bytes a launch passes.
    pub size: u32,
    /// Alignment in bytes.
    pub alignment: u32,
    /// The struct's members in order. For a scalar or vector block there is one member,
    /// named like the variable, at offset 0, so every block is described the same way.
    pub members: Vec<ScalarMemberInfo>,
}

/// One member of the scalar block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarMemberInfo {
    /// Member name.
    pub name: String,
    /// Byte offset from the start of the block.
    pub offset: u32,
    /// Bytes the member occupies (`vec3<f32>`: 12).
    pub size: u32,
    /// WGSL spelling of its type.
    pub type_name: String,
}

/// Reflects every compute entry point of a validated module.
pub(crate) fn reflect_module(
    source: &str,
    module: &naga::Module,
    info: &ModuleInfo,
) -> Result<Vec<EntryPointInfo>, KernelError> {
    let mut layouter = Layouter::default();
    layouter.update(module.to_ctx()).map_err(|e| {
        KernelError::new(
            KernelErrorKind::Reflection,
            format!("cannot lay out the module's types: {e}"),
        )
    })?;
    let cx = Cx {
        source,
        module,
        layouter: &layouter,
    };
    let mut out = Vec::new();
    for (index, ep) in module.entry_points.iter().enumerate() {
        if ep.stage != naga::ShaderStage::Compute {
            continue;
        }
        out.push(cx.reflect_entry_point(ep, info.get_entry_point(index))?);
    }
    Ok(out)
}

struct Cx<'a> {
    source: &'a str,
    module: &'a naga::Module,
    layouter: &'a Layouter,
}

impl Cx<'_> {
    fn reflect_entry_point(
        &self,
        ep: &naga::EntryPoint,
        uses: &naga::valid::FunctionInfo,
    ) -> Result<EntryPointInfo, KernelError> {
        let mut buffers = Vec::new();
        let mut scalars = None;
        let mut workgroup_memory_bytes = 0u64;
        for (handle, var) in self.module.global_variables.iter() {
            let used = uses
                .global_uses
                .get(handle.index())
                .copied()
                .unwrap_or(GlobalUse::empty());
            if used.is_empty() {
                continue;
            }
            match var.space {
                AddressSpace::Storage { access } => {
                    let binding = self.check_binding(ep, handle, var)?;
                    buffers.push((handle, self.buffer(var, binding, BufferSpace::Storage, access, used)?));
                }
                AddressSpace::Uniform => {
                    let binding = self.check_binding(ep, handle, var)?;
                    let access = naga::StorageAccess::LOAD;
                    buffers.push((handle, self.buffer(var, binding, BufferSpace::Uniform, access, used)?));
                }
                AddressSpace::Handle => {
                    return Err(self.interface_error(
                        ep,
                        handle,
                        format!(
                            "entry point `{}` uses `{}`, a texture, sampler or other handle{}; xhal kernels take \
                             only storage buffers and one `var<immediate>`",
                            ep.name,
                            var_name(var),
                            binding_text(var)
                        ),
                        "not a buffer",
                        "pass image data as a `var<storage>` array",
                    ))
                }
                AddressSpace::Immediate => scalars = Some(self.scalar_block(var)),
                AddressSpace::WorkGroup => {
                    let layout = self.layouter[var.ty];
                    let align = u64::from(bytes(layout.alignment));
                    workgroup_memory_bytes = workgroup_memory_bytes.div_ceil(align) * align + u64::from(layout.size);
                }
                // Per-invocation memory; nothing for a launch to supply. (Task and ray
                // payloads cannot reach a compute entry point past validation.)
                _ => {}
            }
        }
        // naga's validator has made sure no two of them share a (group, binding).
        buffers.sort_by_key(|(_, b)| (b.group, b.binding));
        for (position, (_, buffer)) in buffers.iter_mut().enumerate() {
            buffer.argument = u32::try_from(position).unwrap_or(u32::MAX);
        }
        Ok(EntryPointInfo {
            name: ep.name.clone(),
            workgroup_size: ep.workgroup_size,
            buffers: buffers.into_iter().map(|(_, b)| b).collect(),
            scalars,
            workgroup_memory_bytes,
        })
    }

    fn check_binding(
        &self,
        ep: &naga::EntryPoint,
        handle: Handle<naga::GlobalVariable>,
        var: &naga::GlobalVariable,
    ) -> Result<naga::ResourceBinding, KernelError> {
        let Some(binding) = var.binding else {
            // The validator requires a binding on storage variables; keep a clear error
            // rather than trusting that.
            return Err(self.interface_error(
                ep,
                handle,
                format!(
                    "entry point `{}` uses `{}`, a buffer without @binding",
                    ep.name,
                    var_name(var)
                ),
                "no binding",
                "declare each buffer with `@group(g) @binding(n)`",
            ));
        };
        if let TypeInner::BindingArray { .. } = self.module.types[var.ty].inner {
            return Err(self.interface_error(
                ep,
                handle,
                format!(
                    "entry point `{}` uses `{}`, a binding array; xhal buffer arguments are single buffers",
                    ep.name,
                    var_name(var)
                ),
                "binding array",
                "declare one `var<storage>` per buffer argument",
            ));
        }
        Ok(binding)
    }

    fn buffer(
        &self,
        var: &naga::GlobalVariable,
        binding: naga::ResourceBinding,
        space: BufferSpace,
        access: naga::StorageAccess,
        used: GlobalUse,
    ) -> Result<BufferBindingInfo, KernelError> {
        let ctx = self.module.to_ctx();
        let layout = self.layouter[var.ty];
        let (element, size) = match self.module.types[var.ty].inner {
            TypeInner::Array { base, size, stride } => {
                let element = Some(self.element(base, stride));
                match size {
                    ArraySize::Dynamic => (
                        element,
                        BufferSize::Runtime {
                            header_bytes: 0,
                            stride,
                        },
                    ),
                    _ => (element, BufferSize::Fixed(u64::from(layout.size))),
                }
            }
            TypeInner::Struct { ref members, span } => {
                let trailing = members.last().and_then(|last| match self.module.types[last.ty].inner {
                    TypeInner::Array {
                        base,
                        size: ArraySize::Dynamic,
                        stride,
                    } => Some((last.offset, base, stride)),
                    _ => None,
                });
                match trailing {
                    Some((offset, base, stride)) => (
                        Some(self.element(base, stride)),
                        BufferSize::Runtime {
                            header_bytes: u64::from(offset),
                            stride,
                        },
                    ),
                    None => (None, BufferSize::Fixed(u64::from(span))),
                }
            }
            ref other => {
                let bytes = other.try_size(ctx).ok_or_else(|| {
                    KernelError::new(
                        KernelErrorKind::Reflection,
                        format!("cannot size buffer `{}`", var_name(var)),
                    )
                })?;
                (None, BufferSize::Fixed(u64::from(bytes)))
            }
        };
        Ok(BufferBindingInfo {
            // Set once the entry point's bindings are sorted.
            argument: 0,
            group: binding.group,
            binding: binding.binding,
            space,
            name: var_name(var).to_owned(),
            access: if access.contains(naga::StorageAccess::STORE) {
                BufferAccess::ReadWrite
            } else {
                BufferAccess::Read
            },
            writes: used.intersects(GlobalUse::WRITE | GlobalUse::ATOMIC)
                && access.contains(naga::StorageAccess::STORE),
            type_name: ctx.type_to_string(var.ty),
            element,
            size,
            alignment: bytes(layout.alignment),
        })
    }

    fn element(&self, base: Handle<naga::Type>, stride: u32) -> ElementInfo {
        ElementInfo {
            type_name: self.module.to_ctx().type_to_string(base),
            stride,
            size: self.layouter[base].size,
        }
    }

    fn scalar_block(&self, var: &naga::GlobalVariable) -> ScalarBlockInfo {
        let ctx = self.module.to_ctx();
        let layout = self.layouter[var.ty];
        let alignment = bytes(layout.alignment);
        let name = var_name(var).to_owned();
        let type_name = ctx.type_to_string(var.ty);
        let (size, members) = match self.module.types[var.ty].inner {
            TypeInner::Struct { ref members, span } => (
                span,
                members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| ScalarMemberInfo {
                        name: m.name.clone().unwrap_or_else(|| format!("member{i}")),
                        offset: m.offset,
                        size: self.layouter[m.ty].size,
                        type_name: ctx.type_to_string(m.ty),
                    })
                    .collect(),
            ),
            _ => (
                layout.size,
                vec![ScalarMemberInfo {
                    name: name.clone(),
                    offset: 0,
                    size: layout.size,
                    type_name: type_name.clone(),
                }],
            ),
        };
        ScalarBlockInfo {
            name,
            type_name,
            size,
            alignment,
            members,
        }
    }

    /// A reflection error pointing at the declaration of `handle`.
    fn interface_error(
        &self,
        ep: &naga::EntryPoint,
        handle: Handle<naga::GlobalVariable>,
        message: String,
        label: &str,
        note: impl Into<String>,
    ) -> KernelError {
        let span = self.module.global_variables.get_span(handle);
        KernelError::at(KernelErrorKind::Reflection, message, self.source, span, label)
            .with_note(note)
            .with_note(format!("while reflecting entry point `{}`", ep.name))
    }
}

/// An alignment in bytes. naga's `Alignment` only gives its value away through `Mul<u32>`.
fn bytes(alignment: naga::proc::Alignment) -> u32 {
    alignment * 1
}

fn var_name(var: &naga::GlobalVariable) -> &str {
    var.name.as_deref().unwrap_or("<unnamed>")
}

fn binding_text(var: &naga::GlobalVariable) -> String {
    var.binding.map_or_else(String::new, |b| {
        format!(" at @group({}) @binding({})", b.group, b.binding)
    })
}

/// `XHAL_FEATURE_*` bits a module needs: every type in the module and every expression's
/// type (expressions can have types that never enter the type arena, such as an `f64`
/// temporary) is checked for 16/64-bit floats, 64-bit integers and atomics.
pub(crate) fn required_features(module: &naga::Module, info: &ModuleInfo) -> u64 {
    let mut features = 0;
    for (_, ty) in module.types.iter() {
        features |= type_features(&ty.inner);
    }
    let mut visit = |function: &naga::Function, fi: &naga::valid::FunctionInfo| {
        for (expr, _) in function.expressions.iter() {
            if expr.index() < fi.expression_count() {
                features |= type_features(fi[expr].ty.inner_with(&module.types));
            }
        }
    };
    for (handle, function) in module.functions.iter() {
        visit(function, &info[handle]);
    }
    for (index, ep) in module.entry_points.iter().enumerate() {
        visit(&ep.function, info.get_entry_point(index));
    }
    features
}

fn type_features(inner: &TypeInner) -> u64 {
    use xhal_abi::XHAL_FEATURE_I64;
    use xhal_abi::{XHAL_FEATURE_ATOMICS_32, XHAL_FEATURE_ATOMICS_64, XHAL_FEATURE_F16, XHAL_FEATURE_F64};
    let (scalar, atomic) = match *inner {
        TypeInner::Atomic(scalar) => (scalar, true),
        TypeInner::ValuePointer { scalar, .. } => (scalar, false),
        ref other => match other.scalar() {
            Some(scalar) => (scalar, false),
            None => return 0,
        },
    };
    let mut bits = match (scalar.kind, scalar.width) {
        (ScalarKind::Float, 2) => XHAL_FEATURE_F16,
        (ScalarKind::Float, 8) => XHAL_FEATURE_F64,
        (ScalarKind::Sint | ScalarKind::Uint, 8) => XHAL_FEATURE_I64,
        _ => 0,
    };
    if atomic {
        bits |= if scalar.width == 8 {
            XHAL_FEATURE_ATOMICS_64
        } else {
            XHAL_FEATURE_ATOMICS_32
        };
    }
    bits
}
