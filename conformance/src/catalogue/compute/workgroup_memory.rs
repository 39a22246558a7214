//! `compute.workgroup_memory`: workgroup memory: zeroed at the start, and shared within a workgroup.

use crate::catalogue::kernels::{kernel_of, require_workgroup_shape};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.workgroup_memory.zero_initialised",
            "every workgroup starts with its workgroup memory zeroed, though earlier workgroups wrote to theirs",
            workgroup_memory_zero_initialised
        ),
        test_case!(
            "compute.workgroup_memory.tile_transpose",
            "a 40x24 matrix transposed through 8x8 tiles of workgroup memory comes out transposed",
            workgroup_memory_tile_transpose
        ),
    ]
}

const ZERO_INITIALISED: &str = include_str!("workgroup_memory/zero_initialised.wgsl");

fn workgroup_memory_zero_initialised(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "zero-initialised workgroup memory", ZERO_INITIALISED, "zeroed")?;
    let groups = 64u32;
    let out = context
        .device()
        .alloc_from(context.stream(), &vec![u32::MAX; 2 * 64 * groups as usize])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(groups, 1, 1).buffer(&out))?;
    let mut expected = Vec::new();
    for group in 0..groups {
        for lane in 0..64 {
            expected.extend([0, group * 1000 + (255 - lane) + 1]);
        }
    }
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "(bits seen in workgroup memory before any write, a word written by the workgroup) per invocation",
    )
}

const TILE_TRANSPOSE: &str = include_str!("workgroup_memory/tile_transpose.wgsl");

fn workgroup_memory_tile_transpose(context: &TestContext) -> TestResult {
    require_workgroup_shape(context, [8, 8, 1])?;
    let kernel = kernel_of(context, "tile transpose", TILE_TRANSPOSE, "transpose_tile")?;
    let (width, height) = (40usize, 24usize);
    let input = context.random_u32(28, width * height);
    let input_buffer = context.device().alloc_from(context.stream(), &input)?;
    let output = context
        .device()
        .alloc_from(context.stream(), &vec![0u32; width * height])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups((width / 8) as u32, (height / 8) as u32, 1)
            .buffer(&input_buffer)
            .buffer(&output)
            .scalar(width as u32)
            .scalar(height as u32),
    )?;
    let mut expected = vec![0u32; width * height];
    for y in 0..height {
        for x in 0..width {
            expected[x * height + y] = input[y * width + x];
        }
    }
    check_slice_eq(
        &context.stream().read_to_vec(&output)?,
        &expected,
        "the transposed 24x40 matrix",
    )
}
