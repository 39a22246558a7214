// C = A B for square row-major float matrices of order n, the hand-written baseline the
// PyTorch device's matrix product is measured against on a Vulkan device: matmul.cl's design in
// GLSL. A workgroup of 16x16 invocations computes a 64x64 block of C, each invocation a
// contiguous 4x4 block of it held in four vec4 accumulators, from 64x16 and 16x64 blocks of A
// and B staged in shared memory as vec4 groups (four rows of A, or four columns of B, at one
// depth). Edge blocks read zeros past the matrices.
//
//   glslangValidator -V python/benches/raw/matmul.comp -o target/raw_matmul.spv

#version 450

#define TILE 16
#define BLOCK 64

layout(local_size_x = TILE, local_size_y = TILE) in;
layout(std430, set = 0, binding = 0) readonly buffer MatrixA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatrixB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatrixC { float c[]; };
layout(push_constant) uniform Order { uint n; };

shared vec4 a_groups[TILE * TILE];  // [depth][row group]
shared vec4 b_groups[TILE * TILE];  // [depth][column group]

float a_at(uint row, uint depth) { return row < n && depth < n ? a[row * n + depth] : 0.0; }
float b_at(uint depth, uint column) { return depth < n && column < n ? b[depth * n + column] : 0.0; }

void main() {
  const uint x = gl_LocalInvocationID.x, y = gl_LocalInvocationID.y;
  const uint first_row = gl_WorkGroupID.y * BLOCK, first_column = gl_WorkGroupID.x * BLOCK;
  vec4 acc0 = vec4(0.0), acc1 = vec4(0.0), acc2 = vec4(0.0), acc3 = vec4(0.0);
  for (uint depth = 0; depth < n; depth += TILE) {
    // Invocation (x, y) stages depth y of row group x and of column group x.
    const uint d = depth + y, row = first_row + 4 * x, column = first_column + 4 * x;
    a_groups[y * TILE + x] = vec4(a_at(row, d), a_at(row + 1, d), a_at(row + 2, d), a_at(row + 3, d));
    b_groups[y * TILE + x] = vec4(b_at(d, column), b_at(d, column + 1), b_at(d, column + 2), b_at(d, column + 3));
    barrier();
    for (uint k = 0; k < TILE; k++) {
      const vec4 rows = a_groups[k * TILE + y], columns = b_groups[k * TILE + x];
      acc0 = fma(vec4(rows.x), columns, acc0);
      acc1 = fma(vec4(rows.y), columns, acc1);
      acc2 = fma(vec4(rows.z), columns, acc2);
      acc3 = fma(vec4(rows.w), columns, acc3);
    }
    barrier();
  }
  const uint row = first_row + 4 * y, column = first_column + 4 * x;
  const vec4 sums[4] = vec4[4](acc0, acc1, acc2, acc3);
  for (uint i = 0; i < 4 && row + i < n; i++) {
    for (uint j = 0; j < 4 && column + j < n; j++) c[(row + i) * n + column + j] = sums[i][j];
  }
}
