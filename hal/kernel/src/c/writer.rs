//! The C writer: naga IR to text. See the module docs of [`crate::c`] for the conventions.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use naga::proc::TypeResolution;
use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{
    AddressSpace, ArraySize, BinaryOperator as Bin, Block, Expression, Function, Handle, Literal, MathFunction as Mf,
    Scalar, ScalarKind, Statement, Type, TypeInner, UnaryOperator, VectorSize,
};

use super::prelude::{math_name, prelude, Needs};
use super::{CEntryPoint, CSource, Dialect};
use crate::error::{KernelError, KernelErrorKind};
use crate::wgsl::WgslModule;

type Res<T> = Result<T, KernelError>;

const COMPONENTS: [&str; 4] = ["x", "y", "z", "w"];

/// How a WGSL array is spelled in C.
#[derive(Clone)]
struct ArrayRepr {
    /// C type of one element (the wrapper when the stride needs padding).
    elem: String,
    /// `.v` when elements are wrapped, else empty.
    unwrap: &'static str,
}

struct Writer<'a> {
    m: &'a naga::Module,
    info: &'a ModuleInfo,
    src: &'a str,
    d: Dialect,
    /// C names of struct and fixed-size array types.
    names: HashMap<Handle<Type>, String>,
    arrays: HashMap<Handle<Type>, ArrayRepr>,
    /// C names of struct members, per struct type.
    members: HashMap<Handle<Type>, Vec<String>>,
    /// C names of globals (ctx members).
    globals: HashMap<Handle<naga::GlobalVariable>, String>,
    /// C names of functions.
    functions: HashMap<Handle<Function>, String>,
    /// Host C: the entry points written in workgroup mode (they have barriers).
    wg_entries: HashSet<usize>,
    /// Of those, the ones with a context per invocation (they use `var<private>`).
    wg_private_ctx: HashSet<usize>,
    /// Host C entry points with a second, unchecked body and the check that picks it.
    /// Entry points with an unchecked body, and how many index bases its check works out.
    fast_entries: HashMap<usize, usize>,
}

/// Per-function state.
struct Fx<'a> {
    f: &'a Function,
    fi: &'a FunctionInfo,
    baked: HashMap<Handle<Expression>, String>,
    locals: HashMap<Handle<naga::LocalVariable>, String>,
    args: Vec<String>,
    entry: bool,
    indent: usize,
    /// Host C entry points with barriers run a whole workgroup in one call: see [`Wg`].
    wg: Option<Wg>,
    /// Host C: the entry point's own indices into runtime-sized arrays are used as they are,
    /// because the caller checked that they stay in bounds (see `write_bounds_check`).
    unchecked: bool,
    /// In such a body, each index into a runtime-sized array that is `base + c * li`: its
    /// number in `xh_site` (the bases, worked out by the check) and `c`.
    sites: HashMap<Handle<Expression>, (usize, i64)>,
}

/// The region outside every region: workgroup-level control flow.
const CONTROL: usize = usize::MAX;

/// Host C workgroup mode. An entry point with barriers becomes one function that runs every
/// invocation of a workgroup: the statements between barriers (a region) run in a loop over
/// the invocations, and the control flow around barriers, uniform by WGSL's rules, runs once
/// with invocation 0's values. What lives across regions (locals, expression values) is
/// privatised into per-invocation arrays of a frame; the rest stays in C locals of the
/// region's loop, where the C compiler can keep it in registers. The function is written
/// twice: the first pass records where each value is defined and used, the second writes.
struct Wg {
    /// Invocations per workgroup.
    size: u32,
    /// The workgroup's size in each dimension.
    shape: [u32; 3],
    /// What is the same in every invocation: one frame slot, not one per invocation.
    uniform: std::rc::Rc<super::uniform::Uniform>,
    /// The region being written, or `CONTROL`.
    region: Cell<usize>,
    next_region: usize,
    /// Regions that run inside a workgroup-level loop (values there must persist).
    loop_regions: BTreeSet<usize>,
    loop_depth: usize,
    expr_def: RefCell<HashMap<Handle<Expression>, usize>>,
    expr_uses: RefCell<HashMap<Handle<Expression>, BTreeSet<usize>>>,
    local_uses: RefCell<HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>>,
    /// Second pass: the expressions whose values are privatised.
    private_exprs: HashSet<Handle<Expression>>,
    /// Frame members (`T name[size];`).
    frame: RefCell<Vec<String>>,
    /// Whether the region being written has a `return` (it then needs its end label).
    region_returns: Cell<bool>,
    /// Whether any region but the last has a `return`.
    any_returns: Cell<bool>,
    /// Whether the region being written is the body's last.
    tail_region: Cell<bool>,
    /// Whether invocations can return in a region (they then carry a done flag).
    done_flags: bool,
}

impl Wg {
    fn record_use(&self, h: Handle<Expression>) {
        let region = self.region.get();
        self.expr_uses.borrow_mut().entry(h).or_default().insert(region);
    }
}

fn ident(name: Option<&str>, fallback: &str) -> String {
    let raw = name.unwrap_or(fallback);
    let mut s: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'v');
    }
    s
}

fn scalar_suffix(s: Scalar) -> Option<&'static str> {
    Some(match (s.kind, s.width) {
        (ScalarKind::Bool, _) => "bool",
        (ScalarKind::Sint, 4) => "i32",
        (ScalarKind::Uint, 4) => "u32",
        (ScalarKind::Float, 4) => "f32",
        (ScalarKind::Sint, 8) => "i64",
        (ScalarKind::Uint, 8) => "u64",
        (ScalarKind::Float, 8) => "f64",
        (ScalarKind::Float, 2) => "f16",
        _ => return None,
    })
}

fn paren(e: &str) -> String {
    if e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
        e.to_owned()
    } else {
        format!("({e})")
    }
}

fn comp(e: &str, i: usize) -> String {
    format!("{}.{}", paren(e), COMPONENTS[i])
}

pub(super) fn write(module: &WgslModule, d: Dialect, entry: Option<&str>) -> Res<CSource> {
    let source_module = module.naga_module();
    // Host C splits an entry point at its barriers, which it can only do in the entry point's
    // own body, outside `switch`: calls to functions with barriers are inlined and such
    // switches lowered first; and struct arguments of built-ins become their members in every
    // dialect (see `lower`).
    let host = d == Dialect::HostC;
    let rewrite = super::lower::Rewrite {
        inline_barrier_functions: host,
        lower_barrier_switches: host,
    };
    let lowered = super::lower::lowered(module, entry, rewrite, d.name())?;
    let (m, info) = match &lowered {
        Some((m, info)) => (m, info),
        None => (source_module, module.module_info()),
    };
    let mut w = Writer {
        m,
        info,
        src: module.source(),
        d,
        names: HashMap::new(),
        arrays: HashMap::new(),
        members: HashMap::new(),
        globals: HashMap::new(),
        functions: HashMap::new(),
        wg_entries: HashSet::new(),
        wg_private_ctx: HashSet::new(),
        fast_entries: HashMap::new(),
    };
    w.check_types()?;
    let selected: Vec<usize> = compute_entries(m, entry);
    // Functions reachable from the selected entry points.
    let mut reachable = BTreeSet::new();
    for &i in &selected {
        calls(&m.entry_points[i].function.body, &mut reachable);
    }
    loop {
        let before = reachable.len();
        for h in reachable.clone() {
            calls(&m.functions[h].body, &mut reachable);
        }
        if reachable.len() == before {
            break;
        }
    }
    let uses_f64 = uses_scalar(m, Scalar::F64, |l| matches!(l, Literal::F64(_)));
    let uses_f16 = uses_scalar(m, Scalar::F16, |l| matches!(l, Literal::F16(_)));

    let uses_atomics64 = m
        .types
        .iter()
        .any(|(_, t)| matches!(t.inner, TypeInner::Atomic(s) if s.width == 8));
    let mut out = prelude(
        d,
        Needs {
            f64: uses_f64,
            f16: uses_f16,
            atomics64: uses_atomics64,
        },
    );
    if d == Dialect::HostC {
        out.push_str(
            "#ifndef XHAL_INVOCATION_DEFINED\n#define XHAL_INVOCATION_DEFINED\n\
             typedef struct xhal_workgroup { uint32_t workgroup_id[3]; uint32_t num_workgroups[3]; const uint32_t* cancel; uint32_t* out_of_bounds; } xhal_workgroup;\n\
             #endif\n\
             XH_FN xh_u32 xh_fx_index(xh_u32* oob, xh_u32 i, xh_u32 last) { *oob |= (xh_u32)(i > last); return i <= last ? i : last; }\n\
             XH_FN xh_u32 xh_rt_index(xh_u32* oob, xh_u32 i, xh_u32 n) { *oob |= (xh_u32)(i >= n); return i < n ? i : (n == 0u ? 0u : n - 1u); }\n\
             XH_FN xh_u32 xh_atomic_min_u32(xh_u32* p, xh_u32 v) { xh_u32 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v < o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_u32 xh_atomic_max_u32(xh_u32* p, xh_u32 v) { xh_u32 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v > o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_i32 xh_atomic_min_i32(xh_i32* p, xh_i32 v) { xh_i32 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v < o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_i32 xh_atomic_max_i32(xh_i32* p, xh_i32 v) { xh_i32 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v > o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n
             XH_FN xh_u64 xh_atomic_min_u64(xh_u64* p, xh_u64 v) { xh_u64 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v < o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_u64 xh_atomic_max_u64(xh_u64* p, xh_u64 v) { xh_u64 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v > o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_i64 xh_atomic_min_i64(xh_i64* p, xh_i64 v) { xh_i64 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v < o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n\
             XH_FN xh_i64 xh_atomic_max_i64(xh_i64* p, xh_i64 v) { xh_i64 o = __atomic_load_n(p, __ATOMIC_RELAXED); while (v > o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return o; }\n",
        );
    }
    out.push_str("XH_FN xh_u32 xh_rt_clamp(xh_u32 i, xh_u32 n) { return i < n ? i : (n == 0u ? 0u : n - 1u); }\n");
    out.push_str(
        "XH_FN xh_u32 xh_array_length(xh_u64 bytes, xh_u64 header, xh_u64 stride) { xh_u64 n; if (bytes < header) return 0; n = (bytes - header) / stride; return n > (xh_u64)0xFFFFFFFFu ? 0xFFFFFFFFu : (xh_u32)n; }\n",
    );
    w.write_types(&mut out)?;

    // The context: every global the emitted code touches.
    let mut used_globals = BTreeSet::new();
    let mut max_buffers = 0usize;
    let mut any_lengths = false;
    for &i in &selected {
        let fi = w.info.get_entry_point(i);
        let mut n = 0;
        for (g, var) in m.global_variables.iter() {
            if !fi[g].is_empty() {
                used_globals.insert(g);
                if matches!(var.space, AddressSpace::Storage { .. }) {
                    n += 1;
                }
            }
        }
        max_buffers = max_buffers.max(n);
    }
    for &h in &reachable {
        let fi = &w.info[h];
        for (g, _) in m.global_variables.iter() {
            if !fi[g].is_empty() {
                used_globals.insert(g);
            }
        }
    }
    let uses_length = |f: &Function| {
        f.expressions
            .iter()
            .any(|(_, e)| matches!(e, Expression::ArrayLength(_)))
    };
    for &i in &selected {
        if uses_length(&m.entry_points[i].function) || w.entry_touches_runtime_array(i) {
            any_lengths = true;
        }
    }
    for &h in &reachable {
        if uses_length(&m.functions[h]) {
            any_lengths = true;
        }
    }
    out.push_str("typedef struct xh_ctx {\n");
    let mut ctx_members = 0;
    for &g in &used_globals {
        let var = &m.global_variables[g];
        let name = format!("g_{}", ident(var.name.as_deref(), "global"));
        let name = format!("{name}{}", g.index());
        let decl = match var.space {
            AddressSpace::Storage { .. } => match w.array_of(var.ty) {
                Some((repr, true)) => format!("XH_GLOBAL {}* {name}", repr.elem),
                _ => format!("XH_GLOBAL {}* {name}", w.type_name(var.ty)?),
            },
            AddressSpace::WorkGroup => format!("XH_LOCAL {}* {name}", w.type_name(var.ty)?),
            AddressSpace::Immediate | AddressSpace::Private => format!("{} {name}", w.type_name(var.ty)?),
            other => {
                return Err(w.unsupported_at(
                    &format!("a global in the {other:?} address space"),
                    m.global_variables.get_span(g),
                ))
            }
        };
        let _ = writeln!(out, "    {decl};");
        ctx_members += 1;
        w.globals.insert(g, name);
    }
    if d == Dialect::HostC {
        // `oob_`: an index was out of bounds (a flag the C compiler can keep in a register).
        out.push_str("    xh_u32 oob_;\n    const uint32_t* cancel_;\n");
        ctx_members += 1;
    }
    if any_lengths {
        // Byte lengths of the bound views, and the element count of each runtime-sized array.
        let _ = writeln!(out, "    xh_u64 len_[{0}];\n    xh_u32 n_[{0}];", max_buffers.max(1));
        ctx_members += 1;
    }
    if ctx_members == 0 {
        out.push_str("    int unused_;\n");
    }
    out.push_str("} xh_ctx;\n");

    for &h in &reachable {
        let f = &m.functions[h];
        w.functions.insert(
            h,
            format!("xh_fn{}_{}", h.index(), ident(f.name.as_deref(), "function")),
        );
    }
    for &h in &reachable {
        let text = w.write_function(&m.functions[h], &w.info[h], w.functions[&h].clone(), false, None)?;
        out.push_str(&text);
    }
    let mut entry_points = Vec::new();
    for &i in &selected {
        let ep = &m.entry_points[i];
        let fi = w.info.get_entry_point(i);
        let inner = format!("xh_ep_{}", ident(Some(&ep.name), "entry"));
        let callee_barriers = reachable
            .iter()
            .any(|&h| has_barrier(&m.functions[h].body) && fn_reachable_from(m, &ep.function.body, h));
        let barriers = has_barrier(&ep.function.body) || callee_barriers;
        let text = if d == Dialect::HostC && barriers {
            if callee_barriers {
                return Err(w.unsupported("a workgroup barrier inside a function the entry point calls"));
            }
            w.wg_entries.insert(i);
            if m.global_variables
                .iter()
                .any(|(g, var)| var.space == AddressSpace::Private && !fi[g].is_empty())
            {
                w.wg_private_ctx.insert(i);
            }
            w.write_workgroup_function(ep, fi, &inner)?
        } else {
            let mut text = w.write_function(&ep.function, fi, inner.clone(), true, None)?;
            if d == Dialect::HostC {
                if let Some((check, sites)) = w.write_bounds_check(i, &inner)? {
                    let fast = w.write_function(&ep.function, fi, format!("{inner}_fast"), true, Some(&sites))?;
                    text.push_str(&fast);
                    text.push_str(&check);
                    w.fast_entries.insert(i, sites.len());
                }
            }
            text
        };
        out.push_str(&text);
        let uses_len = uses_length(&ep.function)
            || w.entry_touches_runtime_array(i)
            || reachable
                .iter()
                .any(|&h| uses_length(&m.functions[h]) && fn_reachable_from(m, &ep.function.body, h));
        let mut entry = w.write_wrapper(&mut out, i, &inner, uses_len)?;
        entry.barriers = barriers;
        entry_points.push(entry);
    }
    Ok(CSource {
        dialect: d,
        text: out,
        entry_points,
    })
}

/// Whether a type of the module has `scalar` as its scalar, or an expression is a literal
/// that `literal` picks (a literal's type need not be in the type arena).
fn uses_scalar(m: &naga::Module, scalar: Scalar, literal: impl Fn(&Literal) -> bool) -> bool {
    m.types.iter().any(|(_, t)| match t.inner {
        TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } | TypeInner::Matrix { scalar: s, .. } => s == scalar,
        _ => false,
    }) || m
        .entry_points
        .iter()
        .map(|ep| &ep.function.expressions)
        .chain(m.functions.iter().map(|(_, f)| &f.expressions))
        .chain(std::iter::once(&m.global_expressions))
        .any(|expressions| {
            expressions
                .iter()
                .any(|(_, e)| matches!(e, Expression::Literal(l) if literal(l)))
        })
}

/// The compute entry points of `m` (by index) that a translation writes: the one named
/// `entry`, or all of them.
pub(crate) fn compute_entries(m: &naga::Module, entry: Option<&str>) -> Vec<usize> {
    m.entry_points
        .iter()
        .enumerate()
        .filter(|(_, ep)| ep.stage == naga::ShaderStage::Compute && entry.is_none_or(|n| n == ep.name))
        .map(|(i, _)| i)
        .collect()
}

fn fn_reachable_from(m: &naga::Module, body: &Block, target: Handle<Function>) -> bool {
    let mut set = BTreeSet::new();
    calls(body, &mut set);
    loop {
        let before = set.len();
        for h in set.clone() {
            calls(&m.functions[h].body, &mut set);
        }
        if set.len() == before {
            break;
        }
    }
    set.contains(&target)
}

/// Whether `block` holds a control barrier (or `workgroupUniformLoad`, which has two).
pub(crate) fn has_barrier(block: &Block) -> bool {
    block.iter().any(|s| match s {
        Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. } => true,
        Statement::Block(b) => has_barrier(b),
        Statement::If { accept, reject, .. } => has_barrier(accept) || has_barrier(reject),
        Statement::Switch { cases, .. } => cases.iter().any(|c| has_barrier(&c.body)),
        Statement::Loop { body, continuing, .. } => has_barrier(body) || has_barrier(continuing),
        _ => false,
    })
}

/// Whether every invocation of a workgroup runs a loop (with no barrier in it) the same
/// number of times: its exits (`break_if`, and `break` or `continue` of this loop) are under
/// uniform conditions only, and nothing in it returns. Host C's workgroup mode then runs
/// such a loop once for the workgroup, with its body looped over the invocations (a loop
/// interchange): an inner loop such as a tile's dot product becomes a loop over
/// invocations, which the C compiler vectorises.
fn uniform_trip_count(
    uniform: &super::uniform::Uniform,
    body: &Block,
    continuing: &Block,
    break_if: Option<Handle<Expression>>,
) -> bool {
    /// `depth` counts the loops inside the one asked about; `switch` is whether `block` is
    /// in a switch (whose `break` leaves the switch, not the loop) at that depth.
    fn exits_uniformly(
        uniform: &super::uniform::Uniform,
        block: &Block,
        depth: u32,
        switch: bool,
        uniform_control: bool,
    ) -> bool {
        block.iter().all(|s| match s {
            Statement::Return { .. } | Statement::Kill => false,
            Statement::Break => depth > 0 || switch || uniform_control,
            // A `continue` in a switch cannot leave a region (see `wg_needs_control`).
            Statement::Continue => depth > 0 || (!switch && uniform_control),
            Statement::Block(b) => exits_uniformly(uniform, b, depth, switch, uniform_control),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let control = uniform_control && uniform.exprs.contains(condition);
                exits_uniformly(uniform, accept, depth, switch, control)
                    && exits_uniformly(uniform, reject, depth, switch, control)
            }
            Statement::Switch { selector, cases } => {
                let control = uniform_control && uniform.exprs.contains(selector);
                cases
                    .iter()
                    .all(|c| exits_uniformly(uniform, &c.body, depth, true, control))
            }
            Statement::Loop { body, continuing, .. } => {
                exits_uniformly(uniform, body, depth + 1, false, uniform_control)
                    && exits_uniformly(uniform, continuing, depth + 1, false, uniform_control)
            }
            _ => true,
        })
    }
    break_if.is_none_or(|b| uniform.exprs.contains(&b))
        && exits_uniformly(uniform, body, 0, false, true)
        && exits_uniformly(uniform, continuing, 0, false, true)
}

/// Whether `block` has a `continue` for a loop around it (not one inside it).
pub(super) fn has_continue(block: &Block) -> bool {
    block.iter().any(|s| match s {
        Statement::Continue => true,
        Statement::Block(b) => has_continue(b),
        Statement::If { accept, reject, .. } => has_continue(accept) || has_continue(reject),
        Statement::Switch { cases, .. } => cases.iter().any(|c| has_continue(&c.body)),
        _ => false,
    })
}

pub(crate) fn calls(block: &Block, out: &mut BTreeSet<Handle<Function>>) {
    for s in block.iter() {
        match s {
            Statement::Call { function, .. } => {
                out.insert(*function);
            }
            Statement::Block(b) => calls(b, out),
            Statement::If { accept, reject, .. } => {
                calls(accept, out);
                calls(reject, out);
            }
            Statement::Switch { cases, .. } => {
                for c in cases {
                    calls(&c.body, out);
                }
            }
            Statement::Loop { body, continuing, .. } => {
                calls(body, out);
                calls(continuing, out);
            }
            _ => {}
        }
    }
}

impl<'a> Writer<'a> {
    /// Where the runtime-sized array of a buffer's type starts and its stride.
    fn runtime_array_of(&self, ty: Handle<Type>) -> Option<(u32, u32)> {
        match &self.m.types[ty].inner {
            TypeInner::Array {
                size: ArraySize::Dynamic,
                stride,
                ..
            } => Some((0, *stride)),
            TypeInner::Struct { members, .. } => {
                let last = members.last()?;
                match &self.m.types[last.ty].inner {
                    TypeInner::Array {
                        size: ArraySize::Dynamic,
                        stride,
                        ..
                    } => Some((last.offset, *stride)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether entry point `i` uses a buffer that holds a runtime-sized array: its indices
    /// are clamped to the array's length, so the kernel takes the byte lengths.
    fn entry_touches_runtime_array(&self, i: usize) -> bool {
        let fi = self.info.get_entry_point(i);
        self.m.global_variables.iter().any(|(g, var)| {
            !fi[g].is_empty()
                && matches!(var.space, AddressSpace::Storage { .. })
                && self.runtime_array_of(var.ty).is_some()
        })
    }

    fn unsupported(&self, what: &str) -> KernelError {
        KernelError::new(
            KernelErrorKind::Unsupported,
            format!("{what} cannot be written as {}", self.d.name()),
        )
    }

    fn unsupported_at(&self, what: &str, span: naga::Span) -> KernelError {
        if span.is_defined() {
            KernelError::at(
                KernelErrorKind::Unsupported,
                format!("{what} cannot be written as {}", self.d.name()),
                self.src,
                span,
                "not supported in this dialect",
            )
        } else {
            self.unsupported(what)
        }
    }

    /// Gives an error without a location the location of expression `h`.
    fn relocate(&self, fx: &Fx, h: Handle<Expression>, e: KernelError) -> KernelError {
        let span = fx.f.expressions.get_span(h);
        if e.location().is_some() || !span.is_defined() || e.kind() != KernelErrorKind::Unsupported {
            return e;
        }
        KernelError::at(
            KernelErrorKind::Unsupported,
            e.message(),
            self.src,
            span,
            "not supported in this dialect",
        )
    }

    fn expr_err(&self, fx: &Fx, h: Handle<Expression>, what: &str) -> KernelError {
        self.unsupported_at(what, fx.f.expressions.get_span(h))
    }

    /// Refuses the types no dialect here can express.
    fn check_types(&self) -> Res<()> {
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
    fn c_size(&self, h: Handle<Type>) -> u32 {
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

    fn inner_name(&self, inner: &TypeInner) -> Res<String> {
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

    fn type_name(&self, h: Handle<Type>) -> Res<String> {
        match self.names.get(&h) {
            Some(n) => Ok(n.clone()),
            None => self.inner_name(&self.m.types[h].inner),
        }
    }

    fn res_name(&self, r: &TypeResolution) -> Res<String> {
        match r {
            TypeResolution::Handle(h) => self.type_name(*h),
            TypeResolution::Value(inner) => self.inner_name(inner),
        }
    }

    /// The representation of an array type and whether it is runtime-sized.
    fn array_of(&self, h: Handle<Type>) -> Option<(ArrayRepr, bool)> {
        match &self.m.types[h].inner {
            TypeInner::Array { size, .. } => self
                .arrays
                .get(&h)
                .map(|r| (r.clone(), matches!(size, ArraySize::Dynamic))),
            _ => None,
        }
    }

    fn zero_of(&self, h: Handle<Type>) -> Res<String> {
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

    fn write_types(&mut self, out: &mut String) -> Res<()> {
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
    fn has_padding(&self, ty: Handle<Type>) -> bool {
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
    fn padded_store(&self, place: &str, value: &str, ty: Handle<Type>, counter: &mut usize) -> Res<String> {
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

    fn ty<'b>(&'b self, fx: &'b Fx, h: Handle<Expression>) -> &'b TypeInner {
        fx.fi[h].ty.inner_with(&self.m.types)
    }

    /// What a pointer expression points to.
    fn pointee(&self, fx: &Fx, h: Handle<Expression>) -> TypeInner {
        crate::types::pointee(&self.m.types, self.ty(fx, h))
    }

    fn pointee_handle(&self, fx: &Fx, h: Handle<Expression>) -> Option<Handle<Type>> {
        match self.ty(fx, h) {
            TypeInner::Pointer { base, .. } => Some(*base),
            _ => None,
        }
    }

    fn is_pointer(&self, fx: &Fx, h: Handle<Expression>) -> bool {
        matches!(
            self.ty(fx, h),
            TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. }
        )
    }

    /// Host C's out-of-bounds flag: a local of the region in workgroup mode (a register,
    /// and no store in the loop that would stop the C compiler vectorising it), else the
    /// context's.
    fn oob_flag(fx: &Fx) -> &'static str {
        match &fx.wg {
            Some(wg) if wg.region.get() != CONTROL => "xh_oob",
            _ => "ctx->oob_",
        }
    }

    /// The binding whose runtime-sized array `array` (a pointer expression) points to.
    fn runtime_array_binding(&self, fx: &Fx, array: Handle<Expression>) -> Option<u32> {
        self.runtime_array_binding_of(fx.f, array)
    }

    /// An index into a runtime-sized array, clamped to the array's length so that no kernel
    /// reaches outside the bound buffer view (host C also records the first such index, for
    /// a runner that reports it).
    fn runtime_index(&self, fx: &Fx, h: Handle<Expression>, array: Handle<Expression>, i: &str) -> Res<String> {
        let binding = self
            .runtime_array_binding(fx, array)
            .ok_or_else(|| self.expr_err(fx, h, "indexing a runtime-sized array through a pointer parameter"))?;
        Ok(match self.d {
            Dialect::HostC if fx.unchecked => match &fx.f.expressions[h] {
                // Worked out in 64 bits from the workgroup's base, so that the C compiler
                // sees an address that moves by a constant step with the invocation.
                Expression::Access { index, .. } if fx.sites.contains_key(index) => {
                    let (k, c) = fx.sites[index];
                    format!("(xh_i64)xh_site[{k}] + (xh_i64)xh_li * {c}")
                }
                _ => format!("(xh_u32)({i})"),
            },
            Dialect::HostC => format!(
                "xh_rt_index(&{}, (xh_u32)({i}), ctx->n_[{binding}])",
                Self::oob_flag(fx)
            ),
            _ => format!("xh_rt_clamp((xh_u32)({i}), ctx->n_[{binding}])"),
        })
    }

    fn clamp(&self, fx: &Fx, idx: &str, n: u32, index: Handle<Expression>) -> String {
        if self.static_max(fx.f, index, 0).is_some_and(|max| max < u64::from(n)) {
            // In bounds in every invocation: a plain index, which the C compiler can
            // vectorise (a clamped store cannot be, before AVX-512 scatters).
            return format!("(xh_u32)({idx})");
        }
        if self.d == Dialect::HostC {
            // Also recorded, so that a strict runner can fault as its interpreter would.
            return format!(
                "xh_fx_index(&{}, (xh_u32)({idx}), {}u)",
                Self::oob_flag(fx),
                n.saturating_sub(1)
            );
        }
        format!("xh_min_u32((xh_u32)({idx}), {}u)", n.saturating_sub(1))
    }

    /// The largest value integer expression `h` of `f` can take, when the workgroup's size
    /// and constants bound it (`local_invocation_index`, `local_invocation_id`, and
    /// non-negative arithmetic on them); at most `i32::MAX`, so it holds for `i32` too.
    fn static_max(&self, f: &Function, h: Handle<Expression>, depth: u32) -> Option<u64> {
        const LIMIT: u64 = i32::MAX as u64;
        if depth > 32 {
            return None;
        }
        let workgroup = || {
            self.m
                .entry_points
                .iter()
                .find(|ep| std::ptr::eq(&ep.function, f))
                .map(|ep| ep.workgroup_size.map(|d| u64::from(d.max(1))))
        };
        let builtin = |e: Handle<Expression>| match f.expressions[e] {
            Expression::FunctionArgument(k) => match f.arguments[k as usize].binding {
                Some(naga::Binding::BuiltIn(b)) => Some(b),
                _ => None,
            },
            _ => None,
        };
        let literal = |e: Handle<Expression>| match f.expressions[e] {
            Expression::Literal(Literal::U32(v)) => Some(u64::from(v)),
            Expression::Literal(Literal::I32(v)) => u64::try_from(v).ok(),
            _ => None,
        };
        let max = |e| self.static_max(f, e, depth + 1);
        let value = match &f.expressions[h] {
            Expression::Literal(_) => literal(h)?,
            Expression::FunctionArgument(_) => match builtin(h)? {
                naga::BuiltIn::LocalInvocationIndex => workgroup()?.iter().product::<u64>() - 1,
                _ => return None,
            },
            Expression::AccessIndex { base, index } => match builtin(*base)? {
                naga::BuiltIn::LocalInvocationId => *workgroup()?.get(*index as usize)? - 1,
                _ => return None,
            },
            Expression::As {
                expr,
                kind: ScalarKind::Uint | ScalarKind::Sint,
                convert: None | Some(4),
            } => max(*expr)?,
            Expression::Binary { op, left, right } => match op {
                Bin::Add => max(*left)? + max(*right)?,
                Bin::Multiply => max(*left)?.checked_mul(max(*right)?)?,
                Bin::Divide => max(*left)? / literal(*right).filter(|&k| k > 0)?,
                // A negative `i32` dividend would give a negative remainder.
                Bin::Modulo => max(*left)?.min(literal(*right).filter(|&k| k > 0)? - 1),
                Bin::And => match (max(*left), max(*right)) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => return None,
                },
                Bin::ShiftRight => max(*left)? >> literal(*right).filter(|&k| k < 32)?,
                _ => return None,
            },
            _ => return None,
        };
        (value <= LIMIT).then_some(value)
    }

    /// A C lvalue for a pointer expression (runtime-sized arrays: something indexable).
    fn lvalue(&self, fx: &Fx, h: Handle<Expression>) -> Res<String> {
        Ok(match &fx.f.expressions[h] {
            Expression::GlobalVariable(g) => {
                let var = &self.m.global_variables[*g];
                let name = self
                    .globals
                    .get(g)
                    .cloned()
                    .ok_or_else(|| self.expr_err(fx, h, "this global"))?;
                match var.space {
                    AddressSpace::Storage { .. } => match self.array_of(var.ty) {
                        Some((_, true)) => format!("ctx->{name}"),
                        _ => format!("(*ctx->{name})"),
                    },
                    AddressSpace::WorkGroup => format!("(*ctx->{name})"),
                    _ => format!("ctx->{name}"),
                }
            }
            Expression::LocalVariable(l) => {
                if let Some(wg) = &fx.wg {
                    let region = wg.region.get();
                    wg.local_uses.borrow_mut().entry(*l).or_default().insert(region);
                }
                fx.locals[l].clone()
            }
            Expression::FunctionArgument(i) => format!("(*{})", fx.args[*i as usize]),
            Expression::Access { base, index } => {
                let b = self.lvalue(fx, *base)?;
                let i = self.expr(fx, *index)?;
                match self.pointee(fx, *base) {
                    TypeInner::Array {
                        size: ArraySize::Dynamic,
                        ..
                    } => {
                        let repr = self.pointee_handle(fx, *base).and_then(|t| self.array_of(t));
                        let unwrap = repr.map(|r| r.0.unwrap).unwrap_or("");
                        let i = self.runtime_index(fx, h, *base, &i)?;
                        format!("{b}[{i}]{unwrap}")
                    }
                    TypeInner::Array {
                        size: ArraySize::Constant(n),
                        ..
                    } => {
                        let repr = self.pointee_handle(fx, *base).and_then(|t| self.array_of(t));
                        let unwrap = repr.map(|r| r.0.unwrap).unwrap_or("");
                        format!("{b}.a[{}]{unwrap}", self.clamp(fx, &i, n.get(), *index))
                    }
                    TypeInner::Vector { size, .. } => format!("(&{b}.x)[{}]", self.clamp(fx, &i, size as u32, *index)),
                    TypeInner::Matrix { columns, .. } => {
                        format!("{b}.c[{}].v", self.clamp(fx, &i, columns as u32, *index))
                    }
                    _ => return Err(self.expr_err(fx, h, "this indexing")),
                }
            }
            Expression::AccessIndex { base, index } => {
                let b = self.lvalue(fx, *base)?;
                let k = *index;
                match self.pointee(fx, *base) {
                    TypeInner::Struct { .. } => {
                        let t = self
                            .pointee_handle(fx, *base)
                            .ok_or_else(|| self.expr_err(fx, h, "this member access"))?;
                        format!("{b}.{}", self.members[&t][k as usize])
                    }
                    TypeInner::Array { size, .. } => {
                        let repr = self.pointee_handle(fx, *base).and_then(|t| self.array_of(t));
                        let unwrap = repr.map(|r| r.0.unwrap).unwrap_or("");
                        match size {
                            ArraySize::Dynamic => {
                                let i = self.runtime_index(fx, h, *base, &format!("{k}u"))?;
                                format!("{b}[{i}]{unwrap}")
                            }
                            _ => format!("{b}.a[{k}]{unwrap}"),
                        }
                    }
                    TypeInner::Vector { .. } => format!("{b}.{}", COMPONENTS[k as usize]),
                    TypeInner::Matrix { .. } => format!("{b}.c[{k}].v"),
                    _ => return Err(self.expr_err(fx, h, "this member access")),
                }
            }
            _ => return Err(self.expr_err(fx, h, "this pointer expression")),
        })
    }

    fn literal(&self, l: &Literal) -> Res<String> {
        Ok(match *l {
            Literal::F32(v) => {
                if v.is_finite() {
                    let s = format!("{v:?}f");
                    if v.is_sign_negative() {
                        format!("({s})")
                    } else {
                        s
                    }
                } else {
                    format!("xh_f32_from_bits({}u)", v.to_bits())
                }
            }
            Literal::F64(v) => {
                if v.is_finite() {
                    let s = format!("{v:?}");
                    let s = if s.contains(['.', 'e']) { s } else { format!("{s}.0") };
                    if v.is_sign_negative() {
                        format!("({s})")
                    } else {
                        s
                    }
                } else {
                    format!("xh_f64_from_bits({}ULL)", v.to_bits())
                }
            }
            Literal::U32(v) => format!("{v}u"),
            Literal::I32(v) => {
                if v == i32::MIN {
                    "(-2147483647 - 1)".to_owned()
                } else if v < 0 {
                    format!("({v})")
                } else {
                    v.to_string()
                }
            }
            Literal::U64(v) => format!("((xh_u64){v}ULL)"),
            Literal::I64(v) => {
                if v == i64::MIN {
                    "((xh_i64)(-9223372036854775807LL - 1))".to_owned()
                } else {
                    format!("((xh_i64)({v}LL))")
                }
            }
            Literal::Bool(b) => (if b { "true" } else { "false" }).to_owned(),
            Literal::F16(h) => {
                // Every f16 is an f32 exactly; WGSL has no infinite or NaN literal, but a
                // constant expression could still fold into one.
                let v = h.to_f32();
                if v.is_finite() {
                    format!("XH_F16({v:?}f)")
                } else {
                    format!("xh_f16_from_bits({}u)", h.to_bits())
                }
            }
            _ => return Err(self.unsupported("this literal")),
        })
    }

    /// A value expression.
    fn expr(&self, fx: &Fx, h: Handle<Expression>) -> Res<String> {
        if let Some(n) = fx.baked.get(&h) {
            if let Some(wg) = &fx.wg {
                wg.record_use(h);
            }
            return Ok(n.clone());
        }
        let e = &fx.f.expressions[h];
        Ok(match e {
            Expression::Literal(l) => self.literal(l).map_err(|e| self.relocate(fx, h, e))?,
            Expression::Constant(c) => self.const_expr(self.m.constants[*c].init)?,
            Expression::ZeroValue(t) => self.zero_of(*t)?,
            Expression::Compose { ty, components } => {
                let parts: Vec<String> = components.iter().map(|&c| self.expr(fx, c)).collect::<Res<_>>()?;
                let types: Vec<TypeInner> = components.iter().map(|&c| self.ty(fx, c).clone()).collect();
                self.compose(*ty, &parts, &types).map_err(|e| self.relocate(fx, h, e))?
            }
            Expression::Splat { size, value } => {
                let v = self.expr(fx, *value)?;
                let t = self.inner_name(self.ty(fx, h))?;
                format!("xh_make_{t}({})", vec![v; *size as usize].join(", "))
            }
            Expression::Swizzle { size, vector, pattern } => {
                let v = self.expr(fx, *vector)?;
                let t = self.inner_name(self.ty(fx, h))?;
                let parts: Vec<String> = pattern[..*size as usize]
                    .iter()
                    .map(|&p| comp(&v, p as usize))
                    .collect();
                format!("xh_make_{t}({})", parts.join(", "))
            }
            Expression::FunctionArgument(i) => {
                if self.is_pointer(fx, h) {
                    self.lvalue(fx, h)?
                } else {
                    fx.args[*i as usize].clone()
                }
            }
            Expression::GlobalVariable(_) | Expression::LocalVariable(_) => self.lvalue(fx, h)?,
            Expression::Access { base, index } => {
                if self.is_pointer(fx, h) {
                    return self.lvalue(fx, h);
                }
                let b = self.expr(fx, *base)?;
                let i = self.expr(fx, *index)?;
                match self.ty(fx, *base) {
                    TypeInner::Vector { .. } => {
                        format!("xh_get_{}({b}, (xh_u32)({i}))", self.inner_name(self.ty(fx, *base))?)
                    }
                    TypeInner::Matrix { columns, .. } => {
                        format!("{}.c[{}].v", paren(&b), self.clamp(fx, &i, *columns as u32, *index))
                    }
                    TypeInner::Array {
                        size: ArraySize::Constant(n),
                        ..
                    } => {
                        let unwrap = match &fx.fi[*base].ty {
                            TypeResolution::Handle(t) => self.arrays.get(t).map(|r| r.unwrap).unwrap_or(""),
                            _ => "",
                        };
                        format!("{}.a[{}]{unwrap}", paren(&b), self.clamp(fx, &i, n.get(), *index))
                    }
                    _ => return Err(self.expr_err(fx, h, "this indexing")),
                }
            }
            Expression::AccessIndex { base, index } => {
                if self.is_pointer(fx, h) {
                    return self.lvalue(fx, h);
                }
                let b = self.expr(fx, *base)?;
                let k = *index as usize;
                match self.ty(fx, *base) {
                    TypeInner::Vector { .. } => comp(&b, k),
                    TypeInner::Matrix { .. } => format!("{}.c[{k}].v", paren(&b)),
                    TypeInner::Array { .. } => {
                        let unwrap = match &fx.fi[*base].ty {
                            TypeResolution::Handle(t) => self.arrays.get(t).map(|r| r.unwrap).unwrap_or(""),
                            _ => "",
                        };
                        format!("{}.a[{k}]{unwrap}", paren(&b))
                    }
                    TypeInner::Struct { .. } => {
                        let t = match &fx.fi[*base].ty {
                            TypeResolution::Handle(t) => *t,
                            _ => return Err(self.expr_err(fx, h, "this member access")),
                        };
                        format!("{}.{}", paren(&b), self.members[&t][k])
                    }
                    _ => return Err(self.expr_err(fx, h, "this member access")),
                }
            }
            Expression::Load { pointer } => {
                let lv = self.lvalue(fx, *pointer)?;
                match self.pointee(fx, *pointer) {
                    TypeInner::Atomic(s) => self.atomic_load(&lv, s),
                    _ => lv,
                }
            }
            Expression::Unary { op, expr } => {
                let v = self.expr(fx, *expr)?;
                let t = self.ty(fx, *expr).clone();
                self.map_components(
                    &t,
                    &[v],
                    |s, a| {
                        Ok(match op {
                            UnaryOperator::Negate => match s.kind {
                                ScalarKind::Sint => format!("xh_neg_{}({})", scalar_suffix(s).unwrap_or("i32"), a[0]),
                                ScalarKind::Float if s.width == 2 => format!("xh_neg_f16({})", a[0]),
                                _ => format!("(-{})", paren(&a[0])),
                            },
                            UnaryOperator::LogicalNot => format!("(!{})", paren(&a[0])),
                            UnaryOperator::BitwiseNot => {
                                format!("(({})~{})", self.inner_name(&TypeInner::Scalar(s))?, paren(&a[0]))
                            }
                        })
                    },
                    None,
                )?
            }
            Expression::Binary { op, left, right } => self.binary(fx, h, *op, *left, *right)?,
            Expression::Select {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, *condition)?;
                let a = self.expr(fx, *accept)?;
                let r = self.expr(fx, *reject)?;
                match self.ty(fx, *condition) {
                    TypeInner::Vector { size, .. } => {
                        let t = self.inner_name(self.ty(fx, h))?;
                        let parts: Vec<String> = (0..*size as usize)
                            .map(|i| format!("({} ? {} : {})", comp(&c, i), comp(&a, i), comp(&r, i)))
                            .collect();
                        format!("xh_make_{t}({})", parts.join(", "))
                    }
                    _ => format!("({c} ? {a} : {r})"),
                }
            }
            Expression::Relational { fun, argument } => {
                let v = self.expr(fx, *argument)?;
                let (joiner, _) = match fun {
                    naga::RelationalFunction::All => (" && ", ()),
                    naga::RelationalFunction::Any => (" || ", ()),
                    _ => return Err(self.expr_err(fx, h, "isNan/isInf")),
                };
                match self.ty(fx, *argument) {
                    TypeInner::Vector { size, .. } => {
                        let parts: Vec<String> = (0..*size as usize).map(|i| comp(&v, i)).collect();
                        format!("({})", parts.join(joiner))
                    }
                    _ => v,
                }
            }
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => {
                let mut args = vec![*arg];
                args.extend(arg1.iter().chain(arg2.iter()).chain(arg3.iter()).copied());
                self.math(fx, h, *fun, &args)?
            }
            Expression::As { expr, kind, convert } => {
                let v = self.expr(fx, *expr)?;
                let t = self.ty(fx, *expr).clone();
                if let TypeInner::Matrix { .. } = t {
                    return Err(self.expr_err(fx, h, "matrix conversions"));
                }
                let result = self.ty(fx, h).clone();
                self.map_components(&t, &[v], |s, a| self.convert(s, *kind, *convert, &a[0]), Some(&result))
                    .map_err(|e| self.relocate(fx, h, e))?
            }
            Expression::ArrayLength(p) => self.array_length(fx, h, *p)?,
            Expression::CallResult(_)
            | Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. } => {
                return Err(KernelError::new(
                    KernelErrorKind::Internal,
                    "a call or atomic result used before its statement",
                ))
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

    /// A constant expression from the module's global expression arena.
    fn const_expr(&self, h: Handle<Expression>) -> Res<String> {
        let ge = &self.m.global_expressions;
        Ok(match &ge[h] {
            Expression::Literal(l) => self.literal(l)?,
            Expression::Constant(c) => self.const_expr(self.m.constants[*c].init)?,
            Expression::ZeroValue(t) => self.zero_of(*t)?,
            Expression::Compose { ty, components } => {
                let parts: Vec<String> = components.iter().map(|&c| self.const_expr(c)).collect::<Res<_>>()?;
                let types: Vec<TypeInner> = components
                    .iter()
                    .map(|&c| self.info[c].inner_with(&self.m.types).clone())
                    .collect();
                self.compose(*ty, &parts, &types)?
            }
            Expression::Splat { size, value } => {
                let v = self.const_expr(*value)?;
                let t = self.inner_name(self.info[h].inner_with(&self.m.types))?;
                format!("xh_make_{t}({})", vec![v; *size as usize].join(", "))
            }
            _ => return Err(self.unsupported("this constant expression")),
        })
    }

    fn compose(&self, ty: Handle<Type>, parts: &[String], types: &[TypeInner]) -> Res<String> {
        let name = self.type_name(ty)?;
        match &self.m.types[ty].inner {
            TypeInner::Vector { .. } => {
                let mut flat = Vec::new();
                for (p, t) in parts.iter().zip(types) {
                    match t {
                        TypeInner::Vector { size, .. } => flat.extend((0..*size as usize).map(|i| comp(p, i))),
                        _ => flat.push(p.clone()),
                    }
                }
                Ok(format!("xh_make_{name}({})", flat.join(", ")))
            }
            TypeInner::Matrix { columns, rows, scalar } => {
                if parts.len() == *columns as usize {
                    Ok(format!("xh_make_{name}({})", parts.join(", ")))
                } else {
                    let r = *rows as usize;
                    let sfx = scalar_suffix(*scalar).unwrap_or("f32");
                    let cols: Vec<String> = parts
                        .chunks(r)
                        .map(|c| format!("xh_make_xh_{sfx}x{r}({})", c.join(", ")))
                        .collect();
                    Ok(format!("xh_make_{name}({})", cols.join(", ")))
                }
            }
            TypeInner::Array {
                size: ArraySize::Constant(n),
                ..
            } if n.get() > MAX_CONSTRUCTED_ARRAY => Err(self.unsupported(&format!(
                "an array constructor with more than {MAX_CONSTRUCTED_ARRAY} elements"
            ))),
            _ => Ok(format!("xh_make_{name}({})", parts.join(", "))),
        }
    }

    /// Applies `f` to each component of a scalar or vector of type `t` (all `args` share its
    /// shape, or are scalars that apply to every component).
    fn map_components(
        &self,
        t: &TypeInner,
        args: &[String],
        f: impl Fn(Scalar, &[String]) -> Res<String>,
        result: Option<&TypeInner>,
    ) -> Res<String> {
        match t {
            TypeInner::Scalar(s) => f(*s, args),
            TypeInner::Vector { size, scalar } => {
                let mut parts = Vec::new();
                for i in 0..*size as usize {
                    let a: Vec<String> = args.iter().map(|x| comp(x, i)).collect();
                    parts.push(f(*scalar, &a)?);
                }
                let name = self.inner_name(result.unwrap_or(t))?;
                Ok(format!("xh_make_{name}({})", parts.join(", ")))
            }
            _ => Err(self.unsupported("this operand type")),
        }
    }

    fn convert(&self, s: Scalar, kind: ScalarKind, convert: Option<u8>, e: &str) -> Res<String> {
        let dst = Scalar {
            kind,
            width: convert.unwrap_or(s.width),
        };
        if s == dst {
            return Ok(e.to_owned());
        }
        if s == Scalar::F16 || dst == Scalar::F16 {
            if convert.is_none() {
                // naga keeps a bitcast's width, so this would be f16 to or from a 16-bit
                // integer, which WGSL does not have.
                return Err(self.unsupported("bitcasts to or from f16"));
            }
            if s == Scalar::F16 {
                // Widened exactly, then converted as an f32 is (saturating into integers).
                return self.convert(Scalar::F32, kind, convert, &format!("XH_H2F({e})"));
            }
            // As the interpreter does: to f32 first (exact for every integer an f16 can
            // hold; f64 rounds twice, as there), then rounded to f16.
            let wide = self.convert(s, ScalarKind::Float, Some(4), e)?;
            return Ok(format!("XH_F2H({wide})"));
        }
        let dn = self.inner_name(&TypeInner::Scalar(dst))?;
        let sf = scalar_suffix(s).ok_or_else(|| self.unsupported(&scalar_wgsl(s)))?;
        let df = scalar_suffix(dst).ok_or_else(|| self.unsupported(&scalar_wgsl(dst)))?;
        if convert.is_none() {
            // Bit cast between types of one width.
            return Ok(match (s.kind, dst.kind) {
                (ScalarKind::Float, ScalarKind::Uint) => format!("xh_bits_{sf}({e})"),
                (ScalarKind::Float, _) => format!("(({dn})xh_bits_{sf}({e}))"),
                (_, ScalarKind::Float) => {
                    let bits = if dst.width == 8 { "xh_u64" } else { "xh_u32" };
                    format!("xh_{df}_from_bits(({bits})({e}))")
                }
                _ => format!("(({dn})({e}))"),
            });
        }
        Ok(match (s.kind, dst.kind) {
            (ScalarKind::Bool, ScalarKind::Float) => {
                let one = if dst.width == 4 { "1.0f" } else { "1.0" };
                let zero = if dst.width == 4 { "0.0f" } else { "0.0" };
                format!("({} ? {one} : {zero})", paren(e))
            }
            (ScalarKind::Bool, _) => format!("(({dn})({} ? 1 : 0))", paren(e)),
            (_, ScalarKind::Bool) => format!("({} != 0)", paren(e)),
            (ScalarKind::Float, ScalarKind::Sint | ScalarKind::Uint) => format!("xh_{sf}_to_{df}({e})"),
            _ => format!("(({dn})({e}))"),
        })
    }

    fn sbin(&self, op: Bin, s: Scalar, a: &str, b: &str) -> Res<String> {
        let sfx = scalar_suffix(s).ok_or_else(|| self.unsupported(&scalar_wgsl(s)))?;
        if s == Scalar::F16 {
            // Each operation in f32, rounded to f16 at once; comparisons are exact in f32.
            return Ok(match op {
                Bin::Add => format!("xh_add_f16({a}, {b})"),
                Bin::Subtract => format!("xh_sub_f16({a}, {b})"),
                Bin::Multiply => format!("xh_mul_f16({a}, {b})"),
                Bin::Divide => format!("xh_div_f16({a}, {b})"),
                Bin::Modulo => format!("xh_rem_f16({a}, {b})"),
                Bin::Equal => format!("(XH_H2F({a}) == XH_H2F({b}))"),
                Bin::NotEqual => format!("(XH_H2F({a}) != XH_H2F({b}))"),
                Bin::Less => format!("(XH_H2F({a}) < XH_H2F({b}))"),
                Bin::LessEqual => format!("(XH_H2F({a}) <= XH_H2F({b}))"),
                Bin::Greater => format!("(XH_H2F({a}) > XH_H2F({b}))"),
                Bin::GreaterEqual => format!("(XH_H2F({a}) >= XH_H2F({b}))"),
                _ => return Err(self.unsupported(&format!("{op:?} on f16"))),
            });
        }
        let float = s.kind == ScalarKind::Float;
        let signed = s.kind == ScalarKind::Sint;
        let int = matches!(s.kind, ScalarKind::Sint | ScalarKind::Uint);
        Ok(match op {
            Bin::Add if signed => format!("xh_add_{sfx}({a}, {b})"),
            Bin::Subtract if signed => format!("xh_sub_{sfx}({a}, {b})"),
            Bin::Multiply if signed => format!("xh_mul_{sfx}({a}, {b})"),
            Bin::Add => format!("({a} + {b})"),
            Bin::Subtract => format!("({a} - {b})"),
            Bin::Multiply => format!("({a} * {b})"),
            Bin::Divide if int => format!("xh_div_{sfx}({a}, {b})"),
            Bin::Divide => format!("({a} / {b})"),
            Bin::Modulo if int => format!("xh_rem_{sfx}({a}, {b})"),
            Bin::Modulo if float => format!("xh_rem_{sfx}({a}, {b})"),
            Bin::Equal => format!("({a} == {b})"),
            Bin::NotEqual => format!("({a} != {b})"),
            Bin::Less => format!("({a} < {b})"),
            Bin::LessEqual => format!("({a} <= {b})"),
            Bin::Greater => format!("({a} > {b})"),
            Bin::GreaterEqual => format!("({a} >= {b})"),
            Bin::And if s.kind == ScalarKind::Bool => format!("((xh_bool)({a} & {b}))"),
            Bin::InclusiveOr if s.kind == ScalarKind::Bool => format!("((xh_bool)({a} | {b}))"),
            Bin::And => format!("(({})({a} & {b}))", self.inner_name(&TypeInner::Scalar(s))?),
            Bin::InclusiveOr => format!("(({})({a} | {b}))", self.inner_name(&TypeInner::Scalar(s))?),
            Bin::ExclusiveOr => format!("(({})({a} ^ {b}))", self.inner_name(&TypeInner::Scalar(s))?),
            Bin::LogicalAnd => format!("({a} && {b})"),
            Bin::LogicalOr => format!("({a} || {b})"),
            Bin::ShiftLeft => format!("xh_shl_{sfx}({a}, {b})"),
            Bin::ShiftRight => format!("xh_shr_{sfx}({a}, {b})"),
            Bin::Modulo => return Err(self.unsupported("this remainder")),
        })
    }

    fn binary(
        &self,
        fx: &Fx,
        h: Handle<Expression>,
        op: Bin,
        l: Handle<Expression>,
        r: Handle<Expression>,
    ) -> Res<String> {
        let a = self.expr(fx, l)?;
        let b = self.expr(fx, r)?;
        let lt = self.ty(fx, l).clone();
        let rt = self.ty(fx, r).clone();
        let result = self.ty(fx, h).clone();
        let err = |e: KernelError| self.relocate(fx, h, e);
        match (&lt, &rt) {
            (TypeInner::Scalar(s), TypeInner::Scalar(_)) => self.sbin(op, *s, &a, &b).map_err(err),
            (TypeInner::Vector { size, scalar }, TypeInner::Vector { .. })
            | (TypeInner::Vector { size, scalar }, TypeInner::Scalar(_))
            | (TypeInner::Scalar(scalar), TypeInner::Vector { size, .. }) => {
                let n = *size as usize;
                let lv = matches!(lt, TypeInner::Vector { .. });
                let rv = matches!(rt, TypeInner::Vector { .. });
                let mut parts = Vec::new();
                for i in 0..n {
                    let x = if lv { comp(&a, i) } else { a.clone() };
                    let y = if rv { comp(&b, i) } else { b.clone() };
                    parts.push(self.sbin(op, *scalar, &x, &y).map_err(err)?);
                }
                let name = self.inner_name(&result)?;
                Ok(format!("xh_make_{name}({})", parts.join(", ")))
            }
            (TypeInner::Matrix { columns, rows, .. }, _) | (_, TypeInner::Matrix { columns, rows, .. }) => self
                .matrix_binary(
                    fx,
                    h,
                    op,
                    (&a, &lt),
                    (&b, &rt),
                    *columns as usize,
                    *rows as usize,
                    &result,
                ),
            _ => Err(self.expr_err(fx, h, "this operation")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn matrix_binary(
        &self,
        fx: &Fx,
        h: Handle<Expression>,
        op: Bin,
        (a, lt): (&str, &TypeInner),
        (b, rt): (&str, &TypeInner),
        _c: usize,
        _r: usize,
        result: &TypeInner,
    ) -> Res<String> {
        let col = |m: &str, j: usize| format!("{}.c[{j}].v", paren(m));
        let rname = self.inner_name(result)?;
        let scalar = match (lt, rt) {
            (TypeInner::Matrix { scalar, .. }, _) | (_, TypeInner::Matrix { scalar, .. }) => *scalar,
            _ => return Err(self.expr_err(fx, h, "this matrix operation")),
        };
        let sfx = scalar_suffix(scalar).unwrap_or("f32");
        let err = |e: KernelError| self.relocate(fx, h, e);
        let bin = |op: Bin, x: &str, y: &str| self.sbin(op, scalar, x, y).map_err(err);
        let mul = |x: &str, y: &str| bin(Bin::Multiply, x, y);
        // Products added left to right, as the interpreter adds them.
        let sum = |terms: Vec<String>| -> Res<String> {
            let mut terms = terms.into_iter();
            let first = terms.next().unwrap_or_default();
            terms.try_fold(first, |acc, t| bin(Bin::Add, &acc, &t))
        };
        match (op, lt, rt) {
            (Bin::Add | Bin::Subtract, TypeInner::Matrix { columns, rows, .. }, TypeInner::Matrix { .. }) => {
                let cols: Vec<String> = (0..*columns as usize)
                    .map(|j| {
                        let parts: Vec<String> = (0..*rows as usize)
                            .map(|i| bin(op, &comp(&col(a, j), i), &comp(&col(b, j), i)))
                            .collect::<Res<_>>()?;
                        Ok(format!("xh_make_xh_{sfx}x{}({})", *rows as u8, parts.join(", ")))
                    })
                    .collect::<Res<_>>()?;
                Ok(format!("xh_make_{rname}({})", cols.join(", ")))
            }
            (Bin::Multiply, TypeInner::Matrix { columns, rows, .. }, TypeInner::Scalar(_))
            | (Bin::Multiply, TypeInner::Scalar(_), TypeInner::Matrix { columns, rows, .. }) => {
                let (m, s) = if matches!(lt, TypeInner::Matrix { .. }) {
                    (a, b)
                } else {
                    (b, a)
                };
                let cols: Vec<String> = (0..*columns as usize)
                    .map(|j| {
                        let parts: Vec<String> = (0..*rows as usize)
                            .map(|i| mul(&comp(&col(m, j), i), s))
                            .collect::<Res<_>>()?;
                        Ok(format!("xh_make_xh_{sfx}x{}({})", *rows as u8, parts.join(", ")))
                    })
                    .collect::<Res<_>>()?;
                Ok(format!("xh_make_{rname}({})", cols.join(", ")))
            }
            (Bin::Multiply, TypeInner::Matrix { columns, rows, .. }, TypeInner::Vector { .. }) => {
                let parts: Vec<String> = (0..*rows as usize)
                    .map(|i| {
                        sum((0..*columns as usize)
                            .map(|j| mul(&comp(&col(a, j), i), &comp(b, j)))
                            .collect::<Res<_>>()?)
                    })
                    .collect::<Res<_>>()?;
                Ok(format!("xh_make_{rname}({})", parts.join(", ")))
            }
            (Bin::Multiply, TypeInner::Vector { size, .. }, TypeInner::Matrix { columns, .. }) => {
                let parts: Vec<String> = (0..*columns as usize)
                    .map(|j| {
                        sum((0..*size as usize)
                            .map(|i| mul(&comp(a, i), &comp(&col(b, j), i)))
                            .collect::<Res<_>>()?)
                    })
                    .collect::<Res<_>>()?;
                Ok(format!("xh_make_{rname}({})", parts.join(", ")))
            }
            (
                Bin::Multiply,
                TypeInner::Matrix {
                    columns: inner, rows, ..
                },
                TypeInner::Matrix { columns: k, .. },
            ) => {
                let cols: Vec<String> = (0..*k as usize)
                    .map(|kk| {
                        let parts: Vec<String> = (0..*rows as usize)
                            .map(|i| {
                                sum((0..*inner as usize)
                                    .map(|j| mul(&comp(&col(a, j), i), &comp(&col(b, kk), j)))
                                    .collect::<Res<_>>()?)
                            })
                            .collect::<Res<_>>()?;
                        Ok(format!("xh_make_xh_{sfx}x{}({})", *rows as u8, parts.join(", ")))
                    })
                    .collect::<Res<_>>()?;
                Ok(format!("xh_make_{rname}({})", cols.join(", ")))
            }
            _ => Err(self.expr_err(fx, h, "this matrix operation")),
        }
    }

    fn math(&self, fx: &Fx, h: Handle<Expression>, fun: Mf, args: &[Handle<Expression>]) -> Res<String> {
        let vals: Vec<String> = args.iter().map(|&a| self.expr(fx, a)).collect::<Res<_>>()?;
        // The pack family and quantizeToF16: helpers of the prelude (see `prelude::packing`).
        let packing = match fun {
            Mf::Pack4x8snorm => Some("xh_pack4x8snorm"),
            Mf::Pack4x8unorm => Some("xh_pack4x8unorm"),
            Mf::Pack2x16snorm => Some("xh_pack2x16snorm"),
            Mf::Pack2x16unorm => Some("xh_pack2x16unorm"),
            Mf::Pack2x16float => Some("xh_pack2x16float"),
            Mf::Unpack4x8snorm => Some("xh_unpack4x8snorm"),
            Mf::Unpack4x8unorm => Some("xh_unpack4x8unorm"),
            Mf::Unpack2x16snorm => Some("xh_unpack2x16snorm"),
            Mf::Unpack2x16unorm => Some("xh_unpack2x16unorm"),
            Mf::Unpack2x16float => Some("xh_unpack2x16float"),
            Mf::Pack4xI8 => Some("xh_pack4xi8"),
            Mf::Pack4xU8 => Some("xh_pack4xu8"),
            Mf::Pack4xI8Clamp => Some("xh_pack4xi8clamp"),
            Mf::Pack4xU8Clamp => Some("xh_pack4xu8clamp"),
            Mf::Unpack4xI8 => Some("xh_unpack4xi8"),
            Mf::Unpack4xU8 => Some("xh_unpack4xu8"),
            _ => None,
        };
        if let Some(helper) = packing {
            return Ok(format!("{helper}({})", vals[0]));
        }
        // Four products of at most 128 * 128 each: the i32 sum cannot overflow.
        match fun {
            Mf::Dot4I8Packed => return Ok(format!("xh_dot4i8packed({}, {})", vals[0], vals[1])),
            Mf::Dot4U8Packed => return Ok(format!("xh_dot4u8packed({}, {})", vals[0], vals[1])),
            _ => {}
        }
        if fun == Mf::QuantizeToF16 {
            let t = self.ty(fx, args[0]).clone();
            return self.map_components(&t, &vals, |_, parts| Ok(format!("xh_quantize_f16({})", parts[0])), None);
        }
        let t0 = self.ty(fx, args[0]).clone();
        let result = self.ty(fx, h).clone();
        let err = |e: KernelError| self.relocate(fx, h, e);
        let (size, scalar) = match t0 {
            TypeInner::Scalar(s) => (None, s),
            TypeInner::Vector { size, scalar } => (Some(size as usize), scalar),
            TypeInner::Matrix { columns, rows, scalar } => {
                let sfx = scalar_suffix(scalar).unwrap_or("f32");
                return match fun {
                    Mf::Transpose => {
                        let m = &vals[0];
                        let cols: Vec<String> = (0..rows as usize)
                            .map(|i| {
                                let parts: Vec<String> = (0..columns as usize)
                                    .map(|j| comp(&format!("{}.c[{j}].v", paren(m)), i))
                                    .collect();
                                format!("xh_make_xh_{sfx}x{}({})", columns as u8, parts.join(", "))
                            })
                            .collect();
                        Ok(format!("xh_make_{}({})", self.inner_name(&result)?, cols.join(", ")))
                    }
                    Mf::Determinant => {
                        let m = &vals[0];
                        let e = |j: usize, i: usize| comp(&format!("{}.c[{j}].v", paren(m)), i);
                        let all: Vec<usize> = (0..columns as usize).collect();
                        let op = |op: Bin, x: &str, y: &str| self.sbin(op, scalar, x, y);
                        determinant_text(&e, &all, &all, &op).map_err(err)
                    }
                    _ => Err(self.expr_err(fx, h, &format!("{fun:?} on matrices"))),
                };
            }
            _ => return Err(self.expr_err(fx, h, &format!("{fun:?} on this type"))),
        };
        let n = size.unwrap_or(1);
        let c = |v: &str, i: usize| if size.is_some() { comp(v, i) } else { v.to_owned() };
        // Geometric functions that look across components.
        match fun {
            Mf::Dot => {
                let mut acc: Option<String> = None;
                for i in 0..n {
                    let p = self
                        .sbin(Bin::Multiply, scalar, &c(&vals[0], i), &c(&vals[1], i))
                        .map_err(err)?;
                    acc = Some(match acc {
                        None => p,
                        Some(a) => self.sbin(Bin::Add, scalar, &a, &p).map_err(err)?,
                    });
                }
                return Ok(acc.unwrap_or_default());
            }
            Mf::Length | Mf::Distance | Mf::Normalize => {
                if scalar.kind != ScalarKind::Float {
                    return Err(self.expr_err(fx, h, "length of integers"));
                }
                // As the interpreter: the length of a scalar is its magnitude; of a vector,
                // the square root of its dot product with itself, each operation rounded.
                let diff = |i: usize| {
                    if fun == Mf::Distance {
                        self.sbin(Bin::Subtract, scalar, &c(&vals[0], i), &c(&vals[1], i))
                    } else {
                        Ok(c(&vals[0], i))
                    }
                };
                let len = if size.is_none() {
                    self.smath(Mf::Abs, scalar, &[diff(0).map_err(err)?]).map_err(err)?
                } else {
                    let mut acc: Option<String> = None;
                    for i in 0..n {
                        let d = diff(i).map_err(err)?;
                        let p = self.sbin(Bin::Multiply, scalar, &d, &d).map_err(err)?;
                        acc = Some(match acc {
                            None => p,
                            Some(a) => self.sbin(Bin::Add, scalar, &a, &p).map_err(err)?,
                        });
                    }
                    self.smath(Mf::Sqrt, scalar, &[acc.unwrap_or_default()]).map_err(err)?
                };
                if fun != Mf::Normalize {
                    return Ok(len);
                }
                if size.is_none() {
                    return self.sbin(Bin::Divide, scalar, &vals[0], &len).map_err(err);
                }
                let parts: Vec<String> = (0..n)
                    .map(|i| self.sbin(Bin::Divide, scalar, &c(&vals[0], i), &len))
                    .collect::<Res<_>>()
                    .map_err(err)?;
                return Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", ")));
            }
            Mf::Reflect | Mf::FaceForward | Mf::Refract | Mf::Modf | Mf::Frexp if scalar.kind != ScalarKind::Float => {
                return Err(self.expr_err(fx, h, &format!("{fun:?} on integers")));
            }
            Mf::Reflect | Mf::FaceForward | Mf::Refract => {
                // The interpreter's formulas, operation by operation (each rounded to the
                // type, f16 included), so that both give the same bits.
                let bin = |op: Bin, x: &str, y: &str| self.sbin(op, scalar, x, y).map_err(err);
                let lit = |v: f32| match scalar.width {
                    2 => format!("XH_F16({v:?}f)"),
                    4 => format!("{v:?}f"),
                    _ => format!("{v:?}"),
                };
                let dot = |x: &str, y: &str| -> Res<String> {
                    let mut acc: Option<String> = None;
                    for i in 0..n {
                        let p = bin(Bin::Multiply, &c(x, i), &c(y, i))?;
                        acc = Some(match acc {
                            None => p,
                            Some(a) => bin(Bin::Add, &a, &p)?,
                        });
                    }
                    Ok(acc.unwrap_or_default())
                };
                let parts: Vec<String> = match fun {
                    // e1 - (2 * dot(e2, e1)) * e2
                    Mf::Reflect => {
                        let scale = bin(Bin::Multiply, &lit(2.0), &dot(&vals[1], &vals[0])?)?;
                        (0..n)
                            .map(|i| {
                                let term = bin(Bin::Multiply, &scale, &c(&vals[1], i))?;
                                bin(Bin::Subtract, &c(&vals[0], i), &term)
                            })
                            .collect::<Res<_>>()?
                    }
                    // dot(e2, e3) < 0 ? e1 : -e1
                    Mf::FaceForward => {
                        let negative = bin(Bin::Less, &dot(&vals[1], &vals[2])?, &lit(0.0))?;
                        (0..n)
                            .map(|i| {
                                let e = c(&vals[0], i);
                                let negated = if scalar.width == 2 {
                                    format!("xh_neg_f16({e})")
                                } else {
                                    format!("(-{})", paren(&e))
                                };
                                format!("({negative} ? {e} : {negated})")
                            })
                            .collect()
                    }
                    // k = 1 - eta * eta * (1 - d * d) with d = dot(e2, e1); 0 where k < 0,
                    // else eta * e1 - (eta * d + sqrt(k)) * e2.
                    _ => {
                        let eta = &vals[2];
                        let d = dot(&vals[1], &vals[0])?;
                        let one_minus_d2 = bin(Bin::Subtract, &lit(1.0), &bin(Bin::Multiply, &d, &d)?)?;
                        let eta2 = bin(Bin::Multiply, eta, eta)?;
                        let k = bin(Bin::Subtract, &lit(1.0), &bin(Bin::Multiply, &eta2, &one_minus_d2)?)?;
                        let negative = bin(Bin::Less, &k, &lit(0.0))?;
                        let root = self.smath(Mf::Sqrt, scalar, std::slice::from_ref(&k)).map_err(err)?;
                        let factor = bin(Bin::Add, &bin(Bin::Multiply, eta, &d)?, &root)?;
                        (0..n)
                            .map(|i| {
                                let left = bin(Bin::Multiply, eta, &c(&vals[0], i))?;
                                let right = bin(Bin::Multiply, &factor, &c(&vals[1], i))?;
                                let value = bin(Bin::Subtract, &left, &right)?;
                                Ok(format!("({negative} ? {} : {value})", lit(0.0)))
                            })
                            .collect::<Res<_>>()?
                    }
                };
                return match size {
                    None => Ok(parts.into_iter().next().unwrap_or_default()),
                    Some(_) => Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", "))),
                };
            }
            Mf::Modf | Mf::Frexp => {
                // The predeclared result structs: (fract, whole) and (fract, exp).
                let (first, second): (Vec<String>, Vec<String>) = if fun == Mf::Modf {
                    // whole = trunc(e), fract = e - whole, as the interpreter computes them.
                    (0..n)
                        .map(|i| {
                            let e = c(&vals[0], i);
                            let whole = self.smath(Mf::Trunc, scalar, std::slice::from_ref(&e))?;
                            Ok((self.sbin(Bin::Subtract, scalar, &e, &whole)?, whole))
                        })
                        .collect::<Res<Vec<_>>>()
                        .map_err(err)?
                        .into_iter()
                        .unzip()
                } else {
                    // An f16 goes through f32, whose frexp is exact in f16 (as in the
                    // interpreter, which holds an f16 as an f32).
                    (0..n)
                        .map(|i| {
                            let e = c(&vals[0], i);
                            match scalar.width {
                                2 => (
                                    format!("XH_F2H(xh_frexp_fract_f32(XH_H2F({e})))"),
                                    format!("xh_frexp_exp_f32(XH_H2F({e}))"),
                                ),
                                4 => (format!("xh_frexp_fract_f32({e})"), format!("xh_frexp_exp_f32({e})")),
                                // naga types the exponent of an f64's frexp `i64`.
                                _ => (
                                    format!("xh_frexp_fract_f64({e})"),
                                    format!("((xh_i64)xh_frexp_exp_f64({e}))"),
                                ),
                            }
                        })
                        .unzip()
                };
                let second_scalar = match (fun, scalar.width) {
                    (Mf::Modf, _) => scalar,
                    (_, 8) => Scalar::I64,
                    _ => Scalar::I32,
                };
                let members = match size {
                    None => [first.join(""), second.join("")],
                    Some(_) => {
                        let arg = self.ty(fx, args[0]).clone();
                        let TypeInner::Vector { size: vsize, .. } = arg else {
                            return Err(self.expr_err(fx, h, &format!("{fun:?} on this type")));
                        };
                        let exp = TypeInner::Vector {
                            size: vsize,
                            scalar: second_scalar,
                        };
                        [
                            format!("xh_make_{}({})", self.inner_name(&arg)?, first.join(", ")),
                            format!("xh_make_{}({})", self.inner_name(&exp)?, second.join(", ")),
                        ]
                    }
                };
                return Ok(format!(
                    "xh_make_{}({}, {})",
                    self.inner_name(&result)?,
                    members[0],
                    members[1]
                ));
            }
            Mf::Cross => {
                let (a, b) = (&vals[0], &vals[1]);
                let x = |i: usize, j: usize| -> Res<String> {
                    let p = self.sbin(Bin::Multiply, scalar, &comp(a, i), &comp(b, j))?;
                    let q = self.sbin(Bin::Multiply, scalar, &comp(a, j), &comp(b, i))?;
                    self.sbin(Bin::Subtract, scalar, &p, &q)
                };
                return Ok(format!(
                    "xh_make_{}({}, {}, {})",
                    self.inner_name(&result)?,
                    x(1, 2).map_err(err)?,
                    x(2, 0).map_err(err)?,
                    x(0, 1).map_err(err)?
                ));
            }
            _ => {}
        }
        let arg_is_vec: Vec<bool> = args
            .iter()
            .map(|&a| matches!(self.ty(fx, a), TypeInner::Vector { .. }))
            .collect();
        let mut parts = Vec::new();
        for i in 0..n {
            let a: Vec<String> = vals
                .iter()
                .zip(&arg_is_vec)
                .map(|(v, &is_vec)| if is_vec { comp(v, i) } else { v.clone() })
                .collect();
            parts.push(self.smath(fun, scalar, &a).map_err(err)?);
        }
        match size {
            None => Ok(parts.pop().unwrap_or_default()),
            Some(_) => Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", "))),
        }
    }

    fn smath(&self, fun: Mf, s: Scalar, a: &[String]) -> Res<String> {
        let sfx = scalar_suffix(s).ok_or_else(|| self.unsupported(&scalar_wgsl(s)))?;
        if s == Scalar::F16 {
            // Computed in f32 and rounded once, as the interpreter computes it (`ldexp`'s
            // exponent is an integer).
            let wide: Vec<String> = a
                .iter()
                .enumerate()
                .map(|(k, x)| {
                    if fun == Mf::Ldexp && k == 1 {
                        x.clone()
                    } else {
                        format!("XH_H2F({x})")
                    }
                })
                .collect();
            return Ok(format!("XH_F2H({})", self.smath(fun, Scalar::F32, &wide)?));
        }
        if s.kind == ScalarKind::Float {
            let f32 = s.width == 4;
            let n = |name: &str| math_name(self.d, name, f32);
            let lit = |v: &str| if f32 { format!("{v}f") } else { v.to_owned() };
            let one = |name: &str| format!("{}({})", n(name), a[0]);
            return Ok(match fun {
                Mf::Abs => one("fabs"),
                Mf::Min => format!("{}({}, {})", n("fmin"), a[0], a[1]),
                Mf::Max => format!("{}({}, {})", n("fmax"), a[0], a[1]),
                Mf::Clamp => format!("{}({}({}, {}), {})", n("fmin"), n("fmax"), a[0], a[1], a[2]),
                Mf::Saturate => format!("{}({}({}, {}), {})", n("fmin"), n("fmax"), a[0], lit("0.0"), lit("1.0")),
                Mf::Cos => one("cos"),
                Mf::Cosh => one("cosh"),
                Mf::Sin => one("sin"),
                Mf::Sinh => one("sinh"),
                Mf::Tan => one("tan"),
                Mf::Tanh => one("tanh"),
                Mf::Acos => one("acos"),
                Mf::Asin => one("asin"),
                Mf::Atan => one("atan"),
                Mf::Asinh => one("asinh"),
                Mf::Acosh => one("acosh"),
                Mf::Atanh => one("atanh"),
                Mf::Atan2 => format!("{}({}, {})", n("atan2"), a[0], a[1]),
                Mf::Radians => format!("({} * {})", a[0], lit("0.017453292519943295")),
                Mf::Degrees => format!("({} * {})", a[0], lit("57.29577951308232")),
                Mf::Ceil => one("ceil"),
                Mf::Floor => one("floor"),
                Mf::Round => one("rint"),
                Mf::Trunc => one("trunc"),
                Mf::Fract => format!("({} - {}({}))", a[0], n("floor"), a[0]),
                Mf::Exp => one("exp"),
                Mf::Exp2 => one("exp2"),
                Mf::Log => one("log"),
                Mf::Log2 => one("log2"),
                Mf::Pow => format!("{}({}, {})", n("pow"), a[0], a[1]),
                Mf::Sqrt => one("sqrt"),
                Mf::InverseSqrt => format!("({} / {}({}))", lit("1.0"), n("sqrt"), a[0]),
                Mf::Sign => format!("xh_sign_{sfx}({})", a[0]),
                Mf::Fma => format!("{}({}, {}, {})", n("fma"), a[0], a[1], a[2]),
                Mf::Mix => format!("({} * ({} - {}) + {} * {})", a[0], lit("1.0"), a[2], a[1], a[2]),
                Mf::Step => format!("({} <= {} ? {} : {})", a[0], a[1], lit("1.0"), lit("0.0")),
                Mf::SmoothStep => format!("xh_smoothstep_{sfx}({}, {}, {})", a[0], a[1], a[2]),
                Mf::Ldexp => format!("{}({}, (int)({}))", n("ldexp"), a[0], a[1]),
                other => return Err(self.unsupported(&format!("the built-in {other:?}"))),
            });
        }
        let t = self.inner_name(&TypeInner::Scalar(s))?;
        let wide = s.width == 8;
        let signed = s.kind == ScalarKind::Sint;
        // The unsigned helper, on the bits of a signed operand.
        let bits = |f: &str| -> Res<String> {
            let u = if wide { "u64" } else { "u32" };
            Ok(if signed {
                format!("(({t})xh_{f}_{u}((xh_{u})({})))", a[0])
            } else {
                format!("xh_{f}_{u}({})", a[0])
            })
        };
        Ok(match fun {
            Mf::Abs if signed => format!("xh_abs_{sfx}({})", a[0]),
            Mf::Abs => a[0].clone(),
            Mf::Min => format!("xh_min_{sfx}({}, {})", a[0], a[1]),
            Mf::Max => format!("xh_max_{sfx}({}, {})", a[0], a[1]),
            Mf::Clamp => format!("xh_min_{sfx}(xh_max_{sfx}({}, {}), {})", a[0], a[1], a[2]),
            Mf::Sign if signed => format!("xh_sign_{sfx}({})", a[0]),
            Mf::CountOneBits => bits("popcount")?,
            Mf::ReverseBits => bits("reverse")?,
            Mf::CountLeadingZeros => bits("clz")?,
            Mf::CountTrailingZeros => bits("ctz")?,
            Mf::FirstTrailingBit => bits("first_trailing_bit")?,
            Mf::FirstLeadingBit => format!("xh_first_leading_bit_{sfx}({})", a[0]),
            Mf::ExtractBits => format!("xh_extract_bits_{sfx}({}, {}, {})", a[0], a[1], a[2]),
            Mf::InsertBits => format!("xh_insert_bits_{sfx}({}, {}, {}, {})", a[0], a[1], a[2], a[3]),
            other => return Err(self.unsupported(&format!("the built-in {other:?} on {}", scalar_wgsl(s)))),
        })
    }

    fn array_length(&self, fx: &Fx, h: Handle<Expression>, p: Handle<Expression>) -> Res<String> {
        let (g, header) = match &fx.f.expressions[p] {
            Expression::GlobalVariable(g) => (*g, 0),
            Expression::AccessIndex { base, index } => match &fx.f.expressions[*base] {
                Expression::GlobalVariable(g) => {
                    let header = match &self.m.types[self.m.global_variables[*g].ty].inner {
                        TypeInner::Struct { members, .. } => members[*index as usize].offset,
                        _ => 0,
                    };
                    (*g, header)
                }
                _ => return Err(self.expr_err(fx, h, "arrayLength of this pointer")),
            },
            _ => return Err(self.expr_err(fx, h, "arrayLength of this pointer")),
        };
        let stride = match self.pointee(fx, p) {
            TypeInner::Array { stride, .. } => stride,
            _ => return Err(self.expr_err(fx, h, "arrayLength of this pointer")),
        };
        let binding = self.m.global_variables[g]
            .binding
            .as_ref()
            .map(|b| b.binding)
            .unwrap_or(0);
        Ok(format!("xh_array_length(ctx->len_[{binding}], {header}u, {stride}u)"))
    }

    fn atomic_load(&self, lv: &str, s: Scalar) -> String {
        let zero = if s.kind == ScalarKind::Uint { "0u" } else { "0" };
        match self.d {
            Dialect::HostC => format!("__atomic_load_n(&{lv}, __ATOMIC_RELAXED)"),
            // CUDA and HIP have 64-bit atomics on `unsigned long long` only.
            Dialect::CudaC | Dialect::HipC if s.width == 8 => {
                let t = self.inner_name(&TypeInner::Scalar(s)).unwrap_or_default();
                format!("(({t})atomicAdd((xh_u64*)&{lv}, (xh_u64)0))")
            }
            Dialect::CudaC | Dialect::HipC => format!("atomicAdd(&{lv}, {zero})"),
            // 64-bit atomics come from cl_khr_int64_base_atomics (`atom_*`, enabled in the
            // prelude).
            Dialect::OpenclC if s.width == 8 => {
                let t = self.inner_name(&TypeInner::Scalar(s)).unwrap_or_default();
                format!("atom_add(&{lv}, ({t})0)")
            }
            Dialect::OpenclC => format!("atomic_add(&{lv}, {zero})"),
        }
    }

    fn atomic_call(&self, fun: naga::AtomicFunction, s: Scalar, p: &str, v: &str) -> String {
        use naga::AtomicFunction as A;
        let sfx = match (s.kind, s.width) {
            (ScalarKind::Uint, 8) => "u64",
            (_, 8) => "i64",
            (ScalarKind::Uint, _) => "u32",
            _ => "i32",
        };
        if s.width == 8 && matches!(self.d, Dialect::CudaC | Dialect::HipC) {
            // 64-bit atomics exist on `unsigned long long` (and min/max on `long long`);
            // subtraction is an addition of the negation.
            let t = if s.kind == ScalarKind::Uint { "xh_u64" } else { "xh_i64" };
            let (name, value) = match fun {
                A::Add => ("atomicAdd", format!("(xh_u64)({v})")),
                A::Subtract => ("atomicAdd", format!("(xh_u64)0 - (xh_u64)({v})")),
                A::And => ("atomicAnd", format!("(xh_u64)({v})")),
                A::InclusiveOr => ("atomicOr", format!("(xh_u64)({v})")),
                A::ExclusiveOr => ("atomicXor", format!("(xh_u64)({v})")),
                A::Min => return format!("atomicMin({p}, {v})"),
                A::Max => return format!("atomicMax({p}, {v})"),
                A::Exchange { .. } => ("atomicExch", format!("(xh_u64)({v})")),
            };
            return format!("(({t}){name}((xh_u64*){p}, {value}))");
        }
        match self.d {
            Dialect::HostC => match fun {
                A::Add => format!("__atomic_fetch_add({p}, {v}, __ATOMIC_RELAXED)"),
                A::Subtract => format!("__atomic_fetch_sub({p}, {v}, __ATOMIC_RELAXED)"),
                A::And => format!("__atomic_fetch_and({p}, {v}, __ATOMIC_RELAXED)"),
                A::InclusiveOr => format!("__atomic_fetch_or({p}, {v}, __ATOMIC_RELAXED)"),
                A::ExclusiveOr => format!("__atomic_fetch_xor({p}, {v}, __ATOMIC_RELAXED)"),
                A::Min => format!("xh_atomic_min_{sfx}({p}, {v})"),
                A::Max => format!("xh_atomic_max_{sfx}({p}, {v})"),
                A::Exchange { .. } => format!("__atomic_exchange_n({p}, {v}, __ATOMIC_RELAXED)"),
            },
            Dialect::CudaC | Dialect::HipC => {
                let name = match fun {
                    A::Add => "atomicAdd",
                    A::Subtract => "atomicSub",
                    A::And => "atomicAnd",
                    A::InclusiveOr => "atomicOr",
                    A::ExclusiveOr => "atomicXor",
                    A::Min => "atomicMin",
                    A::Max => "atomicMax",
                    A::Exchange { .. } => "atomicExch",
                };
                format!("{name}({p}, {v})")
            }
            Dialect::OpenclC if s.width == 8 => {
                // cl_khr_int64_base_atomics and cl_khr_int64_extended_atomics (min, max and
                // the bitwise operations), on `long` and `ulong`.
                let name = match fun {
                    A::Add => "atom_add",
                    A::Subtract => "atom_sub",
                    A::And => "atom_and",
                    A::InclusiveOr => "atom_or",
                    A::ExclusiveOr => "atom_xor",
                    A::Min => "atom_min",
                    A::Max => "atom_max",
                    A::Exchange { .. } => "atom_xchg",
                };
                format!("{name}({p}, {v})")
            }
            Dialect::OpenclC => {
                let name = match fun {
                    A::Add => "atomic_add",
                    A::Subtract => "atomic_sub",
                    A::And => "atomic_and",
                    A::InclusiveOr => "atomic_or",
                    A::ExclusiveOr => "atomic_xor",
                    A::Min => "atomic_min",
                    A::Max => "atomic_max",
                    A::Exchange { .. } => "atomic_xchg",
                };
                format!("{name}({p}, {v})")
            }
        }
    }

    fn write_function(
        &self,
        f: &Function,
        fi: &FunctionInfo,
        name: String,
        entry: bool,
        sites: Option<&[IndexSite]>,
    ) -> Res<String> {
        let mut fx = Fx {
            f,
            fi,
            baked: HashMap::new(),
            locals: HashMap::new(),
            args: Vec::new(),
            entry,
            indent: 1,
            wg: None,
            unchecked: sites.is_some(),
            sites: sites
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(k, &(index, c))| (index, (k, c)))
                .collect(),
        };
        let mut params = vec!["xh_ctx* ctx".to_owned()];
        for (i, arg) in f.arguments.iter().enumerate() {
            let an = format!("a_{}{i}", ident(arg.name.as_deref(), "arg"));
            let decl = match &self.m.types[arg.ty].inner {
                TypeInner::Pointer { base, space } => {
                    let q = match space {
                        AddressSpace::Storage { .. } => "XH_GLOBAL ",
                        AddressSpace::WorkGroup => "XH_LOCAL ",
                        _ => "",
                    };
                    format!("{q}{}* {an}", self.type_name(*base)?)
                }
                _ => format!("{} {an}", self.type_name(arg.ty)?),
            };
            params.push(decl);
            fx.args.push(an);
        }
        if fx.unchecked {
            params.push("const xh_u64* xh_site".to_owned());
            params.push("xh_u32 xh_li".to_owned());
        }
        let ret = match &f.result {
            Some(r) => self.type_name(r.ty)?,
            None => "void".to_owned(),
        };
        let mut body = String::new();
        for (h, local) in f.local_variables.iter() {
            let ln = format!("{}_l{}", ident(local.name.as_deref(), "local"), h.index());
            let init = match local.init {
                Some(e) => self.expr(&fx, e)?,
                None => self.zero_of(local.ty)?,
            };
            let _ = writeln!(body, "    XH_UNUSED {} {ln} = {init};", self.type_name(local.ty)?);
            fx.locals.insert(h, ln);
        }
        self.block(&mut fx, &f.body, &mut body)?;
        Ok(format!("XH_FN {ret} {name}({}) {{\n{body}}}\n", params.join(", ")))
    }

    fn pad(fx: &Fx) -> String {
        "    ".repeat(fx.indent)
    }

    fn block(&self, fx: &mut Fx, block: &Block, out: &mut String) -> Res<()> {
        for (s, span) in block.span_iter() {
            self.statement(fx, s, *span, out)?;
        }
        Ok(())
    }

    fn bake(&self, fx: &mut Fx, h: Handle<Expression>, value: String, out: &mut String) -> Res<()> {
        let t = self.res_name(&fx.fi[h].ty).map_err(|e| self.relocate(fx, h, e))?;
        let name = match fx.f.named_expressions.get(&h) {
            Some(n) => format!("{}_e{}", ident(Some(n), "e"), h.index()),
            None => format!("e{}", h.index()),
        };
        let (lhs, name) = self.define(fx, h, name, &t);
        let _ = writeln!(out, "{}{lhs} = {value};", Self::pad(fx));
        fx.baked.insert(h, name);
        Ok(())
    }

    /// Where the value of expression `h` (C type `t`) goes: the assignment's left side and
    /// the name later uses read. In workgroup mode a value used outside its region lives in
    /// the frame, one element per invocation.
    fn define(&self, fx: &Fx, h: Handle<Expression>, name: String, t: &str) -> (String, String) {
        if let Some(wg) = &fx.wg {
            wg.expr_def.borrow_mut().insert(h, wg.region.get());
            if wg.private_exprs.contains(&h) {
                let slot = if wg.uniform.exprs.contains(&h) {
                    wg.frame.borrow_mut().push(format!("{t} {name};"));
                    format!("F->{name}")
                } else {
                    wg.frame.borrow_mut().push(format!("{t} {name}[{}];", wg.size));
                    format!("F->{name}[li]")
                };
                return (slot.clone(), slot);
            }
        }
        (format!("XH_UNUSED {t} {name}"), name)
    }

    fn barrier(&self, flags: naga::Barrier, control: bool) -> Res<String> {
        Ok(match self.d {
            // The runner provides the barrier: it runs the invocations of a workgroup so that
            // they can wait for each other (threads or fibers).
            // Host C meets the barriers of an entry point by splitting it into regions (see
            // `Wg`); a barrier anywhere else cannot be split there.
            Dialect::HostC if control => {
                return Err(self.unsupported("a workgroup barrier inside a function the entry point calls"))
            }
            Dialect::HostC => "__atomic_thread_fence(__ATOMIC_SEQ_CST);".to_owned(),
            Dialect::CudaC | Dialect::HipC => {
                if control {
                    "__syncthreads();".to_owned()
                } else if flags.contains(naga::Barrier::STORAGE) {
                    "__threadfence();".to_owned()
                } else {
                    "__threadfence_block();".to_owned()
                }
            }
            Dialect::OpenclC => {
                let mut f = Vec::new();
                if flags.contains(naga::Barrier::WORK_GROUP) || flags.is_empty() {
                    f.push("CLK_LOCAL_MEM_FENCE");
                }
                if flags.contains(naga::Barrier::STORAGE) {
                    f.push("CLK_GLOBAL_MEM_FENCE");
                }
                if f.is_empty() {
                    f.push("CLK_LOCAL_MEM_FENCE");
                }
                if control {
                    format!("barrier({});", f.join(" | "))
                } else {
                    format!("mem_fence({});", f.join(" | "))
                }
            }
        })
    }

    fn statement(&self, fx: &mut Fx, s: &Statement, span: naga::Span, out: &mut String) -> Res<()> {
        let pad = Self::pad(fx);
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    if self.is_pointer(fx, h) {
                        continue;
                    }
                    let v = self.expr(fx, h)?;
                    self.bake(fx, h, v, out)?;
                }
            }
            Statement::Block(b) => {
                let _ = writeln!(out, "{pad}{{");
                fx.indent += 1;
                self.block(fx, b, out)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, *condition)?;
                let _ = writeln!(out, "{pad}if ({c}) {{");
                fx.indent += 1;
                self.block(fx, accept, out)?;
                fx.indent -= 1;
                if reject.is_empty() {
                    let _ = writeln!(out, "{pad}}}");
                } else {
                    let _ = writeln!(out, "{pad}}} else {{");
                    fx.indent += 1;
                    self.block(fx, reject, out)?;
                    fx.indent -= 1;
                    let _ = writeln!(out, "{pad}}}");
                }
            }
            Statement::Switch { selector, cases } => {
                let sel = self.expr(fx, *selector)?;
                let _ = writeln!(out, "{pad}switch ({sel}) {{");
                for case in cases {
                    let label = match case.value {
                        naga::SwitchValue::I32(v) => format!("case {}:", self.literal(&Literal::I32(v))?),
                        naga::SwitchValue::U32(v) => format!("case {v}u:"),
                        naga::SwitchValue::Default => "default:".to_owned(),
                    };
                    let _ = writeln!(out, "{pad}{label} {{");
                    fx.indent += 1;
                    self.block(fx, &case.body, out)?;
                    fx.indent -= 1;
                    if case.fall_through {
                        let _ = writeln!(out, "{pad}}}");
                    } else {
                        let _ = writeln!(out, "{pad}}} break;");
                    }
                }
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                // Host C: a launch past its time limit is cancelled, and every loop leaves at
                // its next iteration, so that a runaway kernel ends.
                let cancel = if self.d == Dialect::HostC {
                    format!("{pad}    if (__atomic_load_n(ctx->cancel_, __ATOMIC_RELAXED)) break;\n")
                } else {
                    String::new()
                };
                if continuing.is_empty() && break_if.is_none() {
                    let _ = writeln!(out, "{pad}for (;;) {{");
                    out.push_str(&cancel);
                    fx.indent += 1;
                    self.block(fx, body, out)?;
                    fx.indent -= 1;
                    let _ = writeln!(out, "{pad}}}");
                } else {
                    let gate = format!("loop_init{}", out.len());
                    let _ = writeln!(out, "{pad}{{ xh_bool {gate} = true;");
                    let _ = writeln!(out, "{pad}for (;;) {{");
                    let _ = writeln!(out, "{pad}    if (!{gate}) {{");
                    fx.indent += 2;
                    self.block(fx, continuing, out)?;
                    if let Some(b) = break_if {
                        let c = self.expr(fx, *b)?;
                        let _ = writeln!(out, "{}if ({c}) {{ break; }}", Self::pad(fx));
                    }
                    fx.indent -= 2;
                    let _ = writeln!(out, "{pad}    }}");
                    let _ = writeln!(out, "{pad}    {gate} = false;");
                    out.push_str(&cancel);
                    fx.indent += 1;
                    self.block(fx, body, out)?;
                    fx.indent -= 1;
                    let _ = writeln!(out, "{pad}}} }}");
                }
            }
            Statement::Break => {
                let _ = writeln!(out, "{pad}break;");
            }
            Statement::Continue => {
                let _ = writeln!(out, "{pad}continue;");
            }
            Statement::Return { .. } if fx.wg.as_ref().is_some_and(|wg| wg.region.get() != CONTROL) => {
                // An invocation that returns inside a region is done: later regions skip it.
                let wg = fx.wg.as_ref().expect("workgroup mode");
                wg.region_returns.set(true);
                if wg.tail_region.get() {
                    // Nothing runs after the last region: this invocation is simply done.
                    let _ = writeln!(out, "{pad}goto xh_r{}_end;", wg.region.get());
                } else {
                    wg.any_returns.set(true);
                    let _ = writeln!(
                        out,
                        "{pad}{{ F->done_[li] = 1; xh_live--; goto xh_r{}_end; }}",
                        wg.region.get()
                    );
                }
            }
            Statement::Return { value } => match value {
                Some(v) if !fx.entry => {
                    let v = self.expr(fx, *v)?;
                    let _ = writeln!(out, "{pad}return {v};");
                }
                _ => {
                    let _ = writeln!(out, "{pad}return;");
                }
            },
            Statement::Kill => return Err(self.unsupported_at("`discard`", span)),
            Statement::ControlBarrier(flags) => {
                let b = self.barrier(*flags, true)?;
                let _ = writeln!(out, "{pad}{b}");
            }
            Statement::MemoryBarrier(flags) => {
                let b = self.barrier(*flags, false)?;
                let _ = writeln!(out, "{pad}{b}");
            }
            Statement::Store { pointer, value } => {
                let lv = self.lvalue(fx, *pointer)?;
                let v = self.expr(fx, *value)?;
                match self.pointee(fx, *pointer) {
                    TypeInner::Atomic(s) => {
                        let call = match self.d {
                            Dialect::HostC => format!("__atomic_store_n(&{lv}, {v}, __ATOMIC_RELAXED)"),
                            Dialect::CudaC | Dialect::HipC if s.width == 8 => {
                                format!("(void)atomicExch((xh_u64*)&{lv}, (xh_u64)({v}))")
                            }
                            Dialect::CudaC | Dialect::HipC => format!("(void)atomicExch(&{lv}, {v})"),
                            Dialect::OpenclC if s.width == 8 => format!("(void)atom_xchg(&{lv}, {v})"),
                            Dialect::OpenclC => format!("(void)atomic_xchg(&{lv}, {v})"),
                        };
                        let _ = writeln!(out, "{pad}{call};");
                    }
                    _ => {
                        // A store to a buffer leaves the padding of the stored value's structs,
                        // padded array elements and matrix columns alone, as WGSL says.
                        let padded = match (self.ty(fx, *pointer), self.pointee_handle(fx, *pointer)) {
                            (
                                TypeInner::Pointer {
                                    space: AddressSpace::Storage { .. },
                                    ..
                                },
                                Some(ty),
                            ) if self.has_padding(ty) => Some(ty),
                            _ => None,
                        };
                        match padded {
                            Some(ty) => {
                                let mut counter = 0;
                                let text = self.padded_store(&lv, &v, ty, &mut counter)?;
                                let _ = writeln!(out, "{pad}{text}");
                            }
                            None => {
                                let _ = writeln!(out, "{pad}{lv} = {v};");
                            }
                        }
                    }
                }
            }
            Statement::Atomic {
                pointer,
                fun,
                value,
                result,
            } => {
                let lv = self.lvalue(fx, *pointer)?;
                let v = self.expr(fx, *value)?;
                let s = match self.pointee(fx, *pointer) {
                    TypeInner::Atomic(s) => s,
                    _ => return Err(self.unsupported_at("this atomic operation", span)),
                };
                let p = format!("&{lv}");
                if let naga::AtomicFunction::Exchange { compare: Some(cmp) } = fun {
                    let c = self.expr(fx, *cmp)?;
                    let r = result.ok_or_else(|| self.unsupported_at("this atomic operation", span))?;
                    let t = self.res_name(&fx.fi[r].ty)?;
                    let rt = match &fx.fi[r].ty {
                        TypeResolution::Handle(h) => *h,
                        _ => return Err(self.unsupported_at("this atomic operation", span)),
                    };
                    let names = &self.members[&rt];
                    let st = self.inner_name(&TypeInner::Scalar(s))?;
                    let zero = if matches!(self.d, Dialect::CudaC | Dialect::HipC) {
                        "{}"
                    } else {
                        "{0}"
                    };
                    let (lhs, name) = self.define(fx, r, format!("e{}", r.index()), &t);
                    if lhs != name {
                        let _ = writeln!(out, "{pad}{lhs} = {zero};");
                    }
                    let body = match self.d {
                        Dialect::HostC => format!(
                            "{st} expected = {c}; {name}.{ex} = __atomic_compare_exchange_n({p}, &expected, {v}, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED); {name}.{old} = expected;",
                            ex = names[1],
                            old = names[0]
                        ),
                        Dialect::CudaC | Dialect::HipC => format!(
                            "{st} expected = {c}; {name}.{old} = ({st})atomicCAS({cp}, ({ct})expected, ({ct})({v})); {name}.{ex} = {name}.{old} == expected;",
                            cp = if s.width == 8 { format!("(xh_u64*){p}") } else { p.clone() },
                            ct = if s.width == 8 { "xh_u64".to_owned() } else { st.clone() },
                            ex = names[1],
                            old = names[0]
                        ),
                        Dialect::OpenclC => format!(
                            "{st} expected = {c}; {name}.{old} = {f}({p}, expected, {v}); {name}.{ex} = {name}.{old} == expected;",
                            f = if s.width == 8 { "atom_cmpxchg" } else { "atomic_cmpxchg" },
                            ex = names[1],
                            old = names[0]
                        ),
                    };
                    let _ = writeln!(out, "{pad}{{ {body} }}");
                    fx.baked.insert(r, name);
                } else {
                    let call = self.atomic_call(*fun, s, &p, &v);
                    match result {
                        Some(r) => {
                            let t = self.res_name(&fx.fi[*r].ty)?;
                            let (lhs, name) = self.define(fx, *r, format!("e{}", r.index()), &t);
                            let _ = writeln!(out, "{pad}{lhs} = {call};");
                            fx.baked.insert(*r, name);
                        }
                        None => {
                            let _ = writeln!(out, "{pad}(void){call};");
                        }
                    }
                }
            }
            Statement::WorkGroupUniformLoad { pointer, result } => {
                // In host C's workgroup mode the barriers are the region boundaries around
                // this statement, which then runs as a region of its own.
                let b = if fx.wg.is_some() {
                    String::new()
                } else {
                    self.barrier(naga::Barrier::WORK_GROUP, true)?
                };
                let lv = self.lvalue(fx, *pointer)?;
                let t = self.res_name(&fx.fi[*result].ty)?;
                let (lhs, name) = self.define(fx, *result, format!("e{}", result.index()), &t);
                let _ = writeln!(out, "{pad}{b}\n{pad}{lhs} = {lv};\n{pad}{b}");
                fx.baked.insert(*result, name);
            }
            Statement::Call {
                function,
                arguments,
                result,
            } => {
                let mut args = vec!["ctx".to_owned()];
                for &a in arguments {
                    if self.is_pointer(fx, a) {
                        args.push(format!("&{}", self.lvalue(fx, a)?));
                    } else {
                        args.push(self.expr(fx, a)?);
                    }
                }
                let call = format!("{}({})", self.functions[function], args.join(", "));
                match result {
                    Some(r) => {
                        let t = self.res_name(&fx.fi[*r].ty)?;
                        let (lhs, name) = self.define(fx, *r, format!("e{}", r.index()), &t);
                        let _ = writeln!(out, "{pad}{lhs} = {call};");
                        fx.baked.insert(*r, name);
                    }
                    None => {
                        let _ = writeln!(out, "{pad}{call};");
                    }
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

    /// The kernel (or, in host C, the one-invocation function) for entry point `i`.
    fn write_wrapper(&self, out: &mut String, i: usize, inner: &str, uses_len: bool) -> Res<CEntryPoint> {
        let m = self.m;
        let ep = &m.entry_points[i];
        let fi = self.info.get_entry_point(i);
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]);
        let name = &c_symbol(&ep.name);
        let mut buffers: Vec<(u32, Handle<naga::GlobalVariable>)> = Vec::new();
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
                AddressSpace::WorkGroup => workgroup.push(g),
                AddressSpace::Private => private.push(g),
                _ => {}
            }
        }
        buffers.sort();
        let mut params = Vec::new();
        let mut setup = String::new();
        for (k, (binding, g)) in buffers.iter().enumerate() {
            if *binding as usize != k {
                return Err(KernelError::new(
                    KernelErrorKind::Reflection,
                    format!("entry point `{name}`: buffer bindings are not 0..n"),
                ));
            }
            let var = &m.global_variables[*g];
            let elem = match self.array_of(var.ty) {
                Some((repr, true)) => repr.elem,
                _ => self.type_name(var.ty)?,
            };
            params.push(format!("XH_GLOBAL {elem}* buffer{k}"));
            let _ = writeln!(setup, "    c.{} = buffer{k};", self.globals[g]);
        }
        if let Some(g) = immediate {
            params.push(format!("{} scalars", self.type_name(m.global_variables[g].ty)?));
            let _ = writeln!(setup, "    c.{} = scalars;", self.globals[&g]);
        }
        if uses_len {
            let lt = format!("xh_lengths_{}", ident(Some(name), "entry"));
            let _ = writeln!(
                out,
                "typedef struct {lt} {{ xh_u64 bytes[{}]; }} {lt};",
                buffers.len().max(1)
            );
            params.push(format!("{lt} lengths"));
            let _ = writeln!(
                setup,
                "    {{ int k; for (k = 0; k < {}; k++) c.len_[k] = lengths.bytes[k]; }}",
                buffers.len()
            );
            for (k, (_, g)) in buffers.iter().enumerate() {
                if let Some((header, stride)) = self.runtime_array_of(m.global_variables[*g].ty) {
                    let _ = writeln!(
                        setup,
                        "    c.n_[{k}] = xh_array_length(lengths.bytes[{k}], {header}u, {stride}u);"
                    );
                }
            }
        }
        let mut private_init = String::new();
        for &g in &private {
            let var = &m.global_variables[g];
            let init = match var.init {
                Some(e) => self.const_expr(e)?,
                None => self.zero_of(var.ty)?,
            };
            let _ = writeln!(private_init, "    c.{} = {init};", self.globals[&g]);
        }
        if self.d == Dialect::HostC {
            return self.write_host_wrapper(
                out,
                HostWrapper {
                    index: i,
                    inner,
                    params,
                    setup,
                    private_init,
                    workgroup: &workgroup,
                    buffers: buffers.len() as u32,
                    scalar_block: immediate.is_some(),
                    uses_len,
                },
            );
        }
        setup.push_str(&private_init);
        // Built-ins.
        let (lid, wid, nwg): ([String; 3], [String; 3], [String; 3]) = match self.d {
            Dialect::OpenclC => (
                [0, 1, 2].map(|k| format!("(xh_u32)get_local_id({k})")),
                [0, 1, 2].map(|k| format!("(xh_u32)get_group_id({k})")),
                [0, 1, 2].map(|k| format!("(xh_u32)get_num_groups({k})")),
            ),
            _ => (
                ["threadIdx.x", "threadIdx.y", "threadIdx.z"].map(|s| format!("(xh_u32){s}")),
                ["blockIdx.x", "blockIdx.y", "blockIdx.z"].map(|s| format!("(xh_u32){s}")),
                ["gridDim.x", "gridDim.y", "gridDim.z"].map(|s| format!("(xh_u32){s}")),
            ),
        };
        let _ = writeln!(
            setup,
            "    XH_UNUSED xh_u32x3 lid = xh_make_xh_u32x3({}, {}, {});\n    XH_UNUSED xh_u32x3 wid = xh_make_xh_u32x3({}, {}, {});\n    XH_UNUSED xh_u32x3 nwg = xh_make_xh_u32x3({}, {}, {});",
            lid[0], lid[1], lid[2], wid[0], wid[1], wid[2], nwg[0], nwg[1], nwg[2]
        );
        let _ = writeln!(
            setup,
            "    XH_UNUSED xh_u32x3 gid = xh_make_xh_u32x3(wid.x * {}u + lid.x, wid.y * {}u + lid.y, wid.z * {}u + lid.z);\n    XH_UNUSED xh_u32 lidx = lid.z * {}u + lid.y * {}u + lid.x;",
            wg[0], wg[1], wg[2], wg[0].wrapping_mul(wg[1]), wg[0]
        );
        // Workgroup memory, zeroed by all invocations together, then a barrier.
        let mut workgroup_bytes = 0u64;
        if !workgroup.is_empty() {
            let q = if self.d == Dialect::OpenclC {
                "__local"
            } else {
                "__shared__"
            };
            for &g in &workgroup {
                let gn = &self.globals[&g];
                let _ = writeln!(setup, "    {q} {} wg_{gn};", self.type_name(m.global_variables[g].ty)?);
                let _ = writeln!(setup, "    c.{gn} = &wg_{gn};");
                let _ = writeln!(
                    setup,
                    "    {{ XH_LOCAL unsigned char* zp = (XH_LOCAL unsigned char*)&wg_{gn}; xh_u32 zi; for (zi = lidx; zi < (xh_u32)sizeof(wg_{gn}); zi += {total}u) zp[zi] = 0; }}"
                );
                workgroup_bytes += u64::from(self.c_size(m.global_variables[g].ty));
            }
            let b = self.barrier(naga::Barrier::WORK_GROUP, true)?;
            let _ = writeln!(setup, "    {b}");
        }
        // Arguments of the entry point.
        let mut call_args = vec!["&c".to_owned()];
        for arg in &ep.function.arguments {
            call_args.push(self.builtin_name(arg, name)?.to_owned());
        }
        match self.d {
            Dialect::OpenclC => {
                let _ = writeln!(
                    out,
                    "__kernel __attribute__((reqd_work_group_size({}, {}, {}))) void {name}({}) {{",
                    wg[0],
                    wg[1],
                    wg[2],
                    params.join(", ")
                );
                let _ = writeln!(out, "    xh_ctx c = {{0}};");
            }
            _ => {
                // CUDA and HIP kernels carry no workgroup size a runtime reports: the marker
                // (empty once preprocessed) states it for a backend reading the source, and
                // `__launch_bounds__` lets the compiler budget registers for it.
                let _ = writeln!(
                    out,
                    "XH_WORKGROUP_SIZE({}, {}, {}) extern \"C\" __global__ void __launch_bounds__({}) {name}({}) {{",
                    wg[0],
                    wg[1],
                    wg[2],
                    wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]),
                    params.join(", ")
                );
                let _ = writeln!(out, "    xh_ctx c = {{}};");
            }
        }
        out.push_str(&setup);
        let _ = writeln!(out, "    {inner}({});\n}}", call_args.join(", "));
        Ok(CEntryPoint {
            name: ep.name.clone(),
            symbol: name.clone(),
            buffers: buffers.len() as u32,
            scalar_block: immediate.is_some(),
            buffer_lengths: uses_len,
            workgroup_size: wg,
            workgroup_bytes,
            barriers: false,
        })
    }
}

/// What the first workgroup-mode pass decided for the second.
#[derive(Default)]
struct Decided {
    private_exprs: HashSet<Handle<Expression>>,
    private_locals: HashSet<Handle<naga::LocalVariable>>,
    /// The regions each local is used in (it is a C local of each).
    local_uses: HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>,
    done_flags: bool,
}

/// The outcome of one workgroup-mode pass.
struct WgPass {
    body: String,
    done_flags: bool,
    expr_def: RefCell<HashMap<Handle<Expression>, usize>>,
    expr_uses: RefCell<HashMap<Handle<Expression>, BTreeSet<usize>>>,
    local_uses: RefCell<HashMap<Handle<naga::LocalVariable>, BTreeSet<usize>>>,
    loop_regions: BTreeSet<usize>,
    private_ctx: bool,
    wg: Option<Wg>,
}

/// What every region's loop body starts with: the context and built-ins of invocation `li`,
/// and the locals used in that region only.
/// An index into a runtime-sized array that is `base + c * li` in the invocation index
/// `li`: the index expression and `c`.
type IndexSite = (Handle<Expression>, i64);

/// A local a region declares.
struct RegionLocal {
    local: Handle<naga::LocalVariable>,
    /// Whether it has one frame slot for the whole workgroup (a uniform local that lives
    /// across regions).
    shared: bool,
    /// Its C type and name.
    ty: String,
    name: String,
    /// What it starts as in each invocation: its frame slot, or its initial value.
    start: String,
}

struct RegionPrologue {
    common: String,
    /// Each region's locals: the local, whether it is one slot for the workgroup (which a
    /// region that does not store to it loads once, before its loop), and its declaration.
    locals: HashMap<usize, Vec<RegionLocal>>,
    /// What each region's loop body ends with: privatised locals stored back.
    writeback: HashMap<usize, Vec<(Handle<naga::LocalVariable>, String)>>,
}

/// What [`Writer::write_host_wrapper`] needs from the shared part of the wrapper.
struct HostWrapper<'w> {
    index: usize,
    inner: &'w str,
    params: Vec<String>,
    /// Sets the context's buffers, scalars and lengths from the parameters.
    setup: String,
    /// Sets the private globals to their initial values (once per invocation).
    private_init: String,
    workgroup: &'w [Handle<naga::GlobalVariable>],
    buffers: u32,
    scalar_block: bool,
    uses_len: bool,
}

impl Writer<'_> {
    /// Host C's exported function for an entry point: it runs one whole workgroup.
    ///
    /// ```c
    /// void NAME(buffers..., [scalars], [lengths], const xhal_workgroup* group, void* scratch);
    /// ```
    ///
    /// `scratch` points to `NAME__scratch_bytes` bytes (aligned to 64) that the function owns
    /// for the call: workgroup memory (zeroed here) and, for an entry point with barriers,
    /// the frame of per-invocation values. Without barriers the invocations run one after
    /// another, which is one of the orders WGSL allows; with barriers the entry point was
    /// written in regions (see `Wg`).
    fn write_host_wrapper(&self, out: &mut String, w: HostWrapper<'_>) -> Res<CEntryPoint> {
        let m = self.m;
        let ep = &m.entry_points[w.index];
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]);
        let name = &c_symbol(&ep.name);
        let tag = ident(Some(name), "entry");
        let barriers = self.wg_entries.contains(&w.index);
        let mut workgroup_bytes = 0u64;
        let mut scratch_fields = String::new();
        let mut setup = w.setup;
        if !w.workgroup.is_empty() {
            let wt = format!("xh_wgmem_{tag}");
            let mut fields = String::new();
            for &g in w.workgroup {
                let _ = write!(
                    fields,
                    " {} {};",
                    self.type_name(m.global_variables[g].ty)?,
                    self.globals[&g]
                );
                workgroup_bytes += u64::from(self.c_size(m.global_variables[g].ty));
            }
            let _ = writeln!(out, "typedef struct {wt} {{{fields} }} {wt};");
            let _ = write!(scratch_fields, " {wt} wg;");
            for &g in w.workgroup {
                let _ = writeln!(setup, "    c.{0} = &S->wg.{0};", self.globals[&g]);
            }
            setup.push_str("    memset(&S->wg, 0, sizeof S->wg);\n");
        }
        if barriers {
            let _ = write!(scratch_fields, " xh_frame_{tag} frame;");
        }
        if scratch_fields.is_empty() {
            scratch_fields.push_str(" char unused_;");
        }
        let st = format!("xh_scratch_{tag}");
        let _ = writeln!(out, "typedef struct {st} {{{scratch_fields} }} {st};");
        let _ = writeln!(
            out,
            "const uint32_t {name}__workgroup_size[3] = {{{}u, {}u, {}u}};",
            wg[0], wg[1], wg[2]
        );
        let _ = writeln!(out, "const size_t {name}__workgroup_bytes = {workgroup_bytes};");
        let _ = writeln!(out, "const size_t {name}__scratch_bytes = sizeof({st});");
        let mut params = w.params;
        params.push("const xhal_workgroup* group".to_owned());
        params.push("void* scratch".to_owned());
        // The body is static and the exported functions call it, so that a call never
        // binds to a same-named symbol of another library in the process (libc has `step`).
        let body_fn = format!("xh_entry_{tag}");
        let _ = writeln!(out, "static void {body_fn}({}) {{", params.join(", "));
        let _ = writeln!(
            out,
            "    xh_ctx c;\n    XH_UNUSED {st}* S = ({st}*)scratch;\n    memset(&c, 0, sizeof c);\n    c.cancel_ = group->cancel;"
        );
        out.push_str(&setup);
        let _ = writeln!(
            out,
            "    XH_UNUSED xh_u32x3 wid = xh_make_xh_u32x3(group->workgroup_id[0], group->workgroup_id[1], group->workgroup_id[2]);\n    XH_UNUSED xh_u32x3 nwg = xh_make_xh_u32x3(group->num_workgroups[0], group->num_workgroups[1], group->num_workgroups[2]);"
        );
        if barriers {
            out.push_str(&w.private_init);
            let _ = writeln!(out, "    {}(&S->frame, &c, wid, nwg);", w.inner);
            if self.wg_private_ctx.contains(&w.index) {
                let _ = writeln!(
                    out,
                    "    {{ xh_u32 li; for (li = 0; li < {total}u; li++) c.oob_ |= S->frame.c[li].oob_; }}"
                );
            }
            out.push_str("    if (c.oob_) __atomic_store_n(group->out_of_bounds, 1u, __ATOMIC_RELAXED);\n}\n");
        } else {
            let mut call_args = vec!["&c".to_owned()];
            for arg in &ep.function.arguments {
                call_args.push(self.builtin_name(arg, name)?.to_owned());
            }
            let run = |function: &str, fast: bool| {
                let mut text = "    { XH_UNUSED xh_u32 li, lx, ly, lz;\n".to_owned();
                text.push_str(&Self::invocation_loop(wg, "    "));
                for line in w.private_init.lines() {
                    let _ = writeln!(text, "    {line}");
                }
                text.push_str(&self.builtins_of_li(wg, "        ", true));
                let fast_args = if fast { ", xh_site, li" } else { "" };
                let _ = writeln!(
                    text,
                    "        {function}({}{fast_args});\n    }} }}",
                    call_args.join(", ")
                );
                text
            };
            if let Some(&bases) = self.fast_entries.get(&w.index) {
                // Every index into a runtime-sized array stays in bounds for this workgroup:
                // the body without the checks runs (the C compiler can vectorise it).
                let _ = writeln!(
                    out,
                    "    xh_u64 xh_site[{}] = {{0}};\n    if ({}_inbounds(&c, wid, nwg, xh_site)) {{",
                    bases.max(1),
                    w.inner
                );
                out.push_str(&run(&format!("{}_fast", w.inner), true));
                out.push_str("    } else {\n");
                out.push_str(&run(w.inner, false));
                out.push_str("    }\n");
            } else {
                out.push_str(&run(w.inner, false));
            }
            out.push_str("    if (c.oob_) __atomic_store_n(group->out_of_bounds, 1u, __ATOMIC_RELAXED);\n}\n");
        }
        let names: Vec<&str> = params
            .iter()
            .map(|param| param.rsplit(' ').next().unwrap_or_default())
            .collect();
        let _ = writeln!(
            out,
            "void {name}({0});\nvoid {name}({0}) {{\n    {body_fn}({1});\n}}",
            params.join(", "),
            names.join(", ")
        );
        // One signature for every entry point, so that a runner needs no per-kernel glue:
        // `NAME__launch(buffers, scalar bytes, byte lengths, group, scratch)`.
        let mut forwarded = Vec::new();
        let mut unpack = String::new();
        for (k, param) in params.iter().enumerate().take(w.buffers as usize) {
            let ty = param.strip_suffix(&format!(" buffer{k}")).unwrap_or(param);
            forwarded.push(format!("({ty})buffers[{k}]"));
        }
        for param in &params[w.buffers as usize..] {
            if let Some(ty) = param.strip_suffix(" scalars") {
                let _ = writeln!(unpack, "    {ty} s; memcpy(&s, scalars, sizeof s);");
                forwarded.push("s".to_owned());
            } else if let Some(ty) = param.strip_suffix(" lengths") {
                let _ = writeln!(unpack, "    {ty} l; memcpy(l.bytes, lengths, sizeof l.bytes);");
                forwarded.push("l".to_owned());
            }
        }
        forwarded.push("group".to_owned());
        forwarded.push("scratch".to_owned());
        let launch = format!(
            "void {name}__launch(void* const* buffers, const void* scalars, const uint64_t* lengths, const xhal_workgroup* group, void* scratch)"
        );
        let _ = writeln!(
            out,
            "{launch};\n{launch} {{\n    (void)buffers; (void)scalars; (void)lengths;\n{unpack}    {body_fn}({});\n}}",
            forwarded.join(", ")
        );
        Ok(CEntryPoint {
            name: ep.name.clone(),
            symbol: name.clone(),
            buffers: w.buffers,
            scalar_block: w.scalar_block,
            buffer_lengths: w.uses_len,
            workgroup_size: wg,
            workgroup_bytes,
            barriers,
        })
    }

    /// Host C for an entry point with barriers, in workgroup mode (see [`Wg`]): a function
    /// `inner(frame, ctx, wid, nwg)` that runs every invocation of one workgroup, preceded by
    /// the frame's type `xh_frame_NAME`.
    fn write_workgroup_function(&self, ep: &naga::EntryPoint, fi: &FunctionInfo, inner: &str) -> Res<String> {
        let size = ep.workgroup_size.iter().product::<u32>().max(1);
        let uniform = std::rc::Rc::new(super::uniform::analyze(self.m, &ep.function));
        let first = self.workgroup_pass(ep, fi, size, &uniform, None)?;
        let mut private_exprs = HashSet::new();
        for (h, uses) in first.expr_uses.borrow().iter() {
            let def = first.expr_def.borrow().get(h).copied().unwrap_or(CONTROL);
            if def == CONTROL || uses.iter().any(|&r| r != def) {
                private_exprs.insert(*h);
            }
        }
        let mut private_locals = HashSet::new();
        for (h, uses) in first.local_uses.borrow().iter() {
            let only = uses.iter().next().copied().unwrap_or(CONTROL);
            if uses.len() > 1 || only == CONTROL || first.loop_regions.contains(&only) {
                private_locals.insert(*h);
            }
        }
        let decided = Decided {
            private_exprs,
            private_locals,
            local_uses: first.local_uses.take(),
            done_flags: first.done_flags,
        };
        let second = self.workgroup_pass(ep, fi, size, &uniform, Some(decided))?;
        let tag = ident(Some(&c_symbol(&ep.name)), "entry");
        let wg = second.wg.as_ref().expect("workgroup mode");
        let mut frame = String::new();
        if second.private_ctx {
            let _ = write!(frame, " xh_ctx c[{size}];");
        }
        if wg.done_flags {
            let _ = write!(frame, " unsigned char done_[{size}];");
        }
        for member in wg.frame.borrow().iter() {
            let _ = write!(frame, " {member}");
        }
        if frame.is_empty() {
            frame.push_str(" char unused_;");
        }
        Ok(format!(
            "typedef struct xh_frame_{tag} {{{frame} }} xh_frame_{tag};\n\
             static void {inner}(xh_frame_{tag}* F, xh_ctx* proto, xh_u32x3 wid, xh_u32x3 nwg) {{\n\
             {}}}\n",
            second.body
        ))
    }

    /// One pass over an entry point in workgroup mode: the first (`decided` is `None`)
    /// records where values are defined and used, the second writes with its decisions.
    fn workgroup_pass(
        &self,
        ep: &naga::EntryPoint,
        fi: &FunctionInfo,
        size: u32,
        uniform: &std::rc::Rc<super::uniform::Uniform>,
        decided: Option<Decided>,
    ) -> Res<WgPass> {
        let f = &ep.function;
        let decided = decided.unwrap_or_default();
        let private_ctx = self
            .m
            .global_variables
            .iter()
            .any(|(g, var)| var.space == AddressSpace::Private && !fi[g].is_empty());
        let mut fx = Fx {
            f,
            fi,
            baked: HashMap::new(),
            locals: HashMap::new(),
            args: Vec::new(),
            entry: true,
            indent: 2,
            unchecked: false,
            sites: HashMap::new(),
            wg: Some(Wg {
                size,
                shape: ep.workgroup_size,
                uniform: std::rc::Rc::clone(uniform),
                region: Cell::new(CONTROL),
                next_region: 0,
                loop_regions: BTreeSet::new(),
                loop_depth: 0,
                expr_def: RefCell::new(HashMap::new()),
                expr_uses: RefCell::new(HashMap::new()),
                local_uses: RefCell::new(HashMap::new()),
                private_exprs: decided.private_exprs,
                frame: RefCell::new(Vec::new()),
                region_returns: Cell::new(false),
                any_returns: Cell::new(false),
                tail_region: Cell::new(false),
                done_flags: decided.done_flags,
            }),
        };
        let ctx = if private_ctx { "&F->c[li]" } else { "proto" };
        let mut prologue = format!("            XH_UNUSED xh_ctx* ctx = {ctx};\n");
        prologue.push_str(&self.builtins_of_li(ep.workgroup_size, "            ", true));
        for (i, arg) in f.arguments.iter().enumerate() {
            let an = format!("a_{}{i}", ident(arg.name.as_deref(), "arg"));
            let t = self.type_name(arg.ty)?;
            let _ = writeln!(
                prologue,
                "            XH_UNUSED {t} {an} = {};",
                self.builtin_name(arg, &ep.name)?
            );
            fx.args.push(an);
        }
        let mut init = String::new();
        if private_ctx {
            init.push_str("        F->c[li] = *proto;\n");
        }
        if decided.done_flags {
            init.push_str("        F->done_[li] = 0;\n");
        }
        // Every local is a C local of each region that uses it, where the C compiler can keep
        // it in a register; one that lives across regions is loaded from the frame at the
        // region's start and stored back at its end.
        let mut region_locals: HashMap<usize, Vec<RegionLocal>> = HashMap::new();
        let mut region_writeback: HashMap<usize, Vec<(Handle<naga::LocalVariable>, String)>> = HashMap::new();
        for (h, local) in f.local_variables.iter() {
            let ln = format!("{}_l{}", ident(local.name.as_deref(), "local"), h.index());
            let t = self.type_name(local.ty)?;
            let value = match local.init {
                Some(e) => self.expr(&fx, e)?,
                None => self.zero_of(local.ty)?,
            };
            let private = decided.private_locals.contains(&h);
            // A uniform local needs one slot for the workgroup.
            let slot = if uniform.locals.contains(&h) {
                format!("F->{ln}")
            } else {
                format!("F->{ln}[li]")
            };
            if private {
                let wg = fx.wg.as_ref().expect("workgroup mode");
                if uniform.locals.contains(&h) {
                    wg.frame.borrow_mut().push(format!("{t} {ln};"));
                } else {
                    wg.frame.borrow_mut().push(format!("{t} {ln}[{size}];"));
                }
                let _ = writeln!(init, "        {slot} = {value};");
            }
            for &region in decided.local_uses.get(&h).into_iter().flatten() {
                let start = region_locals.entry(region).or_default();
                start.push(RegionLocal {
                    local: h,
                    shared: private && uniform.locals.contains(&h),
                    ty: t.clone(),
                    name: ln.clone(),
                    start: if private { slot.clone() } else { value.clone() },
                });
                if private {
                    region_writeback
                        .entry(region)
                        .or_default()
                        .push((h, format!("    {slot} = {ln};")));
                }
            }
            fx.locals.insert(h, ln);
        }
        let mut body = format!(
            "    xh_u32 li;\n    XH_UNUSED xh_u32 lx = 0u, ly = 0u, lz = 0u;\n    XH_UNUSED xh_u32 xh_live = {size}u;\n    (void)wid; (void)nwg;\n"
        );
        if !init.is_empty() {
            let _ = write!(body, "    for (li = 0; li < {size}u; li++) {{\n{init}    }}\n");
        }
        let mut text = String::new();
        let prologue = RegionPrologue {
            common: prologue,
            locals: region_locals,
            writeback: region_writeback,
        };
        self.wg_block(&mut fx, &f.body, &mut text, false, &prologue)?;
        body.push_str(&text);
        let wg = fx.wg.take().expect("workgroup mode");
        Ok(WgPass {
            body,
            done_flags: wg.done_flags || wg.any_returns.get(),
            expr_def: RefCell::new(wg.expr_def.take()),
            expr_uses: RefCell::new(wg.expr_uses.take()),
            local_uses: RefCell::new(wg.local_uses.take()),
            loop_regions: wg.loop_regions.clone(),
            private_ctx,
            wg: Some(wg),
        })
    }

    /// Whether statement `s` must run at workgroup level: it holds a barrier, or it leaves
    /// (`break`, `continue`) a loop that does (`in_wg_loop`).
    /// `uniform` is the entry point's uniformity while the control flow around `s` is
    /// uniform, and `None` under a condition that is not.
    fn wg_needs_control(
        &self,
        uniform: Option<&super::uniform::Uniform>,
        s: &Statement,
        span: naga::Span,
        in_wg_loop: bool,
    ) -> Res<bool> {
        Ok(match s {
            Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. } => true,
            Statement::Block(b) => self.wg_block_needs_control(uniform, b, in_wg_loop)?,
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let inner = uniform.filter(|u| u.exprs.contains(condition));
                self.wg_block_needs_control(inner, accept, in_wg_loop)?
                    || self.wg_block_needs_control(inner, reject, in_wg_loop)?
            }
            Statement::Switch { cases, .. } => {
                let escapes = cases
                    .iter()
                    .any(|c| has_barrier(&c.body) || (in_wg_loop && has_continue(&c.body)));
                if escapes {
                    return Err(self.unsupported_at("a barrier (or a `continue` past one) inside a switch", span));
                }
                false
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                has_barrier(body)
                    || has_barrier(continuing)
                    || uniform.is_some_and(|u| uniform_trip_count(u, body, continuing, *break_if))
            }
            Statement::Break | Statement::Continue => in_wg_loop,
            _ => false,
        })
    }

    fn wg_block_needs_control(
        &self,
        uniform: Option<&super::uniform::Uniform>,
        block: &Block,
        in_wg_loop: bool,
    ) -> Res<bool> {
        for (s, span) in block.span_iter() {
            if self.wg_needs_control(uniform, s, *span, in_wg_loop)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A block at workgroup level: runs of ordinary statements become regions.
    fn wg_block(
        &self,
        fx: &mut Fx,
        block: &Block,
        out: &mut String,
        in_wg_loop: bool,
        prologue: &RegionPrologue,
    ) -> Res<()> {
        let mut pending: Vec<(&Statement, naga::Span)> = Vec::new();
        let body_end = std::ptr::eq(block, &fx.f.body) && matches!(block.last(), Some(Statement::Return { .. }));
        // Control at workgroup level is uniform (WGSL requires it around a barrier).
        let uniform = std::rc::Rc::clone(&fx.wg.as_ref().expect("workgroup mode").uniform);
        for (k, (s, span)) in block.span_iter().enumerate() {
            if body_end && k + 1 == block.len() {
                // The function's closing `return`: every invocation ends here anyway.
                break;
            }
            if self.wg_needs_control(Some(&uniform), s, *span, in_wg_loop)? {
                self.wg_region(fx, &pending, out, prologue, false)?;
                pending.clear();
                self.wg_statement(fx, s, *span, out, in_wg_loop, prologue)?;
            } else {
                pending.push((s, *span));
            }
        }
        // The body's last region: nothing runs after it, so a `return` in it needs no flag.
        let tail = std::ptr::eq(block, &fx.f.body);
        self.wg_region(fx, &pending, out, prologue, tail)
    }

    /// One region: `statements` for every invocation that has not returned.
    fn wg_region(
        &self,
        fx: &mut Fx,
        statements: &[(&Statement, naga::Span)],
        out: &mut String,
        prologue: &RegionPrologue,
        tail: bool,
    ) -> Res<()> {
        if statements.is_empty() {
            return Ok(());
        }
        let (region, done_flags) = {
            let wg = fx.wg.as_mut().expect("workgroup mode");
            let region = wg.next_region;
            wg.next_region += 1;
            wg.region.set(region);
            wg.region_returns.set(false);
            wg.tail_region.set(tail);
            if wg.loop_depth > 0 {
                wg.loop_regions.insert(region);
            }
            (region, wg.done_flags)
        };
        let pad = Self::pad(fx);
        let saved = fx.indent;
        fx.indent += 2;
        let mut inner = String::new();
        for (s, span) in statements {
            self.statement(fx, s, *span, &mut inner)?;
        }
        // Asked while the region is still the one being written, since naming the condition
        // counts as a use of it there.
        let prefix = self.prefix_guard(fx, statements)?;
        fx.indent = saved;
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let returns = wg.region_returns.get();
        wg.region.set(CONTROL);
        // A region that only computes uniform values runs once, as invocation 0.
        let once = !returns && statements.iter().all(|(s, _)| Self::uniform_only(fx, wg, s));
        let prefix = prefix.filter(|_| !once);
        let mut stored = HashSet::new();
        for (s, _) in statements {
            super::uniform::stored_locals(fx.f, s, &mut stored);
        }
        let locals = prologue.locals.get(&region).map(Vec::as_slice).unwrap_or_default();
        // A workgroup's value that the region runs per invocation is read once, before the
        // loop: reloaded in the loop, after stores the C compiler cannot tell apart from the
        // frame, it would cost a load per invocation and keep the loop from vectorising. And
        // when the region also stores it, every invocation must start from the value the
        // region started with, not from the previous invocation's result (a `ptr += 64u` or
        // `offset /= 2u` before a barrier would otherwise run once per invocation).
        let per_invocation = |local: &RegionLocal| !local.shared || once;
        let _ = writeln!(out, "{pad}{{ xh_u32 xh_oob = 0u;");
        for local in locals.iter().filter(|local| !per_invocation(local)) {
            let (ty, name, start) = (&local.ty, &local.name, &local.start);
            if stored.contains(&local.local) {
                let _ = writeln!(out, "{pad}    XH_UNUSED const {ty} {name}_start = {start};");
            } else {
                let _ = writeln!(out, "{pad}    XH_UNUSED {ty} {name} = {start};");
            }
        }
        if once {
            let _ = writeln!(out, "{pad}li = 0u; lx = 0u; ly = 0u; lz = 0u; {{");
        } else {
            out.push_str(&Self::invocation_loop(wg.shape, &pad));
        }
        if done_flags && !once {
            let _ = writeln!(out, "{pad}    if (F->done_[li]) continue;");
        }
        for line in prologue.common.lines() {
            let _ = writeln!(out, "{pad}{}", line.trim_start_matches("        "));
        }
        for local in locals {
            let (ty, name, start) = (&local.ty, &local.name, &local.start);
            if per_invocation(local) {
                let _ = writeln!(out, "{pad}        XH_UNUSED {ty} {name} = {start};");
            } else if stored.contains(&local.local) {
                let _ = writeln!(out, "{pad}        XH_UNUSED {ty} {name} = {name}_start;");
            }
        }
        out.push_str(&inner);
        if returns {
            let _ = writeln!(out, "{pad}    xh_r{region}_end: ;");
        }
        if let Some(lines) = prologue.writeback.get(&region) {
            // Only what the region may have changed: a store of a value every invocation
            // shares would keep the C compiler from vectorising the loop.
            for (local, line) in lines {
                if stored.contains(local) {
                    let _ = writeln!(out, "{pad}{line}");
                }
            }
        }
        if let Some(condition) = &prefix {
            let _ = writeln!(out, "{pad}    if (!({condition})) goto xh_r{region}_past;");
        }
        let _ = writeln!(out, "{pad}}}");
        if prefix.is_some() {
            let _ = writeln!(out, "{pad}xh_r{region}_past: ;");
        }
        let _ = writeln!(out, "{pad}proto->oob_ |= xh_oob; }}");
        if returns && !tail {
            let _ = writeln!(out, "{pad}if (xh_live == 0u) return;");
        }
        Ok(())
    }

    /// For a region that is only `if lane < n { ... }` (after expressions no later region
    /// reads), with `lane` the invocation index and `n` the same in every invocation, the
    /// condition: it holds for a prefix of the invocations, so the loop can stop at the
    /// first one it fails in. A tree reduction's steps then visit the `n` active
    /// invocations instead of the whole workgroup.
    fn prefix_guard(&self, fx: &Fx, statements: &[(&Statement, naga::Span)]) -> Res<Option<String>> {
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let Some(((last, _), before)) = statements.split_last() else {
            return Ok(None);
        };
        let Statement::If { condition, reject, .. } = last else {
            return Ok(None);
        };
        let only_local_values = before.iter().all(|(s, _)| match s {
            Statement::Emit(range) => range.clone().all(|h| !wg.private_exprs.contains(&h)),
            _ => false,
        });
        if !reject.is_empty() || !only_local_values {
            return Ok(None);
        }
        let one_dimensional = wg.shape[1] <= 1 && wg.shape[2] <= 1;
        let rising = |h: Handle<Expression>| match &fx.f.expressions[h] {
            Expression::FunctionArgument(k) => matches!(
                fx.f.arguments[*k as usize].binding,
                Some(naga::Binding::BuiltIn(naga::BuiltIn::LocalInvocationIndex))
            ),
            Expression::AccessIndex { base, index: 0 } if one_dimensional => match fx.f.expressions[*base] {
                Expression::FunctionArgument(k) => matches!(
                    fx.f.arguments[k as usize].binding,
                    Some(naga::Binding::BuiltIn(naga::BuiltIn::LocalInvocationId))
                ),
                _ => false,
            },
            _ => false,
        };
        let shared = |h: &Handle<Expression>| wg.uniform.exprs.contains(h);
        let prefix = match &fx.f.expressions[*condition] {
            Expression::Binary { op, left, right } => match op {
                Bin::Less | Bin::LessEqual => rising(*left) && shared(right),
                Bin::Greater | Bin::GreaterEqual => rising(*right) && shared(left),
                _ => false,
            },
            _ => false,
        };
        if !prefix {
            return Ok(None);
        }
        self.expr(fx, *condition).map(Some)
    }

    /// Whether `s` only computes uniform values (expressions, and stores of them to uniform
    /// locals), so that running it once serves every invocation.
    fn uniform_only(fx: &Fx, wg: &Wg, s: &Statement) -> bool {
        match s {
            Statement::Emit(range) => range.clone().all(|h| wg.uniform.exprs.contains(&h)),
            Statement::Store { pointer, value } => {
                matches!(fx.f.expressions[*pointer], Expression::LocalVariable(l) if wg.uniform.locals.contains(&l))
                    && wg.uniform.exprs.contains(value)
            }
            _ => false,
        }
    }

    /// A statement at workgroup level: control flow runs once, on invocation 0's values
    /// (WGSL requires the control flow around a barrier to be uniform).
    fn wg_statement(
        &self,
        fx: &mut Fx,
        s: &Statement,
        span: naga::Span,
        out: &mut String,
        in_wg_loop: bool,
        prologue: &RegionPrologue,
    ) -> Res<()> {
        let pad = Self::pad(fx);
        match s {
            Statement::ControlBarrier(_) => {
                let _ = writeln!(out, "{pad}/* barrier */");
            }
            Statement::WorkGroupUniformLoad { .. } => {
                self.wg_region(fx, &[(s, span)], out, prologue, false)?;
            }
            Statement::Block(b) => {
                let _ = writeln!(out, "{pad}{{");
                fx.indent += 1;
                self.wg_block(fx, b, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let c = self.expr(fx, *condition)?;
                let _ = writeln!(out, "{pad}li = 0u;\n{pad}if ({c}) {{");
                fx.indent += 1;
                self.wg_block(fx, accept, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}} else {{");
                fx.indent += 1;
                self.wg_block(fx, reject, out, in_wg_loop, prologue)?;
                fx.indent -= 1;
                let _ = writeln!(out, "{pad}}}");
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                let gate = format!("loop_init{}", out.len());
                let _ = writeln!(out, "{pad}{{ xh_bool {gate} = true;");
                let _ = writeln!(out, "{pad}for (;;) {{");
                let _ = writeln!(
                    out,
                    "{pad}    if (__atomic_load_n(proto->cancel_, __ATOMIC_RELAXED)) return;"
                );
                let _ = writeln!(out, "{pad}    if (!{gate}) {{");
                fx.wg.as_mut().expect("workgroup mode").loop_depth += 1;
                fx.indent += 2;
                self.wg_block(fx, continuing, out, true, prologue)?;
                if let Some(b) = break_if {
                    let c = self.expr(fx, *b)?;
                    let _ = writeln!(out, "{}li = 0u;\n{}if ({c}) {{ break; }}", Self::pad(fx), Self::pad(fx));
                }
                fx.indent -= 2;
                let _ = writeln!(out, "{pad}    }}");
                let _ = writeln!(out, "{pad}    {gate} = false;");
                fx.indent += 1;
                self.wg_block(fx, body, out, true, prologue)?;
                fx.indent -= 1;
                fx.wg.as_mut().expect("workgroup mode").loop_depth -= 1;
                let _ = writeln!(out, "{pad}}} }}");
            }
            Statement::Break => {
                let _ = writeln!(out, "{pad}break;");
            }
            Statement::Continue => {
                let _ = writeln!(out, "{pad}continue;");
            }
            _ => return Err(self.unsupported_at("this statement around a barrier", span)),
        }
        Ok(())
    }

    /// For an entry point without barriers whose indices into runtime-sized arrays are all
    /// affine in the invocation index (`base + c * li`, with `base` made of constants, the
    /// scalar block and the workgroup's id), a function `INNER_inbounds(ctx, wid, nwg)` that
    /// says whether every such index of the workgroup is in bounds: since each index moves
    /// in one direction with `li`, the first and the last invocation bound it. `None` when an
    /// index is not of that form (the checked body then always runs).
    fn write_bounds_check(&self, i: usize, inner: &str) -> Res<Option<(String, Vec<IndexSite>)>> {
        let ep = &self.m.entry_points[i];
        let f = &ep.function;
        let fi = self.info.get_entry_point(i);
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]).max(1);
        let one_dimensional = wg[1] <= 1 && wg[2] <= 1;
        let mut sites = Vec::new();
        for (h, e) in f.expressions.iter() {
            let (base, index) = match e {
                Expression::Access { base, index } => (*base, Some(*index)),
                Expression::AccessIndex { base, .. } => (*base, None),
                _ => continue,
            };
            let dynamic = match fi[base].ty.inner_with(&self.m.types) {
                TypeInner::Pointer { base: t, .. } => matches!(
                    self.m.types[*t].inner,
                    TypeInner::Array {
                        size: ArraySize::Dynamic,
                        ..
                    }
                ),
                _ => false,
            };
            if !dynamic {
                continue;
            }
            let Some(index) = index else { continue };
            let Some(binding) = self.runtime_array_binding_of(f, base) else {
                return Ok(None);
            };
            match self.affine(f, index, one_dimensional) {
                // Far from wrapping around: the index is monotonic over the workgroup.
                Some(c) if c.unsigned_abs().saturating_mul(u64::from(total)) < 1 << 30 => {
                    sites.push((h, index, binding, c))
                }
                _ => return Ok(None),
            }
        }
        if sites.is_empty() {
            return Ok(None);
        }
        let fx = Fx {
            f,
            fi,
            baked: HashMap::new(),
            locals: HashMap::new(),
            args: f
                .arguments
                .iter()
                .enumerate()
                .map(|(k, arg)| format!("a_{}{k}", ident(arg.name.as_deref(), "arg")))
                .collect(),
            entry: true,
            indent: 1,
            wg: None,
            unchecked: false,
            sites: HashMap::new(),
        };
        // The distinct index expressions, whose values in the first invocation the check
        // leaves in `site` for the unchecked body.
        let mut bases: Vec<IndexSite> = Vec::new();
        for &(_, index, _, c) in &sites {
            if !bases.iter().any(|&(known, _)| known == index) {
                bases.push((index, c));
            }
        }
        let mut text = format!(
            "static int {inner}_inbounds(xh_ctx* ctx, xh_u32x3 wid, xh_u32x3 nwg, xh_u64* site) {{\n    xh_u32 li;\n    (void)nwg;\n"
        );
        let _ = writeln!(
            text,
            "    for (li = 0; li < {total}u; li += {}u) {{",
            (total - 1).max(1)
        );
        text.push_str(&self.builtins_of_li(wg, "        ", false));
        for (k, arg) in f.arguments.iter().enumerate() {
            let _ = writeln!(
                text,
                "        XH_UNUSED {} {} = {};",
                self.type_name(arg.ty)?,
                fx.args[k],
                self.builtin_name(arg, &ep.name)?
            );
        }
        for (_, index, binding, _) in &sites {
            let value = self.expr(&fx, *index)?;
            // Arrays of more than 2^31 elements are left to the checks: the reasoning above
            // needs the indices far from wrapping around.
            let _ = writeln!(
                text,
                "        if (ctx->n_[{binding}] > 0x80000000u || (xh_u32)({value}) >= ctx->n_[{binding}]) return 0;"
            );
        }
        text.push_str("        if (li == 0u) {\n");
        for (k, (index, _)) in bases.iter().enumerate() {
            let value = self.expr(&fx, *index)?;
            let _ = writeln!(text, "            site[{k}] = (xh_u32)({value});");
        }
        text.push_str("        }\n    }\n    return 1;\n}\n");
        Ok(Some((text, bases)))
    }

    fn runtime_array_binding_of(&self, f: &Function, array: Handle<Expression>) -> Option<u32> {
        let g = match &f.expressions[array] {
            Expression::GlobalVariable(g) => *g,
            Expression::AccessIndex { base, .. } => match &f.expressions[*base] {
                Expression::GlobalVariable(g) => *g,
                _ => return None,
            },
            _ => return None,
        };
        let var = &self.m.global_variables[g];
        match var.space {
            AddressSpace::Storage { .. } => var.binding.as_ref().map(|b| b.binding),
            _ => None,
        }
    }

    /// `Some(c)` when integer expression `h` is `base + c * li` for the invocation index `li`,
    /// `base` the same in every invocation and computed from constants, the scalar block and
    /// the workgroup's id only (so it can be evaluated outside the kernel's body).
    fn affine(&self, f: &Function, h: Handle<Expression>, one_dimensional: bool) -> Option<i64> {
        let builtin = |e: &Expression| match e {
            Expression::FunctionArgument(k) => match f.arguments[*k as usize].binding {
                Some(naga::Binding::BuiltIn(b)) => Some(b),
                _ => None,
            },
            _ => None,
        };
        match &f.expressions[h] {
            Expression::Literal(_) | Expression::Constant(_) => Some(0),
            Expression::FunctionArgument(_) => match builtin(&f.expressions[h])? {
                naga::BuiltIn::LocalInvocationIndex => Some(1),
                _ => None,
            },
            Expression::AccessIndex { base, index } => {
                if let Some(b) = builtin(&f.expressions[*base]) {
                    return match (b, index) {
                        (naga::BuiltIn::WorkGroupId | naga::BuiltIn::NumWorkGroups, _) => Some(0),
                        (naga::BuiltIn::GlobalInvocationId | naga::BuiltIn::LocalInvocationId, 0)
                            if one_dimensional =>
                        {
                            Some(1)
                        }
                        (naga::BuiltIn::GlobalInvocationId | naga::BuiltIn::LocalInvocationId, 1 | 2)
                            if one_dimensional =>
                        {
                            Some(0)
                        }
                        _ => None,
                    };
                }
                None
            }
            Expression::Load { pointer } => {
                // A member of the scalar block.
                let mut p = *pointer;
                loop {
                    match &f.expressions[p] {
                        Expression::AccessIndex { base, .. } => p = *base,
                        Expression::GlobalVariable(g)
                            if self.m.global_variables[*g].space == AddressSpace::Immediate =>
                        {
                            return Some(0)
                        }
                        _ => return None,
                    }
                }
            }
            Expression::As {
                expr,
                kind: ScalarKind::Uint | ScalarKind::Sint,
                convert: None | Some(4),
            } => self.affine(f, *expr, one_dimensional),
            Expression::Unary {
                op: UnaryOperator::Negate,
                expr,
            } => self.affine(f, *expr, one_dimensional).map(|c| -c),
            Expression::Binary { op, left, right } => {
                let a = self.affine(f, *left, one_dimensional)?;
                let b = self.affine(f, *right, one_dimensional)?;
                let literal = |x: Handle<Expression>| match f.expressions[x] {
                    Expression::Literal(Literal::U32(v)) => Some(i64::from(v)),
                    Expression::Literal(Literal::I32(v)) => Some(i64::from(v)),
                    _ => None,
                };
                match op {
                    Bin::Add => Some(a + b),
                    Bin::Subtract => Some(a - b),
                    Bin::Multiply if a == 0 && b == 0 => Some(0),
                    Bin::Multiply if b == 0 => literal(*right).map(|k| a * k),
                    Bin::Multiply if a == 0 => literal(*left).map(|k| b * k),
                    _ if a == 0 && b == 0 => Some(0),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Declarations of `lid`, `gid` and `lidx` for invocation `li` of a workgroup whose
    /// `wid` and `nwg` are in scope.
    fn builtins_of_li(&self, wg: [u32; 3], pad: &str, nested: bool) -> String {
        let xy = wg[0].wrapping_mul(wg[1]);
        if wg[1] <= 1 && wg[2] <= 1 {
            return format!(
                "{pad}XH_UNUSED xh_u32x3 lid = xh_make_xh_u32x3(li, 0u, 0u);\n\
                 {pad}XH_UNUSED xh_u32x3 gid = xh_make_xh_u32x3(wid.x * {x}u + li, wid.y, wid.z);\n\
                 {pad}XH_UNUSED xh_u32 lidx = li;\n",
                x = wg[0].max(1)
            );
        }
        let lid = if nested {
            "lx, ly, lz".to_owned()
        } else {
            format!(
                "li % {x}u, (li / {x}u) % {y}u, li / {xy}u",
                x = wg[0].max(1),
                y = wg[1].max(1),
                xy = xy.max(1)
            )
        };
        format!(
            "{pad}XH_UNUSED xh_u32x3 lid = xh_make_xh_u32x3({lid});\n\
             {pad}XH_UNUSED xh_u32x3 gid = xh_make_xh_u32x3(wid.x * {x}u + lid.x, wid.y * {y}u + lid.y, wid.z * {z}u + lid.z);\n\
             {pad}XH_UNUSED xh_u32 lidx = li;\n",
            x = wg[0].max(1),
            y = wg[1].max(1),
            z = wg[2],
        )
    }

    /// The head of a loop over every invocation of a workgroup (its body then closes it with
    /// one `}`), which sets `li` and, for a workgroup of more than one dimension, `lx`, `ly`
    /// and `lz` (declared by the caller). The innermost loop runs along x, so that an
    /// access like `tile[ly * 16u + lx]` is contiguous, and it carries `XH_INVOCATIONS`: the
    /// invocations between two barriers are unordered in WGSL, so the C compiler may
    /// vectorise across them without proving them independent.
    fn invocation_loop(wg: [u32; 3], pad: &str) -> String {
        let (x, y, z) = (wg[0].max(1), wg[1].max(1), wg[2].max(1));
        if y == 1 && z == 1 {
            return format!("{pad}XH_INVOCATIONS\n{pad}for (li = 0; li < {x}u; li++) {{\n");
        }
        format!(
            "{pad}for (lz = 0; lz < {z}u; lz++) for (ly = 0; ly < {y}u; ly++)\n\
             {pad}XH_INVOCATIONS\n\
             {pad}for (lx = 0; lx < {x}u; lx++) {{\n\
             {pad}    li = (lz * {y}u + ly) * {x}u + lx;\n"
        )
    }

    /// The wrapper's variable that holds the built-in an entry-point argument receives.
    fn builtin_name(&self, arg: &naga::FunctionArgument, entry: &str) -> Res<&'static str> {
        Ok(match &arg.binding {
            Some(naga::Binding::BuiltIn(b)) => match b {
                naga::BuiltIn::GlobalInvocationId => "gid",
                naga::BuiltIn::LocalInvocationId => "lid",
                naga::BuiltIn::WorkGroupId => "wid",
                naga::BuiltIn::NumWorkGroups => "nwg",
                naga::BuiltIn::LocalInvocationIndex => "lidx",
                other => return Err(self.unsupported(&format!("the built-in {other:?}"))),
            },
            _ => return Err(self.unsupported(&format!("an entry-point argument of `{entry}` without a built-in"))),
        })
    }
}

/// Names C, C++ or OpenCL C reserve (or give a meaning) that WGSL allows as entry-point names.
const RESERVED: &[&str] = &[
    "main",
    "kernel",
    "global",
    "local",
    "constant",
    "private",
    "char",
    "short",
    "long",
    "double",
    "signed",
    "unsigned",
    "union",
    "typedef",
    "sizeof",
    "static",
    "extern",
    "register",
    "auto",
    "volatile",
    "goto",
    "int",
    "float",
    "uint",
    "uchar",
    "ushort",
    "ulong",
    "half",
    "new",
    "delete",
    "this",
    "class",
    "template",
    "namespace",
    "operator",
    "public",
    "protected",
    "barrier",
    "mem_fence",
    "memset",
    "inline",
    "restrict",
    "export",
    "bool",
    "size_t",
    "ptrdiff_t",
    "intptr_t",
    "uintptr_t",
    "event_t",
    "sampler_t",
    "printf",
];

/// Built-in functions of OpenCL C 1.2 (and, for most, of C's `<math.h>` and CUDA's device
/// library) that a kernel of the same name would clash with: OpenCL C compilers refuse the
/// redefinition of an overloaded built-in or rename the kernel (PoCL names a kernel `step`
/// `_cl_step`). `<math.h>`'s `f` and `l` variants (`sqrtf`) count as well.
const BUILTIN_FUNCTIONS: &[&str] = &[
    // Work-items.
    "get_work_dim",
    "get_global_size",
    "get_global_id",
    "get_local_size",
    "get_local_id",
    "get_num_groups",
    "get_group_id",
    "get_global_offset",
    // Math.
    "acos",
    "acosh",
    "acospi",
    "asin",
    "asinh",
    "asinpi",
    "atan",
    "atan2",
    "atanh",
    "atanpi",
    "atan2pi",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "cospi",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "exp10",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "fract",
    "frexp",
    "hypot",
    "ilogb",
    "ldexp",
    "lgamma",
    "lgamma_r",
    "log",
    "log2",
    "log10",
    "log1p",
    "logb",
    "mad",
    "maxmag",
    "minmag",
    "modf",
    "nan",
    "nextafter",
    "pow",
    "pown",
    "powr",
    "remainder",
    "remquo",
    "rint",
    "rootn",
    "round",
    "rsqrt",
    "sin",
    "sincos",
    "sinh",
    "sinpi",
    "sqrt",
    "tan",
    "tanh",
    "tanpi",
    "tgamma",
    "trunc",
    // Integers.
    "abs",
    "abs_diff",
    "add_sat",
    "hadd",
    "rhadd",
    "clamp",
    "clz",
    "mad_hi",
    "mad_sat",
    "max",
    "min",
    "mul_hi",
    "rotate",
    "sub_sat",
    "upsample",
    "popcount",
    "mad24",
    "mul24",
    // Common and geometric.
    "degrees",
    "radians",
    "mix",
    "sign",
    "smoothstep",
    "step",
    "cross",
    "dot",
    "distance",
    "length",
    "normalize",
    "fast_distance",
    "fast_length",
    "fast_normalize",
    // Relational.
    "isequal",
    "isnotequal",
    "isgreater",
    "isgreaterequal",
    "isless",
    "islessequal",
    "islessgreater",
    "isfinite",
    "isinf",
    "isnan",
    "isnormal",
    "isordered",
    "isunordered",
    "signbit",
    "any",
    "all",
    "bitselect",
    "select",
    // Synchronisation, copies, vectors.
    "read_mem_fence",
    "write_mem_fence",
    "async_work_group_copy",
    "async_work_group_strided_copy",
    "wait_group_events",
    "prefetch",
    "shuffle",
    "shuffle2",
    "vec_step",
    // <string.h>, which host C includes.
    "memcpy",
    "memmove",
    "memcmp",
    "memchr",
    "strlen",
];

/// Prefixes of built-in families (`native_sin`, `vload4`, `convert_int_sat`, `atom_add`,
/// `read_imagef`) and of the emitter's own names.
const RESERVED_PREFIXES: &[&str] = &[
    "xh_",
    "atomic",
    "atom_",
    "__",
    "native_",
    "half_",
    "vload",
    "vstore",
    "convert_",
    "as_",
    "read_image",
    "write_image",
    "get_image_",
];

/// Whether `name` is an OpenCL C vector type name (`float4`, `uchar16`).
fn is_vector_type(name: &str) -> bool {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (base, lanes) = name.split_at(name.len() - digits);
    matches!(lanes, "2" | "3" | "4" | "8" | "16")
        && matches!(
            base,
            "char" | "uchar" | "short" | "ushort" | "int" | "uint" | "long" | "ulong" | "float" | "double" | "half"
        )
}

/// The C function name of an entry point: its WGSL name, with `_` appended when C, C++ or
/// OpenCL C reserve that name (`main` becomes `main_`), when it names a built-in function of
/// OpenCL C or `<math.h>` (`step` becomes `step_`, `sqrtf` becomes `sqrtf_`) or a vector type,
/// or when it could clash with the emitter's own `xh_` names. Backends that take emitted C
/// look a kernel up by `c_symbol(wgsl_name)`.
pub fn c_symbol(name: &str) -> String {
    let math_variant = name
        .strip_suffix('f')
        .or_else(|| name.strip_suffix('l'))
        .is_some_and(|base| BUILTIN_FUNCTIONS.contains(&base));
    if RESERVED.contains(&name)
        || BUILTIN_FUNCTIONS.contains(&name)
        || math_variant
        || is_vector_type(name)
        || RESERVED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
    {
        format!("{name}_")
    } else {
        name.to_owned()
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

fn scalar_wgsl(s: Scalar) -> String {
    match s.kind {
        ScalarKind::Bool => "bool".to_owned(),
        ScalarKind::Sint => format!("i{}", s.width * 8),
        ScalarKind::Uint => format!("u{}", s.width * 8),
        ScalarKind::Float => format!("f{}", s.width * 8),
        _ => "an abstract type".to_owned(),
    }
}

/// The determinant of the square sub-matrix of `columns` and `rows` (indices into a matrix
/// whose element of column `c` and row `r` is `element(c, r)`), as a C expression: Laplace
/// expansion along the first row, terms added left to right with alternating signs, the
/// same operations in the same order as the CPU interpreter, so the compiled result is the
/// same bits.
fn determinant_text(
    element: &dyn Fn(usize, usize) -> String,
    columns: &[usize],
    rows: &[usize],
    op: &dyn Fn(Bin, &str, &str) -> Res<String>,
) -> Res<String> {
    match (columns, rows) {
        ([c], [r]) => Ok(element(*c, *r)),
        ([c0, c1], [r0, r1]) => {
            let ad = op(Bin::Multiply, &element(*c0, *r0), &element(*c1, *r1))?;
            let cb = op(Bin::Multiply, &element(*c1, *r0), &element(*c0, *r1))?;
            op(Bin::Subtract, &ad, &cb)
        }
        _ => {
            let mut sum = String::new();
            for (k, &column) in columns.iter().enumerate() {
                let minor: Vec<usize> = columns.iter().copied().filter(|&c| c != column).collect();
                let cofactor = determinant_text(element, &minor, &rows[1..], op)?;
                let term = op(Bin::Multiply, &element(column, rows[0]), &cofactor)?;
                sum = match k {
                    0 => term,
                    _ if k % 2 == 1 => op(Bin::Subtract, &sum, &term)?,
                    _ => op(Bin::Add, &sum, &term)?,
                };
            }
            Ok(sum)
        }
    }
}

/// Most elements an array constructor may list: each becomes a parameter of a C function, and
/// C compilers are only required to take 127 (gcc, clang and NVRTC take far more).
const MAX_CONSTRUCTED_ARRAY: u32 = 1024;

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
