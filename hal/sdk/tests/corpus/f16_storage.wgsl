enable f16;

// f16 in storage buffers: arrays with a 2-byte stride, vec2<f16> with a 4-byte stride, and
// arithmetic on vectors of f16.

@group(0) @binding(0) var<storage, read> scalars: array<f16>;
@group(0) @binding(1) var<storage, read> pairs: array<vec2<f16>>;
@group(0) @binding(2) var<storage, read_write> out: array<f16>;

@compute @workgroup_size(64)
fn halves(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&pairs) {
        return;
    }
    let p = pairs[i] * scalars[i] + vec2<f16>(0.25h, -0.5h);
    out[2u * i] = p.y;
    out[2u * i + 1u] = p.x - scalars[i];
}
