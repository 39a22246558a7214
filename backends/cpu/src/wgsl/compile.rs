//! naga IR → [`Program`]: statements become structured [`Node`]s, expressions become
//! column instructions, calls are inlined.
//!
//! Each naga expression is compiled once per inlined function instance, when its `Emit`
//! runs (or on first use, for the pre-emitted kinds: literals, constants, arguments and
//! variables), to a [`Val`]: registers, a compile-time constant, or a pointer whose root
//! variable is known statically. Composites are lists of registers, so building, swizzling
//! and taking members of a value cost no instructions at all.

use super::alias::in_place_loads;
use super::compile_access::pick_slots;
use super::compile_globals::literal_words;
use super::fuse::fuse;
use super::ops::{Bin32, Tern32, Un32};
use super::program::{At, AtomicOp, AtomicSpace, Case, HostKind, HostSpace, Instr, Node, Operand, Place, Program, Reg};
use super::types::{Num, Types};
use naga::valid::{FunctionInfo, ModuleInfo};
use naga::{Expression, Handle, Statement, TypeInner};
use std::collections::{HashMap, HashSet};
use xhal_backend::{Error, Result};

/// Most invocations in one workgroup (the device's `max_workgroup_invocations`).
pub(crate) const MAX_LANES: usize = 1024;
/// Largest workgroup per dimension (the device's `max_workgroup_size`).
const MAX_WORKGROUP_SIZE: [u32; 3] = [1024, 1024, 64];
/// Register-file words (registers × lanes) per thread: 64 MiB.
const MAX_REGISTER_WORDS: usize = 16 << 20;
/// Instructions after inlining; more means a pathological call tree.
const MAX_INSTRUCTIONS: usize = 1 << 20;
/// Nesting of inlined calls.
const MAX_CALL_DEPTH: u32 = 64;
/// Nesting of blocks, inlined calls included: the compiler and the executor recurse once
/// per level, so this bounds their stack use (naga already bounds the source's nesting).
const MAX_NESTING: u32 = 256;

/// A compiled expression.
#[derive(Debug, Clone)]
pub(super) enum Val {
    /// One register per slot.
    Regs(Vec<Reg>),
    /// A value known at compile time, one word per slot.
    Const(Vec<u32>),
    Ptr(Ptr),
}

/// Where a pointer's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    /// Per-invocation memory: register columns.
    Lane,
    /// Workgroup memory, in words.
    Shared,
    /// Buffer or scalar-block memory, in bytes.
    Host(HostSpace),
}

/// A pointer: a root known at compile time plus a static and a per-lane offset, in the
/// space's unit (slots for `Lane`/`Shared`, bytes for `Host`).
#[derive(Debug, Clone)]
pub(super) struct Ptr {
    pub(super) space: Space,
    pub(super) base: u32,
    pub(super) offset: Option<Reg>,
    pub(super) pointee: TypeInner,
    pub(super) place: Place,
}

/// An index: known at compile time, or per lane.
#[derive(Debug, Clone, Copy)]
pub(super) enum Index {
    Const(u32),
    Lane { reg: Reg, signed: bool },
}

/// The expressions of one inlined function instance.
pub(super) struct FnCtx<'m> {
    pub(super) function: &'m naga::Function,
    pub(super) info: &'m FunctionInfo,
    args: Vec<Val>,
    values: Vec<Option<Val>>,
    /// Per expression: a `Load` that may read its variable's registers in place.
    in_place: Vec<bool>,
    locals: Vec<u32>,
    result: Option<Vec<Reg>>,
}

impl<'m> FnCtx<'m> {
    /// Records the value a statement gave a result expression.
    fn set(&mut self, handle: Handle<Expression>, value: Val) {
        if let Some(slot) = self.values.get_mut(handle.index()) {
            *slot = Some(value);
        }
    }

    fn new(function: &'m naga::Function, info: &'m FunctionInfo, args: Vec<Val>, result: Option<Vec<Reg>>) -> Self {
        FnCtx {
            function,
            info,
            args,
            values: vec![None; function.expressions.len()],
            in_place: in_place_loads(function),
            locals: vec![0; function.local_variables.len()],
            result,
        }
    }
}

pub(super) struct Compiler<'m> {
    pub(super) module: &'m naga::Module,
    pub(super) info: &'m ModuleInfo,
    pub(super) types: Types<'m>,
    lanes: usize,
    registers: usize,
    constants: Vec<(Reg, u32)>,
    constant_regs: HashMap<u32, Reg>,
    /// The other way round: the value of each constant register.
    constant_values: HashMap<Reg, u32>,
    code: Vec<Node>,
    instructions: usize,
    places: Vec<String>,
    pub(super) globals: Vec<Option<Val>>,
    depth: u32,
    nesting: u32,
    /// Values computed on the way here that are still valid (see [`Compiler::known`]).
    known: HashMap<Known, Reg>,
    /// The keys of `known` in the order they were added, so a scope can drop its own.
    known_order: Vec<Known>,
    /// Registers of variables: written by stores, so never keys of `known`.
    variables: HashSet<Reg>,
}

/// A pure computation whose result register can stand for a repeat of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Known {
    Index(At),
    Un(Un32, Reg),
    Bin(Bin32, Reg, Reg),
    Tern(Tern32, Reg, Reg, Reg),
    /// A word of the scalar block, which a launch cannot change.
    Immediate {
        byte: u32,
        offset: Option<Reg>,
        kind: HostKind,
    },
}

/// Compiles compute entry point `index` of a validated module.
pub(crate) fn compile(module: &naga::Module, info: &ModuleInfo, index: usize) -> Result<Program> {
    let entry = module
        .entry_points
        .get(index)
        .ok_or_else(|| Error::internal("entry point index out of range"))?;
    let mut compiler = Compiler {
        module,
        info,
        types: Types { arena: &module.types },
        lanes: 1,
        registers: 0,
        constants: Vec::new(),
        constant_regs: HashMap::new(),
        constant_values: HashMap::new(),
        code: Vec::new(),
        instructions: 0,
        places: Vec::new(),
        globals: vec![None; module.global_variables.len()],
        depth: 0,
        nesting: 0,
        known: HashMap::new(),
        known_order: Vec::new(),
        variables: HashSet::new(),
    };
    compiler
        .entry_point(entry, info.get_entry_point(index))
        .map_err(|error| error.context(format!("kernel `{}`", entry.name)))
}

impl<'m> Compiler<'m> {
    fn entry_point(&mut self, entry: &'m naga::EntryPoint, info: &'m FunctionInfo) -> Result<Program> {
        let workgroup_size = self.workgroup_size(entry)?;
        let lanes: u64 = workgroup_size.iter().map(|size| u64::from(*size)).product();
        if lanes == 0 || lanes > MAX_LANES as u64 || workgroup_size.iter().zip(MAX_WORKGROUP_SIZE).any(|(s, m)| *s > m)
        {
            return Err(Error::unsupported(format!(
                "workgroup size {workgroup_size:?} exceeds the device limits: at most {MAX_WORKGROUP_SIZE:?} \
                 and {MAX_LANES} invocations"
            )));
        }
        self.lanes = lanes as usize;
        let mut layouter = naga::proc::Layouter::default();
        layouter
            .update(self.module.to_ctx())
            .map_err(|error| Error::unsupported(format!("cannot lay out the module's types: {error}")))?;

        let globals = self.globals(info, &layouter)?;
        let mut args = Vec::new();
        let mut builtins = Vec::new();
        for argument in &entry.function.arguments {
            let regs = self.alloc_n(self.types.slots(self.types.inner(argument.ty))?)?;
            self.bind_builtins(argument.binding.as_ref(), argument.ty, &regs, &mut builtins)?;
            args.push(Val::Regs(regs));
        }
        let mut ctx = FnCtx::new(&entry.function, info, args, None);
        self.function_body(&mut ctx)?;
        let mut body = vec![Node::Region(std::mem::take(&mut self.code))];
        let mut prologue = globals.prologue;
        fuse(&mut prologue, &mut body);
        Ok(Program {
            name: entry.name.clone(),
            workgroup_size,
            lanes: self.lanes,
            registers: self.registers,
            constants: std::mem::take(&mut self.constants),
            builtins,
            shared_words: globals.shared_words as usize,
            prologue,
            body,
            bindings: globals.bindings,
            immediate_size: globals.immediate_size,
            immediate_name: globals.immediate_name,
            places: std::mem::take(&mut self.places),
        })
    }

    // ---- registers, constants, code ----------------------------------------------------

    pub(super) fn alloc(&mut self) -> Result<Reg> {
        let reg = Reg::try_from(self.registers).map_err(|_| self.too_large())?;
        self.registers += 1;
        if self.registers.saturating_mul(self.lanes) > MAX_REGISTER_WORDS {
            return Err(self.too_large());
        }
        Ok(reg)
    }

    pub(super) fn alloc_n(&mut self, count: u32) -> Result<Vec<Reg>> {
        (0..count).map(|_| self.alloc()).collect()
    }

    fn too_large(&self) -> Error {
        Error::unsupported(format!(
            "the kernel needs more than {MAX_REGISTER_WORDS} register words ({} lanes): it is too large for the \
             cpu interpreter",
            self.lanes
        ))
    }

    /// A register holding `value` on every lane (shared by every use of that value).
    pub(super) fn constant(&mut self, value: u32) -> Result<Reg> {
        if let Some(reg) = self.constant_regs.get(&value) {
            return Ok(*reg);
        }
        let reg = self.alloc()?;
        self.constants.push((reg, value));
        self.constant_regs.insert(value, reg);
        self.constant_values.insert(reg, value);
        Ok(reg)
    }

    /// The value of `reg` when it is a constant register.
    pub(super) fn constant_value(&self, reg: Reg) -> Option<u32> {
        self.constant_values.get(&reg).copied()
    }

    pub(super) fn push(&mut self, instr: Instr) -> Result<()> {
        self.instructions += 1;
        if self.instructions > MAX_INSTRUCTIONS {
            return Err(Error::unsupported(format!(
                "the kernel has more than {MAX_INSTRUCTIONS} instructions after inlining its function calls"
            )));
        }
        if let Some(Node::Code(code)) = self.code.last_mut() {
            code.push(instr);
        } else {
            self.code.push(Node::Code(vec![instr]));
        }
        Ok(())
    }

    pub(super) fn place(&mut self, text: String) -> Place {
        if let Some(index) = self.places.iter().position(|known| *known == text) {
            return index as Place;
        }
        self.places.push(text);
        (self.places.len() - 1) as Place
    }

    /// The registers of a value, materialising constants.
    pub(super) fn regs(&mut self, value: &Val) -> Result<Vec<Reg>> {
        match value {
            Val::Regs(regs) => Ok(regs.clone()),
            Val::Const(words) => words.iter().map(|word| self.constant(*word)).collect(),
            Val::Ptr(_) => Err(Error::internal("a pointer was used as a value")),
        }
    }

    /// The expression's type.
    pub(super) fn ty(&self, f: &FnCtx<'m>, handle: Handle<Expression>) -> &'m TypeInner {
        f.info[handle].ty.inner_with(&self.module.types)
    }

    // ---- functions and statements -------------------------------------------------------

    fn function_body(&mut self, f: &mut FnCtx<'m>) -> Result<()> {
        let function = f.function;
        for (handle, local) in function.local_variables.iter() {
            let count = self.types.slots(self.types.inner(local.ty))?;
            let regs = self.alloc_n(count)?;
            self.variable_registers(&regs);
            if let Some(slot) = f.locals.get_mut(handle.index()) {
                *slot = regs.first().copied().unwrap_or(0);
            }
            let init = match local.init {
                Some(init) => self.expr(f, init)?,
                None => Val::Const(vec![0; count as usize]),
            };
            match init {
                Val::Const(words) => {
                    for (reg, value) in regs.iter().zip(words) {
                        self.push(Instr::Fill { dst: *reg, value })?;
                    }
                }
                other => {
                    for (reg, src) in regs.iter().zip(self.regs(&other)?) {
                        self.push(Instr::Copy { dst: *reg, src })?;
                    }
                }
            }
        }
        self.block(f, &function.body)
    }

    fn block(&mut self, f: &mut FnCtx<'m>, block: &'m naga::Block) -> Result<()> {
        for statement in block.iter() {
            self.statement(f, statement)?;
        }
        Ok(())
    }

    /// Compiles `block` into a separate list of nodes.
    fn nested(&mut self, f: &mut FnCtx<'m>, block: &'m naga::Block) -> Result<Vec<Node>> {
        let scope = self.enter()?;
        let saved = std::mem::take(&mut self.code);
        let result = self.block(f, block);
        let nodes = std::mem::replace(&mut self.code, saved);
        self.leave(scope);
        result.map(|()| nodes)
    }

    /// One more level of nesting, within [`MAX_NESTING`]; returns what [`leave`](Self::leave)
    /// needs to end it.
    fn enter(&mut self) -> Result<usize> {
        if self.nesting >= MAX_NESTING {
            return Err(Error::unsupported(format!(
                "control flow nested more than {MAX_NESTING} deep, counting inlined function calls"
            )));
        }
        self.nesting += 1;
        Ok(self.known_order.len())
    }

    /// Ends a level of nesting: values computed inside it are not valid after it.
    fn leave(&mut self, scope: usize) {
        self.nesting -= 1;
        for key in self.known_order.drain(scope..) {
            self.known.remove(&key);
        }
    }

    /// The register of an identical computation already executed on the way here, if any.
    /// Reuse is sound: registers other than variables' are never rewritten except by
    /// re-running their instruction (a loop's next iteration, which re-runs the earlier one
    /// too), and the lanes active here are a subset of those active there, so the value
    /// (and any index check) holds for every lane that uses it.
    pub(super) fn known(&self, key: &Known) -> Option<Reg> {
        self.known.get(key).copied()
    }

    /// Records that `reg` holds `key`'s value from here to the end of the current scope,
    /// unless it depends on a variable, which a store may change.
    pub(super) fn remember(&mut self, key: Known, reg: Reg, operands: &[Option<Reg>]) {
        if operands
            .iter()
            .flatten()
            .any(|operand| self.variables.contains(operand))
        {
            return;
        }
        if self.known.insert(key, reg).is_none() {
            self.known_order.push(key);
        }
    }

    /// Marks registers as a variable's (see [`Compiler::remember`]).
    pub(super) fn variable_registers(&mut self, regs: &[Reg]) {
        self.variables.extend(regs.iter().copied());
    }

    /// Emits a checked `Index`, or reuses the result of an identical one (see [`Compiler::known`]).
    pub(super) fn checked_index(&mut self, key: At) -> Result<Reg> {
        if let Some(reg) = self.known(&Known::Index(key)) {
            return Ok(reg);
        }
        let dst = self.alloc()?;
        self.push(Instr::Index { dst, at: key })?;
        self.remember(Known::Index(key), dst, &[key.base, Some(key.index)]);
        Ok(dst)
    }

    fn statement(&mut self, f: &mut FnCtx<'m>, statement: &'m Statement) -> Result<()> {
        match *statement {
            Statement::Emit(ref range) => {
                for handle in range.clone() {
                    self.expr(f, handle)?;
                }
            }
            Statement::Block(ref block) => self.block(f, block)?,
            Statement::If {
                condition,
                ref accept,
                ref reject,
            } => {
                let condition = self.scalar(f, condition)?;
                let accept = self.nested(f, accept)?;
                let reject = self.nested(f, reject)?;
                self.code.push(Node::If {
                    condition,
                    accept,
                    reject,
                });
            }
            Statement::Switch { selector, ref cases } => {
                let selector = self.scalar(f, selector)?;
                let mut compiled = Vec::new();
                let mut values = Vec::new();
                let mut default = false;
                for case in cases {
                    match case.value {
                        naga::SwitchValue::I32(value) => values.push(value as u32),
                        naga::SwitchValue::U32(value) => values.push(value),
                        naga::SwitchValue::Default => default = true,
                    }
                    // `case 1, 2:` arrives as empty cases falling through: merge them.
                    if case.fall_through && case.body.is_empty() {
                        continue;
                    }
                    let body = self.nested(f, &case.body)?;
                    compiled.push(Case {
                        values: std::mem::take(&mut values),
                        default: std::mem::take(&mut default),
                        body,
                        fall_through: case.fall_through,
                    });
                }
                if !values.is_empty() || default {
                    compiled.push(Case {
                        values,
                        default,
                        body: Vec::new(),
                        fall_through: false,
                    });
                }
                self.code.push(Node::Switch {
                    selector,
                    cases: compiled,
                });
            }
            Statement::Loop {
                ref body,
                ref continuing,
                break_if,
            } => {
                let body = self.nested(f, body)?;
                let scope = self.enter()?;
                let saved = std::mem::take(&mut self.code);
                let result = self.block(f, continuing).and_then(|()| match break_if {
                    Some(condition) => self.scalar(f, condition).map(Some),
                    None => Ok(None),
                });
                let continuing = std::mem::replace(&mut self.code, saved);
                self.leave(scope);
                let break_if = result?;
                self.code.push(Node::Loop {
                    body,
                    continuing,
                    break_if,
                });
            }
            Statement::Break => self.code.push(Node::Break),
            Statement::Continue => self.code.push(Node::Continue),
            Statement::Return { value } => {
                if let (Some(value), Some(result)) = (value, f.result.clone()) {
                    let value = self.expr(f, value)?;
                    for (dst, src) in result.iter().zip(self.operands(&value)?) {
                        self.push(Instr::Set { dst: *dst, src })?;
                    }
                }
                self.code.push(Node::Return);
            }
            // Lanes of a workgroup run in lockstep: every instruction has finished on every
            // lane before the next starts, which is all a barrier promises.
            Statement::ControlBarrier(_) | Statement::MemoryBarrier(_) => {}
            Statement::Store { pointer, value } => {
                let pointer = self.pointer(f, pointer)?;
                let value = self.expr(f, value)?;
                self.store(&pointer, &value)?;
            }
            Statement::Atomic {
                pointer,
                ref fun,
                value,
                result,
            } => self.atomic(f, pointer, fun, value, result)?,
            Statement::WorkGroupUniformLoad { pointer, result } => {
                let pointer = self.pointer(f, pointer)?;
                let value = self.load(&pointer)?;
                f.set(result, value);
            }
            Statement::Call {
                function,
                ref arguments,
                result,
            } => self.call(f, function, arguments, result)?,
            Statement::Kill => return Err(Error::unsupported("`discard` in a compute kernel")),
            ref other => return Err(Error::unsupported(statement_name(other).to_string())),
        }
        Ok(())
    }

    fn call(
        &mut self,
        f: &mut FnCtx<'m>,
        function: Handle<naga::Function>,
        arguments: &[Handle<Expression>],
        result: Option<Handle<Expression>>,
    ) -> Result<()> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(Error::unsupported(format!(
                "function calls nested more than {MAX_CALL_DEPTH} deep"
            )));
        }
        let callee = &self.module.functions[function];
        let mut args = Vec::with_capacity(arguments.len());
        for argument in arguments {
            args.push(self.expr(f, *argument)?);
        }
        let result_regs = match callee.result {
            Some(ref result) => Some(self.alloc_n(self.types.slots(self.types.inner(result.ty))?)?),
            None => None,
        };
        let mut ctx = FnCtx::new(callee, &self.info[function], args, result_regs.clone());
        let scope = self.enter()?;
        let saved = std::mem::take(&mut self.code);
        self.depth += 1;
        let compiled = self.function_body(&mut ctx);
        self.depth -= 1;
        self.leave(scope);
        let body = std::mem::replace(&mut self.code, saved);
        compiled.map_err(|error| error.context(format!("in function `{}`", callee.name.as_deref().unwrap_or("?"))))?;
        self.code.push(Node::Region(body));
        if let (Some(handle), Some(regs)) = (result, result_regs) {
            f.set(handle, Val::Regs(regs));
        }
        Ok(())
    }

    fn atomic(
        &mut self,
        f: &mut FnCtx<'m>,
        pointer: Handle<Expression>,
        fun: &naga::AtomicFunction,
        value: Handle<Expression>,
        result: Option<Handle<Expression>>,
    ) -> Result<()> {
        let pointer = self.pointer(f, pointer)?;
        let num = match pointer.pointee {
            TypeInner::Atomic(scalar) => Num::of(scalar)?,
            _ => return Err(Error::internal("an atomic operation on a non-atomic value")),
        };
        if num.is_wide() || num.is_float() {
            return Err(Error::unsupported(format!(
                "atomics on {num:?} values (the cpu backend implements 32-bit integer atomics)"
            )));
        }
        let signed = num.is_signed();
        let (op, compare) = match *fun {
            naga::AtomicFunction::Add => (AtomicOp::Add, None),
            naga::AtomicFunction::Subtract => (AtomicOp::Sub, None),
            naga::AtomicFunction::And => (AtomicOp::And, None),
            naga::AtomicFunction::InclusiveOr => (AtomicOp::Or, None),
            naga::AtomicFunction::ExclusiveOr => (AtomicOp::Xor, None),
            naga::AtomicFunction::Min => (if signed { AtomicOp::MinI } else { AtomicOp::MinU }, None),
            naga::AtomicFunction::Max => (if signed { AtomicOp::MaxI } else { AtomicOp::MaxU }, None),
            naga::AtomicFunction::Exchange { compare: None } => (AtomicOp::Exchange, None),
            naga::AtomicFunction::Exchange { compare: Some(compare) } => {
                (AtomicOp::CompareExchange, Some(self.scalar(f, compare)?))
            }
        };
        let value = self.scalar(f, value)?;
        let space = match pointer.space {
            Space::Shared => AtomicSpace::Workgroup,
            Space::Host(HostSpace::Binding(binding)) => AtomicSpace::Host(binding),
            _ => return Err(Error::internal("an atomic outside workgroup or storage memory")),
        };
        let (old, exchanged) = match result {
            Some(handle) => {
                let old = self.alloc()?;
                let exchanged = if op == AtomicOp::CompareExchange {
                    Some(self.alloc()?)
                } else {
                    None
                };
                let mut regs = vec![old];
                regs.extend(exchanged);
                f.set(handle, Val::Regs(regs));
                (Some(old), exchanged)
            }
            None => (None, None),
        };
        self.push(Instr::Atomic {
            space,
            address: pointer.base,
            offset: pointer.offset,
            op,
            value,
            compare,
            old,
            exchanged,
        })
    }

    // ---- expressions --------------------------------------------------------------------

    /// The compiled value of an expression, compiling it on first use.
    pub(super) fn expr(&mut self, f: &mut FnCtx<'m>, handle: Handle<Expression>) -> Result<Val> {
        if let Some(value) = f.values.get(handle.index()).and_then(Clone::clone) {
            return Ok(value);
        }
        let value = self.compile_expression(f, handle)?;
        if let Some(slot) = f.values.get_mut(handle.index()) {
            *slot = Some(value.clone());
        }
        Ok(value)
    }

    /// The single register of a scalar expression.
    pub(super) fn scalar(&mut self, f: &mut FnCtx<'m>, handle: Handle<Expression>) -> Result<Reg> {
        let value = self.expr(f, handle)?;
        self.regs(&value)?
            .first()
            .copied()
            .ok_or_else(|| Error::internal("an empty scalar"))
    }

    fn pointer(&mut self, f: &mut FnCtx<'m>, handle: Handle<Expression>) -> Result<Ptr> {
        match self.expr(f, handle)? {
            Val::Ptr(pointer) => Ok(pointer),
            _ => Err(Error::internal("a value was used as a pointer")),
        }
    }

    fn compile_expression(&mut self, f: &mut FnCtx<'m>, handle: Handle<Expression>) -> Result<Val> {
        let function = f.function;
        Ok(match function.expressions[handle] {
            Expression::Literal(literal) => Val::Const(literal_words(literal)?),
            Expression::Constant(constant) => Val::Const(self.global_const(self.module.constants[constant].init)?),
            Expression::Override(item) => {
                let init = self.module.overrides[item].init.ok_or_else(|| {
                    Error::unsupported(
                        "an override without a default value (the cpu backend takes no pipeline constants)",
                    )
                })?;
                Val::Const(self.global_const(init)?)
            }
            Expression::ZeroValue(ty) => Val::Const(vec![0; self.types.slots(self.types.inner(ty))? as usize]),
            Expression::Compose { ref components, .. } => {
                let mut parts = Vec::with_capacity(components.len());
                for component in components {
                    parts.push(self.expr(f, *component)?);
                }
                self.concat(&parts)?
            }
            Expression::Splat { size, value } => match self.expr(f, value)? {
                Val::Const(words) => Val::Const(words.repeat(size as usize)),
                other => Val::Regs(self.regs(&other)?.repeat(size as usize)),
            },
            Expression::Swizzle { size, vector, pattern } => {
                let width = match *self.ty(f, vector) {
                    TypeInner::Vector { scalar, .. } => Num::of(scalar)?.words() as usize,
                    _ => 1,
                };
                let source = self.expr(f, vector)?;
                let picks: Vec<usize> = pattern
                    .iter()
                    .take(size as usize)
                    .flat_map(|component| (0..width).map(move |w| *component as usize * width + w))
                    .collect();
                pick_slots(&source, &picks)?
            }
            Expression::FunctionArgument(index) => f
                .args
                .get(index as usize)
                .cloned()
                .ok_or_else(|| Error::internal("a missing function argument"))?,
            Expression::GlobalVariable(global) => self
                .globals
                .get(global.index())
                .cloned()
                .flatten()
                .ok_or_else(|| Error::internal("a global variable the entry point does not use"))?,
            Expression::LocalVariable(local) => {
                let variable = &function.local_variables[local];
                let name = variable.name.as_deref().unwrap_or("?");
                let owner = function.name.as_deref().unwrap_or("the entry point");
                let place = self.place(format!("variable `{name}` of `{owner}`"));
                Val::Ptr(Ptr {
                    space: Space::Lane,
                    base: f.locals.get(local.index()).copied().unwrap_or(0),
                    offset: None,
                    pointee: self.types.inner(variable.ty).clone(),
                    place,
                })
            }
            Expression::Load { pointer } => {
                let pointer = self.pointer(f, pointer)?;
                let in_place = f.in_place.get(handle.index()).copied().unwrap_or(false);
                if let (true, Space::Lane, None) = (in_place, pointer.space, pointer.offset) {
                    // Nothing writes the variable before this value's last use (see `alias`).
                    let slots = self.types.slots(&pointer.pointee)?;
                    Val::Regs((0..slots).map(|slot| pointer.base.wrapping_add(slot)).collect())
                } else {
                    self.load(&pointer)?
                }
            }
            Expression::Access { base, index } => {
                let signed = matches!(
                    *self.ty(f, index),
                    TypeInner::Scalar(naga::Scalar {
                        kind: naga::ScalarKind::Sint,
                        ..
                    })
                );
                let index = match self.expr(f, index)? {
                    Val::Const(words) => Index::Const(words.first().copied().unwrap_or(0)),
                    other => Index::Lane {
                        reg: self.regs(&other)?.first().copied().unwrap_or(0),
                        signed,
                    },
                };
                self.access(f, base, index)?
            }
            Expression::AccessIndex { base, index } => self.access(f, base, Index::Const(index))?,
            Expression::ArrayLength(array) => {
                let pointer = self.pointer(f, array)?;
                let (Space::Host(HostSpace::Binding(binding)), TypeInner::Array { stride, .. }) =
                    (pointer.space, &pointer.pointee)
                else {
                    return Err(Error::internal("arrayLength of something that is not a buffer's array"));
                };
                let dst = self.alloc()?;
                self.push(Instr::ArrayLength {
                    dst,
                    binding,
                    header: pointer.base,
                    stride: *stride,
                })?;
                Val::Regs(vec![dst])
            }
            Expression::Unary { op, expr } => self.unary(f, handle, op, expr)?,
            Expression::Binary { op, left, right } => self.binary(f, handle, op, left, right)?,
            Expression::Select {
                condition,
                accept,
                reject,
            } => self.select(f, condition, accept, reject)?,
            Expression::Relational { fun, argument } => self.relational(f, fun, argument)?,
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => self.math(f, handle, fun, [Some(arg), arg1, arg2, arg3])?,
            Expression::As { expr, kind, convert } => self.convert(f, handle, expr, kind, convert)?,
            Expression::CallResult(_)
            | Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. } => {
                return Err(Error::internal("a result expression was used before its statement"))
            }
            ref other => {
                return Err(Error::unsupported(format!(
                    "the expression {} (not available in cpu kernels)",
                    expression_name(other)
                )))
            }
        })
    }

    /// The concatenation of several values (a `Compose`): constant if every part is.
    fn concat(&mut self, parts: &[Val]) -> Result<Val> {
        if parts.iter().all(|part| matches!(part, Val::Const(_))) {
            let mut words = Vec::new();
            for part in parts {
                if let Val::Const(part) = part {
                    words.extend_from_slice(part);
                }
            }
            return Ok(Val::Const(words));
        }
        let mut regs = Vec::new();
        for part in parts {
            regs.extend(self.regs(part)?);
        }
        Ok(Val::Regs(regs))
    }

    /// The operands (register or immediate) of every slot of a value.
    pub(super) fn operands(&mut self, value: &Val) -> Result<Vec<Operand>> {
        match value {
            Val::Const(words) => Ok(words.iter().map(|word| Operand::Imm(*word)).collect()),
            other => Ok(self.regs(other)?.into_iter().map(Operand::Reg).collect()),
        }
    }
}

pub(super) fn expression_name(expression: &Expression) -> &'static str {
    match expression {
        Expression::ImageSample { .. } => "textureSample",
        Expression::ImageLoad { .. } => "textureLoad",
        Expression::ImageQuery { .. } => "a texture query",
        Expression::Derivative { .. } => "a derivative (dpdx/dpdy/fwidth)",
        Expression::RayQueryVertexPositions { .. }
        | Expression::RayQueryProceedResult
        | Expression::RayQueryGetIntersection { .. } => "a ray query",
        Expression::SubgroupBallotResult | Expression::SubgroupOperationResult { .. } => "a subgroup operation",
        Expression::CooperativeLoad { .. } | Expression::CooperativeMultiplyAdd { .. } => "a cooperative matrix",
        Expression::Unary { .. } => "a unary operation",
        Expression::Binary { .. } => "a binary operation",
        Expression::Math { .. } => "a math function",
        Expression::As { .. } => "a conversion",
        Expression::Select { .. } => "select",
        Expression::Access { .. } | Expression::AccessIndex { .. } => "an access",
        Expression::Load { .. } => "a load",
        _ => "this expression",
    }
}

fn statement_name(statement: &Statement) -> &'static str {
    match statement {
        Statement::ImageStore { .. } => "textureStore (the cpu backend runs kernels on storage buffers only)",
        Statement::ImageAtomic { .. } => "texture atomics",
        Statement::RayQuery { .. } | Statement::RayPipelineFunction(_) => "ray tracing",
        Statement::SubgroupBallot { .. }
        | Statement::SubgroupGather { .. }
        | Statement::SubgroupCollectiveOperation { .. } => "subgroup operations",
        Statement::CooperativeStore { .. } => "cooperative matrices",
        _ => "this statement",
    }
}
