//! `compute.matmul`: matrix products staged through workgroup memory in tiles.

use super::random_f32;
use crate::catalogue::kernels::{groups_for, kernel_of, require_workgroup_shape};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_close, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.matmul.tiled_square",
            "a 64x64x64 matrix product staged through workgroup memory in 16x16 tiles matches Rust",
            matmul_square
        ),
        test_case!(
            "compute.matmul.tiled_ragged",
            "a 120x88 by 88x72 matrix product, no side a multiple of the tile, matches Rust",
            matmul_ragged
        ),
    ]
}

const MATMUL: &str = include_str!("../../../../examples/kernels/matmul.wgsl");

fn run_matmul(context: &TestContext, m: usize, n: usize, k: usize) -> TestResult {
    require_workgroup_shape(context, [16, 16, 1])?;
    let kernel = kernel_of(context, "tiled matmul", MATMUL, "matmul")?;
    let a = random_f32(context, 3, m * k);
    let b = random_f32(context, 4, k * n);
    let a_buffer = context.device().alloc_from(context.stream(), &a)?;
    let b_buffer = context.device().alloc_from(context.stream(), &b)?;
    let c_buffer = context.device().alloc_from(context.stream(), &vec![f32::NAN; m * n])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 16), groups_for(m, 16), 1)
            .buffer(&a_buffer)
            .buffer(&b_buffer)
            .buffer(&c_buffer)
            .scalar(m as u32)
            .scalar(n as u32)
            .scalar(k as u32),
    )?;
    let mut expected = vec![0f32; m * n];
    for row in 0..m {
        for col in 0..n {
            let sum: f64 = (0..k)
                .map(|i| f64::from(a[row * k + i]) * f64::from(b[i * n + col]))
                .sum();
            expected[row * n + col] = sum as f32;
        }
    }
    check_close(
        &context.stream().read_to_vec(&c_buffer)?,
        &expected,
        1e-4,
        &format!("{m}x{k} by {k}x{n} product, row-major"),
    )
}

fn matmul_square(context: &TestContext) -> TestResult {
    run_matmul(context, 64, 64, 64)
}

fn matmul_ragged(context: &TestContext) -> TestResult {
    run_matmul(context, 120, 72, 88)
}
