//! The program tree the generator builds, the shrinker rewrites and [`crate::emit`] prints.
//!
//! Programs are trees rather than strings so that the shrinker can remove a statement or
//! replace an expression and still print valid WGSL. Every construct whose meaning would be
//! undefined or order-dependent on its own (an index, a shift, a float product, a read of a
//! neighbour's workgroup slot) is one node that carries its own guard, so that no rewrite can
//! separate the guard from what it protects.

/// A scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    U32,
    I32,
    F32,
    Bool,
}

impl Scalar {
    pub fn wgsl(self) -> &'static str {
        match self {
            Scalar::U32 => "u32",
            Scalar::I32 => "i32",
            Scalar::F32 => "f32",
            Scalar::Bool => "bool",
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, Scalar::U32 | Scalar::I32)
    }
}

/// A type a value can have.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ty {
    Scalar(Scalar),
    /// `vecN<T>`, N in 2..=4.
    Vec(u8, Scalar),
    /// `matCxR<f32>`: columns, rows.
    Mat(u8, u8),
    /// `S<index>`, one of [`Program::structs`].
    Struct(usize),
    /// A fixed-size function-scope array of a scalar or vector: only ever a variable's type.
    Array(Box<Ty>, u32),
}

impl Ty {
    pub const U32: Ty = Ty::Scalar(Scalar::U32);
    pub const I32: Ty = Ty::Scalar(Scalar::I32);
    pub const F32: Ty = Ty::Scalar(Scalar::F32);
    pub const BOOL: Ty = Ty::Scalar(Scalar::Bool);

    /// The scalar a scalar or vector is made of.
    pub fn scalar(&self) -> Option<Scalar> {
        match self {
            Ty::Scalar(s) | Ty::Vec(_, s) => Some(*s),
            Ty::Mat(..) => Some(Scalar::F32),
            _ => None,
        }
    }

    /// Components of a vector, 1 for a scalar.
    pub fn width(&self) -> Option<u8> {
        match self {
            Ty::Scalar(_) => Some(1),
            Ty::Vec(n, _) => Some(*n),
            _ => None,
        }
    }

    pub fn is_float(&self) -> bool {
        matches!(self, Ty::Scalar(Scalar::F32) | Ty::Vec(_, Scalar::F32))
    }

    /// The same shape with another scalar (`vec3<u32>` → `vec3<f32>`).
    pub fn with_scalar(&self, scalar: Scalar) -> Ty {
        match self {
            Ty::Vec(n, _) => Ty::Vec(*n, scalar),
            _ => Ty::Scalar(scalar),
        }
    }
}

/// A struct declaration; members are scalars or vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct StructDef {
    pub fields: Vec<Ty>,
}

/// A literal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lit {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
}

/// A variable, unique across the whole program (so `v7` never clashes with anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// Values the entry point knows about its invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinValue {
    /// `local_invocation_index`.
    LocalIndex,
    /// `local_invocation_id.x`, `.y`.
    LocalX,
    LocalY,
    /// The flat global invocation index (workgroup index × workgroup size + local index).
    GlobalIndex,
    /// `global_invocation_id.x`.
    GlobalX,
    /// The flat workgroup index: uniform.
    WorkgroupIndex,
    /// `num_workgroups.x`: uniform.
    NumWorkgroupsX,
}

impl BuiltinValue {
    pub fn is_uniform(self) -> bool {
        matches!(self, BuiltinValue::WorkgroupIndex | BuiltinValue::NumWorkgroupsX)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `-x` (i32, f32).
    Neg,
    /// `~x` (u32, i32).
    BitNot,
    /// `!b`.
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    /// For floats the emitter narrows both operands first (see [`crate::emit`]), so that the
    /// product is exact and fusing it into an FMA cannot change the result.
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    /// The shift amount is masked with `& 31u` by the emitter.
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicalAnd,
    LogicalOr,
}

impl BinOp {
    pub fn wgsl(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::LogicalAnd => "&&",
            BinOp::LogicalOr => "||",
        }
    }
}

/// Built-in functions. Argument types follow WGSL; see [`crate::gen`] for what each is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Abs,
    Min,
    Max,
    /// `clamp(e, lo, hi)`: the generator gives literal bounds with `lo <= hi`.
    Clamp,
    CountOneBits,
    CountLeadingZeros,
    CountTrailingZeros,
    FirstLeadingBit,
    FirstTrailingBit,
    ReverseBits,
    ExtractBits,
    InsertBits,
    Dot,
    Floor,
    Ceil,
    Trunc,
    Round,
    Fract,
    Sign,
    Step,
    All,
    Any,
    Transpose,
}

impl Func {
    pub fn wgsl(self) -> &'static str {
        match self {
            Func::Abs => "abs",
            Func::Min => "min",
            Func::Max => "max",
            Func::Clamp => "clamp",
            Func::CountOneBits => "countOneBits",
            Func::CountLeadingZeros => "countLeadingZeros",
            Func::CountTrailingZeros => "countTrailingZeros",
            Func::FirstLeadingBit => "firstLeadingBit",
            Func::FirstTrailingBit => "firstTrailingBit",
            Func::ReverseBits => "reverseBits",
            Func::ExtractBits => "extractBits",
            Func::InsertBits => "insertBits",
            Func::Dot => "dot",
            Func::Floor => "floor",
            Func::Ceil => "ceil",
            Func::Trunc => "trunc",
            Func::Round => "round",
            Func::Fract => "fract",
            Func::Sign => "sign",
            Func::Step => "step",
            Func::All => "all",
            Func::Any => "any",
            Func::Transpose => "transpose",
        }
    }
}

/// How an index is kept inside an array of `len` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrap {
    /// `(i) % len`
    Rem,
    /// `min(i, len - 1)`
    Min,
}

/// An expression and its type.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub ty: Ty,
    pub kind: ExprKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Lit(Lit),
    /// `vecN<T>(s)` or, for a matrix, every element `s`.
    Splat(Box<Expr>),
    /// A variable, `let` or parameter; for a pointer parameter, `*p`.
    Load(VarId),
    Builtin(BuiltinValue),
    /// `params.a` (0) or `params.b` (1): the `var<immediate>` block.
    Param(u8),
    /// A word of the input buffer, index wrapped to its length; `u32` reads it, `i32`
    /// bitcasts it, `f32` reads the float half.
    Input(Box<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
    /// `select(false_value, true_value, condition)`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A vector, matrix (columns) or struct built from its parts.
    Construct(Vec<Expr>),
    /// `v.x` of a vector, or column `m[c]` of a matrix.
    Component(Box<Expr>, u8),
    Swizzle(Box<Expr>, Vec<u8>),
    /// `v[(i) % N]` with a run-time index.
    DynComponent(Box<Expr>, Box<Expr>),
    Member(Box<Expr>, usize),
    /// An element of a local array variable, index wrapped.
    Index(VarId, Wrap, Box<Expr>),
    /// A value conversion to `ty`; float to integer is clamped first, integer to float uses
    /// only the low 12 bits, so every conversion is exact and in range.
    Convert(Box<Expr>),
    /// A bitcast to `ty`; from a float, `-0.0` is made `+0.0` first.
    Bitcast(Box<Expr>),
    /// A helper function called with value arguments only.
    CallFn(usize, Vec<Expr>),
    /// This invocation's own slot of the workgroup array.
    WgOwn,
}

impl Expr {
    pub fn new(ty: Ty, kind: ExprKind) -> Expr {
        Expr { ty, kind }
    }

    pub fn lit(lit: Lit) -> Expr {
        let ty = match lit {
            Lit::U32(_) => Ty::U32,
            Lit::I32(_) => Ty::I32,
            Lit::F32(_) => Ty::F32,
            Lit::Bool(_) => Ty::BOOL,
        };
        Expr::new(ty, ExprKind::Lit(lit))
    }

    pub fn u32(value: u32) -> Expr {
        Expr::lit(Lit::U32(value))
    }

    /// The direct sub-expressions, in order.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Lit(_) | ExprKind::Load(_) | ExprKind::Builtin(_) | ExprKind::Param(_) | ExprKind::WgOwn => {
                Vec::new()
            }
            ExprKind::Splat(e)
            | ExprKind::Input(e)
            | ExprKind::Unary(_, e)
            | ExprKind::Component(e, _)
            | ExprKind::Swizzle(e, _)
            | ExprKind::Member(e, _)
            | ExprKind::Index(_, _, e)
            | ExprKind::Convert(e)
            | ExprKind::Bitcast(e) => vec![e],
            ExprKind::Binary(_, a, b) | ExprKind::DynComponent(a, b) => vec![a, b],
            ExprKind::Select(a, b, c) => vec![a, b, c],
            ExprKind::Call(_, args) | ExprKind::Construct(args) | ExprKind::CallFn(_, args) => args.iter().collect(),
        }
    }

    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match &mut self.kind {
            ExprKind::Lit(_) | ExprKind::Load(_) | ExprKind::Builtin(_) | ExprKind::Param(_) | ExprKind::WgOwn => {
                Vec::new()
            }
            ExprKind::Splat(e)
            | ExprKind::Input(e)
            | ExprKind::Unary(_, e)
            | ExprKind::Component(e, _)
            | ExprKind::Swizzle(e, _)
            | ExprKind::Member(e, _)
            | ExprKind::Index(_, _, e)
            | ExprKind::Convert(e)
            | ExprKind::Bitcast(e) => vec![e],
            ExprKind::Binary(_, a, b) | ExprKind::DynComponent(a, b) => vec![a, b],
            ExprKind::Select(a, b, c) => vec![a, b, c],
            ExprKind::Call(_, args) | ExprKind::Construct(args) | ExprKind::CallFn(_, args) => {
                args.iter_mut().collect()
            }
        }
    }

    /// True when nothing in the expression is known only at run time, so that naga would
    /// evaluate it while parsing (and refuse it if it overflowed).
    pub fn is_const(&self) -> bool {
        match &self.kind {
            ExprKind::Lit(_) => true,
            ExprKind::Load(_)
            | ExprKind::Builtin(_)
            | ExprKind::Param(_)
            | ExprKind::Input(_)
            | ExprKind::Index(..)
            | ExprKind::CallFn(..)
            | ExprKind::WgOwn => false,
            _ => self.children().iter().all(|child| child.is_const()),
        }
    }

    /// Number of nodes.
    pub fn size(&self) -> usize {
        1 + self.children().iter().map(|child| child.size()).sum::<usize>()
    }

    /// Calls `visit` on this expression and every sub-expression.
    pub fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        for child in self.children() {
            child.walk(visit);
        }
    }
}

/// Where an assignment stores.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    Var(VarId),
    /// `v.x = ...` of a vector variable.
    Component(VarId, u8),
    Member(VarId, usize),
    Index(VarId, Wrap, Expr),
}

impl Place {
    pub fn var(&self) -> VarId {
        match self {
            Place::Var(v) | Place::Component(v, _) | Place::Member(v, _) | Place::Index(v, _, _) => *v,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    /// `for (var i = 0u; i < n; i++)`
    For,
    /// `var i = 0u; while i < n { i++; ... }` (the counter moves first, so `continue` is safe)
    While,
    /// `var i = 0u; loop { ...; continuing { i++; break if i >= n; } }` (runs at least once)
    Loop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Break,
    Continue,
}

/// The atomic operation of each slot. One operation per slot makes the final value
/// independent of the order the invocations reach it.
pub const STORAGE_ATOMIC_OPS: [&str; 8] = [
    "atomicAdd",
    "atomicOr",
    "atomicMax",
    "atomicMin",
    "atomicXor",
    "atomicAnd",
    "atomicAdd",
    "atomicMax",
];
/// Workgroup atomics start at zero, so And and Min would never change them.
pub const WORKGROUP_ATOMIC_OPS: [&str; 4] = ["atomicAdd", "atomicOr", "atomicMax", "atomicXor"];

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `var v: T = init;` (mutable) or `let v: T = init;`.
    Decl {
        var: VarId,
        ty: Ty,
        init: Expr,
        mutable: bool,
    },
    /// `var v: array<T, N>;`, zero-initialised.
    ArrayDecl {
        var: VarId,
        elem: Ty,
        len: u32,
    },
    Assign {
        place: Place,
        value: Expr,
    },
    If {
        cond: Expr,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// A loop whose hidden counter `counter` runs from 0 to `trips` (a u32 expression the
    /// emitter wraps in `min(.., 8u)`), so every loop terminates.
    Loop {
        kind: LoopKind,
        counter: VarId,
        trips: Expr,
        body: Vec<Stmt>,
    },
    /// `if cond { break; }` or `if cond { continue; }` of the innermost loop.
    ExitIf {
        exit: Exit,
        cond: Expr,
    },
    Switch {
        selector: Expr,
        cases: Vec<(Vec<i64>, Vec<Stmt>)>,
        default: Vec<Stmt>,
    },
    /// `workgroupBarrier(); v = wg[(index) % N]; workgroupBarrier();`: reads a neighbour's
    /// slot where nobody writes; only in uniform control flow.
    Exchange {
        var: VarId,
        index: Expr,
    },
    /// `wg[own] = value;`
    WgStore(Expr),
    /// An atomic op on slot `slot` of the storage (`workgroup: false`) or workgroup array,
    /// its old value discarded.
    Atomic {
        workgroup: bool,
        slot: u8,
        value: Expr,
    },
    /// `workgroupBarrier(); v = atomicLoad(&wacc[slot]); workgroupBarrier();`
    WgAtomicRead {
        var: VarId,
        slot: u8,
    },
    Barrier,
    /// Writes the value's bits to this invocation's next output slots.
    Output(Expr),
    /// A helper call as a statement, with an optional pointer argument `&ptr` (a `u32`
    /// variable) and an optional variable receiving the result.
    CallStmt {
        func: usize,
        args: Vec<Expr>,
        ptr: Option<VarId>,
        target: Option<VarId>,
    },
    /// `*p = value;` of a helper's pointer parameter.
    PtrStore(Expr),
    /// `if cond { return value; }` in a helper.
    ReturnIf {
        cond: Expr,
        value: Expr,
    },
}

impl Stmt {
    /// The blocks directly inside this statement.
    pub fn blocks(&self) -> Vec<&Vec<Stmt>> {
        match self {
            Stmt::If { then, els, .. } => vec![then, els],
            Stmt::Loop { body, .. } => vec![body],
            Stmt::Switch { cases, default, .. } => {
                let mut blocks: Vec<&Vec<Stmt>> = cases.iter().map(|(_, block)| block).collect();
                blocks.push(default);
                blocks
            }
            _ => Vec::new(),
        }
    }

    pub fn blocks_mut(&mut self) -> Vec<&mut Vec<Stmt>> {
        match self {
            Stmt::If { then, els, .. } => vec![then, els],
            Stmt::Loop { body, .. } => vec![body],
            Stmt::Switch { cases, default, .. } => {
                let mut blocks: Vec<&mut Vec<Stmt>> = cases.iter_mut().map(|(_, block)| block).collect();
                blocks.push(default);
                blocks
            }
            _ => Vec::new(),
        }
    }

    /// The expressions directly in this statement (not those of nested blocks).
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Stmt::Decl { init, .. } => vec![init],
            Stmt::ArrayDecl { .. } | Stmt::Barrier | Stmt::WgAtomicRead { .. } => Vec::new(),
            Stmt::Assign { place, value } => match place {
                Place::Index(_, _, index) => vec![index, value],
                _ => vec![value],
            },
            Stmt::If { cond, .. } | Stmt::ExitIf { cond, .. } => vec![cond],
            Stmt::Loop { trips, .. } => vec![trips],
            Stmt::Switch { selector, .. } => vec![selector],
            Stmt::Exchange { index, .. } => vec![index],
            Stmt::WgStore(e) | Stmt::Output(e) | Stmt::PtrStore(e) => vec![e],
            Stmt::Atomic { value, .. } => vec![value],
            Stmt::CallStmt { args, .. } => args.iter_mut().collect(),
            Stmt::ReturnIf { cond, value } => vec![cond, value],
        }
    }

    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Decl { init, .. } => vec![init],
            Stmt::ArrayDecl { .. } | Stmt::Barrier | Stmt::WgAtomicRead { .. } => Vec::new(),
            Stmt::Assign { place, value } => match place {
                Place::Index(_, _, index) => vec![index, value],
                _ => vec![value],
            },
            Stmt::If { cond, .. } | Stmt::ExitIf { cond, .. } => vec![cond],
            Stmt::Loop { trips, .. } => vec![trips],
            Stmt::Switch { selector, .. } => vec![selector],
            Stmt::Exchange { index, .. } => vec![index],
            Stmt::WgStore(e) | Stmt::Output(e) | Stmt::PtrStore(e) => vec![e],
            Stmt::Atomic { value, .. } => vec![value],
            Stmt::CallStmt { args, .. } => args.iter().collect(),
            Stmt::ReturnIf { cond, value } => vec![cond, value],
        }
    }

    /// Statements, counting nested ones.
    pub fn size(&self) -> usize {
        1 + self
            .blocks()
            .iter()
            .map(|block| block.iter().map(Stmt::size).sum::<usize>())
            .sum::<usize>()
    }
}

/// A helper function.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Value parameters.
    pub params: Vec<(VarId, Ty)>,
    /// A `ptr<function, u32>` parameter, read as `*p`.
    pub ptr_param: Option<VarId>,
    pub ret: Ty,
    pub body: Vec<Stmt>,
    /// The value returned at the end.
    pub result: Expr,
}

/// A whole kernel and how it is launched.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub seed: u64,
    /// Where the two run-time parameters (`params.a`, `params.b`) come from.
    pub params_from: ParamsFrom,
    /// `@workgroup_size(x, y, 1)`.
    pub workgroup_size: [u32; 2],
    /// Workgroups launched in x and y.
    pub workgroups: [u32; 2],
    pub structs: Vec<StructDef>,
    pub functions: Vec<Function>,
    pub body: Vec<Stmt>,
    /// Print every integer divisor as one that is never zero (`--avoid-zero-divisors`): for
    /// a device whose known division-by-zero bug would otherwise hide everything else. Part of
    /// the program, so that shrinking keeps it.
    pub nonzero_divisors: bool,
}

/// Where a program's two run-time parameters live: each way a real kernel takes its
/// parameters, so that every way is compared across devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamsFrom {
    /// `var<immediate> params: Params`.
    Immediate,
    /// `var<uniform> params: Settings` (with a `vec3` between the two members, so that the
    /// uniform layout rules place `b` at byte 28) at `@group(group) @binding(binding)`.
    /// Group 0 binding 0 puts the storage buffers from binding 1 on. `staged`: passed by
    /// value (`Launch::uniform_bytes`) instead of in a buffer of the run's own.
    Uniform { group: u32, binding: u32, staged: bool },
    /// `override`s, `knob_a` without a default and `knob_b` with one, set when the kernel is
    /// loaded (`knob_b` only when `!default_b`). Each is read combined with a zero from the
    /// immediate block, so that no expression is an override-expression that naga would fold
    /// (and refuse, where it overflows) at load time.
    Override { default_b: bool },
}

impl ParamsFrom {
    /// The placement of `seed`, drawn apart from the program so that the program of a seed
    /// stays what it was.
    pub fn of_seed(seed: u64) -> ParamsFrom {
        let mut rng = crate::rng::Rng::new(seed ^ 0x9A7A_3500_0000_0002);
        match rng.below(6) {
            0 | 1 => ParamsFrom::Immediate,
            2 => ParamsFrom::Uniform {
                group: 0,
                binding: 0,
                staged: rng.chance(50),
            },
            3 => ParamsFrom::Uniform {
                group: 0,
                binding: 6,
                staged: rng.chance(50),
            },
            4 => ParamsFrom::Uniform {
                group: 1,
                binding: 2,
                staged: rng.chance(50),
            },
            _ => ParamsFrom::Override {
                default_b: rng.chance(50),
            },
        }
    }
}

impl Program {
    pub fn invocations_per_workgroup(&self) -> u32 {
        self.workgroup_size[0] * self.workgroup_size[1]
    }

    pub fn invocations(&self) -> u32 {
        self.invocations_per_workgroup() * self.workgroups[0] * self.workgroups[1]
    }

    /// Statements and expression nodes: the measure the shrinker makes smaller.
    pub fn size(&self) -> usize {
        fn block_size(block: &[Stmt]) -> usize {
            block
                .iter()
                .map(|stmt| {
                    1 + stmt.exprs().iter().map(|e| e.size()).sum::<usize>()
                        + stmt.blocks().iter().map(|b| block_size(b)).sum::<usize>()
                })
                .sum()
        }
        block_size(&self.body)
            + self
                .functions
                .iter()
                .map(|f| 1 + block_size(&f.body) + f.result.size())
                .sum::<usize>()
    }
}

/// Number of input words: the first half read as integers, the second as floats.
pub const INPUT_WORDS: u32 = 128;
/// Integer words of the input; float words follow.
pub const INPUT_INT_WORDS: u32 = 64;
/// Slots of the storage atomics buffer.
pub const STORAGE_ATOMICS: u32 = 8;
/// Loop trip counts are clamped to this.
pub const MAX_TRIPS: u32 = 8;
