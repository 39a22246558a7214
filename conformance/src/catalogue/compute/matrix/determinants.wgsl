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
