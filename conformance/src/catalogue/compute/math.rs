//! `compute.math`: math built-ins, exact and approximate.

use super::{check_floats, random_f32, run_elementwise, Expected, Rule};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_close, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.math.exact_builtins",
            "abs, min, max, clamp, floor, ceil, trunc, round (ties to even), fract, sign, step and fma are exact on dyadic inputs",
            math_exact_builtins
        ),
        test_case!(
            "compute.math.transcendentals",
            "exp, log, sin, cos, pow, sqrt, inverseSqrt and atan2 are within 1e-3 of Rust on moderate inputs",
            math_transcendentals
        ),
    ]
}

const EXACT_BUILTINS: &str = include_str!("math/exact_builtins.wgsl");

fn math_exact_builtins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "exact built-ins", EXACT_BUILTINS, "exact")?;
    // Multiples of 1/8 up to 16: every result below is exactly representable.
    let mut a = vec![2.5f32, -2.5, 0.5, -0.5, 1.5, 3.5, -3.5, 0.0, -0.0, 7.0, -7.125, 3.25];
    let mut b = vec![1.0f32, -3.0, 0.5, 0.5, 2.0, 3.5, -4.0, 0.0, 1.0, 7.0, -7.125, -1.0];
    for (k, v) in context.random_u32(15, 104).chunks_exact(2).enumerate() {
        a.push((v[0] % 257) as f32 / 8.0 - 16.0);
        b.push(if k % 5 == 0 {
            a[a.len() - 1]
        } else {
            (v[1] % 257) as f32 / 8.0 - 16.0
        });
    }
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 13 * a.len())?;
    let names = [
        "abs(x)",
        "min(x, y)",
        "max(x, y)",
        "clamp(x, -2.5, 3.25)",
        "floor(x)",
        "ceil(x)",
        "trunc(x)",
        "round(x)",
        "fract(x)",
        "sign(x)",
        "step(y, x)",
        "fma(x, y, 0.5)",
        "x * x - y",
    ];
    let mut expected = Vec::with_capacity(out.len());
    for (&x, &y) in a.iter().zip(&b) {
        let sign = if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        };
        let values = [
            x.abs(),
            x.min(y),
            x.max(y),
            x.clamp(-2.5, 3.25),
            x.floor(),
            x.ceil(),
            x.trunc(),
            x.round_ties_even(),
            x - x.floor(),
            sign,
            if x >= y { 1.0 } else { 0.0 },
            x * y + 0.5,
            x * x - y,
        ];
        expected.extend(names.iter().zip(values).map(|(name, value)| Expected {
            value,
            rule: Rule::Exact,
            label: format!("{name} for x = {x:?}, y = {y:?}"),
        }));
    }
    check_floats(&out, &expected, "exact math built-ins")
}

const TRANSCENDENTALS: &str = include_str!("math/transcendentals.wgsl");

fn math_transcendentals(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "transcendentals", TRANSCENDENTALS, "approximate")?;
    // x in [-pi, pi), y in [0.5, 8.5).
    let a: Vec<f32> = random_f32(context, 16, 200)
        .into_iter()
        .map(|v| v * std::f32::consts::PI)
        .collect();
    let b: Vec<f32> = random_f32(context, 17, 200)
        .into_iter()
        .map(|v| v * 4.0 + 4.5)
        .collect();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 8 * a.len())?;
    let expected: Vec<f32> = a
        .iter()
        .zip(&b)
        .flat_map(|(&x, &y)| {
            [
                x.exp(),
                y.ln(),
                x.sin(),
                x.cos(),
                y.powf(1.5),
                y.sqrt(),
                1.0 / y.sqrt(),
                x.atan2(y),
            ]
        })
        .collect();
    check_close(
        &out,
        &expected,
        1e-3,
        "exp(x), log(y), sin(x), cos(x), pow(y, 1.5), sqrt(y), inverseSqrt(y), atan2(x, y) per element",
    )
}
