// Scalar conversions between i32, u32, f32 and bool.
// Float to integer saturates at the largest value representable in both types (WGSL:
// "the value in T closest to truncate(X) and also exactly representable in the original
// floating point type": 2147483520 for i32, 4294967040 for u32) and truncates toward zero.
// WGSL leaves NaN's conversion indeterminate; xhal defines it as 0 on every backend.
// Integer to float rounds (the CPU backend: to nearest, ties to even).
// u32(i32) and i32(u32) keep the bits. 8 results per element.

@group(0) @binding(0) var<storage, read> floats: array<f32>;
@group(0) @binding(1) var<storage, read> ints: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn convert(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&floats) {
        return;
    }
    let f = floats[i];
    let n = ints[i];
    let o = i * 8u;
    out[o + 0u] = bitcast<u32>(i32(f));
    out[o + 1u] = u32(f);
    out[o + 2u] = bitcast<u32>(f32(n));
    out[o + 3u] = bitcast<u32>(f32(bitcast<u32>(n)));
    out[o + 4u] = u32(n);
    out[o + 5u] = bitcast<u32>(i32(bitcast<u32>(n)));
    out[o + 6u] = u32(bool(f)) + 2u * u32(bool(n)) + 4u * u32(bool(u32(n)));
    out[o + 7u] = bitcast<u32>(vec2<i32>(vec2<f32>(f, -f)).y);
}
