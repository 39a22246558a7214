// transpose (square and non-square) and determinant (2x2, 3x3, 4x4). Entries are small
// integers: every intermediate of a determinant is a small integer, so the result is exact
// even though WGSL gives determinant no error bound.

@group(0) @binding(0) var<storage, read> m2: array<mat2x2<f32>>;
@group(0) @binding(1) var<storage, read> m3: array<mat3x3<f32>>;
@group(0) @binding(2) var<storage, read> m4: array<mat4x4<f32>>;
@group(0) @binding(3) var<storage, read_write> transposed4: array<mat4x4<f32>>;
@group(0) @binding(4) var<storage, read_write> transposed23: array<mat3x2<f32>>;
@group(0) @binding(5) var<storage, read_write> determinants: array<f32>;

@compute @workgroup_size(8)
fn functions(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&m4) {
        return;
    }
    transposed4[i] = transpose(m4[i]);
    transposed23[i] = transpose(mat2x3<f32>(m3[i][0], m3[i][2]));
    determinants[3u * i] = determinant(m2[i]);
    determinants[3u * i + 1u] = determinant(m3[i]);
    determinants[3u * i + 2u] = determinant(m4[i]);
}
