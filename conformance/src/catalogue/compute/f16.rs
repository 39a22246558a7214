//! `compute.f16`: the optional f16: arithmetic, rounding and storage.

use super::{check_floats, run_elementwise, Expected, Rule, F16};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.f16.arithmetic",
            "f16 +, -, *, /, min, max and abs on values f16 represents exactly give the exact results",
            F16,
            f16_arithmetic
        ),
        test_case!(
            "compute.f16.precision",
            "f16 arithmetic rounds to f16: 2048 + 1 and 1 + 2^-11 give a neighbouring f16, not the f32 sum",
            F16,
            f16_precision
        ),
        test_case!(
            "compute.f16.storage",
            "array<f16> buffers are read and written two bytes per element",
            F16,
            f16_storage
        ),
    ]
}

/// The f32 value of f16 bits (exact: every f16 is an f32).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f32::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(exponent - 15),
    }
}

/// The f16 bits of `value`, which must be a normal f16 (or zero) exactly.
fn f32_to_f16_exact(value: f32) -> Option<u16> {
    if value == 0.0 {
        return Some(if value.is_sign_negative() { 0x8000 } else { 0 });
    }
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mantissa = bits & 0x7f_ffff;
    if !(1..=30).contains(&exponent) || mantissa & 0x1fff != 0 {
        return None;
    }
    Some(sign | (exponent as u16) << 10 | (mantissa >> 13) as u16)
}

pub(super) const F16_ARITHMETIC: &str = include_str!("f16/arithmetic.wgsl");

fn f16_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 arithmetic", F16_ARITHMETIC, "arith")?;
    // x: quarters up to 64 in magnitude; y: powers of two, so every result is an exact f16.
    let raw = context.random_u32(29, 256);
    let a: Vec<f32> = raw[..128].iter().map(|v| (v % 513) as f32 / 4.0 - 64.0).collect();
    let b: Vec<f32> = raw[128..]
        .iter()
        .map(|v| {
            let magnitude = 2f32.powi((v % 9) as i32 - 3);
            if v & 16 == 0 {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for (&x, &y) in a.iter().zip(&b) {
        // Division is the one operation WGSL does not require to round correctly.
        let results = [
            ("x + y", x + y, Rule::Exact),
            ("x - y", x - y, Rule::Exact),
            ("x * y", x * y, Rule::Exact),
            ("x / y", x / y, Rule::Relative(2e-3)),
            ("min(x, y)", x.min(y), Rule::Exact),
            ("max(x, y)", x.max(y), Rule::Exact),
            ("abs(x) * 0.5", x.abs() * 0.5, Rule::Exact),
        ];
        expected.extend(results.into_iter().map(|(name, value, rule)| Expected {
            value,
            rule,
            label: format!("f16 {name} for x = {x}, y = {y}"),
        }));
    }
    check_floats(&out, &expected, "f16 arithmetic")
}

fn f16_precision(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 arithmetic", F16_ARITHMETIC, "arith")?;
    let a = [2048.0f32, 1.0, 1000.0];
    let b = [1.0f32, 2f32.powi(-11), 0.125];
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    // x + y for each pair: the exact sum is halfway between two f16 values (or, for
    // 1000 + 0.125, between 1000 and 1000.5), and WGSL allows either neighbour.
    let allowed: [[f32; 2]; 3] = [[2048.0, 2050.0], [1.0, 1.0 + 2f32.powi(-10)], [1000.0, 1000.5]];
    for (k, neighbours) in allowed.iter().enumerate() {
        let sum = out[7 * k];
        check(neighbours.contains(&sum), || {
            format!(
                "f16 {} + {} gave {sum}; an f16 sum is one of {neighbours:?}, not the f32 sum {}",
                a[k],
                b[k],
                a[k] + b[k]
            )
        })?;
    }
    Ok(())
}

pub(super) const F16_STORAGE: &str = include_str!("f16/storage.wgsl");

fn f16_storage(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 storage", F16_STORAGE, "scale")?;
    let values: Vec<f32> = (0..80).map(|k| (k as f32 - 40.0) * 3.125).collect();
    let input: Vec<u16> = values.iter().filter_map(|&v| f32_to_f16_exact(v)).collect();
    check_eq(input.len(), values.len(), "inputs exactly representable in f16")?;
    let out: Vec<u16> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let got: Vec<f32> = out.iter().map(|&bits| f16_to_f32(bits)).collect();
    let expected: Vec<Expected> = values
        .iter()
        .map(|v| Expected {
            value: v * 2.0 - 1.0,
            rule: Rule::Exact,
            label: format!("{v} * 2 - 1 in array<f16>"),
        })
        .collect();
    check_floats(&got, &expected, "f16 buffer elements")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_helpers_round_trip_exact_values() {
        for value in [0.0f32, 1.0, -1.5, 65504.0, 2f32.powi(-14), 1000.5] {
            let bits = f32_to_f16_exact(value).unwrap();
            assert_eq!(f16_to_f32(bits), value);
        }
        assert_eq!(f32_to_f16_exact(1.0), Some(0x3c00));
        assert_eq!(f32_to_f16_exact(1.0 + 2f32.powi(-11)), None);
        assert_eq!(f32_to_f16_exact(70000.0), None);
    }
}
