//! Host C's checks per region. In workgroup mode a region whose indices are affine in the
//! local invocation id (with coefficients and an offset the same in every invocation, such
//! as a tile's `row * dims.k + t * 16u + lid.x`) is written twice: with every index checked,
//! and without the checks that a test before the region's loop proved needless for this
//! workgroup at this point. The test works out the least and greatest value of each index
//! over the workgroup (an affine form takes them at the corners of the workgroup's box) in
//! 64-bit arithmetic that notes any overflow, so that an index the test passes is in bounds in
//! every invocation. Bounds tests on sizes (`row < dims.m`) are settled the same way: in a
//! workgroup in the middle of a matrix they hold everywhere, and the second copy has no
//! condition left, which is what lets the C compiler vectorise a tile's loads.
//!
//! The values the test reads are the ones every invocation sees: constants, the scalar block,
//! the workgroup's id, values an earlier region left in a frame slot, and locals the region
//! does not store to. Anything else (a value loaded from a buffer, a local the region
//! changes) leaves its index checked.

use std::collections::{HashMap, HashSet};

use naga::{
    AddressSpace, BinaryOperator as Bin, Expression, Handle, LocalVariable, ScalarKind, Statement, TypeInner,
    UnaryOperator,
};

use super::workgroup::CONTROL;
use super::writer::{Fx, Writer};
use crate::error::KernelError;

type Res<T> = Result<T, KernelError>;

/// An index that the first copy of a region checks.
#[derive(Clone, Copy)]
pub(super) enum Site {
    /// `access` indexes the runtime-sized array of buffer `binding` with `index`.
    Runtime {
        access: Handle<Expression>,
        index: Handle<Expression>,
        binding: u32,
    },
    /// `index` into a fixed-size array, vector or matrix of `len` elements.
    Fixed { index: Handle<Expression>, len: u32 },
}

/// What the test before a region's second copy proved for every invocation of the workgroup.
#[derive(Default, Clone)]
pub(super) struct Proven {
    /// Accesses to runtime-sized arrays whose index is in bounds.
    pub(super) accesses: HashSet<Handle<Expression>>,
    /// Indices into fixed-size arrays, vectors and matrices (with their length) in bounds.
    pub(super) fixed: HashSet<(Handle<Expression>, u32)>,
    /// Comparisons with the same outcome everywhere, and that outcome.
    pub(super) conditions: HashMap<Handle<Expression>, bool>,
    /// Indices of proven accesses that move by a constant step along x, the direction the
    /// innermost loop over the invocations takes: the slot of `xh_lane_site` that holds the
    /// index's form (its value at the workgroup's origin and its step along each direction),
    /// and the step along x. The second copy writes them as the origin plus `lx` times the
    /// step plus `ly` and `lz` times the form's steps along y and z, in 64 bits, which the C
    /// compiler sees as contiguous (or strided) where the 32-bit sum it must let wrap around
    /// is a gather, or a scatter it cannot write at all.
    pub(super) lane_sites: HashMap<Handle<Expression>, (usize, i64)>,
}

/// How many operations a value from an earlier region may take for the second copy to
/// compute it again rather than read it from the frame.
const REMAT_BUDGET: u32 = 12;

impl Proven {
    fn is_empty(&self) -> bool {
        self.accesses.is_empty() && self.fixed.is_empty() && self.conditions.is_empty()
    }
}

/// A region's second copy: the test that picks it (a C expression, valid before the
/// region's loop once the first invocation's built-ins are declared) and its statements.
pub(super) struct SecondCopy {
    pub(super) test: String,
    /// Statements, after the test, that fill `xh_lane_site` (see [`Proven::lane_sites`]).
    pub(super) lane_sites: Vec<String>,
    pub(super) body: String,
}

/// What the region being written lets the test read.
struct Start<'r> {
    region: usize,
    /// Locals the region loads once before its loop and never stores to.
    ready: &'r HashSet<Handle<LocalVariable>>,
}

/// How deep the test follows an expression before it gives up.
const DEPTH: u32 = 48;

impl<'a> Writer<'a> {
    /// The second copy of the region being written (its statements `statements`), when the
    /// test can settle at least one of its checks; `ready` are the locals whose value before
    /// the region's loop is the one every invocation reads.
    pub(super) fn region_second_copy(
        &self,
        fx: &mut Fx,
        statements: &[(&Statement, naga::Span)],
        ready: &HashSet<Handle<LocalVariable>>,
    ) -> Res<Option<SecondCopy>> {
        let Some(wg) = fx.wg.as_ref() else { return Ok(None) };
        let region = wg.region.get();
        if region == CONTROL {
            return Ok(None);
        }
        let sites = wg.region_sites.take();
        let start = Start { region, ready };
        // The test reads values from the frame, or writes them out again from their
        // definitions: a value of this region is not computed yet before its loop.
        let outside: HashMap<Handle<Expression>, String> = fx
            .baked
            .iter()
            .filter(|(h, _)| {
                wg.private_exprs.contains(h) && wg.expr_def.borrow().get(h).is_some_and(|&def| def != region)
            })
            .map(|(h, name)| (*h, name.clone()))
            .collect();
        let inside = std::mem::replace(&mut fx.baked, outside);
        let claims = self.region_claims(fx, &start, &sites, statements);
        fx.baked = inside;
        let (claims, lane_sites, proven) = claims?;
        if proven.is_empty() {
            return Ok(None);
        }
        let wg = fx.wg.as_ref().expect("workgroup mode");
        // The second copy defines the region's values again: what the first copy added to
        // the frame and to the register copies is already there.
        let frame = wg.frame.borrow().len();
        let hoisted = wg.hoisted.borrow().get(&region).map_or(0, Vec::len);
        // The second copy computes the region's values again, under the same names. Values
        // of earlier regions that differ between invocations and are cheap to compute (a
        // row, a tile's slot) are computed again rather than read from the frame: read,
        // they are a gather the C compiler cannot vectorise; computed, an index affine in
        // the invocation, as contiguous as the data it reaches.
        let mut outside: HashMap<Handle<Expression>, String> = fx
            .baked
            .iter()
            .filter(|(h, _)| {
                wg.private_exprs.contains(h) && wg.expr_def.borrow().get(h).is_some_and(|&def| def != region)
            })
            .map(|(h, name)| (*h, name.clone()))
            .collect();
        let again: Vec<Handle<Expression>> = outside
            .keys()
            .copied()
            .filter(|h| !wg.uniform.exprs.contains(h))
            .filter(|&h| {
                let mut budget = REMAT_BUDGET;
                self.cheap_again(fx, &outside, h, &mut budget)
            })
            .collect();
        for h in &again {
            outside.remove(h);
        }
        let baked = std::mem::replace(&mut fx.baked, outside);
        let returns = (wg.region_returns.get(), wg.any_returns.get());
        wg.second_copy.set(true);
        fx.proven = proven;
        let mut body = String::new();
        let mut written = Ok(());
        for (s, span) in statements {
            written = self.statement(fx, s, *span, &mut body);
            if written.is_err() {
                break;
            }
        }
        fx.proven = Proven::default();
        fx.baked = baked;
        let wg = fx.wg.as_ref().expect("workgroup mode");
        wg.second_copy.set(false);
        wg.frame.borrow_mut().truncate(frame);
        if let Some(values) = wg.hoisted.borrow_mut().get_mut(&region) {
            values.truncate(hoisted);
        }
        wg.region_returns.set(returns.0);
        wg.any_returns.set(returns.1);
        written?;
        Ok(Some(SecondCopy {
            test: claims.join(" & "),
            lane_sites,
            body,
        }))
    }

    /// The C claims the test makes (each an `int` that is 1 when it holds), the statements
    /// that fill `xh_lane_site`, and what the claims prove together.
    fn region_claims(
        &self,
        fx: &Fx,
        start: &Start,
        sites: &[Site],
        statements: &[(&Statement, naga::Span)],
    ) -> Res<(Vec<String>, Vec<String>, Proven)> {
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let [sx, sy, sz] = wg.shape.map(|d| d.max(1));
        let box_ = format!("{sx}, {sy}, {sz}");
        let mut claims = Vec::new();
        let mut lane_sites = Vec::new();
        let mut proven = Proven::default();
        let mut seen = HashSet::new();
        for site in sites {
            match *site {
                Site::Runtime { access, index, binding } => {
                    if proven.accesses.contains(&access) {
                        continue;
                    }
                    let Some(form) = self.linear(fx, start, index, 0)? else {
                        continue;
                    };
                    // Arrays of more than 2^31 elements are left to the checks, so that a
                    // signed index in bounds is also non-negative.
                    claims.push(format!(
                        "(ctx->n_[{binding}] <= 0x80000000u && xh_lin_in(&xh_bad, {form}, 0, (xh_i64)ctx->n_[{binding}], {box_}))"
                    ));
                    proven.accesses.insert(access);
                    // An index proven in bounds is its form's value, exactly (the test notes
                    // any overflow).
                    if !proven.lane_sites.contains_key(&index) {
                        if let Some(step) = self.lane_step(fx, start, index, 0) {
                            let k = proven.lane_sites.len();
                            proven.lane_sites.insert(index, (k, step));
                            lane_sites.push(format!("xh_lane_site[{k}] = {form};"));
                        }
                    }
                }
                Site::Fixed { index, len } => {
                    if !seen.insert((index, len)) {
                        continue;
                    }
                    let Some(form) = self.linear(fx, start, index, 0)? else {
                        continue;
                    };
                    claims.push(format!("xh_lin_in(&xh_bad, {form}, 0, {len}, {box_})"));
                    proven.fixed.insert((index, len));
                }
            }
        }
        let mut comparisons = Vec::new();
        for (s, _) in statements {
            emitted(s, &mut comparisons);
        }
        for h in comparisons {
            let Expression::Binary { op, left, right } = fx.f.expressions[h] else {
                continue;
            };
            // `x < size` (and the like) with `x` moving with the invocation and `size` from
            // the scalar block or a buffer's length: the tests that keep a workgroup at an
            // edge from reaching past the data. Any other comparison is left alone: a test
            // that failed on it would cost the region its unchecked indices.
            let (x, size, strict, holds) = match op {
                Bin::Less => (left, right, true, true),
                Bin::LessEqual => (left, right, false, true),
                Bin::GreaterEqual => (left, right, true, false),
                Bin::Greater => (left, right, false, false),
                _ => continue,
            };
            let (x, size, strict, holds) = if self.at_start(fx, start, size, 0) && self.mentions_size(fx, size, 0) {
                (x, size, strict, holds)
            } else if self.at_start(fx, start, x, 0) && self.mentions_size(fx, x, 0) {
                // `size > x` is `x < size`, and `size >= x` is `x <= size`.
                (size, x, !strict, !holds)
            } else {
                continue;
            };
            if self.at_start(fx, start, x, 0) {
                continue;
            }
            let Some(signed) = int_scalar(self, fx, x) else {
                continue;
            };
            let Some(form) = self.linear(fx, start, x, 0)? else {
                continue;
            };
            let bound = self.expr(fx, size)?;
            let least = if signed { "-0x80000000LL" } else { "0" };
            // `x < size`: every value of `x` in `[least, size)`; `x <= size`: in `[least, size]`.
            let end = if strict {
                format!("(xh_i64)({bound})")
            } else {
                format!("(xh_i64)({bound}) + 1")
            };
            claims.push(format!("xh_lin_in(&xh_bad, {form}, {least}, {end}, {box_})"));
            proven.conditions.insert(h, holds);
        }
        Ok((claims, lane_sites, proven))
    }

    /// How much `h` grows from one invocation to the next along x, when that is a constant:
    /// the same rules as [`Writer::linear`], with factors that are literals.
    fn lane_step(&self, fx: &Fx, start: &Start, h: Handle<Expression>, depth: u32) -> Option<i64> {
        if depth > DEPTH || int_scalar(self, fx, h).is_none() {
            return None;
        }
        if self.at_start(fx, start, h, 0) {
            return Some(0);
        }
        let builtin = |e: Handle<Expression>| match fx.f.expressions[e] {
            Expression::FunctionArgument(k) => match fx.f.arguments[k as usize].binding {
                Some(naga::Binding::BuiltIn(b)) => Some(b),
                _ => None,
            },
            _ => None,
        };
        let rec = |e: Handle<Expression>| self.lane_step(fx, start, e, depth + 1);
        match &fx.f.expressions[h] {
            Expression::FunctionArgument(_) => match builtin(h)? {
                naga::BuiltIn::LocalInvocationIndex => Some(1),
                _ => None,
            },
            Expression::AccessIndex { base, index } => match (builtin(*base)?, index) {
                (naga::BuiltIn::LocalInvocationId | naga::BuiltIn::GlobalInvocationId, 0) => Some(1),
                (naga::BuiltIn::LocalInvocationId | naga::BuiltIn::GlobalInvocationId, 1 | 2) => Some(0),
                _ => None,
            },
            Expression::As {
                expr,
                kind: ScalarKind::Uint | ScalarKind::Sint,
                convert: None | Some(4),
            } => rec(*expr),
            Expression::Unary {
                op: UnaryOperator::Negate,
                expr,
            } => rec(*expr)?.checked_neg(),
            Expression::Binary { op, left, right } => match op {
                Bin::Add => rec(*left)?.checked_add(rec(*right)?),
                Bin::Subtract => rec(*left)?.checked_sub(rec(*right)?),
                Bin::Multiply => {
                    let (form, factor) = if self.at_start(fx, start, *right, 0) {
                        (*left, *right)
                    } else if self.at_start(fx, start, *left, 0) {
                        (*right, *left)
                    } else {
                        return None;
                    };
                    let step = rec(form)?;
                    if step == 0 {
                        return Some(0);
                    }
                    let literal = match fx.f.expressions[factor] {
                        Expression::Literal(naga::Literal::U32(v)) => i64::from(v),
                        Expression::Literal(naga::Literal::I32(v)) => i64::from(v),
                        _ => return None,
                    };
                    step.checked_mul(literal)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether `h`, a value an earlier region computed, can be computed again as cheaply as
    /// it is read: a few operations on constants, built-ins, the scalar block and values
    /// `outside` (left in the frame) has. `budget` counts the operations left.
    fn cheap_again(
        &self,
        fx: &Fx,
        outside: &HashMap<Handle<Expression>, String>,
        h: Handle<Expression>,
        budget: &mut u32,
    ) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let mut again = |e: Handle<Expression>| outside.contains_key(&e) || self.cheap_again(fx, outside, e, budget);
        match &fx.f.expressions[h] {
            Expression::Literal(_) | Expression::Constant(_) | Expression::ZeroValue(_) => true,
            Expression::FunctionArgument(_) => !self.is_pointer_expr(fx, h),
            Expression::AccessIndex { base, .. } => !self.is_pointer_expr(fx, h) && again(*base),
            Expression::Swizzle { vector, .. } => again(*vector),
            Expression::Splat { value, .. } => again(*value),
            Expression::Unary { expr, .. } | Expression::As { expr, .. } => again(*expr),
            Expression::Binary { left, right, .. } => again(*left) && again(*right),
            Expression::Load { pointer } => {
                let mut p = *pointer;
                loop {
                    match &fx.f.expressions[p] {
                        Expression::AccessIndex { base, .. } => p = *base,
                        Expression::GlobalVariable(g) => {
                            return self.m.global_variables[*g].space == AddressSpace::Immediate
                        }
                        _ => return false,
                    }
                }
            }
            _ => false,
        }
    }

    fn is_pointer_expr(&self, fx: &Fx, h: Handle<Expression>) -> bool {
        matches!(
            fx.fi[h].ty.inner_with(&self.m.types),
            TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. }
        )
    }

    /// Whether `h` has one value in every invocation that the test can write before the
    /// region's loop (see the module's documentation).
    fn at_start(&self, fx: &Fx, start: &Start, h: Handle<Expression>, depth: u32) -> bool {
        let wg = fx.wg.as_ref().expect("workgroup mode");
        if depth > DEPTH || !wg.uniform.exprs.contains(&h) {
            return false;
        }
        if fx.baked.contains_key(&h) {
            // Left in the frame by an earlier region.
            return true;
        }
        let ok = |e: Handle<Expression>| self.at_start(fx, start, e, depth + 1);
        match &fx.f.expressions[h] {
            Expression::Literal(_) | Expression::Constant(_) | Expression::ZeroValue(_) => true,
            Expression::FunctionArgument(_) => true,
            Expression::ArrayLength(_) => true,
            Expression::Load { pointer } => {
                let mut p = *pointer;
                let mut indexed = false;
                loop {
                    match &fx.f.expressions[p] {
                        Expression::AccessIndex { base, .. } => p = *base,
                        Expression::Access { base, index } => {
                            if !ok(*index) {
                                return false;
                            }
                            indexed = true;
                            p = *base;
                        }
                        // The scalar block, or a member of a buffer bound read-only (a
                        // `var<uniform>` block): the test reads it as it is. An element a
                        // computed index picks from a buffer stays with the checked copy,
                        // which clamps that index.
                        Expression::GlobalVariable(g) => {
                            let space = self.m.global_variables[*g].space;
                            return space == AddressSpace::Immediate || (!indexed && super::uniform::read_only(space));
                        }
                        Expression::LocalVariable(l) => {
                            // Loaded in this region from a local it does not change: the
                            // value the region started with.
                            return start.ready.contains(l) && wg.expr_def.borrow().get(&h) == Some(&start.region);
                        }
                        _ => return false,
                    }
                }
            }
            Expression::Access { base, index } => ok(*base) && ok(*index),
            Expression::AccessIndex { base, .. } => ok(*base),
            Expression::Splat { value, .. } => ok(*value),
            Expression::Swizzle { vector, .. } => ok(*vector),
            Expression::Compose { components, .. } => components.iter().all(|&c| ok(c)),
            Expression::Unary { expr, .. } | Expression::As { expr, .. } => ok(*expr),
            Expression::Binary { left, right, .. } => ok(*left) && ok(*right),
            Expression::Select {
                condition,
                accept,
                reject,
            } => ok(*condition) && ok(*accept) && ok(*reject),
            Expression::Math {
                arg, arg1, arg2, arg3, ..
            } => ok(*arg) && [arg1, arg2, arg3].into_iter().flatten().all(|&a| ok(a)),
            _ => false,
        }
    }

    /// Whether uniform `h` is made from a size: a member of the scalar block or of a buffer
    /// bound read-only (a `var<uniform>` block), or a buffer's length.
    fn mentions_size(&self, fx: &Fx, h: Handle<Expression>, depth: u32) -> bool {
        if depth > DEPTH {
            return false;
        }
        let any = |e: Handle<Expression>| self.mentions_size(fx, e, depth + 1);
        match &fx.f.expressions[h] {
            Expression::ArrayLength(_) => true,
            Expression::Load { pointer } => {
                let mut p = *pointer;
                let mut indexed = false;
                loop {
                    match &fx.f.expressions[p] {
                        Expression::AccessIndex { base, .. } => p = *base,
                        Expression::Access { base, .. } => {
                            indexed = true;
                            p = *base;
                        }
                        Expression::GlobalVariable(g) => {
                            let space = self.m.global_variables[*g].space;
                            return space == AddressSpace::Immediate || (!indexed && super::uniform::read_only(space));
                        }
                        _ => return false,
                    }
                }
            }
            Expression::Unary { expr, .. } | Expression::As { expr, .. } => any(*expr),
            Expression::Binary { left, right, .. } => any(*left) || any(*right),
            Expression::Math { arg, arg1, .. } => any(*arg) || arg1.is_some_and(any),
            _ => false,
        }
    }

    /// `h`, a 32-bit integer, as an `xh_lin` (an offset and a coefficient per dimension of
    /// the local invocation id, worked out exactly), or `None` when it is not affine in the
    /// local invocation id with values the test can read.
    ///
    /// The form is exact over the integers while the kernel computes modulo 2^32; the two
    /// agree wherever the form's value lies in the 32-bit range, which is all the test
    /// accepts.
    fn linear(&self, fx: &Fx, start: &Start, h: Handle<Expression>, depth: u32) -> Res<Option<String>> {
        if depth > DEPTH {
            return Ok(None);
        }
        let Some(signed) = int_scalar(self, fx, h) else {
            return Ok(None);
        };
        if self.at_start(fx, start, h, 0) {
            let v = self.expr(fx, h)?;
            let cast = if signed { "xh_i32" } else { "xh_u32" };
            return Ok(Some(format!("xh_lin_of((xh_i64)({cast})({v}), 0, 0, 0)")));
        }
        let wg = fx.wg.as_ref().expect("workgroup mode");
        let [sx, sy, _] = wg.shape.map(|d| i64::from(d.max(1)));
        let builtin = |e: Handle<Expression>| match fx.f.expressions[e] {
            Expression::FunctionArgument(k) => match fx.f.arguments[k as usize].binding {
                Some(naga::Binding::BuiltIn(b)) => Some(b),
                _ => None,
            },
            _ => None,
        };
        let unit = |d: u32| match d {
            0 => Some("0, 1, 0, 0"),
            1 => Some("0, 0, 1, 0"),
            2 => Some("0, 0, 0, 1"),
            _ => None,
        };
        let rec = |e: Handle<Expression>| self.linear(fx, start, e, depth + 1);
        Ok(match &fx.f.expressions[h] {
            Expression::FunctionArgument(_) => match builtin(h) {
                Some(naga::BuiltIn::LocalInvocationIndex) => Some(format!("xh_lin_of(0, 1, {sx}, {})", sx * sy)),
                _ => None,
            },
            Expression::AccessIndex { base, index } => match (builtin(*base), unit(*index)) {
                (Some(naga::BuiltIn::LocalInvocationId), Some(u)) => Some(format!("xh_lin_of({u})")),
                (Some(naga::BuiltIn::GlobalInvocationId), Some(_)) => {
                    let d = ["x", "y", "z"][*index as usize];
                    let size = wg.shape[*index as usize].max(1);
                    let mut c = [0; 3];
                    c[*index as usize] = 1;
                    Some(format!(
                        "xh_lin_of((xh_i64)wid.{d} * {size}, {}, {}, {})",
                        c[0], c[1], c[2]
                    ))
                }
                _ => None,
            },
            Expression::As {
                expr,
                kind: ScalarKind::Uint | ScalarKind::Sint,
                convert: None | Some(4),
            } if int_scalar(self, fx, *expr).is_some() => rec(*expr)?,
            Expression::Unary {
                op: UnaryOperator::Negate,
                expr,
            } => rec(*expr)?.map(|p| format!("xh_lin_scale(&xh_bad, {p}, -1)")),
            Expression::Binary { op, left, right } => match op {
                Bin::Add | Bin::Subtract => match (rec(*left)?, rec(*right)?) {
                    (Some(p), Some(q)) => {
                        let f = if *op == Bin::Add { "xh_lin_add" } else { "xh_lin_sub" };
                        Some(format!("{f}(&xh_bad, {p}, {q})"))
                    }
                    _ => None,
                },
                Bin::Multiply => {
                    let (form, factor) = if self.at_start(fx, start, *right, 0) {
                        (*left, *right)
                    } else if self.at_start(fx, start, *left, 0) {
                        (*right, *left)
                    } else {
                        return Ok(None);
                    };
                    let cast = if int_scalar(self, fx, factor) == Some(true) {
                        "xh_i32"
                    } else {
                        "xh_u32"
                    };
                    match rec(form)? {
                        Some(p) => {
                            let k = self.expr(fx, factor)?;
                            Some(format!("xh_lin_scale(&xh_bad, {p}, (xh_i64)({cast})({k}))"))
                        }
                        None => None,
                    }
                }
                _ => None,
            },
            _ => None,
        })
    }
}

/// `Some(signed)` when `h` is a 32-bit integer scalar.
fn int_scalar(w: &Writer, fx: &Fx, h: Handle<Expression>) -> Option<bool> {
    match fx.fi[h].ty.inner_with(&w.m.types) {
        TypeInner::Scalar(naga::Scalar { kind, width: 4 }) => match kind {
            ScalarKind::Sint => Some(true),
            ScalarKind::Uint => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Adds the comparisons `s` (and what it holds) computes to `out`.
fn emitted(s: &Statement, out: &mut Vec<Handle<Expression>>) {
    let block = |b: &naga::Block, out: &mut Vec<Handle<Expression>>| b.iter().for_each(|s| emitted(s, out));
    match s {
        Statement::Emit(range) => out.extend(range.clone()),
        Statement::Block(b) => block(b, out),
        Statement::If { accept, reject, .. } => {
            block(accept, out);
            block(reject, out);
        }
        Statement::Switch { cases, .. } => cases.iter().for_each(|c| block(&c.body, out)),
        Statement::Loop { body, continuing, .. } => {
            block(body, out);
            block(continuing, out);
        }
        _ => {}
    }
}

/// The C the test's claims call, in host C's prelude.
pub(super) const HELPERS: &str = "typedef struct xh_lin { xh_i64 b, x, y, z; } xh_lin;
XH_FN xh_lin xh_lin_of(xh_i64 b, xh_i64 x, xh_i64 y, xh_i64 z) { xh_lin r; r.b = b; r.x = x; r.y = y; r.z = z; return r; }
XH_FN xh_i64 xh_lin_sum(int* bad, xh_i64 a, xh_i64 b) { xh_i64 r; *bad |= __builtin_add_overflow(a, b, &r); return r; }
XH_FN xh_i64 xh_lin_diff(int* bad, xh_i64 a, xh_i64 b) { xh_i64 r; *bad |= __builtin_sub_overflow(a, b, &r); return r; }
XH_FN xh_i64 xh_lin_prod(int* bad, xh_i64 a, xh_i64 b) { xh_i64 r; *bad |= __builtin_mul_overflow(a, b, &r); return r; }
XH_FN xh_lin xh_lin_add(int* bad, xh_lin p, xh_lin q) { return xh_lin_of(xh_lin_sum(bad, p.b, q.b), xh_lin_sum(bad, p.x, q.x), xh_lin_sum(bad, p.y, q.y), xh_lin_sum(bad, p.z, q.z)); }
XH_FN xh_lin xh_lin_sub(int* bad, xh_lin p, xh_lin q) { return xh_lin_of(xh_lin_diff(bad, p.b, q.b), xh_lin_diff(bad, p.x, q.x), xh_lin_diff(bad, p.y, q.y), xh_lin_diff(bad, p.z, q.z)); }
XH_FN xh_lin xh_lin_scale(int* bad, xh_lin p, xh_i64 k) { return xh_lin_of(xh_lin_prod(bad, p.b, k), xh_lin_prod(bad, p.x, k), xh_lin_prod(bad, p.y, k), xh_lin_prod(bad, p.z, k)); }
XH_FN xh_i64 xh_lin_end(int* bad, xh_i64 v, xh_i64 c, xh_i64 size, int top) { xh_i64 t = xh_lin_prod(bad, c, size - 1); return (top ? t > 0 : t < 0) ? xh_lin_sum(bad, v, t) : v; }
XH_FN int xh_lin_in(int* bad, xh_lin p, xh_i64 lo, xh_i64 end, xh_i64 sx, xh_i64 sy, xh_i64 sz) {
    xh_i64 least = xh_lin_end(bad, xh_lin_end(bad, xh_lin_end(bad, p.b, p.x, sx, 0), p.y, sy, 0), p.z, sz, 0);
    xh_i64 most = xh_lin_end(bad, xh_lin_end(bad, xh_lin_end(bad, p.b, p.x, sx, 1), p.y, sy, 1), p.z, sz, 1);
    return least >= lo && most < end;
}
";
