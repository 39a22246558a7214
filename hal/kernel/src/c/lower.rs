//! Host C meets an entry point's barriers by splitting the entry point at them (the writer's
//! workgroup mode). It cannot split a called function, nor a `switch`, so before writing,
//! this pass rewrites an entry point that has either:
//!
//! - every call to a function that reaches a barrier is inlined: the callee's locals become
//!   fresh locals of the entry point, set to their initial values where the call was (a call
//!   inside a loop starts afresh each time), its arguments are the call's argument values,
//!   and its `return` stores the result in a local that the call's result then loads;
//! - every `switch` that holds a barrier (or, inside a loop with barriers, a `continue`)
//!   becomes a chain of `if`s on the selector.
//!
//! A `return` of an inlined function, or a `break` of a lowered `switch`, leaves a construct
//! that no longer exists, so each sets a flag, and the statements after it, up to the end of
//! that construct, run only while the flag is clear: the rest of a block is wrapped in `if`,
//! and a loop (or kept `switch`) in between is left with `break`. WGSL requires control flow
//! to be uniform around a barrier, so wherever such a flag guards a barrier it is the same in
//! every invocation, which is what the workgroup mode needs of the control around barriers.
//!
//! The same pass, for every C dialect, splits an entry-point argument that is a struct of
//! built-ins into one argument per member, and composes the struct from them at the start of
//! the body, so the writers only ever meet built-ins as arguments.
//!
//! The result is validated again by naga before it is written.

use std::collections::HashMap;

use naga::{Block, Expression, Function, Handle, LocalVariable, Module, Span, Statement};

use crate::ir::has_barrier;

/// Functions (by index) that reach a barrier, themselves or through what they call.
fn barrier_functions(module: &Module) -> Vec<bool> {
    let mut reaches = Vec::with_capacity(module.functions.len());
    // A function only calls functions before it in the arena.
    for (_, f) in module.functions.iter() {
        let mut callees = std::collections::BTreeSet::new();
        crate::ir::calls(&f.body, &mut callees);
        let deep = has_barrier(&f.body) || callees.iter().any(|c| reaches.get(c.index()).copied().unwrap_or(false));
        reaches.push(deep);
    }
    reaches
}

/// Whether `block` calls one of `barrier_fns`.
fn calls_barrier_function(block: &Block, barrier_fns: &[bool]) -> bool {
    let mut callees = std::collections::BTreeSet::new();
    crate::ir::calls(block, &mut callees);
    callees.iter().any(|c| barrier_fns[c.index()])
}

/// [`lower_for_c`] for the compute entry points of `module` (`entry`, or all), with the
/// result validated: `None` when nothing needed rewriting. `target` names the output in
/// errors.
pub(super) fn lowered(
    module: &crate::wgsl::WgslModule,
    entry: Option<&str>,
    rewrite: Rewrite,
    target: &str,
) -> Result<Option<(Module, naga::valid::ModuleInfo)>, crate::error::KernelError> {
    use crate::error::{KernelError, KernelErrorKind};
    let source = module.naga_module();
    let entries: Vec<usize> = crate::ir::compute_entries(source, entry);
    let lowered = lower_for_c(source, &entries, rewrite).map_err(|what| {
        KernelError::new(
            KernelErrorKind::Unsupported,
            format!("{what} cannot be written as {target}"),
        )
    })?;
    let Some(lowered) = lowered else {
        return Ok(None);
    };
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), crate::wgsl::KERNEL_CAPABILITIES)
        .validate(&lowered)
        .map_err(|e| {
            KernelError::new(
                KernelErrorKind::Internal,
                format!(
                    "lowering the kernel for {target} made an invalid module: {}",
                    e.as_inner()
                ),
            )
        })?;
    Ok(Some((lowered, info)))
}

/// Whether an entry-point argument is a struct whose members carry the bindings.
fn is_struct_of_builtins(module: &Module, argument: &naga::FunctionArgument) -> bool {
    argument.binding.is_none() && matches!(module.types[argument.ty].inner, naga::TypeInner::Struct { .. })
}

/// What the pass rewrites besides struct arguments, which it always splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rewrite {
    /// Inline every call to a function that reaches a barrier.
    pub(super) inline_barrier_functions: bool,
    /// Turn every `switch` with a barrier (or a `continue` past one) into `if`s.
    pub(super) lower_barrier_switches: bool,
}

/// The module with the entry points `entries` rewritten as the module docs say, or `None`
/// when none of them needs it. `Err` names a construct the pass cannot rewrite.
pub(super) fn lower_for_c(module: &Module, entries: &[usize], rewrite: Rewrite) -> Result<Option<Module>, String> {
    let barrier_fns = if rewrite.inline_barrier_functions {
        barrier_functions(module)
    } else {
        vec![false; module.functions.len()]
    };
    let needs = |f: &Function| {
        f.arguments.iter().any(|a| is_struct_of_builtins(module, a))
            || (rewrite.inline_barrier_functions && calls_barrier_function(&f.body, &barrier_fns))
            || (rewrite.lower_barrier_switches && has_lowered_switch(&f.body, &barrier_fns, false))
    };
    if !entries.iter().any(|&i| needs(&module.entry_points[i].function)) {
        return Ok(None);
    }
    let mut out = module.clone();
    let bool_type = out.types.insert(
        naga::Type {
            name: None,
            inner: naga::TypeInner::Scalar(naga::Scalar::BOOL),
        },
        Span::UNDEFINED,
    );
    for &i in entries {
        let source = &module.entry_points[i].function;
        if !needs(source) {
            continue;
        }
        // Each struct argument becomes its members, in order.
        let mut arguments = Vec::new();
        let mut split = HashMap::new();
        for (k, argument) in source.arguments.iter().enumerate() {
            if is_struct_of_builtins(module, argument) {
                let naga::TypeInner::Struct { members, .. } = &module.types[argument.ty].inner else {
                    unreachable!("checked to be a struct")
                };
                let first = arguments.len() as u32;
                for member in members {
                    arguments.push(naga::FunctionArgument {
                        name: member.name.clone(),
                        ty: member.ty,
                        binding: member.binding.clone(),
                    });
                }
                split.insert(k as u32, (first, members.len() as u32, argument.ty));
            } else {
                arguments.push(argument.clone());
            }
        }
        let mut renumbered = HashMap::new();
        let mut next = 0u32;
        for (k, _) in source.arguments.iter().enumerate() {
            let k = k as u32;
            match split.get(&k) {
                Some(&(_, count, _)) => next += count,
                None => {
                    renumbered.insert(k, next);
                    next += 1;
                }
            }
        }
        let mut lowering = Lowering {
            module,
            barrier_fns: &barrier_fns,
            lower_switches: rewrite.lower_barrier_switches,
            bool_type,
            split_arguments: split,
            renumbered_arguments: renumbered,
            composed_arguments: Vec::new(),
            out: Function {
                name: source.name.clone(),
                arguments,
                result: source.result.clone(),
                local_variables: naga::Arena::new(),
                expressions: naga::Arena::new(),
                named_expressions: Default::default(),
                body: Block::new(),
                diagnostic_filter_leaf: source.diagnostic_filter_leaf,
            },
            depth: 0,
        };
        let mut locals = HashMap::new();
        for (h, local) in source.local_variables.iter() {
            let copy = lowering
                .out
                .local_variables
                .append(local.clone(), source.local_variables.get_span(h));
            locals.insert(h, copy);
        }
        let map = lowering.copy_expressions(source, None, &locals)?;
        for (h, local) in source.local_variables.iter() {
            let init = local.init.map(|e| map.expr(e));
            lowering.out.local_variables.get_mut(locals[&h]).init = init;
        }
        for (h, name) in source.named_expressions.iter() {
            if let Some(&Some(copy)) = map.exprs.get(h.index()) {
                lowering.out.named_expressions.insert(copy, name.clone());
            }
        }
        let mut body = Block::new();
        let composed = std::mem::take(&mut lowering.composed_arguments);
        Lowering::emit(&mut body, &composed);
        body.append(&mut lowering.copy_block(source, &source.body, &map, &mut Vec::new(), false)?);
        lowering.out.body = body;
        out.entry_points[i].function = lowering.out;
    }
    Ok(Some(out))
}

/// Whether `block` has a `switch` that must become `if`s: one with a barrier in it (or a call
/// that reaches one), or one inside a loop with barriers that has a `continue` for that loop.
fn has_lowered_switch(block: &Block, barrier_fns: &[bool], in_barrier_loop: bool) -> bool {
    block.iter().any(|s| match s {
        Statement::Block(b) => has_lowered_switch(b, barrier_fns, in_barrier_loop),
        Statement::If { accept, reject, .. } => {
            has_lowered_switch(accept, barrier_fns, in_barrier_loop)
                || has_lowered_switch(reject, barrier_fns, in_barrier_loop)
        }
        Statement::Switch { cases, .. } => {
            lowers_switch(cases, barrier_fns, in_barrier_loop)
                || cases
                    .iter()
                    .any(|c| has_lowered_switch(&c.body, barrier_fns, in_barrier_loop))
        }
        Statement::Loop { body, continuing, .. } => {
            let barriers = loop_has_barrier(body, continuing, barrier_fns);
            has_lowered_switch(body, barrier_fns, barriers) || has_lowered_switch(continuing, barrier_fns, barriers)
        }
        _ => false,
    })
}

fn loop_has_barrier(body: &Block, continuing: &Block, barrier_fns: &[bool]) -> bool {
    has_barrier(body)
        || has_barrier(continuing)
        || calls_barrier_function(body, barrier_fns)
        || calls_barrier_function(continuing, barrier_fns)
}

fn lowers_switch(cases: &[naga::SwitchCase], barrier_fns: &[bool], in_barrier_loop: bool) -> bool {
    cases.iter().any(|c| {
        has_barrier(&c.body)
            || calls_barrier_function(&c.body, barrier_fns)
            || (in_barrier_loop && super::workgroup::has_continue(&c.body))
    })
}

/// Where a block being copied sits, innermost last.
#[derive(Clone, Copy)]
enum Scope {
    /// A loop, or a `switch` that stays one: `break` leaves it.
    Breakable,
    /// A `switch` turned into `if`s: its `break` sets the flag (which it has when it has a
    /// `break`).
    LoweredSwitch(Option<Handle<LocalVariable>>),
    /// The body of an inlined call: `return` stores the result (when there is one), sets the
    /// flag (when the function can return before its end), and leaves.
    Inlined {
        result: Option<Handle<LocalVariable>>,
        flag: Option<Handle<LocalVariable>>,
    },
}

impl Scope {
    fn flag(self) -> Option<Handle<LocalVariable>> {
        match self {
            Scope::Breakable => None,
            Scope::LoweredSwitch(flag) => flag,
            Scope::Inlined { flag, .. } => flag,
        }
    }
}

/// Where each expression of a source function went in the function being built.
struct ExprMap {
    exprs: Vec<Option<Handle<Expression>>>,
    /// For each `CallResult` of an inlined call: the local that holds the result.
    results: HashMap<Handle<Expression>, Handle<LocalVariable>>,
}

impl ExprMap {
    fn expr(&self, h: Handle<Expression>) -> Handle<Expression> {
        self.exprs[h.index()].expect("an expression is copied before its users")
    }
}

struct Lowering<'m> {
    module: &'m Module,
    barrier_fns: &'m [bool],
    lower_switches: bool,
    /// `bool`, in the module being written (the pass adds it where the source had none).
    bool_type: Handle<naga::Type>,
    /// The entry point's struct arguments: their first new argument, member count and type.
    split_arguments: HashMap<u32, (u32, u32, Handle<naga::Type>)>,
    /// The new index of every other argument.
    renumbered_arguments: HashMap<u32, u32>,
    /// The structs composed from split arguments, emitted at the start of the body.
    composed_arguments: Vec<Handle<Expression>>,
    out: Function,
    /// Nesting of inlined calls, against recursion that naga would not allow anyway.
    depth: usize,
}

impl Lowering<'_> {
    fn append(&mut self, e: Expression) -> Handle<Expression> {
        self.out.expressions.append(e, Span::UNDEFINED)
    }

    /// Appends every expression of `src` in order (so each still follows its operands).
    /// `args`: the values of an inlined function's arguments (`None`: `src` is the entry
    /// point itself, whose arguments stay). The result of a call to be inlined becomes a load
    /// of a fresh local.
    fn copy_expressions(
        &mut self,
        src: &Function,
        args: Option<&[Handle<Expression>]>,
        locals: &HashMap<Handle<LocalVariable>, Handle<LocalVariable>>,
    ) -> Result<ExprMap, String> {
        let mut map = ExprMap {
            exprs: vec![None; src.expressions.len()],
            results: HashMap::new(),
        };
        for (h, e) in src.expressions.iter() {
            let span = src.expressions.get_span(h);
            let copy = match *e {
                Expression::FunctionArgument(i) if args.is_some() => args.expect("checked")[i as usize],
                Expression::FunctionArgument(i) => match self.split_arguments.get(&i).copied() {
                    Some((first, count, ty)) => {
                        let components = (first..first + count)
                            .map(|k| self.out.expressions.append(Expression::FunctionArgument(k), span))
                            .collect();
                        let composed = self
                            .out
                            .expressions
                            .append(Expression::Compose { ty, components }, span);
                        self.composed_arguments.push(composed);
                        composed
                    }
                    None => self
                        .out
                        .expressions
                        .append(Expression::FunctionArgument(self.renumbered_arguments[&i]), span),
                },
                Expression::LocalVariable(l) => {
                    self.out.expressions.append(Expression::LocalVariable(locals[&l]), span)
                }
                Expression::CallResult(f) if self.barrier_fns[f.index()] => {
                    let ty = self.module.functions[f]
                        .result
                        .as_ref()
                        .ok_or("a call result of a function without one")?
                        .ty;
                    let result = self.out.local_variables.append(
                        LocalVariable {
                            name: Some(format!(
                                "{}_result",
                                self.module.functions[f].name.as_deref().unwrap_or("call")
                            )),
                            ty,
                            init: None,
                        },
                        span,
                    );
                    let pointer = self.append(Expression::LocalVariable(result));
                    map.results.insert(h, result);
                    self.out.expressions.append(Expression::Load { pointer }, span)
                }
                ref other => {
                    let mapped = map_expression(other, |x| map.expr(x))?;
                    self.out.expressions.append(mapped, span)
                }
            };
            map.exprs[h.index()] = Some(copy);
        }
        Ok(map)
    }

    /// `Emit` statements for `handles` (ascending), one per run of consecutive handles.
    fn emit(out: &mut Block, handles: &[Handle<Expression>]) {
        let mut k = 0;
        while k < handles.len() {
            let mut end = k;
            while end + 1 < handles.len() && handles[end + 1].index() == handles[end].index() + 1 {
                end += 1;
            }
            out.push(
                Statement::Emit(naga::Range::new_from_bounds(handles[k], handles[end])),
                Span::UNDEFINED,
            );
            k = end + 1;
        }
    }

    fn store_bool(&mut self, out: &mut Block, local: Handle<LocalVariable>, value: bool) {
        let pointer = self.append(Expression::LocalVariable(local));
        let value = self.append(Expression::Literal(naga::Literal::Bool(value)));
        out.push(Statement::Store { pointer, value }, Span::UNDEFINED);
    }

    /// A fresh load of a flag, emitted into `out`.
    fn load(&mut self, out: &mut Block, local: Handle<LocalVariable>) -> Handle<Expression> {
        let pointer = self.append(Expression::LocalVariable(local));
        let value = self.append(Expression::Load { pointer });
        Self::emit(out, &[value]);
        value
    }

    fn new_flag(&mut self, name: &str) -> Handle<LocalVariable> {
        let ty = self.bool_type;
        self.out.local_variables.append(
            LocalVariable {
                name: Some(name.to_owned()),
                ty,
                init: None,
            },
            Span::UNDEFINED,
        )
    }

    fn copy_block(
        &mut self,
        src: &Function,
        block: &Block,
        map: &ExprMap,
        scopes: &mut Vec<Scope>,
        in_barrier_loop: bool,
    ) -> Result<Block, String> {
        let statements: Vec<(&Statement, &Span)> = block.span_iter().collect();
        self.copy_statements(src, &statements, map, scopes, in_barrier_loop)
    }

    fn copy_statements(
        &mut self,
        src: &Function,
        statements: &[(&Statement, &Span)],
        map: &ExprMap,
        scopes: &mut Vec<Scope>,
        in_barrier_loop: bool,
    ) -> Result<Block, String> {
        let mut out = Block::new();
        for (k, &(s, &span)) in statements.iter().enumerate() {
            let mut copied = Block::new();
            self.copy_statement(src, s, span, map, scopes, in_barrier_loop, &mut copied)?;
            // The flags of the enclosing constructs this statement may have set.
            let set: Vec<(usize, Handle<LocalVariable>)> = scopes
                .iter()
                .enumerate()
                .filter_map(|(depth, scope)| scope.flag().map(|flag| (depth, flag)))
                .filter(|&(_, flag)| stores_to(&self.out, &copied, flag))
                .collect();
            out.append(&mut copied);
            let rest = &statements[k + 1..];
            let mut guard_rest = Vec::new();
            for (depth, flag) in set {
                let breakable_between = scopes[depth + 1..].iter().any(|s| matches!(s, Scope::Breakable));
                if breakable_between {
                    // Leave the loop (or switch) in between; after it, this runs again.
                    let value = self.load(&mut out, flag);
                    let mut leave = Block::new();
                    leave.push(Statement::Break, Span::UNDEFINED);
                    out.push(
                        Statement::If {
                            condition: value,
                            accept: leave,
                            reject: Block::new(),
                        },
                        Span::UNDEFINED,
                    );
                } else if !rest.is_empty() {
                    guard_rest.push(flag);
                }
            }
            if !guard_rest.is_empty() {
                let mut inner = self.copy_statements(src, rest, map, scopes, in_barrier_loop)?;
                for flag in guard_rest.into_iter().rev() {
                    let mut wrapper = Block::new();
                    let value = self.load(&mut wrapper, flag);
                    wrapper.push(
                        Statement::If {
                            condition: value,
                            accept: Block::new(),
                            reject: inner,
                        },
                        Span::UNDEFINED,
                    );
                    inner = wrapper;
                }
                out.append(&mut inner);
                return Ok(out);
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_statement(
        &mut self,
        src: &Function,
        s: &Statement,
        span: Span,
        map: &ExprMap,
        scopes: &mut Vec<Scope>,
        in_barrier_loop: bool,
        out: &mut Block,
    ) -> Result<(), String> {
        let e = |h: Handle<Expression>| map.expr(h);
        let copied = match s {
            Statement::Emit(range) => {
                let handles: Vec<_> = range.clone().map(e).collect();
                Self::emit(out, &handles);
                return Ok(());
            }
            Statement::Block(b) => Statement::Block(self.copy_block(src, b, map, scopes, in_barrier_loop)?),
            Statement::If {
                condition,
                accept,
                reject,
            } => Statement::If {
                condition: e(*condition),
                accept: self.copy_block(src, accept, map, scopes, in_barrier_loop)?,
                reject: self.copy_block(src, reject, map, scopes, in_barrier_loop)?,
            },
            Statement::Switch { selector, cases } => {
                if self.lower_switches && lowers_switch(cases, self.barrier_fns, in_barrier_loop) {
                    return self.lower_switch(src, e(*selector), cases, map, scopes, in_barrier_loop, out);
                }
                scopes.push(Scope::Breakable);
                let mut copies = Vec::with_capacity(cases.len());
                let mut failure = None;
                for case in cases {
                    match self.copy_block(src, &case.body, map, scopes, in_barrier_loop) {
                        Ok(body) => copies.push(naga::SwitchCase {
                            value: case.value,
                            body,
                            fall_through: case.fall_through,
                        }),
                        Err(what) => failure = Some(what),
                    }
                }
                scopes.pop();
                if let Some(what) = failure {
                    return Err(what);
                }
                Statement::Switch {
                    selector: e(*selector),
                    cases: copies,
                }
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => {
                let barriers = loop_has_barrier(body, continuing, self.barrier_fns);
                scopes.push(Scope::Breakable);
                let body = self.copy_block(src, body, map, scopes, barriers);
                let continuing = self.copy_block(src, continuing, map, scopes, barriers);
                scopes.pop();
                Statement::Loop {
                    body: body?,
                    continuing: continuing?,
                    break_if: break_if.map(e),
                }
            }
            Statement::Break => {
                // The construct a `break` leaves: the innermost loop or switch.
                let target = scopes
                    .iter()
                    .rev()
                    .find(|s| matches!(s, Scope::Breakable | Scope::LoweredSwitch(_)))
                    .copied();
                match target {
                    Some(Scope::LoweredSwitch(flag)) => {
                        let flag = flag.ok_or("a break that the switch's scan missed")?;
                        self.store_bool(out, flag, true);
                        return Ok(());
                    }
                    _ => Statement::Break,
                }
            }
            Statement::Continue => Statement::Continue,
            Statement::Return { value } => {
                let inlined = scopes.iter().rev().find_map(|s| match s {
                    Scope::Inlined { result, flag } => Some((*result, *flag)),
                    _ => None,
                });
                let Some((result, flag)) = inlined else {
                    // The entry point's own `return`: the workgroup mode handles it.
                    out.push(Statement::Return { value: value.map(e) }, span);
                    return Ok(());
                };
                if let (Some(result), Some(value)) = (result, value) {
                    let pointer = self.append(Expression::LocalVariable(result));
                    out.push(
                        Statement::Store {
                            pointer,
                            value: e(*value),
                        },
                        span,
                    );
                }
                if let Some(flag) = flag {
                    self.store_bool(out, flag, true);
                }
                if matches!(scopes.last(), Some(Scope::Breakable)) {
                    out.push(Statement::Break, span);
                }
                return Ok(());
            }
            Statement::Kill => Statement::Kill,
            Statement::ControlBarrier(b) => Statement::ControlBarrier(*b),
            Statement::MemoryBarrier(b) => Statement::MemoryBarrier(*b),
            Statement::Store { pointer, value } => Statement::Store {
                pointer: e(*pointer),
                value: e(*value),
            },
            Statement::Atomic {
                pointer,
                fun,
                value,
                result,
            } => Statement::Atomic {
                pointer: e(*pointer),
                fun: match *fun {
                    naga::AtomicFunction::Exchange { compare } => naga::AtomicFunction::Exchange {
                        compare: compare.map(e),
                    },
                    other => other,
                },
                value: e(*value),
                result: result.map(e),
            },
            Statement::WorkGroupUniformLoad { pointer, result } => Statement::WorkGroupUniformLoad {
                pointer: e(*pointer),
                result: e(*result),
            },
            Statement::Call {
                function,
                arguments,
                result,
            } => {
                let arguments: Vec<_> = arguments.iter().map(|&a| e(a)).collect();
                if self.barrier_fns[function.index()] {
                    let result_local = result.map(|r| map.results[&r]);
                    let inlined = self.inline_call(*function, &arguments, result_local)?;
                    out.push(Statement::Block(inlined), span);
                    if let Some(r) = result {
                        Self::emit(out, &[e(*r)]);
                    }
                    return Ok(());
                }
                Statement::Call {
                    function: *function,
                    arguments,
                    result: result.map(e),
                }
            }
            _ => return Err("this statement in a kernel with barriers".to_owned()),
        };
        out.push(copied, span);
        Ok(())
    }

    /// `switch` as `if`s on the selector, in case order, the default case last.
    #[allow(clippy::too_many_arguments)]
    fn lower_switch(
        &mut self,
        src: &Function,
        selector: Handle<Expression>,
        cases: &[naga::SwitchCase],
        map: &ExprMap,
        scopes: &mut Vec<Scope>,
        in_barrier_loop: bool,
        out: &mut Block,
    ) -> Result<(), String> {
        // Cases that fall through (WGSL's `case 1, 2:`) join the next case's selectors.
        let mut groups: Vec<(Vec<naga::SwitchValue>, &Block)> = Vec::new();
        let mut pending = Vec::new();
        for case in cases {
            pending.push(case.value);
            if case.fall_through {
                if !case.body.is_empty() {
                    return Err("a switch case that falls through into the next".to_owned());
                }
                continue;
            }
            groups.push((std::mem::take(&mut pending), &case.body));
        }
        // A switch without a `break` of its own needs no flag.
        let flag = if cases.iter().any(|c| breaks_out(&c.body)) {
            let flag = self.new_flag("switch_left");
            self.store_bool(out, flag, false);
            Some(flag)
        } else {
            None
        };
        scopes.push(Scope::LoweredSwitch(flag));
        let mut chain: Option<Block> = None;
        // Built from the last `if` outwards; the default case is the innermost `else`.
        let default = groups
            .iter()
            .position(|(values, _)| values.contains(&naga::SwitchValue::Default));
        let mut ordered: Vec<usize> = (0..groups.len()).filter(|&g| Some(g) != default).collect();
        if let Some(d) = default {
            chain = Some(self.copy_block(src, groups[d].1, map, scopes, in_barrier_loop)?);
        }
        ordered.reverse();
        let mut conditions = Vec::new();
        for &g in &ordered {
            let body = self.copy_block(src, groups[g].1, map, scopes, in_barrier_loop)?;
            let mut condition = None;
            let mut emitted = Vec::new();
            for value in &groups[g].0 {
                let literal = match *value {
                    naga::SwitchValue::I32(v) => naga::Literal::I32(v),
                    naga::SwitchValue::U32(v) => naga::Literal::U32(v),
                    naga::SwitchValue::Default => continue,
                };
                let literal = self.append(Expression::Literal(literal));
                let equal = self.append(Expression::Binary {
                    op: naga::BinaryOperator::Equal,
                    left: selector,
                    right: literal,
                });
                emitted.push(equal);
                condition = Some(match condition {
                    None => equal,
                    Some(previous) => {
                        let either = self.append(Expression::Binary {
                            op: naga::BinaryOperator::LogicalOr,
                            left: previous,
                            right: equal,
                        });
                        emitted.push(either);
                        either
                    }
                });
            }
            let condition = condition.ok_or("a switch case without a value")?;
            conditions.push(emitted);
            let mut statement = Block::new();
            statement.push(
                Statement::If {
                    condition,
                    accept: body,
                    reject: chain.take().unwrap_or_default(),
                },
                Span::UNDEFINED,
            );
            chain = Some(statement);
        }
        scopes.pop();
        // Every condition is computed up front, where the selector is (they read nothing else).
        let mut handles: Vec<_> = conditions.into_iter().flatten().collect();
        handles.sort();
        Self::emit(out, &handles);
        let mut chain = chain.unwrap_or_default();
        out.append(&mut chain);
        Ok(())
    }

    /// The body of a call to `function`, as statements of the function being built.
    fn inline_call(
        &mut self,
        function: Handle<Function>,
        arguments: &[Handle<Expression>],
        result: Option<Handle<LocalVariable>>,
    ) -> Result<Block, String> {
        let callee = &self.module.functions[function];
        if self.depth > 64 {
            return Err("calls nested this deep".to_owned());
        }
        self.depth += 1;
        let mut locals = HashMap::new();
        for (h, local) in callee.local_variables.iter() {
            let copy = self.out.local_variables.append(
                LocalVariable {
                    name: local.name.clone(),
                    ty: local.ty,
                    init: None,
                },
                callee.local_variables.get_span(h),
            );
            locals.insert(h, copy);
        }
        let map = self.copy_expressions(callee, Some(arguments), &locals)?;
        let mut out = Block::new();
        // Each call starts from the locals' initial values, as a call does.
        for (h, local) in callee.local_variables.iter() {
            let value = match local.init {
                Some(init) => self.copy_tree(callee, init, &map, &mut out)?,
                None => self.append(Expression::ZeroValue(local.ty)),
            };
            let pointer = self.append(Expression::LocalVariable(locals[&h]));
            out.push(Statement::Store { pointer, value }, Span::UNDEFINED);
        }
        let flag = if returns_early(&callee.body) {
            let flag = self.new_flag("returned");
            self.store_bool(&mut out, flag, false);
            Some(flag)
        } else {
            None
        };
        // The callee's `break`s and `continue`s are its own: nothing of the caller's is in scope.
        let mut inner_scopes = vec![Scope::Inlined { result, flag }];
        let body = self.copy_block(callee, &callee.body, &map, &mut inner_scopes, false);
        self.depth -= 1;
        let mut body = body?;
        out.append(&mut body);
        Ok(out)
    }

    /// A fresh copy of the constant expression `root` of `src` (a local's initial value),
    /// emitted into `out`, so that it can be used where the copy of its original is not in
    /// scope yet.
    fn copy_tree(
        &mut self,
        src: &Function,
        root: Handle<Expression>,
        map: &ExprMap,
        out: &mut Block,
    ) -> Result<Handle<Expression>, String> {
        fn walk(
            lowering: &mut Lowering,
            src: &Function,
            h: Handle<Expression>,
            map: &ExprMap,
            emitted: &mut Vec<Handle<Expression>>,
        ) -> Result<Handle<Expression>, String> {
            let e = &src.expressions[h];
            if e.needs_pre_emit() {
                return Ok(map.expr(h));
            }
            let mut children = Vec::new();
            let _ = map_expression(e, |x| {
                children.push(x);
                x
            })?;
            let mut copies = HashMap::new();
            for child in children {
                let copy = walk(lowering, src, child, map, emitted)?;
                copies.insert(child, copy);
            }
            let copy = map_expression(e, |x| copies[&x])?;
            let handle = lowering.append(copy);
            emitted.push(handle);
            Ok(handle)
        }
        let mut emitted = Vec::new();
        let handle = walk(self, src, root, map, &mut emitted)?;
        Self::emit(out, &emitted);
        Ok(handle)
    }
}

/// Whether a function body has a `return` before its end (one that must skip what follows).
fn returns_early(body: &Block) -> bool {
    fn any_return(block: &Block) -> bool {
        block.iter().any(any_return_in)
    }
    fn any_return_in(s: &Statement) -> bool {
        match s {
            Statement::Return { .. } => true,
            Statement::Block(b) => any_return(b),
            Statement::If { accept, reject, .. } => any_return(accept) || any_return(reject),
            Statement::Switch { cases, .. } => cases.iter().any(|c| any_return(&c.body)),
            Statement::Loop { body, continuing, .. } => any_return(body) || any_return(continuing),
            _ => false,
        }
    }
    let statements: Vec<&Statement> = body.iter().collect();
    match statements.split_last() {
        Some((Statement::Return { .. }, before)) => before.iter().any(|s| any_return_in(s)),
        _ => any_return(body),
    }
}

/// Whether `block` has a `break` of the construct around it (not of one inside it).
fn breaks_out(block: &Block) -> bool {
    block.iter().any(|s| match s {
        Statement::Break => true,
        Statement::Block(b) => breaks_out(b),
        Statement::If { accept, reject, .. } => breaks_out(accept) || breaks_out(reject),
        _ => false,
    })
}

/// Whether `block` (statements of `f`) stores to `local`.
fn stores_to(f: &Function, block: &Block, local: Handle<LocalVariable>) -> bool {
    crate::ir::any_statement(block, &mut |s| {
        matches!(s, Statement::Store { pointer, .. }
            if matches!(f.expressions[*pointer], Expression::LocalVariable(l) if l == local))
    })
}

/// `e` with each operand `h` replaced by `f(h)`. Image, ray-query and cooperative-matrix
/// expressions are refused: no C dialect writes them.
fn map_expression(
    e: &Expression,
    mut f: impl FnMut(Handle<Expression>) -> Handle<Expression>,
) -> Result<Expression, String> {
    use Expression as E;
    Ok(match *e {
        E::Literal(_)
        | E::Constant(_)
        | E::Override(_)
        | E::ZeroValue(_)
        | E::FunctionArgument(_)
        | E::GlobalVariable(_)
        | E::LocalVariable(_)
        | E::CallResult(_)
        | E::AtomicResult { .. }
        | E::WorkGroupUniformLoadResult { .. }
        | E::SubgroupBallotResult
        | E::SubgroupOperationResult { .. }
        | E::RayQueryProceedResult => e.clone(),
        E::Compose { ty, ref components } => E::Compose {
            ty,
            components: components.iter().map(|&c| f(c)).collect(),
        },
        E::Access { base, index } => E::Access {
            base: f(base),
            index: f(index),
        },
        E::AccessIndex { base, index } => E::AccessIndex { base: f(base), index },
        E::Splat { size, value } => E::Splat { size, value: f(value) },
        E::Swizzle { size, vector, pattern } => E::Swizzle {
            size,
            vector: f(vector),
            pattern,
        },
        E::Load { pointer } => E::Load { pointer: f(pointer) },
        E::Unary { op, expr } => E::Unary { op, expr: f(expr) },
        E::Binary { op, left, right } => E::Binary {
            op,
            left: f(left),
            right: f(right),
        },
        E::Select {
            condition,
            accept,
            reject,
        } => E::Select {
            condition: f(condition),
            accept: f(accept),
            reject: f(reject),
        },
        E::Relational { fun, argument } => E::Relational {
            fun,
            argument: f(argument),
        },
        E::Math {
            fun,
            arg,
            arg1,
            arg2,
            arg3,
        } => E::Math {
            fun,
            arg: f(arg),
            arg1: arg1.map(&mut f),
            arg2: arg2.map(&mut f),
            arg3: arg3.map(&mut f),
        },
        E::As { expr, kind, convert } => E::As {
            expr: f(expr),
            kind,
            convert,
        },
        E::ArrayLength(array) => E::ArrayLength(f(array)),
        E::Derivative { axis, ctrl, expr } => E::Derivative {
            axis,
            ctrl,
            expr: f(expr),
        },
        _ => return Err("this expression in a kernel with barriers".to_owned()),
    })
}
