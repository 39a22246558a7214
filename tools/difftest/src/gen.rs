//! The program generator: one seed, one program, always valid WGSL, always terminating,
//! always deterministic.
//!
//! What keeps a program deterministic on every correct device:
//! - **Uniformity.** Barriers (and the workgroup reads between them) appear only in uniform
//!   control flow: under conditions, loop bounds and loop exits built from literals, the
//!   immediate block, the workgroup index, reads of the read-only input at uniform indices,
//!   and variables that are only ever given such values in such places (loop counters of
//!   uniform loops among them). Loops whose trip count varies by invocation appear only where
//!   control is already non-uniform, and a non-uniform `if` inside a uniform loop may not
//!   `break` or `continue` it: by WGSL's rules either would make the loop non-uniform.
//! - **No races.** Between barriers an invocation touches only its own slot of the workgroup
//!   array; neighbours' slots are read only between two barriers
//!   ([`Stmt::Exchange`]). Atomics use one commutative operation per slot and their returned
//!   old values are dropped; workgroup atomics are read only between barriers.
//! - **Termination.** Every loop has a hidden counter that nothing else assigns, bounded by
//!   `min(trips, 8u)`; `while` loops advance it first, so `continue` cannot skip it.
//! - **Exact floats.** See [`crate::emit`]: products of narrowed operands, clamped stores.
//! - **Const-expressions.** Every operator or call has an operand known only at run time, so
//!   naga never folds (and never rejects) an overflowing constant.

use crate::ast::*;
use crate::rng::Rng;

/// Sizes the generator aims for.
#[derive(Debug, Clone, Copy)]
pub struct GenConfig {
    /// Statements in the entry point's top-level block (before the final outputs).
    pub main_statements: u32,
    /// Most helper functions.
    pub max_functions: u32,
    /// Deepest nesting of control flow.
    pub max_block_depth: u32,
    /// Deepest expression.
    pub max_expr_depth: u32,
    /// Most iterations of nested loops, multiplied together.
    pub max_trip_product: u32,
    /// Most statements in a whole program.
    pub max_total_statements: u32,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            main_statements: 14,
            max_functions: 3,
            max_block_depth: 3,
            max_expr_depth: 3,
            max_trip_product: 48,
            max_total_statements: 90,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VarKind {
    Local,
    Counter,
    Param,
    PtrParam,
    Array,
}

#[derive(Debug, Clone)]
struct VarInfo {
    id: VarId,
    ty: Ty,
    kind: VarKind,
    /// Only ever holds values that are the same in every invocation of a workgroup.
    uniform: bool,
}

impl VarInfo {
    fn assignable(&self) -> bool {
        matches!(self.kind, VarKind::Local | VarKind::Array)
    }
}

/// Where the statement being generated stands.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    in_main: bool,
    /// Control flow here is uniform (barriers allowed).
    uniform: bool,
    /// Inside a loop whose `break`/`continue` may be used here.
    exits: bool,
    /// Exits need uniform conditions (the loop is uniform).
    uniform_exits: bool,
    /// Directly inside a switch case (so `break` would leave the switch, not the loop).
    in_switch: bool,
    /// Barriers may be placed here (uniform control flow, and not in most switches).
    barriers: bool,
    block_depth: u32,
    trip_product: u32,
    /// The helper being generated, and whether it has a pointer parameter.
    function: Option<usize>,
    has_ptr: bool,
}

/// Helper signature, for calls.
#[derive(Debug, Clone)]
struct Signature {
    params: Vec<Ty>,
    has_ptr: bool,
    ret: Ty,
    /// The helper may hold barriers: it is called only as a statement in uniform control
    /// flow, and its own early returns are uniform.
    barriers: bool,
}

struct Generator {
    rng: Rng,
    config: GenConfig,
    next_var: u32,
    scopes: Vec<Vec<VarInfo>>,
    structs: Vec<StructDef>,
    signatures: Vec<Signature>,
    /// Helpers the current function may call (those defined before it).
    callable: usize,
    statements: u32,
    /// Generating the entry point (builtins in scope), not a helper.
    in_main: bool,
}

/// Generates the program of `seed`.
pub fn generate(seed: u64) -> Program {
    generate_with(seed, GenConfig::default())
}

pub fn generate_with(seed: u64, config: GenConfig) -> Program {
    let mut generator = Generator {
        rng: Rng::new(seed ^ 0x5EED_D1FF_7E57_0000),
        config,
        next_var: 0,
        scopes: Vec::new(),
        structs: Vec::new(),
        signatures: Vec::new(),
        callable: 0,
        statements: 0,
        in_main: false,
    };
    generator.program(seed)
}

const SIZES: [[u32; 2]; 7] = [[64, 1], [32, 1], [16, 1], [8, 8], [16, 4], [4, 4], [128, 1]];

impl Generator {
    fn program(&mut self, seed: u64) -> Program {
        let workgroup_size = *self.rng.pick(&SIZES);
        let workgroups = match self.rng.below(4) {
            0 => [2, 1],
            1 => [3, 1],
            2 => [2, 2],
            _ => [4, 1],
        };
        for _ in 0..self.rng.below(3) {
            let fields = (0..self.rng.range(1, 4)).map(|_| self.field_type()).collect();
            self.structs.push(StructDef { fields });
        }
        let mut functions = Vec::new();
        for index in 0..self.rng.below(self.config.max_functions + 1) {
            self.callable = index as usize;
            functions.push(self.function(index as usize));
        }
        self.callable = functions.len();
        self.in_main = true;

        self.scopes = vec![Vec::new()];
        let ctx = Ctx {
            in_main: true,
            uniform: true,
            exits: false,
            uniform_exits: false,
            in_switch: false,
            barriers: true,
            block_depth: 0,
            trip_product: 1,
            function: None,
            has_ptr: false,
        };
        let mut body = Vec::new();
        // Per-invocation state from the start: what exchanges and loops carry across barriers.
        for _ in 0..2 {
            let var = self.fresh();
            let init = self.expr(&Ty::U32, 2, false);
            self.declare(var, Ty::U32, VarKind::Local, false);
            body.push(Stmt::Decl {
                var,
                ty: Ty::U32,
                init,
                mutable: true,
            });
        }
        for _ in 0..self.config.main_statements {
            if let Some(stmt) = self.stmt(ctx) {
                body.push(stmt);
            }
        }
        // Everything still in scope is written out, so a comparison sees it.
        let vars: Vec<VarInfo> = self.scopes.last().cloned().unwrap_or_default();
        for var in vars {
            match (&var.kind, &var.ty) {
                (VarKind::Array, Ty::Array(elem, len)) => {
                    for i in 0..*len {
                        body.push(Stmt::Output(Expr::new(
                            (**elem).clone(),
                            ExprKind::Index(var.id, Wrap::Rem, Box::new(Expr::u32(i))),
                        )));
                    }
                }
                _ => body.push(Stmt::Output(Expr::new(var.ty.clone(), ExprKind::Load(var.id)))),
            }
        }
        Program {
            seed,
            params_from: ParamsFrom::of_seed(seed),
            workgroup_size,
            workgroups,
            structs: std::mem::take(&mut self.structs),
            functions,
            body,
            nonzero_divisors: false,
        }
    }

    fn fresh(&mut self) -> VarId {
        self.next_var += 1;
        VarId(self.next_var)
    }

    fn declare(&mut self, id: VarId, ty: Ty, kind: VarKind, uniform: bool) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(VarInfo { id, ty, kind, uniform });
        }
    }

    fn visible(&self) -> impl Iterator<Item = &VarInfo> {
        self.scopes.iter().flatten()
    }

    fn scalar(&mut self) -> Scalar {
        *self.rng.pick(&[Scalar::U32, Scalar::U32, Scalar::I32, Scalar::F32])
    }

    fn field_type(&mut self) -> Ty {
        let scalar = self.scalar();
        if self.rng.chance(35) {
            Ty::Vec(self.rng.range(2, 4) as u8, scalar)
        } else {
            Ty::Scalar(scalar)
        }
    }

    /// A type for a new variable.
    fn var_type(&mut self) -> Ty {
        match self.rng.weighted(&[30, 18, 18, 6, 22, 4, 4]) {
            0 => Ty::U32,
            1 => Ty::I32,
            2 => Ty::F32,
            3 => Ty::BOOL,
            4 => {
                let scalar = self.scalar();
                Ty::Vec(self.rng.range(2, 4) as u8, scalar)
            }
            5 => Ty::Mat(self.rng.range(2, 4) as u8, self.rng.range(2, 4) as u8),
            _ if !self.structs.is_empty() => Ty::Struct(self.rng.below(self.structs.len() as u32) as usize),
            _ => Ty::U32,
        }
    }

    /// A type for a value passed around (parameters, results, outputs).
    fn value_type(&mut self) -> Ty {
        match self.rng.weighted(&[35, 20, 20, 20, 5]) {
            0 => Ty::U32,
            1 => Ty::I32,
            2 => Ty::F32,
            3 => {
                let scalar = self.scalar();
                Ty::Vec(self.rng.range(2, 4) as u8, scalar)
            }
            _ if !self.structs.is_empty() => Ty::Struct(self.rng.below(self.structs.len() as u32) as usize),
            _ => Ty::U32,
        }
    }

    fn function(&mut self, index: usize) -> Function {
        self.scopes = vec![Vec::new()];
        let mut params = Vec::new();
        for _ in 0..self.rng.below(4) {
            let id = self.fresh();
            let ty = self.value_type();
            self.declare(id, ty.clone(), VarKind::Param, false);
            params.push((id, ty));
        }
        let ptr_param = if self.rng.chance(40) {
            let id = self.fresh();
            self.declare(id, Ty::U32, VarKind::PtrParam, false);
            Some(id)
        } else {
            None
        };
        let ret = self.value_type();
        // A helper with barriers starts in uniform control flow (its callers see to that);
        // its parameters are not uniform, so what depends on them is not either.
        let barriers = self.rng.chance(35);
        let ctx = Ctx {
            in_main: false,
            uniform: barriers,
            exits: false,
            uniform_exits: false,
            in_switch: false,
            barriers,
            block_depth: 1,
            trip_product: 1,
            function: Some(index),
            has_ptr: ptr_param.is_some(),
        };
        // Signature first, so that the return statements know the type.
        self.signatures.push(Signature {
            params: params.iter().map(|(_, ty)| ty.clone()).collect(),
            has_ptr: ptr_param.is_some(),
            ret: ret.clone(),
            barriers,
        });
        let mut body = Vec::new();
        for _ in 0..self.rng.range(2, 6) {
            if let Some(stmt) = self.stmt(ctx) {
                body.push(stmt);
            }
        }
        let result = self.expr(&ret, self.config.max_expr_depth, false);
        Function {
            params,
            ptr_param,
            ret,
            body,
            result,
        }
    }

    fn block(&mut self, ctx: Ctx, count: u32) -> Vec<Stmt> {
        self.scopes.push(Vec::new());
        let mut block = Vec::new();
        for _ in 0..count {
            if let Some(stmt) = self.stmt(ctx) {
                block.push(stmt);
            }
        }
        self.scopes.pop();
        block
    }

    fn stmt(&mut self, ctx: Ctx) -> Option<Stmt> {
        if self.statements >= self.config.max_total_statements {
            return None;
        }
        self.statements += 1;
        let nest = ctx.block_depth < self.config.max_block_depth;
        let barriers = ctx.uniform && ctx.barriers;
        // Exchanges and workgroup atomics need the invocation index: the entry point's only.
        let exchanges = barriers && ctx.in_main;
        let weights = [
            20,                       // 0 decl
            3,                        // 1 array decl
            26,                       // 2 assign
            if nest { 9 } else { 0 }, // 3 if
            if !nest {
                0
            } else if barriers {
                12
            } else {
                9
            }, // 4 loop
            if ctx.exits { 5 } else { 0 }, // 5 exit
            if nest { 3 } else { 0 }, // 6 switch
            if exchanges { 6 } else { 0 }, // 7 exchange
            if ctx.in_main { 4 } else { 0 }, // 8 wg store
            4,                        // 9 atomic
            if exchanges { 2 } else { 0 }, // 10 wg atomic read
            // A helper's few statements would rarely hold one at the entry point's rate.
            if !barriers {
                0
            } else if ctx.in_main {
                1
            } else {
                10
            }, // 11 barrier
            if ctx.in_main { 6 } else { 0 },            // 12 output
            if self.callable > 0 { 5 } else { 0 },      // 13 call
            if ctx.has_ptr { 5 } else { 0 },            // 14 ptr store
            if ctx.function.is_some() { 3 } else { 0 }, // 15 return if
        ];
        let depth = self.config.max_expr_depth;
        let stmt = match self.rng.weighted(&weights) {
            0 => self.decl(ctx),
            1 => {
                let var = self.fresh();
                let elem = if self.rng.chance(75) {
                    Ty::Scalar(self.scalar())
                } else {
                    let scalar = self.scalar();
                    Ty::Vec(self.rng.range(2, 4) as u8, scalar)
                };
                let len = *self.rng.pick(&[2, 3, 4, 5, 8]);
                self.declare(var, Ty::Array(Box::new(elem.clone()), len), VarKind::Array, false);
                Stmt::ArrayDecl { var, elem, len }
            }
            2 => self.assign(ctx)?,
            3 => {
                let uniform = ctx.uniform && self.rng.chance(50);
                let cond = self.expr(&Ty::BOOL, depth, uniform);
                let inner = self.enter(ctx, uniform);
                let then = {
                    let count = self.rng.range(1, 4);
                    self.block(inner, count)
                };
                let els = if self.rng.chance(40) {
                    {
                        let count = self.rng.range(1, 3);
                        self.block(inner, count)
                    }
                } else {
                    Vec::new()
                };
                Stmt::If { cond, then, els }
            }
            4 => self.loop_stmt(ctx)?,
            5 => {
                let exit = if ctx.in_switch || self.rng.chance(40) {
                    Exit::Continue
                } else {
                    Exit::Break
                };
                let cond = self.expr(&Ty::BOOL, 2, ctx.uniform_exits);
                Stmt::ExitIf { exit, cond }
            }
            6 => {
                let uniform = ctx.uniform && self.rng.chance(50);
                let ty = if self.rng.chance(70) { Ty::U32 } else { Ty::I32 };
                let modulus = self.rng.range(2, 5);
                let raw = self.expr(&ty, 2, uniform);
                // A small selector so that the cases are reached.
                let selector = match ty {
                    Ty::I32 => Expr::new(
                        Ty::I32,
                        ExprKind::Binary(BinOp::Rem, Box::new(raw), Box::new(Expr::lit(Lit::I32(modulus as i32)))),
                    ),
                    _ => Expr::new(
                        Ty::U32,
                        ExprKind::Binary(BinOp::Rem, Box::new(raw), Box::new(Expr::u32(modulus))),
                    ),
                };
                let selector = self.non_const(selector, uniform);
                let mut inner = self.enter(ctx, uniform);
                inner.in_switch = true;
                // The compiled CPU path refuses barriers in a switch (it then interprets the
                // kernel, which tests nothing), so most switches have none.
                inner.barriers &= self.rng.chance(15);
                let mut values: Vec<i64> = if ty == Ty::I32 {
                    (-(modulus as i64) + 1..modulus as i64).collect()
                } else {
                    (0..modulus as i64).collect()
                };
                let mut cases = Vec::new();
                while !values.is_empty() && cases.len() < 3 {
                    let take = self.rng.range(1, 2).min(values.len() as u32) as usize;
                    let start = self.rng.below((values.len() - take + 1) as u32) as usize;
                    let labels: Vec<i64> = values.drain(start..start + take).collect();
                    let block = {
                        let count = self.rng.range(1, 3);
                        self.block(inner, count)
                    };
                    cases.push((labels, block));
                }
                let default = {
                    let count = self.rng.range(0, 2);
                    self.block(inner, count)
                };
                Stmt::Switch {
                    selector,
                    cases,
                    default,
                }
            }
            7 => {
                let var = self.target_var(&Ty::U32, ctx, false)?;
                let index = self.expr(&Ty::U32, 2, false);
                Stmt::Exchange { var, index }
            }
            8 => Stmt::WgStore(self.expr(&Ty::U32, depth, false)),
            9 => {
                let workgroup = ctx.in_main && self.rng.chance(50);
                let slot = if workgroup {
                    self.rng.below(WORKGROUP_ATOMIC_OPS.len() as u32)
                } else {
                    self.rng.below(STORAGE_ATOMIC_OPS.len() as u32)
                } as u8;
                Stmt::Atomic {
                    workgroup,
                    slot,
                    value: self.expr(&Ty::U32, 2, false),
                }
            }
            10 => {
                let var = self.target_var(&Ty::U32, ctx, false)?;
                Stmt::WgAtomicRead {
                    var,
                    slot: self.rng.below(WORKGROUP_ATOMIC_OPS.len() as u32) as u8,
                }
            }
            11 => Stmt::Barrier,
            12 => {
                let ty = self.value_type();
                Stmt::Output(self.expr(&ty, depth, false))
            }
            13 => self.call_stmt(ctx)?,
            14 => Stmt::PtrStore(self.expr(&Ty::U32, depth, false)),
            _ => {
                let ret = ctx
                    .function
                    .and_then(|index| self.signatures.get(index))
                    .map(|signature| signature.ret.clone())?;
                // After a non-uniform return the rest of a helper with barriers would not be
                // uniform control flow.
                let in_barrier_helper = ctx
                    .function
                    .and_then(|index| self.signatures.get(index))
                    .is_some_and(|s| s.barriers);
                if in_barrier_helper && !ctx.uniform {
                    return Some(self.decl(ctx));
                }
                Stmt::ReturnIf {
                    cond: self.expr(&Ty::BOOL, 2, in_barrier_helper),
                    value: self.expr(&ret, depth, false),
                }
            }
        };
        Some(stmt)
    }

    /// The context inside a construct whose condition is uniform or not.
    fn enter(&self, ctx: Ctx, uniform: bool) -> Ctx {
        let mut inner = ctx;
        inner.block_depth += 1;
        if ctx.uniform && !uniform {
            inner.uniform = false;
            // A non-uniform exit from a uniform loop would make the loop non-uniform.
            if ctx.uniform_exits {
                inner.exits = false;
            }
        }
        inner
    }

    fn decl(&mut self, ctx: Ctx) -> Stmt {
        let ty = self.var_type();
        let uniform = ctx.uniform && self.rng.chance(35) && !matches!(ty, Ty::Struct(_));
        let init = match ty {
            Ty::Mat(..) => self.mat_narrow(&ty, 2, uniform),
            _ => self.expr(&ty, self.config.max_expr_depth, uniform),
        };
        // A `let` of a constant would be folded by naga; those stay `var`.
        let mutable = init.is_const() || self.rng.chance(80);
        let var = self.fresh();
        self.declare(
            var,
            ty.clone(),
            if mutable { VarKind::Local } else { VarKind::Param },
            uniform,
        );
        Stmt::Decl { var, ty, init, mutable }
    }

    /// A variable of type `ty` the current context may assign (creating none).
    fn target_var(&mut self, ty: &Ty, ctx: Ctx, uniform_value: bool) -> Option<VarId> {
        let candidates: Vec<VarId> = self
            .visible()
            .filter(|v| v.kind == VarKind::Local && &v.ty == ty)
            .filter(|v| !v.uniform || (ctx.uniform && uniform_value))
            .map(|v| v.id)
            .collect();
        if candidates.is_empty() {
            None
        } else {
            Some(*self.rng.pick(&candidates))
        }
    }

    fn assign(&mut self, ctx: Ctx) -> Option<Stmt> {
        let candidates: Vec<VarInfo> = self
            .visible()
            .filter(|v| v.assignable())
            .filter(|v| !v.uniform || ctx.uniform)
            .cloned()
            .collect();
        if candidates.is_empty() {
            return Some(self.decl(ctx));
        }
        let var = self.rng.pick(&candidates).clone();
        let uniform = var.uniform;
        let depth = self.config.max_expr_depth;
        let (place, ty) = match &var.ty {
            Ty::Array(elem, _) => {
                let wrap = if self.rng.chance(50) { Wrap::Rem } else { Wrap::Min };
                (
                    Place::Index(var.id, wrap, self.expr(&Ty::U32, 2, false)),
                    (**elem).clone(),
                )
            }
            Ty::Vec(n, s) if self.rng.chance(40) => (
                Place::Component(var.id, self.rng.below(u32::from(*n)) as u8),
                Ty::Scalar(*s),
            ),
            Ty::Struct(index) if self.rng.chance(60) => {
                let fields = self.structs[*index].fields.clone();
                let field = self.rng.below(fields.len() as u32) as usize;
                (Place::Member(var.id, field), fields[field].clone())
            }
            ty => (Place::Var(var.id), ty.clone()),
        };
        let value = match (&place, &ty) {
            (_, Ty::Mat(..)) => self.mat_narrow(&ty, 2, uniform),
            // Loop-carried updates: the new value depends on the old one.
            (Place::Var(id), Ty::Scalar(s)) if *s != Scalar::Bool && self.rng.chance(45) => {
                let op = match s {
                    Scalar::F32 => *self.rng.pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul]),
                    _ => *self
                        .rng
                        .pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Xor, BinOp::Or, BinOp::Shl]),
                };
                let rhs_ty = if op == BinOp::Shl { Ty::U32 } else { ty.clone() };
                let rhs = self.expr(&rhs_ty, depth - 1, uniform);
                Expr::new(
                    ty.clone(),
                    ExprKind::Binary(op, Box::new(Expr::new(ty.clone(), ExprKind::Load(*id))), Box::new(rhs)),
                )
            }
            _ => self.expr(&ty, depth, uniform),
        };
        Some(Stmt::Assign { place, value })
    }

    fn loop_stmt(&mut self, ctx: Ctx) -> Option<Stmt> {
        let budget = self.config.max_trip_product / ctx.trip_product.max(1);
        if budget < 2 {
            return None;
        }
        // In uniform control flow only uniform loops (see the module documentation).
        let uniform = ctx.uniform;
        let most = budget.min(6);
        let trips = if uniform {
            if self.rng.chance(75) {
                Expr::u32(self.rng.range(1, most))
            } else {
                // A uniform run-time bound.
                let value = self.expr(&Ty::U32, 1, true);
                let value = self.non_const(value, true);
                Expr::new(
                    Ty::U32,
                    ExprKind::Binary(BinOp::Rem, Box::new(value), Box::new(Expr::u32(most + 1))),
                )
            }
        } else {
            let value = self.expr(&Ty::U32, 2, false);
            Expr::new(
                Ty::U32,
                ExprKind::Binary(BinOp::Rem, Box::new(value), Box::new(Expr::u32(most + 1))),
            )
        };
        let trips = self.non_const(trips, uniform);
        let kind = *self.rng.pick(&[LoopKind::For, LoopKind::While, LoopKind::Loop]);
        let counter = self.fresh();
        let mut inner = ctx;
        inner.block_depth += 1;
        inner.exits = true;
        inner.uniform_exits = uniform;
        inner.in_switch = false;
        inner.trip_product = ctx.trip_product * most;
        self.scopes.push(Vec::new());
        self.declare(counter, Ty::U32, VarKind::Counter, uniform);
        let count = self.rng.range(2, 5);
        let mut body = self.block(inner, count);
        // Barriers inside loops, with state carried across them, are what compilers get
        // wrong most; most uniform loops get one.
        if uniform && ctx.in_main && ctx.barriers && self.rng.chance(60) {
            self.scopes.push(Vec::new());
            if let Some(var) = self.target_var(&Ty::U32, inner, false) {
                let index = self.expr(&Ty::U32, 2, false);
                let at = self.rng.below(body.len() as u32 + 1) as usize;
                body.insert(at, Stmt::Exchange { var, index });
            }
            self.scopes.pop();
        }
        self.scopes.pop();
        Some(Stmt::Loop {
            kind,
            counter,
            trips,
            body,
        })
    }

    fn call_stmt(&mut self, ctx: Ctx) -> Option<Stmt> {
        let func = self.rng.below(self.callable as u32) as usize;
        let signature = self.signatures.get(func)?.clone();
        if signature.barriers && !(ctx.uniform && ctx.barriers) {
            return Some(self.decl(ctx));
        }
        let depth = self.config.max_expr_depth - 1;
        let args: Vec<Expr> = signature.params.iter().map(|ty| self.expr(ty, depth, false)).collect();
        let ptr = if signature.has_ptr {
            // The pointer: a u32 variable of ours, or our own pointer parameter.
            let mut candidates: Vec<VarId> = self
                .visible()
                .filter(|v| v.ty == Ty::U32 && !v.uniform && matches!(v.kind, VarKind::Local | VarKind::PtrParam))
                .map(|v| v.id)
                .collect();
            if candidates.is_empty() {
                return Some(self.decl(ctx));
            }
            candidates.sort();
            Some(*self.rng.pick(&candidates))
        } else {
            None
        };
        let target = if self.rng.chance(60) {
            self.target_var(&signature.ret, ctx, false).filter(|t| Some(*t) != ptr)
        } else {
            None
        };
        Some(Stmt::CallStmt {
            func,
            args,
            ptr,
            target,
        })
    }

    // -----------------------------------------------------------------------------------
    // Expressions
    // -----------------------------------------------------------------------------------

    /// An expression of type `ty`; uniform across the workgroup when `uniform`.
    fn expr(&mut self, ty: &Ty, depth: u32, uniform: bool) -> Expr {
        if let Ty::Mat(..) = ty {
            return self.mat_narrow(ty, depth.min(2), uniform);
        }
        if depth == 0 || self.rng.chance(25) {
            return self.leaf(ty, uniform);
        }
        let expr = match ty {
            Ty::Scalar(Scalar::Bool) => self.bool_expr(depth - 1, uniform),
            Ty::Scalar(s) => self.scalar_expr(*s, depth - 1, uniform),
            Ty::Vec(n, s) => self.vec_expr(*n, *s, depth - 1, uniform),
            Ty::Struct(index) => {
                let fields = self.structs[*index].fields.clone();
                let parts = fields.iter().map(|f| self.expr(f, depth - 1, uniform)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(parts))
            }
            _ => self.leaf(ty, uniform),
        };
        self.non_const(expr, uniform)
    }

    /// Gives `expr` an operand known only at run time, if it has none, where an operator or
    /// call would otherwise be folded by naga.
    fn non_const(&mut self, mut expr: Expr, uniform: bool) -> Expr {
        let folds = matches!(
            expr.kind,
            ExprKind::Binary(..)
                | ExprKind::Call(..)
                | ExprKind::Select(..)
                | ExprKind::Convert(_)
                | ExprKind::Bitcast(_)
                | ExprKind::DynComponent(..)
                | ExprKind::Unary(..)
        );
        if folds && expr.is_const() {
            if let Some(first) = expr.children_mut().into_iter().next() {
                let ty = first.ty.clone();
                *first = self.runtime_leaf(&ty, uniform);
            }
        }
        // naga refuses a division by a constant zero; a divisor known only at run time may
        // still be zero, which WGSL defines (`x / 0 == x`, `x % 0 == 0`).
        if let ExprKind::Binary(BinOp::Div | BinOp::Rem, _, divisor) = &mut expr.kind {
            if divisor_may_be_zero(divisor) {
                let ty = divisor.ty.clone();
                **divisor = self.runtime_leaf(&ty, uniform);
            }
        }
        expr
    }

    fn lit(&mut self, scalar: Scalar) -> Expr {
        let lit = match scalar {
            Scalar::U32 => Lit::U32(match self.rng.weighted(&[60, 20, 20]) {
                0 => self.rng.below(17),
                1 => *self
                    .rng
                    .pick(&[31, 32, 255, 0x8000_0000, 0xFFFF_FFFF, 0x7FFF_FFFF, 0xFFFF]),
                _ => self.rng.next_u32(),
            }),
            Scalar::I32 => Lit::I32(match self.rng.weighted(&[60, 20, 20]) {
                0 => self.rng.below(33) as i32 - 16,
                1 => *self.rng.pick(&[i32::MAX, -i32::MAX, -1, 1000, -1000]),
                _ => self.rng.next_u32() as i32 & 0x7FFF_FFFF,
            }),
            Scalar::F32 => Lit::F32((self.rng.below(129) as i32 - 64) as f32 * 0.25),
            Scalar::Bool => Lit::Bool(self.rng.chance(50)),
        };
        Expr::lit(lit)
    }

    /// An input word at a small index: run-time, uniform.
    fn input(&mut self, scalar: Scalar) -> Expr {
        let index = Expr::u32(self.rng.below(INPUT_INT_WORDS));
        Expr::new(Ty::Scalar(scalar), ExprKind::Input(Box::new(index)))
    }

    /// A leaf that naga cannot fold.
    fn runtime_leaf(&mut self, ty: &Ty, uniform: bool) -> Expr {
        match ty {
            Ty::Scalar(Scalar::Bool) => {
                let s = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                let a = self.input(s);
                let b = self.lit(s);
                Expr::new(
                    Ty::BOOL,
                    ExprKind::Binary(
                        *self.rng.pick(&[BinOp::Lt, BinOp::Ge, BinOp::Ne]),
                        Box::new(a),
                        Box::new(b),
                    ),
                )
            }
            Ty::Scalar(s) => {
                if !uniform && self.rng.chance(40) {
                    if let Some(var) = self.pick_var(ty, false) {
                        return var;
                    }
                }
                self.input(*s)
            }
            Ty::Vec(_, s) => Expr::new(
                ty.clone(),
                ExprKind::Splat(Box::new(self.runtime_leaf(&Ty::Scalar(*s), uniform))),
            ),
            Ty::Mat(c, r) => {
                let column = Ty::Vec(*r, Scalar::F32);
                let columns = (0..*c).map(|_| self.runtime_leaf(&column, uniform)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(columns))
            }
            Ty::Struct(index) => {
                let fields = self.structs[*index].fields.clone();
                let parts = fields.iter().map(|f| self.runtime_leaf(f, uniform)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(parts))
            }
            Ty::Array(..) => self.input(Scalar::U32),
        }
    }

    /// A readable variable of type `ty`, as an expression.
    fn pick_var(&mut self, ty: &Ty, uniform: bool) -> Option<Expr> {
        let candidates: Vec<VarId> = self
            .visible()
            .filter(|v| &v.ty == ty && v.kind != VarKind::Array && (!uniform || v.uniform))
            .map(|v| v.id)
            .collect();
        if candidates.is_empty() {
            None
        } else {
            Some(Expr::new(ty.clone(), ExprKind::Load(*self.rng.pick(&candidates))))
        }
    }

    /// A scalar of `scalar` taken out of a variable: a vector lane, a struct member, an
    /// array element.
    fn part_of_var(&mut self, scalar: Scalar, uniform: bool) -> Option<Expr> {
        let target = Ty::Scalar(scalar);
        let candidates: Vec<VarInfo> = self
            .visible()
            .filter(|v| !uniform || v.uniform)
            .filter(|v| match &v.ty {
                Ty::Vec(_, s) => *s == scalar,
                Ty::Array(elem, _) => **elem == target,
                Ty::Struct(index) => self.structs[*index].fields.contains(&target),
                _ => false,
            })
            .cloned()
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let var = self.rng.pick(&candidates).clone();
        let load = Expr::new(var.ty.clone(), ExprKind::Load(var.id));
        Some(match &var.ty {
            Ty::Vec(n, _) => Expr::new(
                target,
                ExprKind::Component(Box::new(load), self.rng.below(u32::from(*n)) as u8),
            ),
            Ty::Array(..) => {
                let wrap = if self.rng.chance(50) { Wrap::Rem } else { Wrap::Min };
                let index = self.expr(&Ty::U32, 1, uniform);
                Expr::new(target, ExprKind::Index(var.id, wrap, Box::new(index)))
            }
            Ty::Struct(index) => {
                let fields = &self.structs[*index].fields;
                let matching: Vec<usize> = (0..fields.len()).filter(|f| fields[*f] == target).collect();
                let field = *self.rng.pick(&matching);
                Expr::new(target, ExprKind::Member(Box::new(load), field))
            }
            _ => return None,
        })
    }

    fn leaf(&mut self, ty: &Ty, uniform: bool) -> Expr {
        match ty {
            Ty::Scalar(scalar) => {
                let scalar = *scalar;
                let builtins = !uniform && self.scopes_in_main();
                match self.rng.weighted(&[
                    25,
                    30,
                    if scalar == Scalar::U32 { 12 } else { 0 },
                    if scalar == Scalar::U32 { 5 } else { 0 },
                    if scalar != Scalar::Bool { 14 } else { 0 },
                    10,
                    if scalar == Scalar::U32 && builtins { 4 } else { 0 },
                ]) {
                    0 => self.lit(scalar),
                    1 => self.pick_var(ty, uniform).unwrap_or_else(|| self.lit(scalar)),
                    2 => {
                        let choices: &[BuiltinValue] = if !self.scopes_in_main() {
                            &[]
                        } else if uniform {
                            &[BuiltinValue::WorkgroupIndex, BuiltinValue::NumWorkgroupsX]
                        } else {
                            &[
                                BuiltinValue::LocalIndex,
                                BuiltinValue::LocalIndex,
                                BuiltinValue::LocalX,
                                BuiltinValue::LocalY,
                                BuiltinValue::GlobalIndex,
                                BuiltinValue::GlobalX,
                                BuiltinValue::WorkgroupIndex,
                                BuiltinValue::NumWorkgroupsX,
                            ]
                        };
                        if choices.is_empty() {
                            self.input(scalar)
                        } else {
                            Expr::new(Ty::U32, ExprKind::Builtin(*self.rng.pick(choices)))
                        }
                    }
                    3 => Expr::new(Ty::U32, ExprKind::Param(self.rng.below(2) as u8)),
                    4 => {
                        let index = if uniform || self.rng.chance(50) {
                            Expr::u32(self.rng.below(INPUT_INT_WORDS))
                        } else {
                            self.leaf(&Ty::U32, false)
                        };
                        Expr::new(ty.clone(), ExprKind::Input(Box::new(index)))
                    }
                    5 => self.part_of_var(scalar, uniform).unwrap_or_else(|| self.lit(scalar)),
                    _ => Expr::new(Ty::U32, ExprKind::WgOwn),
                }
            }
            Ty::Vec(n, s) => {
                if let Some(var) = self.pick_var(ty, uniform).filter(|_| self.rng.chance(60)) {
                    return var;
                }
                if self.rng.chance(50) {
                    let value = self.leaf(&Ty::Scalar(*s), uniform);
                    Expr::new(ty.clone(), ExprKind::Splat(Box::new(value)))
                } else {
                    let parts = (0..*n).map(|_| self.leaf(&Ty::Scalar(*s), uniform)).collect();
                    Expr::new(ty.clone(), ExprKind::Construct(parts))
                }
            }
            Ty::Mat(..) => self.mat_narrow(ty, 0, uniform),
            Ty::Struct(index) => {
                if let Some(var) = self.pick_var(ty, uniform) {
                    return var;
                }
                let fields = self.structs[*index].fields.clone();
                let parts = fields.iter().map(|f| self.leaf(f, uniform)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(parts))
            }
            Ty::Array(..) => self.lit(Scalar::U32),
        }
    }

    /// Whether builtins are in scope (the entry point, not a helper).
    fn scopes_in_main(&self) -> bool {
        self.in_main
    }

    fn call_helper(&mut self, ty: &Ty, depth: u32, uniform: bool) -> Option<Expr> {
        let candidates: Vec<usize> = (0..self.callable)
            // A call in an expression may run under a condition (`&&`, `||`): never one with
            // barriers.
            .filter(|f| self.signatures[*f].ret == *ty && !self.signatures[*f].has_ptr && !self.signatures[*f].barriers)
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let func = *self.rng.pick(&candidates);
        let params = self.signatures[func].params.clone();
        let args = params.iter().map(|p| self.expr(p, depth, uniform)).collect();
        Some(Expr::new(ty.clone(), ExprKind::CallFn(func, args)))
    }

    fn scalar_expr(&mut self, s: Scalar, d: u32, u: bool) -> Expr {
        let ty = Ty::Scalar(s);
        let int = s.is_integer();
        let weights = [
            30,                                    // 0 arithmetic
            if int { 10 } else { 0 },              // 1 bitwise / shift
            8,                                     // 2 unary
            16,                                    // 3 built-in
            5,                                     // 4 select
            6,                                     // 5 convert
            if int { 5 } else { 0 },               // 6 bitcast
            8,                                     // 7 vector lane
            if self.callable > 0 { 6 } else { 0 }, // 8 helper
            if s == Scalar::F32 { 4 } else { 0 },  // 9 matrix element
        ];
        match self.rng.weighted(&weights) {
            0 => {
                let op = if int {
                    *self
                        .rng
                        .pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Add])
                } else {
                    *self.rng.pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul])
                };
                let a = self.expr(&ty, d, u);
                let b = self.expr(&ty, d, u);
                Expr::new(ty, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            1 => {
                let op = *self
                    .rng
                    .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Shl, BinOp::Shr]);
                let a = self.expr(&ty, d, u);
                let b_ty = if matches!(op, BinOp::Shl | BinOp::Shr) {
                    Ty::U32
                } else {
                    ty.clone()
                };
                let b = self.expr(&b_ty, d, u);
                Expr::new(ty, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            2 => {
                let op = match s {
                    Scalar::U32 => UnOp::BitNot,
                    Scalar::I32 => *self.rng.pick(&[UnOp::Neg, UnOp::BitNot]),
                    _ => UnOp::Neg,
                };
                let a = self.expr(&ty, d, u);
                Expr::new(ty, ExprKind::Unary(op, Box::new(a)))
            }
            3 => self.builtin_call(&ty, d, u),
            4 => {
                let f = self.expr(&ty, d, u);
                let t = self.expr(&ty, d, u);
                let c = self.expr(&Ty::BOOL, d, u);
                Expr::new(ty, ExprKind::Select(Box::new(f), Box::new(t), Box::new(c)))
            }
            5 => {
                let from = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32, Scalar::Bool]);
                let from = if from == s { Scalar::Bool } else { from };
                let a = self.expr(&Ty::Scalar(from), d, u);
                Expr::new(ty, ExprKind::Convert(Box::new(a)))
            }
            6 => {
                let from = if self.rng.chance(40) {
                    Scalar::F32
                } else if s == Scalar::U32 {
                    Scalar::I32
                } else {
                    Scalar::U32
                };
                let a = self.expr(&Ty::Scalar(from), d, u);
                Expr::new(ty, ExprKind::Bitcast(Box::new(a)))
            }
            7 => {
                let n = self.rng.range(2, 4) as u8;
                let v = self.expr(&Ty::Vec(n, s), d, u);
                if self.rng.chance(25) {
                    let index = self.expr(&Ty::U32, d.min(1), u);
                    Expr::new(ty, ExprKind::DynComponent(Box::new(v), Box::new(index)))
                } else {
                    Expr::new(ty, ExprKind::Component(Box::new(v), self.rng.below(u32::from(n)) as u8))
                }
            }
            8 => self.call_helper(&ty, d, u).unwrap_or_else(|| self.leaf(&ty, u)),
            _ => {
                let (c, r) = (self.rng.range(2, 4) as u8, self.rng.range(2, 4) as u8);
                let column = self.mat_column(c, r, d, u);
                Expr::new(
                    ty,
                    ExprKind::Component(Box::new(column), self.rng.below(u32::from(r)) as u8),
                )
            }
        }
    }

    /// A column (`vecR<f32>`) of some matrix expression: where unnarrowed matrix arithmetic
    /// may appear, since its result is only ever read, never multiplied again.
    fn mat_column(&mut self, c: u8, r: u8, d: u32, u: bool) -> Expr {
        let mat_ty = Ty::Mat(c, r);
        let d = d.min(2);
        let matrix = match self.rng.below(4) {
            0 => self.mat_narrow(&mat_ty, d, u),
            1 => {
                let op = *self.rng.pick(&[BinOp::Add, BinOp::Sub]);
                let a = self.mat_narrow(&mat_ty, d, u);
                let b = self.mat_narrow(&mat_ty, d, u);
                Expr::new(mat_ty.clone(), ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            2 => {
                // matKxR * matCxK
                let k = self.rng.range(2, 4) as u8;
                let a = self.mat_narrow(&Ty::Mat(k, r), d, u);
                let b = self.mat_narrow(&Ty::Mat(c, k), d, u);
                Expr::new(mat_ty.clone(), ExprKind::Binary(BinOp::Mul, Box::new(a), Box::new(b)))
            }
            _ => {
                let a = self.mat_narrow(&mat_ty, d, u);
                let s = self.expr(&Ty::F32, d, u);
                Expr::new(mat_ty.clone(), ExprKind::Binary(BinOp::Mul, Box::new(a), Box::new(s)))
            }
        };
        let column = self.rng.below(u32::from(c)) as u8;
        Expr::new(Ty::Vec(r, Scalar::F32), ExprKind::Component(Box::new(matrix), column))
    }

    /// A matrix whose elements are narrowed whole numbers, fit to be multiplied exactly.
    fn mat_narrow(&mut self, ty: &Ty, d: u32, u: bool) -> Expr {
        let Ty::Mat(c, r) = *ty else {
            return self.leaf(ty, u);
        };
        match self.rng.below(if d == 0 { 2 } else { 3 }) {
            0 => {
                if let Some(var) = self.pick_var(ty, u) {
                    return var;
                }
                let column = Ty::Vec(r, Scalar::F32);
                let columns = (0..c).map(|_| self.leaf(&column, u)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(columns))
            }
            1 => {
                let column = Ty::Vec(r, Scalar::F32);
                let columns = (0..c).map(|_| self.expr(&column, d.saturating_sub(1), u)).collect();
                Expr::new(ty.clone(), ExprKind::Construct(columns))
            }
            _ => {
                let inner = self.mat_narrow(&Ty::Mat(r, c), d - 1, u);
                Expr::new(ty.clone(), ExprKind::Call(Func::Transpose, vec![inner]))
            }
        }
    }

    fn bool_expr(&mut self, d: u32, u: bool) -> Expr {
        match self.rng.weighted(&[45, 15, 8, 12, 8, 5]) {
            0 => {
                let s = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                let op = *self
                    .rng
                    .pick(&[BinOp::Eq, BinOp::Ne, BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge]);
                let a = self.expr(&Ty::Scalar(s), d, u);
                let b = self.expr(&Ty::Scalar(s), d, u);
                Expr::new(Ty::BOOL, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            1 => {
                let op = *self.rng.pick(&[BinOp::LogicalAnd, BinOp::LogicalOr]);
                let a = self.expr(&Ty::BOOL, d, u);
                let b = self.expr(&Ty::BOOL, d, u);
                Expr::new(Ty::BOOL, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            2 => {
                let a = self.expr(&Ty::BOOL, d, u);
                Expr::new(Ty::BOOL, ExprKind::Unary(UnOp::Not, Box::new(a)))
            }
            3 => {
                let s = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                let n = self.rng.range(2, 4) as u8;
                let op = *self.rng.pick(&[BinOp::Eq, BinOp::Ne, BinOp::Lt, BinOp::Ge]);
                let a = self.expr(&Ty::Vec(n, s), d, u);
                let b = self.expr(&Ty::Vec(n, s), d, u);
                let compare = Expr::new(Ty::Vec(n, Scalar::Bool), ExprKind::Binary(op, Box::new(a), Box::new(b)));
                let func = *self.rng.pick(&[Func::All, Func::Any]);
                Expr::new(Ty::BOOL, ExprKind::Call(func, vec![compare]))
            }
            4 => {
                let s = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                let a = self.expr(&Ty::Scalar(s), d, u);
                Expr::new(Ty::BOOL, ExprKind::Convert(Box::new(a)))
            }
            _ => self
                .call_helper(&Ty::BOOL, d, u)
                .unwrap_or_else(|| self.leaf(&Ty::BOOL, u)),
        }
    }

    /// A built-in call of result type `ty` (a scalar or vector of integers or floats).
    fn builtin_call(&mut self, ty: &Ty, d: u32, u: bool) -> Expr {
        let Some(s) = ty.scalar() else {
            return self.leaf(ty, u);
        };
        let int_funcs = [
            Func::Abs,
            Func::Min,
            Func::Max,
            Func::Clamp,
            Func::CountOneBits,
            Func::CountLeadingZeros,
            Func::CountTrailingZeros,
            Func::FirstLeadingBit,
            Func::FirstTrailingBit,
            Func::ReverseBits,
            Func::ExtractBits,
            Func::InsertBits,
            Func::Dot,
        ];
        let float_funcs = [
            Func::Abs,
            Func::Min,
            Func::Max,
            Func::Clamp,
            Func::Floor,
            Func::Ceil,
            Func::Trunc,
            Func::Round,
            Func::Fract,
            Func::Sign,
            Func::Step,
            Func::Dot,
        ];
        let mut func = if s == Scalar::F32 {
            *self.rng.pick(&float_funcs)
        } else {
            *self.rng.pick(&int_funcs)
        };
        if func == Func::Dot && ty.width() != Some(1) {
            func = Func::Max;
        }
        let args = match func {
            Func::Min | Func::Max | Func::Step => vec![self.expr(ty, d, u), self.expr(ty, d, u)],
            Func::Clamp => {
                let (lo, hi) = match s {
                    Scalar::U32 => {
                        let a = self.rng.below(64);
                        (Lit::U32(a), Lit::U32(a + self.rng.below(1000)))
                    }
                    Scalar::I32 => {
                        let a = self.rng.below(64) as i32 - 32;
                        (Lit::I32(a), Lit::I32(a + self.rng.below(1000) as i32))
                    }
                    _ => {
                        let a = (self.rng.below(64) as f32 - 32.0) * 0.5;
                        (Lit::F32(a), Lit::F32(a + self.rng.below(64) as f32))
                    }
                };
                let splat = |lit: Lit| match ty {
                    Ty::Vec(..) => Expr::new(ty.clone(), ExprKind::Splat(Box::new(Expr::lit(lit)))),
                    _ => Expr::lit(lit),
                };
                vec![self.expr(ty, d, u), splat(lo), splat(hi)]
            }
            Func::ExtractBits => vec![
                self.expr(ty, d, u),
                self.expr(&Ty::U32, d.min(1), u),
                self.expr(&Ty::U32, d.min(1), u),
            ],
            Func::InsertBits => vec![
                self.expr(ty, d, u),
                self.expr(ty, d, u),
                self.expr(&Ty::U32, d.min(1), u),
                self.expr(&Ty::U32, d.min(1), u),
            ],
            Func::Dot => {
                let n = self.rng.range(2, 4) as u8;
                vec![self.expr(&Ty::Vec(n, s), d, u), self.expr(&Ty::Vec(n, s), d, u)]
            }
            Func::Abs if s == Scalar::U32 => vec![self.expr(ty, d, u)],
            _ => vec![self.expr(ty, d, u)],
        };
        Expr::new(ty.clone(), ExprKind::Call(func, args))
    }

    fn vec_expr(&mut self, n: u8, s: Scalar, d: u32, u: bool) -> Expr {
        let ty = Ty::Vec(n, s);
        let int = s.is_integer();
        let float = s == Scalar::F32;
        let weights = [
            25,                                    // 0 arithmetic (vector or vector-scalar)
            if int { 8 } else { 0 },               // 1 bitwise / shift
            10,                                    // 2 built-in
            10,                                    // 3 construct
            8,                                     // 4 swizzle
            5,                                     // 5 select
            5,                                     // 6 convert
            if float { 8 } else { 0 },             // 7 matrix
            if self.callable > 0 { 4 } else { 0 }, // 8 helper
            4,                                     // 9 unary
        ];
        match self.rng.weighted(&weights) {
            0 => {
                let op = if int {
                    *self
                        .rng
                        .pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem])
                } else {
                    *self.rng.pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul])
                };
                let a = self.expr(&ty, d, u);
                let b = if self.rng.chance(30) {
                    self.expr(&Ty::Scalar(s), d, u)
                } else {
                    self.expr(&ty, d, u)
                };
                let (a, b) = if self.rng.chance(30) { (b, a) } else { (a, b) };
                Expr::new(ty, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            1 => {
                let op = *self
                    .rng
                    .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Shl, BinOp::Shr]);
                let a = self.expr(&ty, d, u);
                let b_ty = if matches!(op, BinOp::Shl | BinOp::Shr) {
                    Ty::Vec(n, Scalar::U32)
                } else {
                    ty.clone()
                };
                let b = self.expr(&b_ty, d, u);
                Expr::new(ty, ExprKind::Binary(op, Box::new(a), Box::new(b)))
            }
            2 => self.builtin_call(&ty, d, u),
            3 => {
                let mut parts = Vec::new();
                let mut lanes = 0u8;
                while lanes < n {
                    let left = n - lanes;
                    if left >= 2 && self.rng.chance(30) {
                        let width = self.rng.range(2, u32::from(left)) as u8;
                        parts.push(self.expr(&Ty::Vec(width, s), d, u));
                        lanes += width;
                    } else {
                        parts.push(self.expr(&Ty::Scalar(s), d, u));
                        lanes += 1;
                    }
                }
                // `vec2<u32>(v2)` would be a conversion of a whole vector: fine too.
                Expr::new(ty, ExprKind::Construct(parts))
            }
            4 => {
                let from = self.rng.range(2, 4) as u8;
                let v = self.expr(&Ty::Vec(from, s), d, u);
                let lanes = (0..n).map(|_| self.rng.below(u32::from(from)) as u8).collect();
                Expr::new(ty, ExprKind::Swizzle(Box::new(v), lanes))
            }
            5 => {
                let f = self.expr(&ty, d, u);
                let t = self.expr(&ty, d, u);
                let c = self.expr(&Ty::BOOL, d, u);
                Expr::new(ty, ExprKind::Select(Box::new(f), Box::new(t), Box::new(c)))
            }
            6 => {
                let from = *self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                let from = if from == s { Scalar::U32 } else { from };
                if from == s {
                    return self.leaf(&ty, u);
                }
                let a = self.expr(&Ty::Vec(n, from), d, u);
                Expr::new(ty, ExprKind::Convert(Box::new(a)))
            }
            7 => match self.rng.below(3) {
                0 => {
                    // matCxN * vecC
                    let c = self.rng.range(2, 4) as u8;
                    let m = self.mat_narrow(&Ty::Mat(c, n), d.min(2), u);
                    let v = self.expr(&Ty::Vec(c, Scalar::F32), d, u);
                    Expr::new(ty, ExprKind::Binary(BinOp::Mul, Box::new(m), Box::new(v)))
                }
                1 => {
                    // vecR * matNxR
                    let r = self.rng.range(2, 4) as u8;
                    let v = self.expr(&Ty::Vec(r, Scalar::F32), d, u);
                    let m = self.mat_narrow(&Ty::Mat(n, r), d.min(2), u);
                    Expr::new(ty, ExprKind::Binary(BinOp::Mul, Box::new(v), Box::new(m)))
                }
                _ => {
                    let c = self.rng.range(2, 4) as u8;
                    self.mat_column(c, n, d, u)
                }
            },
            8 => self.call_helper(&ty, d, u).unwrap_or_else(|| self.leaf(&ty, u)),
            _ => {
                let op = match s {
                    Scalar::U32 => UnOp::BitNot,
                    Scalar::I32 => *self.rng.pick(&[UnOp::Neg, UnOp::BitNot]),
                    _ => UnOp::Neg,
                };
                let a = self.expr(&ty, d, u);
                Expr::new(ty, ExprKind::Unary(op, Box::new(a)))
            }
        }
    }
}

/// Whether a divisor has a lane naga sees as a constant that may be zero: naga refuses
/// `x / vec2(y, 0u)` as it refuses `x / 0u`.
pub fn divisor_may_be_zero(divisor: &Expr) -> bool {
    match &divisor.kind {
        ExprKind::Lit(Lit::U32(v)) => *v == 0,
        ExprKind::Lit(Lit::I32(v)) => *v == 0,
        ExprKind::Splat(inner) | ExprKind::Swizzle(inner, _) => divisor_may_be_zero(inner),
        ExprKind::Construct(parts) => parts.is_empty() || parts.iter().any(divisor_may_be_zero),
        _ => divisor.is_const(),
    }
}

/// The data every program of `seed` runs on: input words (integers, then floats that are
/// multiples of 0.25 in [-64, 64]), the storage atomics' initial values and the two
/// immediates.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub input: Vec<u32>,
    pub atomics: Vec<u32>,
    pub params: [u32; 2],
}

pub fn inputs(seed: u64) -> Inputs {
    let mut rng = Rng::new(seed ^ 0x1A7A_0000_0000_0001);
    let mut input = Vec::with_capacity(INPUT_WORDS as usize);
    for _ in 0..INPUT_INT_WORDS {
        input.push(match rng.weighted(&[40, 15, 30, 15]) {
            0 => rng.below(16),
            1 => *rng.pick(&[0, 1, 31, 32, 0x8000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFE]),
            2 => rng.next_u32(),
            _ => rng.below(1 << 12),
        });
    }
    for _ in INPUT_INT_WORDS..INPUT_WORDS {
        let value = (rng.below(513) as i32 - 256) as f32 * 0.25;
        input.push(value.to_bits());
    }
    let atomics = (0..STORAGE_ATOMICS)
        .map(|slot| match slot {
            // The min slot starts high and the and slot with many bits set, so they move.
            3 => 0xFFFF_0000 | rng.next_u32(),
            5 => rng.next_u32() | 0xF0F0_F0F0,
            _ => rng.below(1 << 16),
        })
        .collect();
    Inputs {
        input,
        atomics,
        params: [rng.below(16), rng.next_u32()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::emit;

    /// Parses and validates WGSL with naga, as every backend's translation starts with.
    fn naga_validate(source: &str) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
        let mut validator = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::IMMEDIATES,
        );
        validator
            .validate(&module)
            .map(|_| ())
            .map_err(|e| e.emit_to_string(source))
    }

    #[test]
    fn every_generated_program_is_valid_wgsl() {
        let mut failures = Vec::new();
        for seed in 0..300 {
            let program = generate(seed);
            let emitted = emit(&program);
            if let Err(error) = naga_validate(&emitted.source) {
                failures.push((seed, error, emitted.source));
            }
        }
        let summary: Vec<String> = failures
            .iter()
            .take(12)
            .map(|(seed, error, _)| {
                format!(
                    "seed {seed}: {}",
                    error
                        .lines()
                        .filter(|l| !l.contains("│ │") && !l.trim().is_empty())
                        .take(8)
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            })
            .collect();
        assert!(
            failures.is_empty(),
            "{} of 300 programs are invalid:\n{}\n\nthe first in full:\n{}",
            failures.len(),
            summary.join("\n"),
            failures.first().map(|f| f.2.as_str()).unwrap_or("")
        );
    }

    #[test]
    fn nonzero_divisors_stay_valid() {
        for seed in 0..60 {
            let mut program = generate(seed);
            program.nonzero_divisors = true;
            let source = emit(&program).source;
            if let Err(error) = naga_validate(&source) {
                panic!("seed {seed}: {error}");
            }
        }
    }

    #[test]
    fn helpers_with_barriers_are_generated_and_called() {
        // Printed helpers are the ones the entry point reaches.
        let with_barriers = (0..200)
            .filter(|&seed| {
                let source = emit(&generate(seed)).source;
                let helpers = &source[..source.find("@compute").expect("an entry point")];
                helpers.contains("workgroupBarrier()")
            })
            .count();
        assert!(
            with_barriers >= 20,
            "only {with_barriers} of 200 programs call a helper with a barrier"
        );
    }

    #[test]
    fn every_parameter_placement_is_generated_and_loads() {
        let mut seen = std::collections::HashSet::new();
        for seed in 0..200 {
            let program = generate(seed);
            let emitted = emit(&program);
            if !emitted.source.contains("params.") {
                continue;
            }
            let placement = match program.params_from {
                ParamsFrom::Immediate => "immediate",
                ParamsFrom::Uniform {
                    group: 0, binding: 0, ..
                } => "uniform first",
                ParamsFrom::Uniform { staged: true, .. } => "uniform by value",
                ParamsFrom::Uniform { .. } => "uniform after a gap",
                ParamsFrom::Override { default_b: true } => "override with its default",
                ParamsFrom::Override { .. } => "overrides set",
            };
            seen.insert(placement);
            emitted
                .parse()
                .unwrap_or_else(|error| panic!("seed {seed} ({placement}): {error}\n{}", emitted.source));
        }
        assert_eq!(seen.len(), 6, "placements seen: {seen:?}");
    }

    #[test]
    fn xhal_accepts_every_generated_program() {
        for seed in 0..100 {
            let emitted = emit(&generate(seed));
            if let Err(error) = emitted.parse() {
                panic!("seed {seed}: {error}\n{}", emitted.source);
            }
        }
    }

    #[test]
    fn a_seed_names_one_program() {
        assert_eq!(generate(17), generate(17));
        assert_eq!(emit(&generate(17)).source, emit(&generate(17)).source);
        assert_ne!(emit(&generate(17)).source, emit(&generate(18)).source);
        assert_eq!(inputs(5), inputs(5));
    }

    #[test]
    fn programs_use_what_real_kernels_use() {
        let sources: Vec<String> = (0..300).map(|seed| emit(&generate(seed)).source).collect();
        for feature in [
            "workgroupBarrier()",
            "var<workgroup> wg",
            "atomicAdd(&acc",
            "atomicAdd(&wacc",
            "loop {",
            "while (",
            "for (var",
            "continuing {",
            "break if",
            "switch (",
            "ptr<function, u32>",
            "mat3x3<f32>",
            "struct S0",
            "countOneBits(",
            "reverseBits(",
            "extractBits(",
            "insertBits(",
            "firstLeadingBit(",
            "var<immediate> params",
            "array<u32, ",
            "{ continue; }",
            "{ break; }",
        ] {
            let count = sources.iter().filter(|s| s.contains(feature)).count();
            assert!(count >= 3, "only {count} of 300 programs use `{feature}`");
        }
        // Barriers inside loops, where state carried across them is easiest to get wrong.
        let looped = sources
            .iter()
            .filter(|s| {
                s.lines()
                    .skip_while(|l| !l.contains("for (var") && !l.contains("loop {") && !l.contains("while ("))
                    .any(|l| l.contains("workgroupBarrier"))
            })
            .count();
        assert!(
            looped >= 20,
            "only {looped} programs have a barrier after a loop header"
        );
    }
}
