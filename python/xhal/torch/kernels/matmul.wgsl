// Matrix products: out[b] = alpha a[b] b[b] (+ beta bias[b]) for a batch of matrices of any
// strides (a stride of 0 broadcasts), accumulated in F: f32 for float16 and float32 (as
// PyTorch's CPU does), f64 for float64. Two entry points: `tiled`, for products with rows and
// columns to share work (a workgroup computes a 64x64 block of the output from 64x16 and
// 16x64 blocks of the operands staged in workgroup memory, each invocation 4x4 of its outputs
// held in four vec4 accumulators), and `main`, one invocation per output element, for products
// with a single row or column (matrix-vector products and dot products).
//
// Run one by itself (README.md): cat lib/float_f32.wgsl matmul.wgsl | xhal run - ...

alias E = f32;  // the elements of the operands' memory
alias F = f32;  // what products accumulate in

override HAS_BIAS: bool = false;
override ROWS: u32 = 4u;  // tiled: output rows an invocation computes, 1, 2 or 4 (16 ROWS rows a block)

struct Product {
  batch: u32,
  m: u32,
  n: u32,
  k: u32,
  offsets: vec4<u32>,       // first element of a, b, bias and out
  a_strides: vec4<u32>,     // inner batch, row, column, outer batch
  b_strides: vec4<u32>,
  bias_strides: vec4<u32>,
  scalars: vec4<u32>,       // alpha (x, y) and beta (z, w), as bits of F
  batch_inner: u32,         // matrices along the inner of the two batch dimensions (at least 1)
  pad0: u32,
  pad1: u32,
  pad2: u32,
}
var<immediate> q: Product;

// Where matrix `matrix` of the batch starts, from an operand's strides: the batch has two
// dimensions (a 4-dimensional product, such as attention's heads of each sample, whose
// operands need not be copied to fold them into one), matrix = outer * batch_inner + inner.
fn batch_offset(matrix: u32, strides: vec4<u32>) -> u32 {
  return matrix / q.batch_inner * strides.w + matrix % q.batch_inner * strides.x;
}

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
  var a_at = q.offsets.x + batch_offset(matrix, q.a_strides) + row * q.a_strides.y;
  var b_at = q.offsets.y + batch_offset(matrix, q.b_strides) + column * q.b_strides.z;
  // Four partial sums, so that long products lose less to rounding.
  var partial = vec4<F>(F(0));
  for (var kk = 0u; kk < q.k; kk = kk + 1u) {
    partial[kk % 4u] = partial[kk % 4u] + F(a[a_at]) * F(b[b_at]);
    a_at = a_at + q.a_strides.z;
    b_at = b_at + q.b_strides.y;
  }
  var value = float_from_bits(q.scalars.x, q.scalars.y) * ((partial.x + partial.y) + (partial.z + partial.w));
  if (HAS_BIAS) {
    let at = q.offsets.z + batch_offset(matrix, q.bias_strides) + row * q.bias_strides.y + column * q.bias_strides.z;
    value = value + float_from_bits(q.scalars.z, q.scalars.w) * F(bias[at]);
  }
  out[q.offsets.w + i] = E(value);
}

// --- tiled -----------------------------------------------------------------------------------

const TILE: u32 = 16u;         // invocations along each side of a workgroup
const TILE_K: u32 = 16u;       // the depth of the operand blocks staged per step
const BLOCK: u32 = 64u;        // output columns of a workgroup (4 per invocation), and at most its rows

// The operand blocks of a step: a_block[row * TILE_K + depth] holds a's BLOCK rows by TILE_K
// depths, b_block[depth * BLOCK + column] b's TILE_K depths by BLOCK columns.
var<workgroup> a_block: array<F, 1024>;  // BLOCK * TILE_K
var<workgroup> b_block: array<F, 1024>;

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

// Launched as ceil(n / 64) x ceil(m / (16 ROWS)) x batch workgroups. Invocation (x, y) computes
// rows y, y + 16, ... (ROWS of them) and columns x, x + 16, x + 32, x + 48 of the workgroup's
// block (fewer rows for products with few: a convolution's 16 output channels):
// neighbours along x read neighbouring elements of b_block and write neighbouring elements of
// the output, which a device that runs invocations as vector lanes (the cpu device) loads and
// stores as whole vectors. Each output sums its products in order of depth, whatever the
// blocks, so the result does not depend on the tile sizes.
@compute @workgroup_size(16, 16)
fn tiled(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let matrix = wid.z;
  let a_base = q.offsets.x + batch_offset(matrix, q.a_strides);
  let b_base = q.offsets.y + batch_offset(matrix, q.b_strides);
  let block_rows = TILE * ROWS;
  let first_row = wid.y * block_rows;
  let first_column = wid.x * BLOCK;
  // Staging reads each operand along the dimension that is adjacent in its memory, so that
  // neighbouring invocations read neighbouring elements: a's depths (a row-major a) or rows
  // (a transposed one), b's columns or depths.
  let a_depths_adjacent = q.a_strides.z == 1u;
  let a_rows_adjacent = q.a_strides.y == 1u && !a_depths_adjacent;
  let b_columns_adjacent = q.b_strides.z == 1u;
  let b_depths_adjacent = q.b_strides.y == 1u && !b_columns_adjacent;
  var acc0 = vec4<F>(F(0));
  var acc1 = vec4<F>(F(0));
  var acc2 = vec4<F>(F(0));
  var acc3 = vec4<F>(F(0));
  // Blocks inside the operands are read whole at every depth but the last few: those loads
  // need no test of their own (each test is the same in every invocation, so no divergence).
  let rows_inside = first_row + block_rows <= q.m;
  let columns_inside = first_column + BLOCK <= q.n;
  for (var depth = 0u; depth < q.k; depth = depth + TILE_K) {
    let depths_inside = depth + TILE_K <= q.k;
    // Each loop stages a quarter of b's block, and 1 / ROWS of a's.
    if (rows_inside && depths_inside) {
      if (a_depths_adjacent) {
        for (var part = 0u; part < ROWS; part = part + 1u) {
          let row = lid.y + TILE * part;
          a_block[row * TILE_K + lid.x] = F(a[a_base + (first_row + row) * q.a_strides.y + depth + lid.x]);
        }
      } else if (a_rows_adjacent) {
        for (var part = 0u; part < ROWS; part = part + 1u) {
          let row = lid.x + TILE * part;
          a_block[row * TILE_K + lid.y] = F(a[a_base + first_row + row + (depth + lid.y) * q.a_strides.z]);
        }
      } else {
        for (var part = 0u; part < ROWS; part = part + 1u) {
          let row = lid.y + TILE * part;
          a_block[row * TILE_K + lid.x] =
              F(a[a_base + (first_row + row) * q.a_strides.y + (depth + lid.x) * q.a_strides.z]);
        }
      }
    } else {
      for (var part = 0u; part < ROWS; part = part + 1u) {
        let row = lid.y + TILE * part;
        a_block[row * TILE_K + lid.x] = a_at(a_base, first_row + row, depth + lid.x);
      }
    }
    if (columns_inside && depths_inside) {
      if (b_columns_adjacent) {
        for (var part = 0u; part < 4u; part = part + 1u) {
          let column = lid.x + TILE * part;
          b_block[lid.y * BLOCK + column] = F(b[b_base + (depth + lid.y) * q.b_strides.y + first_column + column]);
        }
      } else if (b_depths_adjacent) {
        for (var part = 0u; part < 4u; part = part + 1u) {
          let column = lid.y + TILE * part;
          b_block[lid.x * BLOCK + column] = F(b[b_base + depth + lid.x + (first_column + column) * q.b_strides.z]);
        }
      } else {
        for (var part = 0u; part < 4u; part = part + 1u) {
          let column = lid.x + TILE * part;
          b_block[lid.y * BLOCK + column] =
              F(b[b_base + (depth + lid.y) * q.b_strides.y + (first_column + column) * q.b_strides.z]);
        }
      }
    } else {
      for (var part = 0u; part < 4u; part = part + 1u) {
        let column = lid.x + TILE * part;
        b_block[lid.y * BLOCK + column] = b_at(b_base, depth + lid.y, first_column + column);
      }
    }
    workgroupBarrier();
    // Four depths a step: where invocations run as a loop between barriers (the cpu device),
    // the accumulators are loaded and stored once per four depths. Each product is added with
    // `fma`, one rounding instead of two, and the fused instruction where the device has one.
    for (var step = 0u; step < TILE_K; step = step + 4u) {
      let rows0 = vec4<F>(a_block[lid.y * TILE_K + step], a_block[(lid.y + 16u) * TILE_K + step],
                           a_block[(lid.y + 32u) * TILE_K + step], a_block[(lid.y + 48u) * TILE_K + step]);
      let columns0 = vec4<F>(b_block[step * BLOCK + lid.x], b_block[step * BLOCK + lid.x + 16u],
                              b_block[step * BLOCK + lid.x + 32u], b_block[step * BLOCK + lid.x + 48u]);
      let rows1 = vec4<F>(a_block[lid.y * TILE_K + step + 1u], a_block[(lid.y + 16u) * TILE_K + step + 1u],
                           a_block[(lid.y + 32u) * TILE_K + step + 1u], a_block[(lid.y + 48u) * TILE_K + step + 1u]);
      let columns1 = vec4<F>(b_block[(step + 1u) * BLOCK + lid.x], b_block[(step + 1u) * BLOCK + lid.x + 16u],
                              b_block[(step + 1u) * BLOCK + lid.x + 32u], b_block[(step + 1u) * BLOCK + lid.x + 48u]);
      let rows2 = vec4<F>(a_block[lid.y * TILE_K + step + 2u], a_block[(lid.y + 16u) * TILE_K + step + 2u],
                           a_block[(lid.y + 32u) * TILE_K + step + 2u], a_block[(lid.y + 48u) * TILE_K + step + 2u]);
      let columns2 = vec4<F>(b_block[(step + 2u) * BLOCK + lid.x], b_block[(step + 2u) * BLOCK + lid.x + 16u],
                              b_block[(step + 2u) * BLOCK + lid.x + 32u], b_block[(step + 2u) * BLOCK + lid.x + 48u]);
      let rows3 = vec4<F>(a_block[lid.y * TILE_K + step + 3u], a_block[(lid.y + 16u) * TILE_K + step + 3u],
                           a_block[(lid.y + 32u) * TILE_K + step + 3u], a_block[(lid.y + 48u) * TILE_K + step + 3u]);
      let columns3 = vec4<F>(b_block[(step + 3u) * BLOCK + lid.x], b_block[(step + 3u) * BLOCK + lid.x + 16u],
                              b_block[(step + 3u) * BLOCK + lid.x + 32u], b_block[(step + 3u) * BLOCK + lid.x + 48u]);
      acc0 = fma(vec4<F>(rows3.x), columns3, fma(vec4<F>(rows2.x), columns2,
          fma(vec4<F>(rows1.x), columns1, fma(vec4<F>(rows0.x), columns0, acc0))));
      if (ROWS > 1u) {
        acc1 = fma(vec4<F>(rows3.y), columns3, fma(vec4<F>(rows2.y), columns2,
            fma(vec4<F>(rows1.y), columns1, fma(vec4<F>(rows0.y), columns0, acc1))));
      }
      if (ROWS > 2u) {
        acc2 = fma(vec4<F>(rows3.z), columns3, fma(vec4<F>(rows2.z), columns2,
            fma(vec4<F>(rows1.z), columns1, fma(vec4<F>(rows0.z), columns0, acc2))));
        acc3 = fma(vec4<F>(rows3.w), columns3, fma(vec4<F>(rows2.w), columns2,
            fma(vec4<F>(rows1.w), columns1, fma(vec4<F>(rows0.w), columns0, acc3))));
      }
    }
    workgroupBarrier();
  }
  // Each row's four outputs written out, so that neighbouring invocations store neighbouring
  // outputs as one vector where invocations run as vector lanes (the cpu device); and each
  // row's accumulator named rather than chosen in a loop over the rows, which kept those
  // stores scalar there.
  let alpha = float_from_bits(q.scalars.x, q.scalars.y);
  let beta = float_from_bits(q.scalars.z, q.scalars.w);
  let bias_base = q.offsets.z + batch_offset(matrix, q.bias_strides);
  let column = first_column + lid.x;
  let bias_step = TILE * q.bias_strides.z;
  let row0 = first_row + lid.y;
  if (row0 < q.m) {
    let at = q.offsets.w + (matrix * q.m + row0) * q.n + column;
    if (HAS_BIAS) {
      let bias_at = bias_base + row0 * q.bias_strides.y + column * q.bias_strides.z;
      if (column < q.n) { out[at] = E(alpha * acc0.x + beta * F(bias[bias_at])); }
      if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc0.y + beta * F(bias[bias_at + bias_step])); }
      if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc0.z + beta * F(bias[bias_at + 2u * bias_step])); }
      if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc0.w + beta * F(bias[bias_at + 3u * bias_step])); }
    } else {
      if (column < q.n) { out[at] = E(alpha * acc0.x); }
      if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc0.y); }
      if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc0.z); }
      if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc0.w); }
    }
  }
  if (ROWS > 1u) {
    let row1 = first_row + lid.y + TILE;
    if (row1 < q.m) {
      let at = q.offsets.w + (matrix * q.m + row1) * q.n + column;
      if (HAS_BIAS) {
        let bias_at = bias_base + row1 * q.bias_strides.y + column * q.bias_strides.z;
        if (column < q.n) { out[at] = E(alpha * acc1.x + beta * F(bias[bias_at])); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc1.y + beta * F(bias[bias_at + bias_step])); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc1.z + beta * F(bias[bias_at + 2u * bias_step])); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc1.w + beta * F(bias[bias_at + 3u * bias_step])); }
      } else {
        if (column < q.n) { out[at] = E(alpha * acc1.x); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc1.y); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc1.z); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc1.w); }
      }
    }
  }
  if (ROWS > 2u) {
    let row2 = first_row + lid.y + 2u * TILE;
    if (row2 < q.m) {
      let at = q.offsets.w + (matrix * q.m + row2) * q.n + column;
      if (HAS_BIAS) {
        let bias_at = bias_base + row2 * q.bias_strides.y + column * q.bias_strides.z;
        if (column < q.n) { out[at] = E(alpha * acc2.x + beta * F(bias[bias_at])); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc2.y + beta * F(bias[bias_at + bias_step])); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc2.z + beta * F(bias[bias_at + 2u * bias_step])); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc2.w + beta * F(bias[bias_at + 3u * bias_step])); }
      } else {
        if (column < q.n) { out[at] = E(alpha * acc2.x); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc2.y); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc2.z); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc2.w); }
      }
    }
    let row3 = first_row + lid.y + 3u * TILE;
    if (row3 < q.m) {
      let at = q.offsets.w + (matrix * q.m + row3) * q.n + column;
      if (HAS_BIAS) {
        let bias_at = bias_base + row3 * q.bias_strides.y + column * q.bias_strides.z;
        if (column < q.n) { out[at] = E(alpha * acc3.x + beta * F(bias[bias_at])); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc3.y + beta * F(bias[bias_at + bias_step])); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc3.z + beta * F(bias[bias_at + 2u * bias_step])); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc3.w + beta * F(bias[bias_at + 3u * bias_step])); }
      } else {
        if (column < q.n) { out[at] = E(alpha * acc3.x); }
        if (column + 16u < q.n) { out[at + 16u] = E(alpha * acc3.y); }
        if (column + 32u < q.n) { out[at + 32u] = E(alpha * acc3.z); }
        if (column + 48u < q.n) { out[at + 48u] = E(alpha * acc3.w); }
      }
    }
  }
}

// --- tiled_contiguous ------------------------------------------------------------------------

// A block: TILE_K depths of 16 groups of 4 rows (a) or 4 columns (b), one vec4 per group.
var<workgroup> a_groups: array<vec4<F>, 256>;  // TILE_K * TILE
var<workgroup> b_groups: array<vec4<F>, 256>;

fn store_one(matrix: u32, row: u32, column: u32, sum: F) {
  if (row >= q.m || column >= q.n) { return; }
  var value = float_from_bits(q.scalars.x, q.scalars.y) * sum;
  if (HAS_BIAS) {
    let at = q.offsets.z + batch_offset(matrix, q.bias_strides) + row * q.bias_strides.y + column * q.bias_strides.z;
    value = value + float_from_bits(q.scalars.z, q.scalars.w) * F(bias[at]);
  }
  out[q.offsets.w + (matrix * q.m + row) * q.n + column] = E(value);
}

// The same product with each invocation computing a contiguous 4x4 block of the output (rows
// 4y to 4y + 3, columns 4x to 4x + 3), its operands staged as vec4 groups: faster where a
// device runs each invocation's vec4 as a vector (llvmpipe), slower where it runs invocations
// as the vector's lanes (the cpu device). Launched as ceil(n / 64) x ceil(m / 64) x batch
// workgroups; its sums, in the same order with the same fma, equal `tiled`'s bit for bit, so
// the tuning pass that picks one (matmul_ops.cpp) never changes a result.
@compute @workgroup_size(16, 16)
fn tiled_contiguous(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let matrix = wid.z;
  let a_base = q.offsets.x + batch_offset(matrix, q.a_strides);
  let b_base = q.offsets.y + batch_offset(matrix, q.b_strides);
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
      a_groups[slot] = vec4<F>(F(a[a_first]), F(a[a_first + q.a_strides.y]), F(a[a_first + 2u * q.a_strides.y]),
                              F(a[a_first + 3u * q.a_strides.y]));
      b_groups[slot] = vec4<F>(F(b[b_first]), F(b[b_first + q.b_strides.z]), F(b[b_first + 2u * q.b_strides.z]),
                              F(b[b_first + 3u * q.b_strides.z]));
    } else {
      a_groups[slot] = vec4<F>(a_at(a_base, group_row, d), a_at(a_base, group_row + 1u, d),
                              a_at(a_base, group_row + 2u, d), a_at(a_base, group_row + 3u, d));
      b_groups[slot] = vec4<F>(b_at(b_base, d, group_column), b_at(b_base, d, group_column + 1u),
                              b_at(b_base, d, group_column + 2u), b_at(b_base, d, group_column + 3u));
    }
    workgroupBarrier();
    // Invocation (x, y) computes rows 4y to 4y + 3 and columns 4x to 4x + 3 of the block,
    // four depths a step: where invocations run as a loop between barriers (the cpu device),
    // the accumulators are loaded and stored once per four depths.
    for (var step = 0u; step < TILE_K; step = step + 4u) {
      let rows0 = a_groups[step * TILE + lid.y];
      let columns0 = b_groups[step * TILE + lid.x];
      let rows1 = a_groups[(step + 1u) * TILE + lid.y];
      let columns1 = b_groups[(step + 1u) * TILE + lid.x];
      let rows2 = a_groups[(step + 2u) * TILE + lid.y];
      let columns2 = b_groups[(step + 2u) * TILE + lid.x];
      let rows3 = a_groups[(step + 3u) * TILE + lid.y];
      let columns3 = b_groups[(step + 3u) * TILE + lid.x];
      acc0 = fma(vec4<F>(rows3.x), columns3, fma(vec4<F>(rows2.x), columns2,
          fma(vec4<F>(rows1.x), columns1, fma(vec4<F>(rows0.x), columns0, acc0))));
      acc1 = fma(vec4<F>(rows3.y), columns3, fma(vec4<F>(rows2.y), columns2,
          fma(vec4<F>(rows1.y), columns1, fma(vec4<F>(rows0.y), columns0, acc1))));
      acc2 = fma(vec4<F>(rows3.z), columns3, fma(vec4<F>(rows2.z), columns2,
          fma(vec4<F>(rows1.z), columns1, fma(vec4<F>(rows0.z), columns0, acc2))));
      acc3 = fma(vec4<F>(rows3.w), columns3, fma(vec4<F>(rows2.w), columns2,
          fma(vec4<F>(rows1.w), columns1, fma(vec4<F>(rows0.w), columns0, acc3))));
    }
    workgroupBarrier();
  }
  let row = first_row + lid.y * 4u;
  let column = first_column + lid.x * 4u;
  let sums = array<vec4<F>, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < 4u; i = i + 1u) {
    for (var j = 0u; j < 4u; j = j + 1u) {
      store_one(matrix, row + i, column + j, sums[i][j]);
    }
  }
}
