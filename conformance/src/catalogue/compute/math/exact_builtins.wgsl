@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn exact(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 13u * i;
    out[o] = abs(x);
    out[o + 1u] = min(x, y);
    out[o + 2u] = max(x, y);
    out[o + 3u] = clamp(x, -2.5, 3.25);
    out[o + 4u] = floor(x);
    out[o + 5u] = ceil(x);
    out[o + 6u] = trunc(x);
    out[o + 7u] = round(x);
    out[o + 8u] = fract(x);
    out[o + 9u] = sign(x);
    out[o + 10u] = step(y, x);
    out[o + 11u] = fma(x, y, 0.5);
    out[o + 12u] = x * x - y;
}
