//! Which loads of per-invocation variables may read the variable's registers in place
//! instead of copying them.
//!
//! A `Load` of a function or private variable is a copy of the variable's columns at the
//! point the load is emitted. Reading the variable's own columns at each use instead gives the
//! same words as long as nothing can write the variable between the load and its last use.
//! Loop counters and accumulators are loaded a few times per iteration, so skipping the
//! copies removes a large share of a loop's work.
//!
//! The check is structural and conservative. Statements are numbered in pre-order. A load
//! emitted by statement `e` of a block may read in place when every use of it lies within
//! the block, after `e`, and no statement from `e` to the end of the block's statement that
//! holds the last use can write the variable: a store or atomic on the variable, a store
//! through a pointer whose root is unknown, or any call. The whole of that last statement
//! counts, so a loop that both uses the value and writes the variable is refused.

use naga::{Expression, Function, Handle, Statement};
use std::collections::HashMap;

/// The variable a pointer expression points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Root {
    Local(usize),
    Global(usize),
    /// A pointer argument, or something this analysis does not follow: may be any variable.
    Unknown,
}

/// For each expression of `function`: whether it is a `Load` that may read its variable's
/// registers in place.
pub(super) fn in_place_loads(function: &Function) -> Vec<bool> {
    let mut walk = Walk {
        function,
        position: 0,
        blocks: Vec::new(),
        emitted: vec![None; function.expressions.len()],
        last_use: vec![None; function.expressions.len()],
        writes: HashMap::new(),
        opaque: false,
    };
    walk.block(&function.body);
    let mut result = vec![false; function.expressions.len()];
    if walk.opaque {
        return result;
    }
    // A value built from others without an instruction (a swizzle, a composite, a
    // conversion to the same type...) holds its operands' registers: their last use is no
    // earlier than its. Operands precede their users in the arena, so one backward pass
    // carries uses through chains of them.
    for (handle, expression) in function.expressions.iter().rev() {
        if computes(expression) {
            continue;
        }
        let Some(last) = walk.last_use.get(handle.index()).copied().flatten() else {
            continue;
        };
        for operand in operands(expression) {
            if let Some(slot) = walk.last_use.get_mut(operand.index()) {
                *slot = Some(slot.map_or(last, |known| known.max(last)));
            }
        }
    }
    for (handle, expression) in function.expressions.iter() {
        let Expression::Load { pointer } = *expression else {
            continue;
        };
        let root = walk.root(pointer);
        if root == Root::Unknown {
            continue;
        }
        let Some(site) = walk.emitted.get(handle.index()).copied().flatten() else {
            continue;
        };
        let Some(ends) = walk.blocks.get(site.block) else {
            continue;
        };
        let last = match walk.last_use.get(handle.index()).copied().flatten() {
            Some(last) => last,
            None => {
                if let Some(slot) = result.get_mut(handle.index()) {
                    *slot = true;
                }
                continue;
            }
        };
        // The statement of the load's block that holds the last use (it must be in the block).
        let rest = ends.get(site.index..).unwrap_or_default();
        let Some(holder) = rest.get(rest.partition_point(|end| *end < last)) else {
            continue;
        };
        let written = |root: Root| {
            walk.writes.get(&root).is_some_and(|positions| {
                let from = positions.partition_point(|p| *p <= site.position);
                positions.get(from).is_some_and(|p| *p <= *holder)
            })
        };
        if let (true, Some(slot)) = (
            last >= site.position && !written(root) && !written(Root::Unknown),
            result.get_mut(handle.index()),
        ) {
            *slot = true;
        }
    }
    result
}

/// Where an expression was emitted: the block, the statement's index in it, its number.
#[derive(Debug, Clone, Copy)]
struct Site {
    block: usize,
    index: usize,
    position: u32,
}

struct Walk<'f> {
    function: &'f Function,
    /// The number of the statement being visited.
    position: u32,
    /// Per block visited: the number of the last statement within each of its statements.
    blocks: Vec<Vec<u32>>,
    emitted: Vec<Option<Site>>,
    last_use: Vec<Option<u32>>,
    /// Per root: the numbers of the statements that may write it, in increasing order.
    writes: HashMap<Root, Vec<u32>>,
    /// Something this analysis does not model (the compiler refuses such functions anyway).
    opaque: bool,
}

impl Walk<'_> {
    fn block(&mut self, block: &naga::Block) {
        let id = self.blocks.len();
        self.blocks.push(Vec::with_capacity(block.len()));
        for (index, statement) in block.iter().enumerate() {
            self.position += 1;
            self.statement(statement, id, index);
            if let Some(ends) = self.blocks.get_mut(id) {
                ends.push(self.position);
            }
        }
    }

    fn used(&mut self, handle: Handle<Expression>) {
        if let Some(slot) = self.last_use.get_mut(handle.index()) {
            *slot = Some(self.position);
        }
    }

    fn wrote(&mut self, root: Root) {
        self.writes.entry(root).or_default().push(self.position);
    }

    fn root(&self, mut pointer: Handle<Expression>) -> Root {
        loop {
            match self.function.expressions[pointer] {
                Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => pointer = base,
                Expression::LocalVariable(local) => return Root::Local(local.index()),
                Expression::GlobalVariable(global) => return Root::Global(global.index()),
                _ => return Root::Unknown,
            }
        }
    }

    fn statement(&mut self, statement: &naga::Statement, block: usize, index: usize) {
        match *statement {
            Statement::Emit(ref range) => {
                for handle in range.clone() {
                    if let Some(slot) = self.emitted.get_mut(handle.index()) {
                        *slot = Some(Site {
                            block,
                            index,
                            position: self.position,
                        });
                    }
                    self.record_operands(handle);
                }
            }
            Statement::Block(ref inner) => self.block(inner),
            Statement::If {
                condition,
                ref accept,
                ref reject,
            } => {
                self.used(condition);
                self.block(accept);
                self.block(reject);
            }
            Statement::Switch { selector, ref cases } => {
                self.used(selector);
                for case in cases {
                    self.block(&case.body);
                }
            }
            Statement::Loop {
                ref body,
                ref continuing,
                break_if,
            } => {
                self.block(body);
                self.block(continuing);
                if let Some(condition) = break_if {
                    // Evaluated after the continuing block, still inside the loop statement.
                    self.position += 1;
                    self.used(condition);
                }
            }
            Statement::Break
            | Statement::Continue
            | Statement::Kill
            | Statement::ControlBarrier(_)
            | Statement::MemoryBarrier(_) => {}
            Statement::Return { value } => {
                if let Some(value) = value {
                    self.used(value);
                }
            }
            Statement::Store { pointer, value } => {
                self.used(pointer);
                self.used(value);
                let root = self.root(pointer);
                self.wrote(root);
            }
            Statement::Atomic {
                pointer,
                ref fun,
                value,
                ..
            } => {
                self.used(pointer);
                self.used(value);
                if let naga::AtomicFunction::Exchange { compare: Some(compare) } = *fun {
                    self.used(compare);
                }
                let root = self.root(pointer);
                self.wrote(root);
            }
            Statement::WorkGroupUniformLoad { pointer, .. } => self.used(pointer),
            Statement::Call { ref arguments, .. } => {
                for argument in arguments {
                    self.used(*argument);
                }
                self.wrote(Root::Unknown);
            }
            _ => self.opaque = true,
        }
    }

    /// Records the uses an expression makes of others, at the statement emitting it.
    fn record_operands(&mut self, handle: Handle<Expression>) {
        let expression = &self.function.expressions[handle];
        if !modelled(expression) {
            self.opaque = true;
        }
        for operand in operands(expression) {
            self.used(operand);
        }
    }
}

/// Whether the compiler always gives this expression fresh registers (an instruction's
/// result), never registers of its operands.
fn computes(expression: &Expression) -> bool {
    matches!(
        expression,
        Expression::Load { .. }
            | Expression::Unary { .. }
            | Expression::Binary { .. }
            | Expression::Select { .. }
            | Expression::ArrayLength(_)
    )
}

/// Whether [`operands`] knows every operand of this kind of expression.
fn modelled(expression: &Expression) -> bool {
    matches!(
        expression,
        Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::Override(_)
            | Expression::ZeroValue(_)
            | Expression::FunctionArgument(_)
            | Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
            | Expression::CallResult(_)
            | Expression::AtomicResult { .. }
            | Expression::WorkGroupUniformLoadResult { .. }
            | Expression::Compose { .. }
            | Expression::Access { .. }
            | Expression::AccessIndex { .. }
            | Expression::Splat { .. }
            | Expression::Swizzle { .. }
            | Expression::Load { .. }
            | Expression::Unary { .. }
            | Expression::Binary { .. }
            | Expression::Select { .. }
            | Expression::Relational { .. }
            | Expression::Math { .. }
            | Expression::As { .. }
            | Expression::ArrayLength(_)
    )
}

/// The expressions an expression reads.
fn operands(expression: &Expression) -> Vec<Handle<Expression>> {
    match *expression {
        Expression::Compose { ref components, .. } => components.clone(),
        Expression::Access { base, index } => vec![base, index],
        Expression::AccessIndex { base, .. } => vec![base],
        Expression::Splat { value, .. } => vec![value],
        Expression::Swizzle { vector, .. } => vec![vector],
        Expression::Load { pointer } => vec![pointer],
        Expression::Unary { expr, .. } => vec![expr],
        Expression::Binary { left, right, .. } => vec![left, right],
        Expression::Select {
            condition,
            accept,
            reject,
        } => vec![condition, accept, reject],
        Expression::Relational { argument, .. } => vec![argument],
        Expression::Math {
            arg, arg1, arg2, arg3, ..
        } => [Some(arg), arg1, arg2, arg3].into_iter().flatten().collect(),
        Expression::As { expr, .. } => vec![expr],
        Expression::ArrayLength(array) => vec![array],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place verdict for each load of the entry point, in expression order.
    fn verdicts(source: &str) -> Vec<bool> {
        let module = naga::front::wgsl::parse_str(source).expect("parses");
        let function = &module.entry_points[0].function;
        let in_place = in_place_loads(function);
        function
            .expressions
            .iter()
            .filter(|(_, expression)| matches!(expression, Expression::Load { .. }))
            .map(|(handle, _)| in_place[handle.index()])
            .collect()
    }

    #[test]
    fn loads_used_before_the_next_write_read_in_place() {
        let source = "
            @group(0) @binding(0) var<storage, read_write> out: array<u32>;
            @compute @workgroup_size(1)
            fn main() {
                var i = 0u;
                var sum = 0u;
                loop {
                    if i >= 4u { break; }
                    sum = sum + i;
                    continuing { i = i + 1u; }
                }
                out[0] = sum;
            }";
        assert!(verdicts(source).iter().all(|in_place| *in_place));
    }

    #[test]
    fn loads_used_after_a_write_are_copied() {
        let source = "
            @group(0) @binding(0) var<storage, read_write> out: array<u32>;
            @compute @workgroup_size(1)
            fn main() {
                var v = 1u;
                let before = v;
                v = 2u;
                out[0] = before;
                let again = v;
                if again > 0u { v = 3u; }
                out[1] = again;
                let kept = v;
                loop {
                    out[2] = kept;
                    v = v + 1u;
                    if v > 9u { break; }
                }
            }";
        // `before` and `again` outlive a write; `kept` is used in a loop that writes `v`;
        // the loop's own load of `v` is used before the write.
        assert_eq!(verdicts(source), [false, false, false, true, true]);
    }

    #[test]
    fn values_holding_a_loads_registers_extend_its_life() {
        let source = "
            @group(0) @binding(0) var<storage, read_write> out: array<f32>;
            @compute @workgroup_size(1)
            fn main() {
                var v = 1.0;
                let pair = vec2(v, 2.0);
                v = 3.0;
                out[0] = pair.x;
            }";
        assert_eq!(verdicts(source), [false]);
    }
}
