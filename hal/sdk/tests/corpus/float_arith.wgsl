// f32 +, -, *, /, negation, sqrt and comparisons on random finite operands (no overflow,
// no subnormals). 8 results per pair.

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = i * 8u;
    out[o + 0u] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = -x;
    out[o + 5u] = sqrt(abs(x));
    out[o + 6u] = f32(u32(x < y) + 2u * u32(x <= y) + 4u * u32(x > y) + 8u * u32(x >= y) + 16u * u32(x == y) + 32u * u32(x != y));
    // Two operations that may be fused (WGSL allows it) give the same result either way:
    // the product by 0.5 is exact.
    out[o + 7u] = x * 0.5 - y;
}
