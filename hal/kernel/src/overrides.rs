//! Pipeline-overridable constants: what a module declares, and values an application gives
//! them when it loads the module.
//!
//! A value is written into the source as the override's initializer (`override block: u32 =
//! 16u;`), so the WGSL that results is an ordinary module whose defaults are the values: it
//! has its own cache entries, every translation resolves it the same way, and a device that
//! takes WGSL as written needs no pipeline constants. The workgroup size, array lengths and
//! code may all depend on overrides.

use std::ops::Range;

use naga::{ScalarKind, TypeInner};

use crate::error::{KernelError, KernelErrorKind};

/// One `override` a module declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideInfo {
    /// Its name.
    pub name: String,
    /// Its `@id(n)`, when it has one (a value may then be given by the id, as `"n"`).
    pub id: Option<u16>,
    /// Its type: `bool`, `i32`, `u32`, `f32` or `f16`.
    pub type_name: String,
    /// Its initializer as written (`8u`, `block * 2u`), or `None` when a value must be given.
    pub default: Option<String>,
}

/// The overrides of `module` (parsed from `source`, before they are resolved).
pub(crate) fn declared(source: &str, module: &naga::Module) -> Vec<OverrideInfo> {
    module
        .overrides
        .iter()
        // naga adds unnamed overrides of its own for override expressions that size arrays
        // (`array<f32, n * n>`); they are not the author's.
        .filter(|(_, declared)| declared.name.is_some())
        .map(|(handle, declared)| {
            let span = module.overrides.get_span(handle).to_range();
            OverrideInfo {
                name: declared.name.clone().unwrap_or_default(),
                id: declared.id,
                type_name: type_name(module, declared.ty),
                default: declared
                    .init
                    .and(span)
                    .and_then(|span| initializer(source, span))
                    .map(|range| source[range].trim().to_owned()),
            }
        })
        .collect()
}

fn type_name(module: &naga::Module, ty: naga::Handle<naga::Type>) -> String {
    use naga::common::wgsl::TypeContext as _;
    module.to_ctx().type_to_string(ty)
}

/// The byte range of the initializer of the declaration that starts at `span.start`: after
/// its `=`, up to its `;`. `None` when it has no `=`.
fn initializer(source: &str, span: Range<usize>) -> Option<Range<usize>> {
    let (equals, end) = declaration_parts(source, span.start)?;
    equals.map(|equals| equals + 1..end)
}

/// From a declaration starting at byte `start`: the byte of its top-level `=`, if any, and
/// of its closing `;`. Comments are skipped (see `rewrite::tokens`).
fn declaration_parts(source: &str, start: usize) -> Option<(Option<usize>, usize)> {
    use crate::rewrite::{tokens, TokenKind::Punct};
    let tokens = tokens(source);
    let first = tokens.iter().position(|t| t.start >= start)?;
    let rest = &tokens[first..];
    let mut depth = 0i32;
    let mut equals = None;
    for (k, token) in rest.iter().enumerate() {
        // Punctuation is one character a token: `==`, `!=`, `<=`, `>=` are two adjacent
        // tokens, and none of them is the declaration's `=`.
        let joined = |other: Option<&crate::rewrite::Token>, at: usize| {
            other.is_some_and(|o| (o.start == at || o.end == at) && matches!(o.kind, Punct(b'=' | b'!' | b'<' | b'>')))
        };
        match token.kind {
            // Override types are scalars, so no `<...>` comes before the `=`.
            Punct(b'(' | b'[') => depth += 1,
            Punct(b')' | b']') => depth -= 1,
            Punct(b'=')
                if depth <= 0
                    && equals.is_none()
                    && !joined(rest.get(k + 1), token.end)
                    && !joined(k.checked_sub(1).and_then(|p| rest.get(p)), token.start) =>
            {
                equals = Some(token.start);
            }
            Punct(b';') if depth <= 0 => return Some((equals, token.start)),
            _ => {}
        }
    }
    None
}

/// `value` as a WGSL literal of the override's type, or why it cannot be one.
fn literal(module: &naga::Module, ty: naga::Handle<naga::Type>, value: f64) -> Result<String, String> {
    let TypeInner::Scalar(scalar) = module.types[ty].inner else {
        return Err("it is not a scalar".to_owned());
    };
    if value.is_nan() || value.is_infinite() {
        return Err(format!("{value} is not a finite number"));
    }
    let integral = |low: f64, high: f64, suffix: &str, what: &str| {
        if value.fract() != 0.0 || value < low || value > high {
            Err(format!("{value} is not {what}"))
        } else {
            Ok(format!("{value}{suffix}"))
        }
    };
    match (scalar.kind, scalar.width) {
        (ScalarKind::Bool, _) => Ok(if value != 0.0 { "true" } else { "false" }.to_owned()),
        // `-2147483648i` would negate a literal that is out of range already.
        (ScalarKind::Sint, 4) if value == f64::from(i32::MIN) => Ok("(-2147483647i - 1i)".to_owned()),
        (ScalarKind::Sint, 4) => integral(f64::from(i32::MIN), f64::from(i32::MAX), "i", "an i32"),
        (ScalarKind::Uint, 4) => integral(0.0, f64::from(u32::MAX), "u", "a u32"),
        (ScalarKind::Float, 4) => {
            let narrow = value as f32;
            if narrow.is_infinite() {
                return Err(format!("{value} is beyond the range of f32"));
            }
            Ok(format!("{narrow:?}f"))
        }
        (ScalarKind::Float, 2) => {
            if value.abs() > 65504.0 {
                return Err(format!("{value} is beyond the range of f16"));
            }
            Ok(format!("{:?}h", value as f32))
        }
        _ => Err(format!("its type {} cannot be overridden", type_name(module, ty))),
    }
}

/// `source` with `values` as the initializers of the overrides they name (by name, or by
/// `@id` written as a number). Every name must be an override of the module, and every value
/// must fit its type. An override that still has no initializer is left for parsing to
/// report.
pub fn apply_overrides(source: &str, values: &[(String, f64)]) -> Result<String, KernelError> {
    if values.is_empty() {
        return Ok(source.to_owned());
    }
    let module = crate::wgsl::front_end(source)?;
    let declared = declared(source, &module);
    let list = || {
        if declared.is_empty() {
            "it declares none".to_owned()
        } else {
            let names: Vec<String> = declared
                .iter()
                .map(|o| match o.id {
                    Some(id) => format!("`{}` (@id({id}))", o.name),
                    None => format!("`{}`", o.name),
                })
                .collect();
            format!("it declares {}", names.join(", "))
        }
    };
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for (name, value) in values {
        let found = module
            .overrides
            .iter()
            .find(|(_, o)| o.name.as_deref() == Some(name.as_str()) || o.id.is_some_and(|id| id.to_string() == *name));
        let Some((handle, declared_override)) = found else {
            return Err(KernelError::new(
                KernelErrorKind::Override,
                format!(
                    "a value was given for override `{name}`, which the module does not declare; {}",
                    list()
                ),
            ));
        };
        let shown = declared_override.name.as_deref().unwrap_or(name);
        let text = literal(&module, declared_override.ty, *value).map_err(|why| {
            KernelError::new(
                KernelErrorKind::Override,
                format!(
                    "override `{shown}` is a {}, but the value given cannot be one: {why}",
                    type_name(&module, declared_override.ty)
                ),
            )
        })?;
        let start = module
            .overrides
            .get_span(handle)
            .to_range()
            .map(|span| span.start)
            .ok_or_else(|| {
                KernelError::new(
                    KernelErrorKind::Internal,
                    format!("override `{shown}` has no source span"),
                )
            })?;
        let (equals, end) = declaration_parts(source, start).ok_or_else(|| {
            KernelError::new(
                KernelErrorKind::Internal,
                format!("the declaration of override `{shown}` has no `;`"),
            )
        })?;
        match equals {
            Some(equals) => edits.push((equals + 1..end, format!(" {text}"))),
            None => edits.push((end..end, format!(" = {text}"))),
        }
    }
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut text = source.to_owned();
    for (range, replacement) in edits {
        text.replace_range(range, &replacement);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "override block:u32=8u; // the tile\n\
                          @id(3) override scale: f32;\n\
                          override enabled = true;\n\
                          override neg: i32 = -(2i);\n\
                          override less = 1 <= 2;\n\
                          @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
                          @compute @workgroup_size(block) fn main() { if enabled { out[0] = scale * f32(neg); } }\n";

    #[test]
    fn declared_overrides_are_listed_with_type_and_default() {
        let module = crate::wgsl::front_end(SOURCE).unwrap_or_else(|e| panic!("{e}"));
        let listed = declared(SOURCE, &module);
        let brief: Vec<(&str, Option<u16>, &str, Option<&str>)> = listed
            .iter()
            .map(|o| (o.name.as_str(), o.id, o.type_name.as_str(), o.default.as_deref()))
            .collect();
        assert_eq!(
            brief,
            [
                ("block", None, "u32", Some("8u")),
                ("scale", Some(3), "f32", None),
                ("enabled", None, "bool", Some("true")),
                ("neg", None, "i32", Some("-(2i)")),
                ("less", None, "bool", Some("1 <= 2")),
            ]
        );
    }

    #[test]
    fn an_array_sized_by_an_override_expression_adds_no_override_of_its_own() {
        let source = "override n: u32 = 8u;\n\
                      @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
                      var<workgroup> tile: array<f32, n * n>;\n\
                      var<workgroup> same: array<f32, 64>;\n\
                      @compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) {\n\
                      tile[i] = f32(i); same[i] = 1.0; workgroupBarrier(); out[i] = tile[63u - i] + same[i]; }\n";
        let module = crate::parse_wgsl(source).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = module.overrides().iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["n"]);
        let text = apply_overrides(source, &[("n".to_owned(), 4.0)]).unwrap_or_else(|e| panic!("{e}"));
        crate::parse_wgsl(&text).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn values_become_initializers_by_name_or_id() {
        let values = [
            ("block".to_owned(), 16.0),
            ("3".to_owned(), 0.5),
            ("enabled".to_owned(), 0.0),
            ("neg".to_owned(), -7.0),
        ];
        let text = apply_overrides(SOURCE, &values).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains("override block:u32= 16u; // the tile"), "{text}");
        assert!(text.contains("@id(3) override scale: f32 = 0.5f;"), "{text}");
        assert!(text.contains("override enabled = false;"), "{text}");
        assert!(text.contains("override neg: i32 = -7i;"), "{text}");
        let lowest =
            apply_overrides(SOURCE, &[("neg".to_owned(), f64::from(i32::MIN))]).unwrap_or_else(|e| panic!("{e}"));
        let lowest = lowest.replace("@id(3) override scale: f32;", "@id(3) override scale: f32 = 1.0;");
        crate::parse_wgsl(&lowest).unwrap_or_else(|e| panic!("{e}\n{lowest}"));
    }

    #[test]
    fn a_value_that_does_not_fit_or_an_unknown_name_is_an_error_naming_it() {
        for (name, value, needles) in [
            ("block", -1.0, &["`block`", "u32"][..]),
            ("block", 1.5, &["`block`", "u32"][..]),
            ("neg", 3e9, &["`neg`", "i32"][..]),
            ("scale", f64::NAN, &["`scale`", "finite"][..]),
            ("blocks", 1.0, &["`blocks`", "`block`", "`scale` (@id(3))"][..]),
        ] {
            let error = apply_overrides(SOURCE, &[(name.to_owned(), value)]).expect_err(name);
            assert_eq!(error.kind(), KernelErrorKind::Override, "{error}");
            for needle in needles {
                assert!(error.message().contains(needle), "{needle}: {error}");
            }
        }
    }
}
