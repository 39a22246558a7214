//! Drops the branches a module's resolved overrides decide, before a compiler sees them.
//!
//! A kernel family often picks its operation with an `override` (`switch OP { ... }` over a
//! hundred operators). Once the overrides are resolved, the selector is a constant and all but
//! one case is dead, yet the compiler would still inline every function those cases call: a
//! kernel of one operator cost as much to compile as all of them. Here an `if` whose condition
//! is a constant loses the branch it never takes, and a `switch` whose selector is a constant
//! keeps only the clauses it runs, as its `default`.
//!
//! Only statements are removed. The expression, function and global arenas stay as they are,
//! so the module's `ModuleInfo` still describes every surviving expression, and the globals an
//! entry point uses (its launch's arguments) are those of the module as written: pruning
//! changes how a kernel is compiled, never its interface. The CPU backend's interpreter and
//! the host C writer prune what they compile.

use naga::{Block, Expression, Function, Literal, Module, Statement, SwitchValue};

/// Prunes every function and entry point of `module` (see the [module documentation](self)).
/// `module` must be valid, with its overrides resolved (as [`WgslModule::naga_module`] is).
///
/// [`WgslModule::naga_module`]: crate::WgslModule::naga_module
pub fn prune_decided_branches(module: &mut Module) {
    let Module {
        functions,
        entry_points,
        constants,
        global_expressions,
        ..
    } = module;
    let known = Known {
        constants,
        global_expressions,
    };
    for (_, function) in functions.iter_mut() {
        prune_function(&known, function);
    }
    for entry in entry_points.iter_mut() {
        prune_function(&known, &mut entry.function);
    }
}

struct Known<'m> {
    constants: &'m naga::Arena<naga::Constant>,
    global_expressions: &'m naga::Arena<Expression>,
}

/// A value known before the kernel runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    Bool(bool),
    Int(i64),
}

impl Known<'_> {
    fn literal(literal: &Literal) -> Option<Value> {
        match *literal {
            Literal::Bool(b) => Some(Value::Bool(b)),
            Literal::U32(v) => Some(Value::Int(i64::from(v))),
            Literal::I32(v) => Some(Value::Int(i64::from(v))),
            _ => None,
        }
    }

    fn global(&self, handle: naga::Handle<Expression>, depth: u32) -> Option<Value> {
        match self.global_expressions.try_get(handle).ok()? {
            Expression::Literal(literal) => Self::literal(literal),
            Expression::Constant(constant) if depth < 8 => {
                self.global(self.constants.try_get(*constant).ok()?.init, depth + 1)
            }
            _ => None,
        }
    }

    /// The value of `handle` in `function`, where the constants and literals decide it.
    fn value(&self, function: &Function, handle: naga::Handle<Expression>, depth: u32) -> Option<Value> {
        if depth > 16 {
            return None;
        }
        match function.expressions.try_get(handle).ok()? {
            Expression::Literal(literal) => Self::literal(literal),
            Expression::Constant(constant) => self.global(self.constants.try_get(*constant).ok()?.init, 0),
            Expression::Unary {
                op: naga::UnaryOperator::LogicalNot,
                expr,
            } => match self.value(function, *expr, depth + 1)? {
                Value::Bool(b) => Some(Value::Bool(!b)),
                Value::Int(_) => None,
            },
            Expression::Binary { op, left, right } => {
                use naga::BinaryOperator as B;
                let left = self.value(function, *left, depth + 1)?;
                let right = self.value(function, *right, depth + 1)?;
                match (op, left, right) {
                    (B::Equal, a, b) => Some(Value::Bool(a == b)),
                    (B::NotEqual, a, b) => Some(Value::Bool(a != b)),
                    (B::LogicalAnd, Value::Bool(a), Value::Bool(b)) => Some(Value::Bool(a && b)),
                    (B::LogicalOr, Value::Bool(a), Value::Bool(b)) => Some(Value::Bool(a || b)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

fn prune_function(known: &Known, function: &mut Function) {
    // The body is taken out so that the expressions can be read while it changes.
    let mut body = std::mem::take(&mut function.body);
    prune_block(known, function, &mut body);
    function.body = body;
}

fn prune_block(known: &Known, function: &Function, block: &mut Block) {
    for (statement, _) in block.span_iter_mut() {
        match statement {
            Statement::Block(inner) => prune_block(known, function, inner),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                match known.value(function, *condition, 0) {
                    Some(Value::Bool(true)) => *reject = Block::new(),
                    Some(Value::Bool(false)) => *accept = Block::new(),
                    _ => {}
                }
                prune_block(known, function, accept);
                prune_block(known, function, reject);
            }
            Statement::Switch { selector, cases } => {
                if let Some(Value::Int(selected)) = known.value(function, *selector, 0) {
                    if let Some(kept) = taken_clauses(cases, selected) {
                        *cases = vec![kept];
                    }
                }
                for case in cases.iter_mut() {
                    prune_block(known, function, &mut case.body);
                }
            }
            Statement::Loop { body, continuing, .. } => {
                prune_block(known, function, body);
                prune_block(known, function, continuing);
            }
            _ => {}
        }
    }
}

/// The clauses a switch on `selected` runs, from the matching case (or the default) through
/// those it falls through to, as one `default` clause. The switch itself stays, so a `break`
/// in them still leaves it.
fn taken_clauses(cases: &mut [naga::SwitchCase], selected: i64) -> Option<naga::SwitchCase> {
    let matches = |value: &SwitchValue| match *value {
        SwitchValue::I32(v) => i64::from(v) == selected,
        SwitchValue::U32(v) => i64::from(v) == selected,
        SwitchValue::Default => false,
    };
    let start = cases
        .iter()
        .position(|case| matches(&case.value))
        .or_else(|| cases.iter().position(|case| case.value == SwitchValue::Default))?;
    let mut body = Block::new();
    for case in &mut cases[start..] {
        body.append(&mut case.body);
        if !case.fall_through {
            break;
        }
    }
    Some(naga::SwitchCase {
        value: SwitchValue::Default,
        body,
        fall_through: false,
    })
}

#[cfg(test)]
mod tests {
    fn resolved(source: &str) -> naga::Module {
        crate::parse_wgsl(source).expect("parses").naga_module().clone()
    }

    fn top_statements(module: &naga::Module) -> &naga::Block {
        &module.entry_points[0].function.body
    }

    #[test]
    fn a_switch_on_an_override_keeps_the_clauses_it_runs() {
        let mut module = resolved(
            "override OP: u32 = 2u;
             @group(0) @binding(0) var<storage, read_write> out: array<u32>;
             @compute @workgroup_size(1) fn main() {
                 switch OP {
                     case 0u: { out[0] = 1u; }
                     case 1u, 2u: { out[0] = 2u; }
                     default: { out[0] = 3u; }
                 }
                 if (OP == 7u) { out[1] = 4u; } else { out[1] = 5u; }
             }",
        );
        super::prune_decided_branches(&mut module);
        let mut switches = 0;
        let mut ifs = 0;
        for statement in top_statements(&module).iter() {
            match statement {
                naga::Statement::Switch { cases, .. } => {
                    switches += 1;
                    assert_eq!(cases.len(), 1);
                    assert_eq!(cases[0].value, naga::SwitchValue::Default);
                    assert_eq!(
                        cases[0].body.len(),
                        2,
                        "the store of `case 1u, 2u` (an emit and the store)"
                    );
                }
                naga::Statement::If { accept, reject, .. } => {
                    ifs += 1;
                    assert!(accept.is_empty());
                    assert!(!reject.is_empty());
                }
                _ => {}
            }
        }
        assert_eq!((switches, ifs), (1, 1));
    }

    #[test]
    fn a_switch_on_a_value_read_at_run_time_is_left_alone() {
        let mut module = resolved(
            "@group(0) @binding(0) var<storage, read_write> out: array<u32>;
             @compute @workgroup_size(1) fn main() {
                 switch out[2] {
                     case 0u: { out[0] = 1u; }
                     default: { out[0] = 3u; }
                 }
             }",
        );
        super::prune_decided_branches(&mut module);
        let cases = top_statements(&module).iter().find_map(|statement| match statement {
            naga::Statement::Switch { cases, .. } => Some(cases.len()),
            _ => None,
        });
        assert_eq!(cases, Some(2));
    }
}
