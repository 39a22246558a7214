@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn approximate(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 8u * i;
    out[o] = exp(x);
    out[o + 1u] = log(y);
    out[o + 2u] = sin(x);
    out[o + 3u] = cos(x);
    out[o + 4u] = pow(y, 1.5);
    out[o + 5u] = sqrt(y);
    out[o + 6u] = inverseSqrt(y);
    out[o + 7u] = atan2(x, y);
}
