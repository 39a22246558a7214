//! The `compute` area: whole kernels checked against Rust. Linear algebra, reductions with
//! barriers, atomics, WGSL's integer and float rules, vectors and matrices, control flow,
//! function calls, workgroup memory, and the optional f16, f64, i64 and 64-bit atomics.
//!
//! Integer results must match exactly. Float results match exactly where WGSL's accuracy
//! rules make them exact (small dyadic values, correctly rounded operations), and within a
//! stated tolerance elsewhere. Inputs come from buffers, so nothing folds at compile time.

use super::kernels::{groups_for, kernel_of, require_workgroup_shape};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_close, check_eq, check_slice_eq, Requirement, TestCase, TestResult, Verdict};
use xhal::{Features, Launch};

const ATOMICS: Requirement = Requirement::features(Features::ATOMICS_32);
const F16: Requirement = Requirement::features(Features::F16);
const F64: Requirement = Requirement::features(Features::F64);
const I64: Requirement = Requirement::features(Features::I64);
const ATOMICS_64: Requirement = Requirement::features(Features(Features::ATOMICS_64.0 | Features::I64.0));

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "compute.saxpy.f32",
            "y = a*x + y over 10000 random floats matches Rust within one rounding",
            saxpy
        ),
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
        test_case!(
            "compute.int.division",
            "i32 and u32 division and remainder follow WGSL: by zero gives the dividend and 0, MIN / -1 gives MIN",
            int_division
        ),
        test_case!(
            "compute.int.shifts",
            "shifts take their amount modulo 32, and >> on i32 copies the sign bit",
            int_shifts
        ),
        test_case!(
            "compute.int.wrapping",
            "i32 and u32 +, -, *, negation, abs(MIN) and increments wrap around",
            int_wrapping
        ),
        test_case!(
            "compute.int.bit_builtins",
            "countOneBits, reverseBits, firstLeadingBit, firstTrailingBit, countLeading/TrailingZeros, extractBits and insertBits match WGSL's definitions",
            int_bit_builtins
        ),
        test_case!(
            "compute.float.nan_propagation",
            "NaN operands and invalid operations (0/0, inf-inf, 0*inf) give NaN, and NaN compares unequal, as IEEE 754 says",
            Requirement::IEEE754,
            float_nan_propagation
        ),
        test_case!(
            "compute.float.infinity_arithmetic",
            "division by zero and overflow give infinities, which compute and compare as IEEE 754 says",
            Requirement::IEEE754,
            float_infinity_arithmetic
        ),
        test_case!(
            "compute.float.signed_zero",
            "arithmetic keeps the sign of zero as IEEE 754 says, so 1 / -0.0 is -inf",
            Requirement::IEEE754,
            float_signed_zero
        ),
        test_case!(
            "compute.float.to_int_saturates",
            "f32 to i32 and u32 truncates and saturates at the largest value both types share, infinities included",
            float_to_int_saturates
        ),
        test_case!(
            "compute.float.nan_to_int_is_zero",
            "i32(NaN) and u32(NaN) are 0, as xhal defines them on every backend",
            Requirement::IEEE754,
            float_nan_to_int_is_zero
        ),
        test_case!(
            "compute.math.exact_builtins",
            "abs, min, max, clamp, floor, ceil, trunc, round (ties to even), fract, sign, step and fma are exact on dyadic inputs",
            math_exact_builtins
        ),
        test_case!(
            "compute.math.transcendentals",
            "exp, log, sin, cos, pow, sqrt, inverseSqrt and atan2 are within 1e-3 of Rust on moderate inputs",
            math_transcendentals
        ),
        test_case!(
            "compute.vector.integer_ops",
            "vec4<i32> arithmetic, swizzles, comparisons, select, any, all, dot, min, max, clamp, division and remainder match Rust",
            vector_integer_ops
        ),
        test_case!(
            "compute.vector.float_ops",
            "cross, dot, length, normalize, distance and mix on float vectors match Rust within 1e-5",
            vector_float_ops
        ),
        test_case!(
            "compute.matrix.products_and_layout",
            "mat4x4 and mat3x3 (with its padded columns) from buffers multiply, transpose and give determinants as Rust computes",
            matrix_products_and_layout
        ),
        test_case!(
            "compute.matrix.determinants",
            "determinant of 2x2, 3x3 and 4x4 matrices of small integers, where every evaluation order is exact, equals Rust's",
            matrix_determinants
        ),
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
        test_case!(
            "compute.storage.struct_of_one_runtime_array",
            "storage buffers declared as structs whose only member is a runtime-sized array are read, written and measured",
            storage_struct_of_one_runtime_array
        ),
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
        test_case!(
            "compute.f16.arithmetic",
            "f16 +, -, *, /, min, max and abs on values f16 represents exactly give the exact results",
            F16,
            f16_arithmetic
        ),
        test_case!(
            "compute.f16.precision",
            "f16 arithmetic rounds to f16: 2048 + 1 and 1 + 2^-11 give a neighbouring f16, not the f32 sum",
            F16,
            f16_precision
        ),
        test_case!(
            "compute.f16.storage",
            "array<f16> buffers are read and written two bytes per element",
            F16,
            f16_storage
        ),
        test_case!(
            "compute.f64.arithmetic",
            "f64 +, -, * are exact where f32 would round (2^40 + 1, 0.1 + 0.2), and / and sqrt are within 1e-12",
            F64,
            f64_arithmetic
        ),
        test_case!(
            "compute.f64.accumulation",
            "adding 0.001 to 1e8 a thousand times in f64 reaches 100000001, which f32 cannot",
            F64,
            f64_accumulation
        ),
        test_case!(
            "compute.i64.arithmetic",
            "i64 and u64 +, -, *, /, %, shifts and bitwise operators wrap and carry across 32 bits as Rust does",
            I64,
            i64_arithmetic
        ),
        test_case!(
            "compute.atomics64.add_min_max",
            "64-bit atomicAdd carries across 32 bits, and atomicMin and atomicMax on u64 and i64 match Rust",
            ATOMICS_64,
            atomics64_add_min_max
        ),
    ]
}

// ---- helpers -------------------------------------------------------------------------------

/// Seeded floats in [-1, 1), each a multiple of 2^-23, so exactly representable.
fn random_f32(context: &TestContext, seed: u64, count: usize) -> Vec<f32> {
    context
        .random_u32(seed, count)
        .into_iter()
        .map(|value| (value >> 8) as f32 / (1 << 23) as f32 - 1.0)
        .collect()
}

/// Seeded 64-bit words.
fn random_u64(context: &TestContext, seed: u64, count: usize) -> Vec<u64> {
    context
        .random_u32(seed, 2 * count)
        .chunks_exact(2)
        .map(|pair| (u64::from(pair[0]) << 32) | u64::from(pair[1]))
        .collect()
}

/// Runs a 1D kernel with 64-wide workgroups over `count` invocations, binding `inputs` and
/// then a fresh output of `outputs_per_invocation * count` words, and returns the output.
fn run_elementwise<T: bytemuck::Pod, O: bytemuck::Pod>(
    context: &TestContext,
    kernel: &xhal::Kernel,
    inputs: &[&[T]],
    count: usize,
    output_len: usize,
) -> Result<Vec<O>, Verdict> {
    let buffers = inputs
        .iter()
        .map(|data| context.device().alloc_from(context.stream(), data))
        .collect::<xhal::Result<Vec<_>>>()?;
    let output = context
        .device()
        .alloc_from(context.stream(), &vec![O::zeroed(); output_len])?;
    let launch = buffers
        .iter()
        .fold(
            Launch::new(kernel).workgroups(groups_for(count, 64), 1, 1),
            |launch, buffer| launch.buffer(buffer),
        )
        .buffer(&output);
    context.stream().launch(&launch)?;
    Ok(context.stream().read_to_vec(&output)?)
}

/// How a float result is held to its expected value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// The same value (+0 and -0 alike), or both NaN.
    Exact,
    /// IEEE 754 special values exactly: NaN for NaN, the infinity of the right sign, zero
    /// for zero (with its sign when `signed_zero`); finite results within 1e-6 relative,
    /// since WGSL lets +, -, * round either way and / and sqrt be off by a few ulp.
    Ieee { signed_zero: bool },
    /// Within this relative tolerance (NaN and infinities exactly).
    Relative(f32),
}

impl Rule {
    fn holds(self, actual: f32, expected: f32) -> bool {
        if expected.is_nan() {
            return actual.is_nan();
        }
        match self {
            Rule::Exact => actual == expected,
            Rule::Ieee { signed_zero } => {
                if expected.is_infinite() || expected == 0.0 {
                    actual == expected && (!signed_zero || actual.to_bits() == expected.to_bits())
                } else {
                    (actual - expected).abs() <= 1e-6 * expected.abs()
                }
            }
            Rule::Relative(tolerance) => {
                if expected.is_infinite() {
                    actual == expected
                } else {
                    (actual - expected).abs() <= tolerance * expected.abs()
                }
            }
        }
    }
}

/// One expected float result, how it is compared, and what it is.
struct Expected {
    value: f32,
    rule: Rule,
    label: String,
}

/// Fails on the first result that breaks its rule, naming it.
fn check_floats(actual: &[f32], expected: &[Expected], what: &str) -> TestResult {
    check_eq(actual.len(), expected.len(), &format!("{what}: number of results"))?;
    for (index, (a, e)) in actual.iter().zip(expected).enumerate() {
        if !e.rule.holds(*a, e.value) {
            return Err(Verdict::mismatch(
                format!("{what}: {} (result {index}, compared {:?})", e.label, e.rule),
                format!("{:?} ({:#010x})", e.value, e.value.to_bits()),
                format!("{a:?} ({:#010x})", a.to_bits()),
            ));
        }
    }
    Ok(())
}

// ---- linear algebra ------------------------------------------------------------------------

const SAXPY: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        y[i] = params.a * x[i] + y[i];
    }
}
"#;

fn saxpy(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "saxpy", SAXPY, "saxpy")?;
    let n = 10_000usize;
    let a = 1.75f32;
    let x = random_f32(context, 1, n);
    let y = random_f32(context, 2, n);
    let x_buffer = context.device().alloc_from(context.stream(), &x)?;
    let y_buffer = context.device().alloc_from(context.stream(), &y)?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&x_buffer)
            .buffer(&y_buffer)
            .scalar(a)
            .scalar(n as u32),
    )?;
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    // A fused multiply-add rounds once instead of twice; both are allowed.
    check_close(
        &context.stream().read_to_vec(&y_buffer)?,
        &expected,
        1e-6,
        "saxpy output",
    )
}

const MATMUL: &str = r#"
// c = a * b for row-major a (m x k), b (k x n), c (m x n), in 16x16 tiles staged through
// workgroup memory. ceil(n/16) x ceil(m/16) workgroups.
struct Dims { m: u32, n: u32, k: u32 }
var<immediate> dims: Dims;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

const TILE: u32 = 16u;
var<workgroup> tile_a: array<f32, 256>;
var<workgroup> tile_b: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let row = group.y * TILE + local.y;
    let col = group.x * TILE + local.x;
    let slot = local.y * TILE + local.x;
    var sum = 0.0;
    let tiles = (dims.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        let a_col = t * TILE + local.x;
        let b_row = t * TILE + local.y;
        if row < dims.m && a_col < dims.k {
            tile_a[slot] = a[row * dims.k + a_col];
        } else {
            tile_a[slot] = 0.0;
        }
        if b_row < dims.k && col < dims.n {
            tile_b[slot] = b[b_row * dims.n + col];
        } else {
            tile_b[slot] = 0.0;
        }
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            sum = sum + tile_a[local.y * TILE + i] * tile_b[i * TILE + local.x];
        }
        workgroupBarrier();
    }
    if row < dims.m && col < dims.n {
        c[row * dims.n + col] = sum;
    }
}
"#;

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

// ---- reductions ----------------------------------------------------------------------------

const REDUCE_SUM: &str = r#"
// Each workgroup of 64 sums 128 words through a tree in workgroup memory.
var<immediate> n: u32;
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> partial_sums: array<u32>;
var<workgroup> scratch: array<u32, 64>;

@compute @workgroup_size(64)
fn reduce(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let first = group.x * 128u + lane;
    var value = 0u;
    if first < n {
        value = input[first];
    }
    if first + 64u < n {
        value += input[first + 64u];
    }
    scratch[lane] = value;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if lane < stride {
            scratch[lane] += scratch[lane + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        partial_sums[group.x] = scratch[0];
    }
}
"#;

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

const REDUCE_MIN_MAX: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<i32>;
@group(0) @binding(1) var<storage, read_write> extremes: array<vec2<i32>>;
var<workgroup> scratch: array<vec2<i32>, 64>;

@compute @workgroup_size(64)
fn min_max(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let i = group.x * 64u + lane;
    var value = vec2<i32>(2147483647, -2147483647 - 1);
    if i < arrayLength(&input) {
        value = vec2<i32>(input[i], input[i]);
    }
    scratch[lane] = value;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride /= 2u) {
        if lane < stride {
            let other = scratch[lane + stride];
            scratch[lane] = vec2<i32>(min(scratch[lane].x, other.x), max(scratch[lane].y, other.y));
        }
        workgroupBarrier();
    }
    if lane == 0u {
        extremes[group.x] = scratch[0];
    }
}
"#;

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

// ---- atomics -------------------------------------------------------------------------------

const HISTOGRAM_STORAGE: &str = r#"
struct Params { n: u32, bins: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>>;

@compute @workgroup_size(64)
fn histogram(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        atomicAdd(&counts[values[id.x] % params.bins], 1u);
    }
}
"#;

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

const HISTOGRAM_WORKGROUP: &str = r#"
var<immediate> n: u32;
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>, 64>;
var<workgroup> local_counts: array<atomic<u32>, 64>;

@compute @workgroup_size(64)
fn histogram(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    atomicStore(&local_counts[lane], 0u);
    workgroupBarrier();
    if id.x < n {
        atomicAdd(&local_counts[values[id.x] % 64u], 1u);
    }
    workgroupBarrier();
    let count = atomicLoad(&local_counts[lane]);
    if count != 0u {
        atomicAdd(&counts[lane], count);
    }
}
"#;

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

const TICKETS: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> tickets: array<u32>;

@compute @workgroup_size(64)
fn take(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&tickets) {
        tickets[id.x] = atomicAdd(&counter, 1u);
    }
}
"#;

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

const SUBTRACT: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> before: array<u32>;

@compute @workgroup_size(64)
fn subtract(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&before) {
        before[id.x] = atomicSub(&counter, 3u);
    }
}
"#;

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

const EXCHANGE: &str = r#"
@group(0) @binding(0) var<storage, read_write> slot: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> previous: array<u32>;

@compute @workgroup_size(64)
fn swap(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&previous) {
        previous[id.x] = atomicExchange(&slot, id.x + 1u);
    }
}
"#;

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

const MIN_MAX_BITWISE: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> unsigned_results: array<atomic<u32>, 5>;
@group(0) @binding(2) var<storage, read_write> signed_results: array<atomic<i32>, 2>;

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    atomicMin(&unsigned_results[0], v);
    atomicMax(&unsigned_results[1], v);
    atomicAnd(&unsigned_results[2], v);
    atomicOr(&unsigned_results[3], v);
    atomicXor(&unsigned_results[4], v);
    atomicMin(&signed_results[0], bitcast<i32>(v));
    atomicMax(&signed_results[1], bitcast<i32>(v));
}
"#;

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

const COMPARE_EXCHANGE_LOOPS: &str = r#"
// state[0]: a running maximum; state[1]: the next free slot. Weak exchanges may fail
// spuriously, so every loop retries with the value it saw.
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>, 2>;
@group(0) @binding(2) var<storage, read_write> slots: array<u32>;

@compute @workgroup_size(64)
fn cas(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    var seen = atomicLoad(&state[0]);
    while seen < v {
        let result = atomicCompareExchangeWeak(&state[0], seen, v);
        if result.exchanged {
            break;
        }
        seen = result.old_value;
    }
    var slot = atomicLoad(&state[1]);
    loop {
        let result = atomicCompareExchangeWeak(&state[1], slot, slot + 1u);
        if result.exchanged {
            break;
        }
        slot = result.old_value;
    }
    slots[min(slot, arrayLength(&slots) - 1u)] = id.x + 1u;
}
"#;

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

const COMPARE_EXCHANGE_RESULT: &str = r#"
@group(0) @binding(0) var<storage, read_write> cell: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32, 6>;

@compute @workgroup_size(1)
fn probe() {
    let miss = atomicCompareExchangeWeak(&cell, 3u, 9u);
    out[0] = miss.old_value;
    out[1] = u32(miss.exchanged);
    out[2] = atomicLoad(&cell);
    // A weak exchange may fail spuriously while the value matches: retry a bounded number
    // of times.
    var old = 0u;
    var exchanged = false;
    for (var tries = 0u; tries < 1000u; tries++) {
        let hit = atomicCompareExchangeWeak(&cell, 5u, 9u);
        old = hit.old_value;
        exchanged = hit.exchanged;
        if exchanged || old != 5u {
            break;
        }
    }
    out[3] = old;
    out[4] = u32(exchanged);
    out[5] = atomicLoad(&cell);
}
"#;

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

// ---- integer rules -------------------------------------------------------------------------

/// WGSL's integer rules, from the specification ("Arithmetic Expressions", "Bit
/// Expressions" and the built-in functions).
mod wgsl_int {
    /// `e1 / e2` on i32: by zero gives e1; MIN / -1 gives MIN.
    pub fn div_i32(x: i32, y: i32) -> i32 {
        if y == 0 {
            x
        } else {
            x.wrapping_div(y)
        }
    }

    /// `e1 % e2` on i32: by zero gives 0; MIN % -1 gives 0; else the sign of e1.
    pub fn rem_i32(x: i32, y: i32) -> i32 {
        if y == 0 {
            0
        } else {
            x.wrapping_rem(y)
        }
    }

    pub fn div_u32(x: u32, y: u32) -> u32 {
        x.checked_div(y).unwrap_or(x)
    }

    pub fn rem_u32(x: u32, y: u32) -> u32 {
        x.checked_rem(y).unwrap_or(0)
    }

    pub fn first_leading_bit_u32(x: u32) -> u32 {
        if x == 0 {
            u32::MAX
        } else {
            31 - x.leading_zeros()
        }
    }

    /// For i32: the most significant bit that differs from the sign bit; -1 for 0 and -1.
    pub fn first_leading_bit_i32(x: i32) -> i32 {
        let magnitude = if x < 0 { !x } else { x } as u32;
        if magnitude == 0 {
            -1
        } else {
            31 - magnitude.leading_zeros() as i32
        }
    }

    pub fn first_trailing_bit(x: u32) -> u32 {
        if x == 0 {
            u32::MAX
        } else {
            x.trailing_zeros()
        }
    }

    /// `extractBits` on u32 for offset + count <= 32.
    pub fn extract_bits_u32(e: u32, offset: u32, count: u32) -> u32 {
        if count == 0 {
            0
        } else {
            ((u64::from(e) >> offset) & ((1u64 << count) - 1)) as u32
        }
    }

    /// `extractBits` on i32: the field sign-extended from its top bit.
    pub fn extract_bits_i32(e: i32, offset: u32, count: u32) -> i32 {
        if count == 0 {
            0
        } else {
            let field = extract_bits_u32(e as u32, offset, count);
            ((field << (32 - count)) as i32) >> (32 - count)
        }
    }

    pub fn insert_bits(e: u32, newbits: u32, offset: u32, count: u32) -> u32 {
        let mask = (((1u64 << count) - 1) << offset) as u32;
        (e & !mask) | ((newbits << offset) & mask)
    }
}

/// Operand pairs for the integer tests: the edge cases first, then random pairs (half with a
/// small second operand, so division and shifts see ordinary values too).
fn int_pairs(context: &TestContext, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let min = i32::MIN as u32;
    let minus = |v: i32| v as u32;
    let mut pairs = vec![
        (7, 2),
        (minus(-7), 2),
        (7, minus(-2)),
        (minus(-7), minus(-2)),
        (5, 0),
        (0, 0),
        (minus(-5), 0),
        (min, 0),
        (u32::MAX, 0),
        (min, minus(-1)),
        (min, 1),
        (i32::MAX as u32, minus(-1)),
        (min, min),
        (u32::MAX, 0x1_0000),
        (0x8000_0001, 0x7fff_ffff),
        (0, 5),
        (100, 7),
        (123_456_789, 1000),
        (u32::MAX, u32::MAX),
        (0xffff_0000, 0xffff),
    ];
    let random = context.random_u32(seed, 88);
    for (k, chunk) in random.chunks_exact(2).enumerate() {
        let second = if k % 2 == 0 { chunk[1] % 100 } else { chunk[1] };
        pairs.push((chunk[0], second));
    }
    pairs.into_iter().unzip()
}

const INT_DIVISION: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn division(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    out[4u * i] = bitcast<u32>(bitcast<i32>(x) / bitcast<i32>(y));
    out[4u * i + 1u] = bitcast<u32>(bitcast<i32>(x) % bitcast<i32>(y));
    out[4u * i + 2u] = x / y;
    out[4u * i + 3u] = x % y;
}
"#;

fn int_division(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer division", INT_DIVISION, "division")?;
    let (a, b) = int_pairs(context, 11);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 4 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let expected = [
            wgsl_int::div_i32(x as i32, y as i32) as u32,
            wgsl_int::rem_i32(x as i32, y as i32) as u32,
            wgsl_int::div_u32(x, y),
            wgsl_int::rem_u32(x, y),
        ];
        check_slice_eq(
            &out[4 * i..4 * i + 4],
            &expected,
            &format!(
                "i32 /, i32 %, u32 /, u32 % of {x:#x} ({}) and {y:#x} ({})",
                x as i32, y as i32
            ),
        )?;
    }
    Ok(())
}

const INT_SHIFTS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn shifts(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let s = b[i];
    out[4u * i] = x << s;
    out[4u * i + 1u] = x >> s;
    out[4u * i + 2u] = bitcast<u32>(bitcast<i32>(x) << s);
    out[4u * i + 3u] = bitcast<u32>(bitcast<i32>(x) >> s);
}
"#;

fn int_shifts(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer shifts", INT_SHIFTS, "shifts")?;
    let mut amounts = vec![0u32, 1, 31, 32, 33, 63, 64, 100, u32::MAX, 0x8000_0000, 16, 47];
    let mut values = vec![0x8000_0001u32, u32::MAX, 1, 0x7fff_ffff, 0xdead_beef, 0x8000_0000];
    let random = context.random_u32(12, 104);
    amounts.extend(random[..52].iter().map(|v| v % 70));
    values.extend(&random[52..]);
    values.truncate(amounts.len());
    amounts.truncate(values.len());
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&values, &amounts], values.len(), 4 * values.len())?;
    for (i, (&x, &s)) in values.iter().zip(&amounts).enumerate() {
        let amount = s % 32;
        let expected = [x << amount, x >> amount, x << amount, ((x as i32) >> amount) as u32];
        check_slice_eq(
            &out[4 * i..4 * i + 4],
            &expected,
            &format!("u32 <<, u32 >>, i32 <<, i32 >> of {x:#x} by {s}"),
        )?;
    }
    Ok(())
}

const INT_WRAPPING: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn wrapping(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = bitcast<i32>(a[i]);
    let y = bitcast<i32>(b[i]);
    let o = 8u * i;
    out[o] = bitcast<u32>(x + y);
    out[o + 1u] = bitcast<u32>(x - y);
    out[o + 2u] = bitcast<u32>(x * y);
    out[o + 3u] = bitcast<u32>(-x);
    out[o + 4u] = bitcast<u32>(abs(x));
    out[o + 5u] = a[i] * b[i] + 0xffffffffu;
    var c = x;
    c++;
    c += y;
    c *= 3;
    out[o + 6u] = bitcast<u32>(c);
    var d = a[i];
    d--;
    out[o + 7u] = d;
}
"#;

fn int_wrapping(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer wrapping", INT_WRAPPING, "wrapping")?;
    let (a, b) = int_pairs(context, 13);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 8 * a.len())?;
    for (i, (&ux, &uy)) in a.iter().zip(&b).enumerate() {
        let (x, y) = (ux as i32, uy as i32);
        let expected = [
            x.wrapping_add(y) as u32,
            x.wrapping_sub(y) as u32,
            x.wrapping_mul(y) as u32,
            x.wrapping_neg() as u32,
            x.wrapping_abs() as u32,
            ux.wrapping_mul(uy).wrapping_add(u32::MAX),
            x.wrapping_add(1).wrapping_add(y).wrapping_mul(3) as u32,
            ux.wrapping_sub(1),
        ];
        check_slice_eq(
            &out[8 * i..8 * i + 8],
            &expected,
            &format!("x+y, x-y, x*y, -x, abs(x), u32 x*y-1, (x+1+y)*3, u32 x-1 for x = {x}, y = {y}"),
        )?;
    }
    Ok(())
}

const BIT_BUILTINS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn bits(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let offset = y % 32u;
    let count = (y >> 8u) % (33u - offset);
    let o = 10u * i;
    out[o] = countOneBits(x);
    out[o + 1u] = reverseBits(x);
    out[o + 2u] = firstLeadingBit(x);
    out[o + 3u] = bitcast<u32>(firstLeadingBit(bitcast<i32>(x)));
    out[o + 4u] = firstTrailingBit(x);
    out[o + 5u] = countLeadingZeros(x);
    out[o + 6u] = countTrailingZeros(x);
    out[o + 7u] = extractBits(x, offset, count);
    out[o + 8u] = bitcast<u32>(extractBits(bitcast<i32>(x), offset, count));
    out[o + 9u] = insertBits(x, y, offset, count);
}
"#;

fn int_bit_builtins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "bit built-ins", BIT_BUILTINS, "bits")?;
    let mut values = vec![
        0u32,
        1,
        u32::MAX,
        0x8000_0000,
        0x7fff_ffff,
        0xffff_fffe,
        0x0001_0000,
        0xf0f0_f0f0,
    ];
    let mut fields = vec![0u32, 0x1f20, 0x0800, 0x201f, 0x0105, 0x1010, 7, 0xff03];
    let random = context.random_u32(14, 112);
    values.extend(&random[..56]);
    fields.extend(&random[56..]);
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&values, &fields], values.len(), 10 * values.len())?;
    for (i, (&x, &y)) in values.iter().zip(&fields).enumerate() {
        let offset = y % 32;
        let count = (y >> 8) % (33 - offset);
        let expected = [
            x.count_ones(),
            x.reverse_bits(),
            wgsl_int::first_leading_bit_u32(x),
            wgsl_int::first_leading_bit_i32(x as i32) as u32,
            wgsl_int::first_trailing_bit(x),
            x.leading_zeros(),
            x.trailing_zeros(),
            wgsl_int::extract_bits_u32(x, offset, count),
            wgsl_int::extract_bits_i32(x as i32, offset, count) as u32,
            wgsl_int::insert_bits(x, y, offset, count),
        ];
        check_slice_eq(
            &out[10 * i..10 * i + 10],
            &expected,
            &format!(
                "countOneBits, reverseBits, firstLeadingBit u32/i32, firstTrailingBit, countLeadingZeros, \
                 countTrailingZeros, extractBits u32/i32, insertBits of {x:#010x} (field offset {offset}, count {count}, new bits {y:#x})"
            ),
        )?;
    }
    Ok(())
}

// ---- float rules ---------------------------------------------------------------------------

const FLOAT_PAIRS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn pairs(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 7u * i;
    out[o] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = -x;
    out[o + 5u] = sqrt(x);
    let flags = u32(x == y) | (u32(x != y) << 1u) | (u32(x < y) << 2u) | (u32(x <= y) << 3u)
        | (u32(x > y) << 4u) | (u32(x >= y) << 5u);
    out[o + 6u] = f32(flags);
}
"#;

/// Runs [`FLOAT_PAIRS`] and compares with Rust's IEEE 754 arithmetic. The sign of a zero
/// is held for +, -, *, / and negation when `signed_zero`; sqrt is held to its value.
fn run_float_pairs(context: &TestContext, pairs: &[(f32, f32)], signed_zero: bool, what: &str) -> TestResult {
    let kernel = kernel_of(context, "float pairs", FLOAT_PAIRS, "pairs")?;
    let (a, b): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for &(x, y) in pairs {
        let flags = u32::from(x == y)
            | u32::from(x != y) << 1
            | u32::from(x < y) << 2
            | u32::from(x <= y) << 3
            | u32::from(x > y) << 4
            | u32::from(x >= y) << 5;
        let arithmetic = Rule::Ieee { signed_zero };
        let results = [
            ("x + y", x + y, arithmetic),
            ("x - y", x - y, arithmetic),
            ("x * y", x * y, arithmetic),
            ("x / y", x / y, arithmetic),
            ("-x", -x, arithmetic),
            ("sqrt(x)", x.sqrt(), Rule::Ieee { signed_zero: false }),
            (
                "comparison flags (==, !=, <, <=, >, >= as bits 0..5)",
                flags as f32,
                Rule::Exact,
            ),
        ];
        expected.extend(results.into_iter().map(|(operation, value, rule)| Expected {
            value,
            rule,
            label: format!("{operation} for x = {x:?}, y = {y:?}"),
        }));
    }
    check_floats(&out, &expected, what)
}

fn float_nan_propagation(context: &TestContext) -> TestResult {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    run_float_pairs(
        context,
        &[
            (nan, 1.0),
            (1.0, nan),
            (nan, nan),
            (nan, 0.0),
            (-nan, 2.5),
            (0.0, 0.0),
            (inf, inf),
            (0.0, inf),
            (-inf, -inf),
            (-4.0, 2.0),
        ],
        false,
        "NaN arithmetic",
    )
}

fn float_infinity_arithmetic(context: &TestContext) -> TestResult {
    let inf = f32::INFINITY;
    run_float_pairs(
        context,
        &[
            (1.0, 0.0),
            (inf, 1.0),
            (inf, -2.0),
            (1.0, inf),
            (-inf, 5.0),
            // Divisors stay within 2^126, where WGSL bounds the error of division.
            (f32::MAX, 2f32.powi(126)),
            (f32::MAX, 2.0),
            (-f32::MAX, 2f32.powi(126)),
            (inf, -inf),
            (3.0, -inf),
        ],
        false,
        "infinity arithmetic",
    )
}

fn float_signed_zero(context: &TestContext) -> TestResult {
    run_float_pairs(
        context,
        &[
            (-0.0, -0.0),
            (0.0, -0.0),
            (-0.0, 0.0),
            (-0.0, 5.0),
            (1.0, -0.0),
            (-1.0, f32::INFINITY),
            (-0.0, 1.0),
        ],
        true,
        "signed zero arithmetic",
    )
}

const FLOAT_TO_INT: &str = r#"
@group(0) @binding(0) var<storage, read> floats: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn convert(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&floats) {
        return;
    }
    out[2u * i] = bitcast<u32>(i32(floats[i]));
    out[2u * i + 1u] = u32(floats[i]);
}
"#;

/// `i32(f32)` per WGSL: the value closest to trunc(x) that f32 also represents, so 2^31
/// and above give 2147483520 (2^31 - 128).
fn f32_to_i32(x: f32) -> i32 {
    if x >= 2_147_483_648.0 {
        2_147_483_520
    } else if x <= -2_147_483_648.0 {
        i32::MIN
    } else {
        x.trunc() as i32
    }
}

/// `u32(f32)` per WGSL: negatives give 0, 2^32 and above give 4294967040 (2^32 - 256).
fn f32_to_u32(x: f32) -> u32 {
    if x <= 0.0 {
        0
    } else if x >= 4_294_967_296.0 {
        4_294_967_040
    } else {
        x.trunc() as u32
    }
}

fn float_to_int_saturates(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float to int", FLOAT_TO_INT, "convert")?;
    let floats = [
        0.0f32,
        -0.0,
        0.5,
        -0.5,
        0.999_999_94,
        -0.999_999_94,
        1.5,
        -1.5,
        -7.75,
        16_777_216.0,
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_904.0,
        4_294_967_040.0,
        4_294_967_296.0,
        3.0e9,
        -3.0e9,
        1.0e20,
        -1.0e20,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&floats], floats.len(), 2 * floats.len())?;
    for (i, &x) in floats.iter().enumerate() {
        check_slice_eq(
            &out[2 * i..2 * i + 2],
            &[f32_to_i32(x) as u32, f32_to_u32(x)],
            &format!("i32({x:?}) as bits, u32({x:?})"),
        )?;
    }
    Ok(())
}

fn float_nan_to_int_is_zero(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float to int", FLOAT_TO_INT, "convert")?;
    let floats = [f32::NAN, -f32::NAN, f32::from_bits(0x7f80_0001)];
    let out: Vec<u32> = run_elementwise(context, &kernel, &[&floats], floats.len(), 2 * floats.len())?;
    check_slice_eq(
        &out,
        &[0; 6],
        "i32(NaN) and u32(NaN) for a quiet, a negative and a signalling NaN",
    )
}

// ---- math built-ins ------------------------------------------------------------------------

const EXACT_BUILTINS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn exact(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 13u * i;
    out[o] = abs(x);
    out[o + 1u] = min(x, y);
    out[o + 2u] = max(x, y);
    out[o + 3u] = clamp(x, -2.5, 3.25);
    out[o + 4u] = floor(x);
    out[o + 5u] = ceil(x);
    out[o + 6u] = trunc(x);
    out[o + 7u] = round(x);
    out[o + 8u] = fract(x);
    out[o + 9u] = sign(x);
    out[o + 10u] = step(y, x);
    out[o + 11u] = fma(x, y, 0.5);
    out[o + 12u] = x * x - y;
}
"#;

fn math_exact_builtins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "exact built-ins", EXACT_BUILTINS, "exact")?;
    // Multiples of 1/8 up to 16: every result below is exactly representable.
    let mut a = vec![2.5f32, -2.5, 0.5, -0.5, 1.5, 3.5, -3.5, 0.0, -0.0, 7.0, -7.125, 3.25];
    let mut b = vec![1.0f32, -3.0, 0.5, 0.5, 2.0, 3.5, -4.0, 0.0, 1.0, 7.0, -7.125, -1.0];
    for (k, v) in context.random_u32(15, 104).chunks_exact(2).enumerate() {
        a.push((v[0] % 257) as f32 / 8.0 - 16.0);
        b.push(if k % 5 == 0 {
            a[a.len() - 1]
        } else {
            (v[1] % 257) as f32 / 8.0 - 16.0
        });
    }
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 13 * a.len())?;
    let names = [
        "abs(x)",
        "min(x, y)",
        "max(x, y)",
        "clamp(x, -2.5, 3.25)",
        "floor(x)",
        "ceil(x)",
        "trunc(x)",
        "round(x)",
        "fract(x)",
        "sign(x)",
        "step(y, x)",
        "fma(x, y, 0.5)",
        "x * x - y",
    ];
    let mut expected = Vec::with_capacity(out.len());
    for (&x, &y) in a.iter().zip(&b) {
        let sign = if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        };
        let values = [
            x.abs(),
            x.min(y),
            x.max(y),
            x.clamp(-2.5, 3.25),
            x.floor(),
            x.ceil(),
            x.trunc(),
            x.round_ties_even(),
            x - x.floor(),
            sign,
            if x >= y { 1.0 } else { 0.0 },
            x * y + 0.5,
            x * x - y,
        ];
        expected.extend(names.iter().zip(values).map(|(name, value)| Expected {
            value,
            rule: Rule::Exact,
            label: format!("{name} for x = {x:?}, y = {y:?}"),
        }));
    }
    check_floats(&out, &expected, "exact math built-ins")
}

const TRANSCENDENTALS: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn approximate(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 8u * i;
    out[o] = exp(x);
    out[o + 1u] = log(y);
    out[o + 2u] = sin(x);
    out[o + 3u] = cos(x);
    out[o + 4u] = pow(y, 1.5);
    out[o + 5u] = sqrt(y);
    out[o + 6u] = inverseSqrt(y);
    out[o + 7u] = atan2(x, y);
}
"#;

fn math_transcendentals(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "transcendentals", TRANSCENDENTALS, "approximate")?;
    // x in [-pi, pi), y in [0.5, 8.5).
    let a: Vec<f32> = random_f32(context, 16, 200)
        .into_iter()
        .map(|v| v * std::f32::consts::PI)
        .collect();
    let b: Vec<f32> = random_f32(context, 17, 200)
        .into_iter()
        .map(|v| v * 4.0 + 4.5)
        .collect();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 8 * a.len())?;
    let expected: Vec<f32> = a
        .iter()
        .zip(&b)
        .flat_map(|(&x, &y)| {
            [
                x.exp(),
                y.ln(),
                x.sin(),
                x.cos(),
                y.powf(1.5),
                y.sqrt(),
                1.0 / y.sqrt(),
                x.atan2(y),
            ]
        })
        .collect();
    check_close(
        &out,
        &expected,
        1e-3,
        "exp(x), log(y), sin(x), cos(x), pow(y, 1.5), sqrt(y), inverseSqrt(y), atan2(x, y) per element",
    )
}

// ---- vectors and matrices ------------------------------------------------------------------

const VECTOR_INT: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<vec4<i32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<i32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<i32>>;

@compute @workgroup_size(64)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 6u * i;
    out[o] = x + y * 3;
    out[o + 1u] = x.wzyx - y.xxyy;
    out[o + 2u] = select(x, y, x < y);
    out[o + 3u] = vec4<i32>(dot(x, y), i32(any(x == y)), i32(all(x > vec4<i32>(-1000))), i32(x.x > y.x));
    out[o + 4u] = abs(x) + min(x, y) * 2 + max(x, y) - clamp(x, vec4<i32>(-10), vec4<i32>(10));
    let d = abs(y) + vec4<i32>(1);
    out[o + 5u] = x / d + (x % d) * 100;
}
"#;

fn vector_integer_ops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "integer vectors", VECTOR_INT, "vectors")?;
    let small = |v: u32| (v % 1999) as i32 - 999;
    let raw = context.random_u32(18, 8 * 100);
    let mut a: Vec<[i32; 4]> = raw[..400]
        .chunks_exact(4)
        .map(|c| [small(c[0]), small(c[1]), small(c[2]), small(c[3])])
        .collect();
    let b: Vec<[i32; 4]> = raw[400..]
        .chunks_exact(4)
        .map(|c| [small(c[0]), small(c[1]), small(c[2]), small(c[3])])
        .collect();
    // Some equal components, for any(x == y).
    for k in (0..a.len()).step_by(7) {
        a[k][2] = b[k][2];
    }
    let out: Vec<[i32; 4]> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 6 * a.len())?;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let each = |f: &dyn Fn(usize) -> i32| [f(0), f(1), f(2), f(3)];
        let d = each(&|c| y[c].abs() + 1);
        let expected = [
            each(&|c| x[c] + y[c] * 3),
            [x[3] - y[0], x[2] - y[0], x[1] - y[1], x[0] - y[1]],
            each(&|c| if x[c] < y[c] { y[c] } else { x[c] }),
            [
                (0..4).map(|c| x[c] * y[c]).sum(),
                i32::from((0..4).any(|c| x[c] == y[c])),
                i32::from((0..4).all(|c| x[c] > -1000)),
                i32::from(x[0] > y[0]),
            ],
            each(&|c| x[c].abs() + x[c].min(y[c]) * 2 + x[c].max(y[c]) - x[c].clamp(-10, 10)),
            each(&|c| x[c] / d[c] + (x[c] % d[c]) * 100),
        ];
        check_slice_eq(
            &out[6 * i..6 * i + 6],
            &expected,
            &format!("vector results for x = {x:?}, y = {y:?}"),
        )?;
    }
    Ok(())
}

const VECTOR_FLOAT: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 4u * i;
    out[o] = vec4<f32>(cross(x.xyz, y.xyz), dot(x, y));
    out[o + 1u] = vec4<f32>(normalize(x.xyz), length(x));
    out[o + 2u] = mix(x, y, vec4<f32>(0.25));
    out[o + 3u] = vec4<f32>(distance(x, y), x.y * y.z, max(x.z, y.w), min(x.w, y.x));
}
"#;

fn vector_float_ops(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "float vectors", VECTOR_FLOAT, "vectors")?;
    let raw = random_f32(context, 19, 8 * 100);
    let to_vec4 = |c: &[f32]| [c[0] * 4.0, c[1] * 4.0, c[2] * 4.0 + 0.5, c[3] * 4.0];
    let a: Vec<[f32; 4]> = raw[..400].chunks_exact(4).map(to_vec4).collect();
    let b: Vec<[f32; 4]> = raw[400..].chunks_exact(4).map(to_vec4).collect();
    let out: Vec<[f32; 4]> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 4 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for (x, y) in a.iter().zip(&b) {
        let dot = |p: &[f32], q: &[f32]| p.iter().zip(q).map(|(u, v)| f64::from(*u) * f64::from(*v)).sum::<f64>();
        let length3 = dot(&x[..3], &x[..3]).sqrt();
        let difference: Vec<f32> = (0..4).map(|c| x[c] - y[c]).collect();
        expected.push([
            x[1] * y[2] - x[2] * y[1],
            x[2] * y[0] - x[0] * y[2],
            x[0] * y[1] - x[1] * y[0],
            dot(x, y) as f32,
        ]);
        expected.push([
            (f64::from(x[0]) / length3) as f32,
            (f64::from(x[1]) / length3) as f32,
            (f64::from(x[2]) / length3) as f32,
            dot(x, x).sqrt() as f32,
        ]);
        expected.push([0, 1, 2, 3].map(|c| x[c] + (y[c] - x[c]) * 0.25));
        expected.push([
            dot(&difference, &difference).sqrt() as f32,
            x[1] * y[2],
            x[2].max(y[3]),
            x[3].min(y[0]),
        ]);
    }
    let flatten = |values: &[[f32; 4]]| values.iter().flatten().copied().collect::<Vec<f32>>();
    check_close(
        &flatten(&out),
        &flatten(&expected),
        1e-5,
        "cross+dot, normalize+length, mix, distance and component picks, 4 vec4 per element",
    )
}

const MATRICES: &str = r#"
@group(0) @binding(0) var<storage, read> m4: array<mat4x4<f32>>;
@group(0) @binding(1) var<storage, read> m3: array<mat3x3<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out_vectors: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out_m4: array<mat4x4<f32>>;
@group(0) @binding(5) var<storage, read_write> out_m3: array<mat3x3<f32>>;

@compute @workgroup_size(64)
fn matrices(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&v) {
        return;
    }
    let m = m4[i];
    let n = m3[i];
    out_vectors[2u * i] = m * v[i];
    out_vectors[2u * i + 1u] = v[i] * m;
    out_m4[i] = m * transpose(m);
    out_m3[i] = n * n + determinant(n) * mat3x3<f32>(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0);
}
"#;

fn matrix_products_and_layout(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "matrices", MATRICES, "matrices")?;
    let count = 70usize;
    // Column-major, as WGSL stores them; a mat3x3 column is a vec3 padded to 16 bytes.
    let m4: Vec<[[f32; 4]; 4]> = random_f32(context, 20, 16 * count)
        .chunks_exact(16)
        .map(|c| {
            [
                [c[0], c[1], c[2], c[3]],
                [c[4], c[5], c[6], c[7]],
                [c[8], c[9], c[10], c[11]],
                [c[12], c[13], c[14], c[15]],
            ]
        })
        .collect();
    let m3: Vec<[[f32; 4]; 3]> = random_f32(context, 21, 9 * count)
        .chunks_exact(9)
        .map(|c| {
            [
                [c[0], c[1], c[2], 0.0],
                [c[3], c[4], c[5], 0.0],
                [c[6], c[7], c[8], 0.0],
            ]
        })
        .collect();
    let v: Vec<[f32; 4]> = random_f32(context, 22, 4 * count)
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let m4_buffer = context.device().alloc_from(context.stream(), &m4)?;
    let m3_buffer = context.device().alloc_from(context.stream(), &m3)?;
    let v_buffer = context.device().alloc_from(context.stream(), &v)?;
    let out_vectors = context
        .device()
        .alloc_from(context.stream(), &vec![[0f32; 4]; 2 * count])?;
    let out_m4 = context
        .device()
        .alloc_from(context.stream(), &vec![[[0f32; 4]; 4]; count])?;
    let out_m3 = context
        .device()
        .alloc_from(context.stream(), &vec![[[0f32; 4]; 3]; count])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .buffer(&m4_buffer)
            .buffer(&m3_buffer)
            .buffer(&v_buffer)
            .buffer(&out_vectors)
            .buffer(&out_m4)
            .buffer(&out_m3),
    )?;
    let mut expected_vectors = Vec::new();
    let mut expected_m4 = Vec::new();
    let mut expected_m3 = Vec::new();
    for i in 0..count {
        let m = &m4[i];
        // m[column][row].
        let at = |row: usize, column: usize| f64::from(m[column][row]);
        expected_vectors.extend((0..4).map(|row| (0..4).map(|c| at(row, c) * f64::from(v[i][c])).sum::<f64>() as f32));
        expected_vectors
            .extend((0..4).map(|column| (0..4).map(|r| f64::from(v[i][r]) * at(r, column)).sum::<f64>() as f32));
        // (m * transpose(m))[column][row] = sum over k of m[row][k] * m[column][k].
        for column in 0..4 {
            for row in 0..4 {
                expected_m4.push((0..4).map(|k| at(row, k) * at(column, k)).sum::<f64>() as f32);
            }
        }
        let n = &m3[i];
        let at3 = |row: usize, column: usize| f64::from(n[column][row]);
        let determinant = at3(0, 0) * (at3(1, 1) * at3(2, 2) - at3(1, 2) * at3(2, 1))
            - at3(0, 1) * (at3(1, 0) * at3(2, 2) - at3(1, 2) * at3(2, 0))
            + at3(0, 2) * (at3(1, 0) * at3(2, 1) - at3(1, 1) * at3(2, 0));
        for column in 0..3 {
            for row in 0..3 {
                let product: f64 = (0..3).map(|k| at3(row, k) * at3(k, column)).sum();
                let identity = if row == column { determinant } else { 0.0 };
                expected_m3.push((product + identity) as f32);
            }
        }
    }
    let vectors: Vec<f32> = context
        .stream()
        .read_to_vec(&out_vectors)?
        .into_iter()
        .flatten()
        .collect();
    check_close(
        &vectors,
        &expected_vectors,
        1e-5,
        "m * v then v * m for mat4x4 m, 8 floats per element",
    )?;
    let products: Vec<f32> = context
        .stream()
        .read_to_vec(&out_m4)?
        .into_iter()
        .flat_map(|matrix| matrix.into_iter().flatten())
        .collect();
    check_close(
        &products,
        &expected_m4,
        1e-5,
        "m * transpose(m) for mat4x4 m, column-major",
    )?;
    // The padding float of each mat3x3 column is not compared: WGSL leaves it undefined.
    let squares: Vec<f32> = context
        .stream()
        .read_to_vec(&out_m3)?
        .into_iter()
        .flat_map(|matrix| matrix.into_iter().flat_map(|column| [column[0], column[1], column[2]]))
        .collect();
    check_close(
        &squares,
        &expected_m3,
        1e-5,
        "n * n + determinant(n) * I for mat3x3 n, column-major",
    )
}

// ---- control flow and functions ------------------------------------------------------------

const DIVERGENT_LOOPS: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn diverge(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    var acc = v;
    for (var k = 0u; k < v % 23u; k++) {
        if (k & 1u) == 1u {
            continue;
        }
        acc = acc * 31u + k;
        if acc % 97u == 0u {
            break;
        }
    }
    var steps = 0u;
    var x = v % 5000u + 1u;
    loop {
        if x == 1u {
            break;
        }
        if (x & 1u) == 0u {
            x = x / 2u;
        } else {
            x = 3u * x + 1u;
        }
        steps++;
        continuing {
            break if steps >= 150u;
        }
    }
    var s = 0u;
    while s < (v >> 28u) {
        s += 1u;
        acc ^= s << 3u;
    }
    out[3u * i] = acc;
    out[3u * i + 1u] = steps;
    out[3u * i + 2u] = x;
}
"#;

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

const EARLY_RETURN: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn early(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&out) {
        return;
    }
    let v = input[i];
    if v % 3u == 0u {
        return;
    }
    out[i] = v * 2u;
    if v % 5u == 0u {
        return;
    }
    for (var k = 0u; k < 8u; k++) {
        if ((v >> (k * 4u)) & 15u) == 9u {
            out[i] += k + 1u;
            return;
        }
    }
    out[i] += 1000u;
}
"#;

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

const SWITCH: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

fn classify(v: u32) -> u32 {
    var r = 0u;
    switch v % 7u {
        case 0u: {
            r = 100u;
        }
        case 1u, 2u: {
            r = 200u + v % 7u;
        }
        case 5u: {
            if v > 2147483648u {
                r = 500u;
            } else {
                r = 501u;
            }
        }
        case 3u, default: {
            r = 300u;
        }
    }
    switch bitcast<i32>(v) % 3 {
        case -2: {
            r += 10u;
        }
        case -1: {
            r += 20u;
        }
        case 0: {
            r += 30u;
        }
        default: {
            r += 40u;
        }
    }
    return r;
}

@compute @workgroup_size(64)
fn branches(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&input) {
        out[id.x] = classify(input[id.x]);
    }
}
"#;

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

const CARRIED: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

fn advance(counter: ptr<function, u32>, by: u32) {
    *counter = *counter + by;
}

@compute @workgroup_size(64)
fn walk(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var position = group.x * 256u;
    var acc = 0u;
    for (var pass_ = 0u; pass_ < 4u; pass_++) {
        tile[lane] = input[position + lane];
        position += 64u;
        workgroupBarrier();
        acc += tile[63u - lane] * (pass_ + 1u);
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = acc + position;
}

@compute @workgroup_size(64)
fn tree(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var offset = 32u;
    while (offset > 0u) {
        if (lane < offset) {
            tile[lane] += tile[lane + offset];
        }
        offset = offset / 2u;
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = tile[0] + offset;
}

@compute @workgroup_size(8, 8)
fn strides(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var stride = 1u;
    var steps = 0u;
    loop {
        if (stride >= 64u) {
            break;
        }
        let mine = tile[lane];
        stride *= 2u;
        let other = tile[(lane + stride / 2u) % 64u];
        for (var j = 0u; j < 3u; j++) {
            advance(&steps, j);
        }
        workgroupBarrier();
        if (lane % stride == 0u) {
            tile[lane] = mine + other;
        }
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = tile[lane] * 1000u + stride * 100u + steps;
}
"#;

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

const STRUCT_OF_BUILTINS: &str = r#"
struct Invocation {
    @builtin(global_invocation_id) global: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
}
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 64>;

@compute @workgroup_size(64)
fn split(invocation: Invocation, @builtin(num_workgroups) groups: vec3<u32>) {
    cells[invocation.lane] = input[invocation.global.x] + invocation.local.x;
    workgroupBarrier();
    out[invocation.global.x] = cells[63u - invocation.lane] + invocation.group.x * 1000u + groups.x * 100000u;
}
"#;

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

const BARRIER_PLACES: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

// The workgroup's sum of `value`, seen by every invocation.
fn workgroup_sum(lane: u32, value: u32) -> u32 {
    tile[lane] = value;
    workgroupBarrier();
    var offset = 32u;
    while (offset > 0u) {
        if (lane < offset) {
            tile[lane] += tile[lane + offset];
        }
        offset /= 2u;
        workgroupBarrier();
    }
    let total = tile[0];
    workgroupBarrier();
    return total;
}

// The mirrored lane's value for even lanes; odd lanes return later, on another path.
fn mirrored(lane: u32, value: u32) -> u32 {
    tile[lane] = value;
    workgroupBarrier();
    let other = tile[63u - lane];
    workgroupBarrier();
    if (lane % 2u == 0u) {
        return other;
    }
    return 1000000u + value;
}

fn twice(lane: u32, value: u32) -> u32 {
    let first = workgroup_sum(lane, value);
    return first + workgroup_sum(lane, value * 2u);
}

@compute @workgroup_size(64)
fn calls(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let value = input[group.x * 64u + lane];
    var acc = 0u;
    for (var k = 0u; k < 3u; k++) {
        acc += workgroup_sum(lane, value + k);
    }
    out[group.x * 64u + lane] = acc * 7u + mirrored(lane, value) + twice(lane, value);
}

@compute @workgroup_size(64)
fn switched(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let value = input[group.x * 64u + lane];
    var result = 0u;
    switch (group.x % 4u) {
        case 0u: {
            tile[lane] = value;
            workgroupBarrier();
            result = tile[63u - lane];
        }
        case 1u, 2u: {
            tile[lane] = value * 2u;
            workgroupBarrier();
            if (lane < 10u) {
                result = 5u;
                break;
            }
            result = tile[(lane + 1u) % 64u];
        }
        default: {
            result = workgroup_sum(lane, value);
        }
    }
    var steps = 0u;
    for (var k = 0u; k < 4u; k++) {
        workgroupBarrier();
        switch (k) {
            case 1u: {
                continue;
            }
            default: {
                steps += k;
            }
        }
        steps += 10u;
    }
    out[group.x * 64u + lane] = result * 100u + steps;
}
"#;

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

const STRUCT_OF_ONE_RUNTIME_ARRAY: &str = r#"
struct Words { values: array<u32> }
@group(0) @binding(0) var<storage, read> input: Words;
@group(0) @binding(1) var<storage, read_write> out: Words;

@compute @workgroup_size(64)
fn scaled(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&out.values) {
        out.values[id.x] = input.values[id.x] * 3u + arrayLength(&input.values);
    }
}
"#;

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

const DETERMINANTS: &str = r#"
@group(0) @binding(0) var<storage, read> m4: array<mat4x4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(16)
fn determinants(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&m4) {
        return;
    }
    let m = m4[i];
    let m3 = mat3x3<f32>(m[0].xyz, m[1].xyz, m[2].xyz);
    let m2 = mat2x2<f32>(m[0].xy, m[1].xy);
    out[i] = vec4<f32>(determinant(m2), determinant(m3), determinant(m), determinant(transpose(m)));
}
"#;

/// The determinant of the leading `n` x `n` block of a column-major 4x4 matrix, in f64.
fn determinant_of(m: &[f32; 16], columns: &[usize], rows: &[usize]) -> f64 {
    if columns.len() == 1 {
        return f64::from(m[columns[0] * 4 + rows[0]]);
    }
    columns
        .iter()
        .enumerate()
        .map(|(k, &column)| {
            let minor: Vec<usize> = columns.iter().copied().filter(|&c| c != column).collect();
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            sign * f64::from(m[column * 4 + rows[0]]) * determinant_of(m, &minor, &rows[1..])
        })
        .sum()
}

fn matrix_determinants(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "determinants", DETERMINANTS, "determinants")?;
    let count = 40usize;
    // Entries in -3..=3: every product and sum of a 4x4 determinant stays far below 2^24, so
    // each is exact in f32 whatever the order.
    let entries: Vec<f32> = context
        .random_u32(77, count * 16)
        .iter()
        .map(|v| (v % 7) as f32 - 3.0)
        .collect();
    let out: Vec<[f32; 4]> = {
        let input = context.device().alloc_from(context.stream(), &entries)?;
        let output = context
            .device()
            .alloc_from(context.stream(), &vec![[0.0f32; 4]; count])?;
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(count, 16), 1, 1)
                .buffer(&input)
                .buffer(&output),
        )?;
        context.stream().read_to_vec(&output)?
    };
    let expected: Vec<[f32; 4]> = entries
        .chunks_exact(16)
        .map(|chunk| {
            let m: [f32; 16] = chunk.try_into().unwrap_or([0.0; 16]);
            let d4 = determinant_of(&m, &[0, 1, 2, 3], &[0, 1, 2, 3]) as f32;
            [
                determinant_of(&m, &[0, 1], &[0, 1]) as f32,
                determinant_of(&m, &[0, 1, 2], &[0, 1, 2]) as f32,
                d4,
                d4,
            ]
        })
        .collect();
    check_slice_eq(&out, &expected, "determinants of each matrix and of its transpose")
}

const RECONVERGE: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> shared_values: array<u32, 64>;

@compute @workgroup_size(64)
fn reconverge(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let i = group.x * 64u + lane;
    var v = input[i];
    let rounds = v % 13u;
    for (var k = 0u; k < rounds; k++) {
        v = v * 7u + k;
    }
    if (lane & 1u) == 1u {
        v = ~v;
    }
    shared_values[lane] = v;
    workgroupBarrier();
    out[i] = shared_values[63u - lane] + shared_values[(lane + 1u) % 64u];
}
"#;

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

const FUNCTIONS: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

struct Halves {
    low: u32,
    high: u32,
}

var<private> calls: u32;

fn split(v: u32) -> Halves {
    return Halves(v & 0xffffu, v >> 16u);
}

fn combine(h: Halves) -> u32 {
    return h.low * 7u + h.high;
}

fn accumulate(total: ptr<function, u32>, v: u32) {
    *total = *total * 3u + v;
}

fn first_nibble_five(v: u32) -> u32 {
    for (var k = 0u; k < 8u; k++) {
        if ((v >> (4u * k)) & 15u) == 5u {
            return k;
        }
    }
    return 99u;
}

fn counted(v: u32) -> u32 {
    calls += 1u;
    return v ^ (v >> 3u);
}

fn swap_halves(h: ptr<function, Halves>) {
    let low = (*h).low;
    (*h).low = (*h).high;
    (*h).high = low;
}

@compute @workgroup_size(64)
fn calls_kernel(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    var total = 1u;
    accumulate(&total, combine(split(v)));
    accumulate(&total, first_nibble_five(v));
    accumulate(&total, counted(counted(v)));
    var h = split(v);
    swap_halves(&h);
    out[3u * i] = total;
    out[3u * i + 1u] = calls;
    out[3u * i + 2u] = (h.high << 16u) | h.low;
}
"#;

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

// ---- workgroup memory ----------------------------------------------------------------------

const ZERO_INITIALISED: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> words: array<u32, 256>;

@compute @workgroup_size(64)
fn zeroed(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var seen = 0u;
    for (var k = lane; k < 256u; k += 64u) {
        seen |= words[k];
    }
    workgroupBarrier();
    // Leave the memory dirty, for whichever workgroup gets it next.
    for (var k = lane; k < 256u; k += 64u) {
        words[k] = group.x * 1000u + k + 1u;
    }
    workgroupBarrier();
    let slot = group.x * 64u + lane;
    out[2u * slot] = seen;
    out[2u * slot + 1u] = words[255u - lane];
}
"#;

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

const TILE_TRANSPOSE: &str = r#"
struct Dims { width: u32, height: u32 }
var<immediate> dims: Dims;
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(8, 8)
fn transpose_tile(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let x = group.x * 8u + local.x;
    let y = group.y * 8u + local.y;
    tile[local.y * 8u + local.x] = input[y * dims.width + x];
    workgroupBarrier();
    let out_x = group.y * 8u + local.x;
    let out_y = group.x * 8u + local.y;
    output[out_y * dims.height + out_x] = tile[local.x * 8u + local.y];
}
"#;

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

// ---- f16 -----------------------------------------------------------------------------------

/// The f32 value of f16 bits (exact: every f16 is an f32).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f32::from(bits & 0x3ff);
    match exponent {
        0 => sign * mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + mantissa / 1024.0) * 2f32.powi(exponent - 15),
    }
}

/// The f16 bits of `value`, which must be a normal f16 (or zero) exactly.
fn f32_to_f16_exact(value: f32) -> Option<u16> {
    if value == 0.0 {
        return Some(if value.is_sign_negative() { 0x8000 } else { 0 });
    }
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mantissa = bits & 0x7f_ffff;
    if !(1..=30).contains(&exponent) || mantissa & 0x1fff != 0 {
        return None;
    }
    Some(sign | (exponent as u16) << 10 | (mantissa >> 13) as u16)
}

const F16_ARITHMETIC: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = f16(a[i]);
    let y = f16(b[i]);
    let o = 7u * i;
    out[o] = f32(x + y);
    out[o + 1u] = f32(x - y);
    out[o + 2u] = f32(x * y);
    out[o + 3u] = f32(x / y);
    out[o + 4u] = f32(min(x, y));
    out[o + 5u] = f32(max(x, y));
    out[o + 6u] = f32(abs(x) * 0.5h);
}
"#;

fn f16_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 arithmetic", F16_ARITHMETIC, "arith")?;
    // x: quarters up to 64 in magnitude; y: powers of two, so every result is an exact f16.
    let raw = context.random_u32(29, 256);
    let a: Vec<f32> = raw[..128].iter().map(|v| (v % 513) as f32 / 4.0 - 64.0).collect();
    let b: Vec<f32> = raw[128..]
        .iter()
        .map(|v| {
            let magnitude = 2f32.powi((v % 9) as i32 - 3);
            if v & 16 == 0 {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect();
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    let mut expected = Vec::with_capacity(out.len());
    for (&x, &y) in a.iter().zip(&b) {
        // Division is the one operation WGSL does not require to round correctly.
        let results = [
            ("x + y", x + y, Rule::Exact),
            ("x - y", x - y, Rule::Exact),
            ("x * y", x * y, Rule::Exact),
            ("x / y", x / y, Rule::Relative(2e-3)),
            ("min(x, y)", x.min(y), Rule::Exact),
            ("max(x, y)", x.max(y), Rule::Exact),
            ("abs(x) * 0.5", x.abs() * 0.5, Rule::Exact),
        ];
        expected.extend(results.into_iter().map(|(name, value, rule)| Expected {
            value,
            rule,
            label: format!("f16 {name} for x = {x}, y = {y}"),
        }));
    }
    check_floats(&out, &expected, "f16 arithmetic")
}

fn f16_precision(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 arithmetic", F16_ARITHMETIC, "arith")?;
    let a = [2048.0f32, 1.0, 1000.0];
    let b = [1.0f32, 2f32.powi(-11), 0.125];
    let out: Vec<f32> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 7 * a.len())?;
    // x + y for each pair: the exact sum is halfway between two f16 values (or, for
    // 1000 + 0.125, between 1000 and 1000.5), and WGSL allows either neighbour.
    let allowed: [[f32; 2]; 3] = [[2048.0, 2050.0], [1.0, 1.0 + 2f32.powi(-10)], [1000.0, 1000.5]];
    for (k, neighbours) in allowed.iter().enumerate() {
        let sum = out[7 * k];
        check(neighbours.contains(&sum), || {
            format!(
                "f16 {} + {} gave {sum}; an f16 sum is one of {neighbours:?}, not the f32 sum {}",
                a[k],
                b[k],
                a[k] + b[k]
            )
        })?;
    }
    Ok(())
}

const F16_STORAGE: &str = r#"
enable f16;
@group(0) @binding(0) var<storage, read> input: array<f16>;
@group(0) @binding(1) var<storage, read_write> output: array<f16>;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < arrayLength(&output) {
        output[i] = input[i] * 2.0h - 1.0h;
    }
}
"#;

fn f16_storage(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 storage", F16_STORAGE, "scale")?;
    let values: Vec<f32> = (0..80).map(|k| (k as f32 - 40.0) * 3.125).collect();
    let input: Vec<u16> = values.iter().filter_map(|&v| f32_to_f16_exact(v)).collect();
    check_eq(input.len(), values.len(), "inputs exactly representable in f16")?;
    let out: Vec<u16> = run_elementwise(context, &kernel, &[&input], input.len(), input.len())?;
    let got: Vec<f32> = out.iter().map(|&bits| f16_to_f32(bits)).collect();
    let expected: Vec<Expected> = values
        .iter()
        .map(|v| Expected {
            value: v * 2.0 - 1.0,
            rule: Rule::Exact,
            label: format!("{v} * 2 - 1 in array<f16>"),
        })
        .collect();
    check_floats(&got, &expected, "f16 buffer elements")
}

// ---- f64 and i64 ---------------------------------------------------------------------------

const F64_ARITHMETIC: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f64>;
@group(0) @binding(1) var<storage, read> b: array<f64>;
@group(0) @binding(2) var<storage, read_write> out: array<f64>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 5u * i;
    out[o] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = sqrt(abs(x));
}
"#;

fn f64_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f64 arithmetic", F64_ARITHMETIC, "arith")?;
    let two40 = 2f64.powi(40);
    let mut a = vec![two40 + 1.0, 0.1, 1e15 + 1.0, 67_108_865.0, 1.0, 16_777_217.0, -2.5e-10];
    let mut b = vec![3.0, 0.2, 1e15, 67_108_865.0, 3.0, 1.0, 7.0e-11];
    for pair in random_u64(context, 30, 120).chunks_exact(2) {
        // Arbitrary doubles of moderate magnitude, with full 52-bit mantissas.
        let value = |bits: u64| f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | (1000 + (bits >> 52) % 47) << 52);
        a.push(value(pair[0]));
        b.push(value(pair[1]));
    }
    let out: Vec<f64> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 5 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let exact = [x + y, x - y, x * y];
        let got = &out[5 * i..5 * i + 5];
        if got[..3].iter().zip(&exact).any(|(g, e)| g.to_bits() != e.to_bits()) {
            return Err(Verdict::mismatch(
                format!("f64 x + y, x - y, x * y for x = {x:e}, y = {y:e}"),
                exact,
                &got[..3],
            ));
        }
        for (k, (value, expected)) in [(got[3], x / y), (got[4], x.abs().sqrt())].into_iter().enumerate() {
            check((value - expected).abs() <= 1e-12 * expected.abs(), || {
                format!(
                    "f64 {} for x = {x:e}, y = {y:e}: got {value:e}, expected {expected:e} within 1e-12 relative",
                    ["x / y", "sqrt(abs(x))"][k]
                )
            })?;
        }
    }
    Ok(())
}

const F64_ACCUMULATION: &str = r#"
var<immediate> increment: f64;
@group(0) @binding(0) var<storage, read_write> out: array<f64>;

@compute @workgroup_size(1)
fn accumulate() {
    var sum = out[0];
    for (var k = 0u; k < 1000u; k++) {
        sum += increment;
    }
    out[0] = sum;
}
"#;

fn f64_accumulation(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f64 accumulation", F64_ACCUMULATION, "accumulate")?;
    let out = context.device().alloc_from(context.stream(), &[1e8f64])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).buffer(&out).scalar(0.001f64))?;
    let sum = context.stream().read_to_vec(&out)?[0];
    let expected = (0..1000).fold(1e8f64, |acc, _| acc + 0.001);
    check((sum - expected).abs() <= 1e-6, || {
        format!("1e8 plus 0.001 a thousand times gave {sum}, expected {expected} (f32 would stay at 1e8)")
    })
}

const I64_ARITHMETIC: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<i64>;
@group(0) @binding(1) var<storage, read> b: array<i64>;
@group(0) @binding(2) var<storage, read_write> out: array<i64>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let ux = bitcast<u64>(x);
    let uy = bitcast<u64>(y);
    let shift = u32(uy & 63lu);
    let o = 11u * i;
    out[o] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = x % y;
    out[o + 5u] = bitcast<i64>(ux / uy);
    out[o + 6u] = bitcast<i64>(ux % uy);
    out[o + 7u] = x >> shift;
    out[o + 8u] = bitcast<i64>(ux >> shift);
    out[o + 9u] = bitcast<i64>(ux << shift);
    out[o + 10u] = (x & y) ^ (x | 7li);
}
"#;

fn i64_arithmetic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "i64 arithmetic", I64_ARITHMETIC, "arith")?;
    let mut a: Vec<i64> = vec![0x1_0000_0001, i64::MAX, i64::MIN + 1, -5, 0xffff_ffff, 1 << 40];
    let mut b: Vec<i64> = vec![0x1_0000_0001, 2, 3, 2, 0xffff_ffff, -(1 << 20) - 1];
    for (k, pair) in random_u64(context, 31, 116).chunks_exact(2).enumerate() {
        a.push(pair[0] as i64);
        // Half the divisors small; none zero, and no MIN / -1, whose results are the
        // extension's own to define.
        let divisor = if k % 2 == 0 {
            (pair[1] % 5000) as i64 - 2500
        } else {
            pair[1] as i64
        };
        b.push(if divisor == 0 || divisor == -1 { 3 } else { divisor });
    }
    let out: Vec<i64> = run_elementwise(context, &kernel, &[&a, &b], a.len(), 11 * a.len())?;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let (ux, uy) = (x as u64, y as u64);
        let shift = (uy & 63) as u32;
        let expected = [
            x.wrapping_add(y),
            x.wrapping_sub(y),
            x.wrapping_mul(y),
            x / y,
            x % y,
            (ux / uy) as i64,
            (ux % uy) as i64,
            x >> shift,
            (ux >> shift) as i64,
            (ux << shift) as i64,
            (x & y) ^ (x | 7),
        ];
        check_slice_eq(
            &out[11 * i..11 * i + 11],
            &expected,
            &format!("+, -, *, /, %, u64 /, u64 %, >>, u64 >>, u64 <<, bitwise for x = {x}, y = {y}"),
        )?;
    }
    Ok(())
}

const ATOMICS_64_SOURCE: &str = r#"
@group(0) @binding(0) var<storage, read> values: array<u64>;
@group(0) @binding(1) var<storage, read_write> unsigned_results: array<atomic<u64>, 3>;
@group(0) @binding(2) var<storage, read_write> signed_results: array<atomic<i64>, 2>;

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    atomicAdd(&unsigned_results[0], v);
    atomicMax(&unsigned_results[1], v);
    atomicMin(&unsigned_results[2], v);
    atomicMax(&signed_results[0], bitcast<i64>(v));
    atomicMin(&signed_results[1], bitcast<i64>(v));
}
"#;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernels the CPU backend skips must still be valid for a device that claims their
    /// features: they parse, validate, reflect, need exactly those features, and translate
    /// to SPIR-V for Vulkan devices.
    #[test]
    fn kernels_for_optional_features_compile_for_a_device_that_has_them() {
        let cases = [
            (ATOMICS_64_SOURCE, ATOMICS_64.features),
            (F16_ARITHMETIC, F16.features),
            (F16_STORAGE, F16.features),
            (F64_ARITHMETIC, F64.features),
            (F64_ACCUMULATION, F64.features),
            (I64_ARITHMETIC, I64.features),
        ];
        for (source, features) in cases {
            let module = xhal::kernel::parse_wgsl(source).unwrap_or_else(|error| panic!("{error}"));
            assert_eq!(module.required_features(), features.0, "{source}");
            for target in [xhal::kernel::Target::SpirvShader, xhal::kernel::Target::Wgsl] {
                xhal::kernel::translate(source, target).unwrap_or_else(|error| panic!("{target:?}: {error}\n{source}"));
            }
        }
    }

    #[test]
    fn f16_helpers_round_trip_exact_values() {
        for value in [0.0f32, 1.0, -1.5, 65504.0, 2f32.powi(-14), 1000.5] {
            let bits = f32_to_f16_exact(value).unwrap();
            assert_eq!(f16_to_f32(bits), value);
        }
        assert_eq!(f32_to_f16_exact(1.0), Some(0x3c00));
        assert_eq!(f32_to_f16_exact(1.0 + 2f32.powi(-11)), None);
        assert_eq!(f32_to_f16_exact(70000.0), None);
    }
}
