//! A lexical guard against inputs that would overflow naga's stack.
//!
//! naga's WGSL parser caps bracket nesting (200 levels) and brace nesting (127), but binary
//! and unary operator chains (`x + x + x ...`, `- - - x`), swizzle chains and `else if`
//! chains are parsed in loops and then lowered, validated and written by recursive code with
//! no limit. A stack overflow aborts the process; it cannot be caught like a panic. So before
//! naga sees the text, this scan bounds those shapes from above, and `parse_wgsl` refuses
//! text beyond the bounds with an ordinary error. The bounds are far above anything written
//! by hand, and together fit in the stack naga runs on (see `NAGA_STACK_BYTES`) with a wide
//! margin even in unoptimised builds (measured: about 13 KiB per operator level and 50 KiB
//! per `else if` level in a debug build).

use crate::error::{KernelError, KernelErrorKind};

/// Most operator characters in one expression path: counted per bracket level between
/// commas, summed over the open brackets. Each operator token counts once or twice
/// (`==` is two characters), so the true depth is at most this.
pub(crate) const MAX_EXPRESSION_DEPTH: usize = 2048;

/// Most nested blocks, counting each `else if` of a chain as one more level (that is how
/// naga represents it: the next `if` inside the previous one's `else`).
pub(crate) const MAX_BLOCK_DEPTH: usize = 512;

/// Checks `source` against [`MAX_EXPRESSION_DEPTH`] and [`MAX_BLOCK_DEPTH`].
///
/// The scan over-approximates (every `<` of a template counts as an operator, a `.` in a
/// float literal counts), which only ever makes it stricter, never lets a deep input pass.
pub(crate) fn check_nesting(source: &str) -> Result<(), KernelError> {
    let bytes = source.as_bytes();
    let mut i = 0;
    // Extra levels from `else if` chains, one entry per open brace.
    let mut blocks: Vec<usize> = Vec::new();
    let mut block_depth = 0usize;
    // Operators seen per open bracket level since the last comma; the bottom entry is the
    // statement level.
    let mut levels: Vec<usize> = vec![0];
    let mut expression_depth = 0usize;
    let mut after_else = false;
    while i < bytes.len() {
        let byte = bytes[i];
        let next = bytes.get(i + 1).copied();
        if byte == b'/' && next == Some(b'/') {
            i = bytes[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| i + p);
            continue;
        }
        if byte == b'/' && next == Some(b'*') {
            i = skip_block_comment(bytes, i);
            continue;
        }
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80 {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80) {
                i += 1;
            }
            let word = &bytes[start..i];
            if word == b"if" && after_else {
                if let Some(extra) = blocks.last_mut() {
                    *extra += 1;
                }
                block_depth += 1;
                if block_depth > MAX_BLOCK_DEPTH {
                    return Err(too_deep(
                        source,
                        start,
                        "blocks (`else if` chains count one level per `else if`)",
                        MAX_BLOCK_DEPTH,
                    ));
                }
            }
            after_else = word == b"else";
            continue;
        }
        if byte.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        after_else = false;
        match byte {
            b'{' => {
                blocks.push(0);
                block_depth += 1;
                if block_depth > MAX_BLOCK_DEPTH {
                    return Err(too_deep(source, i, "blocks", MAX_BLOCK_DEPTH));
                }
                levels = vec![0];
                expression_depth = 0;
            }
            b'}' => {
                if let Some(extra) = blocks.pop() {
                    block_depth = block_depth.saturating_sub(1 + extra);
                }
                levels = vec![0];
                expression_depth = 0;
            }
            b';' => {
                levels = vec![0];
                expression_depth = 0;
            }
            b'(' | b'[' => levels.push(0),
            b')' | b']' if levels.len() > 1 => {
                expression_depth -= levels.pop().unwrap_or(0);
            }
            b',' => {
                if let Some(top) = levels.last_mut() {
                    expression_depth -= *top;
                    *top = 0;
                }
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'!' | b'~' | b'<' | b'>' | b'=' | b'.' => {
                if let Some(top) = levels.last_mut() {
                    *top += 1;
                }
                expression_depth += 1;
                if expression_depth > MAX_EXPRESSION_DEPTH {
                    return Err(too_deep(source, i, "operators in one expression", MAX_EXPRESSION_DEPTH));
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Index just past the block comment starting at `start` (WGSL block comments nest).
fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied()) {
            (b'/', Some(b'*')) => {
                depth += 1;
                i += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

fn too_deep(source: &str, offset: usize, what: &str, limit: usize) -> KernelError {
    let start = u32::try_from(offset).unwrap_or(u32::MAX);
    KernelError::at(
        KernelErrorKind::Unsupported,
        format!("kernel nested too deeply: more than {limit} levels of {what}"),
        source,
        naga::Span::new(start, start.saturating_add(1)),
        "limit reached here",
    )
    .with_note(
        "naga handles nesting recursively, and xhal bounds it so no input can overflow the stack; \
         split long expressions with `let`, and long `else if` chains with `switch`",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_code_passes() {
        let table = format!("const t = array<i32, 5000>({});", vec!["-1 + 2"; 5000].join(", "));
        assert!(check_nesting(&table).is_ok());
        let commented = format!(
            "/* {} /* nested */ */ fn f() {{}} // {}",
            "+".repeat(10_000),
            "-".repeat(10_000)
        );
        assert!(check_nesting(&commented).is_ok());
        let statements = "let x = a + b;\n".repeat(10_000);
        assert!(check_nesting(&format!("fn f() {{ {statements} }}")).is_ok());
    }

    #[test]
    fn long_chains_are_refused() {
        let sum = format!(
            "fn f(x: i32) -> i32 {{ return x{}; }}",
            " + x".repeat(MAX_EXPRESSION_DEPTH + 1)
        );
        let error = check_nesting(&sum).err();
        assert_eq!(error.map(|e| e.kind()), Some(KernelErrorKind::Unsupported));
        let chain = format!(
            "fn f(x: i32) {{ if x == 0 {{}} {} }}",
            "else if x == 1 {} ".repeat(MAX_BLOCK_DEPTH)
        );
        assert!(check_nesting(&chain).is_err());
        let swizzles = format!(
            "fn f(v: vec2<f32>) -> f32 {{ return v{}.x; }}",
            ".xy".repeat(MAX_EXPRESSION_DEPTH)
        );
        assert!(check_nesting(&swizzles).is_err());
    }
}
