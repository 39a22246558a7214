//! Which values of an entry point are the same in every invocation of a workgroup, for host
//! C's workgroup mode: such a value needs one slot instead of one per invocation, and a
//! region that only computes such values runs once instead of once per invocation.
//!
//! naga's own analysis counts every function-local variable as non-uniform, which would
//! leave a loop counter such as `stride` in a tree reduction per invocation. Here a local is
//! uniform when every store to it stores a uniform value under uniform control flow (a
//! `break` or `continue` under non-uniform control makes the rest of its loop non-uniform;
//! a `return` does not, since the invocations that left never read the local again), and no
//! pointer to it is passed to a function. The rules are conservative: anything not shown
//! uniform is not.

use std::collections::{HashMap, HashSet};

use naga::{AddressSpace, Block, Expression, Function, Handle, LocalVariable, Statement};

/// The uniform expressions and locals of an entry point.
#[derive(Debug, Default)]
pub(super) struct Uniform {
    pub(super) exprs: HashSet<Handle<Expression>>,
    pub(super) locals: HashSet<Handle<LocalVariable>>,
}

pub(super) fn analyze(module: &naga::Module, f: &Function) -> Uniform {
    let mut locals: HashSet<Handle<LocalVariable>> = f.local_variables.iter().map(|(h, _)| h).collect();
    let pure = pure_functions(module);
    let mut calls = HashMap::new();
    call_results(&f.body, &mut calls);
    loop {
        let exprs = uniform_exprs(module, f, &locals, &pure, &calls);
        let mut walker = Walker {
            f,
            exprs: &exprs,
            locals: locals.clone(),
        };
        walker.block(&f.body, true);
        if walker.locals == locals {
            return Uniform { exprs, locals };
        }
        locals = walker.locals;
    }
}

/// Whether memory in `space` stays the same for a whole dispatch: the scalar block, and
/// buffers bound read-only (a `var<uniform>` reaches the writers as one; WebGPU forbids a
/// writable binding to alias another in one dispatch, and xhal's devices take the same rule).
pub(super) fn read_only(space: AddressSpace) -> bool {
    match space {
        AddressSpace::Immediate | AddressSpace::Uniform => true,
        AddressSpace::Storage { access } => !access.contains(naga::StorageAccess::STORE),
        _ => false,
    }
}

/// Which functions of `module` compute their result from their arguments alone: no pointer
/// arguments, and nothing read or written outside their locals but constants and memory
/// that stays the same for the dispatch ([`read_only`]), calling only such functions.
/// A call to one with uniform arguments is uniform (a row's first element, say).
pub(super) fn pure_functions(module: &naga::Module) -> Vec<bool> {
    let mut pure: Vec<bool> = Vec::with_capacity(module.functions.len());
    // A function only calls functions before it in the arena.
    for (_, f) in module.functions.iter() {
        let pointer_arguments = f.arguments.iter().any(|a| {
            matches!(
                module.types[a.ty].inner,
                naga::TypeInner::Pointer { .. } | naga::TypeInner::ValuePointer { .. }
            )
        });
        let reads_only_shared = f.expressions.iter().all(|(_, e)| match e {
            Expression::GlobalVariable(g) => read_only(module.global_variables[*g].space),
            Expression::CallResult(callee) => pure.get(callee.index()).copied().unwrap_or(false),
            Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. }
            | Expression::ImageLoad { .. }
            | Expression::ImageSample { .. }
            | Expression::RayQueryProceedResult
            | Expression::SubgroupBallotResult
            | Expression::SubgroupOperationResult { .. } => false,
            _ => true,
        });
        let mut callees = std::collections::BTreeSet::new();
        crate::ir::calls(&f.body, &mut callees);
        let calls_pure = callees.iter().all(|c| pure.get(c.index()).copied().unwrap_or(false));
        pure.push(!pointer_arguments && reads_only_shared && calls_pure && !has_atomic(&f.body));
    }
    pure
}

fn has_atomic(block: &Block) -> bool {
    crate::ir::any_statement(block, &mut |s| {
        matches!(s, Statement::Atomic { .. } | Statement::ImageAtomic { .. })
    })
}

/// The arguments of each call, by the call's result expression.
pub(super) type CallArguments = HashMap<Handle<Expression>, Vec<Handle<Expression>>>;

/// Adds to `out` the arguments of every call in `block` that has a result.
pub(super) fn call_results(block: &Block, out: &mut CallArguments) {
    crate::ir::for_each_statement(block, &mut |s| {
        if let Statement::Call {
            arguments,
            result: Some(result),
            ..
        } = s
        {
            out.insert(*result, arguments.clone());
        }
    });
}

/// The expressions that are uniform when the locals in `locals` are.
fn uniform_exprs(
    module: &naga::Module,
    f: &Function,
    locals: &HashSet<Handle<LocalVariable>>,
    pure: &[bool],
    calls: &CallArguments,
) -> HashSet<Handle<Expression>> {
    let mut uniform = HashSet::new();
    // Operands come before their users in the arena, so one pass in order suffices.
    for (h, e) in f.expressions.iter() {
        let u = |x: &Handle<Expression>| uniform.contains(x);
        let is = match e {
            Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::ZeroValue(_)
            | Expression::Override(_)
            | Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
            | Expression::ArrayLength(_)
            | Expression::WorkGroupUniformLoadResult { .. } => true,
            Expression::FunctionArgument(i) => matches!(
                f.arguments[*i as usize].binding,
                Some(naga::Binding::BuiltIn(
                    naga::BuiltIn::WorkGroupId | naga::BuiltIn::NumWorkGroups | naga::BuiltIn::WorkGroupSize
                ))
            ),
            Expression::Load { pointer } => {
                u(pointer)
                    && match root(f, *pointer) {
                        Some(Root::Local(l)) => locals.contains(&l),
                        Some(Root::Global(g)) => read_only(module.global_variables[g].space),
                        None => false,
                    }
            }
            // The call's arguments come before its result in the arena.
            Expression::CallResult(callee) => {
                pure.get(callee.index()).copied().unwrap_or(false)
                    && calls.get(&h).is_some_and(|arguments| arguments.iter().all(u))
            }
            _ => value_operands(e).is_some_and(|mut operands| operands.all(|x| u(&x))),
        };
        if is {
            uniform.insert(h);
        }
    }
    uniform
}

/// The operands of an expression whose value follows from its operands' values alone
/// (arithmetic, conversions, composes, access into a value or a pointer), or `None` for any
/// other kind: leaves, loads, call results and the results of statements, which each analysis
/// of expressions judges by its own rules.
pub(super) fn value_operands(e: &Expression) -> Option<impl Iterator<Item = Handle<Expression>> + '_> {
    let few =
        |a: Handle<Expression>, b: Option<Handle<Expression>>, c: Option<Handle<Expression>>| [Some(a), b, c, None];
    let (fixed, listed): ([Option<Handle<Expression>>; 4], &[Handle<Expression>]) = match *e {
        Expression::Access { base, index } => (few(base, Some(index), None), &[]),
        Expression::AccessIndex { base: x, .. }
        | Expression::Swizzle { vector: x, .. }
        | Expression::Splat { value: x, .. }
        | Expression::Unary { expr: x, .. }
        | Expression::As { expr: x, .. }
        | Expression::Relational { argument: x, .. } => (few(x, None, None), &[]),
        Expression::Binary { left, right, .. } => (few(left, Some(right), None), &[]),
        Expression::Select {
            condition,
            accept,
            reject,
        } => (few(condition, Some(accept), Some(reject)), &[]),
        Expression::Math {
            arg, arg1, arg2, arg3, ..
        } => ([Some(arg), arg1, arg2, arg3], &[]),
        Expression::Compose { ref components, .. } => ([None; 4], components.as_slice()),
        _ => return None,
    };
    Some(fixed.into_iter().flatten().chain(listed.iter().copied()))
}

pub(super) enum Root {
    Local(Handle<LocalVariable>),
    Global(Handle<naga::GlobalVariable>),
}

/// The variable a pointer expression points into.
pub(super) fn root(f: &Function, mut pointer: Handle<Expression>) -> Option<Root> {
    loop {
        match &f.expressions[pointer] {
            Expression::LocalVariable(l) => return Some(Root::Local(*l)),
            Expression::GlobalVariable(g) => return Some(Root::Global(*g)),
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => pointer = *base,
            _ => return None,
        }
    }
}

/// Adds to `stored` the locals that statement `s` may change: stores into them, and
/// pointers to them handed to a function or an atomic operation.
pub(super) fn stored_locals(f: &Function, s: &Statement, stored: &mut HashSet<Handle<LocalVariable>>) {
    let mut add = |pointer: Handle<Expression>| {
        if let Some(Root::Local(l)) = root(f, pointer) {
            stored.insert(l);
        }
    };
    match s {
        Statement::Store { pointer, .. } | Statement::Atomic { pointer, .. } => add(*pointer),
        Statement::Call { arguments, .. } => arguments.iter().for_each(|&a| add(a)),
        Statement::Block(b) => b.iter().for_each(|s| stored_locals(f, s, stored)),
        Statement::If { accept, reject, .. } => {
            accept
                .iter()
                .chain(reject.iter())
                .for_each(|s| stored_locals(f, s, stored));
        }
        Statement::Switch { cases, .. } => {
            for c in cases {
                c.body.iter().for_each(|s| stored_locals(f, s, stored));
            }
        }
        Statement::Loop { body, continuing, .. } => {
            body.iter()
                .chain(continuing.iter())
                .for_each(|s| stored_locals(f, s, stored));
        }
        _ => {}
    }
}

struct Walker<'a> {
    f: &'a Function,
    exprs: &'a HashSet<Handle<Expression>>,
    locals: HashSet<Handle<LocalVariable>>,
}

impl Walker<'_> {
    fn uniform(&self, h: Handle<Expression>) -> bool {
        self.exprs.contains(&h)
    }

    fn lose(&mut self, pointer: Handle<Expression>) {
        if let Some(Root::Local(l)) = root(self.f, pointer) {
            self.locals.remove(&l);
        }
    }

    fn block(&mut self, block: &Block, control: bool) {
        for s in block.iter() {
            self.statement(s, control);
        }
    }

    fn statement(&mut self, s: &Statement, control: bool) {
        match s {
            Statement::Store { pointer, value } if !control || !self.uniform(*value) || !self.uniform(*pointer) => {
                self.lose(*pointer);
            }
            Statement::Block(b) => self.block(b, control),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let inner = control && self.uniform(*condition);
                self.block(accept, inner);
                self.block(reject, inner);
            }
            Statement::Switch { selector, cases } => {
                let inner = control && self.uniform(*selector);
                for case in cases {
                    self.block(&case.body, inner);
                }
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                let uniform_exits = break_if.is_none_or(|b| self.uniform(b))
                    && !self.leaves_non_uniformly(body, false)
                    && !self.leaves_non_uniformly(continuing, false);
                let inner = control && uniform_exits;
                self.block(body, inner);
                self.block(continuing, inner);
            }
            Statement::Call { arguments, .. } => {
                for &a in arguments {
                    self.lose(a);
                }
            }
            _ => {}
        }
    }

    /// Whether `block` has a `break` or `continue` of the loop around it under non-uniform
    /// control (`divergent`: already under such control).
    fn leaves_non_uniformly(&self, block: &Block, divergent: bool) -> bool {
        block.iter().any(|s| match s {
            Statement::Break | Statement::Continue => divergent,
            Statement::Block(b) => self.leaves_non_uniformly(b, divergent),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let inner = divergent || !self.uniform(*condition);
                self.leaves_non_uniformly(accept, inner) || self.leaves_non_uniformly(reject, inner)
            }
            // A `break` in a switch leaves the switch; a `continue` leaves the loop.
            Statement::Switch { selector, cases } => {
                let inner = divergent || !self.uniform(*selector);
                cases.iter().any(|c| inner && super::workgroup::has_continue(&c.body))
            }
            _ => false,
        })
    }
}
