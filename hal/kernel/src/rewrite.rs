//! WGSL as a device takes it, written from the author's own source.
//!
//! When a module's bindings are not already the positional ABI (gaps, other groups,
//! `var<uniform>`), a device that takes WGSL gets the source with only those declarations
//! changed: each buffer's `@group`/`@binding` arguments become `0` and its argument position,
//! and `var<uniform>` becomes `var<storage, read>`. Everything else stays as written, so the
//! driver's messages point at the author's lines, and explicit layouts (`@align`, `@size`),
//! which naga's WGSL writer does not write, survive.

use std::ops::Range;

use crate::error::{KernelError, KernelErrorKind};

/// One buffer declaration to change, located by the span naga gives its `var ...;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BindingRewrite {
    /// The declaration's byte range in the source, from `var` on.
    pub(crate) declaration: Range<usize>,
    pub(crate) group: u32,
    pub(crate) binding: u32,
    /// Whether the numbers differ from the declared ones.
    pub(crate) renumbers: bool,
    /// Whether it is a `var<uniform>`, which becomes `var<storage, read>` for a device that
    /// does not take uniforms.
    pub(crate) uniform: bool,
}

/// Whether a device needs `rewrites` applied: some binding moves, or a uniform must be lowered.
pub(crate) fn needed(rewrites: &[BindingRewrite], native_uniforms: bool) -> bool {
    rewrites.iter().any(|r| r.renumbers || (r.uniform && !native_uniforms))
}

/// A token of WGSL: its byte range and its first character's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: TokenKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Word,
    Number,
    Punct(u8),
}

/// Splits `source` into words, numbers and single punctuation characters, skipping white
/// space and comments (line comments and nested block comments, as WGSL has them). Good
/// enough to find attributes and address spaces; it does not validate anything.
pub(crate) fn tokens(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            let mut depth = 0usize;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80) {
                i += 1;
            }
            out.push(Token {
                start,
                end: i,
                kind: TokenKind::Word,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push(Token {
                start,
                end: i,
                kind: TokenKind::Number,
            });
        } else {
            out.push(Token {
                start: i,
                end: i + 1,
                kind: TokenKind::Punct(c),
            });
            i += 1;
        }
    }
    out
}

/// An attribute before a declaration: its name and the byte range inside its parentheses.
struct Attribute<'s> {
    name: &'s str,
    arguments: Option<Range<usize>>,
}

/// The attributes written right before token `first` (the declaration's keyword).
fn attributes_before<'s>(source: &'s str, tokens: &[Token], first: usize) -> Vec<Attribute<'s>> {
    let text = |t: &Token| &source[t.start..t.end];
    let mut found = Vec::new();
    let mut i = first;
    while let Some(last) = i.checked_sub(1) {
        match tokens[last].kind {
            TokenKind::Punct(b')') => {
                let mut depth = 0usize;
                let mut open = None;
                for k in (0..=last).rev() {
                    match tokens[k].kind {
                        TokenKind::Punct(b')') => depth += 1,
                        TokenKind::Punct(b'(') => {
                            depth -= 1;
                            if depth == 0 {
                                open = Some(k);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let Some(open) = open else { break };
                let is_attribute = open >= 2
                    && tokens[open - 1].kind == TokenKind::Word
                    && tokens[open - 2].kind == TokenKind::Punct(b'@');
                if !is_attribute {
                    break;
                }
                found.push(Attribute {
                    name: text(&tokens[open - 1]),
                    arguments: Some(tokens[open].end..tokens[last].start),
                });
                i = open - 2;
            }
            TokenKind::Word if last >= 1 && tokens[last - 1].kind == TokenKind::Punct(b'@') => {
                found.push(Attribute {
                    name: text(&tokens[last]),
                    arguments: None,
                });
                i = last - 1;
            }
            _ => break,
        }
    }
    found
}

/// `source` with every rewrite applied, uniforms lowered unless `native_uniforms`.
pub(crate) fn apply(source: &str, rewrites: &[BindingRewrite], native_uniforms: bool) -> Result<String, KernelError> {
    let tokens = tokens(source);
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let missing = |what: &str, at: &Range<usize>| {
        KernelError::new(
            KernelErrorKind::Internal,
            format!(
                "cannot rewrite the declaration at bytes {}..{} of the source: {what}",
                at.start, at.end
            ),
        )
    };
    for rewrite in rewrites {
        let at = &rewrite.declaration;
        let first = tokens
            .iter()
            .position(|t| t.start == at.start)
            .ok_or_else(|| missing("no token starts there", at))?;
        let attributes = attributes_before(source, &tokens, first);
        for (name, value) in [("group", rewrite.group), ("binding", rewrite.binding)] {
            let arguments = attributes
                .iter()
                .find(|a| a.name == name)
                .and_then(|a| a.arguments.clone())
                .ok_or_else(|| missing(&format!("no @{name}(...) before it"), at))?;
            edits.push((arguments, value.to_string()));
        }
        if rewrite.uniform && !native_uniforms {
            // `var` `<` `uniform` `>`
            let space = tokens
                .get(first + 2)
                .filter(|t| tokens[first + 1].kind == TokenKind::Punct(b'<') && &source[t.start..t.end] == "uniform")
                .ok_or_else(|| missing("it is not `var<uniform>`", at))?;
            edits.push((space.start..space.end, "storage, read".to_owned()));
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

    fn rewrite(source: &str, needle: &str, group: u32, binding: u32, uniform: bool) -> String {
        let start = source.find(needle).expect("the declaration");
        let rewrites = [BindingRewrite {
            declaration: start..start + needle.len(),
            group,
            binding,
            renumbers: true,
            uniform,
        }];
        assert!(needed(&rewrites, true));
        apply(source, &rewrites, false).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_uniform_in_its_place_needs_no_rewrite_for_a_device_that_takes_uniforms() {
        let rewrites = [BindingRewrite {
            declaration: 0..1,
            group: 0,
            binding: 0,
            renumbers: false,
            uniform: true,
        }];
        assert!(!needed(&rewrites, true));
        assert!(needed(&rewrites, false));
    }

    #[test]
    fn attributes_are_found_across_lines_and_comments() {
        let source = "@group( 3 ) // the set\n  @binding(/* slot */ 7)\n var<uniform> p: P;";
        let written = rewrite(source, "var<uniform> p: P;", 0, 1, true);
        assert_eq!(
            written,
            "@group(0) // the set\n  @binding(1)\n var<storage, read> p: P;"
        );
    }

    #[test]
    fn only_the_declaration_named_changes() {
        let source = "@group(1) @binding(0) var<storage, read> a: array<u32>;\n\
                      @group(0) @binding(0) var<storage, read_write> b: array<u32>;\n";
        let written = rewrite(source, "var<storage, read> a: array<u32>;", 0, 1, false);
        assert_eq!(
            written,
            "@group(0) @binding(1) var<storage, read> a: array<u32>;\n\
             @group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        );
    }

    #[test]
    fn a_declaration_without_its_attributes_is_an_error() {
        let source = "var<storage, read> a: array<u32>;";
        let error = apply(
            source,
            &[BindingRewrite {
                declaration: 0..source.len(),
                group: 0,
                binding: 0,
                renumbers: true,
                uniform: false,
            }],
            false,
        )
        .expect_err("no attributes");
        assert!(error.message().contains("@group"), "{error}");
    }
}
