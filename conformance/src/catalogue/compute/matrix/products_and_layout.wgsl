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
