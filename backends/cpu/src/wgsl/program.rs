//! The compiled form of a compute entry point: structured control flow over straight-line
//! instructions that each work on whole register columns (one word per lane).
//!
//! Registers are never reused: every value an instruction produces gets a fresh column, so
//! an instruction's destination never overlaps its operands and values computed for lanes
//! that are switched off cannot clobber anything a live lane still needs. Variables are the
//! exception: stores write their columns on the active lanes only, and the `*Set` forms
//! compute into them from operands that may include the variable itself. Function calls are
//! inlined (WGSL has no recursion), which makes every pointer's root variable known here.

use super::ops::{Bin32, LaneFn, Tern32, Un32};

/// A register: column `r` of the register file, one 32-bit word per lane.
pub(crate) type Reg = u32;

/// An instruction input that may be a register or a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operand {
    Reg(Reg),
    Imm(u32),
}

/// A memory that lanes share, addressed in bytes with WGSL's host layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostSpace {
    /// Buffer argument `i` (`@group(0) @binding(i)`).
    Binding(u32),
    /// The launch's scalar block (`var<immediate>`).
    Immediate,
}

/// How a host-memory scalar is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HostKind {
    /// A 32-bit word (half of a 64-bit value is two of these).
    Word,
    /// A binary16 value, held as `f32` in the register.
    F16,
}

/// The length an index is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Bound {
    Fixed(u32),
    /// A runtime-sized array in a buffer: `(view size - header) / stride` elements.
    Runtime {
        binding: u32,
        header: u32,
        stride: u32,
    },
}

/// What kind of composite an index goes into, for the fault message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Container {
    Array,
    Vector,
    Matrix,
}

impl Container {
    pub(crate) fn describe(self, length: u64) -> String {
        match self {
            Container::Array => format!("array has {length} elements"),
            Container::Vector => format!("vector has {length} components"),
            Container::Matrix => format!("matrix has {length} columns"),
        }
    }
}

/// Where checked indices point, for fault messages: an index into [`Program::places`].
pub(crate) type Place = u32;

/// A checked element offset: `base + index * stride` per lane, with `index` checked
/// against `bound` on the active lanes (a fault names `place` and the `container`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct At {
    pub(crate) base: Option<Reg>,
    pub(crate) index: Reg,
    pub(crate) stride: u32,
    pub(crate) bound: Bound,
    pub(crate) container: Container,
    pub(crate) place: Place,
    pub(crate) signed: bool,
}

/// An atomic read-modify-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    Add,
    Sub,
    And,
    Or,
    Xor,
    MinI,
    MaxI,
    MinU,
    MaxU,
    Exchange,
    CompareExchange,
}

/// Where an atomic lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicSpace {
    Workgroup,
    Host(u32),
}

/// One straight-line instruction. Pure ones compute every lane (their inputs are defined
/// for every lane, if meaningless on inactive ones); memory ones touch only active lanes,
/// except that a workgroup-memory load may fill its own destination on every lane when
/// every lane's address is inside workgroup memory.
#[derive(Debug, Clone)]
pub(crate) enum Instr {
    Un {
        op: Un32,
        dst: Reg,
        a: Reg,
    },
    Bin {
        op: Bin32,
        dst: Reg,
        a: Reg,
        b: Reg,
    },
    Tern {
        op: Tern32,
        dst: Reg,
        a: Reg,
        b: Reg,
        c: Reg,
    },
    /// A per-lane function on words: `args` (up to 8, `None` reads 0) to `dst` (up to 4).
    Lanes {
        f: LaneFn,
        args: Box<[Option<Reg>]>,
        dst: Box<[Option<Reg>]>,
    },
    /// `column = op(a)` on active lanes: a `Un` whose result only a `StoreLane` of it into a
    /// variable reads. The operand may be `column` itself.
    UnSet {
        op: Un32,
        column: Reg,
        a: Reg,
    },
    /// `column = op(a, b)` on active lanes: a `Bin` whose result only a `StoreLane` of it
    /// into a variable reads. An operand may be `column` itself.
    BinSet {
        op: Bin32,
        column: Reg,
        a: Reg,
        b: Reg,
    },
    /// As [`Instr::BinSet`], for a `Tern`.
    TernSet {
        op: Tern32,
        column: Reg,
        a: Reg,
        b: Reg,
        c: Reg,
    },
    /// `dst = src` on every lane.
    Copy {
        dst: Reg,
        src: Reg,
    },
    /// `dst = value` on every lane.
    Fill {
        dst: Reg,
        value: u32,
    },
    /// `dst = src` on active lanes only (a write to per-invocation state).
    Set {
        dst: Reg,
        src: Operand,
    },
    /// `dst = choices[index]` per lane, with `index` checked on active lanes.
    Pick {
        dst: Reg,
        index: Reg,
        choices: Box<[Reg]>,
        container: Container,
        place: Place,
        signed: bool,
    },
    /// `dst = at.base + at.index * at.stride` per lane, with the index checked on active lanes.
    Index {
        dst: Reg,
        at: At,
    },
    /// `dst = arrayLength(...)`: elements of a runtime-sized array in binding `binding`.
    ArrayLength {
        dst: Reg,
        binding: u32,
        header: u32,
        stride: u32,
    },
    /// Reads per-invocation memory: column `column + offset[lane]`.
    LoadLane {
        dst: Reg,
        column: u32,
        offset: Option<Reg>,
    },
    /// Writes per-invocation memory on active lanes.
    StoreLane {
        column: u32,
        offset: Option<Reg>,
        src: Operand,
    },
    /// Reads workgroup memory word `word + offset[lane]`.
    LoadShared {
        dst: Reg,
        word: u32,
        offset: Option<Reg>,
    },
    StoreShared {
        word: u32,
        offset: Option<Reg>,
        src: Operand,
    },
    /// `LoadShared` at a checked offset: an `Index` whose result only this load reads.
    LoadSharedAt {
        dst: Reg,
        word: u32,
        at: At,
    },
    /// Reads host memory at byte `byte + offset[lane]`.
    LoadHost {
        dst: Reg,
        space: HostSpace,
        byte: u32,
        offset: Option<Reg>,
        kind: HostKind,
    },
    StoreHost {
        space: HostSpace,
        byte: u32,
        offset: Option<Reg>,
        kind: HostKind,
        src: Operand,
    },
    /// An atomic read-modify-write of a 32-bit word, lane by lane in lane order.
    Atomic {
        space: AtomicSpace,
        address: u32,
        offset: Option<Reg>,
        op: AtomicOp,
        value: Reg,
        compare: Option<Reg>,
        old: Option<Reg>,
        exchanged: Option<Reg>,
    },
}

/// A structured control-flow node. Lanes leave a construct through `Break`, `Continue` and
/// `Return`; the executor tracks them with masks, so diverging lanes need no stack.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Code(Vec<Instr>),
    If {
        condition: Reg,
        accept: Vec<Node>,
        reject: Vec<Node>,
    },
    Loop {
        body: Vec<Node>,
        continuing: Vec<Node>,
        break_if: Option<Reg>,
    },
    Switch {
        selector: Reg,
        cases: Vec<Case>,
    },
    Break,
    Continue,
    Return,
    /// An inlined function body: `Return` inside it ends there.
    Region(Vec<Node>),
}

/// One arm of a switch.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) values: Vec<u32>,
    pub(crate) default: bool,
    pub(crate) body: Vec<Node>,
    pub(crate) fall_through: bool,
}

/// The built-in inputs of a compute entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    GlobalInvocationId,
    LocalInvocationId,
    LocalInvocationIndex,
    WorkgroupId,
    NumWorkgroups,
    WorkgroupSize,
}

/// A buffer argument the entry point uses.
#[derive(Debug, Clone)]
pub(crate) struct BindingInfo {
    pub(crate) name: String,
    pub(crate) type_name: String,
    /// The kernel may write the buffer (so it is locked exclusively).
    pub(crate) writes: bool,
    /// Fewest bytes a view must have (WebGPU's minimum binding size).
    pub(crate) min_size: u64,
}

/// A compiled compute entry point.
#[derive(Debug)]
pub(crate) struct Program {
    pub(crate) name: String,
    pub(crate) workgroup_size: [u32; 3],
    /// Invocations per workgroup: the number of lanes.
    pub(crate) lanes: usize,
    pub(crate) registers: usize,
    /// Registers that hold constants, filled once per thread.
    pub(crate) constants: Vec<(Reg, u32)>,
    /// Registers filled with built-in values, one per component.
    pub(crate) builtins: Vec<(Builtin, Vec<Reg>)>,
    /// Words of workgroup memory.
    pub(crate) shared_words: usize,
    /// Run once per workgroup, before the body: initialises `var<private>` variables.
    pub(crate) prologue: Vec<Instr>,
    pub(crate) body: Vec<Node>,
    pub(crate) bindings: Vec<BindingInfo>,
    /// Size of the `var<immediate>` block in bytes (0 when the entry point uses none).
    pub(crate) immediate_size: usize,
    pub(crate) immediate_name: Option<String>,
    /// Descriptions of checked places, for fault messages (see [`Place`]).
    pub(crate) places: Vec<String>,
}
