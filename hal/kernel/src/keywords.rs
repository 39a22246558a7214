//! The names C, C++, OpenCL C and `<math.h>` reserve, and the C symbol of an entry point that
//! avoids them ([`c_symbol`]).

/// Names C, C++ or OpenCL C reserve (or give a meaning) that WGSL allows as entry-point names.
const RESERVED: &[&str] = &[
    "main",
    "kernel",
    "global",
    "local",
    "constant",
    "private",
    "char",
    "short",
    "long",
    "double",
    "signed",
    "unsigned",
    "union",
    "typedef",
    "sizeof",
    "static",
    "extern",
    "register",
    "auto",
    "volatile",
    "goto",
    "int",
    "float",
    "uint",
    "uchar",
    "ushort",
    "ulong",
    "half",
    "new",
    "delete",
    "this",
    "class",
    "template",
    "namespace",
    "operator",
    "public",
    "protected",
    "barrier",
    "mem_fence",
    "memset",
    "inline",
    "restrict",
    "export",
    "bool",
    "size_t",
    "ptrdiff_t",
    "intptr_t",
    "uintptr_t",
    "event_t",
    "sampler_t",
    "printf",
];

/// Built-in functions of OpenCL C 1.2 (and, for most, of C's `<math.h>` and CUDA's device
/// library) that a kernel of the same name would clash with: OpenCL C compilers refuse the
/// redefinition of an overloaded built-in or rename the kernel (PoCL names a kernel `step`
/// `_cl_step`). `<math.h>`'s `f` and `l` variants (`sqrtf`) count as well.
const BUILTIN_FUNCTIONS: &[&str] = &[
    // Work-items.
    "get_work_dim",
    "get_global_size",
    "get_global_id",
    "get_local_size",
    "get_local_id",
    "get_num_groups",
    "get_group_id",
    "get_global_offset",
    // Math.
    "acos",
    "acosh",
    "acospi",
    "asin",
    "asinh",
    "asinpi",
    "atan",
    "atan2",
    "atanh",
    "atanpi",
    "atan2pi",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "cospi",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "exp10",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "fract",
    "frexp",
    "hypot",
    "ilogb",
    "ldexp",
    "lgamma",
    "lgamma_r",
    "log",
    "log2",
    "log10",
    "log1p",
    "logb",
    "mad",
    "maxmag",
    "minmag",
    "modf",
    "nan",
    "nextafter",
    "pow",
    "pown",
    "powr",
    "remainder",
    "remquo",
    "rint",
    "rootn",
    "round",
    "rsqrt",
    "sin",
    "sincos",
    "sinh",
    "sinpi",
    "sqrt",
    "tan",
    "tanh",
    "tanpi",
    "tgamma",
    "trunc",
    // Integers.
    "abs",
    "abs_diff",
    "add_sat",
    "hadd",
    "rhadd",
    "clamp",
    "clz",
    "mad_hi",
    "mad_sat",
    "max",
    "min",
    "mul_hi",
    "rotate",
    "sub_sat",
    "upsample",
    "popcount",
    "mad24",
    "mul24",
    // Common and geometric.
    "degrees",
    "radians",
    "mix",
    "sign",
    "smoothstep",
    "step",
    "cross",
    "dot",
    "distance",
    "length",
    "normalize",
    "fast_distance",
    "fast_length",
    "fast_normalize",
    // Relational.
    "isequal",
    "isnotequal",
    "isgreater",
    "isgreaterequal",
    "isless",
    "islessequal",
    "islessgreater",
    "isfinite",
    "isinf",
    "isnan",
    "isnormal",
    "isordered",
    "isunordered",
    "signbit",
    "any",
    "all",
    "bitselect",
    "select",
    // Synchronisation, copies, vectors.
    "read_mem_fence",
    "write_mem_fence",
    "async_work_group_copy",
    "async_work_group_strided_copy",
    "wait_group_events",
    "prefetch",
    "shuffle",
    "shuffle2",
    "vec_step",
    // <string.h>, which host C includes.
    "memcpy",
    "memmove",
    "memcmp",
    "memchr",
    "strlen",
];

/// Prefixes of built-in families (`native_sin`, `vload4`, `convert_int_sat`, `atom_add`,
/// `read_imagef`) and of the emitter's own names.
const RESERVED_PREFIXES: &[&str] = &[
    "xh_",
    "atomic",
    "atom_",
    "__",
    "native_",
    "half_",
    "vload",
    "vstore",
    "convert_",
    "as_",
    "read_image",
    "write_image",
    "get_image_",
];

/// Whether `name` is an OpenCL C vector type name (`float4`, `uchar16`).
fn is_vector_type(name: &str) -> bool {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (base, lanes) = name.split_at(name.len() - digits);
    matches!(lanes, "2" | "3" | "4" | "8" | "16")
        && matches!(
            base,
            "char" | "uchar" | "short" | "ushort" | "int" | "uint" | "long" | "ulong" | "float" | "double" | "half"
        )
}

/// The C function name of an entry point: its WGSL name, with `_` appended when C, C++ or
/// OpenCL C reserve that name (`main` becomes `main_`), when it names a built-in function of
/// OpenCL C or `<math.h>` (`step` becomes `step_`, `sqrtf` becomes `sqrtf_`) or a vector type,
/// or when it could clash with the emitter's own `xh_` names. Backends that take emitted C
/// look a kernel up by `c_symbol(wgsl_name)`.
pub fn c_symbol(name: &str) -> String {
    let math_variant = name
        .strip_suffix('f')
        .or_else(|| name.strip_suffix('l'))
        .is_some_and(|base| BUILTIN_FUNCTIONS.contains(&base));
    if RESERVED.contains(&name)
        || BUILTIN_FUNCTIONS.contains(&name)
        || math_variant
        || is_vector_type(name)
        || RESERVED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
    {
        format!("{name}_")
    } else {
        name.to_owned()
    }
}
