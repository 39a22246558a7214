//! `compute.i64`: the optional i64 and u64 arithmetic.

use super::{random_u64, run_elementwise, I64};
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![test_case!(
        "compute.i64.arithmetic",
        "i64 and u64 +, -, *, /, %, shifts and bitwise operators wrap and carry across 32 bits as Rust does",
        I64,
        i64_arithmetic
    )]
}

pub(super) const I64_ARITHMETIC: &str = include_str!("i64/arithmetic.wgsl");

fn i64_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "i64 arithmetic", I64_ARITHMETIC, "arith")?;
    let mut a: Vec<i64> = vec![0x1_0000_0001, i64::MAX, i64::MIN + 1, -5, 0xffff_ffff, 1 << 40];
    let mut b: Vec<i64> = vec![0x1_0000_0001, 2, 3, 2, 0xffff_ffff, -(1 << 20) - 1];
    for (k, pair) in random_u64(context, 31, 116).chunks_exact(2).enumerate() {
        a.push(pair[0] as i64);
        // Half the divisors small; none zero, and no MIN / -1, whose results are the
        // extension's own to define.
        let divisor = if k % 2 == 0 {
            (pair[1] % 5000) as i64 - 2500
        } else {
            pair[1] as i64
        };
        b.push(if divisor == 0 || divisor == -1 { 3 } else { divisor });
    }
    let out: Vec<i64> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 11 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let (ux, uy) = (x as u64, y as u64);
        let shift = (uy & 63) as u32;
        let expected = [
            x.wrapping_add(y),
            x.wrapping_sub(y),
            x.wrapping_mul(y),
            x / y,
            x % y,
            (ux / uy) as i64,
            (ux % uy) as i64,
            x >> shift,
            (ux >> shift) as i64,
            (ux << shift) as i64,
            (x & y) ^ (x | 7),
        ];
        check_slice_eq(
            &out[11 * i..11 * i + 11],
            &expected,
            &format!("+, -, *, /, %, u64 /, u64 %, >>, u64 >>, u64 <<, bitwise for x = {x}, y = {y}"),
        )?;
    }
    Ok(())
}
