//! `compute.atomics`: 32-bit atomics on storage buffers and workgroup memory.

use super::ATOMICS;
use crate::catalogue::kernels::{groups_for, kernel_of};
use crate::catalogue::test_case;
use crate::context::TestContext;
use crate::test_case::{check_eq, check_slice_eq, TestCase, TestResult};
use xhal::Launch;

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.atomics.histogram_storage",
            "atomicAdd on a storage buffer counts 20000 values into 37 bins exactly",
            ATOMICS,
            atomics_histogram_storage
        ),
        test_case!(
            "compute.atomics.histogram_workgroup",
            "atomicAdd on workgroup memory, flushed to storage after a barrier, counts values into 64 bins exactly",
            ATOMICS,
            atomics_histogram_workgroup
        ),
        test_case!(
            "compute.atomics.ticket_counter",
            "atomicAdd returns every value of the counter once: 5000 invocations take 5000 distinct tickets",
            ATOMICS,
            atomics_ticket_counter
        ),
        test_case!(
            "compute.atomics.sub_returns_old",
            "atomicSub returns the value before each subtraction, every one once, and ends at zero",
            ATOMICS,
            atomics_sub_returns_old
        ),
        test_case!(
            "compute.atomics.exchange_chain",
            "atomicExchange hands each value on exactly once: returned values plus the last form 0..=n",
            ATOMICS,
            atomics_exchange_chain
        ),
        test_case!(
            "compute.atomics.min_max_bitwise",
            "atomicMin, atomicMax (u32 and i32), atomicAnd, atomicOr and atomicXor combine 4096 values as Rust does",
            ATOMICS,
            atomics_min_max_bitwise
        ),
        test_case!(
            "compute.atomics.compare_exchange_loops",
            "compare-exchange retry loops build a lock-free maximum and a slot allocator that hands out every slot once",
            ATOMICS,
            atomics_compare_exchange_loops
        ),
        test_case!(
            "compute.atomics.compare_exchange_result",
            "a compare-exchange that cannot match reports the old value and no exchange; one that matches swaps",
            ATOMICS,
            atomics_compare_exchange_result
        ),
    ]
}

const HISTOGRAM_STORAGE: &str = include_str!("atomics/histogram_storage.wgsl");

/// Values with a hot bin, so many invocations contend for one counter.
fn skewed_values(context: &TestContext, seed: u64, count: usize) -> Vec<u32> {
    context
        .random_u32(seed, count)
        .into_iter()
        .map(|v| if v & 3 == 0 { 5 } else { v >> 2 })
        .collect()
}

fn atomics_histogram_storage(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "storage histogram", HISTOGRAM_STORAGE, "histogram")?;
    let values = skewed_values(context, 7, 20_000);
    let bins = 37u32;
    let input = context.device().alloc_from(context.stream(), &values)?;
    let counts = context.device().alloc_from(context.stream(), &[0u32; 37])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(values.len(), 64), 1, 1)
            .buffer(&input)
            .buffer(&counts)
            .scalar(values.len() as u32)
            .scalar(bins),
    )?;
    let mut expected = vec![0u32; 37];
    for v in &values {
        expected[(v % bins) as usize] += 1;
    }
    check_slice_eq(&context.stream().read_to_vec(&counts)?, &expected, "bin counts")
}

const HISTOGRAM_WORKGROUP: &str = include_str!("atomics/histogram_workgroup.wgsl");

fn atomics_histogram_workgroup(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "workgroup histogram", HISTOGRAM_WORKGROUP, "histogram")?;
    let values = skewed_values(context, 8, 10_000);
    let input = context.device().alloc_from(context.stream(), &values)?;
    let counts = context.device().alloc_from(context.stream(), &[0u32; 64])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(values.len(), 64), 1, 1)
            .buffer(&input)
            .buffer(&counts)
            .scalar(values.len() as u32),
    )?;
    let mut expected = vec![0u32; 64];
    for v in &values {
        expected[(v % 64) as usize] += 1;
    }
    check_slice_eq(&context.stream().read_to_vec(&counts)?, &expected, "bin counts")
}

const TICKETS: &str = include_str!("atomics/ticket_counter.wgsl");

fn atomics_ticket_counter(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "ticket counter", TICKETS, "take")?;
    let n = 5000usize;
    let start = 1000u32;
    let counter = context.device().alloc_from(context.stream(), &[start])?;
    let tickets = context.device().alloc_from(context.stream(), &vec![0u32; n])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&counter)
            .buffer(&tickets),
    )?;
    check_eq(
        context.stream().read_to_vec(&counter)?,
        vec![start + n as u32],
        "counter after 5000 increments",
    )?;
    let mut taken = context.stream().read_to_vec(&tickets)?;
    taken.sort_unstable();
    let expected: Vec<u32> = (start..start + n as u32).collect();
    check_slice_eq(&taken, &expected, "tickets taken, sorted")
}

const SUBTRACT: &str = include_str!("atomics/sub_returns_old.wgsl");

fn atomics_sub_returns_old(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "subtract", SUBTRACT, "subtract")?;
    let n = 3000usize;
    let counter = context.device().alloc_from(context.stream(), &[3 * n as u32])?;
    let before = context.device().alloc_from(context.stream(), &vec![0u32; n])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&counter)
            .buffer(&before),
    )?;
    check_eq(
        context.stream().read_to_vec(&counter)?,
        vec![0],
        "counter after subtracting 3 from 9000, 3000 times",
    )?;
    let mut seen = context.stream().read_to_vec(&before)?;
    seen.sort_unstable();
    let expected: Vec<u32> = (1..=n as u32).map(|k| 3 * k).collect();
    check_slice_eq(&seen, &expected, "values returned by atomicSub, sorted")
}

const EXCHANGE: &str = include_str!("atomics/exchange_chain.wgsl");

fn atomics_exchange_chain(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "exchange", EXCHANGE, "swap")?;
    let n = 3000usize;
    let slot = context.device().alloc_from(context.stream(), &[0u32])?;
    let previous = context.device().alloc_from(context.stream(), &vec![u32::MAX; n])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&slot)
            .buffer(&previous),
    )?;
    let mut values = context.stream().read_to_vec(&previous)?;
    values.extend(context.stream().read_to_vec(&slot)?);
    values.sort_unstable();
    let expected: Vec<u32> = (0..=n as u32).collect();
    check_slice_eq(
        &values,
        &expected,
        "values returned by atomicExchange plus the last one left, sorted",
    )
}

const MIN_MAX_BITWISE: &str = include_str!("atomics/min_max_bitwise.wgsl");

fn atomics_min_max_bitwise(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "min/max/bitwise atomics", MIN_MAX_BITWISE, "combine")?;
    // Bits every value has, and bits none has, so And and Or do not saturate.
    let values: Vec<u32> = context
        .random_u32(9, 4096)
        .into_iter()
        .map(|v| (v | 0x0010_0100) & !0x0200_2000)
        .collect();
    let unsigned_start = [u32::MAX, 0, u32::MAX, 0, 0x1234_5678];
    let signed_start = [i32::MAX, i32::MIN];
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
        values.iter().copied().min().unwrap_or(u32::MAX),
        values.iter().copied().max().unwrap_or(0),
        values.iter().fold(u32::MAX, |acc, v| acc & v),
        values.iter().fold(0, |acc, v| acc | v),
        values.iter().fold(0x1234_5678, |acc, v| acc ^ v),
    ];
    let expected_signed = [
        values.iter().map(|&v| v as i32).min().unwrap_or(i32::MAX),
        values.iter().map(|&v| v as i32).max().unwrap_or(i32::MIN),
    ];
    check_slice_eq(
        &context.stream().read_to_vec(&unsigned_results)?,
        &expected_unsigned,
        "u32 atomicMin, atomicMax, atomicAnd, atomicOr, atomicXor",
    )?;
    check_slice_eq(
        &context.stream().read_to_vec(&signed_results)?,
        &expected_signed,
        "i32 atomicMin, atomicMax",
    )
}

const COMPARE_EXCHANGE_LOOPS: &str = include_str!("atomics/compare_exchange_loops.wgsl");

fn atomics_compare_exchange_loops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "compare-exchange loops", COMPARE_EXCHANGE_LOOPS, "cas")?;
    let n = 2048usize;
    let values = context.random_u32(10, n);
    let input = context.device().alloc_from(context.stream(), &values)?;
    let state = context.device().alloc_from(context.stream(), &[0u32, 0])?;
    let slots = context.device().alloc_from(context.stream(), &vec![0u32; n])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&input)
            .buffer(&state)
            .buffer(&slots),
    )?;
    let maximum = values.iter().copied().max().unwrap_or(0);
    check_eq(
        context.stream().read_to_vec(&state)?,
        vec![maximum, n as u32],
        "(running maximum, slots handed out)",
    )?;
    let mut owners = context.stream().read_to_vec(&slots)?;
    owners.sort_unstable();
    let expected: Vec<u32> = (1..=n as u32).collect();
    check_slice_eq(&owners, &expected, "owners written to the slots, sorted")
}

const COMPARE_EXCHANGE_RESULT: &str = include_str!("atomics/compare_exchange_result.wgsl");

fn atomics_compare_exchange_result(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "compare-exchange result", COMPARE_EXCHANGE_RESULT, "probe")?;
    let cell = context.device().alloc_from(context.stream(), &[5u32])?;
    let out = context.device().alloc_from(context.stream(), &[u32::MAX; 6])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).buffer(&cell).buffer(&out))?;
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &[5, 0, 5, 5, 1, 9],
        "(old, exchanged, value after) for compare 3 on 5, then compare 5 on 5, each to store 9",
    )
}
