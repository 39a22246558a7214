//! Tests of the grammar, the policies and the explanations.

use super::grammar::*;
use super::policy::*;
use super::*;
use crate::backend::{DeviceInfo, DeviceType, Features, KernelFormat};
use crate::error::ErrorKind;
use std::ffi::OsString;

const GIB: u64 = 1 << 30;

/// A device with everything a test does not care about filled in plausibly.
fn device(name: &str, device_type: DeviceType) -> DeviceInfo {
    DeviceInfo {
        name: name.to_string(),
        vendor: "test".to_string(),
        vendor_id: 0,
        device_id: 0,
        device_type,
        uuid: [0; 16],
        pci_bus_id: None,
        driver_version: "1".to_string(),
        total_memory: 8 * GIB,
        free_memory: 8 * GIB,
        max_allocation_size: 8 * GIB,
        max_workgroup_size: [1024, 1024, 64],
        max_workgroup_invocations: 1024,
        max_workgroup_count: [65535; 3],
        max_workgroup_memory: 49152,
        subgroup_size: 32,
        max_buffer_arguments: 16,
        max_scalar_block_size: 256,
        buffer_offset_alignment: 256,
        features: Features::F16 | Features::F64 | Features::I64,
        kernel_formats: vec![KernelFormat::WGSL, KernelFormat::SPIRV_SHADER],
    }
}

fn cpu_reference() -> DeviceInfo {
    DeviceInfo {
        kernel_formats: vec![KernelFormat::CPU_BUILTIN, KernelFormat::WGSL],
        ..device("xhal CPU reference device 0", DeviceType::Cpu)
    }
}

fn candidates<'a>(list: &'a [(&'a str, u32, DeviceInfo)]) -> Vec<Candidate<'a>> {
    list.iter()
        .map(|(backend, index, info)| Candidate {
            backend,
            index: *index,
            info,
        })
        .collect()
}

/// A mixed machine, listed in an order that no policy prefers, so ordering shows.
fn machine() -> Vec<(&'static str, u32, DeviceInfo)> {
    vec![
        ("cpu", 0, cpu_reference()),
        ("vulkan", 0, device("llvmpipe", DeviceType::Cpu)),
        ("vulkan", 1, device("Radeon 780M", DeviceType::IntegratedGpu)),
        ("vulkan", 2, device("RTX 4090", DeviceType::DiscreteGpu)),
        ("cuda", 0, device("RTX 4090", DeviceType::DiscreteGpu)),
        ("npu", 0, device("Hexagon", DeviceType::Accelerator)),
        ("odd", 0, device("FPGA", DeviceType::Other)),
    ]
}

fn selector(text: &str) -> DeviceSelector {
    DeviceSelector::parse(text).unwrap()
}

/// The accepted devices as `backend:index`, best first.
fn order(selector: &Selector, list: &[(&str, u32, DeviceInfo)]) -> Vec<String> {
    let candidates = candidates(list);
    let ranking = selector.rank(&candidates);
    ranking
        .accepted
        .iter()
        .map(|&i| format!("{}:{}", candidates[i].backend, candidates[i].index))
        .collect()
}

/// Parses `text`, expects a selection error at `column` mentioning `fragment`, and checks
/// the caret line points at that column.
fn assert_syntax_error(text: &str, column: usize, fragment: &str) -> String {
    let error = DeviceSelector::parse(text).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection, "{text:?}");
    let message = error.message().to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 3, "{message}");
    assert!(
        lines[0].ends_with(&format!("at column {column}")) || lines[0].contains(&format!("at column {column}, found")),
        "{text:?}: {message}"
    );
    assert!(lines[0].contains(fragment), "{text:?}: {message}");
    if text.chars().count() <= ECHO_WIDTH {
        assert_eq!(
            lines[2],
            format!("  {}^", " ".repeat(column - 1)),
            "{text:?}: {message}"
        );
    } else {
        // Windowed: the caret still stands under the character at `column`, or past the end.
        let caret = lines[2].chars().position(|c| c == '^').unwrap();
        let under = lines[1].chars().nth(caret);
        let expected = text.chars().nth(column - 1);
        assert!(expected.is_none() || under == expected, "{message}");
    }
    message
}

// --- grammar ---------------------------------------------------------------------------

#[test]
fn every_grammar_form_parses_and_prints_canonically() {
    let cases = [
        ("*", "*"),
        ("cuda", "cuda"),
        ("cpu", "cpu"),
        ("gpu", "gpu"),
        ("discrete", "discrete"),
        ("integrated_gpu", "integrated_gpu"),
        ("accelerator", "accelerator"),
        ("other", "other"),
        ("my-backend_2", "my-backend_2"),
        ("vulkan:0", "vulkan:0"),
        ("vulkan:007", "vulkan:7"),
        ("vulkan:4294967295", "vulkan:4294967295"),
        ("vulkan:*", "vulkan:*"),
        ("vulkan:gpu", "vulkan:gpu"),
        ("vulkan:cpu", "vulkan:cpu"),
        ("vulkan:discrete", "vulkan:discrete_gpu"),
        ("vulkan:discrete_gpu", "vulkan:discrete_gpu"),
        ("vulkan:integrated", "vulkan:integrated_gpu"),
        ("vulkan:accelerator", "vulkan:accelerator"),
        ("vulkan:other", "vulkan:other"),
        ("!cpu", "!cpu"),
        ("!*", "!*"),
        ("!vulkan:1", "!vulkan:1"),
        ("cuda,vulkan,cpu", "cuda,vulkan,cpu"),
        ("  cuda ,\tvulkan:* , !cpu  ", "cuda,vulkan:*,!cpu"),
    ];
    for (text, canonical) in cases {
        let parsed = selector(text);
        assert_eq!(parsed.to_string(), canonical, "{text:?}");
        assert_eq!(selector(canonical), parsed, "{text:?} round trip");
        assert_eq!(text.parse::<DeviceSelector>().unwrap(), parsed);
    }
}

#[test]
fn words_match_backends_and_device_types() {
    use DeviceType::*;
    let matches = |text: &str, backend: &str, index: u32, device_type: DeviceType| {
        matches!(
            selector(text).evaluate(backend, index, device_type),
            Match::Term(_) | Match::Allowed
        )
    };
    // A bare type word matches the backend of that name, whatever it reports, and that type
    // on every backend.
    assert!(matches("cpu", "cpu", 0, Cpu));
    assert!(matches("cpu", "cpu", 0, DiscreteGpu));
    assert!(matches("cpu", "opencl", 3, Cpu));
    assert!(!matches("cpu", "opencl", 3, IntegratedGpu));
    assert!(matches("gpu", "vulkan", 0, IntegratedGpu));
    assert!(matches("gpu", "cuda", 0, DiscreteGpu));
    assert!(!matches("gpu", "cpu", 0, Cpu));
    assert!(!matches("gpu", "npu", 0, Accelerator));
    assert!(matches("discrete", "cuda", 0, DiscreteGpu));
    assert!(!matches("discrete", "vulkan", 0, IntegratedGpu));
    assert!(matches("integrated", "vulkan", 0, IntegratedGpu));
    assert!(matches("accelerator", "npu", 0, Accelerator));
    assert!(matches("other", "odd", 0, Other));
    // Other words are backend names only.
    assert!(matches("cuda", "cuda", 5, Cpu));
    assert!(!matches("cuda", "vulkan", 0, DiscreteGpu));
    // `WORD:device`.
    assert!(matches("vulkan:1", "vulkan", 1, Cpu));
    assert!(!matches("vulkan:1", "vulkan", 0, Cpu));
    assert!(!matches("vulkan:1", "cuda", 1, Cpu));
    assert!(matches("vulkan:*", "vulkan", 9, Other));
    assert!(matches("vulkan:gpu", "vulkan", 0, DiscreteGpu));
    assert!(!matches("vulkan:gpu", "vulkan", 0, Cpu));
    assert!(!matches("vulkan:gpu", "cuda", 0, DiscreteGpu));
    // `cpu:0` names the backend `cpu`, not CPUs elsewhere.
    assert!(!matches("cpu:0", "opencl", 0, Cpu));
    assert!(matches("*", "anything", 7, Other));
    // Negation, wherever it appears.
    assert!(!matches("!cpu", "vulkan", 0, Cpu));
    assert!(matches("!cpu", "vulkan", 0, IntegratedGpu));
    assert!(!matches("vulkan:*,!cpu", "vulkan", 0, Cpu));
    assert!(!matches("!cpu,vulkan:*", "vulkan", 0, Cpu));
    assert!(matches("!cpu,vulkan:*", "vulkan", 0, DiscreteGpu));
    assert!(!matches("!*", "vulkan", 0, DiscreteGpu));
}

#[test]
fn the_first_matching_positive_term_decides() {
    let parsed = selector("!npu,cuda,vulkan:*,gpu");
    assert_eq!(parsed.evaluate("vulkan", 2, DeviceType::DiscreteGpu), Match::Term(2));
    assert_eq!(parsed.evaluate("cuda", 0, DeviceType::DiscreteGpu), Match::Term(1));
    assert_eq!(parsed.evaluate("hip", 0, DeviceType::DiscreteGpu), Match::Term(3));
    assert_eq!(parsed.evaluate("npu", 0, DeviceType::DiscreteGpu), Match::Excluded(0));
    assert_eq!(parsed.evaluate("cpu", 0, DeviceType::Cpu), Match::NotNamed);
    assert_eq!(
        selector("!cpu").evaluate("cuda", 0, DeviceType::DiscreteGpu),
        Match::Allowed
    );
}

#[test]
fn syntax_errors_name_the_column() {
    let message = assert_syntax_error("vulkan:@", 8, "expected a device index, '*' or a device type");
    assert_eq!(
        message,
        "XHAL_DEVICE \"vulkan:@\": expected a device index, '*' or a device type at column 8\n  vulkan:@\n         ^"
    );
    assert_syntax_error("", 1, "empty selector");
    assert_syntax_error("   ", 1, "empty selector");
    assert_syntax_error("cuda,,cpu", 6, "empty term");
    assert_syntax_error(",cuda", 1, "empty term");
    assert_syntax_error("cuda, ,cpu", 7, "empty term");
    assert_syntax_error("cuda,", 5, "trailing ','");
    assert_syntax_error("cuda,  ", 5, "trailing ','");
    assert_syntax_error("!!cpu", 2, "'!' repeated");
    assert_syntax_error("cuda,!!cpu", 7, "'!' repeated");
    assert_syntax_error("!", 2, "after '!'");
    assert_syntax_error("!,cpu", 2, "after '!'");
    assert_syntax_error("! cpu", 2, "after '!'");
    assert_syntax_error("@cuda", 1, "expected a backend name, a device type, '*' or '!'");
    assert_syntax_error("1cuda", 1, "expected a backend name");
    assert_syntax_error("cu$da", 3, "expected ':', ',' or the end after `cu`");
    assert_syntax_error("cuda cpu", 6, "expected ',' or the end after `cuda`");
    assert_syntax_error("cuda;cpu", 5, "after `cuda`");
    assert_syntax_error("*:0", 2, "expected ',' or the end after `*`");
    assert_syntax_error("vulkan:0x", 9, "expected ',' or the end after `vulkan:0`");
    assert_syntax_error("vulkan:0:1", 9, "after `vulkan:0`");
    assert_syntax_error("vulkan:*x", 9, "after `vulkan:*`");
    assert_syntax_error("vulkan:gpu!", 11, "after `vulkan:gpu`");
    assert_syntax_error("cuda:99999999999", 6, "device index 99999999999 is too large");
    assert_syntax_error("cuda:4294967296", 6, "the largest is 4294967295");
    assert_syntax_error("cuda:", 6, "expected a device index, '*' or a device type");
    assert_syntax_error("cuda:,cpu", 6, "expected a device index");
    assert_syntax_error("vulkan:-1", 8, "expected a device index");
    assert_syntax_error("vulkan:gpux", 8, "unknown device type `gpux`");
    assert_syntax_error("vulkan: 0", 8, "found ' '");
    assert_syntax_error("vulkan :0", 8, "no whitespace is allowed before ':'");
}

#[test]
fn syntax_errors_name_the_origin() {
    let from_env = DeviceSelector::parse("vulkan:@").unwrap_err();
    let error = DeviceSelector::parse_from("vulkan:@", "SELECTOR").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert_eq!(
        error.message(),
        "SELECTOR \"vulkan:@\": expected a device index, '*' or a device type at column 8\n  vulkan:@\n         ^"
    );
    // Only the name differs: same column, same echo, same caret.
    assert_eq!(
        error.message().strip_prefix("SELECTOR"),
        from_env.message().strip_prefix(ENV_VAR)
    );
    assert!(!error.message().contains(ENV_VAR), "{error}");
    let error = Selector::parse_from("cuda,,cpu", "--device").unwrap_err();
    assert!(
        error.message().starts_with("--device \"cuda,,cpu\": empty term"),
        "{error}"
    );
}

#[test]
fn the_origin_is_kept_but_plays_no_part_in_equality() {
    assert_eq!(selector("cuda").origin(), ENV_VAR);
    assert_eq!("cuda".parse::<DeviceSelector>().unwrap().origin(), ENV_VAR);
    let named = DeviceSelector::parse_from(" cuda , cpu", "SELECTOR").unwrap();
    assert_eq!(named.origin(), "SELECTOR");
    // `Display` is the canonical text alone.
    assert_eq!(named.to_string(), "cuda,cpu");
    assert_eq!(named, selector("cuda,cpu"));
    assert_eq!(
        Selector::parse_from("cuda,cpu", "SELECTOR").unwrap(),
        Selector::parse("cuda,cpu").unwrap()
    );
    assert_eq!(
        Selector::parse_from("cpu", "SELECTOR")
            .unwrap()
            .device_selector()
            .map(DeviceSelector::origin),
        Some("SELECTOR")
    );
}

#[test]
fn uppercase_is_reported_with_the_lowercase_spelling() {
    assert_syntax_error("CUDA", 1, "names are lowercase: expected `cuda`");
    assert_syntax_error("cuDA", 3, "names are lowercase: expected `cuda`");
    assert_syntax_error("cpu,Vulkan:0", 5, "expected `vulkan`");
    assert_syntax_error("!Cpu", 2, "expected `cpu`");
    assert_syntax_error("vulkan:GPU", 8, "expected `gpu`");
    assert_syntax_error("vulkan:gPU", 9, "expected `gpu`");
}

#[test]
fn columns_count_characters_and_the_echo_stays_aligned() {
    assert_syntax_error("cuda,ñ", 6, "found 'ñ'");
    assert_syntax_error("ünï,cuda", 1, "found 'ü'");
    assert_syntax_error("cuda,vulkan:\u{200b}", 13, "found '\\u{200b}'");
    // A tab is echoed as a space so the caret stays under the column.
    let message = assert_syntax_error("cuda,\t@", 7, "expected a backend name");
    assert!(message.contains("\n  cuda, @\n"), "{message}");
    // A newline in the value must not break the message's three lines.
    assert_syntax_error("cuda\n@", 6, "after `cuda`");
}

#[test]
fn long_input_gives_a_short_message() {
    let long = format!("{}@", "a".repeat(10_000));
    let message = assert_syntax_error(&long, 10_001, "after `aaaa");
    assert!(message.len() < 600, "{} bytes: {message}", message.len());
    let early = format!("@{}", "a".repeat(10_000));
    let message = assert_syntax_error(&early, 1, "expected a backend name");
    assert!(message.len() < 600, "{message}");
    let middle = format!("{},@,{}", "a".repeat(5_000), "b".repeat(5_000));
    let message = DeviceSelector::parse(&middle).unwrap_err().message().to_string();
    assert!(message.contains("at column 5002"), "{message}");
    let lines: Vec<&str> = message.lines().collect();
    // The window starts with an ellipsis; the caret still sits under the '@'.
    let caret = lines[2].find('^').unwrap();
    assert_eq!(lines[1].chars().nth(caret), Some('@'), "{message}");
    let digits = format!("cuda:{}", "9".repeat(5_000));
    let message = assert_syntax_error(&digits, 6, "is too large");
    assert!(message.len() < 600, "{message}");
}

#[test]
fn odd_input_never_panics_and_what_parses_round_trips() {
    let mut inputs: Vec<String> = [
        "",
        " ",
        ",",
        ",,",
        "!",
        "!!",
        "!*",
        "*",
        "**",
        "*,*",
        ":",
        "::",
        "a:",
        ":0",
        "a::0",
        "a:*:*",
        "a:0,",
        "a,b,,",
        "\u{0}",
        "\u{feff}cuda",
        "cuda\u{0}",
        "😀",
        "cuda:😀",
        "gpu,😀",
        "ａｂｃ",
        "ß",
        "İ",
        "\u{301}",
        "a\u{301}",
        "\t\n\r",
        "-",
        "_",
        "a-",
        "a_",
        "a:-",
        "a:_",
        "a:0-",
        "a:00000000000000000000000000001",
        "a:4294967295",
        "a:18446744073709551616",
        "z:gpu,!z:cpu,z:7",
        "\\",
        "\"",
        "'",
        "a b c",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    inputs.push("x".repeat(100_000));
    inputs.push("a,".repeat(50_000));
    inputs.push("!".repeat(1_000));
    // A deterministic generator over an alphabet of the grammar's pieces and some junk.
    let alphabet: Vec<char> = "ab0:*!, \tCZé😀-_gpucv".chars().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..3_000 {
        let mut text = String::new();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        for step in 0..(state % 12) {
            let pick = (state >> (step * 5)) as usize % alphabet.len();
            text.push(alphabet[pick]);
        }
        inputs.push(text);
    }
    for input in &inputs {
        match DeviceSelector::parse(input) {
            Ok(parsed) => {
                let again = DeviceSelector::parse(&parsed.to_string()).unwrap();
                assert_eq!(again, parsed, "{input:?}");
                // Answering questions about it must not panic either.
                let _ = parsed.may_use_backend("cuda");
                let _ = parsed.named_backends();
            }
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::Selection, "{input:?}");
                assert_eq!(error.message().lines().count(), 3, "{input:?}: {error}");
            }
        }
    }
}

// --- questions about a selector --------------------------------------------------------

#[test]
fn may_use_backend_skips_only_what_can_never_match() {
    let cases: [(&str, &[(&str, bool)]); 14] = [
        ("cuda", &[("cuda", true), ("vulkan", false), ("cpu", false)]),
        ("gpu", &[("cuda", true), ("vulkan", true), ("cpu", true)]),
        ("cpu", &[("cpu", true), ("opencl", true), ("cuda", true)]),
        ("!vulkan", &[("vulkan", false), ("cuda", true), ("cpu", true)]),
        ("vulkan:*,!cpu", &[("vulkan", true), ("cpu", false), ("cuda", false)]),
        // Every device of the backend `cpu` matches the bare word `cpu`, so `!cpu` rules the
        // whole backend out; other backends may still have GPUs.
        ("!cpu", &[("cpu", false), ("vulkan", true)]),
        ("!vulkan:0", &[("vulkan", true)]),
        ("vulkan:0,!vulkan:*", &[("vulkan", false)]),
        ("vulkan:gpu,!gpu", &[("vulkan", false)]),
        ("vulkan:gpu,!vulkan:integrated", &[("vulkan", true)]),
        (
            "!vulkan:cpu,!vulkan:gpu,!vulkan:accelerator,!vulkan:other",
            &[("vulkan", false), ("cuda", true)],
        ),
        ("*,!*", &[("vulkan", false)]),
        ("cpu:0", &[("cpu", true), ("vulkan", false)]),
        ("accelerator,!npu", &[("npu", false), ("cuda", true)]),
    ];
    for (text, answers) in cases {
        let parsed = selector(text);
        for (backend, expected) in answers {
            assert_eq!(parsed.may_use_backend(backend), *expected, "{text:?} / {backend}");
        }
    }
}

#[test]
fn may_use_backend_false_is_a_proof() {
    use DeviceType::*;
    let texts = [
        "cuda",
        "gpu",
        "cpu",
        "!cpu",
        "!vulkan",
        "vulkan:*,!cpu",
        "vulkan:gpu,!gpu",
        "*",
        "!*",
        "vulkan:0,!vulkan:0",
        "discrete,!cuda:gpu",
        "other,!vulkan:other,vulkan:1",
        "integrated,!integrated_gpu",
        "cpu:*,!cpu:cpu",
        "npu:accelerator,!accelerator",
    ];
    for text in texts {
        let parsed = selector(text);
        for backend in ["cpu", "cuda", "vulkan", "npu", "hip"] {
            if parsed.may_use_backend(backend) {
                continue;
            }
            for device_type in [Cpu, IntegratedGpu, DiscreteGpu, Accelerator, Other] {
                for index in 0..4 {
                    let outcome = parsed.evaluate(backend, index, device_type);
                    assert!(
                        matches!(outcome, Match::Excluded(_) | Match::NotNamed),
                        "{text:?} said {backend} is unusable, but {backend}:{index} \
                         ({device_type}) gives {outcome:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn named_backends_lists_explicit_names_once() {
    assert_eq!(selector("cuda,vulkan:0,cpu").named_backends(), ["cuda", "vulkan"]);
    assert_eq!(selector("gpu,discrete,*").named_backends(), Vec::<String>::new());
    assert_eq!(
        selector("vulkan:0,vulkan:1,!hip,hip:*").named_backends(),
        ["vulkan", "hip"]
    );
    assert_eq!(selector("cpu:0").named_backends(), ["cpu"]);
    assert_eq!(selector("!cuda").named_backends(), Vec::<String>::new());
}

// --- choosing --------------------------------------------------------------------------

#[test]
fn positive_terms_are_an_order_of_preference() {
    let machine = machine();
    assert_eq!(
        order(&Selector::parse("cpu,vulkan:*,cuda").unwrap(), &machine),
        // `cpu` also matches vulkan's llvmpipe, a CPU; then vulkan's others by policy.
        ["cpu:0", "vulkan:0", "vulkan:2", "vulkan:1", "cuda:0"]
    );
    assert_eq!(
        order(&Selector::parse("cuda,vulkan,npu").unwrap(), &machine),
        ["cuda:0", "vulkan:2", "vulkan:1", "vulkan:0", "npu:0"]
    );
    assert_eq!(order(&Selector::parse("vulkan:0").unwrap(), &machine), ["vulkan:0"]);
    assert_eq!(
        order(&Selector::parse("gpu").unwrap(), &machine),
        ["vulkan:2", "cuda:0", "vulkan:1"]
    );
}

#[test]
fn negative_terms_exclude_wherever_they_appear() {
    let machine = machine();
    let chosen = Selector::parse("vulkan:*,!cpu").unwrap();
    assert_eq!(order(&chosen, &machine), ["vulkan:2", "vulkan:1"]);
    let ranking = chosen.rank(&candidates(&machine));
    assert_eq!(ranking.verdicts[1].reason, "excluded by `!cpu`");
    assert!(!ranking.verdicts[1].accepted);
    assert_eq!(ranking.verdicts[1].rank, None);
    assert_eq!(ranking.verdicts[4].reason, "not named by XHAL_DEVICE=vulkan:*,!cpu");
    assert_eq!(ranking.verdicts[3].reason, "matches term 1 `vulkan:*`; discrete GPU");
    assert_eq!(ranking.verdicts[3].rank, Some(1));
    // Only negative terms: anything not excluded, in policy order.
    assert_eq!(
        order(&Selector::parse("!cpu,!npu").unwrap(), &machine),
        ["vulkan:2", "cuda:0", "vulkan:1", "odd:0"]
    );
}

#[test]
fn policies_order_by_device_type_then_discovery() {
    let machine = machine();
    assert_eq!(
        order(&Selector::new(), &machine),
        ["vulkan:2", "cuda:0", "vulkan:1", "npu:0", "odd:0", "cpu:0", "vulkan:0"]
    );
    assert_eq!(
        order(&Selector::new().policy(Policy::PreferCpu), &machine),
        ["cpu:0", "vulkan:0", "vulkan:2", "cuda:0", "vulkan:1", "npu:0", "odd:0"]
    );
    assert_eq!(Policy::default(), Policy::PreferDiscreteGpu);
    assert_eq!(Policy::PreferCpu.to_string(), "prefer-cpu");
}

#[test]
fn explicit_policy_follows_terms_strictly() {
    let machine = machine();
    let explicit = Selector::parse("vulkan:*,cpu").unwrap().policy(Policy::Explicit);
    // Within a term, discovery order: device types play no part.
    assert_eq!(
        order(&explicit, &machine),
        ["vulkan:0", "vulkan:1", "vulkan:2", "cpu:0"]
    );
    let negative = Selector::parse("!vulkan").unwrap().policy(Policy::Explicit);
    assert_eq!(order(&negative, &machine), ["cpu:0", "cuda:0", "npu:0", "odd:0"]);
    let choice = negative.choose(&candidates(&machine)).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose cpu:0 (xhal CPU reference device 0): first device in discovery order that \
         XHAL_DEVICE=!vulkan allows (policy explicit)"
    );
    let choice = explicit.choose(&candidates(&machine)).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose vulkan:0 (llvmpipe): first match of term 1 `vulkan:*` in \
         XHAL_DEVICE=vulkan:*,cpu; 3 devices match it, taken in discovery order"
    );

    let without = Selector::new().policy(Policy::Explicit);
    let ranking = without.rank(&candidates(&machine));
    assert!(ranking.accepted.is_empty());
    assert!(ranking.verdicts[0].reason.contains("needs a device selector"));
    let error = without.choose(&candidates(&machine)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert!(
        error.message().starts_with("policy explicit needs a device selector"),
        "{error}"
    );
    assert!(error
        .message()
        .contains("present: cpu:0 (xhal CPU reference device 0, cpu), "));
}

#[test]
fn each_requirement_gives_its_reason() {
    let mut small = device("small", DeviceType::DiscreteGpu);
    small.total_memory = GIB;
    small.features = Features::F16;
    small.kernel_formats = vec![KernelFormat::PTX];
    let mut bare = device("bare", DeviceType::IntegratedGpu);
    bare.kernel_formats.clear();
    bare.total_memory = 2 * GIB - 1;
    let list = vec![("cuda", 0, small), ("vulkan", 0, bare), ("cpu", 0, cpu_reference())];
    let candidates = candidates(&list);

    let reason = |selector: Selector, which: usize| selector.rank(&candidates).verdicts[which].reason.clone();
    assert_eq!(
        reason(Selector::new().require_features(Features::F64), 0),
        "lacks feature f64"
    );
    assert_eq!(
        reason(Selector::new().require_features(Features::F64 | Features::I64), 0),
        "lacks features f64, i64"
    );
    assert_eq!(
        reason(Selector::new().require_features(Features(1 << 60)), 0),
        "lacks feature 0x1000000000000000"
    );
    assert_eq!(
        reason(Selector::new().min_memory(2 * GIB), 0),
        "has 1.0 GiB, needs 2.0 GiB"
    );
    assert_eq!(
        reason(Selector::new().min_memory(2 * GIB), 1),
        "has 2147483647 bytes, needs 2147483648 bytes"
    );
    assert_eq!(reason(Selector::new().min_memory(512 << 20), 0), "discrete GPU");
    assert_eq!(
        reason(Selector::new().require_kernel_format(KernelFormat::WGSL), 0),
        "accepts none of the kernel formats wgsl (it accepts ptx)"
    );
    assert_eq!(
        reason(
            Selector::new()
                .require_kernel_format(KernelFormat::WGSL)
                .require_kernel_format(KernelFormat::SPIRV_SHADER),
            1
        ),
        "accepts none of the kernel formats wgsl, spirv-shader (it accepts none)"
    );
    // A device passes when it accepts any one of the formats.
    let either = Selector::new()
        .require_kernel_format(KernelFormat::WGSL)
        .require_kernel_format(KernelFormat::PTX);
    assert!(either.rank(&candidates).verdicts[0].accepted);
    // Every failing requirement is listed.
    assert_eq!(
        reason(
            Selector::new()
                .require_features(Features::F64)
                .min_memory(4 * GIB)
                .require_kernel_format(KernelFormat::WGSL),
            0
        ),
        "lacks feature f64; has 1.0 GiB, needs 4.0 GiB; accepts none of the kernel formats \
         wgsl (it accepts ptx)"
    );

    // Nothing meets them: the error says which devices and why.
    let strict = Selector::new().min_memory(64 * GIB);
    let error = strict.choose(&candidates).unwrap_err();
    assert_eq!(
        error.message(),
        "no device meets the requirements (at least 64.0 GiB of memory); present: \
         cuda:0 (small, discrete_gpu) [has 1.0 GiB, needs 64.0 GiB], \
         vulkan:0 (bare, integrated_gpu) [has 2.0 GiB, needs 64.0 GiB], \
         cpu:0 (xhal CPU reference device 0, cpu) [has 8.0 GiB, needs 64.0 GiB]"
    );
    let with_selector = Selector::parse("cuda,!cpu").unwrap().require_features(Features::F64);
    let error = with_selector.choose(&candidates).unwrap_err();
    assert_eq!(
        error.message(),
        "of the devices XHAL_DEVICE \"cuda,!cpu\" matches, none meets the requirements \
         (features f64); present: cuda:0 (small, discrete_gpu) [lacks feature f64], \
         vulkan:0 (bare, integrated_gpu), \
         cpu:0 (xhal CPU reference device 0, cpu) [excluded by `!cpu`]"
    );
}

#[test]
fn matching_nothing_lists_what_is_present() {
    let list = vec![("cpu", 0, cpu_reference())];
    let candidates = candidates(&list);
    let error = Selector::parse("cuda").unwrap().choose(&candidates).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert_eq!(
        error.message(),
        "XHAL_DEVICE \"cuda\" matches no device; present: cpu:0 (xhal CPU reference device \
         0, cpu); backend \"cuda\" is not present (backends present: cpu)"
    );
    let error = Selector::parse("cuda:0,hip,gpu")
        .unwrap()
        .choose(&candidates)
        .unwrap_err();
    assert!(
        error
            .message()
            .ends_with("; backends \"cuda\", \"hip\" are not present (backends present: cpu)"),
        "{error}"
    );
    // The backend is there but the device is not: no "not present" clause.
    let error = Selector::parse("cpu:1").unwrap().choose(&candidates).unwrap_err();
    assert_eq!(
        error.message(),
        "XHAL_DEVICE \"cpu:1\" matches no device; present: cpu:0 (xhal CPU reference device \
         0, cpu)"
    );
    let error = Selector::parse("!cpu").unwrap().choose(&candidates).unwrap_err();
    assert_eq!(
        error.message(),
        "XHAL_DEVICE \"!cpu\" matches no device; present: cpu:0 (xhal CPU reference device \
         0, cpu) [excluded by `!cpu`]"
    );
    let error = Selector::parse("cuda").unwrap().choose(&[]).unwrap_err();
    assert_eq!(
        error.message(),
        "XHAL_DEVICE \"cuda\" matches no device; present: none; backend \"cuda\" is not \
         present (no backend reported a device)"
    );
    let error = Selector::new().choose(&[]).unwrap_err();
    assert_eq!(error.message(), "no device is present");
}

#[test]
fn choices_explain_themselves() {
    let list = vec![("cpu", 0, cpu_reference())];
    let candidates = candidates(&list);
    let choice = Selector::parse("cpu").unwrap().choose(&candidates).unwrap();
    assert_eq!(choice.index, 0);
    assert_eq!(
        choice.explanation.summary,
        "chose cpu:0 (xhal CPU reference device 0): first match of term 1 `cpu` in XHAL_DEVICE=cpu"
    );
    let choice = Selector::new().choose(&candidates).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose cpu:0 (xhal CPU reference device 0): best by policy prefer-discrete-gpu \
         (cpu; no GPU present)"
    );

    let machine = machine();
    let all = super::tests::candidates(&machine);
    let choice = Selector::new().choose(&all).unwrap();
    assert_eq!(choice.index, 3);
    assert_eq!(
        choice.explanation.summary,
        "chose vulkan:2 (RTX 4090): best by policy prefer-discrete-gpu (discrete_gpu)"
    );
    let no_gpu = Selector::parse("!gpu").unwrap();
    let choice = no_gpu.choose(&all).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose npu:0 (Hexagon): best by policy prefer-discrete-gpu (accelerator; no GPU \
         accepted; XHAL_DEVICE=!gpu)"
    );
    let choice = Selector::parse("gpu").unwrap().choose(&all).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose vulkan:2 (RTX 4090): first match of term 1 `gpu` in XHAL_DEVICE=gpu; 3 devices \
         match it, ordered by policy prefer-discrete-gpu, then discovery order"
    );
    let choice = Selector::new().policy(Policy::PreferCpu).choose(&all[2..4]).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose vulkan:2 (RTX 4090): best by policy prefer-cpu (discrete_gpu; no CPU present)"
    );

    let text = Selector::parse("vulkan:*,!cpu")
        .unwrap()
        .choose(&all[..4])
        .unwrap()
        .explanation
        .to_string();
    assert_eq!(
        text,
        "chose vulkan:2 (RTX 4090): first match of term 1 `vulkan:*` in XHAL_DEVICE=vulkan:*,!cpu; \
         2 devices match it, ordered by policy prefer-discrete-gpu, then discovery order\n  \
         -- cpu:0 (xhal CPU reference device 0): rejected: excluded by `!cpu`\n  \
         -- vulkan:0 (llvmpipe): rejected: excluded by `!cpu`\n  \
         #2 vulkan:1 (Radeon 780M): matches term 1 `vulkan:*`; integrated GPU\n  \
         #1 vulkan:2 (RTX 4090): matches term 1 `vulkan:*`; discrete GPU"
    );
}

#[test]
fn choosing_names_the_origin() {
    let machine = machine();
    let all = candidates(&machine);
    let parse = |text: &str| Selector::parse_from(text, "SELECTOR").unwrap();

    let choice = parse("vulkan:*,!cpu").choose(&all).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose vulkan:2 (RTX 4090): first match of term 1 `vulkan:*` in SELECTOR=vulkan:*,!cpu; \
         2 devices match it, ordered by policy prefer-discrete-gpu, then discovery order"
    );
    assert_eq!(
        choice.explanation.verdicts[4].reason,
        "not named by SELECTOR=vulkan:*,!cpu"
    );
    let choice = parse("!gpu").choose(&all).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose npu:0 (Hexagon): best by policy prefer-discrete-gpu (accelerator; no GPU \
         accepted; SELECTOR=!gpu)"
    );
    let choice = parse("!vulkan").policy(Policy::Explicit).choose(&all).unwrap();
    assert_eq!(
        choice.explanation.summary,
        "chose cpu:0 (xhal CPU reference device 0): first device in discovery order that \
         SELECTOR=!vulkan allows (policy explicit)"
    );

    let list = vec![("cpu", 0, cpu_reference())];
    let one = candidates(&list);
    let error = parse("cuda").choose(&one).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert_eq!(
        error.message(),
        "SELECTOR \"cuda\" matches no device; present: cpu:0 (xhal CPU reference device \
         0, cpu); backend \"cuda\" is not present (backends present: cpu)"
    );
    let error = parse("cpu")
        .require_features(Features(1 << 60))
        .choose(&one)
        .unwrap_err();
    assert!(
        error
            .message()
            .starts_with("of the devices SELECTOR \"cpu\" matches, none meets the requirements"),
        "{error}"
    );
    for text in ["cuda", "cpu:1", "!cpu"] {
        let error = parse(text).choose(&one).unwrap_err();
        assert!(!error.message().contains(ENV_VAR), "{error}");
    }
    // Without a device selector, the explicit policy's hint is about the variable itself.
    let error = Selector::new().policy(Policy::Explicit).choose(&one).unwrap_err();
    assert!(error.message().contains("set XHAL_DEVICE"), "{error}");
}

#[test]
fn verdicts_serialize() {
    let list = vec![("cpu", 0, cpu_reference())];
    let choice = Selector::new().choose(&candidates(&list)).unwrap();
    let json = serde_json::to_value(&choice.explanation).unwrap();
    assert_eq!(
        json["verdicts"][0],
        serde_json::json!({
            "device": "cpu:0 (xhal CPU reference device 0)",
            "accepted": true,
            "rank": 1,
            "reason": "CPU",
        })
    );
    assert!(json["summary"].as_str().unwrap().starts_with("chose cpu:0"));
}

#[test]
fn the_environment_value_is_read_leniently_but_parsed_strictly() {
    assert_eq!(Selector::from_env_value(None).unwrap(), Selector::new());
    assert_eq!(Selector::from_env_value(Some("".into())).unwrap(), Selector::new());
    assert_eq!(Selector::from_env_value(Some("  ".into())).unwrap(), Selector::new());
    let parsed = Selector::from_env_value(Some("cuda, cpu".into())).unwrap();
    assert_eq!(
        parsed.device_selector().map(ToString::to_string).as_deref(),
        Some("cuda,cpu")
    );
    let error = Selector::from_env_value(Some("cuda,".into())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        let error = Selector::from_env_value(Some(OsString::from_vec(vec![0x63, 0xff]))).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        assert!(error.message().contains("not valid UTF-8"), "{error}");
    }
}

#[test]
fn builder_keeps_every_setting() {
    let selector = Selector::new()
        .with_devices(selector("cuda"))
        .with_devices(selector("vulkan"))
        .require_features(Features::F16)
        .require_features(Features::F64)
        .min_memory(GIB)
        .require_kernel_format(KernelFormat::WGSL)
        .require_kernel_format(KernelFormat::WGSL)
        .policy(Policy::PreferCpu);
    assert_eq!(selector.device_selector(), Some(&self::selector("vulkan")));
    assert_eq!(selector.features, Features::F16 | Features::F64);
    assert_eq!(selector.kernel_formats, [KernelFormat::WGSL]);
    assert_eq!(selector.policy, Policy::PreferCpu);
    assert_eq!(
        selector.requirements(),
        "features f16, f64; at least 1.0 GiB of memory; a kernel format of wgsl"
    );
}

#[test]
fn bytes_are_written_in_binary_units() {
    assert_eq!(format_bytes(0), "0 bytes");
    assert_eq!(format_bytes(1023), "1023 bytes");
    assert_eq!(format_bytes(1536), "1.5 KiB");
    assert_eq!(format_bytes(512 << 20), "512.0 MiB");
    assert_eq!(format_bytes(3 << 40), "3.0 TiB");
    assert_eq!(format_bytes(u64::MAX), "16777216.0 TiB");
}
