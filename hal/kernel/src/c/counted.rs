//! Host C: counted loops run unchecked when a check before them proves it safe.
//!
//! A loop `for (var k = first; k < bound; k++)` whose indices into runtime-sized arrays are
//! affine in `k` (`a + k * s` in 32-bit arithmetic, with `a` and `s` the same in every
//! iteration) touches, for each index, a run of addresses whose ends are its values in the
//! first and the last iteration. A check before the loop works those out; when every run
//! lies inside its array and the loop is short enough, a second copy of the loop runs with
//! plain indices, no test of the launch's cancel flag per iteration, the buffer pointers
//! and the scalar block's values in locals, and a `for` the C compiler can count: the shape
//! its vectoriser needs. Otherwise the loop runs as it always did, every index clamped.
//!
//! Why the check is exact: every operation from `k` to the index is a ring operation modulo
//! 2^32 (an add, a subtract, a multiply by a value the loop does not change, a conversion
//! between `u32` and `i32`), so index(k) = a + (k - first) * s modulo 2^32, with `a` its
//! value in the first iteration and `s` the difference between the second and the first.
//! Taken as integers, the values `a + j * s` for `j` from 0 to the trip count less one lie
//! between those at the ends; when both ends are inside `[0, n)`, so is every value, and a
//! value in `[0, n)` with `n <= 2^32` is its own residue: the index the loop computes.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use naga::{
    ArraySize, BinaryOperator as Bin, Block, Expression, Function, Handle, Literal, LocalVariable, ScalarKind,
    Statement, TypeInner,
};

use super::bounds::emitted_expressions;
use super::uniform::{read_only, root, stored_locals, value_operands, Root};
use super::writer::{Fx, Writer};
use crate::error::KernelError;

type Res<T> = Result<T, KernelError>;

/// The most iterations the unchecked copy runs: with no test of the cancel flag inside it
/// (and no loop inside it), a copy stays far below the launch's time limit.
const MOST_ITERATIONS: u32 = 1 << 24;

/// The state of the unchecked copy being written, kept in [`Fx`].
#[derive(Default)]
pub(super) struct FastCopy {
    /// Accesses into runtime-sized arrays the check proved in bounds for every iteration,
    /// with their indices as 64-bit affine functions of the counter (the form whose
    /// addresses the C compiler sees move by a fixed step).
    pub(super) unchecked: HashMap<Handle<Expression>, String>,
    /// Expressions worked out before the loop: the copy's `Emit`s skip them.
    pub(super) hoisted: HashSet<Handle<Expression>>,
    /// Whether buffer pointers are read from the locals declared before the loop.
    pub(super) pointer_locals: bool,
}

/// A loop `for (; k < bound; k = k + 1)` of the form naga gives a WGSL `for`.
struct CountedLoop {
    counter: Handle<LocalVariable>,
    bound: Handle<Expression>,
    /// The position in the body of the `if (k < bound) {} else { break; }` that ends it.
    exit: usize,
    /// The C type of the counter (`xh_u32` or `xh_i32`).
    c_type: &'static str,
    /// The accesses into runtime-sized arrays whose indices are affine in the counter.
    sites: Vec<Site>,
}

/// An access into a runtime-sized array whose index is affine in the counter.
struct Site {
    access: Handle<Expression>,
    index: Handle<Expression>,
    binding: u32,
    /// The counter's coefficient, when the kernel's literals fix it.
    step: Option<i64>,
}

/// How an integer expression depends on the loop counter.
#[derive(Clone, Copy, PartialEq)]
enum Dependence {
    Invariant,
    /// Affine, with the counter's coefficient when the kernel's literals fix it (modulo
    /// 2^32).
    Affine(Option<i64>),
}

impl Dependence {
    /// The counter's coefficient, when known.
    fn coefficient(self) -> Option<i64> {
        match self {
            Dependence::Invariant => Some(0),
            Dependence::Affine(c) => c,
        }
    }
}

/// What the analysis of one loop knows.
struct Scope<'f> {
    f: &'f Function,
    counter: Handle<LocalVariable>,
    /// Expressions the loop's statements emit.
    emitted: HashSet<Handle<Expression>>,
    /// Locals the loop may change.
    stored: HashSet<Handle<LocalVariable>>,
}

impl<'a> Writer<'a> {
    /// Host C, outside workgroup mode: writes `Loop { body, continuing, break_if }` as a
    /// checked counted loop with an unchecked copy, when it is a counted loop whose body has
    /// no loop of its own and an index affine in its counter; `false` when it is not (the
    /// caller then writes the plain loop).
    pub(super) fn counted_loop(
        &self,
        fx: &mut Fx,
        body: &Block,
        continuing: &Block,
        break_if: Option<Handle<Expression>>,
        out: &mut String,
    ) -> Res<bool> {
        if fx.wg.is_some() || fx.unchecked || !fx.counted.unchecked.is_empty() {
            return Ok(false);
        }
        let Some(plan) = self.counted_plan(fx, body, continuing, break_if) else {
            return Ok(false);
        };
        let pad = Self::pad(fx);
        let tag = out.len();
        let (first, limit, fast) = (
            format!("xv_first{tag}"),
            format!("xv_bound{tag}"),
            format!("xv_fast{tag}"),
        );
        let ty = plan.c_type;
        let Some(counter) = fx.locals.get(&plan.counter).cloned() else {
            return Ok(false);
        };
        let saved = fx.baked.clone();
        let _ = writeln!(out, "{pad}{{");
        // The buffer pointers, and the scalar block's values the body reads, in locals: read
        // in the loop through the context, each would be loaded again after every store of a
        // float (strict aliasing is off). The check below reads the same copies, so the
        // unchecked copy indexes with the very values it proved.
        out.push_str(&self.pointer_locals(&pad, "ctx"));
        fx.counted.pointer_locals = true;
        for h in self.hoistable_loads(fx, body) {
            let value = self.expr(fx, h)?;
            self.bake(fx, h, value, out)?;
            fx.counted.hoisted.insert(h);
        }
        let bound = self.expr(fx, plan.bound)?;
        let _ = writeln!(
            out,
            "{pad}{ty} {first} = {counter}; {ty} {limit} = {bound}; xh_bool {fast} = false;"
        );
        let mut indices: Vec<(Handle<Expression>, u32)> = Vec::new();
        for &Site { index, binding, .. } in &plan.sites {
            if !indices.contains(&(index, binding)) {
                indices.push((index, binding));
            }
        }
        for k in 0..indices.len() {
            let _ = writeln!(out, "{pad}XH_UNUSED xh_i64 xv_a{tag}_{k} = 0, xv_s{tag}_{k} = 0;");
        }
        let _ = writeln!(
            out,
            "{pad}if ({first} < {limit} && (xh_i64){limit} - (xh_i64){first} <= {MOST_ITERATIONS} && !__atomic_load_n(ctx->cancel_, __ATOMIC_RELAXED)) {{"
        );
        let _ = writeln!(
            out,
            "{pad}    xh_i64 xv_last = (xh_i64){limit} - (xh_i64){first} - 1, xv_z;"
        );
        let _ = writeln!(out, "{pad}    {fast} = true;");
        // The indices in the first iteration and the second: the counter's loads read
        // `first` and `first + 1` while they are written.
        let loads: Vec<Handle<Expression>> =
            fx.f.expressions
                .iter()
                .filter(|&(h, _)| self.loaded_local(fx.f, h) == Some(plan.counter))
                .map(|(h, _)| h)
                .collect();
        let next = if ty == "xh_i32" {
            format!("(xh_i32)({first} + 1)")
        } else {
            format!("(xh_u32)({first} + 1u)")
        };
        // Each distinct index: its value in the first iteration (`xv_a`) and its step (`xv_s`),
        // in 64 bits, kept for the unchecked copy.
        for (k, &(index, binding)) in indices.iter().enumerate() {
            let at = |value: &str, fx: &mut Fx| -> Res<String> {
                for &h in &loads {
                    fx.baked.insert(h, value.to_owned());
                }
                let text = self.expr(fx, index);
                for h in &loads {
                    fx.baked.remove(h);
                }
                text
            };
            let start = at(&first, fx)?;
            let second = at(&next, fx)?;
            let n = format!("(xh_i64)ctx->n_[{binding}]");
            let (a, s) = (format!("xv_a{tag}_{k}"), format!("xv_s{tag}_{k}"));
            let _ = writeln!(
                out,
                "{pad}    {a} = (xh_i64)(xh_u32)({start}); {s} = (xh_i64)(xh_i32)((xh_u32)({second}) - (xh_u32){a});"
            );
            let _ = writeln!(
                out,
                "{pad}    xv_z = {a} + xv_last * {s}; if ({a} >= {n} || xv_z < 0 || xv_z >= {n}) {fast} = false;"
            );
        }
        let mut unchecked = HashMap::new();
        for (k, &(index, binding)) in indices.iter().enumerate() {
            for site in plan
                .sites
                .iter()
                .filter(|site| (site.index, site.binding) == (index, binding))
            {
                // A step the kernel's literals fix is written as a literal, so that the C
                // compiler sees contiguous elements as such.
                let stride = match site.step {
                    Some(c) => format!("{}", c as u32 as i32),
                    None => format!("xv_s{tag}_{k}"),
                };
                unchecked.insert(
                    site.access,
                    format!("xv_a{tag}_{k} + ((xh_i64){counter} - (xh_i64){first}) * {stride}"),
                );
            }
        }
        let _ = writeln!(out, "{pad}}}");

        // The unchecked copy: a `for` the C compiler can count, with no exit test in it.
        let _ = writeln!(out, "{pad}if ({fast}) {{");
        fx.counted.unchecked = unchecked;
        let step = if ty == "xh_i32" { "1" } else { "1u" };
        let _ = writeln!(out, "{pad}    for (; {counter} < {limit}; {counter} += {step}) {{");
        fx.indent += 2;
        for (k, (s, span)) in body.span_iter().enumerate() {
            if k != plan.exit {
                self.statement(fx, s, *span, out)?;
            }
        }
        fx.indent -= 2;
        fx.counted = Default::default();
        fx.baked = saved.clone();
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}}} else {{");
        fx.indent += 1;
        self.plain_loop(fx, body, continuing, break_if, out)?;
        fx.indent -= 1;
        fx.baked = saved;
        let _ = writeln!(out, "{pad}}} }}");
        Ok(true)
    }

    /// The loop's plan, when it is a counted loop worth an unchecked copy.
    fn counted_plan(
        &self,
        fx: &Fx,
        body: &Block,
        continuing: &Block,
        break_if: Option<Handle<Expression>>,
    ) -> Option<CountedLoop> {
        let f = fx.f;
        if break_if.is_some() {
            return None;
        }
        // The body begins with `if (k < bound) {} else { break; }`.
        let statements: Vec<&Statement> = body.iter().collect();
        let exit = statements.iter().position(|s| !matches!(s, Statement::Emit(_)))?;
        let Statement::If {
            condition,
            accept,
            reject,
        } = statements[exit]
        else {
            return None;
        };
        if !accept.is_empty() || reject.len() != 1 || !matches!(reject.iter().next(), Some(Statement::Break)) {
            return None;
        }
        let Expression::Binary {
            op: Bin::Less,
            left,
            right: bound,
        } = f.expressions[*condition]
        else {
            return None;
        };
        let counter = self.loaded_local(f, left)?;
        let c_type = match fx.fi[left].ty.inner_with(&self.m.types) {
            TypeInner::Scalar(naga::Scalar {
                kind: ScalarKind::Uint,
                width: 4,
            }) => "xh_u32",
            TypeInner::Scalar(naga::Scalar {
                kind: ScalarKind::Sint,
                width: 4,
            }) => "xh_i32",
            _ => return None,
        };
        // The continuing block is `k = k + 1` alone.
        let mut increments = 0;
        for s in continuing.iter() {
            match s {
                Statement::Emit(_) => {}
                Statement::Store { pointer, value } => {
                    if !matches!(f.expressions[*pointer], Expression::LocalVariable(l) if l == counter) {
                        return None;
                    }
                    let Expression::Binary {
                        op: Bin::Add,
                        left,
                        right,
                    } = f.expressions[*value]
                    else {
                        return None;
                    };
                    let one = matches!(
                        f.expressions[right],
                        Expression::Literal(Literal::U32(1) | Literal::I32(1))
                    );
                    if self.loaded_local(f, left) != Some(counter) || !one {
                        return None;
                    }
                    increments += 1;
                }
                _ => return None,
            }
        }
        if increments != 1 {
            return None;
        }
        // The body changes neither the counter nor runs a loop or a barrier of its own.
        // The continuing block stores the counter alone, which `invariant` never takes for
        // invariant: the body's stores are all the loop's others.
        let mut stored = HashSet::new();
        body.iter().for_each(|s| stored_locals(f, s, &mut stored));
        let nested_loop = crate::ir::any_statement(body, &mut |s| matches!(s, Statement::Loop { .. }));
        if stored.contains(&counter) || nested_loop || crate::ir::has_barrier(body) {
            return None;
        }
        let mut emitted = emitted_expressions(body);
        emitted.extend(emitted_expressions(continuing));
        let scope = Scope {
            f,
            counter,
            emitted,
            stored,
        };
        if self.dependence(fx, &scope, bound, 0) != Some(Dependence::Invariant) {
            return None;
        }
        // The accesses into runtime-sized arrays whose indices move with the counter.
        let mut sites = Vec::new();
        for &h in &scope.emitted {
            let Expression::Access { base, index } = f.expressions[h] else {
                continue;
            };
            if self.points_to_runtime_array(fx, base) != Some(true) || !self.is_32_bit_integer(fx, index) {
                continue;
            }
            let Some(binding) = self.runtime_array_binding_of(f, base) else {
                continue;
            };
            if let Some(dependence) = self.dependence(fx, &scope, index, 0) {
                sites.push(Site {
                    access: h,
                    index,
                    binding,
                    step: dependence.coefficient(),
                });
            }
        }
        if !sites.iter().any(|site| site.step != Some(0)) {
            return None;
        }
        sites.sort_by_key(|site| site.access.index());
        Some(CountedLoop {
            counter,
            bound,
            exit,
            c_type,
            sites,
        })
    }

    /// The local that `h` loads, when it is a load of a local variable itself.
    fn loaded_local(&self, f: &Function, h: Handle<Expression>) -> Option<Handle<LocalVariable>> {
        match f.expressions[h] {
            Expression::Load { pointer } => match f.expressions[pointer] {
                Expression::LocalVariable(l) => Some(l),
                _ => None,
            },
            _ => None,
        }
    }

    fn is_32_bit_integer(&self, fx: &Fx, h: Handle<Expression>) -> bool {
        matches!(
            fx.fi[h].ty.inner_with(&self.m.types),
            TypeInner::Scalar(naga::Scalar {
                kind: ScalarKind::Uint | ScalarKind::Sint,
                width: 4,
            })
        )
    }

    /// How integer expression `h` depends on the counter: `None` when it is neither the same
    /// in every iteration nor affine in the counter, or cannot be worked out before the loop.
    fn dependence(&self, fx: &Fx, scope: &Scope, h: Handle<Expression>, depth: u32) -> Option<Dependence> {
        if depth > 48 {
            return None;
        }
        let f = scope.f;
        if self.loaded_local(f, h) == Some(scope.counter) {
            return Some(Dependence::Affine(Some(1)));
        }
        if self.invariant(fx, scope, h, depth) {
            return Some(Dependence::Invariant);
        }
        if !self.is_32_bit_integer(fx, h) {
            return None;
        }
        let of = |e: Handle<Expression>| {
            if self.is_32_bit_integer(fx, e) {
                self.dependence(fx, scope, e, depth + 1)
            } else {
                None
            }
        };
        let literal = |e: Handle<Expression>| match f.expressions[e] {
            Expression::Literal(Literal::U32(v)) => Some(i64::from(v)),
            Expression::Literal(Literal::I32(v)) => Some(i64::from(v)),
            _ => None,
        };
        // Coefficients wrap as the arithmetic does; only their residue modulo 2^32 is used.
        let affine = |c: Option<i64>| Some(Dependence::Affine(c.map(|c| i64::from(c as u32))));
        match f.expressions[h] {
            Expression::Binary {
                op: op @ (Bin::Add | Bin::Subtract),
                left,
                right,
            } => {
                let (l, r) = (of(left)?.coefficient(), of(right)?.coefficient());
                affine(l.zip(r).map(|(l, r)| {
                    if op == Bin::Add {
                        l.wrapping_add(r)
                    } else {
                        l.wrapping_sub(r)
                    }
                }))
            }
            Expression::Binary {
                op: Bin::Multiply,
                left,
                right,
            } => match (of(left)?, of(right)?) {
                (Dependence::Affine(_), Dependence::Affine(_)) => None,
                (Dependence::Affine(c), Dependence::Invariant) => {
                    affine(c.zip(literal(right)).map(|(c, v)| c.wrapping_mul(v)))
                }
                (Dependence::Invariant, Dependence::Affine(c)) => {
                    affine(c.zip(literal(left)).map(|(c, v)| c.wrapping_mul(v)))
                }
                (Dependence::Invariant, Dependence::Invariant) => Some(Dependence::Invariant),
            },
            Expression::Unary {
                op: naga::UnaryOperator::Negate,
                expr,
            } => match of(expr)? {
                Dependence::Affine(c) => affine(c.map(i64::wrapping_neg)),
                Dependence::Invariant => Some(Dependence::Invariant),
            },
            Expression::As {
                expr,
                kind: ScalarKind::Uint | ScalarKind::Sint,
                convert: None | Some(4),
            } => of(expr),
            _ => None,
        }
    }

    /// Whether `h` has the same value in every iteration and can be worked out before the
    /// loop with no effect the loop would not have: no access with a dynamic index (a
    /// clamped one raises the out-of-bounds flag), no read of memory the loop may write.
    fn invariant(&self, fx: &Fx, scope: &Scope, h: Handle<Expression>, depth: u32) -> bool {
        if depth > 48 {
            return false;
        }
        if fx.baked.contains_key(&h) {
            // Worked out before the loop.
            return true;
        }
        let f = scope.f;
        let e = &f.expressions[h];
        match e {
            Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::ZeroValue(_)
            | Expression::FunctionArgument(_)
            | Expression::GlobalVariable(_)
            | Expression::LocalVariable(_) => return true,
            _ => {}
        }
        if !scope.emitted.contains(&h) {
            // A result of a statement in the loop (a call's, an atomic's), or an expression
            // of another scope.
            return false;
        }
        let again = |x: Handle<Expression>| self.invariant(fx, scope, x, depth + 1);
        match e {
            Expression::Load { pointer } => match root(f, *pointer) {
                Some(Root::Local(l)) => {
                    l != scope.counter && !scope.stored.contains(&l) && self.plain_chain(fx, *pointer)
                }
                Some(Root::Global(g)) => read_only(self.m.global_variables[g].space) && self.plain_chain(fx, *pointer),
                None => false,
            },
            Expression::Access { .. } => false,
            e => value_operands(e).is_some_and(|mut operands| operands.all(again)),
        }
    }

    /// Whether pointer expression `h` points to a runtime-sized array; `None` when `h` is not
    /// a pointer to a whole value.
    fn points_to_runtime_array(&self, fx: &Fx, h: Handle<Expression>) -> Option<bool> {
        match fx.fi[h].ty.inner_with(&self.m.types) {
            TypeInner::Pointer { base, .. } => Some(matches!(
                self.m.types[*base].inner,
                TypeInner::Array {
                    size: ArraySize::Dynamic,
                    ..
                }
            )),
            _ => None,
        }
    }

    /// Whether pointer `pointer` reaches its root through constant member and element
    /// indices alone, none of them into a runtime-sized array (which would be clamped, and
    /// could raise the out-of-bounds flag where the loop itself would not).
    fn plain_chain(&self, fx: &Fx, mut pointer: Handle<Expression>) -> bool {
        loop {
            match fx.f.expressions[pointer] {
                Expression::LocalVariable(_) | Expression::GlobalVariable(_) => return true,
                Expression::AccessIndex { base, .. } => {
                    // Not a pointer (a component of a vector) is not followed either.
                    if self.points_to_runtime_array(fx, base) != Some(false) {
                        return false;
                    }
                    pointer = base;
                }
                _ => return false,
            }
        }
    }

    /// The loads from the scalar block (uniform or immediate data, through constant indices)
    /// that the body emits, in the order they are defined (the body's exit emits none).
    fn hoistable_loads(&self, fx: &Fx, body: &Block) -> Vec<Handle<Expression>> {
        let f = fx.f;
        let mut loads = Vec::new();
        crate::ir::for_each_statement(body, &mut |s| {
            if let Statement::Emit(range) = s {
                for h in range.clone() {
                    if let Expression::Load { pointer } = f.expressions[h] {
                        let scalar_block = matches!(root(f, pointer),
                            Some(Root::Global(g)) if read_only(self.m.global_variables[g].space));
                        if scalar_block && self.plain_chain(fx, pointer) {
                            loads.push(h);
                        }
                    }
                }
            }
        });
        loads.sort_by_key(|h| h.index());
        loads.dedup();
        loads
    }
}
