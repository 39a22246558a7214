//! Reading what C kernel source says about its kernels before a compiler has it: the
//! parameters and workgroup size of each `extern "C" __global__` function of CUDA C or HIP C,
//! the sizes its static asserts state, and the C-family helpers backends share (comments
//! stripped, the buffer-lengths parameter recognised).
//!
//! A CUDA or HIP kernel does not carry a fixed workgroup size the runtime can report, and an
//! xhal launch counts workgroups of a fixed size, so the source states it:
//! - C that [`crate::c`] wrote from WGSL puts the `XH_WORKGROUP_SIZE(X, Y, Z)` marker (a macro
//!   that expands to nothing) before each kernel;
//! - a native HIP kernel declares `__attribute__((reqd_work_group_size(X, Y, Z)))`, which
//!   hiprtc honours. NVRTC ignores that attribute, so in CUDA C it is not read: a CUDA module
//!   states the size in ways the cuda backend reads itself (a device global, PTX `.reqntid`).
//!
//! This reads declarations, not C: no preprocessor, and string literals are assumed not to
//! occur in kernel signatures.

use crate::parameters::ParameterClass;
use crate::Dialect;
use std::collections::HashMap;

/// One parameter of a kernel, as its declaration reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CParameter {
    /// [`ParameterClass::Buffer`] for a pointer, [`ParameterClass::Lengths`] for a by-value
    /// parameter whose type [`is_lengths_type`], [`ParameterClass::Value`] for any other.
    pub class: ParameterClass,
    /// The declaration as written, whitespace collapsed (`xh_s2_Params scalars`).
    pub declaration: String,
    /// For a by-value parameter, its type without qualifiers or `struct`
    /// (`const struct Params p` gives `Params`); for a pointer, the whole declaration.
    pub type_name: String,
}

impl CParameter {
    /// The declaration in backticks, for messages.
    pub fn describe(&self) -> String {
        format!("`{}`", self.declaration)
    }
}

/// One kernel of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CKernel {
    /// The function's name, which C linkage keeps as the symbol.
    pub name: String,
    /// Its parameters, in order.
    pub parameters: Vec<CParameter>,
    /// The workgroup size the source states, where it states one (see the module docs).
    pub workgroup_size: Option<[u32; 3]>,
}

/// Whether a by-value parameter of type `type_name` is the buffer-lengths parameter the C
/// emitter writes (`xh_lengths_<entry> lengths`); the `xh_` prefix is the emitter's own.
pub fn is_lengths_type(type_name: &str) -> bool {
    let name = type_name.trim();
    name.strip_prefix("struct ")
        .unwrap_or(name)
        .trim()
        .starts_with("xh_lengths_")
}

/// `source` without its `//` and `/* */` comments; a block comment becomes one space, so the
/// tokens on either side stay apart. String literals are not recognised (they do not occur in
/// the declarations this module reads).
pub fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
            out.push(' ');
        } else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
    }
    out
}

/// Every `extern "C" __global__` kernel of CUDA C or HIP C `source`, in source order.
///
/// Only C-linkage kernels are read, since only those can be found by name in the compiled
/// module. `dialect` says whether `reqd_work_group_size` counts (HIP C only; see the module
/// docs). Source of another dialect has no `__global__` functions, and gives none.
pub fn kernels(source: &str, dialect: Dialect) -> Vec<CKernel> {
    let text = strip_comments(source);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(position) = text[from..].find("__global__") {
        let start = from + position;
        from = start + "__global__".len();
        let prefix = &text[..start];
        let line_start = prefix.rfind(['\n', ';', '}']).map_or(0, |at| at + 1);
        if !prefix[line_start..].contains("extern \"C\"") {
            continue;
        }
        // Attributes around the return type and the name (`__launch_bounds__(N)`,
        // `__attribute__((...))`) have parentheses of their own: the parameter list is the
        // first parenthesis that follows a plain name.
        let mut cursor = from;
        let open = loop {
            let Some(open) = text[cursor..].find('(').map(|at| cursor + at) else {
                break None;
            };
            let word = text[cursor..open].split_whitespace().last().unwrap_or_default();
            if !matches!(word, "__launch_bounds__" | "__attribute__") {
                break Some(open);
            }
            match matching_parenthesis(&text, open) {
                Some(end) => cursor = end + 1,
                None => break None,
            }
        };
        let Some(open) = open else {
            break;
        };
        let head = &text[from..open];
        let Some(name) = head.split_whitespace().last().map(str::to_string) else {
            continue;
        };
        let Some(close) = matching_parenthesis(&text, open) else {
            break;
        };
        let parameters = split_parameters(&text[open + 1..close]);
        let attribute_size = |text: &str| match dialect {
            Dialect::HipC => sized_call(text, "reqd_work_group_size"),
            _ => None,
        };
        let workgroup_size = attribute_size(&text[line_start..open])
            .or_else(|| attribute_size(head))
            .or_else(|| sized_call(&text[line_start..open], "XH_WORKGROUP_SIZE"));
        found.push(CKernel {
            name,
            parameters,
            workgroup_size,
        });
        from = close;
    }
    found
}

/// The index of the parenthesis that closes the one at `open`.
fn matching_parenthesis(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// The parameters of a parameter list (without its parentheses); commas inside parentheses,
/// template arguments or array bounds do not split.
fn split_parameters(list: &str) -> Vec<CParameter> {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return Vec::new();
    }
    let mut parameters = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in list.chars().chain(std::iter::once(',')) {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                let declaration = current.split_whitespace().collect::<Vec<_>>().join(" ");
                current.clear();
                parameters.push(classify(declaration));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parameters
}

fn classify(declaration: String) -> CParameter {
    if declaration.contains('*') {
        return CParameter {
            class: ParameterClass::Buffer,
            type_name: declaration.clone(),
            declaration,
        };
    }
    // `const struct Params scalars` → `Params`; the last word is the parameter's name.
    let words: Vec<&str> = declaration
        .split_whitespace()
        .filter(|word| !matches!(*word, "const" | "volatile" | "struct" | "__restrict__"))
        .collect();
    let type_name = match words.as_slice() {
        [] => String::new(),
        [only] => only.to_string(),
        [type_words @ .., _name] => type_words.join(" "),
    };
    CParameter {
        class: if is_lengths_type(&type_name) {
            ParameterClass::Lengths
        } else {
            ParameterClass::Value
        },
        type_name,
        declaration,
    }
}

/// Three positive integers in parentheses after `keyword` in `text` (`XH_WORKGROUP_SIZE(64,
/// 1, 1)`; a `u` suffix is allowed).
fn sized_call(text: &str, keyword: &str) -> Option<[u32; 3]> {
    let at = text.find(keyword)?;
    let rest = &text[at + keyword.len()..];
    let open = rest.find('(')?;
    let close = rest.find(')')?;
    let numbers: Vec<u32> = rest[open + 1..close]
        .split(',')
        .map(|part| part.trim().trim_end_matches(['u', 'U']).parse().ok())
        .collect::<Option<_>>()?;
    <[u32; 3]>::try_from(numbers).ok().filter(|size| !size.contains(&0))
}

/// `sizeof` facts the source states outside comments (`static_assert(sizeof(T) == N, ...)`,
/// or the C emitter's `XH_STATIC_ASSERT`): the size of each such type by name (`struct T`
/// counts as `T`).
pub fn asserted_sizes(source: &str) -> HashMap<String, u64> {
    let source = strip_comments(source);
    let mut sizes = HashMap::new();
    for (at, _) in source.match_indices("sizeof(") {
        let rest = &source[at + "sizeof(".len()..];
        let Some(close) = rest.find(')') else {
            continue;
        };
        let type_name = rest[..close].trim().trim_start_matches("struct ").trim();
        let after = rest[close + 1..].trim_start();
        let Some(after) = after.strip_prefix("==") else {
            continue;
        };
        let digits: String = after.trim_start().chars().take_while(char::is_ascii_digit).collect();
        if let Ok(size) = digits.parse() {
            sizes.insert(type_name.to_string(), size);
        }
    }
    sizes
}

#[cfg(all(test, feature = "translate"))]
#[path = "../../../tests/support/repository_kernels.rs"]
mod repository;

#[cfg(test)]
mod tests {
    use super::*;
    use ParameterClass::{Buffer, Lengths, Value};

    fn classes(kernel: &CKernel) -> Vec<ParameterClass> {
        kernel.parameters.iter().map(|parameter| parameter.class).collect()
    }

    const EMITTED_HIP: &str = r#"
typedef struct xh_s2_Params { xh_f32 a_; xh_u32 n_; } xh_s2_Params;
XH_STATIC_ASSERT(sizeof(xh_s2_Params) == 8, "WGSL layout");
__device__ void helper(int x) {}
typedef struct xh_lengths_saxpy { xh_u64 bytes[2]; } xh_lengths_saxpy;
XH_WORKGROUP_SIZE(16, 8, 1) extern "C" __global__ void __launch_bounds__(128) saxpy(XH_GLOBAL xh_f32* buffer0, XH_GLOBAL xh_f32* buffer1, xh_s2_Params scalars, xh_lengths_saxpy lengths) {
    xh_ctx c = {};
    xh_ep_saxpy(&c, gid, nwg);
}
XH_WORKGROUP_SIZE(64, 1, 1) extern "C" __global__ void __launch_bounds__(64) main_(XH_GLOBAL xh_u32* buffer0) {
}
"#;

    #[test]
    fn emitted_kernels_are_read_with_their_parameters_and_sizes() {
        let kernels = kernels(EMITTED_HIP, Dialect::HipC);
        assert_eq!(kernels.len(), 2);
        let saxpy = &kernels[0];
        assert_eq!(saxpy.name, "saxpy");
        assert_eq!(saxpy.workgroup_size, Some([16, 8, 1]));
        assert_eq!(classes(saxpy), [Buffer, Buffer, Value, Lengths]);
        assert_eq!(saxpy.parameters[2].type_name, "xh_s2_Params");
        assert_eq!(saxpy.parameters[0].describe(), "`XH_GLOBAL xh_f32* buffer0`");
        assert_eq!(kernels[1].name, "main_");
        assert_eq!(kernels[1].workgroup_size, Some([64, 1, 1]));
        assert_eq!(asserted_sizes(EMITTED_HIP).get("xh_s2_Params"), Some(&8));
    }

    #[test]
    fn native_kernels_declare_their_size_with_an_attribute() {
        let source = r#"
// extern "C" __global__ void commented(int* x) {}
extern "C" __global__ __attribute__((reqd_work_group_size(32, 2, 1))) void scale(float* data, const struct P p) {
    data[threadIdx.x] *= p.factor;
}
extern "C" __global__ void sizeless(void) {
}
__global__ void mangled(float* x) {}
"#;
        let kernels = kernels(source, Dialect::HipC);
        assert_eq!(kernels.len(), 2, "{kernels:?}");
        assert_eq!(kernels[0].name, "scale");
        assert_eq!(kernels[0].workgroup_size, Some([32, 2, 1]));
        assert_eq!(kernels[0].parameters[1].type_name, "P");
        assert_eq!(kernels[0].parameters[1].class, Value);
        assert_eq!(kernels[1].name, "sizeless");
        assert_eq!(kernels[1].parameters, vec![]);
        assert_eq!(kernels[1].workgroup_size, None);
        // NVRTC ignores the attribute, so CUDA C does not read it.
        let cuda = super::kernels(source, Dialect::CudaC);
        assert_eq!(cuda[0].name, "scale");
        assert_eq!(cuda[0].workgroup_size, None);
    }

    const EMITTED_CUDA: &str = r#"
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
        let kernels = kernels(EMITTED_CUDA, Dialect::CudaC);
        let by_name = |name: &str| {
            kernels
                .iter()
                .find(|kernel| kernel.name == name)
                .unwrap_or_else(|| panic!("no kernel `{name}` in {kernels:?}"))
        };
        let saxpy = by_name("saxpy");
        assert_eq!(classes(saxpy), [Buffer, Buffer, Value, Lengths]);
        assert_eq!(saxpy.parameters[2].type_name, "xh_s2_Params");
        assert_eq!(saxpy.workgroup_size, Some([256, 1, 1]));
        assert_eq!(by_name("main_").workgroup_size, Some([8, 4, 2]));
        assert_eq!(asserted_sizes(EMITTED_CUDA)["xh_s2_Params"], 8);
        let native = by_name("native");
        assert_eq!(native.workgroup_size, None);
        assert_eq!(native.parameters.len(), 2);
        assert_eq!(native.parameters[1].class, Value);
        assert_eq!(native.parameters[1].type_name, "unsigned");
    }

    #[test]
    fn the_lengths_parameter_is_known_by_its_type() {
        assert!(is_lengths_type("xh_lengths_main_"));
        assert!(is_lengths_type("struct xh_lengths_fill"));
        assert!(!is_lengths_type("xh_s1_Params"));
        assert!(!is_lengths_type("lengths"));
    }

    #[test]
    fn comments_are_stripped_and_keep_tokens_apart() {
        assert_eq!(strip_comments("a // b\nc"), "a \nc");
        assert_eq!(strip_comments("int/* x */y; /* open"), "int y;  ");
        assert_eq!(strip_comments("// only"), "");
        let asserted = "// static_assert(sizeof(A) == 4);\nstatic_assert(sizeof(struct B) == 12, \"\");";
        let sizes = asserted_sizes(asserted);
        assert_eq!(sizes.get("A"), None);
        assert_eq!(sizes.get("B"), Some(&12));
    }

    /// `xh_u32`, `xh_f32x4`: the emitter's scalar and vector types.
    #[cfg(feature = "translate")]
    fn is_scalar_or_vector(type_name: &str) -> bool {
        let Some(name) = type_name.strip_prefix("xh_") else {
            return false;
        };
        let element = match name.split_once('x') {
            Some((element, "2" | "3" | "4")) => element,
            Some(_) => return false,
            None => name,
        };
        matches!(element, "bool" | "i32" | "u32" | "f16" | "f32" | "i64" | "u64" | "f64")
    }

    /// What this module reads from the CUDA C and HIP C the emitter writes agrees with what
    /// the emitter says it wrote, for every kernel of the repository.
    #[test]
    #[cfg(feature = "translate")]
    fn emitted_c_reads_as_the_emitter_describes_it() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let kernels = super::repository::repository_kernels(&repo, &["examples/kernels", "conformance/src/catalogue"]);
        for dialect in [Dialect::CudaC, Dialect::HipC] {
            let mut checked = 0;
            for (name, wgsl) in &kernels {
                let Ok(module) = crate::parse_wgsl(wgsl) else {
                    continue;
                };
                let Ok(source) = module.to_c(dialect, None) else {
                    continue;
                };
                let read = super::kernels(&source.text, dialect);
                let sizes = asserted_sizes(&source.text);
                for entry in &source.entry_points {
                    let what = format!("{name}: {} ({})", entry.symbol, dialect.name());
                    let kernel = read
                        .iter()
                        .find(|kernel| kernel.name == entry.symbol)
                        .unwrap_or_else(|| panic!("{what}: kernel not found"));
                    assert_eq!(kernel.workgroup_size, Some(entry.workgroup_size), "{what}");
                    let count = |class| kernel.parameters.iter().filter(|p| p.class == class).count();
                    assert_eq!(count(Buffer), entry.buffers as usize, "{what}");
                    assert_eq!(count(Value), usize::from(entry.scalar_block), "{what}");
                    assert_eq!(count(Lengths), usize::from(entry.buffer_lengths), "{what}");
                    let order = crate::parameters::check_parameter_order(
                        &kernel.name,
                        kernel.parameters.iter().map(|p| (p.class, p.describe())),
                    );
                    assert!(order.is_ok(), "{what}: {order:?}");
                    if let Some(block) = kernel.parameters.iter().find(|p| p.class == Value) {
                        // A struct block is sized by the emitter's static assert; a single
                        // scalar or vector by its type, which a backend knows.
                        let sized = sizes.contains_key(&block.type_name) || is_scalar_or_vector(&block.type_name);
                        assert!(sized, "{what}: scalar block type `{}` has no size", block.type_name);
                    }
                    checked += 1;
                }
            }
            assert!(checked >= 50, "{}: only {checked} entry points checked", dialect.name());
        }
    }
}
