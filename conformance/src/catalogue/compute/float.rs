//! `compute.float`: IEEE 754 special values, and conversions from float to integer.

use super::{check_floats, run_elementwise, Expected, Rule};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, Requirement, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.float.nan_propagation",
            "NaN operands and invalid operations (0/0, inf-inf, 0*inf) give NaN, and NaN compares unequal, as IEEE 754 says",
            Requirement::IEEE754,
            float_nan_propagation
        ),
        test_case!(
            "compute.float.infinity_arithmetic",
            "division by zero and overflow give infinities, which compute and compare as IEEE 754 says",
            Requirement::IEEE754,
            float_infinity_arithmetic
        ),
        test_case!(
            "compute.float.signed_zero",
            "arithmetic keeps the sign of zero as IEEE 754 says, so 1 / -0.0 is -inf",
            Requirement::IEEE754,
            float_signed_zero
        ),
        test_case!(
            "compute.float.to_int_saturates",
            "f32 to i32 and u32 truncates and saturates at the largest value both types share, infinities included",
            float_to_int_saturates
        ),
        test_case!(
            "compute.float.nan_to_int_is_zero",
            "i32(NaN) and u32(NaN) are 0, as xhal defines them on every backend",
            Requirement::IEEE754,
            float_nan_to_int_is_zero
        ),
    ]
}

const FLOAT_PAIRS: &str = include_str!("float/pairs.wgsl");

/// Runs [`FLOAT_PAIRS`] and compares with Rust's IEEE 754 arithmetic. The sign of a zero
/// is held for +, -, *, / and negation when `signed_zero`; sqrt is held to its value.
fn run_float_pairs(context: &TestContext, pairs: &[(f32, f32)], signed_zero: bool, what: &str) -> TestResult {
    let kernel = kernel_of(context, "float pairs", FLOAT_PAIRS, "pairs")?;
    let (a, b): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for &(x, y) in pairs {
        let flags = u32::from(x == y)
            | u32::from(x != y) << 1
            | u32::from(x < y) << 2
            | u32::from(x <= y) << 3
            | u32::from(x > y) << 4
            | u32::from(x >= y) << 5;
        let arithmetic = Rule::Ieee { signed_zero };
        let results = [
            ("x + y", x + y, arithmetic),
            ("x - y", x - y, arithmetic),
            ("x * y", x * y, arithmetic),
            ("x / y", x / y, arithmetic),
            ("-x", -x, arithmetic),
            ("sqrt(x)", x.sqrt(), Rule::Ieee { signed_zero: false }),
            (
                "comparison flags (==, !=, <, <=, >, >= as bits 0..5)",
                flags as f32,
                Rule::Exact,
            ),
        ];
        expected.extend(results.into_iter().map(|(operation, value, rule)| Expected {
            value,
            rule,
            label: format!("{operation} for x = {x:?}, y = {y:?}"),
        }));
    }
    check_floats(&out, &expected, what)
}

fn float_nan_propagation(context: &TestContext) -> TestResult {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    run_float_pairs(
        context,
        &[
            (nan, 1.0),
            (1.0, nan),
            (nan, nan),
            (nan, 0.0),
            (-nan, 2.5),
            (0.0, 0.0),
            (inf, inf),
            (0.0, inf),
            (-inf, -inf),
            (-4.0, 2.0),
        ],
        false,
        "NaN arithmetic",
    )
}

fn float_infinity_arithmetic(context: &TestContext) -> TestResult {
    let inf = f32::INFINITY;
    run_float_pairs(
        context,
        &[
            (1.0, 0.0),
            (inf, 1.0),
            (inf, -2.0),
            (1.0, inf),
            (-inf, 5.0),
            // Divisors stay within 2^126, where WGSL bounds the error of division.
            (f32::MAX, 2f32.powi(126)),
            (f32::MAX, 2.0),
            (-f32::MAX, 2f32.powi(126)),
            (inf, -inf),
            (3.0, -inf),
        ],
        false,
        "infinity arithmetic",
    )
}

fn float_signed_zero(context: &TestContext) -> TestResult {
    run_float_pairs(
        context,
        &[
            (-0.0, -0.0),
            (0.0, -0.0),
            (-0.0, 0.0),
            (-0.0, 5.0),
            (1.0, -0.0),
            (-1.0, f32::INFINITY),
            (-0.0, 1.0),
        ],
        true,
        "signed zero arithmetic",
    )
}

const FLOAT_TO_INT: &str = include_str!("float/to_int.wgsl");

/// `i32(f32)` per WGSL: the value closest to trunc(x) that f32 also represents, so 2^31
/// and above give 2147483520 (2^31 - 128).
fn f32_to_i32(x: f32) -> i32 {
    if x >= 2_147_483_648.0 {
        2_147_483_520
    } else if x <= -2_147_483_648.0 {
        i32::MIN
    } else {
        x.trunc() as i32
    }
}

/// `u32(f32)` per WGSL: negatives give 0, 2^32 and above give 4294967040 (2^32 - 256).
fn f32_to_u32(x: f32) -> u32 {
    if x <= 0.0 {
        0
    } else if x >= 4_294_967_296.0 {
        4_294_967_040
    } else {
        x.trunc() as u32
    }
}

fn float_to_int_saturates(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float to int", FLOAT_TO_INT, "convert")?;
    let floats = [
        0.0f32,
        -0.0,
        0.5,
        -0.5,
        0.999_999_94,
        -0.999_999_94,
        1.5,
        -1.5,
        -7.75,
        16_777_216.0,
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_904.0,
        4_294_967_040.0,
        4_294_967_296.0,
        3.0e9,
        -3.0e9,
        1.0e20,
        -1.0e20,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&floats], floats.len(), 2 * floats.len())?;
    for (i, &x) in floats.iter().enumerate() {
        check_slice_eq(
            &out[2 * i..2 * i + 2],
            &[f32_to_i32(x) as u32, f32_to_u32(x)],
            &format!("i32({x:?}) as bits, u32({x:?})"),
        )?;
    }
    Ok(())
}

fn float_nan_to_int_is_zero(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float to int", FLOAT_TO_INT, "convert")?;
    let floats = [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001)];
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&floats], floats.len(), 2 * floats.len())?;
    check_slice_eq(
        &out,
        &[0; 6],
        "i32(NaN) and u32(NaN) for a quiet, a negative and a signalling NaN",
    )
}
