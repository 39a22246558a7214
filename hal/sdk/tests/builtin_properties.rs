//! Property tests: the CPU backend's WGSL arithmetic against WGSL's rules over random
//! inputs. Each property loads one kernel, then (per proptest case) launches it over a batch
//! of 256 random inputs and compares every result with a Rust reference written from the
//! WGSL specification (`corpus/wgsl_rules.rs`), not from the interpreter.
//!
//! Inputs are drawn with a bias toward the values where implementations go wrong (0, -1,
//! MIN, MAX, shift amounts around 32, floats around the saturation bounds, NaN, infinities).
//! 32 proptest cases per property keep the suite fast; failures shrink (within a bounded
//! number of steps) and print the offending inputs.

mod support;
#[path = "corpus/wgsl_rules.rs"]
mod wgsl_rules;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use wgsl_rules as rules;
use xhal::{Device, Launch, Module, Stream};

/// Invocations per launch: 4 workgroups of 64.
const BATCH: usize = 256;

/// Every kernel takes its operands as u32 words (floats as their bits) in `a`, `b` and,
/// for clamp, `c`, and writes `RESULTS` words per invocation to `out`. An entry point's
/// buffers must be bindings 0..n-1, so every entry point reads both `a` and `b`.
const KERNELS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read> c: array<u32>;

@compute @workgroup_size(64)
fn division(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = a[i];
    let y = b[i];
    out[4u * i] = bitcast<u32>(bitcast<i32>(x) / bitcast<i32>(y));
    out[4u * i + 1u] = bitcast<u32>(bitcast<i32>(x) % bitcast<i32>(y));
    out[4u * i + 2u] = x / y;
    out[4u * i + 3u] = x % y;
}

@compute @workgroup_size(64)
fn shifts(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = a[i];
    let s = b[i];
    out[4u * i] = x << s;
    out[4u * i + 1u] = x >> s;
    out[4u * i + 2u] = bitcast<u32>(bitcast<i32>(x) << s);
    out[4u * i + 3u] = bitcast<u32>(bitcast<i32>(x) >> s);
}

@compute @workgroup_size(64)
fn wrapping(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = a[i];
    let y = b[i];
    let sx = bitcast<i32>(x);
    let sy = bitcast<i32>(y);
    out[8u * i] = bitcast<u32>(sx + sy);
    out[8u * i + 1u] = bitcast<u32>(sx - sy);
    out[8u * i + 2u] = bitcast<u32>(sx * sy);
    out[8u * i + 3u] = bitcast<u32>(-sx);
    out[8u * i + 4u] = x + y;
    out[8u * i + 5u] = x - y;
    out[8u * i + 6u] = x * y;
    out[8u * i + 7u] = bitcast<u32>(abs(sx));
}

@compute @workgroup_size(64)
fn float_to_int(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = bitcast<f32>(a[i]);
    let y = bitcast<f32>(b[i]);
    out[4u * i] = bitcast<u32>(i32(x));
    out[4u * i + 1u] = u32(x);
    out[4u * i + 2u] = bitcast<u32>(i32(y));
    out[4u * i + 3u] = u32(y);
}

@compute @workgroup_size(64)
fn min_max_clamp(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = bitcast<f32>(a[i]);
    let y = bitcast<f32>(b[i]);
    let z = bitcast<f32>(c[i]);
    out[3u * i] = bitcast<u32>(min(x, y));
    out[3u * i + 1u] = bitcast<u32>(max(x, y));
    out[3u * i + 2u] = bitcast<u32>(clamp(x, y, z));
}

@compute @workgroup_size(64)
fn bits(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = a[i] ^ b[i];
    let s = bitcast<i32>(x);
    out[7u * i] = countOneBits(x);
    out[7u * i + 1u] = reverseBits(x);
    out[7u * i + 2u] = firstLeadingBit(x);
    out[7u * i + 3u] = bitcast<u32>(firstLeadingBit(s));
    out[7u * i + 4u] = countLeadingZeros(x);
    out[7u * i + 5u] = countTrailingZeros(x);
    out[7u * i + 6u] = firstTrailingBit(x);
}
"#;

/// The static CPU backend with the kernels loaded.
struct Fixture {
    device: Device,
    stream: Stream,
    module: Module,
}

impl Fixture {
    fn new() -> Fixture {
        let device = support::static_cpu_device();
        let stream = device.create_stream().expect("stream");
        let module = device.load_wgsl(KERNELS).expect("the property kernels load");
        Fixture { device, stream, module }
    }

    /// Launches `entry` over the batch with `inputs` bound in order before `out` (and any
    /// input past the second after it, as binding 3), and returns `out`.
    fn run(&self, entry: &str, inputs: &[&[u32]], results: usize) -> Vec<u32> {
        let kernel = self.module.kernel(entry).expect("kernel");
        let alloc = |data: &[u32]| self.device.alloc_from(&self.stream, data).expect("buffer");
        let buffers: Vec<_> = inputs.iter().map(|data| alloc(data)).collect();
        let out = alloc(&vec![0u32; BATCH * results]);
        let mut launch = Launch::new(&kernel)
            .workgroups((BATCH / 64) as u32, 1, 1)
            .buffer(&buffers[0])
            .buffer(&buffers[1])
            .buffer(&out);
        for buffer in &buffers[2..] {
            launch = launch.buffer(buffer);
        }
        self.stream.launch(&launch).expect("launch");
        self.stream.read_to_vec(&out).expect("read back")
    }
}

fn config() -> Config {
    Config {
        cases: 32,
        // Each shrinking step is a launch; a bounded number keeps a failing run short.
        max_shrink_iters: 256,
        // No regression files written into the source tree.
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs `property` over `strategy` and fails the test with proptest's report.
fn check<S: Strategy>(strategy: S, property: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut runner = TestRunner::new(config());
    if let Err(failure) = runner.run(&strategy, property) {
        panic!("{failure}");
    }
}

/// 32-bit words biased toward the edges of i32 and u32.
fn word() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![
        6 => any::<u32>(),
        1 => Just(0u32),
        1 => Just(u32::MAX),
        1 => Just(0x8000_0000u32),
        1 => Just(0x7fff_ffffu32),
        2 => 0u32..16,
        2 => (-16i32..16).prop_map(|v| v as u32),
    ]
}

/// Shift amounts of any size, often near the bit width.
fn shift_amount() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![3 => any::<u32>(), 3 => 0u32..70, 1 => Just(32u32), 1 => Just(31u32)]
}

/// f32 bit patterns: any pattern (NaNs with payloads, infinities, subnormals), ordinary
/// values, values around the i32 and u32 saturation bounds, and special values.
fn float_bits() -> impl Strategy<Value = u32> + Clone {
    prop_oneof![
        3 => any::<u32>(),
        3 => (-1e6f32..1e6f32).prop_map(f32::to_bits),
        2 => (-5e9f32..5e9f32).prop_map(f32::to_bits),
        2 => prop::sample::select(vec![
            0.0f32,
            -0.0,
            0.5,
            -0.5,
            -1.0,
            2_147_483_520.0,
            2_147_483_648.0,
            -2_147_483_648.0,
            -2_147_483_904.0,
            4_294_967_040.0,
            4_294_967_296.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE / 2.0,
        ])
        .prop_map(f32::to_bits),
    ]
}

/// A batch of operand pairs.
fn pairs(
    first: impl Strategy<Value = u32>,
    second: impl Strategy<Value = u32>,
) -> impl Strategy<Value = Vec<(u32, u32)>> {
    vec((first, second), BATCH)
}

/// Compares `observed` with `expected` (both `results` words per input) and fails the
/// proptest case naming the first mismatches and their inputs.
fn compare(
    what: &[&str],
    inputs: &[(u32, u32)],
    observed: &[u32],
    expected: impl Fn(u32, u32) -> Vec<u32>,
) -> Result<(), TestCaseError> {
    let results = what.len();
    let mut mismatches = Vec::new();
    for (i, &(x, y)) in inputs.iter().enumerate() {
        let want = expected(x, y);
        for (k, &want) in want.iter().enumerate() {
            let got = observed[i * results + k];
            if got != want {
                mismatches.push(format!(
                    "{}: x = {x:#010x}, y = {y:#010x}: got {got:#010x} ({}), expected {want:#010x} ({})",
                    what[k], got as i32, want as i32
                ));
            }
        }
    }
    if mismatches.is_empty() {
        Ok(())
    } else {
        let count = mismatches.len();
        mismatches.truncate(12);
        Err(TestCaseError::fail(format!(
            "{count} mismatches, first:\n{}",
            mismatches.join("\n")
        )))
    }
}

fn split(batch: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    batch.iter().copied().unzip()
}

/// i32 and u32 `/` and `%`: truncating; by zero, e1 and 0; i32 MIN / -1, MIN and 0.
#[test]
fn integer_division_and_remainder_follow_wgsl() {
    let fixture = Fixture::new();
    check(pairs(word(), word()), |batch| {
        let (a, b) = split(&batch);
        let out = fixture.run("division", &[&a, &b], 4);
        compare(&["i32 /", "i32 %", "u32 /", "u32 %"], &batch, &out, |x, y| {
            vec![
                rules::div_i32(x as i32, y as i32) as u32,
                rules::rem_i32(x as i32, y as i32) as u32,
                rules::div_u32(x, y),
                rules::rem_u32(x, y),
            ]
        })
    });
}

/// `<<` and `>>` by any amount use the amount modulo 32; `>>` on i32 is arithmetic.
#[test]
fn shifts_mask_the_amount_to_five_bits() {
    let fixture = Fixture::new();
    check(pairs(word(), shift_amount()), |batch| {
        let (a, b) = split(&batch);
        let out = fixture.run("shifts", &[&a, &b], 4);
        compare(&["u32 <<", "u32 >>", "i32 <<", "i32 >>"], &batch, &out, |x, s| {
            vec![
                rules::shl_u32(x, s),
                rules::shr_u32(x, s),
                rules::shl_u32(x, s),
                rules::shr_i32(x as i32, s) as u32,
            ]
        })
    });
}

/// `+`, `-`, `*` and negation wrap on i32 and u32; abs(MIN) is MIN.
#[test]
fn integer_arithmetic_wraps() {
    let fixture = Fixture::new();
    check(pairs(word(), word()), |batch| {
        let (a, b) = split(&batch);
        let out = fixture.run("wrapping", &[&a, &b], 8);
        compare(
            &[
                "i32 +",
                "i32 -",
                "i32 *",
                "i32 negate",
                "u32 +",
                "u32 -",
                "u32 *",
                "i32 abs",
            ],
            &batch,
            &out,
            |x, y| {
                let (sx, sy) = (x as i32, y as i32);
                vec![
                    sx.wrapping_add(sy) as u32,
                    sx.wrapping_sub(sy) as u32,
                    sx.wrapping_mul(sy) as u32,
                    sx.wrapping_neg() as u32,
                    x.wrapping_add(y),
                    x.wrapping_sub(y),
                    x.wrapping_mul(y),
                    sx.wrapping_abs() as u32,
                ]
            },
        )
    });
}

/// f32 -> i32 and f32 -> u32 truncate and saturate at the largest value both the float
/// and the integer type represent (2147483520 and -2147483648; 4294967040 and 0), as WGSL's
/// "Floating Point Conversion" requires. NaN converts to 0: WGSL leaves it indeterminate,
/// xhal defines 0 on every backend.
#[test]
fn float_to_integer_conversion_saturates() {
    let fixture = Fixture::new();
    check(pairs(float_bits(), float_bits()), |batch| {
        let (a, b) = split(&batch);
        let out = fixture.run("float_to_int", &[&a, &b], 4);
        compare(&["i32(x)", "u32(x)", "i32(y)", "u32(y)"], &batch, &out, |x, y| {
            let (x, y) = (f32::from_bits(x), f32::from_bits(y));
            vec![
                rules::f32_to_i32(x) as u32,
                rules::f32_to_u32(x),
                rules::f32_to_i32(y) as u32,
                rules::f32_to_u32(y),
            ]
        })
    });
}

/// Whether `got` is (the value of) one of `candidates`: NaN matches a NaN, and a zero
/// matches a zero of either sign (WGSL lets an implementation ignore the sign of zero).
fn one_of(got: f32, candidates: &[f32]) -> bool {
    candidates
        .iter()
        .any(|&c| (c.is_nan() && got.is_nan()) || (!c.is_nan() && c == got))
}

fn is_subnormal(x: f32) -> bool {
    x != 0.0 && x.is_finite() && !x.is_normal()
}

/// min, max and clamp on f32. What WGSL guarantees, and so what is checked:
/// - without NaN: min(x, y) is y if y < x, else x; max(x, y) is y if x < y, else x;
///   clamp(x, lo, hi) with lo <= hi is min(max(x, lo), hi) (the median formulation agrees);
///   compared as values, since the sign of a zero may be ignored, and where an operand is
///   subnormal the result may also be a zero (WGSL allows flushing subnormal inputs and
///   outputs of these built-ins to zero).
/// - with a NaN operand: WGSL's finite-math assumption makes the result indeterminate;
///   the CPU backend, being IEEE-754, must return one of the operands (either one: WGSL
///   does not say which), never an unrelated value.
#[test]
fn min_max_clamp_follow_wgsl_and_return_an_operand_for_nan() {
    let fixture = Fixture::new();
    let triples = vec((float_bits(), float_bits(), float_bits()), BATCH).prop_map(|triples| {
        // clamp needs lo <= hi: order the bounds when both are numbers.
        triples
            .into_iter()
            .map(|(x, lo, hi)| {
                let (l, h) = (f32::from_bits(lo), f32::from_bits(hi));
                if !l.is_nan() && !h.is_nan() && h < l {
                    (x, hi, lo)
                } else {
                    (x, lo, hi)
                }
            })
            .collect::<Vec<_>>()
    });
    check(triples, |batch| {
        let a: Vec<u32> = batch.iter().map(|t| t.0).collect();
        let b: Vec<u32> = batch.iter().map(|t| t.1).collect();
        let c: Vec<u32> = batch.iter().map(|t| t.2).collect();
        let out = fixture.run("min_max_clamp", &[&a, &b, &c], 3);
        let mut mismatches = Vec::new();
        for (i, &(xb, yb, zb)) in batch.iter().enumerate() {
            let (x, y, z) = (f32::from_bits(xb), f32::from_bits(yb), f32::from_bits(zb));
            let got: Vec<f32> = out[3 * i..3 * i + 3].iter().map(|&w| f32::from_bits(w)).collect();
            let flushable = [x, y, z].iter().any(|&v| is_subnormal(v));
            let (pair, triple) = ([x, y], [x, y, z]);
            let checks = [
                ("min(x, y)", got[0], pair.as_slice(), if y < x { y } else { x }),
                ("max(x, y)", got[1], pair.as_slice(), if x < y { y } else { x }),
                ("clamp(x, y, z)", got[2], triple.as_slice(), {
                    let low = if x < y { y } else { x };
                    if z < low {
                        z
                    } else {
                        low
                    }
                }),
            ];
            for (name, got, operands, want) in checks {
                let ok = if operands.iter().any(|v| v.is_nan()) {
                    one_of(got, operands)
                } else {
                    one_of(got, &[want]) || (flushable && (got == 0.0 || one_of(got, operands)))
                };
                if !ok {
                    mismatches.push(format!(
                        "{name} with x = {x:e} ({xb:#010x}), y = {y:e} ({yb:#010x}), z = {z:e} ({zb:#010x}): \
                         got {got:e} ({:#010x}), expected {want:e}",
                        got.to_bits()
                    ));
                }
            }
        }
        let count = mismatches.len();
        mismatches.truncate(12);
        prop_assert!(count == 0, "{count} mismatches, first:\n{}", mismatches.join("\n"));
        Ok(())
    });
}

/// countOneBits, reverseBits, firstLeadingBit (unsigned and signed), and with them
/// countLeadingZeros, countTrailingZeros and firstTrailingBit.
#[test]
fn bit_built_ins_follow_wgsl() {
    let fixture = Fixture::new();
    // x = a ^ b in the kernel; a single word in `a` and 0 in `b` would do, but mixing two
    // biased words also reaches patterns like 0x80000001.
    check(pairs(word(), word()), |batch| {
        let (a, b) = split(&batch);
        let out = fixture.run("bits", &[&a, &b], 7);
        compare(
            &[
                "countOneBits",
                "reverseBits",
                "firstLeadingBit(u32)",
                "firstLeadingBit(i32)",
                "countLeadingZeros",
                "countTrailingZeros",
                "firstTrailingBit",
            ],
            &batch,
            &out,
            |a, b| {
                let x = a ^ b;
                vec![
                    rules::count_one_bits(x),
                    rules::reverse_bits(x),
                    rules::first_leading_bit_u32(x),
                    rules::first_leading_bit_i32(x as i32) as u32,
                    x.leading_zeros(),
                    x.trailing_zeros(),
                    rules::first_trailing_bit(x),
                ]
            },
        )
    });
}
