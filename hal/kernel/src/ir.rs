//! What the writers of naga IR share (the C writer, [`crate::c`], and the Kernel SPIR-V
//! writer, [`crate::spirv_kernel`]): questions about types, about the functions and entry
//! points a translation writes, and the error for what a target cannot express.

use std::collections::BTreeSet;

use naga::valid::FunctionInfo;
use naga::{
    AddressSpace, ArraySize, Block, Expression, Function, Handle, Scalar, ScalarKind, Statement, Type, TypeInner,
    UniqueArena,
};

use crate::error::{KernelError, KernelErrorKind};

// ----- types -----

/// What a pointer of type `pointer` points to (a value pointer's vector or scalar included);
/// any other type is returned as it is.
pub(crate) fn pointee(types: &UniqueArena<Type>, pointer: &TypeInner) -> TypeInner {
    match pointer {
        TypeInner::Pointer { base, .. } => types[*base].inner.clone(),
        TypeInner::ValuePointer {
            size: Some(size),
            scalar,
            ..
        } => TypeInner::Vector {
            size: *size,
            scalar: *scalar,
        },
        TypeInner::ValuePointer { size: None, scalar, .. } => TypeInner::Scalar(*scalar),
        other => other.clone(),
    }
}

/// The type a pointer of type `pointer` points to, when it is a pointer to a type of the
/// arena (not a value pointer).
pub(crate) fn pointee_handle(pointer: &TypeInner) -> Option<Handle<Type>> {
    match pointer {
        TypeInner::Pointer { base, .. } => Some(*base),
        _ => None,
    }
}

/// Whether `ty` is a pointer (a value pointer included).
pub(crate) fn is_pointer(ty: &TypeInner) -> bool {
    matches!(ty, TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. })
}

/// `(header, stride)` of a buffer type with a runtime-sized array: the array's offset and
/// its element stride.
pub(crate) fn runtime_array_of(types: &UniqueArena<Type>, ty: Handle<Type>) -> Option<(u32, u32)> {
    match &types[ty].inner {
        TypeInner::Array {
            size: ArraySize::Dynamic,
            stride,
            ..
        } => Some((0, *stride)),
        TypeInner::Struct { members, .. } => {
            let last = members.last()?;
            match &types[last.ty].inner {
                TypeInner::Array {
                    size: ArraySize::Dynamic,
                    stride,
                    ..
                } => Some((last.offset, *stride)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether a function (with its callees) uses a buffer that holds a runtime-sized array.
pub(crate) fn touches_runtime_array(m: &naga::Module, fi: &FunctionInfo) -> bool {
    m.global_variables.iter().any(|(g, var)| {
        !fi[g].is_empty()
            && matches!(var.space, AddressSpace::Storage { .. })
            && runtime_array_of(&m.types, var.ty).is_some()
    })
}

/// WGSL's name of a scalar type, for messages.
pub(crate) fn scalar_wgsl(s: Scalar) -> String {
    match s.kind {
        ScalarKind::Bool => "bool".to_owned(),
        ScalarKind::Sint => format!("i{}", s.width * 8),
        ScalarKind::Uint => format!("u{}", s.width * 8),
        ScalarKind::Float => format!("f{}", s.width * 8),
        _ => "an abstract type".to_owned(),
    }
}

// ----- functions and entry points -----

/// The compute entry points of `m` (by index) that a translation writes: the one named
/// `entry`, or all of them.
pub(crate) fn compute_entries(m: &naga::Module, entry: Option<&str>) -> Vec<usize> {
    m.entry_points
        .iter()
        .enumerate()
        .filter(|(_, ep)| ep.stage == naga::ShaderStage::Compute && entry.is_none_or(|n| n == ep.name))
        .map(|(i, _)| i)
        .collect()
}

/// Calls `visit` on every statement of `block` and of the blocks nested in it, each statement
/// before the blocks it holds, in the order they run.
pub(crate) fn for_each_statement<'b>(block: &'b Block, visit: &mut dyn FnMut(&'b Statement)) {
    for s in block.iter() {
        visit(s);
        match s {
            Statement::Block(b) => for_each_statement(b, visit),
            Statement::If { accept, reject, .. } => {
                for_each_statement(accept, visit);
                for_each_statement(reject, visit);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| for_each_statement(&c.body, visit)),
            Statement::Loop { body, continuing, .. } => {
                for_each_statement(body, visit);
                for_each_statement(continuing, visit);
            }
            _ => {}
        }
    }
}

/// Whether `test` holds for a statement of `block` or of the blocks nested in it.
pub(crate) fn any_statement(block: &Block, test: &mut dyn FnMut(&Statement) -> bool) -> bool {
    let mut found = false;
    for_each_statement(block, &mut |s| found = found || test(s));
    found
}

/// Adds the functions `block` calls (not those they call) to `out`.
pub(crate) fn calls(block: &Block, out: &mut BTreeSet<Handle<Function>>) {
    for_each_statement(block, &mut |s| {
        if let Statement::Call { function, .. } = s {
            out.insert(*function);
        }
    });
}

/// Every function `body` calls, directly or through other functions.
pub(crate) fn closure(m: &naga::Module, body: &Block) -> BTreeSet<Handle<Function>> {
    let mut set = BTreeSet::new();
    calls(body, &mut set);
    loop {
        let before = set.len();
        for h in set.clone() {
            calls(&m.functions[h].body, &mut set);
        }
        if set.len() == before {
            return set;
        }
    }
}

/// Whether `block` holds a control barrier (or `workgroupUniformLoad`, which has two).
pub(crate) fn has_barrier(block: &Block) -> bool {
    any_statement(block, &mut |s| {
        matches!(s, Statement::ControlBarrier(_) | Statement::WorkGroupUniformLoad { .. })
    })
}

/// Whether function `f` itself (not its callees) calls `arrayLength`.
pub(crate) fn uses_length(f: &Function) -> bool {
    f.expressions
        .iter()
        .any(|(_, e)| matches!(e, Expression::ArrayLength(_)))
}

// ----- errors -----

/// An [`Unsupported`](KernelErrorKind::Unsupported) error without a location: `what` cannot
/// be written as `target` (a dialect's name, or "Kernel SPIR-V").
pub(crate) fn unsupported(what: &str, target: &str) -> KernelError {
    KernelError::new(
        KernelErrorKind::Unsupported,
        format!("{what} cannot be written as {target}"),
    )
}

/// The same error at `span` of `src`, the source line marked with `label`; without a
/// location when naga kept no span.
pub(crate) fn unsupported_at(what: &str, target: &str, src: &str, span: naga::Span, label: &str) -> KernelError {
    if span.is_defined() {
        KernelError::at(
            KernelErrorKind::Unsupported,
            format!("{what} cannot be written as {target}"),
            src,
            span,
            label,
        )
    } else {
        unsupported(what, target)
    }
}

/// Gives an [`Unsupported`](KernelErrorKind::Unsupported) error without a location the
/// location `span` of `src` (marked with `label`); any other error is returned as it is.
pub(crate) fn relocate(e: KernelError, src: &str, span: naga::Span, label: &str) -> KernelError {
    if e.location().is_some() || !span.is_defined() || e.kind() != KernelErrorKind::Unsupported {
        return e;
    }
    KernelError::at(KernelErrorKind::Unsupported, e.message(), src, span, label)
}
