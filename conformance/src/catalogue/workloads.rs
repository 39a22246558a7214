//! The `workloads` area: whole kernels written the way public WGSL compute code is written,
//! each checked against a Rust reference computed here from the same inputs.
//!
//! The other areas prove one rule at a time. This one proves that the rules hold together in
//! the shapes real programs take: tiled matmuls with vec4 loads, softmax and normalisation
//! with workgroup tree reductions written as `while` loops, attention, rotary embeddings,
//! scans, sorts, stencils, particles, convolutions, quantised weights and f16; parameters in
//! `var<uniform>` structs with the uniform layout's padding, bindings with gaps across
//! several groups, `override` constants sizing workgroups and workgroup arrays, and many
//! passes over the same buffers.
//!
//! Integer results must match exactly. Float results match exactly where every operation is
//! exact (small dyadic values, which no rounding mode or fused multiply-add can change), and
//! otherwise within the tolerance stated at each check: it covers the accuracy WGSL allows
//! the builtins used and a device's freedom to fuse a multiply and an add.

use super::kernels::{groups_for, kernel_of, require_workgroup_shape};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_close, check_eq, check_slice_eq, Requirement, TestCase, TestResult, Verdict};
use bytemuck::{Pod, Zeroable};
use xhal::{Features, Launch};

const ATOMICS: Requirement = Requirement::features(Features::ATOMICS_32);
const F16: Requirement = Requirement::features(Features::F16);

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "workloads.matmul.tiled_vec4",
            "a 50x36 by 36x40 product in 16x16 workgroup tiles loaded as vec4, dims in a staged uniform, matches Rust",
            matmul_tiled_vec4
        ),
        test_case!(
            "workloads.matmul.batched_uniform_dims",
            "three batched GEMMs (alpha*A*B + beta*C) reading m, n, k, alpha and beta from a var<uniform> struct in a buffer match Rust",
            matmul_batched_uniform_dims
        ),
        test_case!(
            "workloads.softmax.rows",
            "row softmax over 300 columns, row max and sum by while-loop tree reductions in workgroup memory, matches Rust",
            softmax_rows
        ),
        test_case!(
            "workloads.layernorm.rows",
            "layer normalisation (two-pass mean and variance, gamma and beta) of 96-wide rows matches Rust",
            layernorm_rows
        ),
        test_case!(
            "workloads.rmsnorm.vec4_rows",
            "RMS normalisation of 200-wide rows read as vec4, sum of squares by dot and a tree, matches Rust",
            rmsnorm_vec4_rows
        ),
        test_case!(
            "workloads.attention.scaled_dot_product",
            "scaled dot-product attention for 3 heads of 24 tokens, with and without a causal mask, matches Rust",
            attention_scaled_dot_product
        ),
        test_case!(
            "workloads.rope.rotary_embedding",
            "rotary position embeddings (pairs rotated by pos * base^(-2i/d), sin and cos) applied in place match Rust",
            rope_rotary_embedding
        ),
        test_case!(
            "workloads.cross_entropy.loss_and_grad",
            "cross-entropy loss and its gradient per row, with an ignored target, match Rust",
            cross_entropy_loss_and_grad
        ),
        test_case!(
            "workloads.activation.gelu_tanh",
            "GELU (tanh approximation) over vec4 elements in [-8, 8] matches Rust",
            activation_gelu_tanh
        ),
        test_case!(
            "workloads.activation.silu",
            "SiLU (x * sigmoid(x)) over vec4 elements in [-20, 20] matches Rust",
            activation_silu
        ),
        test_case!(
            "workloads.reduce.pointer_across_barriers",
            "chunk sums with a read position advanced through a pointer after each barrier-synchronised tree are exact",
            reduce_pointer_across_barriers
        ),
        test_case!(
            "workloads.scan.exclusive_prefix_sum",
            "a work-efficient (up-sweep, down-sweep) exclusive scan of 5197 words in three passes is exact",
            scan_exclusive_prefix_sum
        ),
        test_case!(
            "workloads.histogram.byte_bins",
            "a 256-bin histogram of packed bytes, counted in workgroup atomics and flushed to storage atomics, is exact",
            ATOMICS,
            histogram_byte_bins
        ),
        test_case!(
            "workloads.sort.bitonic",
            "a bitonic sort of 1024 words in 55 passes, each given its stage as a uniform struct, sorts them",
            sort_bitonic
        ),
        test_case!(
            "workloads.sort.bitonic_key_value",
            "a bitonic sort of 512 (f32 key, u32 index) structs, descending, carries each index with its key",
            sort_bitonic_key_value
        ),
        test_case!(
            "workloads.life.ping_pong",
            "ten steps of the game of life on a 40x30 torus, ping-ponging two buffers, match Rust",
            life_ping_pong
        ),
        test_case!(
            "workloads.particles.flocking",
            "a boids-style step over 256 particle structs (cohesion, separation, alignment, speed limit, wrap) matches Rust",
            particles_flocking
        ),
        test_case!(
            "workloads.transpose.padded_tile",
            "a 50x37 transpose through a padded 16x17 workgroup tile copies every element to its place",
            transpose_padded_tile
        ),
        test_case!(
            "workloads.conv.conv1d",
            "a 3-to-5 channel 1D convolution with stride 2, padding 3 and dilation 2 matches Rust",
            conv_conv1d
        ),
        test_case!(
            "workloads.conv.conv2d_3x3_relu",
            "a batched 3x3 2D convolution with weights staged in workgroup memory, bias and ReLU, matches Rust",
            conv_conv2d_3x3_relu
        ),
        test_case!(
            "workloads.blur.separable_gaussian",
            "a separable 5-tap blur of an RGBA image (row pass through a workgroup cache, column pass direct) is exact",
            blur_separable_gaussian
        ),
        test_case!(
            "workloads.argmax.rows",
            "argmax of 1000-wide rows with many ties, by a tree over (value, index) pairs, picks the lowest index of the maximum",
            argmax_rows
        ),
        test_case!(
            "workloads.topk.repeated_max",
            "top-8 of each 512-wide row by eight rounds of workgroup max and removal gives Rust's values and indices",
            topk_repeated_max
        ),
        test_case!(
            "workloads.embedding.gather",
            "token and position embeddings gathered as vec4 rows, scaled and summed, with out-of-vocabulary ids zeroed, are exact",
            embedding_gather
        ),
        test_case!(
            "workloads.dequant.int8_unpack4x8snorm",
            "int8 weights packed four to a word, unpacked with unpack4x8snorm and scaled per block, match Rust",
            dequant_int8_unpack4x8snorm
        ),
        test_case!(
            "workloads.dequant.int4_extract_bits",
            "signed int4 weights packed eight to a word, unpacked with extractBits on i32 and scaled per block, are exact",
            dequant_int4_extract_bits
        ),
        test_case!(
            "workloads.dequant.int4_matvec",
            "a matrix-vector product over unsigned int4 weights with a scale and minimum per block matches Rust",
            dequant_int4_matvec
        ),
        test_case!(
            "workloads.f16.gemv_f32_accumulate",
            "a matrix-vector product over vec4<f16> storage, accumulated in f32, is exact",
            F16,
            f16_gemv_f32_accumulate
        ),
        test_case!(
            "workloads.f16.rounded_per_operation",
            "each f16 operation rounds to f16: a * b + c gives a neighbour of each rounded step, never the bits of f32 or fused evaluation",
            F16,
            f16_rounded_per_operation
        ),
        test_case!(
            "workloads.f16.silu_half",
            "SiLU computed in f16 arithmetic over array<f16> storage matches Rust within f16 precision",
            F16,
            f16_silu_half
        ),
        test_case!(
            "workloads.override.block_size",
            "override constants set the workgroup size, a workgroup array's length and a weight: 16, 64 (default) and 128",
            override_block_size
        ),
        test_case!(
            "workloads.bindings.gaps_and_groups",
            "a fused bias, residual and leaky-ReLU kernel with bindings (0,0) (0,1) (0,3) (1,0) (1,2) declared out of order is exact",
            bindings_gaps_and_groups
        ),
        test_case!(
            "workloads.uniform.shading_params",
            "a shading kernel reading vec3-then-scalar pairs, array<vec4<f32>, 4> and an @align(16) struct from a uniform, bound both ways, is exact",
            uniform_shading_params
        ),
        test_case!(
            "workloads.nbody.tiled_vec3_structs",
            "a tiled n-body step over structs of vec3-then-scalar members (position, mass, velocity, age) matches Rust",
            nbody_tiled_vec3_structs
        ),
        test_case!(
            "workloads.uniform.matrices",
            "a transform pre-pass reading a mat4x4, a mat3x3 (16-byte columns) and a vec3 with a scalar from a uniform is exact",
            uniform_matrices
        ),
        test_case!(
            "workloads.override.matmul_tiles",
            "a tiled matmul whose tile edge is an override sizing a 2D workgroup and tile*tile workgroup arrays is exact for 4, 8 and 16",
            override_matmul_tiles
        ),
        test_case!(
            "workloads.stencil.heat_loop_continuing",
            "37 Jacobi heat-diffusion steps in workgroup memory, in a loop with a continuing block and break if, are exact",
            heat_loop_continuing
        ),
    ]
}

// ---- helpers -------------------------------------------------------------------------------

/// Seeded floats spread evenly over [low, high).
fn random_f32(context: &TestContext, seed: u64, count: usize, low: f32, high: f32) -> Vec<f32> {
    context
        .random_u32(seed, count)
        .into_iter()
        .map(|value| low + (high - low) * ((value >> 8) as f32 / (1u32 << 24) as f32))
        .collect()
}

/// Seeded multiples of `1 / denominator` from `low`, `steps` of them: values whose sums and
/// products stay exact in f32, so results can be compared bit for bit.
fn random_dyadic(context: &TestContext, seed: u64, count: usize, low: f32, steps: u32, denominator: f32) -> Vec<f32> {
    context
        .random_u32(seed, count)
        .into_iter()
        .map(|value| low + (value % steps) as f32 / denominator)
        .collect()
}

/// Groups four floats at a time, as an `array<vec4<f32>>` holds them.
fn to_vec4(values: &[f32]) -> Vec<[f32; 4]> {
    values
        .chunks(4)
        .map(|chunk| {
            let mut lanes = [0.0; 4];
            lanes[..chunk.len()].copy_from_slice(chunk);
            lanes
        })
        .collect()
}

fn from_vec4(values: &[[f32; 4]]) -> Vec<f32> {
    values.iter().flatten().copied().collect()
}

/// Fails unless every element is within `relative` of the expected one, relative to the
/// expected magnitude, or within `absolute` of it. `check_close` is absolute below 1; this is
/// the check for results (probabilities, activations) whose small values matter as much.
fn check_relative(actual: &[f32], expected: &[f32], relative: f32, absolute: f32, what: &str) -> TestResult {
    if actual.len() != expected.len() {
        return Err(Verdict::mismatch(
            format!("{what}: wrong length"),
            expected.len(),
            actual.len(),
        ));
    }
    // Written as "not close" so that a NaN on either side counts as far.
    let far = |a: f32, e: f32| {
        let error = (a - e).abs();
        !(error <= absolute || error <= relative * e.abs())
    };
    let mut differing = actual
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (a, e))| far(**a, **e));
    match differing.next() {
        None => Ok(()),
        Some((index, (actual_value, expected_value))) => Err(Verdict::mismatch(
            format!(
                "{what}: element {index} is off by more than {relative} relative and {absolute} absolute \
                 ({} of {} elements are)",
                differing.count() + 1,
                actual.len()
            ),
            expected_value,
            actual_value,
        )),
    }
}

/// The f32 value of f16 bits; exact, since every f16 is an f32.
fn f16_bits_to_f32(bits: u16) -> f32 {
    let magnitude = match (bits >> 10) & 0x1f {
        0 => f32::from(bits & 0x3ff) * 2f32.powi(-24),
        0x1f if bits & 0x3ff == 0 => f32::INFINITY,
        0x1f => f32::NAN,
        exponent => (1.0 + f32::from(bits & 0x3ff) / 1024.0) * 2f32.powi(i32::from(exponent) - 15),
    };
    if bits & 0x8000 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The f16 bits of `value` when it is zero or a normal f16 exactly; `None` otherwise.
fn f16_bits_exact(value: f32) -> Option<u16> {
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

/// `values` as f16 bits; each must be exactly representable, which the caller arranges.
fn f16_buffer_bits(values: &[f32]) -> Result<Vec<u16>, Verdict> {
    values
        .iter()
        .map(|&value| {
            f16_bits_exact(value).ok_or_else(|| Verdict::fail(format!("test input {value} is not an exact f16")))
        })
        .collect()
}

/// Softmax of one row, in f64.
fn softmax_f64(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let exps: Vec<f64> = row.iter().map(|&v| (f64::from(v) - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

// ---- matmul --------------------------------------------------------------------------------

const MATMUL_TILED_VEC4: &str = r#"
// C = A * B for row-major A (m x k), B (k x n) and C (m x n), with k and n multiples of 4 so
// that every row is whole vec4s. A workgroup computes a 16x16 tile of C, each invocation one
// vec4 of it (a row, four columns); 16x16 tiles of A and B pass through workgroup memory.
struct Dims {
    m: u32,
    n: u32,
    k: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<vec4<f32>>;

const TILE: u32 = 16u;
const TILE_VEC4: u32 = 4u;

var<workgroup> tile_a: array<array<vec4<f32>, 4>, 16>;
var<workgroup> tile_b: array<array<vec4<f32>, 4>, 16>;

@compute @workgroup_size(4, 16, 1)
fn matmul_vec4(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let row = group.y * TILE + local.y;
    let col4 = group.x * TILE_VEC4 + local.x;
    let k4 = dims.k / 4u;
    let n4 = dims.n / 4u;
    var acc = vec4<f32>(0.0);
    let tiles = (dims.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        let a_col4 = t * TILE_VEC4 + local.x;
        if row < dims.m && a_col4 < k4 {
            tile_a[local.y][local.x] = a[row * k4 + a_col4];
        } else {
            tile_a[local.y][local.x] = vec4<f32>(0.0);
        }
        let b_row = t * TILE + local.y;
        if b_row < dims.k && col4 < n4 {
            tile_b[local.y][local.x] = b[b_row * n4 + col4];
        } else {
            tile_b[local.y][local.x] = vec4<f32>(0.0);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_VEC4; kk++) {
            let a4 = tile_a[local.y][kk];
            acc += a4.x * tile_b[4u * kk][local.x];
            acc += a4.y * tile_b[4u * kk + 1u][local.x];
            acc += a4.z * tile_b[4u * kk + 2u][local.x];
            acc += a4.w * tile_b[4u * kk + 3u][local.x];
        }
        workgroupBarrier();
    }
    if row < dims.m && col4 < n4 {
        c[row * n4 + col4] = acc;
    }
}
"#;

/// Row-major `a` (m x k) times `b` (k x n), summed in f64.
fn matmul_reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for row in 0..m {
        for col in 0..n {
            c[row * n + col] = (0..k)
                .map(|i| f64::from(a[row * k + i]) * f64::from(b[i * n + col]))
                .sum();
        }
    }
    c
}

fn matmul_tiled_vec4(context: &TestContext) -> TestResult {
    require_workgroup_shape(context, [4, 16, 1])?;
    let kernel = kernel_of(context, "vec4 tiled matmul", MATMUL_TILED_VEC4, "matmul_vec4")?;
    let (m, n, k) = (50usize, 40usize, 36usize);
    let a = random_f32(context, 1001, m * k, -1.0, 1.0);
    let b = random_f32(context, 1002, k * n, -1.0, 1.0);
    let device = context.device();
    let stream = context.stream();
    let a_buffer = device.alloc_from(stream, &to_vec4(&a))?;
    let b_buffer = device.alloc_from(stream, &to_vec4(&b))?;
    let c_buffer = device.alloc_from(stream, &vec![[f32::NAN; 4]; m * n / 4])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n / 4, 4), groups_for(m, 16), 1)
            .uniform(&[m as u32, n as u32, k as u32, 0])
            .buffer(&a_buffer)
            .buffer(&b_buffer)
            .buffer(&c_buffer),
    )?;
    let expected: Vec<f32> = matmul_reference(&a, &b, m, n, k).iter().map(|&v| v as f32).collect();
    // 36 products of values in [-1, 1] summed in f32: at most 36 roundings of partial sums
    // below 36, about 36 * 36 * 6e-8 = 8e-5 in the worst case; fusing changes it less.
    check_close(
        &from_vec4(&stream.read_to_vec(&c_buffer)?),
        &expected,
        1e-4,
        "50x36 by 36x40 product",
    )
}

const MATMUL_BATCHED: &str = r#"
// C[b] = alpha * A[b] * B[b] + beta * C[b] for a batch of row-major matrices; one invocation
// per element of C, batch in z.
struct Gemm {
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    alpha: f32,
    beta: f32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> gemm: Gemm;

@compute @workgroup_size(8, 8, 1)
fn batched_gemm(@builtin(global_invocation_id) id: vec3<u32>) {
    let col = id.x;
    let row = id.y;
    let batch = id.z;
    if col >= gemm.n || row >= gemm.m || batch >= gemm.batches {
        return;
    }
    let a_row = batch * gemm.m * gemm.k + row * gemm.k;
    let b_base = batch * gemm.k * gemm.n;
    var sum = 0.0;
    for (var i = 0u; i < gemm.k; i++) {
        sum = fma(a[a_row + i], b[b_base + i * gemm.n + col], sum);
    }
    let index = batch * gemm.m * gemm.n + row * gemm.n + col;
    c[index] = gemm.alpha * sum + gemm.beta * c[index];
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GemmParams {
    m: u32,
    n: u32,
    k: u32,
    batches: u32,
    alpha: f32,
    beta: f32,
}

fn matmul_batched_uniform_dims(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "batched GEMM", MATMUL_BATCHED, "batched_gemm")?;
    let (batches, m, n, k) = (3usize, 20usize, 28usize, 24usize);
    let (alpha, beta) = (1.5f32, -0.5f32);
    let a = random_f32(context, 1011, batches * m * k, -1.0, 1.0);
    let b = random_f32(context, 1012, batches * k * n, -1.0, 1.0);
    let c = random_f32(context, 1013, batches * m * n, -1.0, 1.0);
    let params = GemmParams {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        batches: batches as u32,
        alpha,
        beta,
    };
    let device = context.device();
    let stream = context.stream();
    let a_buffer = device.alloc_from(stream, &a)?;
    let b_buffer = device.alloc_from(stream, &b)?;
    let c_buffer = device.alloc_from(stream, &c)?;
    let params_buffer = device.alloc_from(stream, &[params])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 8), groups_for(m, 8), batches as u32)
            .buffer(&a_buffer)
            .buffer(&b_buffer)
            .buffer(&c_buffer)
            .buffer(&params_buffer),
    )?;
    let mut expected = Vec::with_capacity(c.len());
    for batch in 0..batches {
        let product = matmul_reference(
            &a[batch * m * k..(batch + 1) * m * k],
            &b[batch * k * n..(batch + 1) * k * n],
            m,
            n,
            k,
        );
        for (index, value) in product.iter().enumerate() {
            let old = f64::from(c[batch * m * n + index]);
            expected.push((f64::from(alpha) * value + f64::from(beta) * old) as f32);
        }
    }
    // 24 fused products below 1 in magnitude (about 24 * 24 * 6e-8 = 4e-5 at worst), scaled
    // by 1.5, plus two roundings.
    check_close(
        &stream.read_to_vec(&c_buffer)?,
        &expected,
        1e-4,
        "1.5 * A * B - 0.5 * C for three 20x24 by 24x28 products",
    )
}

// ---- softmax and normalisation -------------------------------------------------------------

const SOFTMAX: &str = r#"
// One workgroup per row: a strided pass for the row maximum, a tree to combine it, a strided
// pass for the sum of exponentials, a tree again, then the normalised row.
struct Shape {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> shape: Shape;

const WG: u32 = 128u;
var<workgroup> scratch: array<f32, WG>;

@compute @workgroup_size(128)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x;
    let tid = lid.x;
    let base = row * shape.cols;

    var local_max = -3.402823e38;
    var col = tid;
    while (col < shape.cols) {
        local_max = max(local_max, input[base + col]);
        col += WG;
    }
    scratch[tid] = local_max;
    workgroupBarrier();
    var stride = WG / 2u;
    while (stride > 0u) {
        if (tid < stride) {
            scratch[tid] = max(scratch[tid], scratch[tid + stride]);
        }
        workgroupBarrier();
        stride = stride / 2u;
    }
    let row_max = scratch[0];
    workgroupBarrier();

    var local_sum = 0.0;
    col = tid;
    while (col < shape.cols) {
        local_sum += exp(input[base + col] - row_max);
        col += WG;
    }
    scratch[tid] = local_sum;
    workgroupBarrier();
    stride = WG / 2u;
    while (stride > 0u) {
        if (tid < stride) {
            scratch[tid] = scratch[tid] + scratch[tid + stride];
        }
        workgroupBarrier();
        stride = stride / 2u;
    }
    let inv_sum = 1.0 / scratch[0];

    col = tid;
    while (col < shape.cols) {
        output[base + col] = exp(input[base + col] - row_max) * inv_sum;
        col += WG;
    }
}
"#;

fn softmax_rows(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "softmax", SOFTMAX, "softmax")?;
    let (rows, cols) = (6usize, 300usize);
    let input = random_f32(context, 1021, rows * cols, -10.0, 10.0);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    let output = device.alloc_from(stream, &vec![f32::NAN; rows * cols])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&input_buffer)
            .buffer(&output)
            .uniform(&[rows as u32, cols as u32]),
    )?;
    let expected: Vec<f32> = input.chunks(cols).flat_map(softmax_f64).map(|p| p as f32).collect();
    // Relative, since most probabilities are far below 1: exp(x - max) is within 3 + 2|x|
    // ulp in WGSL (|x| <= 20: 43 ulp, 5e-6), the rounded difference adds |x| * 6e-8, the
    // sum of positive terms and the reciprocal a few ulp more: 2e-5.
    check_relative(
        &stream.read_to_vec(&output)?,
        &expected,
        2e-5,
        1e-30,
        "softmax of six rows",
    )
}

const LAYERNORM: &str = r#"
// y = (x - mean) / sqrt(var + eps) * gamma + beta, one workgroup per row, mean and variance in
// two passes through the same workgroup-sum helper.
struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> gamma: array<f32>;
@group(0) @binding(2) var<storage, read> beta: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const WORKGROUP: u32 = 64u;
var<workgroup> partial_sums: array<f32, WORKGROUP>;

// The sum of every invocation's `value`. Holds barriers: every invocation must call it.
fn workgroup_sum(lane: u32, value: f32) -> f32 {
    partial_sums[lane] = value;
    workgroupBarrier();
    var stride = WORKGROUP / 2u;
    while stride > 0u {
        if lane < stride {
            partial_sums[lane] += partial_sums[lane + stride];
        }
        workgroupBarrier();
        stride /= 2u;
    }
    let total = partial_sums[0];
    // Everyone has read the total before the next call overwrites the scratch.
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = group.x;
    if row >= params.rows {
        return;
    }
    let base = row * params.cols;
    var sum = 0.0;
    for (var i = lane; i < params.cols; i += WORKGROUP) {
        sum += x[base + i];
    }
    let mean = workgroup_sum(lane, sum) / f32(params.cols);
    var squares = 0.0;
    for (var i = lane; i < params.cols; i += WORKGROUP) {
        let d = x[base + i] - mean;
        squares += d * d;
    }
    let variance = workgroup_sum(lane, squares) / f32(params.cols);
    let inv_std = inverseSqrt(variance + params.eps);
    for (var i = lane; i < params.cols; i += WORKGROUP) {
        y[base + i] = (x[base + i] - mean) * inv_std * gamma[i] + beta[i];
    }
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct LayerNormParams {
    rows: u32,
    cols: u32,
    eps: f32,
}

fn layernorm_rows(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "layer norm", LAYERNORM, "layer_norm")?;
    let (rows, cols) = (5usize, 96usize);
    let eps = 1e-5f32;
    let x = random_f32(context, 1031, rows * cols, -3.0, 5.0);
    let gamma = random_f32(context, 1032, cols, 0.5, 1.5);
    let beta = random_f32(context, 1033, cols, -0.5, 0.5);
    let device = context.device();
    let stream = context.stream();
    let x_buffer = device.alloc_from(stream, &x)?;
    let gamma_buffer = device.alloc_from(stream, &gamma)?;
    let beta_buffer = device.alloc_from(stream, &beta)?;
    let y_buffer = device.alloc_from(stream, &vec![f32::NAN; rows * cols])?;
    let params = device.alloc_from(
        stream,
        &[LayerNormParams {
            rows: rows as u32,
            cols: cols as u32,
            eps,
        }],
    )?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&x_buffer)
            .buffer(&gamma_buffer)
            .buffer(&beta_buffer)
            .buffer(&y_buffer)
            .buffer(&params),
    )?;
    let mut expected = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / cols as f64;
        let variance = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / cols as f64;
        let inv_std = 1.0 / (variance + f64::from(eps)).sqrt();
        for (i, &v) in row.iter().enumerate() {
            expected.push(((f64::from(v) - mean) * inv_std * f64::from(gamma[i]) + f64::from(beta[i])) as f32);
        }
    }
    // Normalised values up to about 3 in magnitude; the sums are over at most 96 values
    // (relative error ~1e-6), inverseSqrt is within 2 ulp: 1e-4 relative covers it.
    check_close(
        &stream.read_to_vec(&y_buffer)?,
        &expected,
        1e-4,
        "layer-normalised rows",
    )
}

const RMSNORM: &str = r#"
// y = x / sqrt(mean(x^2) + eps) * weight over rows of vec4s, one workgroup of 32 per row.
struct Params {
    cols4: u32,
    eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> sums: array<f32, 32>;

@compute @workgroup_size(32)
fn rms_norm(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let base = group.x * params.cols4;
    var squares = 0.0;
    for (var i = lane; i < params.cols4; i += 32u) {
        let v = x[base + i];
        squares += dot(v, v);
    }
    sums[lane] = squares;
    workgroupBarrier();
    var offset = 16u;
    while offset > 0u {
        if lane < offset {
            sums[lane] += sums[lane + offset];
        }
        workgroupBarrier();
        offset >>= 1u;
    }
    let scale = inverseSqrt(sums[0] / f32(params.cols4 * 4u) + params.eps);
    for (var i = lane; i < params.cols4; i += 32u) {
        y[base + i] = x[base + i] * scale * weight[i];
    }
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RmsNormParams {
    cols4: u32,
    eps: f32,
}

fn rmsnorm_vec4_rows(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "RMS norm", RMSNORM, "rms_norm")?;
    let (rows, cols) = (7usize, 200usize);
    let eps = 1e-6f32;
    let x = random_f32(context, 1041, rows * cols, -2.0, 2.0);
    let weight = random_f32(context, 1042, cols, 0.5, 1.5);
    let device = context.device();
    let stream = context.stream();
    let x_buffer = device.alloc_from(stream, &to_vec4(&x))?;
    let weight_buffer = device.alloc_from(stream, &to_vec4(&weight))?;
    let y_buffer = device.alloc_from(stream, &vec![[f32::NAN; 4]; rows * cols / 4])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&x_buffer)
            .buffer(&weight_buffer)
            .buffer(&y_buffer)
            .uniform(&RmsNormParams {
                cols4: (cols / 4) as u32,
                eps,
            }),
    )?;
    let mut expected = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let mean_square = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / cols as f64;
        let scale = 1.0 / (mean_square + f64::from(eps)).sqrt();
        expected.extend(
            row.iter()
                .zip(&weight)
                .map(|(&v, &w)| (f64::from(v) * scale * f64::from(w)) as f32),
        );
    }
    // Outputs below about 5; a sum of 200 squares (relative error ~1e-6) and inverseSqrt
    // (2 ulp) make the scale good to ~1e-6: 1e-5 relative.
    check_close(
        &from_vec4(&stream.read_to_vec(&y_buffer)?),
        &expected,
        1e-5,
        "RMS-normalised rows",
    )
}

// ---- attention -----------------------------------------------------------------------------

const ATTENTION: &str = r#"
// softmax(q k^T * scale) v for one query of one head per workgroup: invocation j scores key
// j, trees find the maximum and the sum, then invocation d writes output dimension d.
struct Params {
    seq: u32,
    head_dim: u32,
    causal: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const MAX_SEQ: u32 = 64u;
var<workgroup> probabilities: array<f32, MAX_SEQ>;
var<workgroup> reduce_buf: array<f32, MAX_SEQ>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let query = wid.x;
    let head = wid.y;
    let head_base = head * params.seq * params.head_dim;
    let q_base = head_base + query * params.head_dim;

    let visible = lane < params.seq && (params.causal == 0u || lane <= query);
    var score = -3.402823e38;
    if visible {
        var dot_qk = 0.0;
        for (var d = 0u; d < params.head_dim; d++) {
            dot_qk += q[q_base + d] * k[head_base + lane * params.head_dim + d];
        }
        score = dot_qk * params.scale;
    }
    reduce_buf[lane] = score;
    workgroupBarrier();
    for (var stride = MAX_SEQ / 2u; stride > 0u; stride >>= 1u) {
        if lane < stride {
            reduce_buf[lane] = max(reduce_buf[lane], reduce_buf[lane + stride]);
        }
        workgroupBarrier();
    }
    let row_max = reduce_buf[0];
    workgroupBarrier();

    var p = 0.0;
    if visible {
        p = exp(score - row_max);
    }
    probabilities[lane] = p;
    reduce_buf[lane] = p;
    workgroupBarrier();
    for (var stride = MAX_SEQ / 2u; stride > 0u; stride >>= 1u) {
        if lane < stride {
            reduce_buf[lane] += reduce_buf[lane + stride];
        }
        workgroupBarrier();
    }
    let total = reduce_buf[0];

    if lane < params.head_dim {
        var acc = 0.0;
        for (var j = 0u; j < params.seq; j++) {
            acc += probabilities[j] * v[head_base + j * params.head_dim + lane];
        }
        o[q_base + lane] = acc / total;
    }
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct AttentionParams {
    seq: u32,
    head_dim: u32,
    causal: u32,
    scale: f32,
}

fn attention_scaled_dot_product(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "attention", ATTENTION, "attention")?;
    let (heads, seq, head_dim) = (3usize, 24usize, 16usize);
    let scale = 1.0 / (head_dim as f32).sqrt();
    let q = random_f32(context, 1051, heads * seq * head_dim, -1.0, 1.0);
    let k = random_f32(context, 1052, heads * seq * head_dim, -1.0, 1.0);
    let v = random_f32(context, 1053, heads * seq * head_dim, -1.0, 1.0);
    let device = context.device();
    let stream = context.stream();
    let q_buffer = device.alloc_from(stream, &q)?;
    let k_buffer = device.alloc_from(stream, &k)?;
    let v_buffer = device.alloc_from(stream, &v)?;
    for causal in [false, true] {
        let o_buffer = device.alloc_from(stream, &vec![f32::NAN; q.len()])?;
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(seq as u32, heads as u32, 1)
                .buffer(&q_buffer)
                .buffer(&k_buffer)
                .buffer(&v_buffer)
                .buffer(&o_buffer)
                .uniform(&AttentionParams {
                    seq: seq as u32,
                    head_dim: head_dim as u32,
                    causal: u32::from(causal),
                    scale,
                }),
        )?;
        let mut expected = vec![0f32; q.len()];
        for head in 0..heads {
            let base = head * seq * head_dim;
            for query in 0..seq {
                let keys = if causal { query + 1 } else { seq };
                let scores: Vec<f32> = (0..keys)
                    .map(|key| {
                        let dot: f64 = (0..head_dim)
                            .map(|d| {
                                f64::from(q[base + query * head_dim + d]) * f64::from(k[base + key * head_dim + d])
                            })
                            .sum();
                        (dot * f64::from(scale)) as f32
                    })
                    .collect();
                let probabilities = softmax_f64(&scores);
                for d in 0..head_dim {
                    let value: f64 = probabilities
                        .iter()
                        .enumerate()
                        .map(|(key, p)| p * f64::from(v[base + key * head_dim + d]))
                        .sum();
                    expected[base + query * head_dim + d] = value as f32;
                }
            }
        }
        // Outputs are averages of values in [-1, 1]: scores of 16 products (~1e-6), exp
        // within a few ulp, and a weighted sum of 24: 1e-5 absolute is ample.
        check_close(
            &stream.read_to_vec(&o_buffer)?,
            &expected,
            1e-5,
            if causal {
                "causal attention output"
            } else {
                "attention output"
            },
        )?;
    }
    Ok(())
}

// ---- rotary embeddings ---------------------------------------------------------------------

const ROPE: &str = r#"
// Rotary position embedding, in place: element pair i of each head of the token at position
// p turns by p * theta_base^(-2i / head_dim).
struct Rope {
    seq: u32,
    heads: u32,
    half_dim: u32,
    position_offset: u32,
    theta_base: f32,
}

@group(0) @binding(0) var<storage, read_write> x: array<vec2<f32>>;
@group(0) @binding(1) var<uniform> rope: Rope;

@compute @workgroup_size(64)
fn apply_rope(@builtin(global_invocation_id) id: vec3<u32>) {
    let index = id.x;
    if index >= rope.seq * rope.heads * rope.half_dim {
        return;
    }
    let pair = index % rope.half_dim;
    let token = index / (rope.heads * rope.half_dim);
    let position = f32(token + rope.position_offset);
    let inv_freq = pow(rope.theta_base, -f32(2u * pair) / f32(2u * rope.half_dim));
    let angle = position * inv_freq;
    let c = cos(angle);
    let s = sin(angle);
    let v = x[index];
    x[index] = vec2<f32>(v.x * c - v.y * s, v.x * s + v.y * c);
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RopeParams {
    seq: u32,
    heads: u32,
    half_dim: u32,
    position_offset: u32,
    theta_base: f32,
}

fn rope_rotary_embedding(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "rotary embedding", ROPE, "apply_rope")?;
    let (seq, heads, half_dim, offset) = (12usize, 3usize, 8usize, 4usize);
    let base = 10_000f32;
    let x = random_f32(context, 1061, seq * heads * half_dim * 2, -1.0, 1.0);
    let device = context.device();
    let stream = context.stream();
    let pairs: Vec<[f32; 2]> = x.chunks(2).map(|pair| [pair[0], pair[1]]).collect();
    let buffer = device.alloc_from(stream, &pairs)?;
    let params = device.alloc_from(
        stream,
        &[RopeParams {
            seq: seq as u32,
            heads: heads as u32,
            half_dim: half_dim as u32,
            position_offset: offset as u32,
            theta_base: base,
        }],
    )?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(pairs.len(), 64), 1, 1)
            .buffer(&buffer)
            .buffer(&params),
    )?;
    let expected: Vec<f32> = pairs
        .iter()
        .enumerate()
        .flat_map(|(index, &[a, b])| {
            let pair = index % half_dim;
            let position = (index / (heads * half_dim) + offset) as f64;
            let angle = position * f64::from(base).powf(-((2 * pair) as f64) / (2 * half_dim) as f64);
            let (s, c) = angle.sin_cos();
            let (a, b) = (f64::from(a), f64::from(b));
            [(a * c - b * s) as f32, (a * s + b * c) as f32]
        })
        .collect();
    // Angles up to 15 radians. WGSL bounds sin and cos by 2^-11 absolute only on [-pi, pi];
    // devices reduce larger arguments, and 2e-3 absolute (two terms of up to 2^-11 each on
    // values below 1, plus pow's few ulp times 15) is the bound the language suggests.
    check_close(
        &stream.read_to_vec(&buffer)?.into_iter().flatten().collect::<Vec<f32>>(),
        &expected,
        2e-3,
        "rotated pairs",
    )
}

// ---- cross-entropy -------------------------------------------------------------------------

const CROSS_ENTROPY: &str = r#"
// Per row: loss = logsumexp(logits) - logits[target] and grad = softmax(logits) - onehot(target);
// a row whose target is the ignore index contributes no loss and no gradient.
struct Params {
    rows: u32,
    classes: u32,
    ignore_index: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> targets: array<u32>;
@group(0) @binding(2) var<storage, read_write> losses: array<f32>;
@group(0) @binding(3) var<storage, read_write> grad: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const WG: u32 = 64u;
var<workgroup> scratch: array<f32, WG>;

fn reduce_max(lane: u32, value: f32) -> f32 {
    scratch[lane] = value;
    workgroupBarrier();
    var stride = WG / 2u;
    while stride > 0u {
        if lane < stride {
            scratch[lane] = max(scratch[lane], scratch[lane + stride]);
        }
        workgroupBarrier();
        stride >>= 1u;
    }
    let result = scratch[0];
    workgroupBarrier();
    return result;
}

fn reduce_sum(lane: u32, value: f32) -> f32 {
    scratch[lane] = value;
    workgroupBarrier();
    var stride = WG / 2u;
    while stride > 0u {
        if lane < stride {
            scratch[lane] += scratch[lane + stride];
        }
        workgroupBarrier();
        stride >>= 1u;
    }
    let result = scratch[0];
    workgroupBarrier();
    return result;
}

@compute @workgroup_size(64)
fn cross_entropy(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = group.x;
    let base = row * params.classes;
    var m = -3.402823e38;
    for (var c = lane; c < params.classes; c += WG) {
        m = max(m, logits[base + c]);
    }
    let row_max = reduce_max(lane, m);
    var s = 0.0;
    for (var c = lane; c < params.classes; c += WG) {
        s += exp(logits[base + c] - row_max);
    }
    let sum_exp = reduce_sum(lane, s);

    let target_class = targets[row];
    let ignored = target_class == params.ignore_index;
    if lane == 0u {
        if ignored {
            losses[row] = 0.0;
        } else {
            losses[row] = log(sum_exp) + row_max - logits[base + target_class];
        }
    }
    for (var c = lane; c < params.classes; c += WG) {
        var g = 0.0;
        if !ignored {
            g = exp(logits[base + c] - row_max) / sum_exp - select(0.0, 1.0, c == target_class);
        }
        grad[base + c] = g;
    }
}
"#;

fn cross_entropy_loss_and_grad(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "cross-entropy", CROSS_ENTROPY, "cross_entropy")?;
    let (rows, classes) = (10usize, 50usize);
    let ignore = u32::MAX;
    let logits = random_f32(context, 1071, rows * classes, -5.0, 5.0);
    let targets: Vec<u32> = context
        .random_u32(1072, rows)
        .iter()
        .enumerate()
        .map(|(row, v)| if row % 4 == 3 { ignore } else { v % classes as u32 })
        .collect();
    let device = context.device();
    let stream = context.stream();
    let logits_buffer = device.alloc_from(stream, &logits)?;
    let targets_buffer = device.alloc_from(stream, &targets)?;
    let losses = device.alloc_from(stream, &vec![f32::NAN; rows])?;
    let grad = device.alloc_from(stream, &vec![f32::NAN; rows * classes])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&logits_buffer)
            .buffer(&targets_buffer)
            .buffer(&losses)
            .buffer(&grad)
            .uniform(&[rows as u32, classes as u32, ignore]),
    )?;
    let mut expected_losses = Vec::with_capacity(rows);
    let mut expected_grad = Vec::with_capacity(rows * classes);
    for (row, &target) in logits.chunks(classes).zip(&targets) {
        if target == ignore {
            expected_losses.push(0.0);
            expected_grad.extend(std::iter::repeat_n(0.0, classes));
            continue;
        }
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
        let log_sum = row.iter().map(|&v| (f64::from(v) - max).exp()).sum::<f64>().ln() + max;
        expected_losses.push((log_sum - f64::from(row[target as usize])) as f32);
        for (class, p) in softmax_f64(row).iter().enumerate() {
            let onehot = if class == target as usize { 1.0 } else { 0.0 };
            expected_grad.push((p - onehot) as f32);
        }
    }
    // Losses of a few units: log and exp within a few ulp, a sum of 50: 1e-5 relative.
    check_close(&stream.read_to_vec(&losses)?, &expected_losses, 1e-5, "per-row losses")?;
    // Gradients are probabilities (less one at the target): 2e-5 relative, as for softmax,
    // and 1e-7 absolute where p - 1 cancels.
    check_relative(&stream.read_to_vec(&grad)?, &expected_grad, 2e-5, 1e-7, "gradients")
}

// ---- activations ---------------------------------------------------------------------------

const ACTIVATIONS: &str = r#"
@group(0) @binding(0) var<storage, read> input: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> output: array<vec4<f32>>;

const SQRT_2_OVER_PI: f32 = 0.7978845608;

@compute @workgroup_size(256)
fn gelu_tanh(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&output) {
        return;
    }
    let x = input[id.x];
    let inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    output[id.x] = 0.5 * x * (1.0 + tanh(inner));
}

@compute @workgroup_size(256)
fn silu(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&output) {
        return;
    }
    let x = input[id.x];
    output[id.x] = x / (1.0 + exp(-x));
}
"#;

fn run_activation(context: &TestContext, entry: &str, input: &[f32]) -> Result<Vec<f32>, Verdict> {
    let kernel = kernel_of(context, "activation", ACTIVATIONS, entry)?;
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &to_vec4(input))?;
    let output = device.alloc_from(stream, &vec![[f32::NAN; 4]; input.len().div_ceil(4)])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(input.len().div_ceil(4), 256), 1, 1)
            .buffer(&input_buffer)
            .buffer(&output),
    )?;
    Ok(from_vec4(&stream.read_to_vec(&output)?))
}

fn activation_gelu_tanh(context: &TestContext) -> TestResult {
    let input = random_f32(context, 1081, 4000, -8.0, 8.0);
    let output = run_activation(context, "gelu_tanh", &input)?;
    let expected: Vec<f32> = input
        .iter()
        .map(|&x| {
            let x = f64::from(x);
            let inner = 0.797_884_560_8 * (x + 0.044_715 * x * x * x);
            (0.5 * x * (1.0 + inner.tanh())) as f32
        })
        .collect();
    // tanh is within a few ulp of its value and the products add a few more: 1e-5
    // relative. For negative x, 1 + tanh cancels: a few ulp of 1 (2e-7) times 0.5|x| <= 4
    // is 1e-6 absolute.
    check_relative(&output, &expected, 1e-5, 1e-6, "GELU")
}

fn activation_silu(context: &TestContext) -> TestResult {
    let input = random_f32(context, 1082, 4000, -20.0, 20.0);
    let output = run_activation(context, "silu", &input)?;
    let expected: Vec<f32> = input
        .iter()
        .map(|&x| {
            let x = f64::from(x);
            (x / (1.0 + (-x).exp())) as f32
        })
        .collect();
    // exp within 3 + 2|x| ulp (|x| <= 20: 43 ulp, 5e-6 relative) and a division within 2.5
    // ulp: 1e-5 relative, even for the tiny outputs of large negative x.
    check_relative(&output, &expected, 1e-5, 1e-30, "SiLU")
}

// ---- a position carried across barriers ----------------------------------------------------

const CHUNK_SUMS: &str = r#"
// Each workgroup sums one chunk of `chunk` words, 64 at a time: load, tree, advance the read
// position through a pointer, and again until the chunk is done.
struct Chunks {
    count: u32,
    chunk: u32,
}

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> chunk_sums: array<u32>;
@group(0) @binding(2) var<uniform> chunks: Chunks;

var<workgroup> lanes: array<u32, 64>;

// Moves a read position on by one workgroup's width; the position lives in the caller.
fn advance(position: ptr<function, u32>) {
    *position += 64u;
}

fn tree_sum(lane: u32) -> u32 {
    var stride = 32u;
    while stride > 0u {
        if lane < stride {
            lanes[lane] += lanes[lane + stride];
        }
        workgroupBarrier();
        stride >>= 1u;
    }
    return lanes[0];
}

@compute @workgroup_size(64)
fn sum_chunks(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    var position = group.x * chunks.chunk;
    let end = min(position + chunks.chunk, chunks.count);
    var total = 0u;
    while position < end {
        let i = position + lane;
        var value = 0u;
        if i < end {
            value = values[i];
        }
        lanes[lane] = value;
        workgroupBarrier();
        total += tree_sum(lane);
        workgroupBarrier();
        advance(&position);
    }
    if lane == 0u {
        chunk_sums[group.x] = total;
    }
}
"#;

fn reduce_pointer_across_barriers(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "chunk sums", CHUNK_SUMS, "sum_chunks")?;
    let (count, chunk) = (10_000usize, 700usize);
    let values = context.random_u32(1091, count);
    let groups = count.div_ceil(chunk);
    let device = context.device();
    let stream = context.stream();
    let values_buffer = device.alloc_from(stream, &values)?;
    let sums = device.alloc_from(stream, &vec![0xdead_beefu32; groups])?;
    let params = device.alloc_from(stream, &[count as u32, chunk as u32])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups as u32, 1, 1)
            .buffer(&values_buffer)
            .buffer(&sums)
            .buffer(&params),
    )?;
    let expected: Vec<u32> = values
        .chunks(chunk)
        .map(|chunk| chunk.iter().fold(0u32, |acc, v| acc.wrapping_add(*v)))
        .collect();
    check_slice_eq(&stream.read_to_vec(&sums)?, &expected, "sums of 700-word chunks")
}

// ---- scan ----------------------------------------------------------------------------------

const SCAN: &str = r#"
// Exclusive prefix sum. scan_blocks scans each 256-word block in place (up-sweep builds
// partial sums in a tree, down-sweep distributes them) and writes each block's total;
// scanning the totals the same way and add_offsets then make the scan global.
struct Scan {
    count: u32,
}

@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> block_sums: array<u32>;
@group(0) @binding(2) var<uniform> scan: Scan;

const BLOCK: u32 = 256u;
var<workgroup> temp: array<u32, BLOCK>;

fn load(index: u32) -> u32 {
    if index < scan.count {
        return data[index];
    }
    return 0u;
}

@compute @workgroup_size(128)
fn scan_blocks(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let base = group.x * BLOCK;
    temp[2u * t] = load(base + 2u * t);
    temp[2u * t + 1u] = load(base + 2u * t + 1u);

    var offset = 1u;
    var d = BLOCK / 2u;
    while d > 0u {
        workgroupBarrier();
        if t < d {
            let ai = offset * (2u * t + 1u) - 1u;
            let bi = offset * (2u * t + 2u) - 1u;
            temp[bi] += temp[ai];
        }
        offset *= 2u;
        d >>= 1u;
    }

    if t == 0u {
        block_sums[group.x] = temp[BLOCK - 1u];
        temp[BLOCK - 1u] = 0u;
    }

    d = 1u;
    while d < BLOCK {
        offset >>= 1u;
        workgroupBarrier();
        if t < d {
            let ai = offset * (2u * t + 1u) - 1u;
            let bi = offset * (2u * t + 2u) - 1u;
            let left = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += left;
        }
        d *= 2u;
    }
    workgroupBarrier();

    for (var k = 0u; k < 2u; k++) {
        let index = base + 2u * t + k;
        if index < scan.count {
            data[index] = temp[2u * t + k];
        }
    }
}

@compute @workgroup_size(256)
fn add_offsets(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < scan.count {
        data[id.x] += block_sums[id.x / BLOCK];
    }
}
"#;

fn scan_exclusive_prefix_sum(context: &TestContext) -> TestResult {
    let scan_blocks = kernel_of(context, "block scan", SCAN, "scan_blocks")?;
    let add_offsets = kernel_of(context, "scan offsets", SCAN, "add_offsets")?;
    let count = 256 * 20 + 77;
    let values: Vec<u32> = context.random_u32(1101, count).iter().map(|v| v % 1000).collect();
    let blocks = count.div_ceil(256);
    let device = context.device();
    let stream = context.stream();
    let data = device.alloc_from(stream, &values)?;
    let block_sums = device.alloc_from(stream, &vec![0u32; blocks])?;
    let grand_total = device.alloc_from(stream, &[0u32])?;
    stream.launch(
        &Launch::new(&scan_blocks)
            .workgroups(blocks as u32, 1, 1)
            .buffer(&data)
            .buffer(&block_sums)
            .uniform(&[count as u32]),
    )?;
    stream.launch(
        &Launch::new(&scan_blocks)
            .workgroups(1, 1, 1)
            .buffer(&block_sums)
            .buffer(&grand_total)
            .uniform(&[blocks as u32]),
    )?;
    stream.launch(
        &Launch::new(&add_offsets)
            .workgroups(groups_for(count, 256), 1, 1)
            .buffer(&data)
            .buffer(&block_sums)
            .uniform(&[count as u32]),
    )?;
    let mut running = 0u32;
    let expected: Vec<u32> = values
        .iter()
        .map(|v| {
            let before = running;
            running = running.wrapping_add(*v);
            before
        })
        .collect();
    check_slice_eq(&stream.read_to_vec(&data)?, &expected, "exclusive prefix sums")?;
    check_eq(
        stream.read_to_vec(&grand_total)?,
        vec![running],
        "the total of every word, from the second pass",
    )
}

// ---- histogram -----------------------------------------------------------------------------

const HISTOGRAM: &str = r#"
// Counts the bytes of packed pixels (four 8-bit values per word) into 256 bins: each
// workgroup counts its grid-stride share in workgroup atomics, then adds its counts to the
// global bins.
@group(0) @binding(0) var<storage, read> pixels: array<u32>;
@group(0) @binding(1) var<storage, read_write> bins: array<atomic<u32>, 256>;

var<workgroup> local_bins: array<atomic<u32>, 256>;

@compute @workgroup_size(256)
fn histogram_bytes(
    @builtin(local_invocation_index) lane: u32,
    @builtin(global_invocation_id) id: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    atomicStore(&local_bins[lane], 0u);
    workgroupBarrier();
    let stride = groups.x * 256u;
    for (var i = id.x; i < arrayLength(&pixels); i += stride) {
        let word = pixels[i];
        for (var k = 0u; k < 4u; k++) {
            atomicAdd(&local_bins[(word >> (8u * k)) & 0xffu], 1u);
        }
    }
    workgroupBarrier();
    let count = atomicLoad(&local_bins[lane]);
    if count > 0u {
        atomicAdd(&bins[lane], count);
    }
}
"#;

fn histogram_byte_bins(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "byte histogram", HISTOGRAM, "histogram_bytes")?;
    // Mostly dark pixels with a hot value, as images have, so bins see real contention.
    let pixels: Vec<u32> = context
        .random_u32(1111, 5000)
        .iter()
        .map(|v| if v % 5 == 0 { 0x1010_1010 } else { v & 0x3f7f_3fff })
        .collect();
    let device = context.device();
    let stream = context.stream();
    let pixels_buffer = device.alloc_from(stream, &pixels)?;
    let bins = device.alloc_from(stream, &[0u32; 256])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(4, 1, 1)
            .buffer(&pixels_buffer)
            .buffer(&bins),
    )?;
    let mut expected = vec![0u32; 256];
    for word in &pixels {
        for byte in word.to_le_bytes() {
            expected[usize::from(byte)] += 1;
        }
    }
    check_slice_eq(&stream.read_to_vec(&bins)?, &expected, "byte counts")
}

// ---- bitonic sort --------------------------------------------------------------------------

const BITONIC: &str = r#"
// One compare-and-swap pass of a bitonic sort: element i meets element i ^ j, in ascending
// order where bit k of i is clear and descending where it is set.
struct Stage {
    k: u32,
    j: u32,
}

@group(0) @binding(0) var<storage, read_write> keys: array<u32>;
@group(0) @binding(1) var<uniform> stage: Stage;

@compute @workgroup_size(256)
fn bitonic_pass(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let partner = i ^ stage.j;
    if partner > i && partner < arrayLength(&keys) {
        let ascending = (i & stage.k) == 0u;
        let a = keys[i];
        let b = keys[partner];
        if (a > b) == ascending {
            keys[i] = b;
            keys[partner] = a;
        }
    }
}
"#;

/// The (k, j) stages of a bitonic sort of `count` (a power of two) elements, in order.
fn bitonic_stages(count: u32) -> Vec<[u32; 2]> {
    let mut stages = Vec::new();
    let mut k = 2;
    while k <= count {
        let mut j = k / 2;
        while j > 0 {
            stages.push([k, j]);
            j /= 2;
        }
        k *= 2;
    }
    stages
}

fn sort_bitonic(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "bitonic pass", BITONIC, "bitonic_pass")?;
    let count = 1024u32;
    // Many duplicates, so equal keys meet.
    let keys: Vec<u32> = context
        .random_u32(1121, count as usize)
        .iter()
        .map(|v| v % 300)
        .collect();
    let device = context.device();
    let stream = context.stream();
    let buffer = device.alloc_from(stream, &keys)?;
    let stages = bitonic_stages(count);
    check_eq(stages.len(), 55, "passes of a 1024-element bitonic sort")?;
    for stage in &stages {
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(count as usize, 256), 1, 1)
                .buffer(&buffer)
                .uniform(stage),
        )?;
    }
    let mut expected = keys;
    expected.sort_unstable();
    check_slice_eq(&stream.read_to_vec(&buffer)?, &expected, "sorted keys")
}

const BITONIC_PAIRS: &str = r#"
// The same network over structs, largest key first; the index travels with its key.
struct Entry {
    key: f32,
    index: u32,
}

struct Stage {
    k: u32,
    j: u32,
}

@group(0) @binding(0) var<storage, read_write> entries: array<Entry>;
@group(0) @binding(1) var<uniform> stage: Stage;

@compute @workgroup_size(64)
fn bitonic_pass_descending(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let partner = i ^ stage.j;
    if partner <= i || partner >= arrayLength(&entries) {
        return;
    }
    let descending = (i & stage.k) == 0u;
    let a = entries[i];
    let b = entries[partner];
    let out_of_order = select(a.key > b.key, a.key < b.key, descending);
    if out_of_order {
        entries[i] = b;
        entries[partner] = a;
    }
}
"#;

fn sort_bitonic_key_value(context: &TestContext) -> TestResult {
    let kernel = kernel_of(
        context,
        "bitonic pass on pairs",
        BITONIC_PAIRS,
        "bitonic_pass_descending",
    )?;
    let count = 512u32;
    // Distinct keys, so the sorted order, indices included, is unique.
    let mut keys: Vec<f32> = (0..count).map(|i| i as f32 * 0.25 - 40.0).collect();
    let shuffle = context.random_u32(1131, count as usize);
    for i in (1..keys.len()).rev() {
        keys.swap(i, shuffle[i] as usize % (i + 1));
    }
    let entries: Vec<[u32; 2]> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| [key.to_bits(), index as u32])
        .collect();
    let device = context.device();
    let stream = context.stream();
    let buffer = device.alloc_from(stream, &entries)?;
    // Every stage's struct in one buffer, each at an offset the device can bind, as a ring of
    // per-pass parameters is laid out; pass s binds the view of its own.
    let stages = bitonic_stages(count);
    let stride = (context.info().buffer_offset_alignment.max(8) / 4) as usize;
    let mut ring = vec![0u32; stages.len() * stride];
    for (index, stage) in stages.iter().enumerate() {
        ring[index * stride..index * stride + 2].copy_from_slice(stage);
    }
    let params = device.alloc_from(stream, &ring)?;
    for index in 0..stages.len() {
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(count as usize, 64), 1, 1)
                .buffer(&buffer)
                .buffer(params.slice(index * stride..index * stride + 2)),
        )?;
    }
    let mut expected = entries;
    expected.sort_by(|a, b| f32::from_bits(b[0]).total_cmp(&f32::from_bits(a[0])));
    check_slice_eq(
        &stream.read_to_vec(&buffer)?,
        &expected,
        "(key bits, index) pairs, largest key first",
    )
}

// ---- game of life --------------------------------------------------------------------------

const LIFE: &str = r#"
// One generation of Conway's game of life on a torus.
struct Grid {
    width: u32,
    height: u32,
}

@group(0) @binding(0) var<uniform> grid: Grid;
@group(0) @binding(1) var<storage, read> current: array<u32>;
@group(0) @binding(2) var<storage, read_write> next: array<u32>;

fn cell(x: i32, y: i32) -> u32 {
    let w = i32(grid.width);
    let h = i32(grid.height);
    let wrapped_x = (x + w) % w;
    let wrapped_y = (y + h) % h;
    return current[u32(wrapped_y * w + wrapped_x)];
}

@compute @workgroup_size(8, 8)
fn life_step(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= grid.width || id.y >= grid.height {
        return;
    }
    let x = i32(id.x);
    let y = i32(id.y);
    var neighbours = 0u;
    for (var dy = -1; dy <= 1; dy++) {
        for (var dx = -1; dx <= 1; dx++) {
            if dx != 0 || dy != 0 {
                neighbours += cell(x + dx, y + dy);
            }
        }
    }
    let alive = cell(x, y) == 1u;
    let lives = neighbours == 3u || (alive && neighbours == 2u);
    next[id.y * grid.width + id.x] = select(0u, 1u, lives);
}
"#;

fn life_ping_pong(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "game of life", LIFE, "life_step")?;
    let (width, height, steps) = (40usize, 30usize, 10);
    let start: Vec<u32> = context
        .random_u32(1141, width * height)
        .iter()
        .map(|v| u32::from(v % 3 == 0))
        .collect();
    let device = context.device();
    let stream = context.stream();
    let grid = device.alloc_from(stream, &[width as u32, height as u32])?;
    let buffers = [
        device.alloc_from(stream, &start)?,
        device.alloc_from(stream, &vec![0u32; width * height])?,
    ];
    for step in 0..steps {
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(width, 8), groups_for(height, 8), 1)
                .buffer(&grid)
                .buffer(&buffers[step % 2])
                .buffer(&buffers[(step + 1) % 2]),
        )?;
    }
    let mut expected = start;
    for _ in 0..steps {
        let before = expected.clone();
        for y in 0..height {
            for x in 0..width {
                let mut neighbours = 0;
                for dy in [height - 1, 0, 1] {
                    for dx in [width - 1, 0, 1] {
                        if dx != 0 || dy != 0 {
                            neighbours += before[(y + dy) % height * width + (x + dx) % width];
                        }
                    }
                }
                let alive = before[y * width + x] == 1;
                expected[y * width + x] = u32::from(neighbours == 3 || (alive && neighbours == 2));
            }
        }
    }
    check_slice_eq(
        &stream.read_to_vec(&buffers[steps % 2])?,
        &expected,
        "the grid after ten generations",
    )
}

// ---- particles -----------------------------------------------------------------------------

const FLOCK: &str = r#"
// One step of a flock: each particle steers towards the centre of its neighbours, away from
// those too close, and along their mean heading; its speed is capped and it wraps around the
// [-1, 1) square.
struct Particle {
    pos: vec2<f32>,
    vel: vec2<f32>,
}

struct Flock {
    dt: f32,
    cohesion_radius2: f32,
    separation_radius2: f32,
    alignment_radius2: f32,
    cohesion_scale: f32,
    separation_scale: f32,
    alignment_scale: f32,
    max_speed: f32,
    count: u32,
}

@group(0) @binding(0) var<uniform> flock: Flock;
@group(0) @binding(1) var<storage, read> particles_in: array<Particle>;
@group(0) @binding(2) var<storage, read_write> particles_out: array<Particle>;

@compute @workgroup_size(64)
fn flock_step(@builtin(global_invocation_id) id: vec3<u32>) {
    let self_index = id.x;
    if self_index >= flock.count {
        return;
    }
    let me = particles_in[self_index];
    var centre = vec2<f32>(0.0);
    var centre_count = 0u;
    var separation = vec2<f32>(0.0);
    var heading = vec2<f32>(0.0);
    var heading_count = 0u;
    for (var other = 0u; other < flock.count; other++) {
        if other == self_index {
            continue;
        }
        let them = particles_in[other];
        let offset = them.pos - me.pos;
        let d2 = dot(offset, offset);
        if d2 < flock.cohesion_radius2 {
            centre += them.pos;
            centre_count++;
        }
        if d2 < flock.separation_radius2 {
            separation -= offset;
        }
        if d2 < flock.alignment_radius2 {
            heading += them.vel;
            heading_count++;
        }
    }
    var vel = me.vel;
    if centre_count > 0u {
        vel += (centre / f32(centre_count) - me.pos) * flock.cohesion_scale;
    }
    vel += separation * flock.separation_scale;
    if heading_count > 0u {
        vel += (heading / f32(heading_count)) * flock.alignment_scale;
    }
    let speed = length(vel);
    if speed > flock.max_speed {
        vel *= flock.max_speed / speed;
    }
    var pos = me.pos + vel * flock.dt;
    if pos.x < -1.0 { pos.x += 2.0; }
    if pos.x >= 1.0 { pos.x -= 2.0; }
    if pos.y < -1.0 { pos.y += 2.0; }
    if pos.y >= 1.0 { pos.y -= 2.0; }
    particles_out[self_index] = Particle(pos, vel);
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct FlockParams {
    dt: f32,
    cohesion_radius2: f32,
    separation_radius2: f32,
    alignment_radius2: f32,
    cohesion_scale: f32,
    separation_scale: f32,
    alignment_scale: f32,
    max_speed: f32,
    count: u32,
}

/// One flock step as the kernel computes it, in f32 and in the same order.
fn flock_reference(particles: &[[f32; 4]], flock: &FlockParams) -> Vec<[f32; 4]> {
    particles
        .iter()
        .enumerate()
        .map(|(me_index, me)| {
            let (mut centre, mut centre_count) = ([0f32; 2], 0u32);
            let mut separation = [0f32; 2];
            let (mut heading, mut heading_count) = ([0f32; 2], 0u32);
            for (other_index, them) in particles.iter().enumerate() {
                if other_index == me_index {
                    continue;
                }
                let offset = [them[0] - me[0], them[1] - me[1]];
                let d2 = offset[0] * offset[0] + offset[1] * offset[1];
                if d2 < flock.cohesion_radius2 {
                    centre = [centre[0] + them[0], centre[1] + them[1]];
                    centre_count += 1;
                }
                if d2 < flock.separation_radius2 {
                    separation = [separation[0] - offset[0], separation[1] - offset[1]];
                }
                if d2 < flock.alignment_radius2 {
                    heading = [heading[0] + them[2], heading[1] + them[3]];
                    heading_count += 1;
                }
            }
            let mut vel = [me[2], me[3]];
            if centre_count > 0 {
                let n = centre_count as f32;
                for axis in 0..2 {
                    vel[axis] += (centre[axis] / n - me[axis]) * flock.cohesion_scale;
                }
            }
            for axis in 0..2 {
                vel[axis] += separation[axis] * flock.separation_scale;
            }
            if heading_count > 0 {
                let n = heading_count as f32;
                for axis in 0..2 {
                    vel[axis] += heading[axis] / n * flock.alignment_scale;
                }
            }
            let speed = (vel[0] * vel[0] + vel[1] * vel[1]).sqrt();
            if speed > flock.max_speed {
                let factor = flock.max_speed / speed;
                vel = [vel[0] * factor, vel[1] * factor];
            }
            let mut pos = [me[0] + vel[0] * flock.dt, me[1] + vel[1] * flock.dt];
            for coordinate in &mut pos {
                if *coordinate < -1.0 {
                    *coordinate += 2.0;
                }
                if *coordinate >= 1.0 {
                    *coordinate -= 2.0;
                }
            }
            [pos[0], pos[1], vel[0], vel[1]]
        })
        .collect()
}

fn particles_flocking(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "flock step", FLOCK, "flock_step")?;
    let count = 256usize;
    // Positions on a 1/64 grid and velocities on a 1/1024 grid: offsets and squared distances
    // are exact, so every device puts each neighbour on the same side of each radius.
    let positions = random_dyadic(context, 1151, 2 * count, -1.0, 128, 64.0);
    let velocities = random_dyadic(context, 1152, 2 * count, -0.0625, 128, 1024.0);
    let particles: Vec<[f32; 4]> = (0..count)
        .map(|i| {
            [
                positions[2 * i],
                positions[2 * i + 1],
                velocities[2 * i],
                velocities[2 * i + 1],
            ]
        })
        .collect();
    let flock = FlockParams {
        dt: 0.04,
        cohesion_radius2: 0.1 * 0.1,
        separation_radius2: 0.025 * 0.025,
        alignment_radius2: 0.025 * 0.025,
        cohesion_scale: 0.02,
        separation_scale: 0.05,
        alignment_scale: 0.005,
        max_speed: 0.1,
        count: count as u32,
    };
    let device = context.device();
    let stream = context.stream();
    let input = device.alloc_from(stream, &particles)?;
    let output = device.alloc_from(stream, &vec![[f32::NAN; 4]; count])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .uniform(&flock)
            .buffer(&input)
            .buffer(&output),
    )?;
    let expected = flock_reference(&particles, &flock);
    // Neighbour sets are exact (see above); what is left is a few roundings (a division by
    // the neighbour count, sqrt, fused or not) on values below 1: 1e-6 absolute.
    check_close(
        &from_vec4(&stream.read_to_vec(&output)?),
        &from_vec4(&expected),
        1e-6,
        "particles (pos, vel) after one step",
    )
}

// ---- transpose -----------------------------------------------------------------------------

const TRANSPOSE: &str = r#"
// out = transpose(in) through a 16x16 tile whose rows are padded to 17, so the column reads
// fall in different banks on hardware that has them.
struct Dims {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> dims: Dims;

const TILE: u32 = 16u;
var<workgroup> tile: array<array<f32, 17>, 16>;

@compute @workgroup_size(16, 16)
fn transpose(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let x = group.x * TILE + local.x;
    let y = group.y * TILE + local.y;
    if x < dims.cols && y < dims.rows {
        tile[local.y][local.x] = input[y * dims.cols + x];
    }
    workgroupBarrier();
    let out_x = group.y * TILE + local.x;
    let out_y = group.x * TILE + local.y;
    if out_x < dims.rows && out_y < dims.cols {
        output[out_y * dims.rows + out_x] = tile[local.x][local.y];
    }
}
"#;

fn transpose_padded_tile(context: &TestContext) -> TestResult {
    require_workgroup_shape(context, [16, 16, 1])?;
    let kernel = kernel_of(context, "padded-tile transpose", TRANSPOSE, "transpose")?;
    let (rows, cols) = (50usize, 37usize);
    let input = random_f32(context, 1161, rows * cols, -100.0, 100.0);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    let output = device.alloc_from(stream, &vec![f32::NAN; rows * cols])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(cols, 16), groups_for(rows, 16), 1)
            .buffer(&input_buffer)
            .buffer(&output)
            .uniform(&[rows as u32, cols as u32]),
    )?;
    let mut expected = vec![0f32; rows * cols];
    for y in 0..rows {
        for x in 0..cols {
            expected[x * rows + y] = input[y * cols + x];
        }
    }
    check_slice_eq(&stream.read_to_vec(&output)?, &expected, "the transposed 50x37 matrix")
}

// ---- convolutions --------------------------------------------------------------------------

const CONV1D: &str = r#"
// output[oc][x] = bias[oc] + sum over ic, t of input[ic][x * stride + t * dilation - padding]
// * weight[oc][ic][t], zero outside the input.
struct Conv1d {
    in_channels: u32,
    out_channels: u32,
    length: u32,
    out_length: u32,
    kernel_size: u32,
    stride: u32,
    padding: u32,
    dilation: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> output: array<f32>;
@group(0) @binding(4) var<uniform> conv: Conv1d;

@compute @workgroup_size(64, 1)
fn conv1d(@builtin(global_invocation_id) id: vec3<u32>) {
    let x = id.x;
    let oc = id.y;
    if x >= conv.out_length || oc >= conv.out_channels {
        return;
    }
    var acc = bias[oc];
    for (var ic = 0u; ic < conv.in_channels; ic++) {
        for (var t = 0u; t < conv.kernel_size; t++) {
            let position = i32(x * conv.stride + t * conv.dilation) - i32(conv.padding);
            if position >= 0 && position < i32(conv.length) {
                acc += input[ic * conv.length + u32(position)]
                    * weight[(oc * conv.in_channels + ic) * conv.kernel_size + t];
            }
        }
    }
    output[oc * conv.out_length + x] = acc;
}
"#;

fn conv_conv1d(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "conv1d", CONV1D, "conv1d")?;
    let (in_channels, out_channels, length, kernel_size) = (3usize, 5usize, 90usize, 5usize);
    let (stride, padding, dilation) = (2usize, 3usize, 2usize);
    let out_length = (length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    let input = random_f32(context, 1171, in_channels * length, -1.0, 1.0);
    let weight = random_f32(context, 1172, out_channels * in_channels * kernel_size, -0.5, 0.5);
    let bias = random_f32(context, 1173, out_channels, -0.1, 0.1);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    let weight_buffer = device.alloc_from(stream, &weight)?;
    let bias_buffer = device.alloc_from(stream, &bias)?;
    let output = device.alloc_from(stream, &vec![f32::NAN; out_channels * out_length])?;
    let shape = [
        in_channels,
        out_channels,
        length,
        out_length,
        kernel_size,
        stride,
        padding,
        dilation,
    ]
    .map(|v| v as u32);
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(out_length, 64), out_channels as u32, 1)
            .buffer(&input_buffer)
            .buffer(&weight_buffer)
            .buffer(&bias_buffer)
            .buffer(&output)
            .uniform(&shape),
    )?;
    let mut expected = Vec::with_capacity(out_channels * out_length);
    for oc in 0..out_channels {
        for x in 0..out_length {
            let mut acc = f64::from(bias[oc]);
            for ic in 0..in_channels {
                for t in 0..kernel_size {
                    let position = (x * stride + t * dilation) as isize - padding as isize;
                    if (0..length as isize).contains(&position) {
                        acc += f64::from(input[ic * length + position as usize])
                            * f64::from(weight[(oc * in_channels + ic) * kernel_size + t]);
                    }
                }
            }
            expected.push(acc as f32);
        }
    }
    // 15 products below 0.5 summed in f32: under 15 * 4 * 6e-8 = 4e-6 absolute.
    check_close(&stream.read_to_vec(&output)?, &expected, 1e-5, "conv1d output")
}

const CONV2D: &str = r#"
// A 3x3 convolution with padding 1 over NCHW images, bias and ReLU. Workgroup z picks the
// (image, output channel); the output channel's filter is staged in workgroup memory first.
struct Conv2d {
    batch: u32,
    in_channels: u32,
    out_channels: u32,
    height: u32,
    width: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> output: array<f32>;
@group(0) @binding(4) var<uniform> conv: Conv2d;

const MAX_IN_CHANNELS: u32 = 8u;
var<workgroup> filter_taps: array<f32, 72>;

@compute @workgroup_size(8, 8, 1)
fn conv2d_3x3_relu(
    @builtin(global_invocation_id) id: vec3<u32>,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let image = group.z / conv.out_channels;
    let oc = group.z % conv.out_channels;
    let taps = conv.in_channels * 9u;
    for (var i = lane; i < taps; i += 64u) {
        filter_taps[i] = weight[oc * taps + i];
    }
    workgroupBarrier();
    if id.x >= conv.width || id.y >= conv.height {
        return;
    }
    var acc = bias[oc];
    for (var ic = 0u; ic < conv.in_channels; ic++) {
        let plane = (image * conv.in_channels + ic) * conv.height;
        for (var ky = 0u; ky < 3u; ky++) {
            let sy = i32(id.y + ky) - 1;
            if sy < 0 || sy >= i32(conv.height) {
                continue;
            }
            for (var kx = 0u; kx < 3u; kx++) {
                let sx = i32(id.x + kx) - 1;
                if sx >= 0 && sx < i32(conv.width) {
                    acc += input[(plane + u32(sy)) * conv.width + u32(sx)] * filter_taps[ic * 9u + ky * 3u + kx];
                }
            }
        }
    }
    output[((image * conv.out_channels + oc) * conv.height + id.y) * conv.width + id.x] = max(acc, 0.0);
}
"#;

fn conv_conv2d_3x3_relu(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "conv2d", CONV2D, "conv2d_3x3_relu")?;
    let (batch, in_channels, out_channels, height, width) = (2usize, 3usize, 4usize, 18usize, 21usize);
    let input = random_f32(context, 1181, batch * in_channels * height * width, -1.0, 1.0);
    let weight = random_f32(context, 1182, out_channels * in_channels * 9, -0.5, 0.5);
    let bias = random_f32(context, 1183, out_channels, -0.2, 0.2);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    let weight_buffer = device.alloc_from(stream, &weight)?;
    let bias_buffer = device.alloc_from(stream, &bias)?;
    let output = device.alloc_from(stream, &vec![f32::NAN; batch * out_channels * height * width])?;
    let shape = [batch, in_channels, out_channels, height, width].map(|v| v as u32);
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(
                groups_for(width, 8),
                groups_for(height, 8),
                (batch * out_channels) as u32,
            )
            .buffer(&input_buffer)
            .buffer(&weight_buffer)
            .buffer(&bias_buffer)
            .buffer(&output)
            .uniform(&shape),
    )?;
    let mut expected = Vec::with_capacity(batch * out_channels * height * width);
    for image in 0..batch {
        for oc in 0..out_channels {
            for y in 0..height {
                for x in 0..width {
                    let mut acc = f64::from(bias[oc]);
                    for ic in 0..in_channels {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (sy, sx) = ((y + ky) as isize - 1, (x + kx) as isize - 1);
                                if (0..height as isize).contains(&sy) && (0..width as isize).contains(&sx) {
                                    let pixel = input
                                        [((image * in_channels + ic) * height + sy as usize) * width + sx as usize];
                                    acc +=
                                        f64::from(pixel) * f64::from(weight[(oc * in_channels + ic) * 9 + ky * 3 + kx]);
                                }
                            }
                        }
                    }
                    expected.push(acc.max(0.0) as f32);
                }
            }
        }
    }
    // 27 products below 0.5 summed in f32: under 27 * 7 * 6e-8 = 1.2e-5 at worst; 2e-5.
    check_close(
        &stream.read_to_vec(&output)?,
        &expected,
        2e-5,
        "conv2d output after ReLU",
    )
}

// ---- separable blur ------------------------------------------------------------------------

const BLUR: &str = r#"
// A separable blur of an RGBA image with clamp-to-edge borders. blur_rows stages a 64-pixel
// run of a row and its halo in workgroup memory; blur_columns reads its taps directly.
struct Blur {
    width: u32,
    height: u32,
    radius: u32,
    _pad: u32,
    weights: array<vec4<f32>, 2>,
}

@group(0) @binding(0) var<uniform> blur: Blur;
@group(0) @binding(1) var<storage, read> source: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> destination: array<vec4<f32>>;

const ROW_TILE: u32 = 64u;
const MAX_RADIUS: u32 = 3u;
var<workgroup> row_cache: array<vec4<f32>, 70>;

fn tap_weight(tap: u32) -> f32 {
    return blur.weights[tap / 4u][tap % 4u];
}

@compute @workgroup_size(64)
fn blur_rows(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let y = group.y;
    let x0 = group.x * ROW_TILE;
    let radius = min(blur.radius, MAX_RADIUS);
    for (var i = local.x; i < ROW_TILE + 2u * radius; i += ROW_TILE) {
        let sx = clamp(i32(x0 + i) - i32(radius), 0, i32(blur.width) - 1);
        row_cache[i] = source[y * blur.width + u32(sx)];
    }
    workgroupBarrier();
    let x = x0 + local.x;
    if x < blur.width {
        var sum = vec4<f32>(0.0);
        for (var t = 0u; t <= 2u * radius; t++) {
            sum += row_cache[local.x + t] * tap_weight(t);
        }
        destination[y * blur.width + x] = sum;
    }
}

@compute @workgroup_size(8, 8)
fn blur_columns(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= blur.width || id.y >= blur.height {
        return;
    }
    var sum = vec4<f32>(0.0);
    for (var t = 0u; t <= 2u * blur.radius; t++) {
        let sy = clamp(i32(id.y + t) - i32(blur.radius), 0, i32(blur.height) - 1);
        sum += source[u32(sy) * blur.width + id.x] * tap_weight(t);
    }
    destination[id.y * blur.width + id.x] = sum;
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct BlurParams {
    width: u32,
    height: u32,
    radius: u32,
    pad: u32,
    weights: [[f32; 4]; 2],
}

fn blur_separable_gaussian(context: &TestContext) -> TestResult {
    let rows_kernel = kernel_of(context, "row blur", BLUR, "blur_rows")?;
    let columns_kernel = kernel_of(context, "column blur", BLUR, "blur_columns")?;
    let (width, height, radius) = (100usize, 30usize, 2usize);
    let taps = [1.0f32 / 16.0, 4.0 / 16.0, 6.0 / 16.0, 4.0 / 16.0, 1.0 / 16.0];
    let params = BlurParams {
        width: width as u32,
        height: height as u32,
        radius: radius as u32,
        pad: 0,
        weights: [[taps[0], taps[1], taps[2], taps[3]], [taps[4], 0.0, 0.0, 0.0]],
    };
    // 8-bit channel values: with weights in sixteenths every product and sum is exact.
    let image: Vec<f32> = context
        .random_u32(1191, width * height * 4)
        .iter()
        .map(|v| (v % 256) as f32)
        .collect();
    let device = context.device();
    let stream = context.stream();
    let source = device.alloc_from(stream, &to_vec4(&image))?;
    let across = device.alloc_from(stream, &vec![[f32::NAN; 4]; width * height])?;
    let blurred = device.alloc_from(stream, &vec![[f32::NAN; 4]; width * height])?;
    stream.launch(
        &Launch::new(&rows_kernel)
            .workgroups(groups_for(width, 64), height as u32, 1)
            .uniform(&params)
            .buffer(&source)
            .buffer(&across),
    )?;
    stream.launch(
        &Launch::new(&columns_kernel)
            .workgroups(groups_for(width, 8), groups_for(height, 8), 1)
            .uniform(&params)
            .buffer(&across)
            .buffer(&blurred),
    )?;
    let pass = |input: &[f32], step_x: bool| -> Vec<f32> {
        let mut out = vec![0f32; input.len()];
        for y in 0..height {
            for x in 0..width {
                for channel in 0..4 {
                    let mut sum = 0f32;
                    for (t, weight) in taps.iter().enumerate() {
                        let (sx, sy) = if step_x {
                            ((x + t).saturating_sub(radius).min(width - 1), y)
                        } else {
                            (x, (y + t).saturating_sub(radius).min(height - 1))
                        };
                        sum += input[(sy * width + sx) * 4 + channel] * weight;
                    }
                    out[(y * width + x) * 4 + channel] = sum;
                }
            }
        }
        out
    };
    let expected_across = pass(&image, true);
    check_slice_eq(
        &from_vec4(&stream.read_to_vec(&across)?),
        &expected_across,
        "the image blurred along rows",
    )?;
    check_slice_eq(
        &from_vec4(&stream.read_to_vec(&blurred)?),
        &pass(&expected_across, false),
        "the image blurred along rows, then columns",
    )
}

// ---- argmax and top-k ----------------------------------------------------------------------

const ARGMAX: &str = r#"
// The index of each row's maximum, the lowest such index on ties: each invocation scans its
// stride, then a tree over (value, index) pairs.
struct Shape {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> values: array<f32>;
@group(0) @binding(1) var<storage, read_write> indices: array<u32>;
@group(0) @binding(2) var<storage, read_write> maxima: array<f32>;
@group(0) @binding(3) var<uniform> shape: Shape;

const WG: u32 = 256u;
var<workgroup> best_value: array<f32, WG>;
var<workgroup> best_index: array<u32, WG>;

@compute @workgroup_size(256)
fn argmax_rows(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let base = group.x * shape.cols;
    var value = -3.402823e38;
    var index = 0xffffffffu;
    for (var i = lane; i < shape.cols; i += WG) {
        let v = values[base + i];
        if v > value {
            value = v;
            index = i;
        }
    }
    best_value[lane] = value;
    best_index[lane] = index;
    workgroupBarrier();
    var stride = WG / 2u;
    while stride > 0u {
        if lane < stride {
            let other_value = best_value[lane + stride];
            let other_index = best_index[lane + stride];
            if other_value > best_value[lane] || (other_value == best_value[lane] && other_index < best_index[lane]) {
                best_value[lane] = other_value;
                best_index[lane] = other_index;
            }
        }
        workgroupBarrier();
        stride /= 2u;
    }
    if lane == 0u {
        indices[group.x] = best_index[0];
        maxima[group.x] = best_value[0];
    }
}
"#;

/// The largest value of `row` and the lowest index holding it.
fn argmax_reference(row: &[f32]) -> (u32, f32) {
    let mut best = (u32::MAX, f32::MIN);
    for (index, &value) in row.iter().enumerate() {
        if value > best.1 {
            best = (index as u32, value);
        }
    }
    best
}

fn argmax_rows(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "argmax", ARGMAX, "argmax_rows")?;
    let (rows, cols) = (8usize, 1000usize);
    // Forty distinct values in 1000 columns: every maximum is tied many times over.
    let values: Vec<f32> = context
        .random_u32(1201, rows * cols)
        .iter()
        .map(|v| (v % 40) as f32 - 20.0)
        .collect();
    let device = context.device();
    let stream = context.stream();
    let values_buffer = device.alloc_from(stream, &values)?;
    let indices = device.alloc_from(stream, &vec![0xdead_beefu32; rows])?;
    let maxima = device.alloc_from(stream, &vec![f32::NAN; rows])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&values_buffer)
            .buffer(&indices)
            .buffer(&maxima)
            .uniform(&[rows as u32, cols as u32]),
    )?;
    let (expected_indices, expected_maxima): (Vec<u32>, Vec<f32>) = values.chunks(cols).map(argmax_reference).unzip();
    check_slice_eq(&stream.read_to_vec(&indices)?, &expected_indices, "argmax of each row")?;
    check_slice_eq(&stream.read_to_vec(&maxima)?, &expected_maxima, "maximum of each row")
}

const TOP_K: &str = r#"
// The k largest values of each row and their indices, largest first: k rounds of a workgroup
// argmax over the row (staged in workgroup memory), each removing the winner.
struct TopK {
    cols: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> values: array<f32>;
@group(0) @binding(1) var<storage, read_write> top_values: array<f32>;
@group(0) @binding(2) var<storage, read_write> top_indices: array<u32>;
@group(0) @binding(3) var<uniform> params: TopK;

const WG: u32 = 128u;
const REMOVED: f32 = -3.0e38;
var<workgroup> row: array<f32, 1024>;
var<workgroup> lane_value: array<f32, WG>;
var<workgroup> lane_index: array<u32, WG>;

@compute @workgroup_size(128)
fn top_k(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let base = group.x * params.cols;
    for (var i = lane; i < params.cols; i += WG) {
        row[i] = values[base + i];
    }
    workgroupBarrier();
    for (var round = 0u; round < params.k; round++) {
        var best = -3.402823e38;
        var best_at = 0xffffffffu;
        for (var i = lane; i < params.cols; i += WG) {
            if row[i] > best {
                best = row[i];
                best_at = i;
            }
        }
        lane_value[lane] = best;
        lane_index[lane] = best_at;
        workgroupBarrier();
        var stride = WG / 2u;
        while stride > 0u {
            if lane < stride {
                let v = lane_value[lane + stride];
                let at = lane_index[lane + stride];
                if v > lane_value[lane] || (v == lane_value[lane] && at < lane_index[lane]) {
                    lane_value[lane] = v;
                    lane_index[lane] = at;
                }
            }
            workgroupBarrier();
            stride >>= 1u;
        }
        if lane == 0u {
            top_values[group.x * params.k + round] = lane_value[0];
            top_indices[group.x * params.k + round] = lane_index[0];
            row[lane_index[0]] = REMOVED;
        }
        workgroupBarrier();
    }
}
"#;

fn topk_repeated_max(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "top-k", TOP_K, "top_k")?;
    let (rows, cols, k) = (4usize, 512usize, 8usize);
    // Quarter steps in [-100, 100): some ties among the largest, which go to the lower index.
    let values: Vec<f32> = context
        .random_u32(1211, rows * cols)
        .iter()
        .map(|v| (v % 800) as f32 * 0.25 - 100.0)
        .collect();
    let device = context.device();
    let stream = context.stream();
    let values_buffer = device.alloc_from(stream, &values)?;
    let top_values = device.alloc_from(stream, &vec![f32::NAN; rows * k])?;
    let top_indices = device.alloc_from(stream, &vec![0xdead_beefu32; rows * k])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&values_buffer)
            .buffer(&top_values)
            .buffer(&top_indices)
            .uniform(&[cols as u32, k as u32]),
    )?;
    let mut expected_values = Vec::with_capacity(rows * k);
    let mut expected_indices = Vec::with_capacity(rows * k);
    for row in values.chunks(cols) {
        let mut order: Vec<usize> = (0..cols).collect();
        // Largest first, lower index first among equals: what repeated argmax gives.
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        for &index in &order[..k] {
            expected_values.push(row[index]);
            expected_indices.push(index as u32);
        }
    }
    check_slice_eq(&stream.read_to_vec(&top_values)?, &expected_values, "top-8 values")?;
    check_slice_eq(&stream.read_to_vec(&top_indices)?, &expected_indices, "top-8 indices")
}

// ---- embedding gather ----------------------------------------------------------------------

const EMBEDDING: &str = r#"
// hidden[t] = token_table[token_ids[t]] * scale + position_table[t + position_offset], rows of
// vec4s; an id outside the vocabulary reads as a zero row.
struct Embed {
    tokens: u32,
    vocab: u32,
    dim4: u32,
    position_offset: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> token_ids: array<u32>;
@group(0) @binding(1) var<storage, read> token_table: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> position_table: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> hidden: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> embed: Embed;

@compute @workgroup_size(16, 4)
fn embed_tokens(@builtin(global_invocation_id) id: vec3<u32>) {
    let column = id.x;
    let t = id.y;
    if column >= embed.dim4 || t >= embed.tokens {
        return;
    }
    let token = token_ids[t];
    var row = vec4<f32>(0.0);
    if token < embed.vocab {
        row = token_table[token * embed.dim4 + column] * embed.scale;
    }
    hidden[t * embed.dim4 + column] = row + position_table[(t + embed.position_offset) * embed.dim4 + column];
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct EmbedParams {
    tokens: u32,
    vocab: u32,
    dim4: u32,
    position_offset: u32,
    scale: f32,
}

fn embedding_gather(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "embedding gather", EMBEDDING, "embed_tokens")?;
    let (tokens, vocab, dim, positions, offset) = (40usize, 100usize, 64usize, 64usize, 7usize);
    let scale = 8.0f32;
    // Every fifth id is past the vocabulary.
    let ids: Vec<u32> = context
        .random_u32(1221, tokens)
        .iter()
        .enumerate()
        .map(|(t, v)| {
            if t % 5 == 4 {
                vocab as u32 + v % 50
            } else {
                v % vocab as u32
            }
        })
        .collect();
    let token_table = random_f32(context, 1222, vocab * dim, -1.0, 1.0);
    let position_table = random_f32(context, 1223, positions * dim, -1.0, 1.0);
    let device = context.device();
    let stream = context.stream();
    let ids_buffer = device.alloc_from(stream, &ids)?;
    let token_buffer = device.alloc_from(stream, &to_vec4(&token_table))?;
    let position_buffer = device.alloc_from(stream, &to_vec4(&position_table))?;
    let hidden = device.alloc_from(stream, &vec![[f32::NAN; 4]; tokens * dim / 4])?;
    let params = device.alloc_from(
        stream,
        &[EmbedParams {
            tokens: tokens as u32,
            vocab: vocab as u32,
            dim4: (dim / 4) as u32,
            position_offset: offset as u32,
            scale,
        }],
    )?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(dim / 4, 16), groups_for(tokens, 4), 1)
            .buffer(&ids_buffer)
            .buffer(&token_buffer)
            .buffer(&position_buffer)
            .buffer(&hidden)
            .buffer(&params),
    )?;
    let mut expected = Vec::with_capacity(tokens * dim);
    for (t, &id) in ids.iter().enumerate() {
        for d in 0..dim {
            let token_value = if (id as usize) < vocab {
                token_table[id as usize * dim + d] * scale
            } else {
                0.0
            };
            expected.push(token_value + position_table[(t + offset) * dim + d]);
        }
    }
    // Scaling by 8 is exact, so x * 8 + p rounds once, fused or not: equal bits.
    check_slice_eq(
        &from_vec4(&stream.read_to_vec(&hidden)?),
        &expected,
        "gathered, scaled and summed embeddings",
    )
}

// ---- quantised weights ---------------------------------------------------------------------

const DEQUANT_Q8: &str = r#"
// int8 weights, four to a word, with one f32 scale per block of 32 (eight words).
// unpack4x8snorm gives q / 127 (clamped to -1, so -128 reads as -127).
@group(0) @binding(0) var<storage, read> packed: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read_write> weights: array<vec4<f32>>;

@compute @workgroup_size(64)
fn dequantize_q8(@builtin(global_invocation_id) id: vec3<u32>) {
    let word = id.x;
    if word >= arrayLength(&packed) {
        return;
    }
    let scale = scales[word / 8u];
    weights[word] = unpack4x8snorm(packed[word]) * (scale * 127.0);
}
"#;

fn dequant_int8_unpack4x8snorm(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "int8 dequantize", DEQUANT_Q8, "dequantize_q8")?;
    let words = 512usize;
    let mut packed = context.random_u32(1231, words);
    // Make sure the clamped -128 and both ends appear.
    packed[0] = 0x7f80_0181;
    let scales = random_f32(context, 1232, words / 8, 0.001, 0.1);
    let device = context.device();
    let stream = context.stream();
    let packed_buffer = device.alloc_from(stream, &packed)?;
    let scales_buffer = device.alloc_from(stream, &scales)?;
    let weights = device.alloc_from(stream, &vec![[f32::NAN; 4]; words])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(words, 64), 1, 1)
            .buffer(&packed_buffer)
            .buffer(&scales_buffer)
            .buffer(&weights),
    )?;
    let expected: Vec<f32> = packed
        .iter()
        .enumerate()
        .flat_map(|(word, bits)| {
            let scale = f64::from(scales[word / 8]);
            bits.to_le_bytes().map(|byte| {
                let q = f64::from((byte as i8).max(-127));
                (q * scale) as f32
            })
        })
        .collect();
    // q / 127, then times 127 * scale: three roundings on values below 12.7, 1e-6 relative.
    check_close(
        &from_vec4(&stream.read_to_vec(&weights)?),
        &expected,
        1e-6,
        "dequantized int8 weights",
    )
}

const DEQUANT_Q4: &str = r#"
// Signed int4 weights, eight to a word (nibble k is weight 8 * word + k), one f32 scale per
// block of 32 (four words); extractBits on an i32 sign-extends each nibble.
@group(0) @binding(0) var<storage, read> packed: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read_write> weights: array<f32>;

@compute @workgroup_size(64)
fn dequantize_q4(@builtin(global_invocation_id) id: vec3<u32>) {
    let word_index = id.x;
    if word_index >= arrayLength(&packed) {
        return;
    }
    let word = bitcast<i32>(packed[word_index]);
    let scale = scales[word_index / 4u];
    for (var k = 0u; k < 8u; k++) {
        let q = extractBits(word, 4u * k, 4u);
        weights[8u * word_index + k] = f32(q) * scale;
    }
}
"#;

fn dequant_int4_extract_bits(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "int4 dequantize", DEQUANT_Q4, "dequantize_q4")?;
    let words = 256usize;
    let mut packed = context.random_u32(1241, words);
    packed[0] = 0x8765_4321;
    packed[1] = 0xf0f0_7f80;
    let scales = random_f32(context, 1242, words / 4, 0.01, 0.5);
    let device = context.device();
    let stream = context.stream();
    let packed_buffer = device.alloc_from(stream, &packed)?;
    let scales_buffer = device.alloc_from(stream, &scales)?;
    let weights = device.alloc_from(stream, &vec![f32::NAN; words * 8])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(words, 64), 1, 1)
            .buffer(&packed_buffer)
            .buffer(&scales_buffer)
            .buffer(&weights),
    )?;
    let expected: Vec<f32> = packed
        .iter()
        .enumerate()
        .flat_map(|(word, &bits)| {
            let scale = scales[word / 4];
            (0..8).map(move |k| {
                // The nibble moved to the top of an i32 and shifted back: sign-extended.
                let q = ((bits << (28 - 4 * k)) as i32) >> 28;
                q as f32 * scale
            })
        })
        .collect();
    // One correctly rounded multiplication of an exact integer: equal bits.
    check_slice_eq(&stream.read_to_vec(&weights)?, &expected, "dequantized int4 weights")
}

const GEMV_Q4: &str = r#"
// y = W x for W stored as unsigned int4 (eight to a word) with a (scale, minimum) pair per
// block of 32: w = q * scale + minimum. One workgroup per row, a word per invocation per
// step, then a tree.
struct Gemv {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> packed: array<u32>;
@group(0) @binding(1) var<storage, read> block_scale_min: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> gemv: Gemv;

var<workgroup> partial_dots: array<f32, 64>;

@compute @workgroup_size(64)
fn gemv_q4(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = group.x;
    let words_per_row = gemv.cols / 8u;
    let blocks_per_row = gemv.cols / 32u;
    var acc = 0.0;
    for (var w = lane; w < words_per_row; w += 64u) {
        let word = packed[row * words_per_row + w];
        let sm = block_scale_min[row * blocks_per_row + w / 4u];
        for (var k = 0u; k < 8u; k++) {
            let q = f32(extractBits(word, 4u * k, 4u));
            acc += (q * sm.x + sm.y) * x[w * 8u + k];
        }
    }
    partial_dots[lane] = acc;
    workgroupBarrier();
    var stride = 32u;
    while stride > 0u {
        if lane < stride {
            partial_dots[lane] += partial_dots[lane + stride];
        }
        workgroupBarrier();
        stride >>= 1u;
    }
    if lane == 0u {
        y[row] = partial_dots[0];
    }
}
"#;

fn dequant_int4_matvec(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "int4 matvec", GEMV_Q4, "gemv_q4")?;
    let (rows, cols) = (24usize, 768usize);
    let packed = context.random_u32(1251, rows * cols / 8);
    let scales = random_f32(context, 1252, rows * cols / 32, 0.005, 0.02);
    let minimums = random_f32(context, 1253, rows * cols / 32, -0.15, 0.0);
    let block_scale_min: Vec<[f32; 2]> = scales.iter().zip(&minimums).map(|(&s, &m)| [s, m]).collect();
    let x = random_f32(context, 1254, cols, -1.0, 1.0);
    let device = context.device();
    let stream = context.stream();
    let packed_buffer = device.alloc_from(stream, &packed)?;
    let scale_min_buffer = device.alloc_from(stream, &block_scale_min)?;
    let x_buffer = device.alloc_from(stream, &x)?;
    let y = device.alloc_from(stream, &vec![f32::NAN; rows])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(rows as u32, 1, 1)
            .buffer(&packed_buffer)
            .buffer(&scale_min_buffer)
            .buffer(&x_buffer)
            .buffer(&y)
            .uniform(&[rows as u32, cols as u32]),
    )?;
    let mut expected = Vec::with_capacity(rows);
    for row in 0..rows {
        let mut sum = 0f64;
        for col in 0..cols {
            let word = packed[(row * cols + col) / 8];
            let q = f64::from((word >> (4 * (col % 8))) & 0xf);
            let [scale, minimum] = block_scale_min[(row * cols + col) / 32];
            sum += (q * f64::from(scale) + f64::from(minimum)) * f64::from(x[col]);
        }
        expected.push(sum as f32);
    }
    // Each invocation sums 16 terms below 0.15 and the tree adds 6 levels: about
    // (16 + 6 + 3) roundings of 6e-8 relative on sums below 40 in magnitude, 6e-5; 1e-4.
    check_close(&stream.read_to_vec(&y)?, &expected, 1e-4, "int4 matrix-vector product")
}

// ---- f16 -----------------------------------------------------------------------------------

const F16_GEMV: &str = r#"
enable f16;

// y = W x with W and x stored as f16 (rows of vec4<f16>) and the dot products accumulated in
// f32, as mixed-precision inference kernels do.
struct Gemv {
    rows: u32,
    cols4: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> gemv: Gemv;

@compute @workgroup_size(64)
fn gemv_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    let row = id.x;
    if row >= gemv.rows {
        return;
    }
    var acc = 0.0;
    for (var c = 0u; c < gemv.cols4; c++) {
        acc += dot(vec4<f32>(w[row * gemv.cols4 + c]), vec4<f32>(x[c]));
    }
    y[row] = acc;
}
"#;

fn f16_gemv_f32_accumulate(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 gemv", F16_GEMV, "gemv_f16")?;
    let (rows, cols) = (70usize, 64usize);
    // Multiples of 1/64 in [-4, 4): exact in f16, their products exact in f32 (multiples of
    // 2^-12 below 16), and sums of 64 of them stay below 2^10, so exact too.
    let w = random_dyadic(context, 1261, rows * cols, -4.0, 512, 64.0);
    let x = random_dyadic(context, 1262, cols, -4.0, 512, 64.0);
    let device = context.device();
    let stream = context.stream();
    let w_buffer = device.alloc_from(stream, &f16_buffer_bits(&w)?)?;
    let x_buffer = device.alloc_from(stream, &f16_buffer_bits(&x)?)?;
    let y = device.alloc_from(stream, &vec![f32::NAN; rows])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(rows, 64), 1, 1)
            .buffer(&w_buffer)
            .buffer(&x_buffer)
            .buffer(&y)
            .uniform(&[rows as u32, (cols / 4) as u32]),
    )?;
    let expected: Vec<f32> = w
        .chunks(cols)
        .map(|row| row.iter().zip(&x).map(|(a, b)| a * b).sum())
        .collect();
    check_slice_eq(&stream.read_to_vec(&y)?, &expected, "f16 matrix-vector product")
}

const F16_ROUNDING: &str = r#"
enable f16;

@group(0) @binding(0) var<storage, read> p: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec2<f16>>;

@compute @workgroup_size(4)
fn rounded(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = p[id.x];
    out[id.x] = vec2<f16>(v.x * v.y + v.z, v.x + v.z + v.w);
}
"#;

fn f16_rounded_per_operation(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 rounding", F16_ROUNDING, "rounded")?;
    // (x, y, z, w) as f16 bits; what x * y + z and x + z + w may be. WGSL rounds each
    // operation to one of the two f16 values nearest its exact result.
    let cases: [([u16; 4], &[u16], &[u16]); 4] = [
        // (1 + 3 * 2^-10)^2 = 1 + 6 * 2^-10 + 9 * 2^-20 rounds to 1 + 6 * 2^-10 (or
        // 1 + 7 * 2^-10); minus 1 leaves 0x1e00 (or 0x1f00). Rounded only at the end (f32
        // arithmetic, or a fused multiply-add) the 9 * 2^-20 survives: 0x1e02.
        ([0x3c03, 0x3c03, 0xbc00, 0x0000], &[0x1e00, 0x1f00], &[0x1a00]),
        // (1 + 2^-10)(1 - 2^-11) = 1 + 2^-11 - 2^-21 rounds to 1 (or 1 + 2^-10); minus 1
        // leaves 0 (or 2^-10). Unrounded, 2^-11 - 2^-21 is the f16 0x0ffe.
        ([0x3c01, 0x3bff, 0xbc00, 0x0000], &[0x0000, 0x1400], &[0x1400]),
        // Exact results are exact: 256 - 65504 is -65248.
        ([0x5c00, 0x3c00, 0xfbff, 0x0000], &[0xfbf7], &[0xfbf7]),
        // -1 + 2 is 1; 1 + 2 + -0 is 3.
        ([0x3c00, 0xbc00, 0x4000, 0x8000], &[0x3c00], &[0x4200]),
    ];
    let device = context.device();
    let stream = context.stream();
    let input: Vec<u16> = cases.iter().flat_map(|(p, _, _)| *p).collect();
    let p = device.alloc_from(stream, &input)?;
    let out = device.alloc_from(stream, &vec![0x7e00u16; 2 * cases.len()])?;
    stream.launch(&Launch::new(&kernel).workgroups(1, 1, 1).buffer(&p).buffer(&out))?;
    let got = stream.read_to_vec(&out)?;
    for (k, (p, product, sum)) in cases.iter().enumerate() {
        for (what, value, allowed) in [("x * y + z", got[2 * k], *product), ("x + z + w", got[2 * k + 1], *sum)] {
            check(allowed.contains(&value), || {
                format!("f16 {what} for (x, y, z, w) = {p:04x?} gave {value:#06x}; rounding each operation allows {allowed:04x?}")
            })?;
        }
    }
    Ok(())
}

const F16_SILU: &str = r#"
enable f16;

// SiLU in half precision end to end: f16 in, f16 arithmetic, f16 out.
@group(0) @binding(0) var<storage, read> input: array<f16>;
@group(0) @binding(1) var<storage, read_write> output: array<f16>;

@compute @workgroup_size(64)
fn silu_half(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&output) {
        return;
    }
    let v = input[i];
    output[i] = v / (1.0h + exp(-v));
}
"#;

fn f16_silu_half(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "f16 SiLU", F16_SILU, "silu_half")?;
    let input = random_dyadic(context, 1271, 1000, -4.0, 512, 64.0);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &f16_buffer_bits(&input)?)?;
    let output = device.alloc_from(stream, &vec![0x7e00u16; input.len()])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(input.len(), 64), 1, 1)
            .buffer(&input_buffer)
            .buffer(&output),
    )?;
    let actual: Vec<f32> = stream.read_to_vec(&output)?.into_iter().map(f16_bits_to_f32).collect();
    let expected: Vec<f32> = input
        .iter()
        .map(|&v| {
            let v = f64::from(v);
            (v / (1.0 + (-v).exp())) as f32
        })
        .collect();
    // In f16 an ulp is 2^-10 relative. exp is within 1 + 2|x| ulp (|x| <= 4: 9 ulp), the
    // division 2.5 and the final rounding 0.5: 12 ulp, 1.2e-2 relative; the smallest
    // non-zero outputs (|x| = 1/64) are normal f16, so no absolute floor beyond 2^-24.
    check_relative(&actual, &expected, 1.2e-2, 6e-8, "f16 SiLU")
}

// ---- overrides -----------------------------------------------------------------------------

const OVERRIDE_BLOCK: &str = r#"
// Weighted block sums, with the block (the workgroup size and the workgroup array's length)
// and the weight given when the module is loaded.
override block: u32 = 64u;
override weight: u32 = 1u;

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> block_sums: array<u32>;

var<workgroup> partial_block: array<u32, block>;

@compute @workgroup_size(block)
fn sum_blocks(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let i = group.x * block + lane;
    var value = 0u;
    if i < arrayLength(&input) {
        value = input[i] * weight;
    }
    partial_block[lane] = value;
    workgroupBarrier();
    var stride = block / 2u;
    while stride > 0u {
        if lane < stride {
            partial_block[lane] += partial_block[lane + stride];
        }
        workgroupBarrier();
        stride /= 2u;
    }
    if lane == 0u {
        block_sums[group.x] = partial_block[0];
    }
}
"#;

fn override_block_size(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    require_workgroup_shape(context, [128, 1, 1])?;
    let input = context.random_u32(1281, 1000);
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    for (overrides, block, weight) in [
        (&[("block", 16.0)][..], 16usize, 1u32),
        (&[][..], 64, 1),
        (&[("block", 128.0), ("weight", 3.0)][..], 128, 3),
    ] {
        let module = device.load_wgsl_with_overrides(OVERRIDE_BLOCK, overrides)?;
        let kernel = module.kernel("sum_blocks")?;
        check_eq(
            kernel.workgroup_size(),
            Some([block as u32, 1, 1]),
            &format!("workgroup size with overrides {overrides:?}"),
        )?;
        let blocks = input.len().div_ceil(block);
        let sums = device.alloc_from(stream, &vec![0xdead_beefu32; blocks])?;
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(blocks as u32, 1, 1)
                .buffer(&input_buffer)
                .buffer(&sums),
        )?;
        let expected: Vec<u32> = input
            .chunks(block)
            .map(|chunk| {
                chunk
                    .iter()
                    .fold(0u32, |acc, v| acc.wrapping_add(v.wrapping_mul(weight)))
            })
            .collect();
        check_slice_eq(
            &stream.read_to_vec(&sums)?,
            &expected,
            &format!("sums of blocks of {block}, weight {weight}"),
        )?;
    }
    Ok(())
}

// ---- binding numbers -----------------------------------------------------------------------

const GAPS: &str = r#"
// out = leaky_relu(x + bias + residual), a fused epilogue whose bindings keep the numbers of
// the pipeline it came from: gaps, two groups, declared in no particular order.
struct Epilogue {
    rows: u32,
    cols: u32,
    slope: f32,
}

@group(1) @binding(2) var<uniform> epilogue: Epilogue;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(1) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;

@compute @workgroup_size(16, 4)
fn bias_residual_leaky_relu(@builtin(global_invocation_id) id: vec3<u32>) {
    let col = id.x;
    let row = id.y;
    if col >= epilogue.cols || row >= epilogue.rows {
        return;
    }
    let i = row * epilogue.cols + col;
    let v = x[i] + bias[col] + residual[i];
    out[i] = select(v * epilogue.slope, v, v > 0.0);
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct EpilogueParams {
    rows: u32,
    cols: u32,
    slope: f32,
}

fn bindings_gaps_and_groups(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "fused epilogue", GAPS, "bias_residual_leaky_relu")?;
    let order: Vec<(u32, u32)> = kernel
        .info()
        .map(|info| info.buffers.iter().map(|b| (b.group, b.binding)).collect())
        .unwrap_or_default();
    check_eq(
        order,
        vec![(0, 0), (0, 1), (0, 3), (1, 0), (1, 2)],
        "(group, binding) of the arguments, in launch order",
    )?;
    let (rows, cols) = (13usize, 70usize);
    let x = random_f32(context, 1291, rows * cols, -2.0, 2.0);
    let bias = random_f32(context, 1292, cols, -0.5, 0.5);
    let residual = random_f32(context, 1293, rows * cols, -2.0, 2.0);
    let slope = 0.125f32;
    let device = context.device();
    let stream = context.stream();
    let x_buffer = device.alloc_from(stream, &x)?;
    let bias_buffer = device.alloc_from(stream, &bias)?;
    let residual_buffer = device.alloc_from(stream, &residual)?;
    let out = device.alloc_from(stream, &vec![f32::NAN; rows * cols])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(cols, 16), groups_for(rows, 4), 1)
            .buffer(&x_buffer)
            .buffer(&bias_buffer)
            .buffer(&residual_buffer)
            .buffer(&out)
            .uniform(&EpilogueParams {
                rows: rows as u32,
                cols: cols as u32,
                slope,
            }),
    )?;
    let expected: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let v = x[i] + bias[i % cols] + residual[i];
            if v > 0.0 {
                v
            } else {
                v * slope
            }
        })
        .collect();
    // Two correctly rounded additions in a fixed order, and a power-of-two slope: equal bits.
    check_slice_eq(&stream.read_to_vec(&out)?, &expected, "fused epilogue output")
}

// ---- uniform layout ------------------------------------------------------------------------

const SHADING: &str = r#"
// Lambert shading of surface samples: colour = palette[material] * (ambient + intensity *
// max(dot(n, light), 0)) * exposure, clamped. The uniform struct is laid out as the uniform
// address space requires: vec3s followed by a scalar in their fourth lane, an array of vec4
// (stride 16), and a nested struct at a multiple of 16.
struct Clamp {
    low: f32,
    high: f32,
}

struct Params {
    light_dir: vec3<f32>,
    light_intensity: f32,
    ambient: vec3<f32>,
    count: u32,
    palette: array<vec4<f32>, 4>,
    exposure: f32,
    @align(16) range: Clamp,
}

@group(0) @binding(0) var<storage, read> normals: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> materials: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read_write> colours: array<vec4<f32>>;

@compute @workgroup_size(64)
fn shade(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= params.count {
        return;
    }
    let n = normals[i].xyz;
    let lambert = max(dot(n, params.light_dir), 0.0);
    let base = params.palette[materials[i] % 4u].rgb;
    let lit = base * (params.ambient + vec3<f32>(params.light_intensity * lambert)) * params.exposure;
    colours[i] = vec4<f32>(clamp(lit, vec3<f32>(params.range.low), vec3<f32>(params.range.high)), 1.0);
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ShadingParams {
    light_dir: [f32; 3],
    light_intensity: f32,
    ambient: [f32; 3],
    count: u32,
    palette: [[f32; 4]; 4],
    exposure: f32,
    pad_before_range: [f32; 3],
    range: [f32; 2],
    pad_after_range: [f32; 2],
}

fn uniform_shading_params(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "shading", SHADING, "shade")?;
    check_eq(
        kernel.info().and_then(|info| info.buffers.get(2)).map(|b| b.size),
        Some(xhal::kernel::BufferSize::Fixed(128)),
        "the uniform's reflected size (the uniform layout pads it to 128 bytes)",
    )?;
    let count = 300usize;
    // Eighths and sixteenths: every product and sum below is exact, so results are bit-exact.
    let normals = to_vec4(&random_dyadic(context, 1301, count * 4, -1.0, 16, 8.0));
    let materials = context.random_u32(1302, count);
    let params = ShadingParams {
        light_dir: [0.5, -0.25, 0.75],
        light_intensity: 1.5,
        ambient: [0.125, 0.25, 0.0625],
        count: count as u32,
        palette: [
            [1.0, 0.5, 0.25, 9.0],
            [0.25, 1.0, 0.5, 9.0],
            [0.5, 0.25, 1.0, 9.0],
            [0.75, 0.75, 0.75, 9.0],
        ],
        exposure: 2.0,
        pad_before_range: [f32::NAN; 3],
        range: [0.0625, 1.75],
        pad_after_range: [f32::NAN; 2],
    };
    let mut expected = Vec::with_capacity(count * 4);
    for (normal, material) in normals.iter().zip(&materials) {
        let dot: f32 = (0..3).map(|axis| normal[axis] * params.light_dir[axis]).sum();
        let lambert = dot.max(0.0);
        let base = params.palette[(material % 4) as usize];
        for (colour, ambient) in base.iter().zip(params.ambient) {
            let lit = colour * (ambient + params.light_intensity * lambert) * params.exposure;
            expected.push(lit.clamp(params.range[0], params.range[1]));
        }
        expected.push(1.0);
    }
    let device = context.device();
    let stream = context.stream();
    let normals_buffer = device.alloc_from(stream, &normals)?;
    let materials_buffer = device.alloc_from(stream, &materials)?;
    let params_buffer = device.alloc_from(stream, &[params])?;
    for staged in [false, true] {
        let colours = device.alloc_from(stream, &vec![[f32::NAN; 4]; count])?;
        let launch = Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .buffer(&normals_buffer)
            .buffer(&materials_buffer);
        let launch = if staged {
            launch.uniform(&params)
        } else {
            launch.buffer(&params_buffer)
        };
        stream.launch(&launch.buffer(&colours))?;
        check_slice_eq(
            &from_vec4(&stream.read_to_vec(&colours)?),
            &expected,
            if staged {
                "colours with the parameters staged by Launch::uniform"
            } else {
                "colours with the parameters in a buffer"
            },
        )?;
    }
    Ok(())
}

// ---- more passes and layouts ---------------------------------------------------------------

const NBODY: &str = r#"
// One step of an n-body simulation, tiled: each workgroup walks all bodies 64 at a time,
// staging (position, mass) of a tile in workgroup memory. Bodies are structs whose vec3
// members take 16 bytes each, with a scalar in the last lane.
struct Body {
    position: vec3<f32>,
    mass: f32,
    velocity: vec3<f32>,
    age: u32,
}

struct Sim {
    dt: f32,
    softening2: f32,
    count: u32,
}

@group(0) @binding(0) var<storage, read> bodies_in: array<Body>;
@group(0) @binding(1) var<storage, read_write> bodies_out: array<Body>;
@group(0) @binding(2) var<uniform> sim: Sim;

const TILE: u32 = 64u;
var<workgroup> tile: array<vec4<f32>, TILE>;

@compute @workgroup_size(64)
fn nbody_step(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let index = min(id.x, sim.count - 1u);
    let me = bodies_in[index];
    var acceleration = vec3<f32>(0.0);
    for (var start = 0u; start < sim.count; start += TILE) {
        let j = start + lane;
        if j < sim.count {
            let other = bodies_in[j];
            tile[lane] = vec4<f32>(other.position, other.mass);
        } else {
            tile[lane] = vec4<f32>(0.0);
        }
        workgroupBarrier();
        for (var t = 0u; t < TILE; t++) {
            let other = tile[t];
            let offset = other.xyz - me.position;
            let r2 = dot(offset, offset) + sim.softening2;
            let inv_r = inverseSqrt(r2);
            acceleration += offset * (other.w * inv_r * inv_r * inv_r);
        }
        workgroupBarrier();
    }
    if id.x < sim.count {
        let velocity = me.velocity + acceleration * sim.dt;
        bodies_out[id.x] = Body(me.position + velocity * sim.dt, me.mass, velocity, me.age + 1u);
    }
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq)]
struct Body {
    position: [f32; 3],
    mass: f32,
    velocity: [f32; 3],
    age: u32,
}

fn nbody_tiled_vec3_structs(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "n-body step", NBODY, "nbody_step")?;
    let count = 150usize;
    let (dt, softening2) = (0.01f32, 0.05f32);
    let positions = random_f32(context, 1311, count * 3, -1.0, 1.0);
    let velocities = random_f32(context, 1312, count * 3, -0.1, 0.1);
    let masses = random_f32(context, 1313, count, 0.5, 1.0);
    let ages = context.random_u32(1314, count);
    let bodies: Vec<Body> = (0..count)
        .map(|i| Body {
            position: [positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]],
            mass: masses[i],
            velocity: [velocities[3 * i], velocities[3 * i + 1], velocities[3 * i + 2]],
            age: ages[i] % 1000,
        })
        .collect();
    let device = context.device();
    let stream = context.stream();
    let input = device.alloc_from(stream, &bodies)?;
    let output = device.alloc_from(stream, &vec![Body::zeroed(); count])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .buffer(&input)
            .buffer(&output)
            .uniform(&[dt.to_bits(), softening2.to_bits(), count as u32]),
    )?;
    let got = stream.read_to_vec(&output)?;
    let mut expected_floats = Vec::with_capacity(count * 7);
    let mut got_floats = Vec::with_capacity(count * 7);
    for (me, body) in bodies.iter().zip(&got) {
        let mut acceleration = [0f64; 3];
        for other in &bodies {
            let offset: Vec<f64> = (0..3)
                .map(|axis| f64::from(other.position[axis]) - f64::from(me.position[axis]))
                .collect();
            let r2 = offset.iter().map(|d| d * d).sum::<f64>() + f64::from(softening2);
            let weight = f64::from(other.mass) / (r2 * r2.sqrt());
            for (total, d) in acceleration.iter_mut().zip(&offset) {
                *total += d * weight;
            }
        }
        let velocity: Vec<f64> = (0..3)
            .map(|axis| f64::from(me.velocity[axis]) + acceleration[axis] * f64::from(dt))
            .collect();
        for (position, v) in me.position.iter().zip(&velocity) {
            expected_floats.push((f64::from(*position) + v * f64::from(dt)) as f32);
        }
        expected_floats.extend(velocity.iter().map(|&v| v as f32));
        expected_floats.push(me.mass);
        got_floats.extend(body.position);
        got_floats.extend(body.velocity);
        got_floats.push(body.mass);
    }
    // Pair forces are at most about 8 (softening 0.05), 150 of them summed in f32 with
    // inverseSqrt within 2 ulp: under 150 * 8 * 5 * 6e-8 = 4e-4 on the acceleration, 4e-6
    // after the step of 0.01; 1e-5 absolute.
    check_close(
        &got_floats,
        &expected_floats,
        1e-5,
        "positions, velocities and masses after one step",
    )?;
    let expected_ages: Vec<u32> = bodies.iter().map(|body| body.age + 1).collect();
    let got_ages: Vec<u32> = got.iter().map(|body| body.age).collect();
    check_slice_eq(&got_ages, &expected_ages, "ages, the u32 after the second vec3")
}

const CAMERA: &str = r#"
// Transforms points to clip space and normals by the normal matrix, as a compute pre-pass
// over a mesh does. The uniform holds a mat4x4, a mat3x3 (three columns of 16 bytes) and a
// vec3 with a scalar after it.
struct Camera {
    view_proj: mat4x4<f32>,
    normal_matrix: mat3x3<f32>,
    eye: vec3<f32>,
    exposure: f32,
}

@group(0) @binding(0) var<uniform> camera: Camera;
@group(0) @binding(1) var<storage, read> positions: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> normals: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> clip: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> facing: array<f32>;

@compute @workgroup_size(64)
fn transform(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&clip) {
        return;
    }
    let p = positions[i];
    clip[i] = camera.view_proj * vec4<f32>(p.xyz, 1.0);
    let n = camera.normal_matrix * normals[i].xyz;
    facing[i] = dot(n, camera.eye - p.xyz) * camera.exposure;
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CameraParams {
    view_proj: [[f32; 4]; 4],
    normal_matrix: [[f32; 4]; 3],
    eye: [f32; 3],
    exposure: f32,
}

fn uniform_matrices(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "camera transform", CAMERA, "transform")?;
    let count = 200usize;
    // Eighths and small integers: every product and every sum of four stays exact.
    let matrix = random_dyadic(context, 1321, 16 + 9, -2.0, 32, 8.0);
    let camera = CameraParams {
        view_proj: [0, 1, 2, 3].map(|c| [0, 1, 2, 3].map(|r| matrix[c * 4 + r])),
        normal_matrix: [0, 1, 2].map(|c| [matrix[16 + c * 3], matrix[17 + c * 3], matrix[18 + c * 3], f32::NAN]),
        eye: [1.5, -2.0, 4.0],
        exposure: 0.5,
    };
    let positions = to_vec4(&random_dyadic(context, 1322, count * 4, -4.0, 32, 4.0));
    let normals = to_vec4(&random_dyadic(context, 1323, count * 4, -1.0, 16, 8.0));
    let device = context.device();
    let stream = context.stream();
    let positions_buffer = device.alloc_from(stream, &positions)?;
    let normals_buffer = device.alloc_from(stream, &normals)?;
    let clip = device.alloc_from(stream, &vec![[f32::NAN; 4]; count])?;
    let facing = device.alloc_from(stream, &vec![f32::NAN; count])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(count, 64), 1, 1)
            .uniform(&camera)
            .buffer(&positions_buffer)
            .buffer(&normals_buffer)
            .buffer(&clip)
            .buffer(&facing),
    )?;
    let mut expected_clip = Vec::with_capacity(count * 4);
    let mut expected_facing = Vec::with_capacity(count);
    for (p, n) in positions.iter().zip(&normals) {
        let point = [p[0], p[1], p[2], 1.0];
        for row in 0..4 {
            expected_clip.push((0..4).map(|c| camera.view_proj[c][row] * point[c]).sum::<f32>());
        }
        let turned: Vec<f32> = (0..3)
            .map(|row| (0..3).map(|c| camera.normal_matrix[c][row] * n[c]).sum::<f32>())
            .collect();
        let dot: f32 = (0..3).map(|axis| turned[axis] * (camera.eye[axis] - p[axis])).sum();
        expected_facing.push(dot * camera.exposure);
    }
    // Every value is a small dyadic, so every product and sum is exact: equal bits.
    check_slice_eq(
        &from_vec4(&stream.read_to_vec(&clip)?),
        &expected_clip,
        "clip-space positions",
    )?;
    check_slice_eq(&stream.read_to_vec(&facing)?, &expected_facing, "facing terms")
}

const OVERRIDE_TILES: &str = r#"
// A square-tiled matmul whose tile edge is an override: it sizes the 2D workgroup and the
// workgroup arrays (tile * tile elements each).
override tile: u32 = 8u;

struct Dims {
    m: u32,
    n: u32,
    k: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

var<workgroup> a_tile: array<f32, tile * tile>;
var<workgroup> b_tile: array<f32, tile * tile>;

@compute @workgroup_size(tile, tile)
fn matmul_tiles(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
    let row = group.y * tile + local.y;
    let col = group.x * tile + local.x;
    var sum = 0.0;
    let steps = (dims.k + tile - 1u) / tile;
    for (var s = 0u; s < steps; s++) {
        let a_col = s * tile + local.x;
        let b_row = s * tile + local.y;
        // Branches, not select: select would read past the end for the ragged edge tiles.
        var a_value = 0.0;
        if row < dims.m && a_col < dims.k {
            a_value = a[row * dims.k + a_col];
        }
        var b_value = 0.0;
        if b_row < dims.k && col < dims.n {
            b_value = b[b_row * dims.n + col];
        }
        a_tile[local.y * tile + local.x] = a_value;
        b_tile[local.y * tile + local.x] = b_value;
        workgroupBarrier();
        for (var i = 0u; i < tile; i++) {
            sum += a_tile[local.y * tile + i] * b_tile[i * tile + local.x];
        }
        workgroupBarrier();
    }
    if row < dims.m && col < dims.n {
        c[row * dims.n + col] = sum;
    }
}
"#;

fn override_matmul_tiles(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    require_workgroup_shape(context, [16, 16, 1])?;
    let (m, n, k) = (37usize, 29usize, 45usize);
    // Sixteenths in [-1, 1): products are multiples of 2^-8 below 1, and sums of 45 of them
    // stay below 2^6, so every partial sum is exact whatever the tile (and the order).
    let a = random_dyadic(context, 1331, m * k, -1.0, 32, 16.0);
    let b = random_dyadic(context, 1332, k * n, -1.0, 32, 16.0);
    let expected: Vec<f32> = matmul_reference(&a, &b, m, n, k).iter().map(|&v| v as f32).collect();
    let device = context.device();
    let stream = context.stream();
    let a_buffer = device.alloc_from(stream, &a)?;
    let b_buffer = device.alloc_from(stream, &b)?;
    for (overrides, edge) in [
        (&[("tile", 4.0)][..], 4usize),
        (&[][..], 8),
        (&[("tile", 16.0)][..], 16),
    ] {
        let kernel = device
            .load_wgsl_with_overrides(OVERRIDE_TILES, overrides)?
            .kernel("matmul_tiles")?;
        check_eq(
            kernel.workgroup_size(),
            Some([edge as u32, edge as u32, 1]),
            &format!("workgroup size with overrides {overrides:?}"),
        )?;
        let c = device.alloc_from(stream, &vec![f32::NAN; m * n])?;
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(n, edge as u32), groups_for(m, edge as u32), 1)
                .buffer(&a_buffer)
                .buffer(&b_buffer)
                .buffer(&c)
                .uniform(&[m as u32, n as u32, k as u32, 0]),
        )?;
        check_slice_eq(
            &stream.read_to_vec(&c)?,
            &expected,
            &format!("37x45 by 45x29 product in tiles of {edge}x{edge}"),
        )?;
    }
    Ok(())
}

const HEAT: &str = r#"
// Jacobi iterations of 1D heat diffusion on a rod held at its ends, in workgroup memory,
// ping-ponging two rows; the loop is written with a continuing block and `break if`.
struct Heat {
    iterations: u32,
}

@group(0) @binding(0) var<storage, read_write> rod: array<f32, 256>;
@group(0) @binding(1) var<uniform> heat: Heat;

var<workgroup> rows: array<array<f32, 256>, 2>;

@compute @workgroup_size(256)
fn diffuse(@builtin(local_invocation_index) cell: u32) {
    rows[0][cell] = rod[cell];
    workgroupBarrier();
    var step = 0u;
    loop {
        if step >= heat.iterations {
            break;
        }
        let from_row = step % 2u;
        var next = rows[from_row][cell];
        if cell > 0u && cell < 255u {
            next = rows[from_row][cell - 1u] * 0.25 + rows[from_row][cell] * 0.5 + rows[from_row][cell + 1u] * 0.25;
        }
        rows[1u - from_row][cell] = next;
        workgroupBarrier();
        continuing {
            step += 1u;
            break if step >= heat.iterations;
        }
    }
    rod[cell] = rows[heat.iterations % 2u][cell];
}
"#;

fn heat_loop_continuing(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "heat diffusion", HEAT, "diffuse")?;
    let iterations = 37u32;
    let start = random_f32(context, 1341, 256, 0.0, 100.0);
    let device = context.device();
    let stream = context.stream();
    let rod = device.alloc_from(stream, &start)?;
    stream.launch(&Launch::new(&kernel).buffer(&rod).uniform(&[iterations]))?;
    let mut expected = start;
    for _ in 0..iterations {
        let before = expected.clone();
        for cell in 1..255 {
            expected[cell] = before[cell - 1] * 0.25 + before[cell] * 0.5 + before[cell + 1] * 0.25;
        }
    }
    // Products by powers of two are exact, so fusing cannot change them, and the two
    // additions round as Rust's do: equal bits.
    check_slice_eq(&stream.read_to_vec(&rod)?, &expected, "the rod after 37 iterations")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_helpers_round_trip() {
        for value in [0.0f32, -0.0, 1.0, -2.5, 0.015625, 65504.0, -3.984375] {
            let bits = f16_bits_exact(value);
            assert_eq!(bits.map(f16_bits_to_f32), Some(value), "{value}");
        }
        assert_eq!(f16_bits_exact(1.0 + 2f32.powi(-12)), None);
        assert_eq!(f16_bits_exact(1e6), None);
    }

    #[test]
    fn bitonic_stages_sort_on_the_host() {
        // The same network run on the host sorts, so a device that disagrees is wrong.
        let mut keys: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(2_654_435_761) % 97).collect();
        for [k, j] in bitonic_stages(64) {
            for i in 0..64u32 {
                let partner = i ^ j;
                if partner > i {
                    let ascending = i & k == 0;
                    let (a, b) = (keys[i as usize], keys[partner as usize]);
                    if (a > b) == ascending {
                        keys.swap(i as usize, partner as usize);
                    }
                }
            }
        }
        assert!(keys.windows(2).all(|pair| pair[0] <= pair[1]));
    }

    #[test]
    fn uniform_structs_have_the_wgsl_sizes() {
        assert_eq!(std::mem::size_of::<ShadingParams>(), 128);
        assert_eq!(std::mem::size_of::<BlurParams>(), 48);
        assert_eq!(std::mem::size_of::<FlockParams>(), 36);
        assert_eq!(std::mem::size_of::<GemmParams>(), 24);
        assert_eq!(std::mem::size_of::<RopeParams>(), 20);
        assert_eq!(std::mem::size_of::<CameraParams>(), 128);
        assert_eq!(std::mem::size_of::<Body>(), 32);
    }
}
