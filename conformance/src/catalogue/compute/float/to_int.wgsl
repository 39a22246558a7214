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
