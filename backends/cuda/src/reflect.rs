//! What the host can read of a module's kernels before the driver has them: the parameters
//! and workgroup sizes of CUDA C kernels (read by [`xhal_kernel::c_signature`], as for HIP C),
//! the sizes of the scalar types they take, and the `.reqntid` of PTX entries.
//!
//! A CUDA kernel does not carry its block shape, and xhal launches count workgroups of a
//! fixed size, so the size comes from the module:
//! - CUDA C written by `xhal_kernel::c` states it before each kernel as
//!   `XH_WORKGROUP_SIZE(X, Y, Z)` (a macro that expands to nothing);
//! - any module (CUDA C, PTX or cubin) may define a device global
//!   `unsigned int NAME__workgroup_size[3]` (the name host C uses for the same thing), read
//!   when the kernel is looked up;
//! - PTX may declare `.reqntid X, Y, Z` on the entry.

use std::collections::HashMap;
use xhal_kernel::c_signature::{self, CKernel};
use xhal_kernel::Dialect;

/// What a CUDA C source tells about its `extern "C" __global__` kernels, by name, and the
/// sizes its static asserts give its structs.
#[derive(Debug, Default, Clone)]
pub(crate) struct SourceReflection {
    pub(crate) kernels: HashMap<String, CKernel>,
    pub(crate) struct_sizes: HashMap<String, usize>,
}

/// The size of a plain CUDA C scalar type, for a native kernel's single-scalar block.
pub(crate) fn builtin_size(type_name: &str) -> Option<usize> {
    let name = type_name.trim().trim_start_matches("const ").trim();
    Some(match name {
        "char" | "signed char" | "unsigned char" | "bool" | "int8_t" | "uint8_t" => 1,
        "short" | "unsigned short" | "int16_t" | "uint16_t" => 2,
        "int" | "unsigned" | "unsigned int" | "float" | "int32_t" | "uint32_t" | "xh_i32" | "xh_u32" | "xh_f32" => 4,
        "long long" | "unsigned long long" | "double" | "int64_t" | "uint64_t" | "size_t" | "xh_i64" | "xh_u64"
        | "xh_f64" => 8,
        _ => return emitted_vector_size(name),
    })
}

/// The size of the C emitter's vector structs (`xh_f32x4` is four `xh_f32`, unpadded).
fn emitted_vector_size(name: &str) -> Option<usize> {
    let (element, lanes) = name.strip_prefix("xh_")?.split_once('x')?;
    let element = match element {
        "bool" => 1,
        "i32" | "u32" | "f32" => 4,
        "i64" | "u64" | "f64" => 8,
        _ => return None,
    };
    match lanes {
        "2" | "3" | "4" => Some(element * lanes.parse::<usize>().ok()?),
        _ => None,
    }
}

/// Reads the kernels and struct sizes of CUDA C `source`.
pub(crate) fn reflect_source(source: &str) -> SourceReflection {
    SourceReflection {
        kernels: c_signature::kernels(source, Dialect::CudaC)
            .into_iter()
            .map(|kernel| (kernel.name.clone(), kernel))
            .collect(),
        struct_sizes: c_signature::asserted_sizes(source)
            .into_iter()
            .filter_map(|(name, size)| Some((name, usize::try_from(size).ok()?)))
            .collect(),
    }
}

/// The `.reqntid` of every PTX entry that declares one, and every entry's name.
pub(crate) fn reflect_ptx(ptx: &str) -> (Vec<String>, HashMap<String, [u32; 3]>) {
    let mut names = Vec::new();
    let mut sizes = HashMap::new();
    let mut rest = ptx;
    while let Some(found) = rest.find(".entry") {
        rest = &rest[found + ".entry".len()..];
        let head = rest.trim_start();
        let length = head
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(head.len());
        let name = head[..length].to_string();
        if name.is_empty() {
            continue;
        }
        let directives = &head[..head.find('{').unwrap_or(head.len())];
        if let Some(at) = directives.find(".reqntid") {
            let values: Vec<u32> = directives[at + ".reqntid".len()..]
                .split(|c: char| c == ',' || c.is_whitespace())
                .map_while(|word| {
                    if word.is_empty() {
                        Some(None)
                    } else {
                        word.parse().ok().map(Some)
                    }
                })
                .flatten()
                .take(3)
                .collect();
            if !values.is_empty() {
                let mut size = [1u32; 3];
                size[..values.len()].copy_from_slice(&values);
                sizes.insert(name.clone(), size);
            }
        }
        names.push(name);
    }
    (names, sizes)
}

#[cfg(test)]
#[path = "../../../tests/support/repository_kernels.rs"]
mod repository;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use xhal_kernel::parameters::ParameterClass;

    const EMITTED: &str = r#"
typedef struct xh_s2_Params { xh_f32 a_; xh_u32 n_; } xh_s2_Params;
XH_STATIC_ASSERT(sizeof(xh_s2_Params) == 8, "WGSL layout");
typedef struct xh_lengths_saxpy { xh_u64 bytes[2]; } xh_lengths_saxpy;
XH_WORKGROUP_SIZE(256, 1, 1) extern "C" __global__ void __launch_bounds__(256) saxpy(XH_GLOBAL xh_f32* buffer0, XH_GLOBAL xh_f32* buffer1, xh_s2_Params scalars, xh_lengths_saxpy lengths) {
    xh_ctx c = {};
    xh_ep_saxpy(&c, gid, nwg);
}
XH_WORKGROUP_SIZE(8, 4, 2) extern "C" __global__ void __launch_bounds__(64) main_(XH_GLOBAL xh_u32* buffer0) {
}
extern "C" __global__ void __launch_bounds__(64) native(float* out, unsigned n) {
    out[threadIdx.x] = n;
}
"#;

    /// The reading itself is `xhal_kernel::c_signature`'s (tested there, with this source);
    /// here, what this backend makes of it.
    #[test]
    fn kernels_are_found_by_name_and_their_scalars_sized() {
        let reflection = reflect_source(EMITTED);
        assert_eq!(reflection.kernels["saxpy"].workgroup_size, Some([256, 1, 1]));
        assert_eq!(reflection.kernels["main_"].workgroup_size, Some([8, 4, 2]));
        assert_eq!(reflection.struct_sizes["xh_s2_Params"], 8);
        let native = &reflection.kernels["native"];
        assert_eq!(native.workgroup_size, None);
        assert_eq!(native.parameters[1].class, ParameterClass::Value);
        assert_eq!(builtin_size(&native.parameters[1].type_name), Some(4));
        assert_eq!(builtin_size("xh_s2_Params"), None);
        assert_eq!(builtin_size("xh_u32x4"), Some(16));
        assert_eq!(builtin_size("xh_f32x3"), Some(12));
        assert_eq!(builtin_size("xh_f32m4x4"), None);
    }

    /// Every WGSL kernel of the repository (the examples, and the conformance catalogue's raw
    /// strings that hold a compute entry point).
    pub(crate) fn repository_kernels() -> Vec<(String, String)> {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        super::repository::repository_kernels(&repo, &["examples/kernels", "conformance/src/catalogue"])
    }

    /// Every scalar block of the CUDA C the emitter writes has a size this backend knows (a
    /// static assert, or a scalar or vector type), for every kernel of the repository; that
    /// the kernels read as the emitter describes them is `xhal_kernel::c_signature`'s test.
    #[test]
    fn emitted_cuda_c_scalar_blocks_have_known_sizes() {
        let mut checked = 0;
        for (name, wgsl) in repository_kernels() {
            let Ok(module) = xhal_kernel::parse_wgsl(&wgsl) else {
                continue;
            };
            let Ok(source) = module.to_c(xhal_kernel::Dialect::CudaC, None) else {
                continue;
            };
            let reflection = reflect_source(&source.text);
            for entry in &source.entry_points {
                let kernel = reflection
                    .kernels
                    .get(&entry.symbol)
                    .unwrap_or_else(|| panic!("{name}: kernel `{}` not found", entry.symbol));
                if let Some(block) = kernel.parameters.iter().find(|p| p.class == ParameterClass::Value) {
                    let sized = reflection.struct_sizes.contains_key(block.type_name.trim())
                        || builtin_size(&block.type_name).is_some();
                    assert!(sized, "{name}: scalar block type `{}` has no size", block.type_name);
                }
                checked += 1;
            }
        }
        assert!(checked >= 50, "only {checked} entry points checked");
    }

    #[test]
    fn ptx_entries_give_their_reqntid() {
        let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
                   .visible .entry fill(\n.param .u64 fill_param_0\n)\n.reqntid 64, 2, 1\n{\nret;\n}\n\
                   .visible .entry plain(\n.param .u64 plain_param_0\n)\n{\nret;\n}\n\
                   .visible .entry line(\n)\n.reqntid 128\n{\nret;\n}\n";
        let (names, sizes) = reflect_ptx(ptx);
        assert_eq!(names, ["fill", "plain", "line"]);
        assert_eq!(sizes["fill"], [64, 2, 1]);
        assert_eq!(sizes["line"], [128, 1, 1]);
        assert!(!sizes.contains_key("plain"));
    }
}
