//! `compute.reduce`: reductions through workgroup memory and barriers.

use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_eq, check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.reduce.sum_u32",
            "a tree reduction through workgroup memory and barriers, run pass after pass, sums 100000 words exactly",
            reduce_sum_u32
        ),
        test_case!(
            "compute.reduce.min_max_i32",
            "per-workgroup min and max of signed words by a barrier-synchronised tree match Rust",
            reduce_min_max_i32
        ),
    ]
}

const REDUCE_SUM: &str = include_str!("reduce/sum_u32.wgsl");

fn reduce_sum_u32(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "sum reduction", REDUCE_SUM, "reduce")?;
    let data = context.random_u32(5, 100_000);
    let mut current = context.device().alloc_from(context.stream(), &data)?;
    let mut length = data.len();
    let mut expected_level = data.clone();
    let mut pass = 0;
    while length > 1 {
        pass += 1;
        let groups = length.div_ceil(128);
        let partial = context.device().alloc::<u32>(groups)?;
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(groups as u32, 1, 1)
                .buffer(&current)
                .buffer(&partial)
                .scalar(length as u32),
        )?;
        expected_level = expected_level
            .chunks(128)
            .map(|chunk| chunk.iter().fold(0u32, |acc, v| acc.wrapping_add(*v)))
            .collect();
        check_slice_eq(
            &context.stream().read_to_vec(&partial)?,
            &expected_level,
            &format!("partial sums of pass {pass} over {length} words"),
        )?;
        current = partial;
        length = groups;
    }
    let total = data.iter().fold(0u32, |acc, v| acc.wrapping_add(*v));
    check_eq(
        context.stream().read_to_vec(&current)?,
        vec![total],
        "the sum of 100000 words",
    )
}

const REDUCE_MIN_MAX: &str = include_str!("reduce/min_max_i32.wgsl");

fn reduce_min_max_i32(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "min-max reduction", REDUCE_MIN_MAX, "min_max")?;
    let data: Vec<i32> = context.random_u32(6, 3000).into_iter().map(|v| v as i32).collect();
    let groups = data.len().div_ceil(64);
    let input = context.device().alloc_from(context.stream(), &data)?;
    let extremes = context.device().alloc::<[i32; 2]>(groups)?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups as u32, 1, 1)
            .buffer(&input)
            .buffer(&extremes),
    )?;
    let expected: Vec<[i32; 2]> = data
        .chunks(64)
        .map(|chunk| {
            let low = chunk.iter().copied().min().unwrap_or(i32::MAX);
            let high = chunk.iter().copied().max().unwrap_or(i32::MIN);
            [low, high]
        })
        .collect();
    check_slice_eq(
        &context.stream().read_to_vec(&extremes)?,
        &expected,
        "(min, max) per workgroup of 64",
    )
}
