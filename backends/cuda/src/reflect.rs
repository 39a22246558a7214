//! What the host can read of a module's kernels before the driver has them: the parameters
//! and workgroup sizes of CUDA C kernels, and the `.reqntid` of PTX entries.
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

/// How a kernel parameter is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParameterKind {
    /// A pointer: a buffer argument.
    Buffer,
    /// A by-value parameter: the scalar block.
    Value,
    /// The by-value buffer-lengths parameter of a kernel emitted from WGSL (its type is
    /// `xh_lengths_<entry>`), filled by the backend.
    Lengths,
}

/// One parameter of a CUDA C kernel, as its signature reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parameter {
    pub(crate) kind: ParameterKind,
    pub(crate) type_name: String,
    pub(crate) name: String,
}

impl Parameter {
    pub(crate) fn describe(&self) -> String {
        format!("`{} {}`", self.type_name, self.name)
    }
}

/// A CUDA C kernel as its source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceKernel {
    pub(crate) parameters: Vec<Parameter>,
    pub(crate) workgroup_size: Option<[u32; 3]>,
}

/// What a CUDA C source tells about its `extern "C" __global__` kernels, by name, and the
/// sizes its static asserts give its structs.
#[derive(Debug, Default, Clone)]
pub(crate) struct SourceReflection {
    pub(crate) kernels: HashMap<String, SourceKernel>,
    pub(crate) struct_sizes: HashMap<String, usize>,
}

const KERNEL_MARK: &str = "extern \"C\" __global__ void";

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

/// The index just past the parenthesis that closes the one at `open`.
fn closing(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn parameter(text: &str) -> Option<Parameter> {
    let text = text.trim();
    let split = text.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (type_name, name) = (text[..=split].trim(), text[split + 1..].trim());
    if name.is_empty() || type_name.is_empty() {
        return None;
    }
    let bare = type_name
        .trim_start_matches("const ")
        .trim_start_matches("struct ")
        .trim();
    let kind = if type_name.contains('*') {
        ParameterKind::Buffer
    } else if bare.starts_with("xh_lengths_") {
        ParameterKind::Lengths
    } else {
        ParameterKind::Value
    };
    Some(Parameter {
        kind,
        type_name: type_name.to_string(),
        name: name.to_string(),
    })
}

/// The `XH_WORKGROUP_SIZE(X, Y, Z)` marker in `text` (the line before a kernel's name).
fn marked_workgroup_size(text: &str) -> Option<[u32; 3]> {
    const MARKER: &str = "XH_WORKGROUP_SIZE(";
    let start = text.find(MARKER)? + MARKER.len();
    let end = start + text[start..].find(')')?;
    let numbers: Vec<u32> = text[start..end]
        .split(',')
        .map(|part| part.trim().parse().ok())
        .collect::<Option<_>>()?;
    <[u32; 3]>::try_from(numbers).ok().filter(|size| !size.contains(&0))
}

/// Reads the kernels and struct sizes of CUDA C `source`.
pub(crate) fn reflect_source(source: &str) -> SourceReflection {
    let mut reflection = SourceReflection::default();
    let mut rest = 0;
    while let Some(found) = source[rest..].find(KERNEL_MARK) {
        let line_start = source[..rest + found].rfind('\n').map_or(0, |at| at + 1);
        let workgroup_size = marked_workgroup_size(&source[line_start..rest + found]);
        let mut at = rest + found + KERNEL_MARK.len();
        rest = at;
        let mut head = source[at..].trim_start();
        at = source.len() - head.len();
        if let Some(after) = head.strip_prefix("__launch_bounds__") {
            let open = at + (head.len() - after.len());
            let Some(close) = source[open..].find('(').and_then(|o| closing(source, open + o)) else {
                continue;
            };
            head = source[close..].trim_start();
            at = source.len() - head.len();
        }
        let name_length = head
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(head.len());
        let name = head[..name_length].to_string();
        let Some(open) = source[at + name_length..].find('(').map(|o| at + name_length + o) else {
            continue;
        };
        let Some(close) = closing(source, open) else {
            continue;
        };
        let list = &source[open + 1..close - 1];
        let parameters: Vec<Parameter> = if list.trim().is_empty() || list.trim() == "void" {
            Vec::new()
        } else {
            match list.split(',').map(parameter).collect::<Option<Vec<_>>>() {
                Some(parameters) => parameters,
                None => continue,
            }
        };
        rest = close;
        if !name.is_empty() {
            reflection.kernels.insert(
                name,
                SourceKernel {
                    parameters,
                    workgroup_size,
                },
            );
        }
    }
    for line in source.lines() {
        let Some(after) = line.trim().strip_prefix("XH_STATIC_ASSERT(sizeof(") else {
            continue;
        };
        let Some((type_name, size)) = after.split_once(") == ") else {
            continue;
        };
        let digits: String = size.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(size) = digits.parse() {
            reflection.struct_sizes.insert(type_name.trim().to_string(), size);
        }
    }
    reflection
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

    #[test]
    fn emitted_kernels_give_their_parameters_and_workgroup_size() {
        let reflection = reflect_source(EMITTED);
        let saxpy = &reflection.kernels["saxpy"];
        let kinds: Vec<ParameterKind> = saxpy.parameters.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                ParameterKind::Buffer,
                ParameterKind::Buffer,
                ParameterKind::Value,
                ParameterKind::Lengths
            ]
        );
        assert_eq!(saxpy.parameters[2].type_name, "xh_s2_Params");
        assert_eq!(saxpy.workgroup_size, Some([256, 1, 1]));
        assert_eq!(reflection.kernels["main_"].workgroup_size, Some([8, 4, 2]));
        assert_eq!(reflection.struct_sizes["xh_s2_Params"], 8);
        let native = &reflection.kernels["native"];
        assert_eq!(native.workgroup_size, None);
        assert_eq!(native.parameters.len(), 2);
        assert_eq!(native.parameters[1].kind, ParameterKind::Value);
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

    /// What this module reads from the CUDA C the emitter writes agrees with what the emitter
    /// says it wrote, for every kernel of the repository.
    #[test]
    fn emitted_cuda_c_reads_as_the_emitter_describes_it() {
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
                assert_eq!(
                    kernel.workgroup_size,
                    Some(entry.workgroup_size),
                    "{name}: {}",
                    entry.symbol
                );
                let count = |kind| kernel.parameters.iter().filter(|p| p.kind == kind).count();
                assert_eq!(
                    count(ParameterKind::Buffer),
                    entry.buffers as usize,
                    "{name}: {}",
                    entry.symbol
                );
                assert_eq!(count(ParameterKind::Value), usize::from(entry.scalar_block), "{name}");
                assert_eq!(
                    count(ParameterKind::Lengths),
                    usize::from(entry.buffer_lengths),
                    "{name}"
                );
                if let Some(block) = kernel.parameters.iter().find(|p| p.kind == ParameterKind::Value) {
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
