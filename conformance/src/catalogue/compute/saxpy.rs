//! `compute.saxpy`: y = a*x + y, the first kernel anyone runs.

use super::random_f32;
use crate::catalogue::kernels::{groups_for, kernel_of};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_close, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![test_case!(
        "compute.saxpy.f32",
        "y = a*x + y over 10000 random floats matches Rust within one rounding",
        saxpy
    )]
}

const SAXPY: &str = include_str!("saxpy/saxpy.wgsl");

fn saxpy(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "saxpy", SAXPY, "saxpy")?;
    let n = 10_000usize;
    let a = 1.75f32;
    let x = random_f32(context, 1, n);
    let y = random_f32(context, 2, n);
    let x_buffer = context.device().alloc_from(context.stream(), &x)?;
    let y_buffer = context.device().alloc_from(context.stream(), &y)?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&x_buffer)
            .buffer(&y_buffer)
            .scalar(a)
            .scalar(n as u32),
    )?;
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    // A fused multiply-add rounds once instead of twice; both are allowed.
    check_close(
        &context.stream().read_to_vec(&y_buffer)?,
        &expected,
        1e-6,
        "saxpy output",
    )
}
