//! The `memory` area: allocation, and write, read, copy and fill at every size and offset.

use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, expect_error, TestCase, TestResult};
use xhal::ErrorKind;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "memory.roundtrip.random_u32",
            "1 MiB of random words written and read back arrive unchanged",
            roundtrip_random_u32
        ),
        test_case!(
            "memory.copy.out_of_bounds",
            "a copy reaching past the end of a buffer is refused as out of bounds",
            copy_out_of_bounds
        ),
    ]
}

fn roundtrip_random_u32(context: &TestContext) -> TestResult {
    let data = context.random_u32(1, 1 << 18);
    let buffer = context.device().alloc_from(context.stream(), &data)?;
    let back = context.stream().read_to_vec(&buffer)?;
    check_slice_eq(&back, &data, "read back")
}

fn copy_out_of_bounds(context: &TestContext) -> TestResult {
    let source = context.device().alloc::<u32>(16)?;
    let destination = context.device().alloc::<u32>(16)?;
    expect_error(
        context.stream().copy(&source, 8, &destination, 0, 9),
        &[ErrorKind::OutOfBounds],
        "copying 9 elements from offset 8 of a 16-element buffer",
    )?;
    Ok(())
}
