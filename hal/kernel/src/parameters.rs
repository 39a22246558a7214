//! The argument ABI's rule for a native kernel's parameter list, checked once for every
//! backend that reads parameters (from C source, from SPIR-V, from the driver).
//!
//! On CUDA, HIP, Level Zero and OpenCL, buffer argument `i` is pointer parameter `i`, the
//! scalar block follows as one by-value parameter (absent when the kernel has no scalars),
//! and a kernel translated from WGSL ends with one by-value buffer-lengths parameter that the
//! backend fills. A backend classifies each parameter as it reads it ([`ParameterClass`]) and
//! [`check_parameter_order`] refuses any other shape, with the same message on every backend.

use crate::{KernelError, KernelErrorKind};
use std::fmt;

/// What a kernel parameter is to the argument ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParameterClass {
    /// A pointer to global (or constant) memory: a buffer argument.
    Buffer,
    /// A by-value parameter: the scalar block.
    Value,
    /// The by-value buffer-lengths parameter of a kernel translated from WGSL (a struct the C
    /// emitter names `xh_lengths_<entry>`), filled by the backend.
    Lengths,
    /// A parameter the argument ABI has no place for; the text says what it is, to complete
    /// "parameter 1 `…` is": `"a __local pointer"`.
    Unpassable(&'static str),
}

/// Checks that a kernel's parameters are buffers first, then at most one by-value parameter
/// (the scalar block), then at most one buffer-lengths parameter, which must be the last.
///
/// `parameters` are each parameter's class and a description for messages (the declaration
/// in backticks where the backend has one: ``"`float* x`"``). The error, of kind
/// [`KernelErrorKind::Reflection`], names kernel `kernel`, the parameter at fault by its
/// index and description, and the one it conflicts with.
pub fn check_parameter_order<D: fmt::Display>(
    kernel: &str,
    parameters: impl IntoIterator<Item = (ParameterClass, D)>,
) -> Result<(), KernelError> {
    let refuse = |message: String| Err(KernelError::new(KernelErrorKind::Reflection, message));
    let mut seen_value: Option<D> = None;
    let mut seen_lengths: Option<D> = None;
    for (index, (class, description)) in parameters.into_iter().enumerate() {
        if let Some(lengths) = &seen_lengths {
            return refuse(format!(
                "kernel `{kernel}` does not follow the xhal argument ABI: parameter {index} {description} comes after \
                 the buffer-lengths parameter {lengths}, which must be the last"
            ));
        }
        match class {
            ParameterClass::Unpassable(what) => {
                return refuse(format!(
                    "kernel `{kernel}`: parameter {index} {description} is {what}, which the xhal argument ABI cannot \
                     pass; declare local memory inside the kernel"
                ))
            }
            ParameterClass::Lengths => seen_lengths = Some(description),
            ParameterClass::Buffer => {
                if let Some(value) = &seen_value {
                    return refuse(format!(
                        "kernel `{kernel}` does not follow the xhal argument ABI: buffer parameter {index} \
                         {description} comes after the by-value parameter {value}; buffers come first, then one \
                         scalar block"
                    ));
                }
            }
            ParameterClass::Value => {
                if let Some(value) = &seen_value {
                    return refuse(format!(
                        "kernel `{kernel}` does not follow the xhal argument ABI: it has by-value parameters {value} \
                         and {description}; the scalars travel as one block, so gather them in one struct parameter"
                    ));
                }
                seen_value = Some(description);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ParameterClass::{Buffer, Lengths, Unpassable, Value};

    const LOCAL: ParameterClass = Unpassable("a __local pointer");

    /// A declaration for each class, as a C backend describes its parameters.
    fn describe(class: ParameterClass) -> &'static str {
        match class {
            Buffer => "`float* x`",
            Value => "`Params p`",
            Lengths => "`xh_lengths_k lengths`",
            Unpassable(_) => "`__local float* scratch`",
        }
    }

    fn check(classes: &[ParameterClass]) -> Result<(), KernelError> {
        check_parameter_order("k", classes.iter().map(|&class| (class, describe(class))))
    }

    /// The error's message, for assertions on its text.
    fn message(classes: &[ParameterClass]) -> String {
        match check(classes) {
            Ok(()) => panic!("{classes:?} passed"),
            Err(error) => {
                assert_eq!(error.kind(), KernelErrorKind::Reflection, "{classes:?}");
                error.message().to_string()
            }
        }
    }

    #[test]
    fn parameters_are_buffers_then_one_block_then_lengths() {
        let ok: [&[ParameterClass]; 8] = [
            &[],
            &[Buffer, Buffer],
            &[Buffer, Buffer, Value],
            &[Buffer, Value, Lengths],
            &[Buffer, Lengths],
            &[Lengths],
            &[Buffer, Buffer, Lengths],
            &[Buffer, Buffer, Value, Lengths],
        ];
        for classes in ok {
            assert!(check(classes).is_ok(), "{classes:?}");
        }
        let wrong: [&[ParameterClass]; 5] = [
            &[Value, Buffer],
            &[Buffer, Value, Value],
            &[Buffer, Lengths, Value],
            &[Buffer, LOCAL],
            &[Lengths, Lengths],
        ];
        for classes in wrong {
            message(classes);
        }
    }

    #[test]
    fn a_buffer_after_the_block_comes_after_it() {
        let late = message(&[Value, Buffer]);
        assert!(late.contains("comes after"), "{late}");
        assert_eq!(
            late,
            "kernel `k` does not follow the xhal argument ABI: buffer parameter 1 `float* x` comes after the by-value \
             parameter `Params p`; buffers come first, then one scalar block"
        );
    }

    #[test]
    fn two_blocks_are_gathered_in_one_struct() {
        let two = message(&[Value, Value]);
        assert!(two.contains("one struct"), "{two}");
    }

    #[test]
    fn the_lengths_parameter_comes_last_once() {
        for wrong in [
            &[Buffer, Lengths, Value][..],
            &[Lengths, Buffer],
            &[Buffer, Lengths, Lengths],
            &[Buffer, Buffer, Lengths, Value],
        ] {
            let error = message(wrong);
            assert!(error.contains("must be the last"), "{error}");
        }
    }

    #[test]
    fn local_pointers_cannot_be_passed() {
        let local = message(&[Buffer, LOCAL]);
        assert!(local.contains("__local"), "{local}");
        assert_eq!(
            local,
            "kernel `k`: parameter 1 `__local float* scratch` is a __local pointer, which the xhal argument ABI cannot \
             pass; declare local memory inside the kernel"
        );
    }
}
