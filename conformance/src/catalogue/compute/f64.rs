//! `compute.f64`: the optional f64: exact arithmetic and accumulation.

use super::{random_u64, run_elementwise, F64, F64_AND_I64};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check, TestCase, TestResult, Verdict};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.f64.arithmetic",
            "f64 +, -, * are exact where f32 would round (2^40 + 1, 0.1 + 0.2), and / and sqrt are within 1e-12",
            F64,
            f64_arithmetic
        ),
        test_case!(
            "compute.f64.accumulation",
            "adding 0.001 to 1e8 a thousand times in f64 reaches 100000001, which f32 cannot",
            F64,
            f64_accumulation
        ),
        test_case!(
            "compute.f64.from_words",
            "an f64 made with bitcast<f64> from a u64 of two 32-bit words, doubled, and split back gives the exact bits",
            F64_AND_I64,
            f64_from_words
        ),
    ]
}

pub(super) const F64_WORDS: &str = include_str!("f64/words.wgsl");

fn f64_from_words(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f64 from words", F64_WORDS, "join_split")?;
    let values = [0.1f64, -3.5e300, 1.0 + f64::EPSILON, 5e-324, -0.0, 123_456_789.125];
    let words: Vec<u32> = values
        .iter()
        .flat_map(|v| [v.to_bits() as u32, (v.to_bits() >> 32) as u32])
        .collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&words], values.len(), words.len())?;
    for (i, value) in values.iter().enumerate() {
        let got = u64::from(out[2 * i]) | (u64::from(out[2 * i + 1]) << 32);
        let expected = (value * 2.0).to_bits();
        check(got == expected, || {
            format!(
                "bitcast<f64> of {value:e}'s words, doubled: bits {got:#018x} ({:e}), expected {expected:#018x}",
                f64::from_bits(got)
            )
        })?;
    }
    Ok(())
}

pub(super) const F64_ARITHMETIC: &str = include_str!("f64/arithmetic.wgsl");

fn f64_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f64 arithmetic", F64_ARITHMETIC, "arith")?;
    let two40 = 2f64.powi(40);
    let mut a = vec![two40 + 1.0, 0.1, 1e15 + 1.0, 67_108_865.0, 1.0, 16_777_217.0, -2.5e-10];
    let mut b = vec![3.0, 0.2, 1e15, 67_108_865.0, 3.0, 1.0, 7.0e-11];
    for pair in random_u64(context, 30, 120).chunks_exact(2) {
        // Arbitrary doubles of moderate magnitude, with full 52-bit mantissas.
        let value = |bits: u64| f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | (1000 + (bits >> 52) % 47) << 52);
        a.push(value(pair[0]));
        b.push(value(pair[1]));
    }
    let out: Vec<f64> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 5 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let exact = [x + y, x - y, x * y];
        let got = &out[5 * i..5 * i + 5];
        if got[..3].iter().zip(&exact).any(|(g, e)| g.to_bits() != e.to_bits()) {
            return Err(Verdict::mismatch(
                format!("f64 x + y, x - y, x * y for x = {x:e}, y = {y:e}"),
                exact,
                &got[..3],
            ));
        }
        for (k, (value, expected)) in [(got[3], x / y), (got[4], x.abs().sqrt())].into_iter().enumerate() {
            check((value - expected).abs() <= 1e-12 * expected.abs(), || {
                format!(
                    "f64 {} for x = {x:e}, y = {y:e}: got {value:e}, expected {expected:e} within 1e-12 relative",
                    ["x / y", "sqrt(abs(x))"][k]
                )
            })?;
        }
    }
    Ok(())
}

pub(super) const F64_ACCUMULATION: &str = include_str!("f64/accumulation.wgsl");

fn f64_accumulation(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f64 accumulation", F64_ACCUMULATION, "accumulate")?;
    let out = context.device().alloc_from(context.stream(), &[1e8f64])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).buffer(&out).scalar(0.001f64))?;
    let sum = context.stream().read_to_vec(&out)?[0];
    let expected = (0..1000).fold(1e8f64, |acc, _| acc + 0.001);
    check((sum - expected).abs() <= 1e-6, || {
        format!("1e8 plus 0.001 a thousand times gave {sum}, expected {expected} (f32 would stay at 1e8)")
    })
}
