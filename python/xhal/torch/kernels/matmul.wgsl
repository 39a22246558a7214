// Matrix products: out[b] = alpha a[b] b[b] (+ beta bias[b]) for a batch of matrices of any
// strides (a stride of 0 broadcasts), accumulated in F: f32 for float16 and float32 (as
// PyTorch's CPU does), f64 for float64. Two entry points: `tiled`, for products with rows and
// columns to share work (a workgroup computes a 64x64 block of the output from 64x16 and
// 16x64 blocks of the operands staged in workgroup memory, each invocation a 4x4 block held
// in four vec4 accumulators), and `main`, one invocation per output element, for products
// with a single row or column (matrix-vector products and dot products).
//
// Run one by itself (README.md): cat lib/float_f32.wgsl matmul.wgsl | xhal run - ...

alias E = f32;  // the elements of the operands' memory
alias F = f32;  // what products accumulate in

override HAS_BIAS: bool = false;

struct Product {
  batch: u32,
  m: u32,
  n: u32,
  k: u32,
  offsets: vec4<u32>,       // first element of a, b, bias and out
  a_strides: vec4<u32>,     // batch, row, column
  b_strides: vec4<u32>,
  bias_strides: vec4<u32>,
  scalars: vec4<u32>,       // alpha (x, y) and beta (z, w), as bits of F
}
var<immediate> q: Product;

@group(0) @binding(0) var<storage, read> a: array<E>;
@group(0) @binding(1) var<storage, read> b: array<E>;
@group(0) @binding(2) var<storage, read> bias: array<E>;
@group(0) @binding(3) var<storage, read_write> out: array<E>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= q.batch * q.m * q.n) { return; }
  let column = i % q.n;
  let row = (i / q.n) % q.m;
  let matrix = i / (q.n * q.m);
  var a_at = q.offsets.x + matrix * q.a_strides.x + row * q.a_strides.y;
  var b_at = q.offsets.y + matrix * q.b_strides.x + column * q.b_strides.z;
  // Four partial sums, so that long products lose less to rounding.
  var partial = vec4<F>(F(0));
  for (var kk = 0u; kk < q.k; kk = kk + 1u) {
    partial[kk % 4u] = partial[kk % 4u] + F(a[a_at]) * F(b[b_at]);
    a_at = a_at + q.a_strides.z;
    b_at = b_at + q.b_strides.y;
  }
  var value = float_from_bits(q.scalars.x, q.scalars.y) * ((partial.x + partial.y) + (partial.z + partial.w));
  if (HAS_BIAS) {
    let at = q.offsets.z + matrix * q.bias_strides.x + row * q.bias_strides.y + column * q.bias_strides.z;
    value = value + float_from_bits(q.scalars.z, q.scalars.w) * F(bias[at]);
  }
  out[q.offsets.w + i] = E(value);
}

// --- tiled -----------------------------------------------------------------------------------

const TILE: u32 = 16u;         // invocations along each side of a workgroup
const TILE_K: u32 = 16u;       // the depth of the operand blocks staged per step
const BLOCK: u32 = 64u;        // output rows and columns of a workgroup: 4 per invocation

// A block: TILE_K depths of 16 groups of 4 rows (a) or 4 columns (b), one vec4 per group.
var<workgroup> a_block: array<vec4<F>, 256>;  // TILE_K * TILE
var<workgroup> b_block: array<vec4<F>, 256>;

// a[matrix][row][depth] in F, or 0 outside the matrix (edge blocks read zeros).
fn a_at(base: u32, row: u32, depth: u32) -> F {
  if (row < q.m && depth < q.k) {
    return F(a[base + row * q.a_strides.y + depth * q.a_strides.z]);
  }
  return F(0);
}

fn b_at(base: u32, depth: u32, column: u32) -> F {
  if (depth < q.k && column < q.n) {
    return F(b[base + depth * q.b_strides.y + column * q.b_strides.z]);
  }
  return F(0);
}

fn store(matrix: u32, row: u32, column: u32, sum: F) {
  if (row >= q.m || column >= q.n) { return; }
  var value = float_from_bits(q.scalars.x, q.scalars.y) * sum;
  if (HAS_BIAS) {
    let at = q.offsets.z + matrix * q.bias_strides.x + row * q.bias_strides.y + column * q.bias_strides.z;
    value = value + float_from_bits(q.scalars.z, q.scalars.w) * F(bias[at]);
  }
  out[q.offsets.w + (matrix * q.m + row) * q.n + column] = E(value);
}

// Launched as ceil(n / 64) x ceil(m / 64) x batch workgroups. Each output sums its products in
// order of depth, whatever the blocks, so the result does not depend on the tile sizes.
@compute @workgroup_size(16, 16)
fn tiled(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let matrix = wid.z;
  let a_base = q.offsets.x + matrix * q.a_strides.x;
  let b_base = q.offsets.y + matrix * q.b_strides.x;
  let first_row = wid.y * BLOCK;
  let first_column = wid.x * BLOCK;
  // Staging: invocation (x, y) loads depth y of row group x of a, and of column group x of b.
  let group_row = first_row + lid.x * 4u;
  let group_column = first_column + lid.x * 4u;
  let slot = lid.y * TILE + lid.x;
  var acc0 = vec4<F>(F(0));
  var acc1 = vec4<F>(F(0));
  var acc2 = vec4<F>(F(0));
  var acc3 = vec4<F>(F(0));
  // A block inside the output reads whole operand blocks at every depth but the last few:
  // those loads need no test of their own (the same in every invocation, so no divergence).
  let inside = first_row + BLOCK <= q.m && first_column + BLOCK <= q.n;
  for (var depth = 0u; depth < q.k; depth = depth + TILE_K) {
    let d = depth + lid.y;
    if (inside && depth + TILE_K <= q.k) {
      let a_first = a_base + group_row * q.a_strides.y + d * q.a_strides.z;
      let b_first = b_base + d * q.b_strides.y + group_column * q.b_strides.z;
      a_block[slot] = vec4<F>(F(a[a_first]), F(a[a_first + q.a_strides.y]), F(a[a_first + 2u * q.a_strides.y]),
                              F(a[a_first + 3u * q.a_strides.y]));
      b_block[slot] = vec4<F>(F(b[b_first]), F(b[b_first + q.b_strides.z]), F(b[b_first + 2u * q.b_strides.z]),
                              F(b[b_first + 3u * q.b_strides.z]));
    } else {
      a_block[slot] = vec4<F>(a_at(a_base, group_row, d), a_at(a_base, group_row + 1u, d),
                              a_at(a_base, group_row + 2u, d), a_at(a_base, group_row + 3u, d));
      b_block[slot] = vec4<F>(b_at(b_base, d, group_column), b_at(b_base, d, group_column + 1u),
                              b_at(b_base, d, group_column + 2u), b_at(b_base, d, group_column + 3u));
    }
    workgroupBarrier();
    // Invocation (x, y) computes rows 4y to 4y + 3 and columns 4x to 4x + 3 of the block,
    // four depths a step: where invocations run as a loop between barriers (the cpu device),
    // the accumulators are loaded and stored once per four depths.
    for (var step = 0u; step < TILE_K; step = step + 4u) {
      let rows0 = a_block[step * TILE + lid.y];
      let columns0 = b_block[step * TILE + lid.x];
      let rows1 = a_block[(step + 1u) * TILE + lid.y];
      let columns1 = b_block[(step + 1u) * TILE + lid.x];
      let rows2 = a_block[(step + 2u) * TILE + lid.y];
      let columns2 = b_block[(step + 2u) * TILE + lid.x];
      let rows3 = a_block[(step + 3u) * TILE + lid.y];
      let columns3 = b_block[(step + 3u) * TILE + lid.x];
      acc0 = acc0 + rows0.x * columns0 + rows1.x * columns1 + rows2.x * columns2 + rows3.x * columns3;
      acc1 = acc1 + rows0.y * columns0 + rows1.y * columns1 + rows2.y * columns2 + rows3.y * columns3;
      acc2 = acc2 + rows0.z * columns0 + rows1.z * columns1 + rows2.z * columns2 + rows3.z * columns3;
      acc3 = acc3 + rows0.w * columns0 + rows1.w * columns1 + rows2.w * columns2 + rows3.w * columns3;
    }
    workgroupBarrier();
  }
  let row = first_row + lid.y * 4u;
  let column = first_column + lid.x * 4u;
  let sums = array<vec4<F>, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < 4u; i = i + 1u) {
    for (var j = 0u; j < 4u; j = j + 1u) {
      store(matrix, row + i, column + j, sums[i][j]);
    }
  }
}
