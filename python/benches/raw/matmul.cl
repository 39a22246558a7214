// C = A B for square row-major float matrices of order n, the hand-written baseline the
// PyTorch device's matrix product is measured against on an OpenCL device: a work-group of
// 16x16 work-items computes a 64x64 block of C, each work-item a contiguous 4x4 block of it
// held in four float4 accumulators, from 64x16 and 16x64 blocks of A and B staged in local
// memory as float4 groups (four rows of A, or four columns of B, at one depth). Edge blocks
// read zeros past the matrices.

#define TILE 16
#define BLOCK 64

float a_at(__global const float* a, uint n, uint row, uint depth) { return row < n && depth < n ? a[row * n + depth] : 0.0f; }
float b_at(__global const float* b, uint n, uint depth, uint column) { return depth < n && column < n ? b[depth * n + column] : 0.0f; }

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul(__global const float* a, __global const float* b, __global float* c, const uint n) {
  __local float4 a_groups[TILE * TILE];  // [depth][row group]
  __local float4 b_groups[TILE * TILE];  // [depth][column group]
  const uint x = get_local_id(0), y = get_local_id(1);
  const uint first_row = get_group_id(1) * BLOCK, first_column = get_group_id(0) * BLOCK;
  float4 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  for (uint depth = 0; depth < n; depth += TILE) {
    // Work-item (x, y) stages depth y of row group x and of column group x.
    const uint d = depth + y, row = first_row + 4 * x, column = first_column + 4 * x;
    a_groups[y * TILE + x] = (float4)(a_at(a, n, row, d), a_at(a, n, row + 1, d), a_at(a, n, row + 2, d), a_at(a, n, row + 3, d));
    if (d < n && column + 3 < n) {
      b_groups[y * TILE + x] = vload4(0, b + d * n + column);
    } else {
      b_groups[y * TILE + x] = (float4)(b_at(b, n, d, column), b_at(b, n, d, column + 1), b_at(b, n, d, column + 2), b_at(b, n, d, column + 3));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < TILE; k++) {
      const float4 rows = a_groups[k * TILE + y], columns = b_groups[k * TILE + x];
      acc0 = fma((float4)(rows.x), columns, acc0);
      acc1 = fma((float4)(rows.y), columns, acc1);
      acc2 = fma((float4)(rows.z), columns, acc2);
      acc3 = fma((float4)(rows.w), columns, acc3);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const uint row = first_row + 4 * y, column = first_column + 4 * x;
  const float4 sums[4] = {acc0, acc1, acc2, acc3};
  for (uint i = 0; i < 4; i++) {
    if (row + i >= n) break;
    if (column + 3 < n) {
      vstore4(sums[i], 0, c + (row + i) * n + column);
    } else {
      for (uint j = 0; j < 4 && column + j < n; j++) c[(row + i) * n + column + j] = sums[i][j];
    }
  }
}
