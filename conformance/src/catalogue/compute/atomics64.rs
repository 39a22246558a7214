//! `compute.atomics64`: the optional 64-bit atomics.

use super::{random_u64, ATOMICS_64};
use crate::catalogue::kernels::{groups_for, kernel_of};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![test_case!(
        "compute.atomics64.add_min_max",
        "64-bit atomicAdd carries across 32 bits, and atomicMin and atomicMax on u64 and i64 match Rust",
        ATOMICS_64,
        atomics64_add_min_max
    )]
}

pub(super) const ATOMICS_64_SOURCE: &str = include_str!("atomics64/add_min_max.wgsl");

fn atomics64_add_min_max(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "64-bit atomics", ATOMICS_64_SOURCE, "combine")?;
    let values = random_u64(context, 32, 1000);
    // The sum starts just below a 32-bit boundary, so the first additions carry.
    let unsigned_start = [0xffff_fff0u64, 0, u64::MAX];
    let signed_start = [i64::MIN, i64::MAX];
    let input = context.device().alloc_from(context.stream(), &values)?;
    let unsigned_results = context.device().alloc_from(context.stream(), &unsigned_start)?;
    let signed_results = context.device().alloc_from(context.stream(), &signed_start)?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(values.len(), 64), 1, 1)
            .buffer(&input)
            .buffer(&unsigned_results)
            .buffer(&signed_results),
    )?;
    let expected_unsigned = [
        values.iter().fold(unsigned_start[0], |acc, v| acc.wrapping_add(*v)),
        values.iter().copied().max().unwrap_or(0),
        values.iter().copied().min().unwrap_or(u64::MAX),
    ];
    let expected_signed = [
        values.iter().map(|&v| v as i64).max().unwrap_or(i64::MIN),
        values.iter().map(|&v| v as i64).min().unwrap_or(i64::MAX),
    ];
    check_slice_eq(
        &context.stream().read_to_vec(&unsigned_results)?,
        &expected_unsigned,
        "u64 atomicAdd, atomicMax, atomicMin",
    )?;
    check_slice_eq(
        &context.stream().read_to_vec(&signed_results)?,
        &expected_signed,
        "i64 atomicMax, atomicMin",
    )
}
