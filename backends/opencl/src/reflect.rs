//! Sizes of the structs an OpenCL C source declares, so that a struct scalar block can be
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

use std::collections::HashMap;

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
