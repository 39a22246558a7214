//! Shrinking: cut a program that shows a difference down to one where no single edit keeps
//! the difference, as C-Reduce and wgslsmith's reducer do.
//!
//! Edits, tried in order from the biggest: drop an unused helper function; launch fewer
//! workgroups or smaller ones; remove a run of statements (a whole block, halves, single
//! statements); replace an `if`, loop or `switch` by one of its blocks; cut a loop's trip count
//! to 1; replace an expression by zero, one, or one of its own sub-expressions of the same
//! type. An edit is kept when the program gets smaller (statements and expression nodes, then
//! invocations, then literal complexity) and the predicate still holds; shrinking stops when a
//! whole round keeps nothing, or at the deadline.
//!
//! Every edit keeps the generator's invariants, because each guard is part of the node it
//! protects (see [`crate::ast`]): a replacement is always a constant or a descendant of the
//! same type, and removing statements never makes control flow less uniform. Edits can still
//! produce invalid WGSL (a use of a removed variable); the predicate is expected to reject
//! those, cheaply, by validating before running anything.

use crate::ast::*;
use std::time::Instant;

/// What shrinking did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ShrinkStats {
    /// Candidates the predicate was asked about.
    pub attempts: usize,
    /// Candidates kept.
    pub accepted: usize,
    /// [`Program::size`] before and after.
    pub size_before: usize,
    pub size_after: usize,
    /// Stopped by the deadline or the attempt limit rather than by a round with no progress.
    pub cut_short: bool,
}

#[derive(Debug, Clone)]
enum Edit {
    RemoveFunction(usize),
    Workgroups([u32; 2]),
    WorkgroupSize([u32; 2]),
    RemoveStatements { block: usize, start: usize, len: usize },
    Splice { block: usize, index: usize, inner: usize },
    Trips { block: usize, index: usize },
    Replace { expr: usize, with: Replacement },
}

#[derive(Debug, Clone, Copy)]
enum Replacement {
    Zero,
    One,
    Child(usize),
}

/// The order candidates are judged by: smaller is simpler.
fn measure(program: &Program) -> (usize, u32, usize) {
    let mut literals = 0;
    let mut count = |e: &Expr| {
        if let ExprKind::Lit(lit) = e.kind {
            literals += literal_weight(lit);
        }
    };
    visit_exprs(program, &mut count);
    (program.size(), program.invocations(), literals)
}

fn literal_weight(lit: Lit) -> usize {
    match lit {
        Lit::U32(0) | Lit::I32(0) | Lit::Bool(false) => 0,
        Lit::F32(0.0) => 0,
        Lit::U32(1) | Lit::I32(1) | Lit::Bool(true) => 1,
        Lit::F32(1.0) => 1,
        _ => 2,
    }
}

/// Shrinks `program` while `still_fails` holds, until no edit helps, `deadline` passes or
/// `max_attempts` candidates were tried.
pub fn shrink(
    program: &Program,
    deadline: Instant,
    max_attempts: usize,
    still_fails: &mut dyn FnMut(&Program) -> bool,
) -> (Program, ShrinkStats) {
    let mut current = program.clone();
    let mut stats = ShrinkStats {
        size_before: program.size(),
        ..ShrinkStats::default()
    };
    loop {
        let mut progress = false;
        let mut position = 0;
        loop {
            let edits = edits(&current);
            if position >= edits.len() {
                break;
            }
            if Instant::now() >= deadline || stats.attempts >= max_attempts {
                stats.cut_short = true;
                stats.size_after = current.size();
                return (current, stats);
            }
            let edit = &edits[position];
            let Some(candidate) = apply(&current, edit) else {
                position += 1;
                continue;
            };
            if measure(&candidate) >= measure(&current) {
                position += 1;
                continue;
            }
            stats.attempts += 1;
            if still_fails(&candidate) {
                tracing::debug!(?edit, size = candidate.size(), "shrink: kept");
                current = candidate;
                stats.accepted += 1;
                progress = true;
                // The same position now names the next edit of the smaller program.
            } else {
                position += 1;
            }
        }
        if !progress {
            break;
        }
    }
    stats.size_after = current.size();
    (current, stats)
}

// ---------------------------------------------------------------------------------------------
// Enumerating edits
// ---------------------------------------------------------------------------------------------

/// Every block, in a fixed order: each function's body, then the entry point's, each followed
/// by the blocks nested in it.
fn all_blocks(program: &Program) -> Vec<&Vec<Stmt>> {
    fn nested<'a>(block: &'a Vec<Stmt>, out: &mut Vec<&'a Vec<Stmt>>) {
        out.push(block);
        for stmt in block {
            for inner in stmt.blocks() {
                nested(inner, out);
            }
        }
    }
    let mut out = Vec::new();
    for function in &program.functions {
        nested(&function.body, &mut out);
    }
    nested(&program.body, &mut out);
    out
}

/// Calls `f` on block number `target` of [`all_blocks`]'s order.
fn with_block(program: &mut Program, target: usize, f: impl FnOnce(&mut Vec<Stmt>)) -> bool {
    fn nested(
        block: &mut Vec<Stmt>,
        counter: &mut usize,
        target: usize,
        f: &mut Option<impl FnOnce(&mut Vec<Stmt>)>,
    ) -> bool {
        if *counter == target {
            if let Some(f) = f.take() {
                f(block);
            }
            return true;
        }
        *counter += 1;
        for stmt in block.iter_mut() {
            for inner in stmt.blocks_mut() {
                if nested(inner, counter, target, f) {
                    return true;
                }
            }
        }
        false
    }
    let mut counter = 0;
    let mut f = Some(f);
    for function in &mut program.functions {
        if nested(&mut function.body, &mut counter, target, &mut f) {
            return true;
        }
    }
    nested(&mut program.body, &mut counter, target, &mut f)
}

/// Calls `visit` on every expression in the order [`with_expr`] numbers them.
fn visit_exprs(program: &Program, visit: &mut dyn FnMut(&Expr)) {
    fn block(stmts: &[Stmt], visit: &mut dyn FnMut(&Expr)) {
        for stmt in stmts {
            for expr in stmt.exprs() {
                expr.walk(visit);
            }
            for inner in stmt.blocks() {
                block(inner, visit);
            }
        }
    }
    for function in &program.functions {
        block(&function.body, visit);
        function.result.walk(visit);
    }
    block(&program.body, visit);
}

/// Calls `f` on expression number `target` (pre-order, in [`visit_exprs`]'s order).
fn with_expr(program: &mut Program, target: usize, f: impl FnOnce(&mut Expr)) -> bool {
    fn walk(expr: &mut Expr, counter: &mut usize, target: usize, f: &mut Option<impl FnOnce(&mut Expr)>) -> bool {
        if *counter == target {
            if let Some(f) = f.take() {
                f(expr);
            }
            return true;
        }
        *counter += 1;
        for child in expr.children_mut() {
            if walk(child, counter, target, f) {
                return true;
            }
        }
        false
    }
    fn block(stmts: &mut [Stmt], counter: &mut usize, target: usize, f: &mut Option<impl FnOnce(&mut Expr)>) -> bool {
        for stmt in stmts {
            for expr in stmt.exprs_mut() {
                if walk(expr, counter, target, f) {
                    return true;
                }
            }
            for inner in stmt.blocks_mut() {
                if block(inner, counter, target, f) {
                    return true;
                }
            }
        }
        false
    }
    let mut counter = 0;
    let mut f = Some(f);
    for function in &mut program.functions {
        if block(&mut function.body, &mut counter, target, &mut f) {
            return true;
        }
        if walk(&mut function.result, &mut counter, target, &mut f) {
            return true;
        }
    }
    block(&mut program.body, &mut counter, target, &mut f)
}

fn function_used(program: &Program, index: usize) -> bool {
    let mut used = false;
    visit_exprs(program, &mut |e| {
        if let ExprKind::CallFn(f, _) = e.kind {
            used |= f == index;
        }
    });
    fn calls(block: &[Stmt], index: usize) -> bool {
        block.iter().any(|stmt| {
            matches!(stmt, Stmt::CallStmt { func, .. } if *func == index)
                || stmt.blocks().iter().any(|inner| calls(inner, index))
        })
    }
    used || calls(&program.body, index) || program.functions.iter().any(|f| calls(&f.body, index))
}

fn edits(program: &Program) -> Vec<Edit> {
    let mut edits = Vec::new();
    for index in (0..program.functions.len()).rev() {
        if !function_used(program, index) {
            edits.push(Edit::RemoveFunction(index));
        }
    }
    let [gx, gy] = program.workgroups;
    for grid in [[1, 1], [2, 1], [gx, 1], [gx.div_ceil(2), gy]] {
        if grid != program.workgroups && grid[0] * grid[1] < gx * gy {
            edits.push(Edit::Workgroups(grid));
        }
    }
    let [sx, sy] = program.workgroup_size;
    for size in [[1, 1], [sx.div_ceil(2), sy], [sx, sy.div_ceil(2)]] {
        if size != program.workgroup_size && size[0] * size[1] < sx * sy {
            edits.push(Edit::WorkgroupSize(size));
        }
    }
    let blocks = all_blocks(program);
    for (number, block) in blocks.iter().enumerate() {
        let n = block.len();
        if n > 1 {
            edits.push(Edit::RemoveStatements {
                block: number,
                start: 0,
                len: n,
            });
        }
        if n > 3 {
            let half = n / 2;
            edits.push(Edit::RemoveStatements {
                block: number,
                start: 0,
                len: half,
            });
            edits.push(Edit::RemoveStatements {
                block: number,
                start: half,
                len: n - half,
            });
        }
    }
    for (number, block) in blocks.iter().enumerate() {
        // From the end: later statements use earlier ones, so they go first.
        for start in (0..block.len()).rev() {
            edits.push(Edit::RemoveStatements {
                block: number,
                start,
                len: 1,
            });
        }
    }
    for (number, block) in blocks.iter().enumerate() {
        for (index, stmt) in block.iter().enumerate() {
            for inner in 0..stmt.blocks().len() {
                edits.push(Edit::Splice {
                    block: number,
                    index,
                    inner,
                });
            }
            if let Stmt::Loop { trips, .. } = stmt {
                if trips.kind != ExprKind::Lit(Lit::U32(1)) {
                    edits.push(Edit::Trips { block: number, index });
                }
            }
        }
    }
    let mut exprs: Vec<(Ty, Vec<Ty>)> = Vec::new();
    visit_exprs(program, &mut |e| {
        exprs.push((e.ty.clone(), e.children().iter().map(|c| c.ty.clone()).collect()));
    });
    for (number, (ty, children)) in exprs.iter().enumerate() {
        edits.push(Edit::Replace {
            expr: number,
            with: Replacement::Zero,
        });
        if matches!(ty, Ty::Scalar(_) | Ty::Vec(..)) {
            edits.push(Edit::Replace {
                expr: number,
                with: Replacement::One,
            });
        }
        for (child, child_ty) in children.iter().enumerate() {
            if child_ty == ty {
                edits.push(Edit::Replace {
                    expr: number,
                    with: Replacement::Child(child),
                });
            }
        }
    }
    edits
}

fn zero(ty: &Ty) -> Expr {
    match ty {
        Ty::Scalar(Scalar::U32) => Expr::lit(Lit::U32(0)),
        Ty::Scalar(Scalar::I32) => Expr::lit(Lit::I32(0)),
        Ty::Scalar(Scalar::F32) => Expr::lit(Lit::F32(0.0)),
        Ty::Scalar(Scalar::Bool) => Expr::lit(Lit::Bool(false)),
        _ => Expr::new(ty.clone(), ExprKind::Construct(Vec::new())),
    }
}

fn one(ty: &Ty) -> Expr {
    match ty {
        Ty::Scalar(Scalar::U32) => Expr::lit(Lit::U32(1)),
        Ty::Scalar(Scalar::I32) => Expr::lit(Lit::I32(1)),
        Ty::Scalar(Scalar::F32) => Expr::lit(Lit::F32(1.0)),
        Ty::Scalar(Scalar::Bool) => Expr::lit(Lit::Bool(true)),
        Ty::Vec(_, s) => Expr::new(ty.clone(), ExprKind::Splat(Box::new(one(&Ty::Scalar(*s))))),
        _ => zero(ty),
    }
}

fn renumber_calls(program: &mut Program, removed: usize) {
    fn fix_expr(expr: &mut Expr, removed: usize) {
        if let ExprKind::CallFn(f, _) = &mut expr.kind {
            if *f > removed {
                *f -= 1;
            }
        }
        for child in expr.children_mut() {
            fix_expr(child, removed);
        }
    }
    fn fix_block(block: &mut [Stmt], removed: usize) {
        for stmt in block {
            if let Stmt::CallStmt { func, .. } = stmt {
                if *func > removed {
                    *func -= 1;
                }
            }
            for expr in stmt.exprs_mut() {
                fix_expr(expr, removed);
            }
            for inner in stmt.blocks_mut() {
                fix_block(inner, removed);
            }
        }
    }
    fix_block(&mut program.body, removed);
    for function in &mut program.functions {
        fix_block(&mut function.body, removed);
        fix_expr(&mut function.result, removed);
    }
}

/// The program with `edit` made, or `None` when it does not apply.
fn apply(program: &Program, edit: &Edit) -> Option<Program> {
    let mut next = program.clone();
    let applied = match edit {
        Edit::RemoveFunction(index) => {
            if *index >= next.functions.len() {
                return None;
            }
            next.functions.remove(*index);
            renumber_calls(&mut next, *index);
            true
        }
        Edit::Workgroups(grid) => {
            next.workgroups = *grid;
            true
        }
        Edit::WorkgroupSize(size) => {
            next.workgroup_size = *size;
            true
        }
        Edit::RemoveStatements { block, start, len } => with_block(&mut next, *block, |stmts| {
            if start + len <= stmts.len() {
                stmts.drain(*start..start + len);
            }
        }),
        Edit::Splice { block, index, inner } => with_block(&mut next, *block, |stmts| {
            if let Some(stmt) = stmts.get(*index) {
                if let Some(contents) = stmt.blocks().get(*inner).map(|b| (*b).clone()) {
                    stmts.splice(*index..index + 1, contents);
                }
            }
        }),
        Edit::Trips { block, index } => with_block(&mut next, *block, |stmts| {
            if let Some(Stmt::Loop { trips, .. }) = stmts.get_mut(*index) {
                *trips = Expr::u32(1);
            }
        }),
        Edit::Replace { expr, with } => with_expr(&mut next, *expr, |e| {
            let replacement = match with {
                Replacement::Zero => zero(&e.ty),
                Replacement::One => one(&e.ty),
                Replacement::Child(child) => match e.children().get(*child) {
                    Some(c) if c.ty == e.ty => (*c).clone(),
                    _ => return,
                },
            };
            *e = replacement;
        }),
    };
    applied.then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::emit;
    use crate::gen::generate;
    use std::time::Duration;

    fn valid(program: &Program) -> bool {
        emit(program).parse().is_ok()
    }

    /// A synthetic "bug": the program computes `countOneBits` somewhere. The shrinker must keep
    /// it and remove nearly everything else.
    #[test]
    fn shrinks_to_the_one_thing_that_matters() {
        let seed = (0..200)
            .find(|seed| emit(&generate(*seed)).source.contains("countOneBits("))
            .expect("a program with countOneBits");
        let program = generate(seed);
        let mut predicate = |p: &Program| valid(p) && emit(p).source.contains("countOneBits(");
        assert!(predicate(&program));
        let deadline = Instant::now() + Duration::from_secs(120);
        let (small, stats) = shrink(&program, deadline, 100_000, &mut predicate);
        assert!(predicate(&small), "the result must still show the bug");
        assert!(!stats.cut_short, "shrinking should finish: {stats:?}");
        assert!(
            small.size() * 5 < program.size(),
            "from {} to only {}:\n{}",
            program.size(),
            small.size(),
            emit(&small).source
        );
        assert_eq!(small.invocations(), 1, "one invocation suffices");
        // No single statement is left that could go.
        let statements: usize = small.body.iter().map(Stmt::size).sum();
        assert!(
            statements <= 2,
            "{} statements left:\n{}",
            statements,
            emit(&small).source
        );
    }

    #[test]
    fn a_predicate_that_never_holds_changes_nothing() {
        let program = generate(3);
        let (same, stats) = shrink(&program, Instant::now() + Duration::from_secs(30), 100_000, &mut |_| {
            false
        });
        assert_eq!(same, program);
        assert_eq!(stats.accepted, 0);
        assert!(stats.attempts > 0);
    }

    #[test]
    fn shrinking_keeps_what_the_predicate_needs() {
        // The "bug" needs a barrier inside a loop.
        let needs = |p: &Program| {
            fn loop_with_barrier(block: &[Stmt], in_loop: bool) -> bool {
                block.iter().any(|stmt| match stmt {
                    Stmt::Exchange { .. } | Stmt::Barrier | Stmt::WgAtomicRead { .. } => in_loop,
                    Stmt::Loop { body, .. } => loop_with_barrier(body, true),
                    other => other.blocks().iter().any(|b| loop_with_barrier(b, in_loop)),
                })
            }
            loop_with_barrier(&p.body, false)
        };
        let seed = (0..300).find(|s| needs(&generate(*s))).expect("a loop with a barrier");
        let program = generate(seed);
        let mut predicate = |p: &Program| valid(p) && needs(p);
        let (small, _) = shrink(
            &program,
            Instant::now() + Duration::from_secs(120),
            100_000,
            &mut predicate,
        );
        assert!(needs(&small) && valid(&small));
        assert!(small.size() <= 10, "left:\n{}", emit(&small).source);
    }
}
