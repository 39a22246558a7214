// Correctly rounded f32 built-ins (the result is the exact value, or exactly the
// inherited-from expression for fract): abs, floor, ceil, round (ties to even), trunc, fract,
// sign, sqrt, min, max, clamp, step, saturate. 14 results per pair.

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
    let o = i * 14u;
    out[o + 0u] = abs(x);
    out[o + 1u] = floor(x);
    out[o + 2u] = ceil(x);
    out[o + 3u] = round(x);
    out[o + 4u] = trunc(x);
    out[o + 5u] = fract(x);
    out[o + 6u] = sign(x);
    out[o + 7u] = sqrt(abs(x));
    out[o + 8u] = min(x, y);
    out[o + 9u] = max(x, y);
    out[o + 10u] = clamp(x, -1.5, 2.5);
    out[o + 11u] = step(y, x);
    out[o + 12u] = saturate(x);
    // The same built-ins on a vector, component-wise.
    out[o + 13u] = dot(round(vec2<f32>(x, y)), vec2<f32>(1.0, 1000.0));
}
