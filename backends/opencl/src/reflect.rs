//! Reading a kernel's signature: its parameters as `clGetKernelArgInfo` describes them,
//! checked against the argument ABI when the kernel is looked up, its workgroup size, and the
//! sizes of the structs its source defines.
//!
//! The argument ABI on OpenCL: buffer parameters first (`__global` or `__constant` pointers),
//! then at most one by-value parameter (the scalar block), then at most one buffer-lengths
//! parameter (`xh_lengths_<entry> lengths`, from the C emitter), and no `__local` pointers.
//!
//! The structs an OpenCL C source declares are sized so that a struct scalar block can be
//! checked host-side: `clGetKernelArgInfo` names a parameter's type but not its size, and
//! not every driver refuses a block of the wrong size (PoCL copies what it is given and the
//! kernel reads past it).
//!
//! This reads plain struct definitions (`struct Name { ... };` and `typedef struct [Name]
//! { ... } Alias;`) whose members are built-in scalars, vectors, arrays of them, structs
//! defined before, or aliases of those (`typedef uint xh_u32;`, as the C emitter writes
//! them), and lays them out as OpenCL C does: each member at its natural alignment
//! (a 3-lane vector takes 4 lanes), the struct padded to its largest member's alignment.
//! Anything else (attributes, pointers, macros, unions) leaves the struct unsized, and then
//! only the driver checks.

use crate::ffi::{self, ClUint, Kernel};
use crate::module::Module;
use std::collections::HashMap;
use xhal_backend::{Error, Result};
use xhal_kernel::c_signature::{is_lengths_type, strip_comments};
use xhal_kernel::parameters::{check_parameter_order, ParameterClass};

/// A `__local` pointer parameter, which the argument ABI has no place for.
const LOCAL_POINTER: ParameterClass = ParameterClass::Unpassable("a __local pointer");

/// One parameter, as `clGetKernelArgInfo` describes it.
#[derive(Debug, Clone)]
pub(crate) struct Parameter {
    /// `__global` and `__constant` pointers are buffers, a `__local` pointer is
    /// [`LOCAL_POINTER`], a by-value parameter is the scalar block or, by its type, the
    /// buffer lengths.
    pub(crate) class: ParameterClass,
    pub(crate) name: String,
    pub(crate) type_name: String,
}

impl Parameter {
    pub(crate) fn describe(&self) -> String {
        format!("`{} {}`", self.type_name, self.name)
    }
}

/// What a kernel's signature tells its launches.
#[derive(Default)]
pub(crate) struct Signature {
    /// From `reqd_work_group_size`.
    pub(crate) workgroup_size: [usize; 3],
    /// Empty where the program kept no argument information (SPIR-V without it).
    pub(crate) parameters: Vec<Parameter>,
    /// `CL_KERNEL_NUM_ARGS`: all a launch is checked against where `parameters` is empty.
    pub(crate) argument_count: u32,
}

impl Signature {
    /// Reads the parameter list and the workgroup size of kernel `name`, made from `module`,
    /// and refuses kernels that do not follow the argument ABI or declare no workgroup size.
    pub(crate) fn read(module: &Module, kernel: Kernel, name: &str) -> Result<Signature> {
        let api = module.gpu.api();
        let device = module.gpu.adapter().device;
        // SAFETY: a cl_uint parameter of a live kernel.
        let argument_count =
            unsafe { ffi::info_value::<ClUint>(ffi::query_of(api.get_kernel_info, kernel, ffi::CL_KERNEL_NUM_ARGS)) }
                .map_err(|code| ffi::cl_error(format!("counting the parameters of kernel `{name}`"), code))?;
        let mut parameters = Vec::new();
        for index in 0..argument_count {
            let arg_info = |parameter: ClUint| {
                move |size, value, size_ret| {
                    // SAFETY: an argument-info parameter of a live kernel's parameter `index`.
                    unsafe { (api.get_kernel_arg_info)(kernel, index, parameter, size, value, size_ret) }
                }
            };
            // SAFETY: the address qualifier is a cl_uint.
            let qualifier = match unsafe { ffi::info_value::<ClUint>(arg_info(ffi::CL_KERNEL_ARG_ADDRESS_QUALIFIER)) } {
                Ok(qualifier) => qualifier,
                Err(ffi::CL_KERNEL_ARG_INFO_NOT_AVAILABLE) => {
                    parameters.clear();
                    break;
                }
                Err(code) => {
                    return Err(ffi::cl_error(
                        format!("reading parameter {index} of kernel `{name}`"),
                        code,
                    ))
                }
            };
            // SAFETY: string parameters of the same argument.
            let text =
                |parameter| unsafe { ffi::info_bytes(arg_info(parameter)) }.map(|bytes| ffi::info_string(&bytes));
            let type_name = text(ffi::CL_KERNEL_ARG_TYPE_NAME).unwrap_or_else(|_| "?".to_string());
            let class = match qualifier {
                ffi::CL_KERNEL_ARG_ADDRESS_GLOBAL | ffi::CL_KERNEL_ARG_ADDRESS_CONSTANT => ParameterClass::Buffer,
                ffi::CL_KERNEL_ARG_ADDRESS_LOCAL => LOCAL_POINTER,
                _ if is_lengths_type(&type_name) => ParameterClass::Lengths,
                _ => ParameterClass::Value,
            };
            parameters.push(Parameter {
                class,
                name: text(ffi::CL_KERNEL_ARG_NAME).unwrap_or_else(|_| format!("parameter{index}")),
                type_name,
            });
        }
        check_parameter_order(
            name,
            parameters
                .iter()
                .map(|parameter| (parameter.class, parameter.describe())),
        )
        .map_err(|error| Error::invalid_argument(error.message()))?;
        if let Some(lengths) = parameters
            .iter()
            .find(|parameter| parameter.class == ParameterClass::Lengths)
        {
            let buffers = parameters
                .iter()
                .filter(|parameter| parameter.class == ParameterClass::Buffer)
                .count();
            check_lengths_size(name, lengths, buffers, module.type_size(&lengths.type_name))?;
        }

        let work_group_info = |parameter: ClUint| {
            move |size, value, size_ret| {
                // SAFETY: a work-group parameter of a live kernel on its device.
                unsafe { (api.get_kernel_work_group_info)(kernel, device, parameter, size, value, size_ret) }
            }
        };
        // SAFETY: CL_KERNEL_COMPILE_WORK_GROUP_SIZE is a size_t[3].
        let size = unsafe { ffi::info_value::<[usize; 3]>(work_group_info(ffi::CL_KERNEL_COMPILE_WORK_GROUP_SIZE)) }
            .map_err(|code| ffi::cl_error(format!("reading the workgroup size of kernel `{name}`"), code))?;
        if size.contains(&0) {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` declares no workgroup size: an xhal launch counts workgroups of a fixed size, so an \
                 OpenCL C kernel must declare it with __attribute__((reqd_work_group_size(X, Y, Z)))"
            )));
        }
        // SAFETY: CL_KERNEL_WORK_GROUP_SIZE is a size_t.
        let most = unsafe { ffi::info_value::<usize>(work_group_info(ffi::CL_KERNEL_WORK_GROUP_SIZE)) }
            .map_err(|code| ffi::cl_error(format!("reading the largest workgroup of kernel `{name}`"), code))?;
        let invocations = size[0] * size[1] * size[2];
        if invocations > most {
            // SAFETY: CL_KERNEL_LOCAL_MEM_SIZE is a cl_ulong.
            let local = unsafe { ffi::info_value::<u64>(work_group_info(ffi::CL_KERNEL_LOCAL_MEM_SIZE)) }.unwrap_or(0);
            return Err(Error::unsupported(format!(
                "kernel `{name}` asks for workgroups of {}x{}x{} ({invocations} invocations), but {} runs it with at \
                 most {most} (CL_KERNEL_WORK_GROUP_SIZE; it uses {local} bytes of local memory)",
                size[0],
                size[1],
                size[2],
                module.gpu.name()
            )));
        }
        Ok(Signature {
            workgroup_size: size,
            parameters,
            argument_count,
        })
    }
}

/// The C emitter's buffer-lengths struct holds one `ulong` per buffer parameter, and one
/// when there are none; refuses a kernel whose struct (where the host can size it) holds
/// another number, since the launch would pass a block of the wrong size.
fn check_lengths_size(name: &str, lengths: &Parameter, buffers: usize, size: Option<usize>) -> Result<()> {
    let expected = 8 * buffers.max(1);
    match size {
        Some(size) if size != expected => Err(Error::invalid_argument(format!(
            "kernel `{name}` does not follow the xhal argument ABI: its buffer-lengths parameter {} has {size} bytes, \
             but with {buffers} buffer parameter(s) it must hold {} ulong(s), {expected} bytes",
            lengths.describe(),
            buffers.max(1)
        ))),
        _ => Ok(()),
    }
}

/// Size and alignment of a type, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) size: usize,
    pub(crate) align: usize,
}

/// The size of a built-in OpenCL C scalar or vector type, `None` for anything else.
pub(crate) fn builtin_size(type_name: &str) -> Option<usize> {
    let name = type_name.trim();
    let name = match name {
        "unsigned" | "unsigned int" | "signed" | "signed int" => "int",
        "unsigned char" | "signed char" => "char",
        "unsigned short" | "signed short" => "short",
        "unsigned long" | "signed long" => "long",
        other => other,
    };
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (base, lanes) = name.split_at(name.len() - digits);
    let lanes: usize = if lanes.is_empty() { 1 } else { lanes.parse().ok()? };
    let element = match base {
        "char" | "uchar" => 1,
        "short" | "ushort" | "half" => 2,
        "int" | "uint" | "float" => 4,
        "long" | "ulong" | "double" => 8,
        _ => return None,
    };
    match lanes {
        1 | 2 | 4 | 8 | 16 => Some(element * lanes),
        3 => Some(element * 4),
        _ => None,
    }
}

fn tokens(source: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    for c in source.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            current.push(c);
            continue;
        }
        if !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
        if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// The layout of every struct `source` defines that this module can size, by name (`Name`
/// for `struct Name`, and each typedef alias).
pub(crate) fn struct_layouts(source: &str) -> HashMap<String, Layout> {
    let tokens = tokens(&strip_comments(source));
    let mut layouts = HashMap::new();
    let mut at = 0;
    while at < tokens.len() {
        if tokens[at] == "typedef" && tokens.get(at + 1).is_some_and(|token| token != "struct") {
            // An alias of a type already known: `typedef unsigned int u32;`.
            let Some(end) = tokens[at..]
                .iter()
                .position(|token| token == ";")
                .map(|offset| at + offset)
            else {
                break;
            };
            let words = &tokens[at + 1..end];
            let plain = words
                .iter()
                .all(|word| word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if let (true, Some((alias, aliased))) = (plain && words.len() >= 2, words.split_last()) {
                let aliased = aliased.join(" ");
                let layout = builtin_size(&aliased)
                    .map(|size| Layout { size, align: size })
                    .or_else(|| layouts.get(&aliased).copied());
                if let Some(layout) = layout {
                    layouts.insert(alias.clone(), layout);
                }
            }
            at = end + 1;
            continue;
        }
        let typedef = tokens[at] == "typedef" && tokens.get(at + 1).is_some_and(|token| token == "struct");
        let start = if typedef { at + 1 } else { at };
        if tokens[start] != "struct" {
            at += 1;
            continue;
        }
        let mut cursor = start + 1;
        let tag = match tokens.get(cursor) {
            Some(token) if token != "{" => {
                cursor += 1;
                Some(token.clone())
            }
            _ => None,
        };
        if tokens.get(cursor).map(String::as_str) != Some("{") {
            at = cursor;
            continue;
        }
        let Some(close) = tokens[cursor..]
            .iter()
            .position(|token| token == "}")
            .map(|offset| cursor + offset)
        else {
            break;
        };
        let layout = members_layout(&tokens[cursor + 1..close], &layouts);
        let Some(end) = tokens[close..]
            .iter()
            .position(|token| token == ";")
            .map(|offset| close + offset)
        else {
            break;
        };
        // After the closing brace: nothing for a plain definition, one alias for a typedef.
        // Anything more (an attribute, a variable) leaves the struct unsized.
        let trailing = &tokens[close + 1..end];
        let well_formed = if typedef {
            trailing.len() == 1 && trailing[0].chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        } else {
            trailing.is_empty()
        };
        if let (Some(layout), true) = (layout, well_formed) {
            if let Some(tag) = tag {
                layouts.insert(tag, layout);
            }
            if typedef {
                layouts.insert(trailing[0].clone(), layout);
            }
        }
        at = end + 1;
    }
    layouts
}

fn members_layout(tokens: &[String], known: &HashMap<String, Layout>) -> Option<Layout> {
    let mut offset = 0usize;
    let mut align = 1usize;
    for declaration in tokens.split(|token| token == ";") {
        if declaration.is_empty() {
            continue;
        }
        let mut declarators = declaration.split(|token| token == ",");
        let first = declarators.next()?;
        let (type_tokens, first_declarator) = split_declarator(first)?;
        let type_tokens: Vec<&str> = type_tokens
            .iter()
            .map(String::as_str)
            .filter(|token| !matches!(*token, "const" | "volatile" | "__private" | "private"))
            .collect();
        let member = match type_tokens.as_slice() {
            ["struct", name] => *known.get(*name)?,
            words
                if words
                    .iter()
                    .all(|word| word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) =>
            {
                let joined = words.join(" ");
                match builtin_size(&joined) {
                    Some(size) => Layout { size, align: size },
                    None => *known.get(&joined)?,
                }
            }
            _ => return None,
        };
        let mut count = first_declarator;
        loop {
            let start = offset.div_ceil(member.align) * member.align;
            offset = start + member.size * count;
            align = align.max(member.align);
            match declarators.next() {
                Some(next) => {
                    let (rest, next_count) = split_declarator(next)?;
                    if !rest.is_empty() {
                        return None;
                    }
                    count = next_count;
                }
                None => break,
            }
        }
    }
    if offset == 0 {
        return None;
    }
    Some(Layout {
        size: offset.div_ceil(align) * align,
        align,
    })
}

/// Splits `type name[N][M]` into the type's tokens and the element count (N × M); `None`
/// for anything but an identifier with optional constant array sizes.
fn split_declarator(tokens: &[String]) -> Option<(&[String], usize)> {
    let mut end = tokens.len();
    let mut count = 1usize;
    while end >= 3 && tokens[end - 1] == "]" {
        if tokens[end - 3] != "[" {
            return None;
        }
        count = count.checked_mul(tokens[end - 2].parse().ok()?)?;
        end -= 3;
    }
    let name = tokens.get(end.checked_sub(1)?)?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.chars().next()?.is_ascii_digit() {
        return None;
    }
    Some((&tokens[..end - 1], count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameter(class: ParameterClass, name: &str) -> Parameter {
        Parameter {
            class,
            name: name.to_string(),
            type_name: "float*".to_string(),
        }
    }

    #[test]
    fn the_lengths_struct_holds_one_ulong_per_buffer() {
        let lengths = parameter(ParameterClass::Lengths, "lengths");
        assert!(check_lengths_size("k", &lengths, 2, Some(16)).is_ok());
        assert!(check_lengths_size("k", &lengths, 0, Some(8)).is_ok());
        assert!(check_lengths_size("k", &lengths, 2, None).is_ok());
        let error = check_lengths_size("k", &lengths, 3, Some(16)).unwrap_err();
        assert_eq!(error.kind(), xhal_backend::ErrorKind::InvalidArgument);
        assert!(error.message().contains("24 bytes"), "{error}");
    }

    fn size_of(source: &str, name: &str) -> Option<usize> {
        struct_layouts(source).get(name).map(|layout| layout.size)
    }

    #[test]
    fn builtin_sizes_follow_opencl_c() {
        assert_eq!(builtin_size("float"), Some(4));
        assert_eq!(builtin_size("uint"), Some(4));
        assert_eq!(builtin_size("unsigned int"), Some(4));
        assert_eq!(builtin_size("double"), Some(8));
        assert_eq!(builtin_size("float3"), Some(16));
        assert_eq!(builtin_size("uchar16"), Some(16));
        assert_eq!(builtin_size("struct Params"), None);
        assert_eq!(builtin_size("Params"), None);
    }

    #[test]
    fn structs_are_laid_out_as_opencl_c_lays_them_out() {
        let source = r#"
            // a comment with struct Fake { int x; };
            typedef struct { float a; uint n; } Params;
            struct Mixed { char c; double d; /* padding before d */ short s; };
            typedef struct Outer { struct Mixed m; float3 v; uint tail[3]; } OuterAlias;
            struct Pair { float x, y; };
            struct Packed { char c; int i; } __attribute__((packed));
            struct WithPointer { __global float* p; };
            typedef ulong u64;
            typedef unsigned int u32;
            typedef bool flag;
            typedef struct lengths { u64 bytes[3]; } lengths;
            typedef struct { u32 n; u64 big; } Aliased;
            typedef struct { flag f; } Flagged;
        "#;
        assert_eq!(size_of(source, "Params"), Some(8));
        assert_eq!(size_of(source, "Mixed"), Some(24));
        assert_eq!(size_of(source, "Outer"), Some(64));
        assert_eq!(size_of(source, "OuterAlias"), Some(64));
        assert_eq!(size_of(source, "Pair"), Some(8));
        assert_eq!(size_of(source, "Fake"), None);
        assert_eq!(size_of(source, "Packed"), None);
        assert_eq!(size_of(source, "WithPointer"), None);
        // Aliases of sized types are sized; `bool` has no size a host can rely on.
        assert_eq!(size_of(source, "u64"), Some(8));
        assert_eq!(size_of(source, "lengths"), Some(24));
        assert_eq!(size_of(source, "Aliased"), Some(16));
        assert_eq!(size_of(source, "flag"), None);
        assert_eq!(size_of(source, "Flagged"), None);
    }
}
