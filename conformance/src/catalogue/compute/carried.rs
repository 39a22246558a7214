//! `compute.carried`: values carried across barriers: in loops, through pointers, in functions and switches.

use super::run_elementwise;
use crate::catalogue::kernels::{kernel_of, require_workgroup_shape};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.carried.pointer_across_barriers",
            "a read position advanced by every invocation before a barrier, in a loop, indexes the next pass's loads",
            carried_pointer_across_barriers
        ),
        test_case!(
            "compute.carried.while_tree_reduction",
            "a tree reduction written as a while loop, halving its offset between the barriers, sums each workgroup",
            carried_while_tree_reduction
        ),
        test_case!(
            "compute.carried.stride_and_counter",
            "a stride doubled between two barriers, and a counter stepped through a pointer in an inner loop, reach every invocation alike",
            carried_stride_and_counter
        ),
        test_case!(
            "compute.carried.barriers_in_functions",
            "functions with barriers, called in a loop, from each other, and returning early after their last barrier, compute as written",
            carried_barriers_in_functions
        ),
        test_case!(
            "compute.carried.barriers_in_switch",
            "a switch on a uniform selector with barriers in its cases, a non-uniform break after the barrier, and a continue inside a switch in a loop with a barrier",
            carried_barriers_in_switch
        ),
    ]
}

const CARRIED: &str = include_str!("carried/carried.wgsl");

/// Workgroups of 64 in the `CARRIED` kernels: enough for several, few enough to stay quick.
const CARRIED_GROUPS: usize = 5;

fn carried_pointer_across_barriers(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "pointer walk", CARRIED, "walk")?;
    let input: Vec<u32> = context
        .random_u32(61, CARRIED_GROUPS * 256)
        .iter()
        .map(|v| v % 100_000)
        .collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], CARRIED_GROUPS * 64, CARRIED_GROUPS * 64)?;
    let expected: Vec<u32> = (0..CARRIED_GROUPS)
        .flat_map(|group| {
            let input = &input;
            (0..64).map(move |lane| {
                let sum = (0..4).fold(0u32, |acc, pass| {
                    acc.wrapping_add(input[group * 256 + pass * 64 + 63 - lane].wrapping_mul(pass as u32 + 1))
                });
                sum.wrapping_add((group * 256 + 256) as u32)
            })
        })
        .collect();
    check_slice_eq(
        &out,
        &expected,
        "sums over four passes of a position advanced before each barrier",
    )
}

fn carried_while_tree_reduction(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "while-loop reduction", CARRIED, "tree")?;
    let input = context.random_u32(62, CARRIED_GROUPS * 64);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let expected: Vec<u32> = input
        .chunks_exact(64)
        .flat_map(|group| [group.iter().fold(0u32, |acc, v| acc.wrapping_add(*v)); 64])
        .collect();
    check_slice_eq(&out, &expected, "each workgroup's sum, seen by all of its invocations")
}

fn carried_stride_and_counter(context: &TestContext) -> TestResult {
    require_workgroup_shape(context, [8, 8, 1])?;
    let kernel = kernel_of(context, "doubling strides", CARRIED, "strides")?;
    let input: Vec<u32> = context
        .random_u32(63, CARRIED_GROUPS * 64)
        .iter()
        .map(|v| v % 1000)
        .collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let mut expected = Vec::with_capacity(input.len());
    for group in input.chunks_exact(64) {
        let mut tile = group.to_vec();
        let mut stride = 1;
        while stride < 64 {
            stride *= 2;
            let before = tile.clone();
            for lane in (0..64).step_by(stride) {
                tile[lane] = before[lane].wrapping_add(before[(lane + stride / 2) % 64]);
            }
        }
        // Six rounds, each stepping the counter by 0 + 1 + 2.
        expected.extend(tile.iter().map(|v| v.wrapping_mul(1000).wrapping_add(64 * 100 + 18)));
    }
    check_slice_eq(
        &out,
        &expected,
        "pairwise sums at doubling strides, with the stride and the counter",
    )
}

const BARRIER_PLACES: &str = include_str!("carried/barrier_places.wgsl");

/// Workgroups of 64 in the `BARRIER_PLACES` kernels: each case of the switch twice.
const BARRIER_PLACE_GROUPS: usize = 8;

fn carried_barriers_in_functions(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "barriers in functions", BARRIER_PLACES, "calls")?;
    let input: Vec<u32> = context
        .random_u32(64, BARRIER_PLACE_GROUPS * 64)
        .iter()
        .map(|v| v % 100_000)
        .collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let mut expected = Vec::with_capacity(input.len());
    for group in input.chunks_exact(64) {
        let sum = group.iter().fold(0u32, |acc, v| acc.wrapping_add(*v));
        for (lane, value) in group.iter().enumerate() {
            let acc = (0..3u32).fold(0u32, |acc, k| acc.wrapping_add(sum.wrapping_add(64 * k)));
            let mirrored = if lane % 2 == 0 {
                group[63 - lane]
            } else {
                1_000_000 + value
            };
            let twice = sum.wrapping_add(sum.wrapping_mul(2));
            expected.push(acc.wrapping_mul(7).wrapping_add(mirrored).wrapping_add(twice));
        }
    }
    check_slice_eq(
        &out,
        &expected,
        "sums, mirrored values and nested sums from functions with barriers",
    )
}

fn carried_barriers_in_switch(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "barriers in a switch", BARRIER_PLACES, "switched")?;
    let input: Vec<u32> = context
        .random_u32(65, BARRIER_PLACE_GROUPS * 64)
        .iter()
        .map(|v| v % 100_000)
        .collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let mut expected = Vec::with_capacity(input.len());
    for (index, group) in input.chunks_exact(64).enumerate() {
        let sum = group.iter().fold(0u32, |acc, v| acc.wrapping_add(*v));
        for lane in 0..64 {
            let result = match index % 4 {
                0 => group[63 - lane],
                1 | 2 if lane < 10 => 5,
                1 | 2 => group[(lane + 1) % 64].wrapping_mul(2),
                _ => sum,
            };
            // Steps 0, 2 and 3 add themselves and 10; step 1 continues past both.
            expected.push(result.wrapping_mul(100).wrapping_add(35));
        }
    }
    check_slice_eq(
        &out,
        &expected,
        "each workgroup's case of the switch, and the steps a continue skipped",
    )
}
