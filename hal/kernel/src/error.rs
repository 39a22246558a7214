//! Kernel errors that point into the WGSL source.
//!
//! naga reports problems as byte spans; a person wants `file:line:column`, the offending line
//! and a caret under the culprit, the way rustc and clang print them. [`KernelError`] carries
//! all of that as data (so tools can consume it) and renders it in [`fmt::Display`].

use std::fmt;

/// What stage of kernel processing failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelErrorKind {
    /// The text is not WGSL: a syntax error, an unknown identifier, a type mismatch found
    /// while lowering, or bytes that are not UTF-8.
    Parse,
    /// The text is WGSL but naga's validator rejects the module (types, uniformity,
    /// capabilities such as `f16` without `enable f16;`).
    Validation,
    /// The module is valid WGSL but does not follow the xhal argument ABI (a binding gap,
    /// a second bind group, a uniform buffer, a texture...).
    Reflection,
    /// A back end could not translate the module to the requested target.
    Translation,
    /// The request itself cannot be served: no variant fits a device, a target is not
    /// implemented yet, an override has no value.
    Unsupported,
    /// A named thing (an entry point) does not exist.
    NotFound,
    /// A pipeline-overridable constant cannot take its value: a value that does not fit its
    /// type, a name or id the module does not declare, or no value and no default.
    Override,
    /// naga panicked on this input. This is a naga bug; the panic was caught so the caller
    /// sees an error instead of a crash.
    Internal,
}

impl KernelErrorKind {
    /// A short lower-case word for the kind, used in rendered messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parse => "parse error",
            Self::Validation => "validation error",
            Self::Reflection => "kernel interface error",
            Self::Translation => "translation error",
            Self::Unsupported => "unsupported",
            Self::NotFound => "not found",
            Self::Override => "override error",
            Self::Internal => "internal error",
        }
    }
}

/// A position in the WGSL source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column, counted in Unicode scalar values (characters), not bytes, so it
    /// matches what an editor shows for non-ASCII lines.
    pub column: u32,
    /// 0-based byte offset of the start of the span in the source.
    pub offset: usize,
    /// Length of the span in bytes (0 when naga gave a point).
    pub length: usize,
}

/// An error from parsing, validating, reflecting or translating a kernel.
///
/// `Display` renders a compiler-style diagnostic:
///
/// ```text
/// kernel.wgsl:3:13: error: no definition in scope for identifier: `foo`
///     |
///   3 |     let x = foo + 1.0;
///     |             ^^^ unknown identifier
///     = note: ...
/// ```
///
/// Rendering never panics, whatever the source held (control characters are replaced, spans
/// are clamped to the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct KernelError {
    // Boxed so `Result<T, KernelError>` stays one pointer wide on the happy path.
    inner: Box<Inner>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: KernelErrorKind,
    message: String,
    location: Option<SourceLocation>,
    snippet: Option<Snippet>,
    notes: Vec<String>,
    file_name: Option<String>,
}

/// The source line an error points at, kept with the caret geometry so `Display` can draw it
/// without the whole source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snippet {
    /// The whole line, control characters replaced.
    line_text: String,
    /// Characters of `line_text` before the caret.
    caret_column: usize,
    /// Characters the caret covers (at least 1).
    caret_width: usize,
    /// What naga said about this span ("unknown identifier"); may be empty.
    label: String,
}

impl KernelError {
    /// An error with no source position.
    pub(crate) fn new(kind: KernelErrorKind, message: impl Into<String>) -> Self {
        let inner = Inner {
            kind,
            message: message.into(),
            location: None,
            snippet: None,
            notes: Vec::new(),
            file_name: None,
        };
        Self { inner: Box::new(inner) }
    }

    /// An error pointing at `span` of `source`, with `label` written under the caret.
    #[cfg(feature = "translate")]
    pub(crate) fn at(
        kind: KernelErrorKind,
        message: impl Into<String>,
        source: &str,
        span: naga::Span,
        label: &str,
    ) -> Self {
        let mut error = Self::new(kind, message);
        if let Some((location, snippet)) = locate(source, span, label) {
            error.inner.location = Some(location);
            error.inner.snippet = Some(snippet);
        }
        error
    }

    /// Adds a note line (`= note: ...`) below the snippet.
    #[cfg(feature = "translate")]
    pub(crate) fn with_note(mut self, note: impl Into<String>) -> Self {
        self.inner.notes.push(note.into());
        self
    }

    /// Names the file the source came from, so the rendered message starts `name:line:col:`.
    /// Without a name, `wgsl` is printed (as naga does).
    pub fn with_file_name(mut self, name: impl Into<String>) -> Self {
        self.inner.file_name = Some(name.into());
        self
    }

    /// What stage failed.
    pub fn kind(&self) -> KernelErrorKind {
        self.inner.kind
    }

    /// The one-line message, without position or snippet.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Where in the source the error is, when it refers to a place in the source.
    pub fn location(&self) -> Option<SourceLocation> {
        self.inner.location
    }

    /// The source line the error points at (control characters replaced), when there is one.
    pub fn snippet(&self) -> Option<&str> {
        self.inner.snippet.as_ref().map(|s| s.line_text.as_str())
    }

    /// What naga wrote under the caret ("unknown identifier"), when it said anything.
    pub fn label(&self) -> Option<&str> {
        self.inner
            .snippet
            .as_ref()
            .map(|s| s.label.as_str())
            .filter(|l| !l.is_empty())
    }

    /// Further explanation: naga's error chain and xhal's hints.
    pub fn notes(&self) -> &[String] {
        &self.inner.notes
    }

    /// The file name set by [`KernelError::with_file_name`].
    pub fn file_name(&self) -> Option<&str> {
        self.inner.file_name.as_deref()
    }

    /// The multi-line, compiler-style text that `Display` prints.
    fn render(&self) -> String {
        use fmt::Write as _;
        let mut out = String::new();
        let file = self.inner.file_name.as_deref().unwrap_or("wgsl");
        // `write!` into a String cannot fail; the results are ignored for that reason.
        match self.inner.location {
            Some(loc) => {
                let _ = write!(out, "{file}:{}:{}: ", loc.line, loc.column);
            }
            None if self.inner.file_name.is_some() => {
                let _ = write!(out, "{file}: ");
            }
            None => {}
        }
        let _ = write!(out, "error: {}", self.inner.message);
        let gutter = self.inner.location.map_or(1, |loc| loc.line.to_string().len());
        if let (Some(loc), Some(snippet)) = (self.inner.location, &self.inner.snippet) {
            let pad = " ".repeat(gutter);
            // Copy tabs from the line into the caret's indentation so the caret lines up in
            // any terminal, whatever its tab width.
            let indent: String = snippet
                .line_text
                .chars()
                .take(snippet.caret_column)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let carets = "^".repeat(snippet.caret_width);
            let _ = write!(
                out,
                "\n{pad} |\n{} | {}\n{pad} | {indent}{carets}",
                loc.line, snippet.line_text
            );
            if !snippet.label.is_empty() {
                let _ = write!(out, " {}", snippet.label);
            }
        }
        for note in &self.inner.notes {
            let pad = " ".repeat(gutter);
            let _ = write!(out, "\n{pad} = note: {note}");
        }
        out
    }
}

/// Finds line, column and the line's text for `span`, clamping everything to `source` so a
/// bad span can never slice out of bounds or inside a UTF-8 sequence.
#[cfg(feature = "translate")]
fn locate(source: &str, span: naga::Span, label: &str) -> Option<(SourceLocation, Snippet)> {
    let range = span.to_range()?;
    let start = floor_char_boundary(source, range.start);
    let end = floor_char_boundary(source, range.end.max(start));
    let before = source.get(..start)?;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let line_end = source.get(start..)?.find('\n').map_or(source.len(), |p| start + p);
    let line_number = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let caret_column = source.get(line_start..start)?.chars().count();
    let caret_width = source.get(start..end.min(line_end))?.chars().count().max(1);
    let line_text = source.get(line_start..line_end)?.trim_end_matches('\r');
    let location = SourceLocation {
        line: u32::try_from(line_number).unwrap_or(u32::MAX),
        column: u32::try_from(caret_column + 1).unwrap_or(u32::MAX),
        offset: start,
        length: end - start,
    };
    let (line_text, caret_column, caret_width) = window(line_text, caret_column, caret_width);
    let snippet = Snippet {
        line_text: sanitize(&line_text),
        caret_column,
        caret_width,
        label: sanitize(label),
    };
    Some((location, snippet))
}

/// Widest snippet shown, in characters. Generated kernels can have lines of many kilobytes;
/// a window around the caret keeps the message readable.
#[cfg(feature = "translate")]
const SNIPPET_WIDTH: usize = 120;

/// Cuts `line` to at most [`SNIPPET_WIDTH`] characters around the caret, marking cut ends
/// with `…`, and moves the caret to match.
#[cfg(feature = "translate")]
fn window(line: &str, caret_column: usize, caret_width: usize) -> (String, usize, usize) {
    let total = line.chars().count();
    if total <= SNIPPET_WIDTH {
        return (line.to_owned(), caret_column, caret_width);
    }
    let first = caret_column
        .saturating_sub(SNIPPET_WIDTH / 2)
        .min(total - SNIPPET_WIDTH);
    let last = first + SNIPPET_WIDTH;
    let mut text: String = line.chars().skip(first).take(SNIPPET_WIDTH).collect();
    let mut caret = caret_column - first;
    if first > 0 {
        text.insert(0, '…');
        caret += 1;
    }
    if last < total {
        text.push('…');
    }
    let width = caret_width.min(last.saturating_sub(caret_column)).max(1);
    (text, caret, width)
}

/// The largest char boundary at or below `index`, within `text`.
#[cfg(feature = "translate")]
fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// Replaces control characters other than tab, so printing a snippet of hostile input cannot
/// drive the terminal (escape sequences) or break the layout. One character in, one out, so
/// caret columns stay valid.
#[cfg(feature = "translate")]
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\t' { '\u{FFFD}' } else { c })
        .collect()
}

#[cfg(all(test, feature = "translate"))]
mod tests {
    use super::*;

    #[test]
    fn renders_position_snippet_and_caret() {
        let source = "fn f() {\n    let x = foo + 1.0;\n}\n";
        let start = source.find("foo").unwrap_or(0) as u32;
        let span = naga::Span::new(start, start + 3);
        let error = KernelError::at(
            KernelErrorKind::Parse,
            "unknown identifier: `foo`",
            source,
            span,
            "here",
        )
        .with_file_name("k.wgsl")
        .with_note("check the spelling");
        assert_eq!(error.location().map(|l| (l.line, l.column)), Some((2, 13)));
        assert_eq!(error.snippet(), Some("    let x = foo + 1.0;"));
        let text = error.to_string();
        assert_eq!(
            text,
            "k.wgsl:2:13: error: unknown identifier: `foo`\n  |\n2 |     let x = foo + 1.0;\n  |             ^^^ here\n  = note: check the spelling"
        );
    }

    #[test]
    fn bad_spans_are_clamped() {
        let source = "é\u{1b}[31m";
        for (a, b) in [(0u32, 1u32), (1, 1), (5, 2), (100, 200), (0, u32::MAX - 1)] {
            let error = KernelError::at(KernelErrorKind::Parse, "m", source, naga::Span::new(a, b), "");
            let text = error.to_string();
            assert!(!text.contains('\u{1b}'), "escape leaked: {text:?}");
        }
        let error = KernelError::at(KernelErrorKind::Parse, "m", source, naga::Span::UNDEFINED, "");
        assert_eq!(error.location(), None);
        assert_eq!(error.to_string(), "error: m");
    }

    #[test]
    fn long_lines_are_windowed_around_the_caret() {
        let source = format!("{}foo{}", "a + ".repeat(500), " + b".repeat(500));
        let start = 2000u32;
        let error = KernelError::at(
            KernelErrorKind::Parse,
            "m",
            &source,
            naga::Span::new(start, start + 3),
            "",
        );
        let snippet = error.snippet().unwrap_or_default();
        assert!(snippet.starts_with('…') && snippet.ends_with('…'), "{snippet}");
        assert!(snippet.chars().count() <= SNIPPET_WIDTH + 2);
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        // The caret sits under `foo` in the windowed line.
        let caret_at = lines[3].chars().position(|c| c == '^').unwrap_or(0);
        let under: String = lines[2].chars().skip(caret_at).take(3).collect();
        assert_eq!(under, "foo", "{text}");
        assert_eq!(error.location().map(|l| l.column), Some(2001));
    }

    #[test]
    fn tabs_keep_the_caret_aligned() {
        let source = "\tlet x = y;";
        let span = naga::Span::new(9, 10);
        let text = KernelError::at(KernelErrorKind::Parse, "m", source, span, "").to_string();
        assert!(text.ends_with("1 | \tlet x = y;\n  | \t        ^"), "{text}");
    }
}
