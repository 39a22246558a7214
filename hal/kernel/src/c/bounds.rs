//! The bounds of indices: fixed-size arrays, vectors and matrices clamp theirs, runtime-sized
//! arrays clamp to the bound view's length, and host C records every index that was out of
//! bounds. For an entry point whose indices into runtime-sized arrays are affine in the
//! invocation index, host C also writes an unchecked body and the check that picks it.

use std::collections::HashMap;
use std::fmt::Write as _;

use naga::{
    AddressSpace, ArraySize, BinaryOperator as Bin, Expression, Function, Handle, Literal, ScalarKind, Statement,
    TypeInner, UnaryOperator,
};

use super::workgroup::CONTROL;
use super::writer::{ident, Fx, Writer};
use super::Dialect;
use crate::error::KernelError;

type Res<T> = Result<T, KernelError>;

/// An index into a runtime-sized array that is `base + c * li` in the invocation index
/// `li`: the index expression and `c`.
pub(super) type IndexSite = (Handle<Expression>, i64);

/// The condition of [`Writer::entry_prefix_guard`]: invocation `li` works when `x < limit`, and `x`
/// is its value in the first invocation plus `step * li`.
pub(super) struct PrefixGuard {
    x: Handle<Expression>,
    limit: Handle<Expression>,
    step: i64,
    /// The entry point's function with the condition taken out.
    pub(super) unguarded: Function,
}

impl<'a> Writer<'a> {
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
    pub(super) fn runtime_index(
        &self,
        fx: &Fx,
        h: Handle<Expression>,
        array: Handle<Expression>,
        i: &str,
    ) -> Res<String> {
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
            // In a counted loop's unchecked copy: the check before the loop proved it (see
            // `counted.rs`).
            Dialect::HostC if fx.counted.unchecked.contains_key(&h) => fx.counted.unchecked[&h].clone(),
            Dialect::HostC if fx.proven.accesses.contains(&h) => match &fx.f.expressions[h] {
                Expression::Access { index, .. } if fx.proven.lane_sites.contains_key(index) => {
                    let (k, step) = fx.proven.lane_sites[index];
                    let site = format!("xh_lane_site[{k}]");
                    match fx.wg.as_ref().map(|wg| wg.shape) {
                        // One dimension: the loop runs `li` alone.
                        Some([_, 0 | 1, 0 | 1]) | None => format!("{site}.b + (xh_i64)li * {step}"),
                        Some(_) => {
                            format!("{site}.b + (xh_i64)lx * {step} + (xh_i64)ly * {site}.y + (xh_i64)lz * {site}.z")
                        }
                    }
                }
                _ => format!("(xh_u32)({i})"),
            },
            Dialect::HostC => {
                if let (Some(wg), Expression::Access { index, .. }) = (&fx.wg, &fx.f.expressions[h]) {
                    wg.record_site(super::region::Site::Runtime {
                        access: h,
                        index: *index,
                        binding,
                    });
                }
                format!(
                    "xh_rt_index(&{}, (xh_u32)({i}), ctx->n_[{binding}])",
                    Self::oob_flag(fx)
                )
            }
            _ => format!("xh_rt_clamp((xh_u32)({i}), ctx->n_[{binding}])"),
        })
    }

    pub(super) fn clamp(&self, fx: &Fx, idx: &str, n: u32, index: Handle<Expression>) -> String {
        if self.static_max(fx.f, index, 0).is_some_and(|max| max < u64::from(n)) {
            // In bounds in every invocation: a plain index, which the C compiler can
            // vectorise (a clamped store cannot be, before AVX-512 scatters).
            return format!("(xh_u32)({idx})");
        }
        if self.d == Dialect::HostC && fx.proven.fixed.contains(&(index, n)) {
            return format!("(xh_u32)({idx})");
        }
        if self.d == Dialect::HostC {
            if let Some(wg) = &fx.wg {
                wg.record_site(super::region::Site::Fixed { index, len: n });
            }
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

    /// For an entry point without barriers whose indices into runtime-sized arrays are all
    /// affine in the invocation index (`base + c * li`, with `base` made of constants, the
    /// scalar block and the workgroup's id), a function `INNER_inbounds(ctx, wid, nwg)` that
    /// says whether every such index of the workgroup is in bounds: since each index moves
    /// in one direction with `li`, the first and the last invocation bound it. `None` when an
    /// index is not of that form (the checked body then always runs).
    pub(super) fn write_bounds_check(&self, i: usize, inner: &str) -> Res<Option<(String, Vec<IndexSite>)>> {
        let ep = &self.m.entry_points[i];
        let f = &ep.function;
        let fi = self.info.get_entry_point(i);
        let wg = ep.workgroup_size;
        let total = wg[0].saturating_mul(wg[1]).saturating_mul(wg[2]).max(1);
        let one_dimensional = wg[1] <= 1 && wg[2] <= 1;
        let mut sites = Vec::new();
        // Accesses in branches the resolved overrides pruned never run: they need no check.
        let live = emitted_expressions(&f.body);
        for (h, e) in f.expressions.iter() {
            if !live.contains(&h) {
                continue;
            }
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
        let fx = Self::outside_fx(f, fi);
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
        text.push_str(&self.invocation_arguments(ep, &fx)?);
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

    /// For an entry point with an unchecked body whose work is all under one condition that
    /// holds for a prefix of the workgroup's invocations (`if i < n { ... }`, or `if i >= n
    /// { return; }` before it, with `i` moving up with the invocation index and `n` the same
    /// in every invocation): the condition, and the entry point's function without it. The
    /// unchecked body then runs for that prefix alone, a loop with no condition in it, where
    /// the C compiler needs no masked loads and stores (slow on some processors) for a
    /// workgroup that is all active.
    pub(super) fn entry_prefix_guard(&self, i: usize) -> Option<PrefixGuard> {
        let ep = &self.m.entry_points[i];
        let f = &ep.function;
        let fi = self.info.get_entry_point(i);
        let wg = ep.workgroup_size;
        if wg[1] > 1 || wg[2] > 1 {
            return None;
        }
        let total = i64::from(wg[0].max(1));
        let statements: Vec<(&Statement, &naga::Span)> = f.body.span_iter().collect();
        let position = statements.iter().position(|(s, _)| !matches!(s, Statement::Emit(_)))?;
        let Statement::If {
            condition,
            accept,
            reject,
        } = statements[position].0
        else {
            return None;
        };
        let returns_only = |block: &[&Statement]| block.iter().all(|s| matches!(s, Statement::Return { value: None }));
        let accept_list: Vec<&Statement> = accept.iter().collect();
        let reject_list: Vec<&Statement> = reject.iter().collect();
        let after: Vec<&Statement> = statements[position + 1..].iter().map(|(s, _)| *s).collect();
        let Expression::Binary { op, left, right } = f.expressions[*condition] else {
            return None;
        };
        // `active` holds for the invocations that run the work: `x < limit`.
        let (x, limit, rest) = match op {
            Bin::Less if returns_only(&reject_list) && returns_only(&after) => (left, right, accept),
            Bin::Greater if returns_only(&reject_list) && returns_only(&after) => (right, left, accept),
            Bin::GreaterEqual if returns_only(&accept_list) && !accept_list.is_empty() && reject_list.is_empty() => {
                (left, right, &f.body)
            }
            Bin::LessEqual if returns_only(&accept_list) && !accept_list.is_empty() && reject_list.is_empty() => {
                (right, left, &f.body)
            }
            _ => return None,
        };
        let unsigned = |h: Handle<Expression>| {
            matches!(
                fi[h].ty.inner_with(&self.m.types),
                TypeInner::Scalar(naga::Scalar {
                    kind: ScalarKind::Uint,
                    width: 4
                })
            )
        };
        if !unsigned(x) || !unsigned(limit) {
            return None;
        }
        let step = self
            .affine(f, x, true)
            .filter(|&c| c > 0 && c.saturating_mul(total) < 1 << 30)?;
        if self.affine(f, limit, true) != Some(0) {
            return None;
        }
        let mut body = naga::Block::new();
        for (statement, span) in &statements[..position] {
            body.push((*statement).clone(), **span);
        }
        if std::ptr::eq(rest, &f.body) {
            for (statement, span) in &statements[position + 1..] {
                body.push((*statement).clone(), **span);
            }
        } else {
            for (statement, span) in rest.span_iter() {
                body.push(statement.clone(), *span);
            }
            body.push(Statement::Return { value: None }, naga::Span::default());
        }
        let mut unguarded = f.clone();
        unguarded.body = body;
        Some(PrefixGuard {
            x,
            limit,
            step,
            unguarded,
        })
    }

    /// `static xh_u32 NAME_active(ctx, wid, nwg)`: how many invocations, from the first, the
    /// prefix guard lets through in this workgroup, or `0xFFFFFFFFu` when the condition's
    /// value does not move by its step over the workgroup (wrapped around), and the checked
    /// body must run instead.
    pub(super) fn write_active_count(&self, i: usize, inner: &str, guard: &PrefixGuard) -> Res<String> {
        let ep = &self.m.entry_points[i];
        let f = &ep.function;
        let fi = self.info.get_entry_point(i);
        let total = ep.workgroup_size[0].max(1);
        let fx = Self::outside_fx(f, fi);
        let mut text = format!(
            "static xh_u32 {inner}_active(xh_ctx* ctx, xh_u32x3 wid, xh_u32x3 nwg) {{
    xh_u32 li, k;
    xh_u32 x[2] = {{0u, 0u}}, limit = 0u;
    (void)nwg;
    for (k = 0; k < 2u; k++) {{
        li = k == 0u ? 0u : {}u;
",
            total - 1
        );
        text.push_str(&self.invocation_arguments(ep, &fx)?);
        let _ = writeln!(text, "        x[k] = (xh_u32)({});", self.expr(&fx, guard.x)?);
        let _ = writeln!(text, "        limit = (xh_u32)({});", self.expr(&fx, guard.limit)?);
        let span = guard.step as u64 * u64::from(total - 1);
        let _ = write!(
            text,
            "    }}
    if (x[1] < x[0] || (xh_u64)(x[1] - x[0]) != {span}u) return 0xFFFFFFFFu;
    if (limit <= x[0]) return 0u;
    {{ xh_u64 active = ((xh_u64)(limit - x[0]) + {step}u - 1u) / {step}u;
    return active < {total}u ? (xh_u32)active : {total}u; }}
}}
",
            step = guard.step
        );
        Ok(text)
    }

    /// A writing context for code outside the entry point's body (the checks at a
    /// workgroup's start): its arguments by name, nothing baked, every index checked.
    fn outside_fx<'f>(f: &'f Function, fi: &'f naga::valid::FunctionInfo) -> Fx<'f> {
        Fx {
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
            proven: Default::default(),
            calls: Default::default(),
            counted: Default::default(),
        }
    }

    /// The built-ins of invocation `li` and the entry point's arguments made of them, as the
    /// checks at a workgroup's start declare them.
    fn invocation_arguments(&self, ep: &naga::EntryPoint, fx: &Fx) -> Res<String> {
        let mut text = self.builtins_of_li(ep.workgroup_size, "        ", false);
        for (k, arg) in ep.function.arguments.iter().enumerate() {
            let _ = writeln!(
                text,
                "        XH_UNUSED {} {} = {};",
                self.type_name(arg.ty)?,
                fx.args[k],
                self.builtin_name(arg, &ep.name)?
            );
        }
        Ok(text)
    }

    pub(super) fn runtime_array_binding_of(&self, f: &Function, array: Handle<Expression>) -> Option<u32> {
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
}

/// The expressions that `block`'s statements, and those of the blocks inside them, emit: those
/// that can run (an access is always emitted before it is used).
pub(super) fn emitted_expressions(block: &naga::Block) -> std::collections::HashSet<Handle<Expression>> {
    let mut live = std::collections::HashSet::new();
    crate::ir::for_each_statement(block, &mut |statement| {
        if let Statement::Emit(range) = statement {
            live.extend(range.clone());
        }
    });
    live
}
