//! Reflection from HIP C source: what the source says about its kernels before it is
//! compiled, each `extern "C" __global__` function's parameters and its workgroup size. The
//! compiled code object's metadata ([`crate::code_object`]) tells the rest; `crate::module`
//! puts the two together.
//!
//! HIP kernels do not carry a fixed workgroup size the runtime can report, and an xhal launch
//! counts workgroups of a fixed size. The size comes from, in order:
//! - `__attribute__((reqd_work_group_size(X, Y, Z)))` on the kernel (also found in the
//!   compiled code object's metadata as `.reqd_workgroup_size`);
//! - for HIP C that `xhal_kernel::c` wrote from WGSL, the `XH_WORKGROUP_SIZE(X, Y, Z)` marker
//!   the emitter puts before each kernel (a macro that expands to nothing).

/// How a parameter is passed, by the argument ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParameterKind {
    /// A pointer: a buffer argument.
    Buffer,
    /// A by-value parameter: the scalar block.
    Value,
    /// The by-value buffer-lengths parameter of a kernel emitted from WGSL (its type is a
    /// struct named `xh_lengths_*`), filled by the backend.
    Lengths,
}

/// One parameter as the source declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceParameter {
    pub(crate) kind: ParameterKind,
    /// The declaration as written (`xh_s2_Params scalars`), for messages.
    pub(crate) declaration: String,
    /// The type's name (`xh_s2_Params`), for by-value parameters.
    pub(crate) type_name: String,
}

/// One kernel of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceKernel {
    pub(crate) name: String,
    pub(crate) parameters: Vec<SourceParameter>,
    pub(crate) workgroup_size: Option<[u32; 3]>,
}

/// Whether a by-value parameter of type `type_name` is the buffer-lengths parameter the C
/// emitter writes (`xh_lengths_<entry> lengths`); the `xh_` prefix is the emitter's own.
pub(crate) fn is_lengths_type(type_name: &str) -> bool {
    let name = type_name.trim();
    name.strip_prefix("struct ")
        .unwrap_or(name)
        .trim()
        .starts_with("xh_lengths_")
}

/// Removes `//` and `/* */` comments (string literals do not occur in kernel signatures).
fn strip_comments(source: &str) -> String {
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

/// Every `extern "C" __global__ void NAME(...)` kernel of `source`.
pub(crate) fn kernels(source: &str) -> Vec<SourceKernel> {
    let text = strip_comments(source);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(position) = text[from..].find("__global__") {
        let start = from + position;
        from = start + "__global__".len();
        let prefix = &text[..start];
        // Only C-linkage kernels can be found by name in the code object.
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
        let workgroup_size = attribute_size(&text[line_start..open])
            .or_else(|| attribute_size(head))
            .or_else(|| marked_size(&text[line_start..open]));
        found.push(SourceKernel {
            name,
            parameters,
            workgroup_size,
        });
        from = close;
    }
    found
}

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

fn split_parameters(list: &str) -> Vec<SourceParameter> {
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

fn classify(declaration: String) -> SourceParameter {
    if declaration.contains('*') {
        return SourceParameter {
            kind: ParameterKind::Buffer,
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
    SourceParameter {
        kind: if is_lengths_type(&type_name) {
            ParameterKind::Lengths
        } else {
            ParameterKind::Value
        },
        type_name,
        declaration,
    }
}

/// `reqd_work_group_size(X, Y, Z)` in `text`.
fn attribute_size(text: &str) -> Option<[u32; 3]> {
    sized_call(text, "reqd_work_group_size")
}

/// The `XH_WORKGROUP_SIZE(X, Y, Z)` marker the C emitter writes before each kernel.
fn marked_size(text: &str) -> Option<[u32; 3]> {
    sized_call(text, "XH_WORKGROUP_SIZE")
}

/// Three positive integers in parentheses after `keyword` in `text`.
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

/// `sizeof` facts the source states (`static_assert(sizeof(T) == N, ...)`, or the C
/// emitter's `XH_STATIC_ASSERT`): the size of each such type by name.
pub(crate) fn asserted_sizes(source: &str) -> std::collections::HashMap<String, u64> {
    let mut sizes = std::collections::HashMap::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    const EMITTED: &str = r#"
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
        let kernels = kernels(EMITTED);
        assert_eq!(kernels.len(), 2);
        let saxpy = &kernels[0];
        assert_eq!(saxpy.name, "saxpy");
        assert_eq!(saxpy.workgroup_size, Some([16, 8, 1]));
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
        assert_eq!(kernels[1].name, "main_");
        assert_eq!(kernels[1].workgroup_size, Some([64, 1, 1]));
        assert_eq!(asserted_sizes(EMITTED).get("xh_s2_Params"), Some(&8));
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
        let kernels = kernels(source);
        assert_eq!(kernels.len(), 2, "{kernels:?}");
        assert_eq!(kernels[0].name, "scale");
        assert_eq!(kernels[0].workgroup_size, Some([32, 2, 1]));
        assert_eq!(kernels[0].parameters[1].type_name, "P");
        assert_eq!(kernels[0].parameters[1].kind, ParameterKind::Value);
        assert_eq!(kernels[1].name, "sizeless");
        assert_eq!(kernels[1].parameters, vec![]);
        assert_eq!(kernels[1].workgroup_size, None);
    }

    #[test]
    fn the_lengths_parameter_is_known_by_its_type() {
        assert!(is_lengths_type("xh_lengths_main_"));
        assert!(is_lengths_type("struct xh_lengths_fill"));
        assert!(!is_lengths_type("xh_s1_Params"));
        assert!(!is_lengths_type("lengths"));
    }
}
