//! `compute.control_flow`: divergent loops, early returns, switches, and reconvergence at a barrier.

use super::run_elementwise;
use crate::catalogue::kernels::{groups_for, kernel_of};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.control_flow.divergent_loops",
            "loops whose trip counts, continues and breaks differ per invocation give each invocation its own result",
            control_flow_divergent_loops
        ),
        test_case!(
            "compute.control_flow.early_return",
            "invocations returning early at different points write exactly what they reached",
            control_flow_early_return
        ),
        test_case!(
            "compute.control_flow.switch",
            "switch on u32 and negative i32 selectors, with case lists and default, picks each invocation's branch",
            control_flow_switch
        ),
        test_case!(
            "compute.control_flow.reconverge_at_barrier",
            "invocations that diverged in loops and branches meet at a barrier and see each other's writes",
            control_flow_reconverge_at_barrier
        ),
    ]
}

const DIVERGENT_LOOPS: &str = include_str!("control_flow/divergent_loops.wgsl");

fn control_flow_divergent_loops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "divergent loops", DIVERGENT_LOOPS, "diverge")?;
    let input = context.random_u32(23, 500);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), 3 * input.len())?;
    for (i, &v) in input.iter().enumerate() {
        let mut acc = v;
        for k in 0..v % 23 {
            if k & 1 == 1 {
                continue;
            }
            acc = acc.wrapping_mul(31).wrapping_add(k);
            if acc % 97 == 0 {
                break;
            }
        }
        let mut steps = 0u32;
        let mut x = v % 5000 + 1;
        while x != 1 {
            x = if x & 1 == 0 {
                x / 2
            } else {
                x.wrapping_mul(3).wrapping_add(1)
            };
            steps += 1;
            if steps >= 150 {
                break;
            }
        }
        for s in 1..=(v >> 28) {
            acc ^= s << 3;
        }
        check_slice_eq(
            &out[3 * i..3 * i + 3],
            &[acc, steps, x],
            &format!("(accumulator, Collatz steps, last Collatz value) for input {v}"),
        )?;
    }
    Ok(())
}

const EARLY_RETURN: &str = include_str!("control_flow/early_return.wgsl");

fn control_flow_early_return(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "early return", EARLY_RETURN, "early")?;
    let input = context.random_u32(24, 1000);
    let sentinel = 0xdead_beefu32;
    let input_buffer = context.device().alloc_from(context.stream(), &input)?;
    let out = context
        .device()
        .alloc_from(context.stream(), &vec![sentinel; input.len()])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(input.len(), 64), 1, 1)
            .buffer(&input_buffer)
            .buffer(&out),
    )?;
    let expected: Vec<u32> = input
        .iter()
        .map(|&v| {
            if v % 3 == 0 {
                return sentinel;
            }
            let doubled = v.wrapping_mul(2);
            if v % 5 == 0 {
                return doubled;
            }
            match (0..8).find(|k| (v >> (k * 4)) & 15 == 9) {
                Some(k) => doubled.wrapping_add(k + 1),
                None => doubled.wrapping_add(1000),
            }
        })
        .collect();
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "output of invocations returning at different points (0xdeadbeef: returned before writing)",
    )
}

const SWITCH: &str = include_str!("control_flow/switch.wgsl");

fn control_flow_switch(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "switch", SWITCH, "branches")?;
    let input = context.random_u32(25, 700);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let expected: Vec<u32> = input
        .iter()
        .map(|&v| {
            let base = match v % 7 {
                0 => 100,
                1 | 2 => 200 + v % 7,
                5 if v > 2_147_483_648 => 500,
                5 => 501,
                _ => 300,
            };
            base + match (v as i32) % 3 {
                -2 => 10,
                -1 => 20,
                0 => 30,
                _ => 40,
            }
        })
        .collect();
    check_slice_eq(&out, &expected, "switch results")
}

const RECONVERGE: &str = include_str!("control_flow/reconverge_at_barrier.wgsl");

fn control_flow_reconverge_at_barrier(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "reconverge", RECONVERGE, "reconverge")?;
    let input = context.random_u32(26, 64 * 8);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let mut expected = Vec::with_capacity(input.len());
    for group in input.chunks_exact(64) {
        let values: Vec<u32> = group
            .iter()
            .enumerate()
            .map(|(lane, &v)| {
                let mut v = (0..v % 13).fold(v, |acc, k| acc.wrapping_mul(7).wrapping_add(k));
                if lane & 1 == 1 {
                    v = !v;
                }
                v
            })
            .collect();
        expected.extend((0..64).map(|lane| values[63 - lane].wrapping_add(values[(lane + 1) % 64])));
    }
    check_slice_eq(
        &out,
        &expected,
        "values exchanged through workgroup memory after divergent loops",
    )
}
