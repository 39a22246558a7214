//! `compute.functions`: function calls, and built-ins passed as a struct.

use super::run_elementwise;
use crate::catalogue::kernels::kernel_of;
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.functions.calls",
            "functions returning structs, taking pointers, returning early from loops and updating private variables compute as written",
            functions_calls
        ),
        test_case!(
            "compute.functions.struct_of_builtins",
            "an entry point that takes its built-ins as members of a struct argument, beside a plain one, sees each as its own",
            functions_struct_of_builtins
        ),
    ]
}

const STRUCT_OF_BUILTINS: &str = include_str!("functions/struct_of_builtins.wgsl");

fn functions_struct_of_builtins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "struct of built-ins", STRUCT_OF_BUILTINS, "split")?;
    let groups = 3usize;
    let input: Vec<u32> = context.random_u32(66, groups * 64).iter().map(|v| v % 1000).collect();
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let expected: Vec<u32> = (0..groups * 64)
        .map(|global| {
            let (group, lane) = (global / 64, global % 64);
            let mirrored = group * 64 + 63 - lane;
            (input[mirrored] as usize + (63 - lane) + group * 1000 + groups * 100_000) as u32
        })
        .collect();
    check_slice_eq(
        &out,
        &expected,
        "values placed by each member of the struct of built-ins",
    )
}

const FUNCTIONS: &str = include_str!("functions/calls.wgsl");

fn functions_calls(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "functions", FUNCTIONS, "calls_kernel")?;
    let input = context.random_u32(27, 600);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), 3 * input.len())?;
    for (i, &v) in input.iter().enumerate() {
        let accumulate = |total: u32, x: u32| total.wrapping_mul(3).wrapping_add(x);
        let combine = (v & 0xffff).wrapping_mul(7).wrapping_add(v >> 16);
        let nibble = (0..8).find(|k| (v >> (4 * k)) & 15 == 5).unwrap_or(99);
        let once = v ^ (v >> 3);
        let twice = once ^ (once >> 3);
        let total = accumulate(accumulate(accumulate(1, combine), nibble), twice);
        let swapped = ((v & 0xffff) << 16) | (v >> 16);
        check_slice_eq(
            &out[3 * i..3 * i + 3],
            &[total, 2, swapped],
            &format!("(accumulated total, calls to `counted`, halves swapped) for input {v:#x}"),
        )?;
    }
    Ok(())
}
