//! The C writer: naga IR to text. See the module docs of [`crate::c`] for the conventions.
//!
//! This file holds the writer itself (expressions, statements, functions, kernel wrappers).
//! Host C's workgroup mode is in `workgroup.rs`, the bounds of indices in `bounds.rs`, C types
//! in `types.rs`, built-in functions in `math.rs` and the names C reserves in `src/keywords.rs`;
//! what the C and Kernel SPIR-V writers share is in [`crate::ir`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use naga::proc::TypeResolution;
use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{
    AddressSpace, ArraySize, BinaryOperator as Bin, Block, Expression, Function, Handle, Literal, Scalar, ScalarKind,
    Statement, Type, TypeInner, UnaryOperator,
};

use super::bounds::IndexSite;
use super::prelude::{prelude, Needs};
use super::types::MAX_CONSTRUCTED_ARRAY;
use super::workgroup::{HoistedValue, HostWrapper, Wg, CONTROL};
use super::{c_symbol, CEntryPoint, CSource, Dialect};
use crate::error::{KernelError, KernelErrorKind};
use crate::ir::{self, calls, compute_entries, has_barrier, scalar_wgsl, uses_length};
use crate::wgsl::WgslModule;

type Res<T> = Result<T, KernelError>;

const COMPONENTS: [&str; 4] = ["x", "y", "z", "w"];

/// How a WGSL array is spelled in C.
#[derive(Clone)]
pub(super) struct ArrayRepr {
    /// C type of one element (the wrapper when the stride needs padding).
    pub(super) elem: String,
    /// `.v` when elements are wrapped, else empty.
    pub(super) unwrap: &'static str,
}

pub(super) struct Writer<'a> {
    pub(super) m: &'a naga::Module,
    pub(super) info: &'a ModuleInfo,
    pub(super) src: &'a str,
    pub(super) d: Dialect,
    /// C names of struct and fixed-size array types.
    pub(super) names: HashMap<Handle<Type>, String>,
    pub(super) arrays: HashMap<Handle<Type>, ArrayRepr>,
    /// C names of struct members, per struct type.
    pub(super) members: HashMap<Handle<Type>, Vec<String>>,
    /// C names of globals (ctx members).
    pub(super) globals: HashMap<Handle<naga::GlobalVariable>, String>,
    /// C names of functions.
    pub(super) functions: HashMap<Handle<Function>, String>,
    /// Host C: the entry points written in workgroup mode (they have barriers).
    pub(super) wg_entries: HashSet<usize>,
    /// Of those, the ones with a context per invocation (they use `var<private>`).
    pub(super) wg_private_ctx: HashSet<usize>,
    /// Host C entry points with a second, unchecked body and the check that picks it.
    /// Entry points with an unchecked body, and how many index bases its check works out.
    pub(super) fast_entries: HashMap<usize, usize>,
    /// Of those, the ones whose unchecked body runs for a prefix of the invocations only
    /// (see [`Writer::entry_prefix_guard`]).
    pub(super) prefix_entries: HashSet<usize>,
    /// Host C: how many divisions by a value the same for the whole workgroup were given a
    /// memo of the divisor's reciprocal in the context (`xh_divisor div_[n]`, see
    /// [`Writer::memo_division`]).
    pub(super) divisors: std::cell::Cell<usize>,
    /// Host C: for each function, which of its arguments every call passes a value the same
    /// across the workgroup (see [`Writer::memo_division`]).
    pub(super) invariant_arguments: HashMap<Handle<Function>, Vec<bool>>,
    /// Host C: which functions compute their result from their arguments alone.
    pub(super) pure_functions: Vec<bool>,
    /// Host C: the context's pointers to buffers and workgroup memory, as (C type, member)
    /// pairs, which a workgroup-mode entry point copies into locals (see
    /// [`Writer::pointer_locals`]).
    pub(super) ctx_pointers: Vec<(String, String)>,
}

/// Per-function state.
pub(super) struct Fx<'a> {
    pub(super) f: &'a Function,
    pub(super) fi: &'a FunctionInfo,
    pub(super) baked: HashMap<Handle<Expression>, String>,
    pub(super) locals: HashMap<Handle<naga::LocalVariable>, String>,
    pub(super) args: Vec<String>,
    pub(super) entry: bool,
    pub(super) indent: usize,
    /// Host C entry points with barriers run a whole workgroup in one call: see [`Wg`].
    pub(super) wg: Option<Wg>,
    /// Host C: the entry point's own indices into runtime-sized arrays are used as they are,
    /// because the caller checked that they stay in bounds (see `write_bounds_check`).
    pub(super) unchecked: bool,
    /// In such a body, each index into a runtime-sized array that is `base + c * li`: its
    /// number in `xh_site` (the bases, worked out by the check) and `c`.
    pub(super) sites: HashMap<Handle<Expression>, (usize, i64)>,
    /// Host C workgroup mode: in a region's second copy, what the check before it proved
    /// for every invocation of the workgroup (see `region.rs`).
    pub(super) proven: super::region::Proven,
    /// Host C: the arguments of the function's calls by result, found on first use.
    pub(super) calls: std::cell::OnceCell<super::uniform::CallArguments>,
    /// Host C: in a counted loop's unchecked copy, what its check proved (see `counted.rs`).
    pub(super) counted: super::counted::FastCopy,
}

pub(super) fn ident(name: Option<&str>, fallback: &str) -> String {
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

pub(super) fn scalar_suffix(s: Scalar) -> Option<&'static str> {
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

pub(super) fn paren(e: &str) -> String {
    if e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
        e.to_owned()
    } else {
        format!("({e})")
    }
}

pub(super) fn comp(e: &str, i: usize) -> String {
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
    // Host C is compiled per module the CPU backend loads: the branches the overrides decide
    // are dropped first (see `prune`), so that a kernel family selecting its operation with an
    // override compiles only that operation. `info` still describes every expression left.
    let pruned: naga::Module;
    let m = if host {
        let mut copy = m.clone();
        crate::prune_decided_branches(&mut copy);
        pruned = copy;
        &pruned
    } else {
        m
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
        prefix_entries: HashSet::new(),
        divisors: std::cell::Cell::new(0),
        invariant_arguments: HashMap::new(),
        pure_functions: Vec::new(),
        ctx_pointers: Vec::new(),
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
    let uses_f64 = uses_scalar(m, Scalar::F64, |l| matches!(l, Literal::F64(_))) || makes_float(m, 8);
    let uses_f16 = uses_scalar(m, Scalar::F16, |l| matches!(l, Literal::F16(_))) || makes_float(m, 2);

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
             XH_FN xh_u32 xh_rt_index(xh_u32* oob, xh_u32 i, xh_u32 n) { xh_u32 last = n - (xh_u32)(n != 0u); *oob |= (xh_u32)(i >= n); return i < last ? i : last; }\n\
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
    if d == Dialect::HostC {
        out.push_str(super::region::HELPERS);
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
    for &i in &selected {
        if uses_length(&m.entry_points[i].function) || ir::touches_runtime_array(m, w.info.get_entry_point(i)) {
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
            AddressSpace::Storage { .. } | AddressSpace::WorkGroup => {
                let ty = match (var.space, w.array_of(var.ty)) {
                    (AddressSpace::WorkGroup, _) => format!("XH_LOCAL {}*", w.type_name(var.ty)?),
                    (_, Some((repr, true))) => format!("XH_GLOBAL {}*", repr.elem),
                    _ => format!("XH_GLOBAL {}*", w.type_name(var.ty)?),
                };
                w.ctx_pointers.push((ty.clone(), name.clone()));
                format!("{ty} {name}")
            }
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
    if d == Dialect::HostC {
        // Filled in once the functions are written and their divisions counted.
        out.push_str(DIVISORS_MARKER);
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

    if host {
        w.pure_functions = super::uniform::pure_functions(m);
        w.invariant_arguments = w.find_invariant_arguments(&selected);
    }
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
            // Host C also gets a body without index checks, run for a workgroup whose every
            // index into a runtime-sized array is in bounds (as below, for no barriers).
            let check = if d == Dialect::HostC {
                w.write_bounds_check(i, &inner)?
            } else {
                None
            };
            let sites = check.as_ref().map(|(_, sites)| sites.as_slice());
            let (mut text, fast) = w.write_workgroup_function(ep, fi, &inner, sites)?;
            if let (Some((check, sites)), true) = (&check, fast) {
                text.push_str(check);
                w.fast_entries.insert(i, sites.len());
            }
            text
        } else {
            let mut text = w.write_function(&ep.function, fi, inner.clone(), true, None)?;
            if d == Dialect::HostC {
                if let Some((check, sites)) = w.write_bounds_check(i, &inner)? {
                    let guard = w.entry_prefix_guard(i);
                    let body = guard.as_ref().map_or(&ep.function, |guard| &guard.unguarded);
                    let fast = w.write_function(body, fi, format!("{inner}_fast"), true, Some(&sites))?;
                    text.push_str(&fast);
                    text.push_str(&check);
                    if let Some(guard) = &guard {
                        text.push_str(&w.write_active_count(i, &inner, guard)?);
                        w.prefix_entries.insert(i);
                    }
                    w.fast_entries.insert(i, sites.len());
                }
            }
            text
        };
        out.push_str(&text);
        let uses_len = uses_length(&ep.function)
            || ir::touches_runtime_array(m, fi)
            || reachable
                .iter()
                .any(|&h| uses_length(&m.functions[h]) && fn_reachable_from(m, &ep.function.body, h));
        let mut entry = w.write_wrapper(&mut out, i, &inner, uses_len)?;
        entry.barriers = barriers;
        entry_points.push(entry);
    }
    let divisors = w.divisors.get();
    let members = if divisors > 0 {
        format!("    xh_divisor div_[{divisors}];\n")
    } else {
        String::new()
    };
    let out = out.replacen(DIVISORS_MARKER, &members, 1);
    Ok(CSource {
        dialect: d,
        text: out,
        entry_points,
    })
}

/// Where [`Writer::workgroup_invariant`] looks at an expression: its function, whether that
/// is an entry point, which of its arguments are invariant, and its calls' arguments by result.
#[derive(Clone, Copy)]
struct Scope<'s> {
    f: &'s Function,
    entry: bool,
    arguments: &'s [bool],
    calls: &'s super::uniform::CallArguments,
}

/// The body and continuing block of the innermost loop of `block` whose statements emit
/// expression `h`: `Some(None)` when `h` is emitted outside every loop, `None` when it is not
/// emitted in `block` at all.
#[allow(clippy::type_complexity)]
fn innermost_loop<'b>(
    block: &'b Block,
    h: Handle<Expression>,
    current: Option<(&'b Block, &'b Block)>,
) -> Option<Option<(&'b Block, &'b Block)>> {
    for statement in block.iter() {
        let found = match statement {
            naga::Statement::Emit(range) => range.clone().any(|e| e == h).then_some(current),
            naga::Statement::Block(inner) => innermost_loop(inner, h, current),
            naga::Statement::If { accept, reject, .. } => {
                innermost_loop(accept, h, current).or_else(|| innermost_loop(reject, h, current))
            }
            naga::Statement::Switch { cases, .. } => cases.iter().find_map(|c| innermost_loop(&c.body, h, current)),
            naga::Statement::Loop { body, continuing, .. } => {
                let this = Some((body, continuing));
                innermost_loop(body, h, this).or_else(|| innermost_loop(continuing, h, this))
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Every call in `block` (nested blocks too), with its arguments.
fn call_arguments(block: &Block, out: &mut Vec<(Handle<Function>, Vec<Handle<Expression>>)>) {
    crate::ir::for_each_statement(block, &mut |s| {
        if let naga::Statement::Call {
            function, arguments, ..
        } = s
        {
            out.push((*function, arguments.clone()));
        }
    });
}

/// Where the context's divisor memos go, once they are counted.
const DIVISORS_MARKER: &str = "    /* divisors */\n";

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

/// Whether an expression makes a float of `width` bytes that no type in the arena names: a
/// conversion such as `f64(x)`, or a bit cast such as `bitcast<f64>(u)`, whose width is its
/// operand's (so any bit cast to a float counts where the module has integers of that width).
fn makes_float(m: &naga::Module, width: u8) -> bool {
    let any_expression = |test: &dyn Fn(&Expression) -> bool| {
        m.entry_points
            .iter()
            .map(|ep| &ep.function.expressions)
            .chain(m.functions.iter().map(|(_, f)| &f.expressions))
            .chain(std::iter::once(&m.global_expressions))
            .any(|expressions| expressions.iter().any(|(_, e)| test(e)))
    };
    // Integers of the width: named by a type, written as a literal, or made by a conversion.
    let has_ints_of_width = width == 8
        && ([Scalar::I64, Scalar::U64]
            .iter()
            .any(|&s| uses_scalar(m, s, |l| matches!(l, Literal::I64(_) | Literal::U64(_))))
            || any_expression(&|e| {
                matches!(
                    *e,
                    Expression::As {
                        kind: ScalarKind::Sint | ScalarKind::Uint,
                        convert: Some(8),
                        ..
                    }
                )
            }));
    any_expression(&|e| match *e {
        Expression::As {
            kind: ScalarKind::Float,
            convert: Some(w),
            ..
        } => w == width,
        Expression::As {
            kind: ScalarKind::Float,
            convert: None,
            ..
        } => has_ints_of_width,
        _ => false,
    })
}

fn fn_reachable_from(m: &naga::Module, body: &Block, target: Handle<Function>) -> bool {
    ir::closure(m, body).contains(&target)
}

impl<'a> Writer<'a> {
    pub(super) fn unsupported(&self, what: &str) -> KernelError {
        ir::unsupported(what, self.d.name())
    }

    pub(super) fn unsupported_at(&self, what: &str, span: naga::Span) -> KernelError {
        ir::unsupported_at(what, self.d.name(), self.src, span, "not supported in this dialect")
    }

    /// Gives an error without a location the location of expression `h`.
    pub(super) fn relocate(&self, fx: &Fx, h: Handle<Expression>, e: KernelError) -> KernelError {
        ir::relocate(
            e,
            self.src,
            fx.f.expressions.get_span(h),
            "not supported in this dialect",
        )
    }

    /// Host C: the helper for an integer division or remainder of 32 bits whose divisor is
    /// the same in every invocation of a workgroup (built from the scalar block, constants,
    /// array lengths, the workgroup's ids and arguments that are such values at every call)
    /// and not a constant the C compiler divides by itself. A hardware division costs tens of
    /// cycles, the index arithmetic of a strided kernel has several per element, and the C
    /// compiler cannot turn a division by a value it does not know into a multiplication; the
    /// helper keeps the divisor's reciprocal in the context, works it out again only when the
    /// divisor changes, and divides with two multiplications. The answer is exact for every
    /// divisor (the memo is only a cache), so a divisor wrongly taken for uniform costs time,
    /// never correctness.
    ///
    /// Inside a loop, a division whose dividend the loop does not change keeps the plain
    /// operator: the C compiler moves it out of the loop, which it cannot do with the memo's
    /// helper (it may store to the context).
    fn memo_division(
        &self,
        fx: &Fx,
        h: Handle<Expression>,
        op: Bin,
        s: Scalar,
        dividend: Handle<Expression>,
        divisor: Handle<Expression>,
    ) -> Option<&'static str> {
        if self.d != Dialect::HostC {
            return None;
        }
        let name = match (op, s) {
            (Bin::Divide, Scalar::U32) => "xh_div_memo_u32",
            (Bin::Modulo, Scalar::U32) => "xh_rem_memo_u32",
            (Bin::Divide, Scalar::I32) => "xh_div_memo_i32",
            (Bin::Modulo, Scalar::I32) => "xh_rem_memo_i32",
            _ => return None,
        };
        let constant = matches!(
            fx.f.expressions[divisor],
            Expression::Literal(_) | Expression::Constant(_) | Expression::Override(_) | Expression::ZeroValue(_)
        );
        if constant {
            return None;
        }
        let calls = fx.calls.get_or_init(|| {
            let mut calls = Default::default();
            super::uniform::call_results(&fx.f.body, &mut calls);
            calls
        });
        let scope = Scope {
            f: fx.f,
            entry: fx.entry,
            arguments: self.arguments_of(fx.f),
            calls,
        };
        if !self.workgroup_invariant(&scope, divisor, 0) {
            return None;
        }
        if let Some(Some((body, continuing))) = innermost_loop(&fx.f.body, h, None) {
            let mut stored = HashSet::new();
            for statement in body.iter().chain(continuing.iter()) {
                super::uniform::stored_locals(fx.f, statement, &mut stored);
            }
            if !self.varies_in_loop(fx.f, dividend, &stored, 0) {
                return None;
            }
        }
        Some(name)
    }

    /// Whether expression `h` of `f` may take another value at each pass of a loop that
    /// stores `stored`: it reads one of those locals, writable memory or a call's result.
    fn varies_in_loop(
        &self,
        f: &Function,
        h: Handle<Expression>,
        stored: &HashSet<Handle<naga::LocalVariable>>,
        depth: usize,
    ) -> bool {
        if depth > 32 {
            return true;
        }
        let again = |e: Handle<Expression>| self.varies_in_loop(f, e, stored, depth + 1);
        match &f.expressions[h] {
            Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::Override(_)
            | Expression::ZeroValue(_)
            | Expression::FunctionArgument(_)
            | Expression::LocalVariable(_)
            | Expression::GlobalVariable(_) => false,
            Expression::Load { pointer } => {
                let changes = match super::uniform::root(f, *pointer) {
                    Some(super::uniform::Root::Local(l)) => stored.contains(&l),
                    Some(super::uniform::Root::Global(g)) => {
                        !super::uniform::read_only(self.m.global_variables[g].space)
                    }
                    None => true,
                };
                changes || again(*pointer)
            }
            Expression::ArrayLength(array) => again(*array),
            e => super::uniform::value_operands(e).is_none_or(|mut operands| operands.any(again)),
        }
    }

    /// Host C: the context's pointers to buffers and workgroup memory as locals (read from
    /// `context`, each line indented by `pad`), for the function that runs a workgroup or a
    /// counted loop's unchecked copy to index. Read through the
    /// context, a pointer must be loaded again after every store of a float wherever the C
    /// compiler cannot prove that the context does not escape (strict aliasing is off, and
    /// GCC does not take the context's `restrict` to cover what its pointers point to), and
    /// that load keeps the loop over the invocations from being vectorised. A local whose
    /// address is never taken cannot change.
    pub(super) fn pointer_locals(&self, pad: &str, context: &str) -> String {
        let mut out = String::new();
        for (ty, name) in &self.ctx_pointers {
            let _ = writeln!(out, "{pad}XH_UNUSED {ty} const x{name} = {context}->{name};");
        }
        out
    }

    /// A fresh memo slot of the context.
    fn take_divisor(&self) -> usize {
        let k = self.divisors.get();
        self.divisors.set(k + 1);
        k
    }

    /// Which arguments of `f` are the same across a workgroup at every call (none for an
    /// entry point's own, which are built-ins).
    fn arguments_of(&self, f: &Function) -> &[bool] {
        self.m
            .functions
            .iter()
            .find(|(_, g)| std::ptr::eq(*g, f))
            .and_then(|(h, _)| self.invariant_arguments.get(&h))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether expression `h` of `f` has one value for a whole workgroup, given which of
    /// `f`'s arguments do: see [`Writer::memo_division`].
    fn workgroup_invariant(&self, scope: &Scope, h: Handle<Expression>, depth: usize) -> bool {
        if depth > 32 {
            return false;
        }
        let Scope {
            f,
            entry,
            arguments,
            calls,
        } = *scope;
        let again = |e: Handle<Expression>| self.workgroup_invariant(scope, e, depth + 1);
        match &f.expressions[h] {
            Expression::Literal(_) | Expression::Constant(_) | Expression::Override(_) | Expression::ZeroValue(_) => {
                true
            }
            Expression::GlobalVariable(g) => super::uniform::read_only(self.m.global_variables[*g].space),
            Expression::FunctionArgument(i) if entry => matches!(
                f.arguments.get(*i as usize).and_then(|a| a.binding.as_ref()),
                Some(naga::Binding::BuiltIn(
                    naga::BuiltIn::NumWorkGroups | naga::BuiltIn::WorkGroupId
                ))
            ),
            Expression::FunctionArgument(i) => arguments.get(*i as usize).copied().unwrap_or(false),
            Expression::Load { pointer } => again(*pointer),
            Expression::ArrayLength(array) => again(*array),
            Expression::CallResult(callee) => {
                self.pure_functions.get(callee.index()).copied().unwrap_or(false)
                    && calls
                        .get(&h)
                        .is_some_and(|arguments| arguments.iter().all(|&a| again(a)))
            }
            e => super::uniform::value_operands(e).is_some_and(|mut operands| operands.all(again)),
        }
    }

    /// For each function, which arguments every call in the selected entry points' call
    /// graph passes a workgroup-invariant value: all are assumed so, and any call that passes
    /// a value not shown invariant clears its argument, until nothing changes.
    fn find_invariant_arguments(&self, selected: &[usize]) -> HashMap<Handle<Function>, Vec<bool>> {
        let mut flags: HashMap<Handle<Function>, Vec<bool>> = self
            .m
            .functions
            .iter()
            .map(|(h, f)| (h, vec![true; f.arguments.len()]))
            .collect();
        // What each caller's calls return and pass depends on its body only: found once, not
        // again on every pass of the fixpoint.
        let callers: Vec<_> = selected
            .iter()
            .map(|&i| (&self.m.entry_points[i].function, true, None))
            .chain(self.m.functions.iter().map(|(h, f)| (f, false, Some(h))))
            .map(|(f, entry, handle)| {
                let mut results = Default::default();
                super::uniform::call_results(&f.body, &mut results);
                let mut calls = Vec::new();
                call_arguments(&f.body, &mut calls);
                (f, entry, handle, results, calls)
            })
            .collect();
        loop {
            let mut changed = false;
            for (f, entry, handle, results, calls) in &callers {
                let own = handle.and_then(|h| flags.get(&h)).cloned().unwrap_or_default();
                let scope = Scope {
                    f,
                    entry: *entry,
                    arguments: &own,
                    calls: results,
                };
                for (callee, arguments) in calls {
                    for (i, &a) in arguments.iter().enumerate() {
                        let assumed = flags.get(callee).and_then(|v| v.get(i)).copied().unwrap_or(false);
                        if assumed && !self.workgroup_invariant(&scope, a, 0) {
                            if let Some(slot) = flags.get_mut(callee).and_then(|v| v.get_mut(i)) {
                                *slot = false;
                            }
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                return flags;
            }
        }
    }

    pub(super) fn expr_err(&self, fx: &Fx, h: Handle<Expression>, what: &str) -> KernelError {
        self.unsupported_at(what, fx.f.expressions.get_span(h))
    }

    pub(super) fn ty<'b>(&'b self, fx: &'b Fx, h: Handle<Expression>) -> &'b TypeInner {
        fx.fi[h].ty.inner_with(&self.m.types)
    }

    /// What a pointer expression points to.
    fn pointee(&self, fx: &Fx, h: Handle<Expression>) -> TypeInner {
        ir::pointee(&self.m.types, self.ty(fx, h))
    }

    fn pointee_handle(&self, fx: &Fx, h: Handle<Expression>) -> Option<Handle<Type>> {
        ir::pointee_handle(self.ty(fx, h))
    }

    fn is_pointer(&self, fx: &Fx, h: Handle<Expression>) -> bool {
        ir::is_pointer(self.ty(fx, h))
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
                // A workgroup-mode body reads the pointers from its locals (see
                // [`Writer::pointer_locals`]).
                let pointer = if fx.wg.is_some() || fx.counted.pointer_locals {
                    format!("x{name}")
                } else {
                    format!("ctx->{name}")
                };
                match var.space {
                    AddressSpace::Storage { .. } => match self.array_of(var.ty) {
                        Some((_, true)) => pointer,
                        _ => format!("(*{pointer})"),
                    },
                    AddressSpace::WorkGroup => format!("(*{pointer})"),
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
                    TypeInner::Vector { size, .. } => {
                        // The address of the component the index picks, chosen among the
                        // components' own addresses: `(&v.x)[i]` indexes past the member `x`,
                        // which C leaves undefined and LLVM (PoCL, NVRTC) compiles to stores
                        // and loads of `x` alone.
                        let i = self.clamp(fx, &i, size as u32, *index);
                        let names = ["x", "y", "z", "w"];
                        let last = size as usize - 1;
                        let mut address = format!("&{b}.{}", names[last]);
                        for k in (0..last).rev() {
                            address = format!("({i}) == {k}u ? &{b}.{} : {address}", names[k]);
                        }
                        format!("(*({address}))")
                    }
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
    pub(super) fn expr(&self, fx: &Fx, h: Handle<Expression>) -> Res<String> {
        if let Some(&holds) = fx.proven.conditions.get(&h) {
            // The check before this copy of the region found the same outcome in every
            // invocation of the workgroup.
            return Ok(if holds { "true" } else { "false" }.to_owned());
        }
        if let Some(n) = fx.baked.get(&h) {
            if let Some(wg) = &fx.wg {
                wg.record_use(h);
                // Read in the region that computes it: its register copy (see `define`).
                if let Some(values) = wg.hoisted.borrow().get(&wg.region.get()) {
                    if let Some(value) = values.iter().find(|value| value.expr == h) {
                        return Ok(value.local.clone());
                    }
                }
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
    pub(super) fn map_components(
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

    pub(super) fn sbin(&self, op: Bin, s: Scalar, a: &str, b: &str) -> Res<String> {
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
            (TypeInner::Scalar(s), TypeInner::Scalar(_)) => match self.memo_division(fx, h, op, *s, l, r) {
                Some(name) => Ok(format!("{name}({a}, {b}, &ctx->div_[{}])", self.take_divisor())),
                None => self.sbin(op, *s, &a, &b).map_err(err),
            },
            (TypeInner::Vector { size, scalar }, TypeInner::Vector { .. })
            | (TypeInner::Vector { size, scalar }, TypeInner::Scalar(_))
            | (TypeInner::Scalar(scalar), TypeInner::Vector { size, .. }) => {
                let n = *size as usize;
                let lv = matches!(lt, TypeInner::Vector { .. });
                let rv = matches!(rt, TypeInner::Vector { .. });
                let memo = self.memo_division(fx, h, op, *scalar, l, r);
                let mut parts = Vec::new();
                for i in 0..n {
                    let x = if lv { comp(&a, i) } else { a.clone() };
                    let y = if rv { comp(&b, i) } else { b.clone() };
                    parts.push(match memo {
                        Some(name) => format!("{name}({x}, {y}, &ctx->div_[{}])", self.take_divisor()),
                        None => self.sbin(op, *scalar, &x, &y).map_err(err)?,
                    });
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
            proven: Default::default(),
            calls: Default::default(),
            counted: Default::default(),
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

    pub(super) fn pad(fx: &Fx) -> String {
        "    ".repeat(fx.indent)
    }

    /// A loop as it runs in WGSL: the continuing block at the top of every iteration but the
    /// first, `break_if` after it.
    pub(super) fn plain_loop(
        &self,
        fx: &mut Fx,
        body: &Block,
        continuing: &Block,
        break_if: Option<Handle<Expression>>,
        out: &mut String,
    ) -> Res<()> {
        let pad = Self::pad(fx);
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
                let c = self.expr(fx, b)?;
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
        Ok(())
    }

    fn block(&self, fx: &mut Fx, block: &Block, out: &mut String) -> Res<()> {
        for (s, span) in block.span_iter() {
            self.statement(fx, s, *span, out)?;
        }
        Ok(())
    }

    pub(super) fn bake(&self, fx: &mut Fx, h: Handle<Expression>, value: String, out: &mut String) -> Res<()> {
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
                    let region = wg.region.get();
                    if region != CONTROL {
                        // One slot for the workgroup, written once after the region's loop
                        // from a copy the loop keeps in a register: a store to the same
                        // address in every invocation would keep the loop from vectorising.
                        let local = format!("{name}_r");
                        wg.hoisted.borrow_mut().entry(region).or_default().push(HoistedValue {
                            expr: h,
                            ty: t.to_owned(),
                            local: local.clone(),
                            slot: format!("F->{name}"),
                        });
                        return (local, format!("F->{name}"));
                    }
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

    pub(super) fn statement(&self, fx: &mut Fx, s: &Statement, span: naga::Span, out: &mut String) -> Res<()> {
        let pad = Self::pad(fx);
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    if self.is_pointer(fx, h) || fx.counted.hoisted.contains(&h) {
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
                if self.d != Dialect::HostC || !self.counted_loop(fx, body, continuing, *break_if, out)? {
                    self.plain_loop(fx, body, continuing, *break_if, out)?;
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
                    let _ = writeln!(out, "{pad}goto {};", wg.end_label());
                } else {
                    wg.any_returns.set(true);
                    let _ = writeln!(out, "{pad}{{ F->done_[li] = 1; xh_live--; goto {}; }}", wg.end_label());
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
                if let Some((header, stride)) = ir::runtime_array_of(&self.m.types, m.global_variables[*g].ty) {
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

    /// The wrapper's variable that holds the built-in an entry-point argument receives.
    pub(super) fn builtin_name(&self, arg: &naga::FunctionArgument, entry: &str) -> Res<&'static str> {
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
