//! Prints a [`Program`] as WGSL, with the guards that keep every run defined and every float
//! result exact.
//!
//! The guards, each printed with the node that needs it:
//! - indices are wrapped into their arrays (`% len` or `min`), shift amounts masked `& 31u`;
//! - a float product narrows both operands to whole numbers in [-2048, 2048] first, so the
//!   product (at most 2^22) and sums of up to four of them (a `dot`, a matrix product) are
//!   exact: no rounding happens, so fusing into an FMA or reordering cannot change a bit;
//! - every float stored in a variable is clamped to [-2^20, 2^20], so no sum ever reaches
//!   infinity and no NaN can appear;
//! - float-to-integer conversions clamp into range, integer-to-float ones take 12 bits;
//! - floats become bits with both zeros as `+0.0`'s: WGSL lets a device ignore the sign of
//!   zero (and `min(-0.0, 0.0)` may give either), so it is not compared.

use crate::ast::*;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The entry point's name.
pub const ENTRY: &str = "difftest_main";

/// Largest magnitude a float operand of a product is narrowed to.
const NARROW: &str = "2048.0f";
/// Largest magnitude a stored float is clamped to.
const STORE_LIMIT: &str = "1048576.0f";

/// A buffer the kernel binds, in binding order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferRole {
    /// `input: array<u32, INPUT_WORDS>`, read-only.
    Input,
    /// `out: array<u32>`: `slots` words per invocation.
    Output,
    /// `acc: array<atomic<u32>, STORAGE_ATOMICS>`.
    Atomics,
    /// `params: Settings`, the uniform parameters: `a` at byte 0, `b` at byte 28, 32 bytes.
    Params,
}

impl BufferRole {
    pub fn name(self) -> &'static str {
        match self {
            BufferRole::Input => "input",
            BufferRole::Output => "out",
            BufferRole::Atomics => "acc",
            BufferRole::Params => "params",
        }
    }
}

/// The printed kernel and what a launch must give it.
#[derive(Debug, Clone)]
pub struct Emitted {
    pub source: String,
    /// Output words per invocation.
    pub slots: u32,
    /// The kernel's buffers, in binding order.
    pub buffers: Vec<BufferRole>,
    /// Whether the kernel declares `var<immediate> params`: two u32 (`a`, `b`), or under
    /// [`ParamsFrom::Override`] one zero.
    pub uses_params: bool,
    /// The buffer in `buffers` that holds the uniform parameters, when they are passed by
    /// value instead.
    pub staged_params: Option<usize>,
    /// The overrides to set at load time, each with the parameter (0: `a`, 1: `b`) it holds.
    pub overrides: Vec<(&'static str, usize)>,
}

impl Emitted {
    /// The kernel as xhal loads it, with each override given a placeholder value (their
    /// values change no expression's validity: none is folded at load time).
    pub fn parse(&self) -> Result<xhal::kernel::WgslModule, xhal::kernel::KernelError> {
        let values: Vec<(String, f64)> = self.overrides.iter().map(|&(name, _)| (name.to_owned(), 1.0)).collect();
        xhal::kernel::parse_wgsl(&xhal::kernel::apply_overrides(&self.source, &values)?)
    }
}

#[derive(Default)]
struct Uses {
    input: bool,
    out: bool,
    acc: bool,
    params: bool,
    wg: bool,
    wacc: bool,
}

fn scan_expr(expr: &Expr, uses: &mut Uses) {
    expr.walk(&mut |e| match e.kind {
        ExprKind::Input(_) => uses.input = true,
        ExprKind::Param(_) => uses.params = true,
        ExprKind::WgOwn => uses.wg = true,
        _ => {}
    });
}

fn scan_block(block: &[Stmt], uses: &mut Uses, arrays: &mut HashMap<VarId, u32>) {
    for stmt in block {
        for expr in stmt.exprs() {
            scan_expr(expr, uses);
        }
        match stmt {
            Stmt::Exchange { .. } | Stmt::WgStore(_) => uses.wg = true,
            Stmt::Atomic { workgroup: true, .. } | Stmt::WgAtomicRead { .. } => uses.wacc = true,
            Stmt::Atomic { workgroup: false, .. } => uses.acc = true,
            Stmt::Output(_) => uses.out = true,
            Stmt::ArrayDecl { var, len, .. } => {
                arrays.insert(*var, *len);
            }
            _ => {}
        }
        for inner in stmt.blocks() {
            scan_block(inner, uses, arrays);
        }
    }
}

/// Helpers called from the entry point, directly or through other helpers.
pub fn reachable_functions(program: &Program) -> HashSet<usize> {
    fn calls(block: &[Stmt], found: &mut Vec<usize>) {
        for stmt in block {
            if let Stmt::CallStmt { func, .. } = stmt {
                found.push(*func);
            }
            for expr in stmt.exprs() {
                expr.walk(&mut |e| {
                    if let ExprKind::CallFn(f, _) = e.kind {
                        found.push(f);
                    }
                });
            }
            for inner in stmt.blocks() {
                calls(inner, found);
            }
        }
    }
    let mut pending = Vec::new();
    calls(&program.body, &mut pending);
    let mut reached = HashSet::new();
    while let Some(index) = pending.pop() {
        if index >= program.functions.len() || !reached.insert(index) {
            continue;
        }
        let function = &program.functions[index];
        calls(&function.body, &mut pending);
        function.result.walk(&mut |e| {
            if let ExprKind::CallFn(f, _) = e.kind {
                pending.push(f);
            }
        });
    }
    reached
}

struct Printer<'p> {
    program: &'p Program,
    arrays: HashMap<VarId, u32>,
    ptr_params: HashSet<VarId>,
    slots: u32,
    out: String,
    temp: u32,
    current_function: Option<usize>,
}

/// Prints `program` as WGSL.
pub fn emit(program: &Program) -> Emitted {
    // Only helpers the entry point reaches are printed: an unreached one could use a global
    // the entry point does not, which would then be undeclared (or, declared, leave a gap in
    // the entry point's bindings).
    let reachable = reachable_functions(program);
    let mut uses = Uses::default();
    let mut arrays = HashMap::new();
    scan_block(&program.body, &mut uses, &mut arrays);
    let mut ptr_params = HashSet::new();
    for (index, function) in program.functions.iter().enumerate() {
        if !reachable.contains(&index) {
            continue;
        }
        scan_block(&function.body, &mut uses, &mut arrays);
        scan_expr(&function.result, &mut uses);
        if let Some(p) = function.ptr_param {
            ptr_params.insert(p);
        }
    }

    let mut printer = Printer {
        program,
        arrays,
        ptr_params,
        slots: 0,
        out: String::new(),
        temp: 0,
        current_function: None,
    };
    let mut functions = String::new();
    for (index, function) in program.functions.iter().enumerate() {
        if !reachable.contains(&index) {
            continue;
        }
        printer.out.clear();
        printer.current_function = Some(index);
        printer.function(index, function);
        functions.push_str(&printer.out);
    }
    printer.out.clear();
    printer.current_function = None;
    for stmt in &program.body {
        printer.stmt(stmt, 1);
    }
    let body = std::mem::take(&mut printer.out);
    let slots = printer.slots;

    let mut source = String::new();
    let _ = writeln!(source, "// xhal-difftest seed {}", program.seed);
    for (index, def) in program.structs.iter().enumerate() {
        let _ = write!(source, "struct S{index} {{");
        for (field, ty) in def.fields.iter().enumerate() {
            let _ = write!(source, " f{field}: {},", ty_name(ty));
        }
        source.push_str(" }\n");
    }
    let mut buffers = Vec::new();
    let mut staged_params = None;
    let mut overrides = Vec::new();
    let mut uses_immediates = false;
    // Where the uniform goes among the arguments, (group, binding) ascending: first when it
    // takes binding 0 (the storage buffers' bindings then start at 1), else last.
    let mut uniform_last = None;
    if uses.params {
        match program.params_from {
            ParamsFrom::Immediate => {
                source.push_str("struct Params { a: u32, b: u32 }\nvar<immediate> params: Params;\n");
                uses_immediates = true;
            }
            ParamsFrom::Uniform { group, binding, staged } => {
                source.push_str("struct Settings { a: u32, gap: vec3<u32>, b: u32 }\n");
                let _ = writeln!(
                    source,
                    "@group({group}) @binding({binding}) var<uniform> params: Settings;"
                );
                if group == 0 && binding == 0 {
                    if staged {
                        staged_params = Some(0);
                    }
                    buffers.push(BufferRole::Params);
                } else {
                    uniform_last = Some(staged);
                }
            }
            ParamsFrom::Override { default_b } => {
                let b = crate::gen::inputs(program.seed).params[1];
                source.push_str("override knob_a: u32;\n");
                let _ = writeln!(source, "override knob_b: u32 = {b}u;");
                source.push_str("struct Params { zero: u32 }\nvar<immediate> params: Params;\n");
                uses_immediates = true;
                overrides.push(("knob_a", 0));
                if !default_b {
                    overrides.push(("knob_b", 1));
                }
            }
        }
    }
    if uses.input {
        let _ = writeln!(
            source,
            "@group(0) @binding({}) var<storage, read> input: array<u32, {INPUT_WORDS}>;",
            buffers.len()
        );
        buffers.push(BufferRole::Input);
    }
    if uses.out {
        let _ = writeln!(
            source,
            "@group(0) @binding({}) var<storage, read_write> out: array<u32>;",
            buffers.len()
        );
        buffers.push(BufferRole::Output);
    }
    if uses.acc {
        let _ = writeln!(
            source,
            "@group(0) @binding({}) var<storage, read_write> acc: array<atomic<u32>, {STORAGE_ATOMICS}>;",
            buffers.len()
        );
        buffers.push(BufferRole::Atomics);
    }
    if let Some(staged) = uniform_last {
        if staged {
            staged_params = Some(buffers.len());
        }
        buffers.push(BufferRole::Params);
    }
    let group = program.invocations_per_workgroup();
    if uses.wg {
        let _ = writeln!(source, "var<workgroup> wg: array<u32, {group}>;");
    }
    if uses.wacc {
        let _ = writeln!(
            source,
            "var<workgroup> wacc: array<atomic<u32>, {}>;",
            WORKGROUP_ATOMIC_OPS.len()
        );
    }
    source.push_str(&functions);
    let [x, y] = program.workgroup_size;
    let _ = writeln!(
        source,
        "@compute @workgroup_size({x}, {y}, 1)\nfn {ENTRY}(@builtin(local_invocation_index) lid: u32, \
         @builtin(local_invocation_id) lid3: vec3<u32>, @builtin(global_invocation_id) gid: vec3<u32>, \
         @builtin(workgroup_id) wid3: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{"
    );
    source.push_str("    let wid: u32 = wid3.x + wid3.y * nwg.x;\n");
    let _ = writeln!(source, "    let gidx: u32 = wid * {group}u + lid;");
    if uses.out {
        let _ = writeln!(source, "    let obase: u32 = gidx * {slots}u;");
    }
    source.push_str(&body);
    source.push_str("}\n");
    Emitted {
        source,
        slots,
        buffers,
        uses_params: uses_immediates,
        staged_params,
        overrides,
    }
}

pub fn ty_name(ty: &Ty) -> String {
    match ty {
        Ty::Scalar(s) => s.wgsl().to_owned(),
        Ty::Vec(n, s) => format!("vec{n}<{}>", s.wgsl()),
        Ty::Mat(c, r) => format!("mat{c}x{r}<f32>"),
        Ty::Struct(index) => format!("S{index}"),
        Ty::Array(elem, len) => format!("array<{}, {len}>", ty_name(elem)),
    }
}

pub fn lit_text(lit: Lit) -> String {
    match lit {
        Lit::U32(v) => format!("{v}u"),
        Lit::I32(i32::MIN) => "(-2147483647i - 1i)".to_owned(),
        Lit::I32(v) if v < 0 => format!("(-{}i)", v.unsigned_abs()),
        Lit::I32(v) => format!("{v}i"),
        Lit::F32(v) => {
            let text = format!("{:?}", v.abs());
            if v.is_sign_negative() {
                format!("(-{text}f)")
            } else {
                format!("{text}f")
            }
        }
        Lit::Bool(b) => b.to_string(),
    }
}

/// `T(value)` for a vector type, `value` for a scalar: a splatted constant.
fn splat_const(ty: &Ty, value: &str) -> String {
    match ty {
        Ty::Vec(..) => format!("{}({value})", ty_name(ty)),
        _ => value.to_owned(),
    }
}

/// The bits of float `text` (of type `from`) as integers of type `to`, with both zeros the
/// same bits. WGSL lets a device ignore the sign of zero, and Vulkan drivers do (they fold
/// `x + 0.0` to `x`), so `-0.0` is compared as `+0.0`; the comparison `x == 0.0` holds for
/// both and cannot be folded away.
fn float_bits(to: &Ty, from: &Ty, text: &str) -> String {
    format!(
        "select(bitcast<{}>({text}), {}, {text} == {})",
        ty_name(to),
        splat_const(to, &zero_of(to)),
        splat_const(from, "0.0f")
    )
}

fn zero_of(ty: &Ty) -> String {
    match ty.scalar() {
        Some(Scalar::I32) => "0i".to_owned(),
        _ => "0u".to_owned(),
    }
}

fn indent(level: usize) -> String {
    "    ".repeat(level)
}

const COMPONENTS: [char; 4] = ['x', 'y', 'z', 'w'];

impl Printer<'_> {
    fn function(&mut self, index: usize, function: &Function) {
        let mut params: Vec<String> = function
            .params
            .iter()
            .map(|(var, ty)| format!("v{}: {}", var.0, ty_name(ty)))
            .collect();
        if let Some(p) = function.ptr_param {
            params.push(format!("v{}: ptr<function, u32>", p.0));
        }
        let _ = writeln!(
            self.out,
            "fn f{index}({}) -> {} {{",
            params.join(", "),
            ty_name(&function.ret)
        );
        for stmt in &function.body {
            self.stmt(stmt, 1);
        }
        let result = self.stored(&function.ret, &function.result);
        let _ = writeln!(self.out, "    return {result};\n}}");
    }

    /// The value as stored in a variable: floats clamped (see the module documentation).
    fn stored(&self, ty: &Ty, value: &Expr) -> String {
        let text = self.expr(value);
        match ty {
            Ty::Scalar(Scalar::F32) | Ty::Vec(_, Scalar::F32) => format!(
                "clamp({text}, {}, {})",
                splat_const(ty, &format!("-{STORE_LIMIT}")),
                splat_const(ty, STORE_LIMIT)
            ),
            // A struct constructor clamps its float members one by one; matrices are narrowed
            // where they are built.
            _ => text,
        }
    }

    /// A float operand of a product, narrowed to a small whole number.
    fn narrowed(&self, expr: &Expr) -> String {
        let text = self.expr(expr);
        if expr.ty.is_float() {
            format!(
                "clamp(floor({text}), {}, {})",
                splat_const(&expr.ty, &format!("-{NARROW}")),
                splat_const(&expr.ty, NARROW)
            )
        } else {
            text
        }
    }

    fn wrap_index(&self, wrap: Wrap, index: &Expr, len: u32) -> String {
        let text = self.expr(index);
        match wrap {
            Wrap::Rem => format!("({text}) % {len}u"),
            Wrap::Min => format!("min({text}, {}u)", len.saturating_sub(1)),
        }
    }

    fn array_len(&self, var: VarId) -> u32 {
        self.arrays.get(&var).copied().unwrap_or(1)
    }

    fn load(&self, var: VarId) -> String {
        if self.ptr_params.contains(&var) {
            format!("(*v{})", var.0)
        } else {
            format!("v{}", var.0)
        }
    }

    fn expr(&self, expr: &Expr) -> String {
        match &expr.kind {
            ExprKind::Lit(lit) => lit_text(*lit),
            ExprKind::Splat(value) => format!("{}({})", ty_name(&expr.ty), self.expr(value)),
            ExprKind::Load(var) => self.load(*var),
            ExprKind::Builtin(value) => match value {
                BuiltinValue::LocalIndex => "lid".to_owned(),
                BuiltinValue::LocalX => "lid3.x".to_owned(),
                BuiltinValue::LocalY => "lid3.y".to_owned(),
                BuiltinValue::GlobalIndex => "gidx".to_owned(),
                BuiltinValue::GlobalX => "gid.x".to_owned(),
                BuiltinValue::WorkgroupIndex => "wid".to_owned(),
                BuiltinValue::NumWorkgroupsX => "nwg.x".to_owned(),
            },
            ExprKind::Param(index) => {
                let member = if *index == 0 { "a" } else { "b" };
                match self.program.params_from {
                    ParamsFrom::Override { .. } => format!("(knob_{member} ^ params.zero)"),
                    _ => format!("params.{member}"),
                }
            }
            ExprKind::Input(index) => {
                let index = self.expr(index);
                match expr.ty {
                    Ty::Scalar(Scalar::I32) => format!("bitcast<i32>(input[({index}) % {INPUT_INT_WORDS}u])"),
                    Ty::Scalar(Scalar::F32) => format!(
                        "bitcast<f32>(input[{INPUT_INT_WORDS}u + ({index}) % {}u])",
                        INPUT_WORDS - INPUT_INT_WORDS
                    ),
                    _ => format!("input[({index}) % {INPUT_INT_WORDS}u]"),
                }
            }
            ExprKind::Unary(op, value) => {
                let value = self.expr(value);
                match op {
                    UnOp::Neg => format!("(-{value})"),
                    UnOp::BitNot => format!("(~{value})"),
                    UnOp::Not => format!("(!{value})"),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (a_text, b_text) = match op {
                    BinOp::Mul if expr.ty.scalar() == Some(Scalar::F32) => (self.narrowed(a), self.narrowed(b)),
                    BinOp::Shl | BinOp::Shr => (
                        self.expr(a),
                        format!("({}) & {}", self.expr(b), splat_const(&b.ty, "31u")),
                    ),
                    BinOp::Div | BinOp::Rem if self.program.nonzero_divisors => {
                        let divisor = self.expr(b);
                        let one = splat_const(&b.ty, if b.ty.scalar() == Some(Scalar::I32) { "1i" } else { "1u" });
                        let zero = splat_const(&b.ty, &zero_of(&b.ty));
                        (self.expr(a), format!("select({divisor}, {one}, {divisor} == {zero})"))
                    }
                    _ => (self.expr(a), self.expr(b)),
                };
                match op {
                    BinOp::Shl | BinOp::Shr => format!("({a_text} {} ({b_text}))", op.wgsl()),
                    _ => format!("({a_text} {} {b_text})", op.wgsl()),
                }
            }
            ExprKind::Call(func, args) => {
                let texts: Vec<String> = match func {
                    Func::Dot if args.first().is_some_and(|a| a.ty.is_float()) => {
                        args.iter().map(|a| self.narrowed(a)).collect()
                    }
                    _ => args.iter().map(|a| self.expr(a)).collect(),
                };
                format!("{}({})", func.wgsl(), texts.join(", "))
            }
            ExprKind::Select(f, t, c) => format!("select({}, {}, {})", self.expr(f), self.expr(t), self.expr(c)),
            ExprKind::Construct(parts) => {
                let texts: Vec<String> = match &expr.ty {
                    // Matrix columns are narrowed so that every matrix value is a valid operand
                    // of an exact product.
                    Ty::Mat(..) => parts.iter().map(|p| self.narrowed(p)).collect(),
                    Ty::Struct(_) => parts.iter().map(|p| self.stored(&p.ty, p)).collect(),
                    _ => parts.iter().map(|p| self.expr(p)).collect(),
                };
                format!("{}({})", ty_name(&expr.ty), texts.join(", "))
            }
            ExprKind::Component(value, index) => {
                let text = self.expr(value);
                match value.ty {
                    Ty::Mat(..) => format!("{text}[{index}]"),
                    _ => format!("{text}.{}", COMPONENTS[usize::from(*index) % 4]),
                }
            }
            ExprKind::Swizzle(value, lanes) => {
                let lanes: String = lanes.iter().map(|l| COMPONENTS[usize::from(*l) % 4]).collect();
                format!("{}.{lanes}", self.expr(value))
            }
            ExprKind::DynComponent(value, index) => {
                let width = value.ty.width().unwrap_or(1);
                format!("{}[({}) % {width}u]", self.expr(value), self.expr(index))
            }
            ExprKind::Member(value, field) => format!("{}.f{field}", self.expr(value)),
            ExprKind::Index(var, wrap, index) => {
                format!("v{}[{}]", var.0, self.wrap_index(*wrap, index, self.array_len(*var)))
            }
            ExprKind::Convert(value) => self.convert(&expr.ty, value),
            ExprKind::Bitcast(value) => {
                let text = self.expr(value);
                if value.ty.is_float() {
                    float_bits(&expr.ty, &value.ty, &text)
                } else {
                    format!("bitcast<{}>({text})", ty_name(&expr.ty))
                }
            }
            ExprKind::CallFn(index, args) => {
                let texts: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                format!("f{index}({})", texts.join(", "))
            }
            ExprKind::WgOwn => "wg[lid]".to_owned(),
        }
    }

    fn convert(&self, to: &Ty, value: &Expr) -> String {
        let text = self.expr(value);
        let (Some(from), Some(target)) = (value.ty.scalar(), to.scalar()) else {
            return text;
        };
        let name = ty_name(to);
        let c = |v: &str| splat_const(&value.ty, v);
        match (from, target) {
            (Scalar::F32, Scalar::U32) => format!("{name}(clamp({text}, {}, {}))", c("0.0f"), c("16777216.0f")),
            (Scalar::F32, Scalar::I32) => {
                format!("{name}(clamp({text}, {}, {}))", c("-16777216.0f"), c("16777216.0f"))
            }
            (Scalar::U32, Scalar::F32) => format!("{name}(({text}) & {})", c("4095u")),
            (Scalar::I32, Scalar::F32) => format!("{name}(clamp({text}, {}, {}))", c("-4096i"), c("4096i")),
            (Scalar::U32, Scalar::Bool) => format!("({text} != {})", c("0u")),
            (Scalar::I32, Scalar::Bool) => format!("({text} != {})", c("0i")),
            (Scalar::F32, Scalar::Bool) => format!("({text} != {})", c("0.0f")),
            _ => format!("{name}({text})"),
        }
    }

    /// `u32` bits of a scalar.
    fn bits(scalar: Scalar, text: &str) -> String {
        match scalar {
            Scalar::U32 => text.to_owned(),
            Scalar::I32 => format!("bitcast<u32>({text})"),
            Scalar::F32 => float_bits(&Ty::U32, &Ty::F32, text),
            Scalar::Bool => format!("select(0u, 1u, {text})"),
        }
    }

    /// Every scalar of a value of type `ty` named `text`, as paths.
    fn scalar_paths(&self, ty: &Ty, text: &str, paths: &mut Vec<(Scalar, String)>) {
        match ty {
            Ty::Scalar(s) => paths.push((*s, text.to_owned())),
            Ty::Vec(n, s) => {
                for lane in COMPONENTS.iter().take(usize::from(*n)) {
                    paths.push((*s, format!("{text}.{lane}")));
                }
            }
            Ty::Mat(c, r) => {
                for column in 0..*c {
                    for row in COMPONENTS.iter().take(usize::from(*r)) {
                        paths.push((Scalar::F32, format!("{text}[{column}].{row}")));
                    }
                }
            }
            Ty::Struct(index) => {
                if let Some(def) = self.program.structs.get(*index) {
                    for (field, field_ty) in def.fields.iter().enumerate() {
                        self.scalar_paths(field_ty, &format!("{text}.f{field}"), paths);
                    }
                }
            }
            Ty::Array(elem, len) => {
                for i in 0..*len {
                    self.scalar_paths(elem, &format!("{text}[{i}]"), paths);
                }
            }
        }
    }

    fn place(&self, place: &Place) -> String {
        match place {
            Place::Var(var) => format!("v{}", var.0),
            Place::Component(var, lane) => format!("v{}.{}", var.0, COMPONENTS[usize::from(*lane) % 4]),
            Place::Member(var, field) => format!("v{}.f{field}", var.0),
            Place::Index(var, wrap, index) => {
                format!("v{}[{}]", var.0, self.wrap_index(*wrap, index, self.array_len(*var)))
            }
        }
    }

    fn block(&mut self, block: &[Stmt], level: usize) {
        for stmt in block {
            self.stmt(stmt, level);
        }
    }

    fn stmt(&mut self, stmt: &Stmt, level: usize) {
        let pad = indent(level);
        match stmt {
            Stmt::Decl { var, ty, init, mutable } => {
                let init = self.stored(ty, init);
                let keyword = if *mutable { "var" } else { "let" };
                let _ = writeln!(self.out, "{pad}{keyword} v{}: {} = {init};", var.0, ty_name(ty));
            }
            Stmt::ArrayDecl { var, elem, len } => {
                let _ = writeln!(self.out, "{pad}var v{}: array<{}, {len}>;", var.0, ty_name(elem));
            }
            Stmt::Assign { place, value } => {
                // WGSL assigns only values of the place's own type.
                let text = self.stored(&value.ty, value);
                let _ = writeln!(self.out, "{pad}{} = {text};", self.place(place));
            }
            Stmt::If { cond, then, els } => {
                let _ = writeln!(self.out, "{pad}if ({}) {{", self.expr(cond));
                self.block(then, level + 1);
                if els.is_empty() {
                    let _ = writeln!(self.out, "{pad}}}");
                } else {
                    let _ = writeln!(self.out, "{pad}}} else {{");
                    self.block(els, level + 1);
                    let _ = writeln!(self.out, "{pad}}}");
                }
            }
            Stmt::Loop {
                kind,
                counter,
                trips,
                body,
            } => {
                let c = counter.0;
                let limit = format!("min({}, {MAX_TRIPS}u)", self.expr(trips));
                match kind {
                    LoopKind::For => {
                        let _ = writeln!(self.out, "{pad}for (var v{c}: u32 = 0u; v{c} < {limit}; v{c}++) {{");
                        self.block(body, level + 1);
                        let _ = writeln!(self.out, "{pad}}}");
                    }
                    LoopKind::While => {
                        let _ = writeln!(self.out, "{pad}{{\n{pad}    var v{c}: u32 = 0u;");
                        let _ = writeln!(self.out, "{pad}    while (v{c} < {limit}) {{");
                        let _ = writeln!(self.out, "{pad}        v{c} = v{c} + 1u;");
                        self.block(body, level + 2);
                        let _ = writeln!(self.out, "{pad}    }}\n{pad}}}");
                    }
                    LoopKind::Loop => {
                        let _ = writeln!(self.out, "{pad}{{\n{pad}    var v{c}: u32 = 0u;");
                        let _ = writeln!(self.out, "{pad}    loop {{");
                        self.block(body, level + 2);
                        let _ = writeln!(
                            self.out,
                            "{pad}        continuing {{\n{pad}            v{c} = v{c} + 1u;\n{pad}            break if v{c} >= {limit};\n{pad}        }}"
                        );
                        let _ = writeln!(self.out, "{pad}    }}\n{pad}}}");
                    }
                }
            }
            Stmt::ExitIf { exit, cond } => {
                let word = match exit {
                    Exit::Break => "break",
                    Exit::Continue => "continue",
                };
                let _ = writeln!(self.out, "{pad}if ({}) {{ {word}; }}", self.expr(cond));
            }
            Stmt::Switch {
                selector,
                cases,
                default,
            } => {
                let suffix = if selector.ty == Ty::I32 { "i" } else { "u" };
                let _ = writeln!(self.out, "{pad}switch ({}) {{", self.expr(selector));
                for (values, block) in cases {
                    let labels: Vec<String> = values
                        .iter()
                        .map(|v| {
                            if *v < 0 {
                                format!("-{}{suffix}", v.unsigned_abs())
                            } else {
                                format!("{v}{suffix}")
                            }
                        })
                        .collect();
                    let _ = writeln!(self.out, "{pad}    case {}: {{", labels.join(", "));
                    self.block(block, level + 2);
                    let _ = writeln!(self.out, "{pad}    }}");
                }
                let _ = writeln!(self.out, "{pad}    default: {{");
                self.block(default, level + 2);
                let _ = writeln!(self.out, "{pad}    }}\n{pad}}}");
            }
            Stmt::Exchange { var, index } => {
                let group = self.program.invocations_per_workgroup();
                let _ = writeln!(
                    self.out,
                    "{pad}workgroupBarrier();\n{pad}v{} = wg[({}) % {group}u];\n{pad}workgroupBarrier();",
                    var.0,
                    self.expr(index)
                );
            }
            Stmt::WgStore(value) => {
                let _ = writeln!(self.out, "{pad}wg[lid] = {};", self.expr(value));
            }
            Stmt::Atomic { workgroup, slot, value } => {
                let value = self.expr(value);
                let line = if *workgroup {
                    let slot = usize::from(*slot) % WORKGROUP_ATOMIC_OPS.len();
                    format!("{}(&wacc[{slot}], {value});", WORKGROUP_ATOMIC_OPS[slot])
                } else {
                    let slot = usize::from(*slot) % STORAGE_ATOMIC_OPS.len();
                    format!("{}(&acc[{slot}], {value});", STORAGE_ATOMIC_OPS[slot])
                };
                let _ = writeln!(self.out, "{pad}{line}");
            }
            Stmt::WgAtomicRead { var, slot } => {
                let slot = usize::from(*slot) % WORKGROUP_ATOMIC_OPS.len();
                let _ = writeln!(
                    self.out,
                    "{pad}workgroupBarrier();\n{pad}v{} = atomicLoad(&wacc[{slot}]);\n{pad}workgroupBarrier();",
                    var.0
                );
            }
            Stmt::Barrier => {
                let _ = writeln!(self.out, "{pad}workgroupBarrier();");
            }
            Stmt::Output(value) => {
                let mut paths = Vec::new();
                let simple = matches!(value.ty, Ty::Scalar(_));
                let name = if simple {
                    self.expr(value)
                } else {
                    self.temp += 1;
                    format!("o{}", self.temp)
                };
                self.scalar_paths(&value.ty, &name, &mut paths);
                if simple {
                    let (scalar, text) = &paths[0];
                    let _ = writeln!(
                        self.out,
                        "{pad}out[obase + {}u] = {};",
                        self.slots,
                        Self::bits(*scalar, text)
                    );
                    self.slots += 1;
                } else {
                    let _ = writeln!(
                        self.out,
                        "{pad}{{\n{pad}    let {name}: {} = {};",
                        ty_name(&value.ty),
                        self.expr(value)
                    );
                    for (scalar, text) in &paths {
                        let _ = writeln!(
                            self.out,
                            "{pad}    out[obase + {}u] = {};",
                            self.slots,
                            Self::bits(*scalar, text)
                        );
                        self.slots += 1;
                    }
                    let _ = writeln!(self.out, "{pad}}}");
                }
            }
            Stmt::CallStmt {
                func,
                args,
                ptr,
                target,
            } => {
                let mut texts: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                if let Some(p) = ptr {
                    if self.ptr_params.contains(p) {
                        texts.push(format!("v{}", p.0));
                    } else {
                        texts.push(format!("&v{}", p.0));
                    }
                }
                let call = format!("f{func}({})", texts.join(", "));
                match target {
                    Some(t) => {
                        let _ = writeln!(self.out, "{pad}v{} = {call};", t.0);
                    }
                    None => {
                        let _ = writeln!(self.out, "{pad}{call};");
                    }
                }
            }
            Stmt::PtrStore(value) => {
                let Some(p) = self.current_ptr() else {
                    return;
                };
                let _ = writeln!(self.out, "{pad}*v{} = {};", p.0, self.expr(value));
            }
            Stmt::ReturnIf { cond, value } => {
                let text = self.stored(&value.ty, value);
                let _ = writeln!(self.out, "{pad}if ({}) {{ return {text}; }}", self.expr(cond));
            }
        }
    }

    /// The pointer parameter of the function being printed.
    fn current_ptr(&self) -> Option<VarId> {
        self.current_function
            .and_then(|index| self.program.functions.get(index)?.ptr_param)
    }
}
