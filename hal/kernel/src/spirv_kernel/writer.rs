//! The Kernel SPIR-V writer: naga IR to words. See the module docs of [`crate::spirv_kernel`]
//! for the conventions.

use std::collections::{BTreeSet, HashMap};

use naga::proc::TypeResolution;
use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{
    AddressSpace, ArraySize, BinaryOperator as Bin, Block, Expression, Function, GlobalVariable, Handle, Literal,
    MathFunction as Mf, Scalar, ScalarKind, Statement, Type, TypeInner, UnaryOperator, VectorSize,
};
use spirv::{Capability, Decoration, Op, OpenclStd100Op as Cl, StorageClass as Sc};

use super::words::{inst, string, Module};
use super::SpirvKernel;
use crate::c::{c_symbol, CEntryPoint};
use crate::error::{KernelError, KernelErrorKind};
use crate::ir::{self, closure, scalar_wgsl, uses_length};
use crate::wgsl::WgslModule;

type Res<T> = Result<T, KernelError>;

const TARGET: &str = "Kernel SPIR-V";

/// `Workgroup` and `Device` scopes, as SPIR-V numbers them.
const SCOPE_DEVICE: u32 = spirv::Scope::Device as u32;
const SCOPE_WORKGROUP: u32 = spirv::Scope::Workgroup as u32;
const SEQ_CST: u32 = 0x10;
const WORKGROUP_MEMORY: u32 = 0x100;
const CROSS_WORKGROUP_MEMORY: u32 = 0x200;

/// One slot of a struct as written: a WGSL member, or padding.
#[derive(Clone, Copy)]
enum Slot {
    Member(usize),
    Pad(u32),
}

#[derive(Clone)]
struct MemberRepr {
    /// Index of the member in the SPIR-V struct (padding members shift it).
    index: u32,
    /// A `vec3` whose 16-byte SPIR-V vector would overlap the next member: kept as an array
    /// of three scalars.
    tight: bool,
    offset: u32,
    ty: Handle<Type>,
}

#[derive(Clone)]
struct StructRepr {
    /// The SPIR-V struct; `None` for a struct that ends in a runtime-sized array (reached
    /// only through its buffer pointer, by address arithmetic).
    id: Option<u32>,
    slots: Vec<Slot>,
    members: Vec<MemberRepr>,
}

/// What a pointer expression is in SPIR-V.
#[derive(Clone, Copy)]
enum Place {
    /// A pointer to the value's memory representation; `tight` when a vector is stored as an
    /// array of its components.
    Ptr { id: u32, tight: bool },
    /// A pointer to the first element of a runtime-sized array, in the buffer of `binding`
    /// (unknown behind a pointer parameter).
    Elems { id: u32, binding: Option<u32> },
    /// A pointer to the start of a struct that ends in a runtime-sized array.
    RtStruct {
        id: u32,
        ty: Handle<Type>,
        binding: Option<u32>,
    },
}

struct FnRepr {
    id: u32,
    ty: u32,
    /// Globals passed as leading parameters (buffers, the scalar block, private variables).
    ctx: Vec<Handle<GlobalVariable>>,
    /// Whether a pointer to the buffer byte lengths follows them.
    lengths: bool,
}

struct Writer<'a> {
    m: &'a naga::Module,
    info: &'a ModuleInfo,
    src: &'a str,
    out: Module,
    ext: u32,
    structs: HashMap<Handle<Type>, StructRepr>,
    /// The scalar each scalar type id stands for: zeros of scalars and vectors are written as
    /// `OpConstant` / `OpConstantComposite`, since some consumers (the Khronos LLVM
    /// translator of LLVM 15) take `OpConstantNull` only for aggregates.
    scalars: HashMap<u32, Scalar>,
    /// The same for vector type ids: component and count.
    vectors: HashMap<u32, (Scalar, u32)>,
    functions: HashMap<Handle<Function>, FnRepr>,
    workgroup: HashMap<Handle<GlobalVariable>, u32>,
    /// `LocalInvocationId`, `WorkgroupId`, `NumWorkgroups` input variables.
    builtins: [u32; 3],
}

/// Per-function state.
struct Fx<'a> {
    f: &'a Function,
    fi: &'a FunctionInfo,
    values: HashMap<Handle<Expression>, u32>,
    locals: HashMap<Handle<naga::LocalVariable>, u32>,
    args: Vec<u32>,
    ctx: HashMap<Handle<GlobalVariable>, u32>,
    lengths: Option<u32>,
    vars: Vec<u32>,
    body: Vec<u32>,
    terminated: bool,
    breaks: Vec<u32>,
    continues: Vec<u32>,
    entry: bool,
}

impl Fx<'_> {
    /// Places label `id`; a block still open falls through to it.
    fn label(&mut self, id: u32) {
        if !self.terminated {
            inst(&mut self.body, Op::Branch, &[id]);
        }
        inst(&mut self.body, Op::Label, &[id]);
        self.terminated = false;
    }

    fn branch(&mut self, target: u32) {
        if !self.terminated {
            inst(&mut self.body, Op::Branch, &[target]);
            self.terminated = true;
        }
    }
}

fn align_up(v: u32, a: u32) -> u32 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a) * a
    }
}

pub(super) fn write(module: &WgslModule, entry: Option<&str>) -> Res<SpirvKernel> {
    let m = module.naga_module();
    let mut w = Writer {
        m,
        info: module.module_info(),
        src: module.source(),
        out: Module::default(),
        ext: 0,
        structs: HashMap::new(),
        scalars: HashMap::new(),
        vectors: HashMap::new(),
        functions: HashMap::new(),
        workgroup: HashMap::new(),
        builtins: [0; 3],
    };
    for cap in [Capability::Addresses, Capability::Kernel, Capability::Int64] {
        w.out.capabilities.insert(cap as u32);
    }
    w.ext = w.out.id();
    let mut import = vec![w.ext];
    import.extend(string("OpenCL.std"));
    inst(&mut w.out.imports, Op::ExtInstImport, &import);
    w.check_types()?;
    w.make_structs()?;

    let selected: Vec<usize> = ir::compute_entries(m, entry);
    let mut reachable = BTreeSet::new();
    for &i in &selected {
        reachable.extend(closure(m, &m.entry_points[i].function.body));
    }

    // Built-in inputs, one `size_t` vector each.
    let u64t = w.uint(8);
    let v3 = w.out.ty(Op::TypeVector, &[u64t, 3]);
    let pin = w.out.ty(Op::TypePointer, &[Sc::Input as u32, v3]);
    for (k, b) in [
        spirv::BuiltIn::LocalInvocationId,
        spirv::BuiltIn::WorkgroupId,
        spirv::BuiltIn::NumWorkgroups,
    ]
    .into_iter()
    .enumerate()
    {
        let id = w.out.id();
        inst(&mut w.out.globals, Op::Variable, &[pin, id, Sc::Input as u32]);
        inst(
            &mut w.out.decorations,
            Op::Decorate,
            &[id, Decoration::BuiltIn as u32, b as u32],
        );
        inst(&mut w.out.decorations, Op::Decorate, &[id, Decoration::Constant as u32]);
        w.builtins[k] = id;
    }

    // Workgroup variables live at module scope.
    for (g, var) in m.global_variables.iter() {
        if var.space == AddressSpace::WorkGroup {
            let t = w.ty(var.ty)?;
            let pt = w.out.ty(Op::TypePointer, &[Sc::Workgroup as u32, t]);
            let id = w.out.id();
            inst(&mut w.out.globals, Op::Variable, &[pt, id, Sc::Workgroup as u32]);
            w.workgroup.insert(g, id);
        }
    }

    // Helper functions: ids and types first, since calls may come before definitions.
    let mut uses_len: HashMap<Handle<Function>, bool> = HashMap::new();
    for &h in &reachable {
        let f = &m.functions[h];
        // The element counts serve `arrayLength` and the clamping of runtime-sized indices.
        let any = uses_length(f)
            || closure(m, &f.body).iter().any(|&c| uses_length(&m.functions[c]))
            || ir::touches_runtime_array(w.m, &w.info[h]);
        uses_len.insert(h, any);
    }
    for &h in &reachable {
        let f = &m.functions[h];
        let fi = &w.info[h];
        let mut ctx = Vec::new();
        let mut params = Vec::new();
        for (g, var) in m.global_variables.iter() {
            if fi[g].is_empty() {
                continue;
            }
            match var.space {
                AddressSpace::Storage { .. } => {
                    ctx.push(g);
                    params.push(w.buffer_param_ty(var.ty)?);
                }
                AddressSpace::Immediate => {
                    ctx.push(g);
                    let t = w.immediate_mem_ty(var.ty)?;
                    params.push(w.out.ty(Op::TypePointer, &[Sc::Function as u32, t]));
                }
                AddressSpace::Private => {
                    ctx.push(g);
                    let t = w.ty(var.ty)?;
                    params.push(w.out.ty(Op::TypePointer, &[Sc::Function as u32, t]));
                }
                // By pointer, as the C dialects pass them: PoCL (3.1) turns a kernel's
                // workgroup variables into hidden arguments of the kernel alone, so a function
                // that named the module-scope variable itself would reach other memory.
                AddressSpace::WorkGroup => {
                    ctx.push(g);
                    let t = w.ty(var.ty)?;
                    params.push(w.out.ty(Op::TypePointer, &[Sc::Workgroup as u32, t]));
                }
                other => {
                    return Err(w.unsupported_at(
                        &format!("a global in the {other:?} address space"),
                        m.global_variables.get_span(g),
                    ))
                }
            }
        }
        let lengths = uses_len[&h];
        if lengths {
            params.push(w.lengths_elem_ptr());
        }
        for arg in &f.arguments {
            params.push(w.ty(arg.ty)?);
        }
        let ret = match &f.result {
            Some(r) => w.ty(r.ty)?,
            None => w.void(),
        };
        let mut fty = vec![ret];
        fty.extend(params);
        let ty = w.out.ty(Op::TypeFunction, &fty);
        let id = w.out.id();
        w.functions.insert(h, FnRepr { id, ty, ctx, lengths });
    }
    for &h in &reachable {
        w.write_function(h)?;
    }
    let mut entry_points = Vec::new();
    for &i in &selected {
        entry_points.push(w.write_entry(i)?);
    }
    Ok(SpirvKernel {
        words: w.out.finish(),
        entry_points,
    })
}

impl<'a> Writer<'a> {
    // ----- errors -----

    fn unsupported(&self, what: &str) -> KernelError {
        ir::unsupported(what, TARGET)
    }

    fn unsupported_at(&self, what: &str, span: naga::Span) -> KernelError {
        ir::unsupported_at(what, TARGET, self.src, span, "not supported in Kernel SPIR-V")
    }

    fn expr_err(&self, fx: &Fx, h: Handle<Expression>, what: &str) -> KernelError {
        self.unsupported_at(what, fx.f.expressions.get_span(h))
    }

    /// Gives an error without a location the location of expression `h`.
    fn relocate(&self, fx: &Fx, h: Handle<Expression>, e: KernelError) -> KernelError {
        ir::relocate(
            e,
            self.src,
            fx.f.expressions.get_span(h),
            "not supported in Kernel SPIR-V",
        )
    }

    fn internal(what: &str) -> KernelError {
        KernelError::new(KernelErrorKind::Internal, format!("Kernel SPIR-V writer: {what}"))
    }

    fn check_types(&self) -> Res<()> {
        for (h, t) in self.m.types.iter() {
            let span = self.m.types.get_span(h);
            match &t.inner {
                TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } | TypeInner::Matrix { scalar: s, .. } => {
                    if s.width == 2 || matches!(s.kind, ScalarKind::AbstractInt | ScalarKind::AbstractFloat) {
                        return Err(self.unsupported_at(&format!("the type {}", scalar_wgsl(*s)), span));
                    }
                }
                TypeInner::Atomic(_) => {}
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

    // ----- types -----

    fn void(&mut self) -> u32 {
        self.out.ty(Op::TypeVoid, &[])
    }

    fn bool_ty(&mut self) -> u32 {
        let id = self.out.ty(Op::TypeBool, &[]);
        self.scalars.entry(id).or_insert(Scalar::BOOL);
        id
    }

    fn uint(&mut self, width: u8) -> u32 {
        if width == 1 {
            self.out.capabilities.insert(Capability::Int8 as u32);
        }
        let id = self.out.ty(Op::TypeInt, &[u32::from(width) * 8, 0]);
        if width >= 4 {
            self.scalars.entry(id).or_insert(Scalar {
                kind: ScalarKind::Uint,
                width,
            });
        }
        id
    }

    fn scalar_ty(&mut self, s: Scalar) -> Res<u32> {
        let id = self.scalar_ty_inner(s)?;
        self.scalars.entry(id).or_insert(s);
        Ok(id)
    }

    fn scalar_ty_inner(&mut self, s: Scalar) -> Res<u32> {
        Ok(match (s.kind, s.width) {
            (ScalarKind::Bool, _) => self.bool_ty(),
            (ScalarKind::Sint | ScalarKind::Uint, 4 | 8) => self.uint(s.width),
            (ScalarKind::Float, 4) => self.out.ty(Op::TypeFloat, &[32]),
            (ScalarKind::Float, 8) => {
                self.out.capabilities.insert(Capability::Float64 as u32);
                self.out.ty(Op::TypeFloat, &[64])
            }
            _ => return Err(self.unsupported(&format!("the type {}", scalar_wgsl(s)))),
        })
    }

    fn vec_ty(&mut self, s: Scalar, n: u32) -> Res<u32> {
        let c = self.scalar_ty(s)?;
        let id = self.out.ty(Op::TypeVector, &[c, n]);
        self.vectors.entry(id).or_insert((s, n));
        Ok(id)
    }

    /// Scalar type, or vector of `n` when `n` is given.
    fn shaped(&mut self, s: Scalar, n: Option<u32>) -> Res<u32> {
        match n {
            Some(n) => self.vec_ty(s, n),
            None => self.scalar_ty(s),
        }
    }

    fn array_ty(&mut self, elem: u32, n: u32) -> u32 {
        let u32t = self.uint(4);
        let len = self.out.constant(Op::Constant, u32t, &[n]);
        self.out.ty(Op::TypeArray, &[elem, len])
    }

    fn ptr(&mut self, sc: Sc, t: u32) -> u32 {
        self.out.ty(Op::TypePointer, &[sc as u32, t])
    }

    fn storage_class(space: AddressSpace) -> Sc {
        match space {
            AddressSpace::Storage { .. } => Sc::CrossWorkgroup,
            AddressSpace::WorkGroup => Sc::Workgroup,
            _ => Sc::Function,
        }
    }

    /// The type of a value (and of its memory, except for packed `vec3` members).
    fn ty(&mut self, h: Handle<Type>) -> Res<u32> {
        if let Some(s) = self.structs.get(&h) {
            return s
                .id
                .ok_or_else(|| self.unsupported("a value of a struct that ends in a runtime-sized array"));
        }
        let inner = self.m.types[h].inner.clone();
        self.inner_ty(&inner)
    }

    fn inner_ty(&mut self, inner: &TypeInner) -> Res<u32> {
        Ok(match inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => self.scalar_ty(*s)?,
            TypeInner::Vector { size, scalar } => self.vec_ty(*scalar, *size as u32)?,
            TypeInner::Matrix { columns, rows, scalar } => {
                let col = self.vec_ty(*scalar, *rows as u32)?;
                self.array_ty(col, *columns as u32)
            }
            TypeInner::Array {
                base,
                size: ArraySize::Constant(n),
                ..
            } => {
                let e = self.ty(*base)?;
                self.array_ty(e, n.get())
            }
            TypeInner::Pointer { base, space } => {
                let t = self.pointee_ty(*base)?;
                self.ptr(Self::storage_class(*space), t)
            }
            TypeInner::ValuePointer { size, scalar, space } => {
                let t = self.shaped(*scalar, size.map(|s| s as u32))?;
                self.ptr(Self::storage_class(*space), t)
            }
            TypeInner::Struct { .. } => {
                let found = self.m.types.iter().find(|(_, t)| &t.inner == inner).map(|(h, _)| h);
                match found {
                    Some(h) => self.ty(h)?,
                    None => return Err(Self::internal("a struct type not in the module")),
                }
            }
            TypeInner::Array { .. } => return Err(self.unsupported("a runtime-sized array value")),
            _ => return Err(self.unsupported("a value of this type")),
        })
    }

    fn res_ty(&mut self, r: &TypeResolution) -> Res<u32> {
        match r {
            TypeResolution::Handle(h) => self.ty(*h),
            TypeResolution::Value(inner) => self.inner_ty(inner),
        }
    }

    /// What a pointer to `base` points to: the element for a runtime-sized array.
    fn pointee_ty(&mut self, base: Handle<Type>) -> Res<u32> {
        match &self.m.types[base].inner {
            TypeInner::Array {
                base: e,
                size: ArraySize::Dynamic,
                ..
            } => self.ty(*e),
            TypeInner::Struct { .. } if self.structs.get(&base).is_some_and(|s| s.id.is_none()) => Ok(self.uint(4)),
            _ => self.ty(base),
        }
    }

    /// The kernel parameter (and helper parameter) type of a buffer of type `t`.
    fn buffer_param_ty(&mut self, t: Handle<Type>) -> Res<u32> {
        let p = self.pointee_ty(t)?;
        Ok(self.ptr(Sc::CrossWorkgroup, p))
    }

    /// The memory type of the scalar block: vectors are arrays of their components, so that
    /// the by-value parameter has the size WGSL (and the C dialects) give it.
    fn immediate_mem_ty(&mut self, t: Handle<Type>) -> Res<u32> {
        match self.m.types[t].inner {
            TypeInner::Vector { size, scalar } => {
                let s = self.scalar_ty(scalar)?;
                Ok(self.array_ty(s, size as u32))
            }
            _ => self.ty(t),
        }
    }

    /// The type of the context parameter that points at the element counts of the
    /// runtime-sized arrays, one `u32` per binding.
    fn lengths_elem_ptr(&mut self) -> u32 {
        let u32t = self.uint(4);
        self.ptr(Sc::Function, u32t)
    }

    /// Size in bytes of the SPIR-V type of `h` under the OpenCL rules (`vec3` takes 16).
    fn spv_size(&self, h: Handle<Type>) -> u32 {
        match &self.m.types[h].inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => u32::from(s.width).max(4),
            TypeInner::Vector { size, scalar } => {
                let n = if *size == VectorSize::Tri { 4 } else { *size as u32 };
                n * u32::from(scalar.width)
            }
            TypeInner::Matrix { columns, rows, scalar } => {
                let n = if *rows == VectorSize::Tri { 4 } else { *rows as u32 };
                *columns as u32 * n * u32::from(scalar.width)
            }
            TypeInner::Array {
                base,
                size: ArraySize::Constant(n),
                ..
            } => n.get() * self.spv_size(*base),
            TypeInner::Struct { span, .. } => *span,
            _ => 0,
        }
    }

    fn spv_align(&self, h: Handle<Type>) -> u32 {
        match &self.m.types[h].inner {
            TypeInner::Scalar(s) | TypeInner::Atomic(s) => u32::from(s.width).max(1),
            TypeInner::Vector { size, scalar } => {
                let n = if *size == VectorSize::Tri { 4 } else { *size as u32 };
                n * u32::from(scalar.width)
            }
            TypeInner::Matrix { rows, scalar, .. } => {
                let n = if *rows == VectorSize::Tri { 4 } else { *rows as u32 };
                n * u32::from(scalar.width)
            }
            TypeInner::Array { base, .. } => self.spv_align(*base),
            TypeInner::Struct { members, .. } => members.iter().map(|m| self.spv_align(m.ty)).max().unwrap_or(1),
            _ => 1,
        }
    }

    /// Makes a SPIR-V struct for every WGSL struct, at WGSL's offsets.
    fn make_structs(&mut self) -> Res<()> {
        for (h, t) in self.m.types.iter() {
            let TypeInner::Struct { members, span } = &t.inner else {
                continue;
            };
            let runtime = members.last().is_some_and(|last| {
                matches!(
                    self.m.types[last.ty].inner,
                    TypeInner::Array {
                        size: ArraySize::Dynamic,
                        ..
                    }
                )
            });
            let mut slots = Vec::new();
            let mut reprs = Vec::new();
            let mut types = Vec::new();
            let mut cur = 0u32;
            let mut natural = 0u32;
            let mut packed = false;
            let mut max_align = 1;
            for (k, member) in members.iter().enumerate() {
                if member.offset > cur && !(runtime && k + 1 == members.len()) {
                    let pad = member.offset - cur;
                    let (pty, palign) = if pad.is_multiple_of(4) {
                        let u = self.uint(4);
                        (self.array_ty(u, pad / 4), 4)
                    } else {
                        let u = self.uint(1);
                        (self.array_ty(u, pad), 1)
                    };
                    natural = align_up(natural, palign);
                    if natural != cur {
                        packed = true;
                    }
                    slots.push(Slot::Pad(pty));
                    types.push(pty);
                    cur = member.offset;
                    natural = cur;
                }
                let next = members.get(k + 1).map_or(*span, |n| n.offset);
                let tight = match self.m.types[member.ty].inner {
                    TypeInner::Vector {
                        size: VectorSize::Tri,
                        scalar,
                    } => next.saturating_sub(member.offset) < 4 * u32::from(scalar.width),
                    _ => false,
                };
                reprs.push(MemberRepr {
                    index: slots.len() as u32,
                    tight,
                    offset: member.offset,
                    ty: member.ty,
                });
                if runtime && k + 1 == members.len() {
                    break;
                }
                let (mty, size, align) = match self.m.types[member.ty].inner {
                    TypeInner::Vector { scalar, .. } if tight => {
                        let s = self.scalar_ty(scalar)?;
                        let w = u32::from(scalar.width);
                        (self.array_ty(s, 3), 3 * w, w)
                    }
                    _ => (self.ty(member.ty)?, self.spv_size(member.ty), self.spv_align(member.ty)),
                };
                max_align = max_align.max(align);
                natural = align_up(natural, align);
                if natural != cur {
                    packed = true;
                }
                slots.push(Slot::Member(k));
                types.push(mty);
                cur += size;
                natural = cur;
            }
            if runtime {
                self.structs.insert(
                    h,
                    StructRepr {
                        id: None,
                        slots,
                        members: reprs,
                    },
                );
                continue;
            }
            if *span > cur {
                let pad = span - cur;
                let pty = if pad.is_multiple_of(4) {
                    let u = self.uint(4);
                    self.array_ty(u, pad / 4)
                } else {
                    let u = self.uint(1);
                    self.array_ty(u, pad)
                };
                slots.push(Slot::Pad(pty));
                types.push(pty);
                cur = *span;
            }
            if align_up(cur, max_align) != *span || cur != *span {
                packed = true;
            }
            let id = self.out.id();
            let mut ops = vec![id];
            ops.extend(&types);
            inst(&mut self.out.globals, Op::TypeStruct, &ops);
            if packed {
                inst(
                    &mut self.out.decorations,
                    Op::Decorate,
                    &[id, Decoration::CPacked as u32],
                );
            }
            self.structs.insert(
                h,
                StructRepr {
                    id: Some(id),
                    slots,
                    members: reprs,
                },
            );
        }
        Ok(())
    }

    // ----- constants -----

    fn const_u32(&mut self, v: u32) -> u32 {
        let t = self.uint(4);
        self.out.constant(Op::Constant, t, &[v])
    }

    fn const_u64(&mut self, v: u64) -> u32 {
        let t = self.uint(8);
        self.out.constant(Op::Constant, t, &[v as u32, (v >> 32) as u32])
    }

    fn const_bool(&mut self, v: bool) -> u32 {
        let t = self.bool_ty();
        self.out
            .constant(if v { Op::ConstantTrue } else { Op::ConstantFalse }, t, &[])
    }

    fn null(&mut self, t: u32) -> u32 {
        if let Some(&s) = self.scalars.get(&t) {
            if let Ok(zero) = self.const_scalar(s, 0, 0.0) {
                return zero;
            }
        }
        if let Some(&(s, n)) = self.vectors.get(&t) {
            if let Ok(zero) = self.splat_const(s, Some(n), 0, 0.0) {
                return zero;
            }
        }
        self.out.constant(Op::ConstantNull, t, &[])
    }

    /// A scalar constant of `s` from its bits (integers) or value (floats, given as `f64`).
    fn const_scalar(&mut self, s: Scalar, int_bits: u64, float: f64) -> Res<u32> {
        let t = self.scalar_ty(s)?;
        Ok(match (s.kind, s.width) {
            (ScalarKind::Bool, _) => self.const_bool(int_bits != 0),
            (ScalarKind::Float, 4) => self.out.constant(Op::Constant, t, &[(float as f32).to_bits()]),
            (ScalarKind::Float, _) => {
                let b = float.to_bits();
                self.out.constant(Op::Constant, t, &[b as u32, (b >> 32) as u32])
            }
            (_, 4) => self.out.constant(Op::Constant, t, &[int_bits as u32]),
            _ => self
                .out
                .constant(Op::Constant, t, &[int_bits as u32, (int_bits >> 32) as u32]),
        })
    }

    /// A scalar constant, or a vector of `n` copies of it.
    fn splat_const(&mut self, s: Scalar, n: Option<u32>, int_bits: u64, float: f64) -> Res<u32> {
        let c = self.const_scalar(s, int_bits, float)?;
        match n {
            None => Ok(c),
            Some(n) => {
                let t = self.vec_ty(s, n)?;
                let parts = vec![c; n as usize];
                Ok(self.out.constant(Op::ConstantComposite, t, &parts))
            }
        }
    }

    fn literal(&mut self, l: &Literal) -> Res<u32> {
        Ok(match *l {
            Literal::F32(v) => {
                let t = self.scalar_ty(Scalar::F32)?;
                self.out.constant(Op::Constant, t, &[v.to_bits()])
            }
            Literal::F64(v) => self.const_scalar(Scalar::F64, 0, v)?,
            Literal::U32(v) => self.const_u32(v),
            Literal::I32(v) => self.const_u32(v as u32),
            Literal::U64(v) => self.const_u64(v),
            Literal::I64(v) => self.const_u64(v as u64),
            Literal::Bool(b) => self.const_bool(b),
            Literal::F16(_) => return Err(self.unsupported("f16")),
            _ => return Err(self.unsupported("this literal")),
        })
    }

    // ----- instructions -----

    /// Emits `op` with a result of type `ty`; returns the result id.
    fn op(&mut self, fx: &mut Fx, op: Op, ty: u32, operands: &[u32]) -> u32 {
        let id = self.out.id();
        if fx.terminated {
            let l = self.out.id();
            fx.label(l);
        }
        let mut all = vec![ty, id];
        all.extend_from_slice(operands);
        inst(&mut fx.body, op, &all);
        id
    }

    /// Emits `op` without a result.
    fn op_void(&mut self, fx: &mut Fx, op: Op, operands: &[u32]) {
        if fx.terminated {
            let l = self.out.id();
            fx.label(l);
        }
        inst(&mut fx.body, op, operands);
    }

    fn ext(&mut self, fx: &mut Fx, f: Cl, ty: u32, args: &[u32]) -> u32 {
        let mut ops = vec![self.ext, f as u32];
        ops.extend_from_slice(args);
        self.op(fx, Op::ExtInst, ty, &ops)
    }

    /// A new `Function` variable of type `t`, declared at the top of the function.
    fn var(&mut self, fx: &mut Fx, t: u32) -> u32 {
        let pt = self.ptr(Sc::Function, t);
        let id = self.out.id();
        inst(&mut fx.vars, Op::Variable, &[pt, id, Sc::Function as u32]);
        id
    }

    fn store(&mut self, fx: &mut Fx, ptr: u32, value: u32) {
        self.op_void(fx, Op::Store, &[ptr, value]);
    }

    /// A composite of type `t` from its constituents (components, elements or members),
    /// inserted one by one into an `OpUndef`: the LLVM 15 SPIR-V translator, which some
    /// drivers embed, reads `OpCompositeConstruct` only when every constituent is constant.
    fn construct(&mut self, fx: &mut Fx, t: u32, parts: &[u32]) -> u32 {
        let mut current = self.out.constant(Op::Undef, t, &[]);
        for (i, &part) in parts.iter().enumerate() {
            current = self.op(fx, Op::CompositeInsert, t, &[part, current, i as u32]);
        }
        current
    }

    /// Vector of `n` to an array of its `n` components.
    fn vec_to_arr(&mut self, fx: &mut Fx, v: u32, s: Scalar, n: u32) -> Res<u32> {
        let st = self.scalar_ty(s)?;
        let at = self.array_ty(st, n);
        let parts: Vec<u32> = (0..n).map(|i| self.op(fx, Op::CompositeExtract, st, &[v, i])).collect();
        Ok(self.construct(fx, at, &parts))
    }

    fn arr_to_vec(&mut self, fx: &mut Fx, a: u32, s: Scalar, n: u32) -> Res<u32> {
        let st = self.scalar_ty(s)?;
        let vt = self.vec_ty(s, n)?;
        let parts: Vec<u32> = (0..n).map(|i| self.op(fx, Op::CompositeExtract, st, &[a, i])).collect();
        Ok(self.construct(fx, vt, &parts))
    }

    /// `v` (a scalar) repeated into a vector of `n`, or `v` itself when `n` is `None`.
    fn splat(&mut self, fx: &mut Fx, v: u32, s: Scalar, n: Option<u32>) -> Res<u32> {
        match n {
            None => Ok(v),
            Some(n) => {
                let t = self.vec_ty(s, n)?;
                Ok(self.construct(fx, t, &vec![v; n as usize]))
            }
        }
    }

    /// `min(index, n - 1)` as an unsigned 32-bit value.
    fn clamp_index(&mut self, fx: &mut Fx, index: u32, index_scalar: Scalar, n: u32) -> Res<u32> {
        let u32t = self.uint(4);
        let idx = if index_scalar.width == 8 {
            let max = self.const_u64(u64::from(n.saturating_sub(1)));
            let u64t = self.uint(8);
            let c = self.ext(fx, Cl::u_min, u64t, &[index, max]);
            self.op(fx, Op::UConvert, u32t, &[c])
        } else {
            let max = self.const_u32(n.saturating_sub(1));
            self.ext(fx, Cl::u_min, u32t, &[index, max])
        };
        Ok(idx)
    }

    /// An index into the runtime-sized array of buffer `binding`, clamped to the array's
    /// element count (`i < n ? i : (n == 0 ? 0 : n - 1)`, as the C dialects do), so that no
    /// kernel reaches outside its bound views.
    fn clamp_runtime_index(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        index: u32,
        index_scalar: Scalar,
        binding: Option<u32>,
    ) -> Res<u32> {
        let (Some(binding), Some(counts)) = (binding, fx.lengths) else {
            return Err(self.expr_err(fx, h, "indexing a runtime-sized array through a pointer parameter"));
        };
        let u32t = self.uint(4);
        let i = if index_scalar.width == 8 {
            self.op(fx, Op::UConvert, u32t, &[index])
        } else {
            index
        };
        let n = self.element_count(fx, counts, binding);
        let bool_t = self.bool_ty();
        let zero = self.const_u32(0);
        let one = self.const_u32(1);
        let inside = self.op(fx, Op::ULessThan, bool_t, &[i, n]);
        let empty = self.op(fx, Op::IEqual, bool_t, &[n, zero]);
        let last = self.op(fx, Op::ISub, u32t, &[n, one]);
        let fallback = self.op(fx, Op::Select, u32t, &[empty, zero, last]);
        Ok(self.op(fx, Op::Select, u32t, &[inside, i, fallback]))
    }

    /// The element count of the runtime-sized array of buffer `binding`, from the counts the
    /// kernel computed from its byte-lengths parameter.
    fn element_count(&mut self, fx: &mut Fx, counts: u32, binding: u32) -> u32 {
        let u32t = self.uint(4);
        let pt = self.ptr(Sc::Function, u32t);
        let k = self.const_u32(binding);
        let p = self.op(fx, Op::InBoundsPtrAccessChain, pt, &[counts, k]);
        self.op(fx, Op::Load, u32t, &[p])
    }

    // ----- expression types -----

    fn tyinner<'b>(&'b self, fx: &'b Fx, h: Handle<Expression>) -> &'b TypeInner {
        fx.fi[h].ty.inner_with(&self.m.types)
    }

    fn expr_ty(&mut self, fx: &Fx, h: Handle<Expression>) -> Res<u32> {
        let r = fx.fi[h].ty.clone();
        self.res_ty(&r)
    }

    fn is_pointer(&self, fx: &Fx, h: Handle<Expression>) -> bool {
        ir::is_pointer(self.tyinner(fx, h))
    }

    /// What a pointer expression points to.
    fn pointee(&self, fx: &Fx, h: Handle<Expression>) -> TypeInner {
        ir::pointee(&self.m.types, self.tyinner(fx, h))
    }

    fn pointee_handle(&self, fx: &Fx, h: Handle<Expression>) -> Option<Handle<Type>> {
        ir::pointee_handle(self.tyinner(fx, h))
    }

    fn space_of(&self, fx: &Fx, h: Handle<Expression>) -> Sc {
        match self.tyinner(fx, h) {
            TypeInner::Pointer { space, .. } | TypeInner::ValuePointer { space, .. } => Self::storage_class(*space),
            _ => Sc::Function,
        }
    }

    fn scalar_of(&self, fx: &Fx, h: Handle<Expression>) -> Option<(Scalar, Option<u32>)> {
        match self.tyinner(fx, h) {
            TypeInner::Scalar(s) => Some((*s, None)),
            TypeInner::Vector { size, scalar } => Some((*scalar, Some(*size as u32))),
            _ => None,
        }
    }

    // ----- pointers -----

    /// The place a pointer expression names.
    fn place(&mut self, fx: &mut Fx, h: Handle<Expression>) -> Res<Place> {
        let e = fx.f.expressions[h].clone();
        match e {
            Expression::GlobalVariable(g) => {
                let var = &self.m.global_variables[g];
                match var.space {
                    AddressSpace::WorkGroup => Ok(Place::Ptr {
                        id: *fx.ctx.get(&g).ok_or_else(|| Self::internal("a workgroup variable"))?,
                        tight: false,
                    }),
                    AddressSpace::Immediate => Ok(Place::Ptr {
                        id: *fx.ctx.get(&g).ok_or_else(|| Self::internal("scalar block"))?,
                        tight: matches!(self.m.types[var.ty].inner, TypeInner::Vector { .. }),
                    }),
                    _ => {
                        let id = *fx.ctx.get(&g).ok_or_else(|| Self::internal("a global"))?;
                        let binding = var.binding.as_ref().map(|b| b.binding);
                        Ok(self.place_of_type(id, var.ty, binding))
                    }
                }
            }
            Expression::LocalVariable(l) => Ok(Place::Ptr {
                id: fx.locals[&l],
                tight: false,
            }),
            Expression::FunctionArgument(i) => {
                let id = fx.args[i as usize];
                match self.pointee_handle(fx, h) {
                    Some(t) => Ok(self.place_of_type(id, t, None)),
                    None => Ok(Place::Ptr { id, tight: false }),
                }
            }
            Expression::Access { base, index } => {
                let p = self.place(fx, base)?;
                let i = self.expr(fx, index)?;
                let (is, _) = self
                    .scalar_of(fx, index)
                    .ok_or_else(|| self.expr_err(fx, h, "this index"))?;
                let sc = self.space_of(fx, h);
                let result_pointee = self.pointee(fx, h);
                match (p, self.pointee(fx, base)) {
                    (Place::Elems { id, binding }, _) => {
                        let elem = self.inner_ty(&result_pointee)?;
                        let pt = self.ptr(sc, elem);
                        let c = self.clamp_runtime_index(fx, h, i, is, binding)?;
                        let u64t = self.uint(8);
                        let c64 = self.op(fx, Op::UConvert, u64t, &[c]);
                        let r = self.op(fx, Op::PtrAccessChain, pt, &[id, c64]);
                        Ok(self.place_of_pointer(r, fx, h))
                    }
                    (Place::Ptr { id, .. }, TypeInner::Array { size, .. }) => {
                        let n = match size {
                            ArraySize::Constant(n) => n.get(),
                            _ => return Err(self.expr_err(fx, h, "this indexing")),
                        };
                        let c = self.clamp_index(fx, i, is, n)?;
                        let elem = self.inner_ty(&result_pointee)?;
                        let pt = self.ptr(sc, elem);
                        let r = self.op(fx, Op::InBoundsAccessChain, pt, &[id, c]);
                        Ok(Place::Ptr { id: r, tight: false })
                    }
                    (Place::Ptr { id, .. }, TypeInner::Vector { size, .. })
                    | (Place::Ptr { id, .. }, TypeInner::Matrix { columns: size, .. }) => {
                        let c = self.clamp_index(fx, i, is, size as u32)?;
                        let elem = self.inner_ty(&result_pointee)?;
                        let pt = self.ptr(sc, elem);
                        let r = self.op(fx, Op::InBoundsAccessChain, pt, &[id, c]);
                        Ok(Place::Ptr { id: r, tight: false })
                    }
                    _ => Err(self.expr_err(fx, h, "this indexing")),
                }
            }
            Expression::AccessIndex { base, index } => {
                let p = self.place(fx, base)?;
                let sc = self.space_of(fx, h);
                let result_pointee = self.pointee(fx, h);
                match p {
                    Place::Elems { id, binding } => {
                        let elem = self.inner_ty(&result_pointee)?;
                        let pt = self.ptr(sc, elem);
                        let k = self.const_u32(index);
                        let c = self.clamp_runtime_index(fx, h, k, Scalar::U32, binding)?;
                        let u64t = self.uint(8);
                        let c64 = self.op(fx, Op::UConvert, u64t, &[c]);
                        let r = self.op(fx, Op::PtrAccessChain, pt, &[id, c64]);
                        Ok(self.place_of_pointer(r, fx, h))
                    }
                    Place::RtStruct { id, ty, binding } => {
                        let member = self.structs[&ty].members[index as usize].clone();
                        let u64t = self.uint(8);
                        let addr = self.op(fx, Op::ConvertPtrToU, u64t, &[id]);
                        let off = self.const_u64(u64::from(member.offset));
                        let sum = self.op(fx, Op::IAdd, u64t, &[addr, off]);
                        let target = if member.tight {
                            match self.m.types[member.ty].inner {
                                TypeInner::Vector { scalar, .. } => {
                                    let s = self.scalar_ty(scalar)?;
                                    self.array_ty(s, 3)
                                }
                                _ => return Err(Self::internal("tight member")),
                            }
                        } else {
                            self.pointee_ty(member.ty)?
                        };
                        let pt = self.ptr(sc, target);
                        let r = self.op(fx, Op::ConvertUToPtr, pt, &[sum]);
                        if member.tight {
                            Ok(Place::Ptr { id: r, tight: true })
                        } else {
                            Ok(self.place_of_type(r, member.ty, binding))
                        }
                    }
                    Place::Ptr { id, .. } => match self.pointee(fx, base) {
                        TypeInner::Struct { .. } => {
                            let t = self
                                .pointee_handle(fx, base)
                                .ok_or_else(|| self.expr_err(fx, h, "this member access"))?;
                            let member = self.structs[&t].members[index as usize].clone();
                            let target = if member.tight {
                                match self.m.types[member.ty].inner {
                                    TypeInner::Vector { scalar, .. } => {
                                        let s = self.scalar_ty(scalar)?;
                                        self.array_ty(s, 3)
                                    }
                                    _ => return Err(Self::internal("tight member")),
                                }
                            } else {
                                self.ty(member.ty)?
                            };
                            let pt = self.ptr(sc, target);
                            let k = self.const_u32(member.index);
                            let r = self.op(fx, Op::InBoundsAccessChain, pt, &[id, k]);
                            Ok(Place::Ptr {
                                id: r,
                                tight: member.tight,
                            })
                        }
                        _ => {
                            let elem = self.inner_ty(&result_pointee)?;
                            let pt = self.ptr(sc, elem);
                            let k = self.const_u32(index);
                            let r = self.op(fx, Op::InBoundsAccessChain, pt, &[id, k]);
                            Ok(Place::Ptr { id: r, tight: false })
                        }
                    },
                }
            }
            _ => Err(self.expr_err(fx, h, "this pointer expression")),
        }
    }

    fn place_of_type(&self, id: u32, t: Handle<Type>, binding: Option<u32>) -> Place {
        match &self.m.types[t].inner {
            TypeInner::Array {
                size: ArraySize::Dynamic,
                ..
            } => Place::Elems { id, binding },
            TypeInner::Struct { .. } if self.structs.get(&t).is_some_and(|s| s.id.is_none()) => {
                Place::RtStruct { id, ty: t, binding }
            }
            _ => Place::Ptr { id, tight: false },
        }
    }

    /// The place pointer `id`, the value of pointer expression `h`, names.
    fn place_of_pointer(&self, id: u32, fx: &Fx, h: Handle<Expression>) -> Place {
        match self.pointee_handle(fx, h) {
            Some(t) => self.place_of_type(id, t, None),
            None => Place::Ptr { id, tight: false },
        }
    }

    fn atomic_scope(sc: Sc) -> u32 {
        if sc == Sc::Workgroup {
            SCOPE_WORKGROUP
        } else {
            SCOPE_DEVICE
        }
    }

    /// Declares `Int64Atomics` for an atomic on a 64-bit integer (OpenCL's
    /// `cl_khr_int64_base_atomics` and `cl_khr_int64_extended_atomics`).
    fn atomic_width(&mut self, s: Scalar) {
        if s.width == 8 {
            self.out.capabilities.insert(Capability::Int64Atomics as u32);
        }
    }

    fn load(&mut self, fx: &mut Fx, pointer: Handle<Expression>, h: Handle<Expression>) -> Res<u32> {
        let place = self.place(fx, pointer)?;
        let Place::Ptr { id, tight } = place else {
            return Err(self.expr_err(fx, h, "loading a runtime-sized value"));
        };
        let pointee = self.pointee(fx, pointer);
        match pointee {
            TypeInner::Atomic(s) => {
                self.atomic_width(s);
                let t = self.scalar_ty(s)?;
                let scope = self.const_u32(Self::atomic_scope(self.space_of(fx, pointer)));
                let sem = self.const_u32(0);
                Ok(self.op(fx, Op::AtomicLoad, t, &[id, scope, sem]))
            }
            TypeInner::Vector { size, scalar } if tight => {
                let st = self.scalar_ty(scalar)?;
                let at = self.array_ty(st, size as u32);
                let a = self.op(fx, Op::Load, at, &[id]);
                self.arr_to_vec(fx, a, scalar, size as u32)
            }
            other => {
                let t = self.inner_ty_of(&other, self.pointee_handle(fx, pointer))?;
                Ok(self.op(fx, Op::Load, t, &[id]))
            }
        }
    }

    fn inner_ty_of(&mut self, inner: &TypeInner, h: Option<Handle<Type>>) -> Res<u32> {
        match h {
            Some(h) => self.ty(h),
            None => self.inner_ty(inner),
        }
    }

    fn store_to(&mut self, fx: &mut Fx, pointer: Handle<Expression>, value: u32, span: naga::Span) -> Res<()> {
        let place = self.place(fx, pointer)?;
        let Place::Ptr { id, tight } = place else {
            return Err(self.unsupported_at("storing a runtime-sized value", span));
        };
        match self.pointee(fx, pointer) {
            TypeInner::Atomic(s) => {
                self.atomic_width(s);
                let scope = self.const_u32(Self::atomic_scope(self.space_of(fx, pointer)));
                let sem = self.const_u32(0);
                self.op_void(fx, Op::AtomicStore, &[id, scope, sem, value]);
            }
            TypeInner::Vector { size, scalar } if tight => {
                let a = self.vec_to_arr(fx, value, scalar, size as u32)?;
                self.store(fx, id, a);
            }
            _ => self.store(fx, id, value),
        }
        Ok(())
    }

    // ----- values -----

    fn expr(&mut self, fx: &mut Fx, h: Handle<Expression>) -> Res<u32> {
        if let Some(&v) = fx.values.get(&h) {
            return Ok(v);
        }
        let e = fx.f.expressions[h].clone();
        let r = self.expr_inner(fx, h, &e);
        r.map_err(|err| self.relocate(fx, h, err))
    }

    fn expr_inner(&mut self, fx: &mut Fx, h: Handle<Expression>, e: &Expression) -> Res<u32> {
        Ok(match *e {
            Expression::Literal(ref l) => self.literal(l)?,
            Expression::Constant(c) => self.const_expr(fx, self.m.constants[c].init)?,
            Expression::ZeroValue(t) => {
                let t = self.ty(t)?;
                self.null(t)
            }
            Expression::Compose { ty, ref components } => {
                let mut parts = Vec::new();
                let mut shapes = Vec::new();
                for &c in components {
                    parts.push(self.expr(fx, c)?);
                    shapes.push(self.scalar_of(fx, c).and_then(|(_, n)| n));
                }
                self.compose(fx, ty, &parts, &shapes)?
            }
            Expression::Splat { size, value } => {
                let v = self.expr(fx, value)?;
                let t = self.expr_ty(fx, h)?;
                self.construct(fx, t, &vec![v; size as usize])
            }
            Expression::Swizzle { size, vector, pattern } => {
                let v = self.expr(fx, vector)?;
                let t = self.expr_ty(fx, h)?;
                let mut ops = vec![v, v];
                ops.extend(pattern[..size as usize].iter().map(|&p| p as u32));
                self.op(fx, Op::VectorShuffle, t, &ops)
            }
            Expression::FunctionArgument(i) => {
                if self.is_pointer(fx, h) {
                    return match self.place(fx, h)? {
                        Place::Ptr { id, .. } | Place::Elems { id, .. } | Place::RtStruct { id, .. } => Ok(id),
                    };
                }
                fx.args[i as usize]
            }
            Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
            | Expression::Access { .. }
            | Expression::AccessIndex { .. }
                if self.is_pointer(fx, h) =>
            {
                match self.place(fx, h)? {
                    Place::Ptr { id, tight: false } | Place::Elems { id, .. } => id,
                    _ => return Err(self.expr_err(fx, h, "a pointer to a packed struct member")),
                }
            }
            Expression::Access { base, index } => self.access_value(fx, h, base, index)?,
            Expression::AccessIndex { base, index } => self.access_index_value(fx, h, base, index)?,
            Expression::Load { pointer } => self.load(fx, pointer, h)?,
            Expression::Unary { op, expr } => {
                let v = self.expr(fx, expr)?;
                let t = self.expr_ty(fx, h)?;
                let (s, _) = self
                    .scalar_of(fx, expr)
                    .ok_or_else(|| self.expr_err(fx, h, "this operand"))?;
                let o = match op {
                    UnaryOperator::Negate if s.kind == ScalarKind::Float => Op::FNegate,
                    UnaryOperator::Negate => Op::SNegate,
                    UnaryOperator::LogicalNot => Op::LogicalNot,
                    UnaryOperator::BitwiseNot => Op::Not,
                };
                self.op(fx, o, t, &[v])
            }
            Expression::Binary { op, left, right } => self.binary(fx, h, op, left, right)?,
            Expression::Select {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, condition)?;
                let a = self.expr(fx, accept)?;
                let r = self.expr(fx, reject)?;
                let t = self.expr_ty(fx, h)?;
                let c = match (self.scalar_of(fx, condition), self.scalar_of(fx, h)) {
                    (Some((cs, None)), Some((_, Some(n)))) => self.splat(fx, c, cs, Some(n))?,
                    _ => c,
                };
                self.op(fx, Op::Select, t, &[c, a, r])
            }
            Expression::Relational { fun, argument } => {
                let v = self.expr(fx, argument)?;
                let t = self.expr_ty(fx, h)?;
                let vector = matches!(self.tyinner(fx, argument), TypeInner::Vector { .. });
                match fun {
                    naga::RelationalFunction::All if vector => self.op(fx, Op::All, t, &[v]),
                    naga::RelationalFunction::Any if vector => self.op(fx, Op::Any, t, &[v]),
                    naga::RelationalFunction::All | naga::RelationalFunction::Any => v,
                    naga::RelationalFunction::IsNan => self.op(fx, Op::IsNan, t, &[v]),
                    naga::RelationalFunction::IsInf => self.op(fx, Op::IsInf, t, &[v]),
                }
            }
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => {
                let mut args = vec![arg];
                args.extend(arg1.iter().chain(arg2.iter()).chain(arg3.iter()).copied());
                self.math(fx, h, fun, &args)?
            }
            Expression::As { expr, kind, convert } => self.convert(fx, h, expr, kind, convert)?,
            Expression::ArrayLength(p) => self.array_length(fx, h, p)?,
            Expression::CallResult(_)
            | Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. } => {
                return Err(Self::internal("a call or atomic result used before its statement"))
            }
            Expression::Override(_) => return Err(self.expr_err(fx, h, "an unresolved override")),
            Expression::ImageSample { .. } | Expression::ImageLoad { .. } | Expression::ImageQuery { .. } => {
                return Err(self.expr_err(fx, h, "textures"))
            }
            Expression::Derivative { .. } => return Err(self.expr_err(fx, h, "derivatives")),
            Expression::SubgroupBallotResult | Expression::SubgroupOperationResult { .. } => {
                return Err(self.expr_err(fx, h, "subgroup operations"))
            }
            _ => return Err(self.expr_err(fx, h, "this expression")),
        })
    }

    /// A constant expression of the module's global arena, computed where it is used.
    fn const_expr(&mut self, fx: &mut Fx, h: Handle<Expression>) -> Res<u32> {
        let e = self.m.global_expressions[h].clone();
        Ok(match e {
            Expression::Literal(l) => self.literal(&l)?,
            Expression::Constant(c) => self.const_expr(fx, self.m.constants[c].init)?,
            Expression::ZeroValue(t) => {
                let t = self.ty(t)?;
                self.null(t)
            }
            Expression::Compose { ty, components } => {
                let mut parts = Vec::new();
                let mut shapes = Vec::new();
                for c in components {
                    parts.push(self.const_expr(fx, c)?);
                    shapes.push(match self.info[c].inner_with(&self.m.types) {
                        TypeInner::Vector { size, .. } => Some(*size as u32),
                        _ => None,
                    });
                }
                self.compose(fx, ty, &parts, &shapes)?
            }
            Expression::Splat { size, value } => {
                let v = self.const_expr(fx, value)?;
                let r = self.info[h].clone();
                let t = self.res_ty(&r)?;
                self.construct(fx, t, &vec![v; size as usize])
            }
            _ => return Err(self.unsupported("this constant expression")),
        })
    }

    /// `shapes` gives the component count of each part that is a vector (vectors built from
    /// vectors are flattened to their components).
    fn compose(&mut self, fx: &mut Fx, ty: Handle<Type>, parts: &[u32], shapes: &[Option<u32>]) -> Res<u32> {
        let t = self.ty(ty)?;
        match self.m.types[ty].inner.clone() {
            TypeInner::Matrix { columns, rows, scalar } if parts.len() != columns as usize => {
                let ct = self.vec_ty(scalar, rows as u32)?;
                let cols: Vec<u32> = parts.chunks(rows as usize).map(|c| self.construct(fx, ct, c)).collect();
                Ok(self.construct(fx, t, &cols))
            }
            TypeInner::Struct { .. } => {
                let repr = self.structs[&ty].clone();
                let mut ops = Vec::new();
                for slot in &repr.slots {
                    match *slot {
                        Slot::Pad(pt) => ops.push(self.null(pt)),
                        Slot::Member(k) => {
                            let member = &repr.members[k];
                            let v = parts.get(k).copied().ok_or_else(|| Self::internal("struct arity"))?;
                            if member.tight {
                                if let TypeInner::Vector { scalar, .. } = self.m.types[member.ty].inner {
                                    ops.push(self.vec_to_arr(fx, v, scalar, 3)?);
                                    continue;
                                }
                            }
                            ops.push(v);
                        }
                    }
                }
                Ok(self.construct(fx, t, &ops))
            }
            TypeInner::Vector { scalar, .. } => {
                let st = self.scalar_ty(scalar)?;
                let mut flat = Vec::new();
                for (k, &part) in parts.iter().enumerate() {
                    match shapes.get(k).copied().flatten() {
                        Some(n) => {
                            for i in 0..n {
                                flat.push(self.op(fx, Op::CompositeExtract, st, &[part, i]));
                            }
                        }
                        None => flat.push(part),
                    }
                }
                Ok(self.construct(fx, t, &flat))
            }
            _ => Ok(self.construct(fx, t, parts)),
        }
    }

    fn access_value(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        base: Handle<Expression>,
        index: Handle<Expression>,
    ) -> Res<u32> {
        let b = self.expr(fx, base)?;
        let i = self.expr(fx, index)?;
        let (is, _) = self
            .scalar_of(fx, index)
            .ok_or_else(|| self.expr_err(fx, h, "this index"))?;
        let t = self.expr_ty(fx, h)?;
        match self.tyinner(fx, base).clone() {
            TypeInner::Vector { size, .. } => {
                let c = self.clamp_index(fx, i, is, size as u32)?;
                Ok(self.op(fx, Op::VectorExtractDynamic, t, &[b, c]))
            }
            TypeInner::Matrix { columns: n, .. } => {
                let c = self.clamp_index(fx, i, is, n as u32)?;
                self.dynamic_extract(fx, base, b, c, t)
            }
            TypeInner::Array {
                size: ArraySize::Constant(n),
                ..
            } => {
                let c = self.clamp_index(fx, i, is, n.get())?;
                self.dynamic_extract(fx, base, b, c, t)
            }
            _ => Err(self.expr_err(fx, h, "this indexing")),
        }
    }

    /// Element `index` of an array value: through a temporary variable, since SPIR-V has no
    /// dynamic extract for arrays.
    fn dynamic_extract(
        &mut self,
        fx: &mut Fx,
        base: Handle<Expression>,
        value: u32,
        index: u32,
        elem_ty: u32,
    ) -> Res<u32> {
        let bt = self.expr_ty(fx, base)?;
        let tmp = self.var(fx, bt);
        self.store(fx, tmp, value);
        let pt = self.ptr(Sc::Function, elem_ty);
        let p = self.op(fx, Op::InBoundsAccessChain, pt, &[tmp, index]);
        Ok(self.op(fx, Op::Load, elem_ty, &[p]))
    }

    fn access_index_value(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        base: Handle<Expression>,
        index: u32,
    ) -> Res<u32> {
        let b = self.expr(fx, base)?;
        let t = self.expr_ty(fx, h)?;
        match self.tyinner(fx, base).clone() {
            TypeInner::Struct { .. } => {
                let st = match &fx.fi[base].ty {
                    TypeResolution::Handle(st) => *st,
                    _ => return Err(self.expr_err(fx, h, "this member access")),
                };
                let member = self.structs[&st].members[index as usize].clone();
                if member.tight {
                    if let TypeInner::Vector { scalar, .. } = self.m.types[member.ty].inner {
                        let sty = self.scalar_ty(scalar)?;
                        let at = self.array_ty(sty, 3);
                        let a = self.op(fx, Op::CompositeExtract, at, &[b, member.index]);
                        return self.arr_to_vec(fx, a, scalar, 3);
                    }
                }
                Ok(self.op(fx, Op::CompositeExtract, t, &[b, member.index]))
            }
            TypeInner::Vector { .. } | TypeInner::Matrix { .. } | TypeInner::Array { .. } => {
                Ok(self.op(fx, Op::CompositeExtract, t, &[b, index]))
            }
            _ => Err(self.expr_err(fx, h, "this member access")),
        }
    }

    // ----- arithmetic -----

    fn binary(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        op: Bin,
        l: Handle<Expression>,
        r: Handle<Expression>,
    ) -> Res<u32> {
        let mut a = self.expr(fx, l)?;
        let mut b = self.expr(fx, r)?;
        let lt = self.tyinner(fx, l).clone();
        let rt = self.tyinner(fx, r).clone();
        if matches!(lt, TypeInner::Matrix { .. }) || matches!(rt, TypeInner::Matrix { .. }) {
            return self.matrix_binary(fx, h, op, (a, &lt), (b, &rt));
        }
        let (ls, ln) = self
            .scalar_of(fx, l)
            .ok_or_else(|| self.expr_err(fx, h, "this operation"))?;
        let (rs, rn) = self
            .scalar_of(fx, r)
            .ok_or_else(|| self.expr_err(fx, h, "this operation"))?;
        let n = ln.or(rn);
        if ln.is_none() && n.is_some() {
            a = self.splat(fx, a, ls, n)?;
        }
        if rn.is_none() && n.is_some() {
            b = self.splat(fx, b, rs, n)?;
        }
        let t = self.expr_ty(fx, h)?;
        let s = ls;
        let float = s.kind == ScalarKind::Float;
        let signed = s.kind == ScalarKind::Sint;
        let boolean = s.kind == ScalarKind::Bool;
        let simple = |o: Op| Some(o);
        let direct = match op {
            Bin::Add => simple(if float { Op::FAdd } else { Op::IAdd }),
            Bin::Subtract => simple(if float { Op::FSub } else { Op::ISub }),
            Bin::Multiply => simple(if float { Op::FMul } else { Op::IMul }),
            Bin::Divide if float => simple(Op::FDiv),
            Bin::Modulo if float => simple(Op::FRem),
            Bin::Equal => simple(if float {
                Op::FOrdEqual
            } else if boolean {
                Op::LogicalEqual
            } else {
                Op::IEqual
            }),
            Bin::NotEqual => simple(if float {
                Op::FUnordNotEqual
            } else if boolean {
                Op::LogicalNotEqual
            } else {
                Op::INotEqual
            }),
            Bin::Less => simple(if float {
                Op::FOrdLessThan
            } else if signed {
                Op::SLessThan
            } else {
                Op::ULessThan
            }),
            Bin::LessEqual => simple(if float {
                Op::FOrdLessThanEqual
            } else if signed {
                Op::SLessThanEqual
            } else {
                Op::ULessThanEqual
            }),
            Bin::Greater => simple(if float {
                Op::FOrdGreaterThan
            } else if signed {
                Op::SGreaterThan
            } else {
                Op::UGreaterThan
            }),
            Bin::GreaterEqual => simple(if float {
                Op::FOrdGreaterThanEqual
            } else if signed {
                Op::SGreaterThanEqual
            } else {
                Op::UGreaterThanEqual
            }),
            Bin::And => simple(if boolean { Op::LogicalAnd } else { Op::BitwiseAnd }),
            Bin::InclusiveOr => simple(if boolean { Op::LogicalOr } else { Op::BitwiseOr }),
            Bin::ExclusiveOr => simple(if boolean { Op::LogicalNotEqual } else { Op::BitwiseXor }),
            Bin::LogicalAnd => simple(Op::LogicalAnd),
            Bin::LogicalOr => simple(Op::LogicalOr),
            _ => None,
        };
        if let Some(o) = direct {
            return Ok(self.op(fx, o, t, &[a, b]));
        }
        match op {
            Bin::Divide | Bin::Modulo => self.int_div(fx, op, s, n, a, b, t),
            Bin::ShiftLeft | Bin::ShiftRight => {
                let bits = u32::from(s.width) * 8;
                let amount = if s.width == 8 {
                    let ut = self.shaped(Scalar::U64, n)?;
                    self.op(fx, Op::UConvert, ut, &[b])
                } else {
                    b
                };
                let mask = self.splat_const(
                    Scalar {
                        kind: ScalarKind::Uint,
                        width: s.width,
                    },
                    n,
                    u64::from(bits - 1),
                    0.0,
                )?;
                let at = self.shaped(
                    Scalar {
                        kind: ScalarKind::Uint,
                        width: s.width,
                    },
                    n,
                )?;
                let masked = self.op(fx, Op::BitwiseAnd, at, &[amount, mask]);
                let o = match op {
                    Bin::ShiftLeft => Op::ShiftLeftLogical,
                    _ if signed => Op::ShiftRightArithmetic,
                    _ => Op::ShiftRightLogical,
                };
                Ok(self.op(fx, o, t, &[a, masked]))
            }
            _ => Err(self.expr_err(fx, h, "this operation")),
        }
    }

    /// Integer `/` and `%` with WGSL's results where C's would be undefined: a divisor of 0
    /// (or -1 under the minimum) is replaced by 1, then `x / 0 == x`, `x % 0 == 0`,
    /// `MIN / -1 == MIN` and `MIN % -1 == 0` follow.
    #[allow(clippy::too_many_arguments)]
    fn int_div(&mut self, fx: &mut Fx, op: Bin, s: Scalar, n: Option<u32>, a: u32, b: u32, t: u32) -> Res<u32> {
        let bt = self.shaped(Scalar::BOOL, n)?;
        let zero = self.splat_const(s, n, 0, 0.0)?;
        let one = self.splat_const(s, n, 1, 0.0)?;
        let mut bad = self.op(fx, Op::IEqual, bt, &[b, zero]);
        if s.kind == ScalarKind::Sint {
            let min_bits = if s.width == 8 { 1u64 << 63 } else { 1u64 << 31 };
            let min = self.splat_const(s, n, min_bits, 0.0)?;
            let minus_one = self.splat_const(s, n, if s.width == 8 { u64::MAX } else { u64::from(u32::MAX) }, 0.0)?;
            let a_min = self.op(fx, Op::IEqual, bt, &[a, min]);
            let b_m1 = self.op(fx, Op::IEqual, bt, &[b, minus_one]);
            let both = self.op(fx, Op::LogicalAnd, bt, &[a_min, b_m1]);
            bad = self.op(fx, Op::LogicalOr, bt, &[bad, both]);
        }
        let safe = self.op(fx, Op::Select, t, &[bad, one, b]);
        let o = match (op, s.kind) {
            (Bin::Divide, ScalarKind::Sint) => Op::SDiv,
            (Bin::Divide, _) => Op::UDiv,
            (_, ScalarKind::Sint) => Op::SRem,
            _ => Op::UMod,
        };
        Ok(self.op(fx, o, t, &[a, safe]))
    }

    fn column(&mut self, fx: &mut Fx, m: u32, j: u32, s: Scalar, rows: u32) -> Res<u32> {
        let ct = self.vec_ty(s, rows)?;
        Ok(self.op(fx, Op::CompositeExtract, ct, &[m, j]))
    }

    fn matrix_binary(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        op: Bin,
        (a, lt): (u32, &TypeInner),
        (b, rt): (u32, &TypeInner),
    ) -> Res<u32> {
        let t = self.expr_ty(fx, h)?;
        match (op, lt, rt) {
            (Bin::Add | Bin::Subtract, &TypeInner::Matrix { columns, rows, scalar }, TypeInner::Matrix { .. }) => {
                let o = if op == Bin::Add { Op::FAdd } else { Op::FSub };
                let ct = self.vec_ty(scalar, rows as u32)?;
                let mut cols = Vec::new();
                for j in 0..columns as u32 {
                    let x = self.column(fx, a, j, scalar, rows as u32)?;
                    let y = self.column(fx, b, j, scalar, rows as u32)?;
                    cols.push(self.op(fx, o, ct, &[x, y]));
                }
                Ok(self.construct(fx, t, &cols))
            }
            (Bin::Multiply, &TypeInner::Matrix { columns, rows, scalar }, TypeInner::Scalar(_))
            | (Bin::Multiply, TypeInner::Scalar(_), &TypeInner::Matrix { columns, rows, scalar }) => {
                let (m, s) = if matches!(lt, TypeInner::Matrix { .. }) {
                    (a, b)
                } else {
                    (b, a)
                };
                let ct = self.vec_ty(scalar, rows as u32)?;
                let mut cols = Vec::new();
                for j in 0..columns as u32 {
                    let x = self.column(fx, m, j, scalar, rows as u32)?;
                    cols.push(self.op(fx, Op::VectorTimesScalar, ct, &[x, s]));
                }
                Ok(self.construct(fx, t, &cols))
            }
            (Bin::Multiply, &TypeInner::Matrix { columns, rows, scalar }, TypeInner::Vector { .. }) => {
                self.mat_times_vec(fx, a, b, columns as u32, rows as u32, scalar)
            }
            (Bin::Multiply, TypeInner::Vector { .. }, &TypeInner::Matrix { columns, rows, scalar }) => {
                let mut parts = Vec::new();
                for j in 0..columns as u32 {
                    let c = self.column(fx, b, j, scalar, rows as u32)?;
                    parts.push(self.float_dot(fx, scalar, Some(rows as u32), a, c)?);
                }
                Ok(self.construct(fx, t, &parts))
            }
            (
                Bin::Multiply,
                &TypeInner::Matrix {
                    columns: inner,
                    rows,
                    scalar,
                },
                &TypeInner::Matrix { columns: k, .. },
            ) => {
                let mut cols = Vec::new();
                for kk in 0..k as u32 {
                    let bc = self.column(fx, b, kk, scalar, inner as u32)?;
                    cols.push(self.mat_times_vec(fx, a, bc, inner as u32, rows as u32, scalar)?);
                }
                Ok(self.construct(fx, t, &cols))
            }
            _ => Err(self.expr_err(fx, h, "this matrix operation")),
        }
    }

    fn mat_times_vec(&mut self, fx: &mut Fx, m: u32, v: u32, columns: u32, rows: u32, s: Scalar) -> Res<u32> {
        let ct = self.vec_ty(s, rows)?;
        let st = self.scalar_ty(s)?;
        let mut acc: Option<u32> = None;
        for j in 0..columns {
            let c = self.column(fx, m, j, s, rows)?;
            let x = self.op(fx, Op::CompositeExtract, st, &[v, j]);
            let p = self.op(fx, Op::VectorTimesScalar, ct, &[c, x]);
            acc = Some(match acc {
                None => p,
                Some(a) => self.op(fx, Op::FAdd, ct, &[a, p]),
            });
        }
        acc.ok_or_else(|| Self::internal("empty matrix"))
    }

    fn convert(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        expr: Handle<Expression>,
        kind: ScalarKind,
        convert: Option<u8>,
    ) -> Res<u32> {
        let v = self.expr(fx, expr)?;
        let (s, n) = self
            .scalar_of(fx, expr)
            .ok_or_else(|| self.expr_err(fx, h, "matrix conversions"))?;
        let dst = Scalar {
            kind,
            width: convert.unwrap_or(s.width),
        };
        let t = self.expr_ty(fx, h)?;
        let int = |k: ScalarKind| matches!(k, ScalarKind::Sint | ScalarKind::Uint);
        if s == dst || (int(s.kind) && int(dst.kind) && s.width == dst.width) {
            return Ok(v);
        }
        if convert.is_none() {
            return Ok(self.op(fx, Op::Bitcast, t, &[v]));
        }
        Ok(match (s.kind, dst.kind) {
            (ScalarKind::Bool, _) => {
                let one = self.splat_const(dst, n, 1, 1.0)?;
                let zero = self.splat_const(dst, n, 0, 0.0)?;
                self.op(fx, Op::Select, t, &[v, one, zero])
            }
            (_, ScalarKind::Bool) => {
                let zero = self.splat_const(s, n, 0, 0.0)?;
                let o = if s.kind == ScalarKind::Float {
                    Op::FUnordNotEqual
                } else {
                    Op::INotEqual
                };
                self.op(fx, o, t, &[v, zero])
            }
            (ScalarKind::Sint, ScalarKind::Float) => self.op(fx, Op::ConvertSToF, t, &[v]),
            (ScalarKind::Uint, ScalarKind::Float) => self.op(fx, Op::ConvertUToF, t, &[v]),
            (ScalarKind::Sint, _) => self.op(fx, Op::SConvert, t, &[v]),
            (ScalarKind::Uint, _) => self.op(fx, Op::UConvert, t, &[v]),
            (ScalarKind::Float, ScalarKind::Float) => self.op(fx, Op::FConvert, t, &[v]),
            (ScalarKind::Float, _) => self.float_to_int(fx, v, s, dst, n, t)?,
            _ => return Err(self.expr_err(fx, h, "this conversion")),
        })
    }

    /// Saturating float-to-integer conversion: clamped into the range of floats that the
    /// integer type holds, NaN giving 0.
    fn float_to_int(&mut self, fx: &mut Fx, v: u32, s: Scalar, dst: Scalar, n: Option<u32>, t: u32) -> Res<u32> {
        let signed = dst.kind == ScalarKind::Sint;
        let int_bits = u32::from(dst.width) * 8;
        let mantissa = if s.width == 4 { 24 } else { 53 };
        let top = if signed { int_bits - 1 } else { int_bits };
        let ulp = top.saturating_sub(mantissa);
        let max = 2f64.powi(top as i32) - 2f64.powi(ulp as i32);
        let max = if ulp == 0 { 2f64.powi(top as i32) - 1.0 } else { max };
        let min = if signed { -(2f64.powi(top as i32)) } else { 0.0 };
        let ft = self.shaped(s, n)?;
        let lo = self.splat_const(s, n, 0, min)?;
        let hi = self.splat_const(s, n, 0, max)?;
        let a = self.ext(fx, Cl::fmax, ft, &[v, lo]);
        let c = self.ext(fx, Cl::fmin, ft, &[a, hi]);
        let o = if signed { Op::ConvertFToS } else { Op::ConvertFToU };
        let r = self.op(fx, o, t, &[c]);
        let bt = self.shaped(Scalar::BOOL, n)?;
        let nan = self.op(fx, Op::IsNan, bt, &[v]);
        let zero = self.splat_const(dst, n, 0, 0.0)?;
        Ok(self.op(fx, Op::Select, t, &[nan, zero, r]))
    }

    /// `unpack4x8snorm`, `unpack4x8unorm`, `unpack2x16snorm` and `unpack2x16unorm` of the
    /// word `x`, as the CPU interpreter computes them: each lane is shifted down and masked,
    /// a signed lane sign-extended by shifting it to the top and back, then divided by the
    /// largest value of its width, the signed ones clamped at -1.
    fn unpack_normalized(&mut self, fx: &mut Fx, fun: Mf, x: u32, t: u32) -> Res<u32> {
        let (lanes, bits, signed) = match fun {
            Mf::Unpack4x8snorm => (4u32, 8u32, true),
            Mf::Unpack4x8unorm => (4, 8, false),
            Mf::Unpack2x16snorm => (2, 16, true),
            _ => (2, 16, false),
        };
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        let i32_ty = self.scalar_ty(Scalar::I32)?;
        let f32_ty = self.scalar_ty(Scalar::F32)?;
        let mask = self.const_scalar(Scalar::U32, (1u64 << bits) - 1, 0.0)?;
        let top = self.const_scalar(Scalar::U32, u64::from(32 - bits), 0.0)?;
        let largest = f64::from((1u32 << (bits - u32::from(signed))) - 1);
        let scale = self.const_scalar(Scalar::F32, 0, largest)?;
        let minus_one = self.const_scalar(Scalar::F32, 0, -1.0)?;
        let mut parts = Vec::new();
        for lane in 0..lanes {
            let shift = self.const_scalar(Scalar::U32, u64::from(lane * bits), 0.0)?;
            let shifted = self.op(fx, Op::ShiftRightLogical, u32_ty, &[x, shift]);
            let value = self.op(fx, Op::BitwiseAnd, u32_ty, &[shifted, mask]);
            let float = if signed {
                let raised = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[value, top]);
                let as_int = self.op(fx, Op::Bitcast, i32_ty, &[raised]);
                let extended = self.op(fx, Op::ShiftRightArithmetic, i32_ty, &[as_int, top]);
                self.op(fx, Op::ConvertSToF, f32_ty, &[extended])
            } else {
                self.op(fx, Op::ConvertUToF, f32_ty, &[value])
            };
            let divided = self.op(fx, Op::FDiv, f32_ty, &[float, scale]);
            parts.push(if signed {
                self.ext(fx, Cl::fmax, f32_ty, &[divided, minus_one])
            } else {
                divided
            });
        }
        Ok(self.construct(fx, t, &parts))
    }

    /// The pack built-ins (but the normalized unpacks), `dot4I8Packed`/`dot4U8Packed` and
    /// `quantizeToF16`, with the CPU interpreter's results (its `ops` and `half` modules),
    /// in integer arithmetic: a NaN packs as 0, binary16 rounds to nearest with ties to even
    /// (subnormals included), a binary16 NaN keeps the top of the payload. `None` for any
    /// other built-in.
    fn packing(&mut self, fx: &mut Fx, fun: Mf, vals: &[u32], args: &[Handle<Expression>], t: u32) -> Res<Option<u32>> {
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        let i32_ty = self.scalar_ty(Scalar::I32)?;
        let f32_ty = self.scalar_ty(Scalar::F32)?;
        let x = vals[0];
        let lanes_of = |w: &Self, fx: &Fx| match w.tyinner(fx, args[0]) {
            TypeInner::Vector { size, .. } => Some(*size as u32),
            _ => None,
        };
        Ok(Some(match fun {
            Mf::Pack4x8snorm | Mf::Pack4x8unorm | Mf::Pack2x16snorm | Mf::Pack2x16unorm => {
                let (lanes, bits, signed) = match fun {
                    Mf::Pack4x8snorm => (4u32, 8u32, true),
                    Mf::Pack4x8unorm => (4, 8, false),
                    Mf::Pack2x16snorm => (2, 16, true),
                    _ => (2, 16, false),
                };
                let scale = self.const_scalar(Scalar::F32, 0, f64::from((1u32 << (bits - u32::from(signed))) - 1))?;
                let low = self.const_scalar(Scalar::F32, 0, if signed { -1.0 } else { 0.0 })?;
                let one = self.const_scalar(Scalar::F32, 0, 1.0)?;
                let half = self.const_scalar(Scalar::F32, 0, 0.5)?;
                let zero = self.const_scalar(Scalar::F32, 0, 0.0)?;
                let mask = self.const_u32((1u32 << bits) - 1);
                let bool_ty = self.bool_ty();
                let mut parts = Vec::new();
                for lane in 0..lanes {
                    let v = self.op(fx, Op::CompositeExtract, f32_ty, &[x, lane]);
                    // floor(0.5 + scale * clamp(v, low, 1)), a NaN as 0.
                    let nan = self.op(fx, Op::IsNan, bool_ty, &[v]);
                    let a = self.ext(fx, Cl::fmax, f32_ty, &[v, low]);
                    let c = self.ext(fx, Cl::fmin, f32_ty, &[a, one]);
                    let c = self.op(fx, Op::Select, f32_ty, &[nan, zero, c]);
                    let scaled = self.op(fx, Op::FMul, f32_ty, &[scale, c]);
                    let sum = self.op(fx, Op::FAdd, f32_ty, &[half, scaled]);
                    let floored = self.ext(fx, Cl::floor, f32_ty, &[sum]);
                    let int = self.op(fx, Op::ConvertFToS, i32_ty, &[floored]);
                    let word = self.op(fx, Op::Bitcast, u32_ty, &[int]);
                    let part = self.op(fx, Op::BitwiseAnd, u32_ty, &[word, mask]);
                    parts.push(part);
                }
                self.join_lanes(fx, &parts, bits)
            }
            Mf::Pack4xI8 | Mf::Pack4xU8 | Mf::Pack4xI8Clamp | Mf::Pack4xU8Clamp => {
                let signed = matches!(fun, Mf::Pack4xI8 | Mf::Pack4xI8Clamp);
                let elem = if signed { i32_ty } else { u32_ty };
                let mask = self.const_u32(0xff);
                let mut parts = Vec::new();
                for lane in 0..4 {
                    let v = self.op(fx, Op::CompositeExtract, elem, &[x, lane]);
                    let v = match fun {
                        Mf::Pack4xI8Clamp => {
                            let lo = self.const_u32(-128i32 as u32);
                            let hi = self.const_u32(127);
                            self.ext(fx, Cl::s_clamp, i32_ty, &[v, lo, hi])
                        }
                        Mf::Pack4xU8Clamp => {
                            let hi = self.const_u32(255);
                            self.ext(fx, Cl::u_min, u32_ty, &[v, hi])
                        }
                        _ => v,
                    };
                    let word = if signed {
                        self.op(fx, Op::Bitcast, u32_ty, &[v])
                    } else {
                        v
                    };
                    parts.push(self.op(fx, Op::BitwiseAnd, u32_ty, &[word, mask]));
                }
                self.join_lanes(fx, &parts, 8)
            }
            Mf::Unpack4xI8 | Mf::Unpack4xU8 => {
                let mut parts = Vec::new();
                for lane in 0..4 {
                    parts.push(self.byte_of(fx, x, lane, fun == Mf::Unpack4xI8)?);
                }
                self.construct(fx, t, &parts)
            }
            Mf::Dot4I8Packed | Mf::Dot4U8Packed => {
                let signed = fun == Mf::Dot4I8Packed;
                let mut sum = None;
                for lane in 0..4 {
                    let a = self.byte_of(fx, x, lane, signed)?;
                    let b = self.byte_of(fx, vals[1], lane, signed)?;
                    let ty = if signed { i32_ty } else { u32_ty };
                    let p = self.op(fx, Op::IMul, ty, &[a, b]);
                    sum = Some(match sum {
                        None => p,
                        Some(s) => self.op(fx, Op::IAdd, ty, &[s, p]),
                    });
                }
                sum.ok_or_else(|| Self::internal("empty dot4"))?
            }
            Mf::Pack2x16float => {
                let mut parts = Vec::new();
                for lane in 0..2 {
                    let v = self.op(fx, Op::CompositeExtract, f32_ty, &[x, lane]);
                    parts.push(self.f16_bits(fx, v)?);
                }
                self.join_lanes(fx, &parts, 16)
            }
            Mf::Unpack2x16float => {
                let mask = self.const_u32(0xffff);
                let sixteen = self.const_u32(16);
                let low = self.op(fx, Op::BitwiseAnd, u32_ty, &[x, mask]);
                let high = self.op(fx, Op::ShiftRightLogical, u32_ty, &[x, sixteen]);
                let a = self.f16_value(fx, low)?;
                let b = self.f16_value(fx, high)?;
                self.construct(fx, t, &[a, b])
            }
            Mf::QuantizeToF16 => match lanes_of(self, fx) {
                None => {
                    let h = self.f16_bits(fx, x)?;
                    self.f16_value(fx, h)?
                }
                Some(n) => {
                    let mut parts = Vec::new();
                    for lane in 0..n {
                        let v = self.op(fx, Op::CompositeExtract, f32_ty, &[x, lane]);
                        let h = self.f16_bits(fx, v)?;
                        parts.push(self.f16_value(fx, h)?);
                    }
                    self.construct(fx, t, &parts)
                }
            },
            _ => return Ok(None),
        }))
    }

    /// `parts[0] | parts[1] << bits | ...`: lanes of `bits` bits each, the first lowest.
    fn join_lanes(&mut self, fx: &mut Fx, parts: &[u32], bits: u32) -> u32 {
        let u32_ty = self.uint(4);
        let mut word = parts[0];
        for (k, &part) in parts.iter().enumerate().skip(1) {
            let shift = self.const_u32(bits * k as u32);
            let moved = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[part, shift]);
            word = self.op(fx, Op::BitwiseOr, u32_ty, &[word, moved]);
        }
        word
    }

    /// Byte `lane` of the word `x`, sign-extended to an `i32` or zero-extended to a `u32`.
    fn byte_of(&mut self, fx: &mut Fx, x: u32, lane: u32, signed: bool) -> Res<u32> {
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        if signed {
            let i32_ty = self.scalar_ty(Scalar::I32)?;
            let up = self.const_u32(24 - 8 * lane);
            let down = self.const_u32(24);
            let raised = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[x, up]);
            let as_int = self.op(fx, Op::Bitcast, i32_ty, &[raised]);
            Ok(self.op(fx, Op::ShiftRightArithmetic, i32_ty, &[as_int, down]))
        } else {
            let shift = self.const_u32(8 * lane);
            let mask = self.const_u32(0xff);
            let shifted = self.op(fx, Op::ShiftRightLogical, u32_ty, &[x, shift]);
            Ok(self.op(fx, Op::BitwiseAnd, u32_ty, &[shifted, mask]))
        }
    }

    /// `(m >> shift)` rounded to nearest, ties to even (`1 <= shift <= 31`), all `u32`.
    fn round_shift(&mut self, fx: &mut Fx, m: u32, shift: u32) -> Res<u32> {
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        let bool_ty = self.bool_ty();
        let one = self.const_u32(1);
        let zero = self.const_u32(0);
        let below = self.op(fx, Op::ISub, u32_ty, &[shift, one]);
        let half = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[one, below]);
        let twice = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[half, one]);
        let low_mask = self.op(fx, Op::ISub, u32_ty, &[twice, one]);
        let rest = self.op(fx, Op::BitwiseAnd, u32_ty, &[m, low_mask]);
        let value = self.op(fx, Op::ShiftRightLogical, u32_ty, &[m, shift]);
        let above = self.op(fx, Op::UGreaterThan, bool_ty, &[rest, half]);
        let tie = self.op(fx, Op::IEqual, bool_ty, &[rest, half]);
        let odd_bit = self.op(fx, Op::BitwiseAnd, u32_ty, &[value, one]);
        let odd = self.op(fx, Op::INotEqual, bool_ty, &[odd_bit, zero]);
        let tie_odd = self.op(fx, Op::LogicalAnd, bool_ty, &[tie, odd]);
        let up = self.op(fx, Op::LogicalOr, bool_ty, &[above, tie_odd]);
        let inc = self.op(fx, Op::Select, u32_ty, &[up, one, zero]);
        Ok(self.op(fx, Op::IAdd, u32_ty, &[value, inc]))
    }

    /// The binary16 bits (in a `u32`) nearest to the `f32` `x`, as the interpreter's
    /// `f32_to_f16_bits`: ties to even, too large to infinity, too small to a signed zero,
    /// subnormal results rounded once, a NaN quiet with the top of its payload.
    fn f16_bits(&mut self, fx: &mut Fx, x: u32) -> Res<u32> {
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        let bool_ty = self.bool_ty();
        let c = |w: &mut Self, v: u32| w.const_u32(v);
        let bits = self.op(fx, Op::Bitcast, u32_ty, &[x]);
        let (k16, k8000, k23, kff, k7fffff, k13) = (
            c(self, 16),
            c(self, 0x8000),
            c(self, 23),
            c(self, 0xff),
            c(self, 0x7f_ffff),
            c(self, 13),
        );
        let shifted = self.op(fx, Op::ShiftRightLogical, u32_ty, &[bits, k16]);
        let sign = self.op(fx, Op::BitwiseAnd, u32_ty, &[shifted, k8000]);
        let high = self.op(fx, Op::ShiftRightLogical, u32_ty, &[bits, k23]);
        let exponent = self.op(fx, Op::BitwiseAnd, u32_ty, &[high, kff]);
        let mantissa = self.op(fx, Op::BitwiseAnd, u32_ty, &[bits, k7fffff]);
        let infinity = c(self, 0x7c00);
        let signed_infinity = self.op(fx, Op::BitwiseOr, u32_ty, &[sign, infinity]);
        // NaN: quiet, with the top ten bits of the payload.
        let zero = c(self, 0);
        let payload = self.op(fx, Op::ShiftRightLogical, u32_ty, &[mantissa, k13]);
        let quiet = c(self, 0x200);
        let quieted = self.op(fx, Op::BitwiseOr, u32_ty, &[payload, quiet]);
        let is_nan = self.op(fx, Op::INotEqual, bool_ty, &[mantissa, zero]);
        let nan_bits = self.op(fx, Op::Select, u32_ty, &[is_nan, quieted, zero]);
        let special = self.op(fx, Op::BitwiseOr, u32_ty, &[signed_infinity, nan_bits]);
        // A normal result (exponent 113..=142) rounds the f32 bits with the exponent rebased
        // by 13 places; a subnormal one (102..=112) rounds the significand with its implicit
        // bit by 126 - exponent places. Either may carry into the next exponent (or
        // infinity), which is what the encoding does by itself.
        let (k112, k126, implicit) = (c(self, 112), c(self, 126), c(self, 0x80_0000));
        let subnormal = self.op(fx, Op::ULessThanEqual, bool_ty, &[exponent, k112]);
        let rebased = self.op(fx, Op::ISub, u32_ty, &[exponent, k112]);
        let rebased = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[rebased, k23]);
        let normal_in = self.op(fx, Op::BitwiseOr, u32_ty, &[rebased, mantissa]);
        let subnormal_in = self.op(fx, Op::BitwiseOr, u32_ty, &[mantissa, implicit]);
        let input = self.op(fx, Op::Select, u32_ty, &[subnormal, subnormal_in, normal_in]);
        // 126 - exponent, kept within 13..=25 (outside it the result is chosen below).
        let (k25, k13b) = (c(self, 25), k13);
        let low = self.ext(fx, Cl::u_min, u32_ty, &[exponent, k126]);
        let sub_shift = self.op(fx, Op::ISub, u32_ty, &[k126, low]);
        let sub_shift = self.ext(fx, Cl::u_clamp, u32_ty, &[sub_shift, k13b, k25]);
        let shift = self.op(fx, Op::Select, u32_ty, &[subnormal, sub_shift, k13b]);
        let rounded = self.round_shift(fx, input, shift)?;
        let finite = self.op(fx, Op::BitwiseOr, u32_ty, &[sign, rounded]);
        let (k102, k143) = (c(self, 102), c(self, 143));
        let tiny = self.op(fx, Op::ULessThan, bool_ty, &[exponent, k102]);
        let huge = self.op(fx, Op::UGreaterThanEqual, bool_ty, &[exponent, k143]);
        let is_special = self.op(fx, Op::IEqual, bool_ty, &[exponent, kff]);
        let r = self.op(fx, Op::Select, u32_ty, &[tiny, sign, finite]);
        let r = self.op(fx, Op::Select, u32_ty, &[huge, signed_infinity, r]);
        Ok(self.op(fx, Op::Select, u32_ty, &[is_special, special, r]))
    }

    /// The `f32` value of the binary16 bits in the low half of the `u32` `h`, exactly, as the
    /// interpreter's `f16_bits_to_f32` (a NaN keeps its payload).
    fn f16_value(&mut self, fx: &mut Fx, h: u32) -> Res<u32> {
        let u32_ty = self.scalar_ty(Scalar::U32)?;
        let f32_ty = self.scalar_ty(Scalar::F32)?;
        let bool_ty = self.bool_ty();
        let c = |w: &mut Self, v: u32| w.const_u32(v);
        let (k8000, k16, k10, k1f, k3ff, k13, k23, k112) = (
            c(self, 0x8000),
            c(self, 16),
            c(self, 10),
            c(self, 0x1f),
            c(self, 0x3ff),
            c(self, 13),
            c(self, 23),
            c(self, 112),
        );
        let sign = self.op(fx, Op::BitwiseAnd, u32_ty, &[h, k8000]);
        let sign = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[sign, k16]);
        let e = self.op(fx, Op::ShiftRightLogical, u32_ty, &[h, k10]);
        let e = self.op(fx, Op::BitwiseAnd, u32_ty, &[e, k1f]);
        let m = self.op(fx, Op::BitwiseAnd, u32_ty, &[h, k3ff]);
        let m13 = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[m, k13]);
        // Subnormal (and zero): m * 2^-24, exact in f32.
        let mf = self.op(fx, Op::ConvertUToF, f32_ty, &[m]);
        let unit = self.const_scalar(Scalar::F32, 0, 2f64.powi(-24))?;
        let small = self.op(fx, Op::FMul, f32_ty, &[mf, unit]);
        let small = self.op(fx, Op::Bitcast, u32_ty, &[small]);
        // Infinity and NaN.
        let inf = c(self, 0x7f80_0000);
        let special = self.op(fx, Op::BitwiseOr, u32_ty, &[inf, m13]);
        // Normal: the exponent rebased.
        let rebased = self.op(fx, Op::IAdd, u32_ty, &[e, k112]);
        let rebased = self.op(fx, Op::ShiftLeftLogical, u32_ty, &[rebased, k23]);
        let normal = self.op(fx, Op::BitwiseOr, u32_ty, &[rebased, m13]);
        let zero = c(self, 0);
        let is_small = self.op(fx, Op::IEqual, bool_ty, &[e, zero]);
        let is_special = self.op(fx, Op::IEqual, bool_ty, &[e, k1f]);
        let r = self.op(fx, Op::Select, u32_ty, &[is_special, special, normal]);
        let r = self.op(fx, Op::Select, u32_ty, &[is_small, small, r]);
        let r = self.op(fx, Op::BitwiseOr, u32_ty, &[sign, r]);
        Ok(self.op(fx, Op::Bitcast, f32_ty, &[r]))
    }

    fn math(&mut self, fx: &mut Fx, h: Handle<Expression>, fun: Mf, args: &[Handle<Expression>]) -> Res<u32> {
        let mut vals = Vec::new();
        for &a in args {
            vals.push(self.expr(fx, a)?);
        }
        let t = self.expr_ty(fx, h)?;
        let t0 = self.tyinner(fx, args[0]).clone();
        if let TypeInner::Matrix { columns, rows, scalar } = t0 {
            return self.matrix_math(fx, h, fun, vals[0], columns as u32, rows as u32, scalar, t);
        }
        if matches!(
            fun,
            Mf::Unpack4x8snorm | Mf::Unpack4x8unorm | Mf::Unpack2x16snorm | Mf::Unpack2x16unorm
        ) {
            return self.unpack_normalized(fx, fun, vals[0], t);
        }
        if let Some(v) = self.packing(fx, fun, &vals, args, t)? {
            return Ok(v);
        }
        let (s, n) = self
            .scalar_of(fx, args[0])
            .ok_or_else(|| self.expr_err(fx, h, &format!("{fun:?} on this type")))?;
        // refract's eta stays a scalar.
        let eta = vals.get(2).copied();
        // Arguments that are scalars where the first is a vector apply to every component
        // (not the offset and count of the bit-field built-ins, which stay scalars).
        if !matches!(fun, Mf::ExtractBits | Mf::InsertBits) {
            for (k, &a) in args.iter().enumerate().skip(1) {
                if let (Some((sk, None)), Some(_)) = (self.scalar_of(fx, a), n) {
                    vals[k] = self.splat(fx, vals[k], sk, n)?;
                }
            }
        }
        let float = s.kind == ScalarKind::Float;
        let signed = s.kind == ScalarKind::Sint;
        let x = vals[0];
        if float {
            let c = |w: &mut Self, v: f64| w.splat_const(s, n, 0, v);
            let one_arg = match fun {
                Mf::Abs => Some(Cl::fabs),
                Mf::Cos => Some(Cl::cos),
                Mf::Cosh => Some(Cl::cosh),
                Mf::Sin => Some(Cl::sin),
                Mf::Sinh => Some(Cl::sinh),
                Mf::Tan => Some(Cl::tan),
                Mf::Tanh => Some(Cl::tanh),
                Mf::Acos => Some(Cl::acos),
                Mf::Asin => Some(Cl::asin),
                Mf::Atan => Some(Cl::atan),
                Mf::Asinh => Some(Cl::asinh),
                Mf::Acosh => Some(Cl::acosh),
                Mf::Atanh => Some(Cl::atanh),
                Mf::Ceil => Some(Cl::ceil),
                Mf::Floor => Some(Cl::floor),
                Mf::Round => Some(Cl::rint),
                Mf::Trunc => Some(Cl::trunc),
                Mf::Exp => Some(Cl::exp),
                Mf::Exp2 => Some(Cl::exp2),
                Mf::Log => Some(Cl::log),
                Mf::Log2 => Some(Cl::log2),
                Mf::Sqrt => Some(Cl::sqrt),
                _ => None,
            };
            if let Some(f) = one_arg {
                return Ok(self.ext(fx, f, t, &[x]));
            }
            return Ok(match fun {
                Mf::Min => self.ext(fx, Cl::fmin, t, &[x, vals[1]]),
                Mf::Max => self.ext(fx, Cl::fmax, t, &[x, vals[1]]),
                Mf::Atan2 => self.ext(fx, Cl::atan2, t, &[x, vals[1]]),
                Mf::Pow => self.ext(fx, Cl::pow, t, &[x, vals[1]]),
                Mf::Cross => self.ext(fx, Cl::cross, t, &[x, vals[1]]),
                Mf::Ldexp => self.ext(fx, Cl::ldexp, t, &[x, vals[1]]),
                Mf::Fma => self.ext(fx, Cl::fma, t, &[x, vals[1], vals[2]]),
                // Geometry as the C dialects write it: products summed left to right, a
                // square root, a division (no rescaling of tiny or huge vectors), so every
                // translation gives the same bits.
                Mf::Dot => self.float_dot(fx, s, n, x, vals[1])?,
                Mf::Length => {
                    let d = self.float_dot(fx, s, n, x, x)?;
                    self.ext(fx, Cl::sqrt, t, &[d])
                }
                Mf::Distance => {
                    let vt = self.shaped(s, n)?;
                    let diff = self.op(fx, Op::FSub, vt, &[x, vals[1]]);
                    let d = self.float_dot(fx, s, n, diff, diff)?;
                    self.ext(fx, Cl::sqrt, t, &[d])
                }
                Mf::Normalize => {
                    let st = self.scalar_ty(s)?;
                    let d = self.float_dot(fx, s, n, x, x)?;
                    let len = self.ext(fx, Cl::sqrt, st, &[d]);
                    let lens = self.splat(fx, len, s, n)?;
                    self.op(fx, Op::FDiv, t, &[x, lens])
                }
                Mf::Clamp => {
                    let a = self.ext(fx, Cl::fmax, t, &[x, vals[1]]);
                    self.ext(fx, Cl::fmin, t, &[a, vals[2]])
                }
                // reflect, faceForward and refract with the C dialects' (and the CPU
                // interpreter's) operations, in their order.
                Mf::Reflect => {
                    // e1 - (2 * dot(e2, e1)) * e2
                    let st = self.scalar_ty(s)?;
                    let d = self.float_dot(fx, s, n, vals[1], x)?;
                    let two = self.splat_const(s, None, 0, 2.0)?;
                    let scale = self.op(fx, Op::FMul, st, &[two, d]);
                    let scales = self.splat(fx, scale, s, n)?;
                    let term = self.op(fx, Op::FMul, t, &[scales, vals[1]]);
                    self.op(fx, Op::FSub, t, &[x, term])
                }
                Mf::FaceForward => {
                    // dot(e2, e3) < 0 ? e1 : -e1
                    let d = self.float_dot(fx, s, n, vals[1], vals[2])?;
                    let zero = self.splat_const(s, None, 0, 0.0)?;
                    let bool_ty = self.scalar_ty(Scalar::BOOL)?;
                    let negative = self.op(fx, Op::FOrdLessThan, bool_ty, &[d, zero]);
                    let negatives = self.splat(fx, negative, Scalar::BOOL, n)?;
                    let flipped = self.op(fx, Op::FNegate, t, &[x]);
                    self.op(fx, Op::Select, t, &[negatives, x, flipped])
                }
                Mf::Refract => {
                    // k = 1 - eta * eta * (1 - d * d) with d = dot(e2, e1); 0 where k < 0,
                    // else eta * e1 - (eta * d + sqrt(k)) * e2.
                    let st = self.scalar_ty(s)?;
                    let eta = eta.ok_or_else(|| Self::internal("refract without eta"))?;
                    let d = self.float_dot(fx, s, n, vals[1], x)?;
                    let one = self.splat_const(s, None, 0, 1.0)?;
                    let zero = self.splat_const(s, None, 0, 0.0)?;
                    let d2 = self.op(fx, Op::FMul, st, &[d, d]);
                    let one_minus_d2 = self.op(fx, Op::FSub, st, &[one, d2]);
                    let eta2 = self.op(fx, Op::FMul, st, &[eta, eta]);
                    let scaled = self.op(fx, Op::FMul, st, &[eta2, one_minus_d2]);
                    let k = self.op(fx, Op::FSub, st, &[one, scaled]);
                    let bool_ty = self.scalar_ty(Scalar::BOOL)?;
                    let negative = self.op(fx, Op::FOrdLessThan, bool_ty, &[k, zero]);
                    let root = self.ext(fx, Cl::sqrt, st, &[k]);
                    let eta_d = self.op(fx, Op::FMul, st, &[eta, d]);
                    let factor = self.op(fx, Op::FAdd, st, &[eta_d, root]);
                    let etas = self.splat(fx, eta, s, n)?;
                    let factors = self.splat(fx, factor, s, n)?;
                    let left = self.op(fx, Op::FMul, t, &[etas, x]);
                    let right = self.op(fx, Op::FMul, t, &[factors, vals[1]]);
                    let value = self.op(fx, Op::FSub, t, &[left, right]);
                    let zeros = self.splat_const(s, n, 0, 0.0)?;
                    let negatives = self.splat(fx, negative, Scalar::BOOL, n)?;
                    self.op(fx, Op::Select, t, &[negatives, zeros, value])
                }
                Mf::Modf => {
                    // (fract, whole) = (e - trunc(e), trunc(e))
                    let vt = self.shaped(s, n)?;
                    let whole = self.ext(fx, Cl::trunc, vt, &[x]);
                    let fract = self.op(fx, Op::FSub, vt, &[x, whole]);
                    self.result_struct(fx, h, &[fract, whole])?
                }
                Mf::Frexp if s.width != 2 => {
                    let (fract, exp) = self.frexp(fx, s, n, x)?;
                    self.result_struct(fx, h, &[fract, exp])?
                }
                Mf::Saturate => {
                    let zero = c(self, 0.0)?;
                    let one = c(self, 1.0)?;
                    let a = self.ext(fx, Cl::fmax, t, &[x, zero]);
                    self.ext(fx, Cl::fmin, t, &[a, one])
                }
                Mf::Radians => {
                    let k = c(self, 0.017453292519943295)?;
                    self.op(fx, Op::FMul, t, &[x, k])
                }
                Mf::Degrees => {
                    let k = c(self, 57.29577951308232)?;
                    self.op(fx, Op::FMul, t, &[x, k])
                }
                Mf::Fract => {
                    let f = self.ext(fx, Cl::floor, t, &[x]);
                    self.op(fx, Op::FSub, t, &[x, f])
                }
                Mf::InverseSqrt => {
                    let one = c(self, 1.0)?;
                    let r = self.ext(fx, Cl::sqrt, t, &[x]);
                    self.op(fx, Op::FDiv, t, &[one, r])
                }
                Mf::Sign => {
                    let zero = c(self, 0.0)?;
                    let one = c(self, 1.0)?;
                    let minus = c(self, -1.0)?;
                    let bt = self.shaped(Scalar::BOOL, n)?;
                    let gt = self.op(fx, Op::FOrdGreaterThan, bt, &[x, zero]);
                    let lt = self.op(fx, Op::FOrdLessThan, bt, &[x, zero]);
                    let neg = self.op(fx, Op::Select, t, &[lt, minus, x]);
                    self.op(fx, Op::Select, t, &[gt, one, neg])
                }
                Mf::Mix => {
                    let one = c(self, 1.0)?;
                    let inv = self.op(fx, Op::FSub, t, &[one, vals[2]]);
                    let p = self.op(fx, Op::FMul, t, &[x, inv]);
                    let q = self.op(fx, Op::FMul, t, &[vals[1], vals[2]]);
                    self.op(fx, Op::FAdd, t, &[p, q])
                }
                Mf::Step => {
                    let one = c(self, 1.0)?;
                    let zero = c(self, 0.0)?;
                    let bt = self.shaped(Scalar::BOOL, n)?;
                    let le = self.op(fx, Op::FOrdLessThanEqual, bt, &[x, vals[1]]);
                    self.op(fx, Op::Select, t, &[le, one, zero])
                }
                Mf::SmoothStep => {
                    let (lo, hi, v) = (x, vals[1], vals[2]);
                    let zero = c(self, 0.0)?;
                    let one = c(self, 1.0)?;
                    let two = c(self, 2.0)?;
                    let three = c(self, 3.0)?;
                    let num = self.op(fx, Op::FSub, t, &[v, lo]);
                    let den = self.op(fx, Op::FSub, t, &[hi, lo]);
                    let q = self.op(fx, Op::FDiv, t, &[num, den]);
                    let a = self.ext(fx, Cl::fmax, t, &[q, zero]);
                    let k = self.ext(fx, Cl::fmin, t, &[a, one]);
                    let kk = self.op(fx, Op::FMul, t, &[k, k]);
                    let tk = self.op(fx, Op::FMul, t, &[two, k]);
                    let d = self.op(fx, Op::FSub, t, &[three, tk]);
                    self.op(fx, Op::FMul, t, &[kk, d])
                }
                other => return Err(self.expr_err(fx, h, &format!("the built-in {other:?}"))),
            });
        }
        if s.kind == ScalarKind::Bool {
            return Err(self.expr_err(fx, h, &format!("the built-in {fun:?} on bool")));
        }
        let wide = s.width == 8;
        let ic = |w: &mut Self, v: u64| w.splat_const(s, n, v, 0.0);
        let bt = self.shaped(Scalar::BOOL, n)?;
        Ok(match fun {
            Mf::Abs if signed => self.ext(fx, Cl::s_abs, t, &[x]),
            Mf::Abs => x,
            Mf::Min => self.ext(fx, if signed { Cl::s_min } else { Cl::u_min }, t, &[x, vals[1]]),
            Mf::Max => self.ext(fx, if signed { Cl::s_max } else { Cl::u_max }, t, &[x, vals[1]]),
            Mf::Clamp => {
                let a = self.ext(fx, if signed { Cl::s_max } else { Cl::u_max }, t, &[x, vals[1]]);
                self.ext(fx, if signed { Cl::s_min } else { Cl::u_min }, t, &[a, vals[2]])
            }
            Mf::Sign if signed => {
                let zero = ic(self, 0)?;
                let one = ic(self, 1)?;
                let minus = ic(self, u64::MAX)?;
                let gt = self.op(fx, Op::SGreaterThan, bt, &[x, zero]);
                let lt = self.op(fx, Op::SLessThan, bt, &[x, zero]);
                let neg = self.op(fx, Op::Select, t, &[lt, minus, zero]);
                self.op(fx, Op::Select, t, &[gt, one, neg])
            }
            Mf::Dot => {
                let st = self.scalar_ty(s)?;
                let vt = self.shaped(s, n)?;
                let p = self.op(fx, Op::IMul, vt, &[x, vals[1]]);
                let mut acc = None;
                for i in 0..n.unwrap_or(1) {
                    let c = if n.is_some() {
                        self.op(fx, Op::CompositeExtract, st, &[p, i])
                    } else {
                        p
                    };
                    acc = Some(match acc {
                        None => c,
                        Some(a) => self.op(fx, Op::IAdd, st, &[a, c]),
                    });
                }
                acc.ok_or_else(|| Self::internal("empty dot"))?
            }
            Mf::CountOneBits => self.ext(fx, Cl::popcount, t, &[x]),
            Mf::CountLeadingZeros => self.ext(fx, Cl::clz, t, &[x]),
            Mf::CountTrailingZeros => self.ext(fx, Cl::ctz, t, &[x]),
            Mf::ReverseBits => {
                // Swaps of ever larger fields; on 64 bits the masks are doubled and the last
                // swap exchanges the 32-bit halves.
                let mut steps = vec![
                    (1u64, 0x5555_5555_5555_5555u64),
                    (2, 0x3333_3333_3333_3333),
                    (4, 0x0F0F_0F0F_0F0F_0F0F),
                    (8, 0x00FF_00FF_00FF_00FF),
                ];
                if wide {
                    steps.push((16, 0x0000_FFFF_0000_FFFF));
                } else {
                    for step in &mut steps {
                        step.1 &= 0xFFFF_FFFF;
                    }
                }
                let last = if wide { 32 } else { 16 };
                let mut v = x;
                for (shift, mask) in steps {
                    let sh = ic(self, shift)?;
                    let mk = ic(self, mask)?;
                    let hi = self.op(fx, Op::ShiftRightLogical, t, &[v, sh]);
                    let hi = self.op(fx, Op::BitwiseAnd, t, &[hi, mk]);
                    let lo = self.op(fx, Op::BitwiseAnd, t, &[v, mk]);
                    let lo = self.op(fx, Op::ShiftLeftLogical, t, &[lo, sh]);
                    v = self.op(fx, Op::BitwiseOr, t, &[hi, lo]);
                }
                let half = ic(self, last)?;
                let hi = self.op(fx, Op::ShiftRightLogical, t, &[v, half]);
                let lo = self.op(fx, Op::ShiftLeftLogical, t, &[v, half]);
                self.op(fx, Op::BitwiseOr, t, &[hi, lo])
            }
            // On 64 bits: the all-ones of 64 bits where there is no such bit.
            Mf::FirstTrailingBit => {
                let zero = ic(self, 0)?;
                let all = ic(self, if wide { u64::MAX } else { u64::from(u32::MAX) })?;
                let is0 = self.op(fx, Op::IEqual, bt, &[x, zero]);
                let tz = self.ext(fx, Cl::ctz, t, &[x]);
                self.op(fx, Op::Select, t, &[is0, all, tz])
            }
            Mf::FirstLeadingBit => {
                let zero = ic(self, 0)?;
                let all = ic(self, if wide { u64::MAX } else { u64::from(u32::MAX) })?;
                let v = if signed {
                    let neg = self.op(fx, Op::SLessThan, bt, &[x, zero]);
                    let inv = self.op(fx, Op::Not, t, &[x]);
                    self.op(fx, Op::Select, t, &[neg, inv, x])
                } else {
                    x
                };
                let is0 = self.op(fx, Op::IEqual, bt, &[v, zero]);
                let lz = self.ext(fx, Cl::clz, t, &[v]);
                let top = ic(self, if wide { 63 } else { 31 })?;
                let r = self.op(fx, Op::ISub, t, &[top, lz]);
                self.op(fx, Op::Select, t, &[is0, all, r])
            }
            Mf::ExtractBits | Mf::InsertBits => {
                let (offset, count) = if fun == Mf::ExtractBits {
                    (vals[1], vals[2])
                } else {
                    (vals[2], vals[3])
                };
                self.bit_field(fx, fun, s, n, x, vals[1], offset, count, t)?
            }
            other => return Err(self.expr_err(fx, h, &format!("the built-in {other:?} on {}", scalar_wgsl(s)))),
        })
    }

    /// `frexp` as the C dialects' helpers compute it: zero, infinities and NaN are their own
    /// fraction with exponent 0; a subnormal is scaled by 2^64 first.
    fn frexp(&mut self, fx: &mut Fx, s: Scalar, n: Option<u32>, x: u32) -> Res<(u32, u32)> {
        // f32 and f64 (whose exponent naga types i64); the constants by width.
        let wide = s.width == 8;
        let (us, is) = if wide {
            (Scalar::U64, Scalar::I64)
        } else {
            (Scalar::U32, Scalar::I32)
        };
        let (shift, field_mask, bias_half) = if wide { (52, 0x7FF, 1022) } else { (23, 0xFF, 126) };
        let abs_mask = if wide { u64::MAX >> 1 } else { 0x7FFF_FFFF };
        let keep_mask = if wide { 0x800F_FFFF_FFFF_FFFF } else { 0x807F_FFFF };
        let ft = self.shaped(s, n)?;
        let ut = self.shaped(us, n)?;
        let it = self.shaped(is, n)?;
        let bt = self.shaped(Scalar::BOOL, n)?;
        let u = |w: &mut Self, v: u64| w.splat_const(us, n, v, 0.0);
        let (kshift, kfield, kabs, kzero) = (u(self, shift)?, u(self, field_mask)?, u(self, abs_mask)?, u(self, 0)?);
        let (kmant, khalf) = (u(self, keep_mask)?, u(self, bias_half << shift)?);
        let bits = self.op(fx, Op::Bitcast, ut, &[x]);
        let field = self.op(fx, Op::ShiftRightLogical, ut, &[bits, kshift]);
        let e = self.op(fx, Op::BitwiseAnd, ut, &[field, kfield]);
        let is_special = self.op(fx, Op::IEqual, bt, &[e, kfield]);
        let magnitude = self.op(fx, Op::BitwiseAnd, ut, &[bits, kabs]);
        let is_zero = self.op(fx, Op::IEqual, bt, &[magnitude, kzero]);
        let keep = self.op(fx, Op::LogicalOr, bt, &[is_special, is_zero]);
        let is_small = self.op(fx, Op::IEqual, bt, &[e, kzero]);
        let k64 = self.splat_const(s, n, 0, 18446744073709551616.0)?;
        let scaled = self.op(fx, Op::FMul, ft, &[x, k64]);
        let scaled_bits = self.op(fx, Op::Bitcast, ut, &[scaled]);
        let b = self.op(fx, Op::Select, ut, &[is_small, scaled_bits, bits]);
        let mantissa = self.op(fx, Op::BitwiseAnd, ut, &[b, kmant]);
        let fraction_bits = self.op(fx, Op::BitwiseOr, ut, &[mantissa, khalf]);
        let fraction = self.op(fx, Op::Bitcast, ft, &[fraction_bits]);
        let fract = self.op(fx, Op::Select, ft, &[keep, x, fraction]);
        let field = self.op(fx, Op::ShiftRightLogical, ut, &[b, kshift]);
        let biased = self.op(fx, Op::BitwiseAnd, ut, &[field, kfield]);
        let biased = self.op(fx, Op::Bitcast, it, &[biased]);
        let i = |w: &mut Self, v: i64| w.splat_const(is, n, v as u64, 0.0);
        let (kbias, kminus64, izero) = (i(self, bias_half as i64)?, i(self, -64)?, i(self, 0)?);
        let bias = self.op(fx, Op::Select, it, &[is_small, kminus64, izero]);
        let unbiased = self.op(fx, Op::ISub, it, &[biased, kbias]);
        let exponent = self.op(fx, Op::IAdd, it, &[unbiased, bias]);
        let exp = self.op(fx, Op::Select, it, &[keep, izero, exponent]);
        Ok((fract, exp))
    }

    /// The predeclared struct that `modf` and `frexp` return, from its two members (laid out
    /// as any struct, a `vec3` member as three scalars where it must be).
    fn result_struct(&mut self, fx: &mut Fx, h: Handle<Expression>, members: &[u32]) -> Res<u32> {
        let TypeResolution::Handle(ty) = fx.fi[h].ty.clone() else {
            return Err(Self::internal("a modf or frexp result without a struct type"));
        };
        self.compose(fx, ty, members, &[None, None])
    }

    /// `a · b` for float scalars or vectors: the products added left to right.
    fn float_dot(&mut self, fx: &mut Fx, s: Scalar, n: Option<u32>, a: u32, b: u32) -> Res<u32> {
        let st = self.scalar_ty(s)?;
        let vt = self.shaped(s, n)?;
        let p = self.op(fx, Op::FMul, vt, &[a, b]);
        let Some(n) = n else { return Ok(p) };
        let mut acc = self.op(fx, Op::CompositeExtract, st, &[p, 0]);
        for i in 1..n {
            let c = self.op(fx, Op::CompositeExtract, st, &[p, i]);
            acc = self.op(fx, Op::FAdd, st, &[acc, c]);
        }
        Ok(acc)
    }

    /// `extractBits` / `insertBits` with WGSL's clamping of offset and count.
    #[allow(clippy::too_many_arguments)]
    fn bit_field(
        &mut self,
        fx: &mut Fx,
        fun: Mf,
        s: Scalar,
        n: Option<u32>,
        e: u32,
        newbits: u32,
        offset: u32,
        count: u32,
        t: u32,
    ) -> Res<u32> {
        // The offset and the count are u32, clamped to the operand's width; the mask and the
        // shift amounts are of that width (a 64-bit operand's widened from u32).
        let wide = s.width == 8;
        let width_bits = if wide { 64 } else { 32 };
        let u32t = self.uint(4);
        let wt = self.uint(s.width);
        let word = Scalar {
            kind: ScalarKind::Uint,
            width: s.width,
        };
        let k32 = self.const_u32(width_bits);
        let k31 = self.const_u32(width_bits - 1);
        let k1 = self.const_u32(1);
        let k1w = self.splat_const(word, None, 1, 0.0)?;
        let o = self.ext(fx, Cl::u_min, u32t, &[offset, k32]);
        let room = self.op(fx, Op::ISub, u32t, &[k32, o]);
        let c = self.ext(fx, Cl::u_min, u32t, &[count, room]);
        let bool_t = self.bool_ty();
        let k0 = self.const_u32(0);
        let c_is0 = self.op(fx, Op::IEqual, bool_t, &[c, k0]);
        let c_is32 = self.op(fx, Op::IEqual, bool_t, &[c, k32]);
        let widen = |w: &mut Self, fx: &mut Fx, v: u32| if wide { w.op(fx, Op::UConvert, wt, &[v]) } else { v };
        let cs = self.op(fx, Op::BitwiseAnd, u32t, &[c, k31]);
        let cs = widen(self, fx, cs);
        let os = self.op(fx, Op::BitwiseAnd, u32t, &[o, k31]);
        let os = widen(self, fx, os);
        let one_shift = self.op(fx, Op::ShiftLeftLogical, wt, &[k1w, cs]);
        let mask = self.op(fx, Op::ISub, wt, &[one_shift, k1w]);
        let sp = |w: &mut Self, fx: &mut Fx, v: u32| w.splat(fx, v, word, n);
        let mask_v = sp(self, fx, mask)?;
        let os_v = sp(self, fx, os)?;
        let zero = self.splat_const(s, n, 0, 0.0)?;
        let r = if fun == Mf::ExtractBits {
            let shifted = self.op(fx, Op::ShiftRightLogical, t, &[e, os_v]);
            let v = self.op(fx, Op::BitwiseAnd, t, &[shifted, mask_v]);
            if s.kind == ScalarKind::Sint {
                let cm1 = self.op(fx, Op::ISub, u32t, &[c, k1]);
                let cm1 = self.op(fx, Op::BitwiseAnd, u32t, &[cm1, k31]);
                let cm1 = widen(self, fx, cm1);
                let cm1_v = sp(self, fx, cm1)?;
                let sign = self.op(fx, Op::ShiftRightLogical, t, &[v, cm1_v]);
                let one = self.splat_const(s, n, 1, 0.0)?;
                let sign = self.op(fx, Op::BitwiseAnd, t, &[sign, one]);
                let bt = self.shaped(Scalar::BOOL, n)?;
                let neg = self.op(fx, Op::INotEqual, bt, &[sign, zero]);
                let not_mask = self.op(fx, Op::Not, t, &[mask_v]);
                let ext = self.op(fx, Op::BitwiseOr, t, &[v, not_mask]);
                self.op(fx, Op::Select, t, &[neg, ext, v])
            } else {
                v
            }
        } else {
            let m = self.op(fx, Op::ShiftLeftLogical, t, &[mask_v, os_v]);
            let nm = self.op(fx, Op::Not, t, &[m]);
            let keep = self.op(fx, Op::BitwiseAnd, t, &[e, nm]);
            let ns = self.op(fx, Op::ShiftLeftLogical, t, &[newbits, os_v]);
            let put = self.op(fx, Op::BitwiseAnd, t, &[ns, m]);
            self.op(fx, Op::BitwiseOr, t, &[keep, put])
        };
        let (when0, when32) = if fun == Mf::ExtractBits {
            (zero, e)
        } else {
            (e, newbits)
        };
        let c0 = sp_bool(self, fx, c_is0, n)?;
        let c32 = sp_bool(self, fx, c_is32, n)?;
        let r = self.op(fx, Op::Select, t, &[c32, when32, r]);
        Ok(self.op(fx, Op::Select, t, &[c0, when0, r]))
    }

    #[allow(clippy::too_many_arguments)]
    fn matrix_math(
        &mut self,
        fx: &mut Fx,
        h: Handle<Expression>,
        fun: Mf,
        m: u32,
        columns: u32,
        rows: u32,
        s: Scalar,
        t: u32,
    ) -> Res<u32> {
        let st = self.scalar_ty(s)?;
        let ct = self.vec_ty(s, rows)?;
        // Column first, then component: an extract that crosses from the array into the
        // vector in one instruction is not something LLVM-based readers take.
        let e = |w: &mut Self, fx: &mut Fx, j: u32, i: u32| {
            let col = w.op(fx, Op::CompositeExtract, ct, &[m, j]);
            w.op(fx, Op::CompositeExtract, st, &[col, i])
        };
        match fun {
            Mf::Transpose => {
                let ct = self.vec_ty(s, columns)?;
                let mut cols = Vec::new();
                for i in 0..rows {
                    let parts: Vec<u32> = (0..columns).map(|j| e(self, fx, j, i)).collect();
                    cols.push(self.construct(fx, ct, &parts));
                }
                Ok(self.construct(fx, t, &cols))
            }
            Mf::Determinant => {
                let all: Vec<u32> = (0..columns).collect();
                let mut elements = std::collections::HashMap::new();
                for &j in &all {
                    for &i in &all {
                        elements.insert((j, i), e(self, fx, j, i));
                    }
                }
                Ok(self.determinant(fx, st, &elements, &all, &all))
            }
            other => Err(self.expr_err(fx, h, &format!("{other:?} on matrices"))),
        }
    }

    /// The determinant of the square sub-matrix of `columns` and `rows`: Laplace expansion
    /// along the first row, terms added left to right with alternating signs, as the CPU
    /// interpreter computes it.
    fn determinant(
        &mut self,
        fx: &mut Fx,
        st: u32,
        elements: &std::collections::HashMap<(u32, u32), u32>,
        columns: &[u32],
        rows: &[u32],
    ) -> u32 {
        let at = |c: u32, r: u32| elements.get(&(c, r)).copied().unwrap_or(0);
        match (columns, rows) {
            ([c], [r]) => at(*c, *r),
            ([c0, c1], [r0, r1]) => {
                let ad = self.op(fx, Op::FMul, st, &[at(*c0, *r0), at(*c1, *r1)]);
                let bc = self.op(fx, Op::FMul, st, &[at(*c1, *r0), at(*c0, *r1)]);
                self.op(fx, Op::FSub, st, &[ad, bc])
            }
            _ => {
                let mut sum = None;
                for (k, &column) in columns.iter().enumerate() {
                    let minor: Vec<u32> = columns.iter().copied().filter(|&c| c != column).collect();
                    let cofactor = self.determinant(fx, st, elements, &minor, &rows[1..]);
                    let term = self.op(fx, Op::FMul, st, &[at(column, rows[0]), cofactor]);
                    sum = Some(match sum {
                        None => term,
                        Some(sum) if k % 2 == 1 => self.op(fx, Op::FSub, st, &[sum, term]),
                        Some(sum) => self.op(fx, Op::FAdd, st, &[sum, term]),
                    });
                }
                sum.unwrap_or(0)
            }
        }
    }

    fn array_length(&mut self, fx: &mut Fx, h: Handle<Expression>, p: Handle<Expression>) -> Res<u32> {
        let g = match fx.f.expressions[p] {
            Expression::GlobalVariable(g) => g,
            Expression::AccessIndex { base, .. } => match fx.f.expressions[base] {
                Expression::GlobalVariable(g) => g,
                _ => return Err(self.expr_err(fx, h, "arrayLength of this pointer")),
            },
            _ => return Err(self.expr_err(fx, h, "arrayLength of this pointer")),
        };
        let binding = self.m.global_variables[g]
            .binding
            .as_ref()
            .map(|b| b.binding)
            .unwrap_or(0);
        let counts = fx.lengths.ok_or_else(|| Self::internal("no lengths"))?;
        Ok(self.element_count(fx, counts, binding))
    }

    // ----- statements -----

    fn block(&mut self, fx: &mut Fx, block: &Block) -> Res<()> {
        for (s, span) in block.span_iter() {
            self.statement(fx, s, *span)?;
            if fx.terminated {
                // What follows a break, continue or return in the same block never runs.
                break;
            }
        }
        Ok(())
    }

    fn barrier_semantics(flags: naga::Barrier) -> u32 {
        let mut sem = SEQ_CST;
        if flags.contains(naga::Barrier::WORK_GROUP) || !flags.contains(naga::Barrier::STORAGE) {
            sem |= WORKGROUP_MEMORY;
        }
        if flags.contains(naga::Barrier::STORAGE) {
            sem |= CROSS_WORKGROUP_MEMORY;
        }
        sem
    }

    fn control_barrier(&mut self, fx: &mut Fx, flags: naga::Barrier) {
        let scope = self.const_u32(SCOPE_WORKGROUP);
        let sem = self.const_u32(Self::barrier_semantics(flags));
        self.op_void(fx, Op::ControlBarrier, &[scope, scope, sem]);
    }

    fn statement(&mut self, fx: &mut Fx, s: &Statement, span: naga::Span) -> Res<()> {
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    if self.is_pointer(fx, h) {
                        continue;
                    }
                    let v = self.expr(fx, h)?;
                    fx.values.insert(h, v);
                }
            }
            Statement::Block(b) => self.block(fx, b)?,
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, *condition)?;
                let (t, f, merge) = (self.out.id(), self.out.id(), self.out.id());
                let else_target = if reject.is_empty() { merge } else { f };
                self.op_void(fx, Op::BranchConditional, &[c, t, else_target]);
                fx.terminated = true;
                fx.label(t);
                self.block(fx, accept)?;
                fx.branch(merge);
                if !reject.is_empty() {
                    fx.label(f);
                    self.block(fx, reject)?;
                    fx.branch(merge);
                }
                fx.label(merge);
            }
            Statement::Switch { selector, cases } => {
                let sel = self.expr(fx, *selector)?;
                let merge = self.out.id();
                let labels: Vec<u32> = cases.iter().map(|_| self.out.id()).collect();
                let mut default = merge;
                let mut ops = vec![sel, 0];
                for (case, &l) in cases.iter().zip(&labels) {
                    match case.value {
                        naga::SwitchValue::I32(v) => ops.extend([v as u32, l]),
                        naga::SwitchValue::U32(v) => ops.extend([v, l]),
                        naga::SwitchValue::Default => default = l,
                    }
                }
                ops[1] = default;
                self.op_void(fx, Op::Switch, &ops);
                fx.terminated = true;
                fx.breaks.push(merge);
                for (k, case) in cases.iter().enumerate() {
                    fx.label(labels[k]);
                    self.block(fx, &case.body)?;
                    if case.fall_through {
                        if let Some(&next) = labels.get(k + 1) {
                            fx.branch(next);
                        }
                    }
                    fx.branch(merge);
                }
                fx.breaks.pop();
                fx.label(merge);
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                let (start, cont, merge) = (self.out.id(), self.out.id(), self.out.id());
                fx.label(start);
                fx.breaks.push(merge);
                fx.continues.push(cont);
                self.block(fx, body)?;
                fx.label(cont);
                self.block(fx, continuing)?;
                match break_if {
                    Some(b) => {
                        let c = self.expr(fx, *b)?;
                        self.op_void(fx, Op::BranchConditional, &[c, merge, start]);
                        fx.terminated = true;
                    }
                    None => fx.branch(start),
                }
                fx.breaks.pop();
                fx.continues.pop();
                fx.label(merge);
            }
            Statement::Break => {
                let target = *fx.breaks.last().ok_or_else(|| Self::internal("break outside a loop"))?;
                fx.branch(target);
            }
            Statement::Continue => {
                let target = *fx
                    .continues
                    .last()
                    .ok_or_else(|| Self::internal("continue outside a loop"))?;
                fx.branch(target);
            }
            Statement::Return { value } => match value {
                Some(v) if !fx.entry => {
                    let v = self.expr(fx, *v)?;
                    self.op_void(fx, Op::ReturnValue, &[v]);
                    fx.terminated = true;
                }
                _ => {
                    self.op_void(fx, Op::Return, &[]);
                    fx.terminated = true;
                }
            },
            Statement::Kill => return Err(self.unsupported_at("`discard`", span)),
            Statement::ControlBarrier(flags) => self.control_barrier(fx, *flags),
            Statement::MemoryBarrier(flags) => {
                let scope = self.const_u32(SCOPE_WORKGROUP);
                let sem = self.const_u32(Self::barrier_semantics(*flags));
                self.op_void(fx, Op::MemoryBarrier, &[scope, sem]);
            }
            Statement::Store { pointer, value } => {
                let v = self.expr(fx, *value)?;
                self.store_to(fx, *pointer, v, span)?;
            }
            Statement::Atomic {
                pointer,
                fun,
                value,
                result,
            } => self.atomic(fx, *pointer, fun, *value, *result, span)?,
            Statement::WorkGroupUniformLoad { pointer, result } => {
                self.control_barrier(fx, naga::Barrier::WORK_GROUP);
                let v = self.load(fx, *pointer, *result)?;
                self.control_barrier(fx, naga::Barrier::WORK_GROUP);
                fx.values.insert(*result, v);
            }
            Statement::Call {
                function,
                arguments,
                result,
            } => {
                let repr = self
                    .functions
                    .get(function)
                    .ok_or_else(|| Self::internal("call of an unknown function"))?;
                let (fid, ctx, lengths) = (repr.id, repr.ctx.clone(), repr.lengths);
                let mut args = Vec::new();
                for g in ctx {
                    args.push(*fx.ctx.get(&g).ok_or_else(|| Self::internal("context of a call"))?);
                }
                if lengths {
                    args.push(fx.lengths.ok_or_else(|| Self::internal("lengths of a call"))?);
                }
                for &a in arguments {
                    if self.is_pointer(fx, a) {
                        match self.place(fx, a)? {
                            Place::Ptr { id, tight: false } | Place::Elems { id, .. } => args.push(id),
                            _ => {
                                return Err(self
                                    .unsupported_at("passing a pointer to a packed struct member to a function", span))
                            }
                        }
                    } else {
                        args.push(self.expr(fx, a)?);
                    }
                }
                let ret = match result {
                    Some(r) => self.expr_ty(fx, *r)?,
                    None => self.void(),
                };
                let mut ops = vec![fid];
                ops.extend(args);
                let v = self.op(fx, Op::FunctionCall, ret, &ops);
                if let Some(r) = result {
                    fx.values.insert(*r, v);
                }
            }
            Statement::ImageStore { .. } | Statement::ImageAtomic { .. } => {
                return Err(self.unsupported_at("textures", span))
            }
            Statement::SubgroupBallot { .. }
            | Statement::SubgroupGather { .. }
            | Statement::SubgroupCollectiveOperation { .. } => {
                return Err(self.unsupported_at("subgroup operations", span))
            }
            _ => return Err(self.unsupported_at("this statement", span)),
        }
        Ok(())
    }

    fn atomic(
        &mut self,
        fx: &mut Fx,
        pointer: Handle<Expression>,
        fun: &naga::AtomicFunction,
        value: Handle<Expression>,
        result: Option<Handle<Expression>>,
        span: naga::Span,
    ) -> Res<()> {
        use naga::AtomicFunction as A;
        let s = match self.pointee(fx, pointer) {
            TypeInner::Atomic(s) => s,
            _ => return Err(self.unsupported_at("this atomic operation", span)),
        };
        self.atomic_width(s);
        let place = self.place(fx, pointer)?;
        let Place::Ptr { id: p, .. } = place else {
            return Err(self.unsupported_at("this atomic operation", span));
        };
        let v = self.expr(fx, value)?;
        let t = self.scalar_ty(s)?;
        let scope = self.const_u32(Self::atomic_scope(self.space_of(fx, pointer)));
        let sem = self.const_u32(0);
        let signed = s.kind == ScalarKind::Sint;
        let r = match fun {
            A::Exchange { compare: Some(cmp) } => {
                let c = self.expr(fx, *cmp)?;
                let old = self.op(fx, Op::AtomicCompareExchange, t, &[p, scope, sem, sem, v, c]);
                let bool_t = self.bool_ty();
                let ok = self.op(fx, Op::IEqual, bool_t, &[old, c]);
                let r = result.ok_or_else(|| self.unsupported_at("this atomic operation", span))?;
                let rt = match &fx.fi[r].ty {
                    TypeResolution::Handle(h) => *h,
                    _ => return Err(self.unsupported_at("this atomic operation", span)),
                };
                self.compose(fx, rt, &[old, ok], &[])?
            }
            other => {
                let o = match other {
                    A::Add => Op::AtomicIAdd,
                    A::Subtract => Op::AtomicISub,
                    A::And => Op::AtomicAnd,
                    A::InclusiveOr => Op::AtomicOr,
                    A::ExclusiveOr => Op::AtomicXor,
                    A::Min if signed => Op::AtomicSMin,
                    A::Min => Op::AtomicUMin,
                    A::Max if signed => Op::AtomicSMax,
                    A::Max => Op::AtomicUMax,
                    A::Exchange { .. } => Op::AtomicExchange,
                };
                self.op(fx, o, t, &[p, scope, sem, v])
            }
        };
        if let Some(res) = result {
            fx.values.insert(res, r);
        }
        Ok(())
    }

    // ----- functions -----

    fn new_fx(f: &'a Function, fi: &'a FunctionInfo, entry: bool) -> Fx<'a> {
        Fx {
            f,
            fi,
            values: HashMap::new(),
            locals: HashMap::new(),
            args: Vec::new(),
            ctx: HashMap::new(),
            lengths: None,
            vars: Vec::new(),
            body: Vec::new(),
            terminated: false,
            breaks: Vec::new(),
            continues: Vec::new(),
            entry,
        }
    }

    /// Declares and initialises the function's local variables.
    fn locals(&mut self, fx: &mut Fx) -> Res<()> {
        for (h, local) in fx.f.local_variables.iter() {
            let t = self.ty(local.ty)?;
            let var = self.var(fx, t);
            let init = match local.init {
                Some(e) => self.expr(fx, e)?,
                None => self.null(t),
            };
            self.store(fx, var, init);
            fx.locals.insert(h, var);
        }
        Ok(())
    }

    /// Closes the body and appends the function's words.
    fn finish_function(&mut self, fx: &mut Fx, header: Vec<u32>, returns_value: bool) {
        if !fx.terminated {
            if returns_value {
                inst(&mut fx.body, Op::Unreachable, &[]);
            } else {
                inst(&mut fx.body, Op::Return, &[]);
            }
        }
        let first = self.out.id();
        self.out.functions.extend(header);
        inst(&mut self.out.functions, Op::Label, &[first]);
        self.out.functions.append(&mut fx.vars);
        self.out.functions.append(&mut fx.body);
        inst(&mut self.out.functions, Op::FunctionEnd, &[]);
    }

    fn write_function(&mut self, h: Handle<Function>) -> Res<()> {
        let f = &self.m.functions[h];
        let fi = &self.info[h];
        let mut fx = Self::new_fx(f, fi, false);
        let (fid, fty, ctx, lengths) = {
            let r = &self.functions[&h];
            (r.id, r.ty, r.ctx.clone(), r.lengths)
        };
        let ret = match &f.result {
            Some(r) => self.ty(r.ty)?,
            None => self.void(),
        };
        let mut header = Vec::new();
        inst(&mut header, Op::Function, &[ret, fid, 0, fty]);
        for g in ctx {
            let var = &self.m.global_variables[g];
            let pt = match var.space {
                AddressSpace::Storage { .. } => self.buffer_param_ty(var.ty)?,
                AddressSpace::Immediate => {
                    let t = self.immediate_mem_ty(var.ty)?;
                    self.ptr(Sc::Function, t)
                }
                AddressSpace::WorkGroup => {
                    let t = self.ty(var.ty)?;
                    self.ptr(Sc::Workgroup, t)
                }
                _ => {
                    let t = self.ty(var.ty)?;
                    self.ptr(Sc::Function, t)
                }
            };
            let id = self.out.id();
            inst(&mut header, Op::FunctionParameter, &[pt, id]);
            fx.ctx.insert(g, id);
        }
        if lengths {
            let pt = self.lengths_elem_ptr();
            let id = self.out.id();
            inst(&mut header, Op::FunctionParameter, &[pt, id]);
            fx.lengths = Some(id);
        }
        for arg in &f.arguments {
            let pt = self.ty(arg.ty)?;
            let id = self.out.id();
            inst(&mut header, Op::FunctionParameter, &[pt, id]);
            fx.args.push(id);
        }
        self.locals(&mut fx)?;
        self.block(&mut fx, &f.body)?;
        self.finish_function(&mut fx, header, f.result.is_some());
        Ok(())
    }

    fn write_entry(&mut self, i: usize) -> Res<CEntryPoint> {
        let m = self.m;
        let ep = &m.entry_points[i];
        let fi = self.info.get_entry_point(i);
        let name = c_symbol(&ep.name);
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]);
        let mut fx = Self::new_fx(&ep.function, fi, true);
        let mut buffers: Vec<(u32, Handle<GlobalVariable>)> = Vec::new();
        let mut immediate = None;
        let mut workgroup = Vec::new();
        let mut private = Vec::new();
        for (g, var) in m.global_variables.iter() {
            if fi[g].is_empty() {
                continue;
            }
            match var.space {
                AddressSpace::Storage { .. } => buffers.push((var.binding.as_ref().map(|b| b.binding).unwrap_or(0), g)),
                AddressSpace::Immediate => immediate = Some(g),
                AddressSpace::WorkGroup => {
                    workgroup.push(g);
                    fx.ctx.insert(g, self.workgroup[&g]);
                }
                AddressSpace::Private => private.push(g),
                other => {
                    return Err(self.unsupported_at(
                        &format!("a global in the {other:?} address space"),
                        m.global_variables.get_span(g),
                    ))
                }
            }
        }
        buffers.sort();
        // As the OpenCL C dialect: the byte lengths come when the kernel calls `arrayLength`
        // or uses a buffer with a runtime-sized array (whose indices are clamped).
        let uses_len = uses_length(&ep.function)
            || closure(m, &ep.function.body)
                .iter()
                .any(|&h| uses_length(&m.functions[h]))
            || ir::touches_runtime_array(self.m, fi);
        let barriers = ir::has_barrier(&ep.function.body)
            || closure(m, &ep.function.body)
                .iter()
                .any(|&h| ir::has_barrier(&m.functions[h].body));

        let mut params = Vec::new();
        let mut header_params = Vec::new();
        for (k, (binding, g)) in buffers.iter().enumerate() {
            if *binding as usize != k {
                return Err(KernelError::new(
                    KernelErrorKind::Reflection,
                    format!("entry point `{name}`: buffer bindings are not 0..n"),
                ));
            }
            let pt = self.buffer_param_ty(m.global_variables[*g].ty)?;
            let id = self.out.id();
            params.push(pt);
            header_params.push((pt, id));
            fx.ctx.insert(*g, id);
        }
        let mut immediate_store = None;
        let mut immediate_wrapped = None;
        let mut byval = Vec::new();
        if let Some(g) = immediate {
            let ty = m.global_variables[g].ty;
            let id = self.out.id();
            if let TypeInner::Scalar(_) = m.types[ty].inner {
                let t = self.ty(ty)?;
                params.push(t);
                header_params.push((t, id));
                immediate_store = Some((g, t, id));
            } else if let TypeInner::Struct { .. } = m.types[ty].inner {
                let mt = self.immediate_mem_ty(ty)?;
                let pt = self.ptr(Sc::Function, mt);
                params.push(pt);
                header_params.push((pt, id));
                byval.push(id);
                fx.ctx.insert(g, id);
            } else {
                // A vector, array or matrix travels in a one-member struct: the same bytes,
                // and the by-value aggregate OpenCL compilers expect.
                let mt = self.immediate_mem_ty(ty)?;
                let st = self.out.id();
                inst(&mut self.out.globals, Op::TypeStruct, &[st, mt]);
                let pt = self.ptr(Sc::Function, st);
                params.push(pt);
                header_params.push((pt, id));
                byval.push(id);
                immediate_wrapped = Some((g, mt, id));
            }
        }
        let mut lengths_param = None;
        if uses_len {
            let u64t = self.uint(8);
            let arr = self.array_ty(u64t, buffers.len().max(1) as u32);
            let st = self.out.id();
            inst(&mut self.out.globals, Op::TypeStruct, &[st, arr]);
            let pt = self.ptr(Sc::Function, st);
            let id = self.out.id();
            params.push(pt);
            header_params.push((pt, id));
            byval.push(id);
            lengths_param = Some(id);
        }
        for id in byval {
            inst(
                &mut self.out.decorations,
                Op::Decorate,
                &[
                    id,
                    Decoration::FuncParamAttr as u32,
                    spirv::FunctionParameterAttribute::ByVal as u32,
                ],
            );
        }
        let void = self.void();
        let mut fty = vec![void];
        fty.extend(&params);
        let fty = self.out.ty(Op::TypeFunction, &fty);
        let fid = self.out.id();
        let mut header = Vec::new();
        inst(&mut header, Op::Function, &[void, fid, 0, fty]);
        for (pt, id) in header_params {
            inst(&mut header, Op::FunctionParameter, &[pt, id]);
        }

        // The scalar block as a pointer, whatever its type.
        if let Some((g, t, id)) = immediate_store {
            let var = self.var(&mut fx, t);
            self.store(&mut fx, var, id);
            fx.ctx.insert(g, var);
        }
        if let Some((g, mt, id)) = immediate_wrapped {
            let pt = self.ptr(Sc::Function, mt);
            let zero = self.const_u32(0);
            let inner = self.op(&mut fx, Op::InBoundsAccessChain, pt, &[id, zero]);
            fx.ctx.insert(g, inner);
        }
        if let Some(id) = lengths_param {
            // The element count of each runtime-sized array, from its view's byte length:
            // `(bytes - header) / stride`, 0 when the view is shorter than the header, at most
            // u32::MAX. Functions index the counts from `counts[0]`.
            let u64t = self.uint(8);
            let u32t = self.uint(4);
            let bool_t = self.bool_ty();
            let arr = self.array_ty(u32t, buffers.len().max(1) as u32);
            let counts = self.var(&mut fx, arr);
            let p64 = self.ptr(Sc::Function, u64t);
            let p32 = self.ptr(Sc::Function, u32t);
            let zero = self.const_u32(0);
            for (k, (_, g)) in buffers.iter().enumerate() {
                let Some((header, stride)) = ir::runtime_array_of(&self.m.types, m.global_variables[*g].ty) else {
                    continue;
                };
                let kk = self.const_u32(k as u32);
                let lp = self.op(&mut fx, Op::InBoundsAccessChain, p64, &[id, zero, kk]);
                let bytes = self.op(&mut fx, Op::Load, u64t, &[lp]);
                let hd = self.const_u64(u64::from(header));
                let st = self.const_u64(u64::from(stride.max(1)));
                let short = self.op(&mut fx, Op::ULessThan, bool_t, &[bytes, hd]);
                let diff = self.op(&mut fx, Op::ISub, u64t, &[bytes, hd]);
                let n = self.op(&mut fx, Op::UDiv, u64t, &[diff, st]);
                let max = self.const_u64(u64::from(u32::MAX));
                let sat = self.ext(&mut fx, Cl::u_min, u64t, &[n, max]);
                let n32 = self.op(&mut fx, Op::UConvert, u32t, &[sat]);
                let count = self.op(&mut fx, Op::Select, u32t, &[short, zero, n32]);
                let slot = self.op(&mut fx, Op::InBoundsAccessChain, p32, &[counts, kk]);
                self.store(&mut fx, slot, count);
            }
            let first = self.op(&mut fx, Op::InBoundsAccessChain, p32, &[counts, zero]);
            fx.lengths = Some(first);
        }
        // Built-ins, as WGSL's `vec3<u32>`.
        let u32t = self.uint(4);
        let v3u64 = {
            let u64t = self.uint(8);
            self.out.ty(Op::TypeVector, &[u64t, 3])
        };
        let v3u32 = self.out.ty(Op::TypeVector, &[u32t, 3]);
        let mut b = [0u32; 3];
        for (k, slot) in b.iter_mut().enumerate() {
            let input = self.builtins[k];
            let raw = self.op(&mut fx, Op::Load, v3u64, &[input]);
            *slot = self.op(&mut fx, Op::UConvert, v3u32, &[raw]);
        }
        let [lid, wid, nwg] = b;
        let size = {
            let c: Vec<u32> = wg.iter().map(|&x| self.const_u32(x)).collect();
            self.out.constant(Op::ConstantComposite, v3u32, &c)
        };
        let scaled = self.op(&mut fx, Op::IMul, v3u32, &[wid, size]);
        let gid = self.op(&mut fx, Op::IAdd, v3u32, &[scaled, lid]);
        let lx = self.op(&mut fx, Op::CompositeExtract, u32t, &[lid, 0]);
        let ly = self.op(&mut fx, Op::CompositeExtract, u32t, &[lid, 1]);
        let lz = self.op(&mut fx, Op::CompositeExtract, u32t, &[lid, 2]);
        let kxy = self.const_u32(wg[0].wrapping_mul(wg[1]));
        let kx = self.const_u32(wg[0]);
        let zz = self.op(&mut fx, Op::IMul, u32t, &[lz, kxy]);
        let yy = self.op(&mut fx, Op::IMul, u32t, &[ly, kx]);
        let s1 = self.op(&mut fx, Op::IAdd, u32t, &[zz, yy]);
        let lidx = self.op(&mut fx, Op::IAdd, u32t, &[s1, lx]);

        // Private variables, one copy per invocation.
        for &g in &private {
            let var = &m.global_variables[g];
            let t = self.ty(var.ty)?;
            let v = self.var(&mut fx, t);
            let init = match var.init {
                Some(e) => self.const_expr(&mut fx, e)?,
                None => self.null(t),
            };
            self.store(&mut fx, v, init);
            fx.ctx.insert(g, v);
        }

        // Workgroup memory: zeroed by all invocations together, then a barrier.
        let mut workgroup_bytes = 0u64;
        for &g in &workgroup {
            let var = &m.global_variables[g];
            workgroup_bytes += u64::from(self.spv_size(var.ty));
            let wid_var = self.workgroup[&g];
            self.zero_workgroup(&mut fx, wid_var, var.ty, lidx, total)?;
        }
        if !workgroup.is_empty() {
            self.control_barrier(&mut fx, naga::Barrier::WORK_GROUP);
        }

        let builtin = |w: &Self, binding: &Option<naga::Binding>| -> Res<u32> {
            match binding {
                Some(naga::Binding::BuiltIn(b)) => match b {
                    naga::BuiltIn::GlobalInvocationId => Ok(gid),
                    naga::BuiltIn::LocalInvocationId => Ok(lid),
                    naga::BuiltIn::WorkGroupId => Ok(wid),
                    naga::BuiltIn::NumWorkGroups => Ok(nwg),
                    naga::BuiltIn::LocalInvocationIndex => Ok(lidx),
                    other => Err(w.unsupported(&format!("the built-in {other:?}"))),
                },
                _ => Err(w.unsupported(&format!("an entry-point argument of `{name}` without a built-in"))),
            }
        };
        for arg in &ep.function.arguments {
            // A struct of built-ins is composed from its members' values.
            let v = match (&arg.binding, &m.types[arg.ty].inner) {
                (None, TypeInner::Struct { members, .. }) => {
                    let parts = members
                        .iter()
                        .map(|member| builtin(self, &member.binding))
                        .collect::<Res<Vec<u32>>>()?;
                    self.compose(&mut fx, arg.ty, &parts, &[])?
                }
                (binding, _) => builtin(self, binding)?,
            };
            fx.args.push(v);
        }
        self.locals(&mut fx)?;
        self.block(&mut fx, &ep.function.body)?;
        self.finish_function(&mut fx, header, false);

        let mut ep_words = vec![spirv::ExecutionModel::Kernel as u32, fid];
        ep_words.extend(string(&name));
        ep_words.extend(self.builtins);
        inst(&mut self.out.entry_points, Op::EntryPoint, &ep_words);
        inst(
            &mut self.out.execution_modes,
            Op::ExecutionMode,
            &[fid, spirv::ExecutionMode::LocalSize as u32, wg[0], wg[1], wg[2]],
        );
        // Every multiplication and addition rounds on its own, as on the CPU interpreter (a
        // consumer may otherwise fuse `a * b + c`, which OpenCL allows by default).
        inst(
            &mut self.out.execution_modes,
            Op::ExecutionMode,
            &[fid, spirv::ExecutionMode::ContractionOff as u32],
        );
        let mut name_words = vec![fid];
        name_words.extend(string(&name));
        inst(&mut self.out.names, Op::Name, &name_words);
        Ok(CEntryPoint {
            name: ep.name.clone(),
            symbol: name,
            buffers: buffers.len() as u32,
            scalar_block: immediate.is_some(),
            buffer_lengths: uses_len,
            workgroup_size: wg,
            workgroup_bytes,
            barriers,
        })
    }

    /// Zeroes workgroup variable `var` of type `ty`: an array element by element, spread
    /// over the workgroup's invocations; anything else by invocation 0.
    fn zero_workgroup(&mut self, fx: &mut Fx, var: u32, ty: Handle<Type>, lidx: u32, total: u32) -> Res<()> {
        let u32t = self.uint(4);
        let bool_t = self.bool_ty();
        match self.m.types[ty].inner {
            TypeInner::Array {
                base,
                size: ArraySize::Constant(n),
                ..
            } => {
                let et = self.ty(base)?;
                let zero = self.null(et);
                let pt = self.ptr(Sc::Workgroup, et);
                let counter = self.var(fx, u32t);
                self.store(fx, counter, lidx);
                let (head, body, merge) = (self.out.id(), self.out.id(), self.out.id());
                fx.label(head);
                let i = self.op(fx, Op::Load, u32t, &[counter]);
                let len = self.const_u32(n.get());
                let more = self.op(fx, Op::ULessThan, bool_t, &[i, len]);
                self.op_void(fx, Op::BranchConditional, &[more, body, merge]);
                fx.terminated = true;
                fx.label(body);
                let p = self.op(fx, Op::InBoundsAccessChain, pt, &[var, i]);
                self.store(fx, p, zero);
                let step = self.const_u32(total.max(1));
                let next = self.op(fx, Op::IAdd, u32t, &[i, step]);
                self.store(fx, counter, next);
                fx.branch(head);
                fx.label(merge);
            }
            _ => {
                let t = self.ty(ty)?;
                let zero = self.null(t);
                let k0 = self.const_u32(0);
                let first = self.op(fx, Op::IEqual, bool_t, &[lidx, k0]);
                let (yes, merge) = (self.out.id(), self.out.id());
                self.op_void(fx, Op::BranchConditional, &[first, yes, merge]);
                fx.terminated = true;
                fx.label(yes);
                self.store(fx, var, zero);
                fx.branch(merge);
                fx.label(merge);
            }
        }
        Ok(())
    }
}

fn sp_bool(w: &mut Writer, fx: &mut Fx, v: u32, n: Option<u32>) -> Res<u32> {
    w.splat(fx, v, Scalar::BOOL, n)
}
