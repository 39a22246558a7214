//! Type questions every writer of naga IR asks.

use naga::{Type, TypeInner, UniqueArena};

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
