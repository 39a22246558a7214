// Matrices in storage (column-major; a column of 3 takes 16 bytes), and their products:
// square (2x2, 3x3, 4x4), non-square (mat2x3 * mat3x2 = mat3x3), matrix * vector,
// vector * matrix, matrix * scalar and matrix addition. Entries are small integers, so every
// product is exact whatever order the sums of products are evaluated in.

@group(0) @binding(0) var<storage, read> m2: array<mat2x2<f32>>;
@group(0) @binding(1) var<storage, read> m3: array<mat3x3<f32>>;
@group(0) @binding(2) var<storage, read> m4: array<mat4x4<f32>>;
@group(0) @binding(3) var<storage, read_write> out2: array<mat2x2<f32>>;
@group(0) @binding(4) var<storage, read_write> out3: array<mat3x3<f32>>;
@group(0) @binding(5) var<storage, read_write> out4: array<mat4x4<f32>>;
@group(0) @binding(6) var<storage, read_write> outv: array<vec4<f32>>;

@compute @workgroup_size(8)
fn multiply(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i + 1u >= arrayLength(&m4) {
        return;
    }
    out2[i] = m2[i] * m2[i + 1u] + m2[i] * 2.0;
    out3[2u * i] = m3[i] * m3[i + 1u];
    let a = mat2x3<f32>(m3[i][0], m3[i][1]);
    let b = mat3x2<f32>(m2[i][0], m2[i][1], m2[i + 1u][0]);
    out3[2u * i + 1u] = a * b;
    out4[i] = m4[i] * m4[i + 1u];
    let v = vec4<f32>(1.0, -2.0, 3.0, f32(i));
    outv[3u * i] = m4[i] * v;
    outv[3u * i + 1u] = v * m4[i];
    outv[3u * i + 2u] = vec4<f32>(m3[i] * v.xyz, (v.xy * m2[i]).y);
}
