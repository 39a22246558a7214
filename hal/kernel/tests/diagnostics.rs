//! Errors point at the right place, read well, and no input crashes the parser.

use xhal_kernel::{parse_wgsl, KernelError, KernelErrorKind};

fn error_of(source: &str) -> KernelError {
    match parse_wgsl(source) {
        Ok(_) => panic!("expected an error for:\n{source}"),
        Err(e) => e,
    }
}

fn line_col(error: &KernelError) -> (u32, u32) {
    let loc = error.location().unwrap_or_else(|| panic!("no location in: {error}"));
    (loc.line, loc.column)
}

#[test]
fn syntax_error_has_line_column_and_snippet() {
    let source = "@compute @workgroup_size(1)\nfn main() {\n    let x = ;\n}\n";
    let error = error_of(source);
    assert_eq!(error.kind(), KernelErrorKind::Parse);
    assert_eq!(line_col(&error), (3, 13));
    assert_eq!(error.snippet(), Some("    let x = ;"));
    assert!(error.message().contains("expected expression"), "{error}");
    let text = error.with_file_name("k.wgsl").to_string();
    assert!(text.starts_with("k.wgsl:3:13: error: expected expression"), "{text}");
    assert!(text.contains("3 |     let x = ;\n  |             ^"), "{text}");
}

#[test]
fn type_error_points_at_the_declaration() {
    let source = "@compute @workgroup_size(1)\nfn main() {\n    let x: u32 = 1.5;\n}\n";
    let error = error_of(source);
    assert_eq!(line_col(&error), (3, 9));
    assert_eq!(error.snippet(), Some("    let x: u32 = 1.5;"));
    assert!(error.message().contains("u32"), "{error}");
}

#[test]
fn mismatched_store_points_at_the_target_and_notes_the_value() {
    let source = "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
                  @compute @workgroup_size(1)\n\
                  fn main() {\n    a[0] = 1u;\n}\n";
    let error = error_of(source);
    assert_eq!(line_col(&error), (4, 5));
    assert!(error.notes().iter().any(|n| n.starts_with("4:12:")), "{error}");
}

#[test]
fn unknown_identifier_is_underlined() {
    let source = "@compute @workgroup_size(1)\nfn main() {\n    let y = 2.0;\n    let x = foo + y;\n}\n";
    let error = error_of(source);
    assert_eq!(line_col(&error), (4, 13));
    assert_eq!(error.label(), Some("unknown identifier"));
    assert!(error.message().contains("`foo`"), "{error}");
    assert!(error.to_string().contains("^^^ unknown identifier"), "{error}");
}

#[test]
fn columns_count_characters_not_bytes() {
    // `é` is two bytes; the column of `foo` is still 15 in an editor.
    let source = "fn f() { /*é*/ foo(); }";
    let error = error_of(source);
    assert_eq!(line_col(&error), (1, 16));
    assert_eq!(error.location().map(|l| l.offset), Some(16));
}

#[test]
fn validation_error_names_the_capability_and_points_at_the_use() {
    let source = "@compute @workgroup_size(64)\nfn main() {\n    let x = subgroupAdd(1u);\n}\n";
    let error = error_of(source);
    assert_eq!(error.kind(), KernelErrorKind::Validation);
    assert_eq!(line_col(&error), (3, 13));
    assert!(error.message().contains("SUBGROUP"), "{error}");
    assert!(error.notes().iter().any(|n| n.contains("main")), "{error}");
}

#[test]
fn immediate_f16_is_a_validation_error_at_the_declaration() {
    let source = "enable f16;\nvar<immediate> h: f16;\n@compute @workgroup_size(1)\nfn main() {\n    _ = h;\n}\n";
    let error = error_of(source);
    assert_eq!(error.kind(), KernelErrorKind::Validation, "{error}");
    assert_eq!(line_col(&error).0, 2, "{error}");
    assert_eq!(error.snippet(), Some("var<immediate> h: f16;"));
}

#[test]
fn f16_without_enable_explains_the_fix() {
    let error = error_of("fn f() { var x: f16 = 1.0h; }");
    assert_eq!(line_col(&error), (1, 23));
    assert!(error.notes().iter().any(|n| n.contains("enable f16;")), "{error}");
}

#[test]
fn missing_override_value_is_reported() {
    let error = error_of("override n: u32;\n@compute @workgroup_size(n)\nfn main() {}\n");
    assert_eq!(error.kind(), KernelErrorKind::Override);
    assert!(error.message().contains("`n`"), "{error}");
    assert_eq!(error.location().map(|l| l.line), Some(1), "{error}");
    assert!(
        error.notes().iter().any(|n| n.contains("--override n=VALUE")),
        "{error}"
    );
}

#[test]
fn unknown_entry_point_lists_the_others() {
    let module = parse_wgsl("@compute @workgroup_size(1) fn a() {}\n@compute @workgroup_size(1) fn b() {}\n");
    let module = module.unwrap_or_else(|e| panic!("{e}"));
    let error = module.entry_point("c").err().unwrap_or_else(|| panic!("found c"));
    assert_eq!(error.kind(), KernelErrorKind::NotFound);
    assert!(error.to_string().contains("a, b"), "{error}");
}

/// xorshift64*: deterministic noise without a dependency.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn check_never_panics(source: &str) {
    if let Err(error) = parse_wgsl(source) {
        let text = error.to_string();
        assert!(!text.is_empty());
        if let Some(loc) = error.location() {
            assert!(loc.offset <= source.len());
            assert!(loc.line as usize <= source.split('\n').count(), "{text}");
        }
        assert!(!text.contains('\u{1b}'), "control characters leaked into: {text:?}");
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let len = noise.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| noise.next() as u8).collect();
        check_never_panics(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn random_token_soup_never_panics() {
    // Fragments of real kernels reach much deeper into the parser and validator than noise.
    const TOKENS: &[&str] = &[
        "@compute",
        "@workgroup_size(",
        "64",
        ")",
        "fn",
        "main",
        "(",
        ")",
        "{",
        "}",
        ";",
        "let",
        "var",
        "x",
        "=",
        "+",
        "*",
        "-",
        "/",
        "1u",
        "1.0",
        "2",
        "<storage,",
        "read_write>",
        "<immediate>",
        "array<f32>",
        "array<",
        ">",
        "struct",
        "S",
        ":",
        ",",
        "f32",
        "u32",
        "vec3<f32>",
        "@group(0)",
        "@binding(0)",
        "@binding(1)",
        "if",
        "else",
        "loop",
        "break",
        "return",
        "a",
        "[",
        "]",
        ".",
        "xyz",
        "workgroupBarrier()",
        "atomicAdd(&",
        "atomic<u32>",
        "override",
        "const",
        "enable f16;",
        "f16",
        "1.0h",
        "@builtin(global_invocation_id)",
        "id",
        "vec3<u32>",
        "\n",
        "/*",
        "*/",
        "//",
        "\u{1b}",
        "é",
        "\0",
        "for",
        "while",
        "switch",
        "case",
        "default",
        "&",
        "|",
        "!",
        "<",
        ">",
        "_ =",
    ];
    let mut noise = Noise(0x0123_4567_89ab_cdef);
    for _ in 0..300 {
        let count = noise.below(80);
        let source: Vec<&str> = (0..count).map(|_| TOKENS[noise.below(TOKENS.len())]).collect();
        check_never_panics(&source.join(" "));
    }
}

#[test]
fn mutated_kernels_never_panic() {
    let kernel = "struct P { n: u32, s: f32 }\nvar<immediate> p: P;\n\
                  @group(0) @binding(0) var<storage, read> x: array<f32>;\n\
                  @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
                  var<workgroup> tile: array<f32, 64>;\n\
                  @compute @workgroup_size(64)\n\
                  fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) li: u32) {\n\
                  tile[li] = x[id.x];\n workgroupBarrier();\n if id.x < p.n { y[id.x] = tile[63u - li] * p.s; }\n}\n";
    assert!(parse_wgsl(kernel).is_ok());
    let mut noise = Noise(42);
    let chars: Vec<char> = kernel.chars().collect();
    for _ in 0..300 {
        let mut mutated = chars.clone();
        for _ in 0..1 + noise.below(4) {
            let at = noise.below(mutated.len());
            match noise.below(3) {
                0 => {
                    mutated.remove(at);
                }
                1 => mutated.insert(at, char::from(b" {}();<>@,.:0123456789abcxyz"[noise.below(28)])),
                _ => {
                    let other = noise.below(mutated.len());
                    mutated.swap(at, other);
                }
            }
        }
        check_never_panics(&mutated.iter().collect::<String>());
    }
}

#[test]
fn pathological_nesting_is_refused_without_overflowing_the_stack() {
    let sum = format!("fn f(x: i32) -> i32 {{ return x{}; }}", " + x".repeat(100_000));
    assert_eq!(error_of(&sum).kind(), KernelErrorKind::Unsupported);
    let negations = format!("fn f() -> i32 {{ return {}1; }}", "- ".repeat(100_000));
    assert_eq!(error_of(&negations).kind(), KernelErrorKind::Unsupported);
    let chain = format!(
        "fn f(x: i32) -> i32 {{ if x == 0 {{ return 0; }} {} return 1; }}",
        "else if x == 1 { return 1; } ".repeat(20_000)
    );
    assert_eq!(error_of(&chain).kind(), KernelErrorKind::Unsupported);
    let parens = format!(
        "fn f() -> i32 {{ return {}1{}; }}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert_eq!(error_of(&parens).kind(), KernelErrorKind::Parse);
    let braces = format!("fn f() {{ {}{} }}", "{".repeat(100_000), "}".repeat(100_000));
    let kind = error_of(&braces).kind();
    assert!(
        matches!(kind, KernelErrorKind::Parse | KernelErrorKind::Unsupported),
        "{kind:?}"
    );
}

#[test]
fn deepest_accepted_nesting_still_parses_and_translates() {
    // Close to every limit at once: 120 nested blocks, a 380-long `else if` chain inside
    // them, and a 2000-term expression inside that. This must fit naga's stack.
    let open = "if x == 0 {\n".repeat(120);
    let close = "}\n".repeat(120);
    let chain = "else if x == 2 { y = 1; }\n".repeat(380);
    let sum = " + x".repeat(2000);
    let source = format!(
        "@group(0) @binding(0) var<storage, read_write> a: array<i32>;\n\
         @compute @workgroup_size(1) fn main() {{ var x = a[0]; var y = 0;\n\
         {open} if x == 1 {{ y = x{sum}; }} {chain} {close} a[0] = y; }}"
    );
    let module = parse_wgsl(&source).unwrap_or_else(|e| panic!("{e}"));
    assert!(module.to_spirv().is_ok());
}
