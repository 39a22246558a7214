//! `compute.storage`: storage buffers declared as structs.

use super::run_elementwise;
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![test_case!(
        "compute.storage.struct_of_one_runtime_array",
        "storage buffers declared as structs whose only member is a runtime-sized array are read, written and measured",
        storage_struct_of_one_runtime_array
    )]
}

const STRUCT_OF_ONE_RUNTIME_ARRAY: &str = include_str!("storage/struct_of_one_runtime_array.wgsl");

fn storage_struct_of_one_runtime_array(context: &TestContext) -> TestResult {
    let kernel = kernel_of(
        context,
        "struct of one runtime array",
        STRUCT_OF_ONE_RUNTIME_ARRAY,
        "scaled",
    )?;
    let input = context.random_u32(64, 1000);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], 1000, 1000)?;
    let expected: Vec<u32> = input.iter().map(|v| v.wrapping_mul(3).wrapping_add(1000)).collect();
    check_slice_eq(&out, &expected, "values read and written through one-member structs")
}
