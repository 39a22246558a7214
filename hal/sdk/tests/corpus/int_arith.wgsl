// i32 and u32 arithmetic, bitwise and comparison operators and integer built-ins on random
// operands over the whole range. 16 results per element pair, as u32 bit patterns.
// Division and remainder follow WGSL's runtime rules (by zero: e1 and 0; MIN / -1: MIN
// and 0), which the reference implements. Both entry points write `out` (signed results
// bitcast): an entry point's buffers must be bindings 0..n-1 without a gap.

@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn signed(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = bitcast<i32>(a[i]);
    let y = bitcast<i32>(b[i]);
    let o = i * 16u;
    out[o + 0u] = bitcast<u32>(x + y);
    out[o + 1u] = bitcast<u32>(x - y);
    out[o + 2u] = bitcast<u32>(x * y);
    out[o + 3u] = bitcast<u32>(x / y);
    out[o + 4u] = bitcast<u32>(x % y);
    out[o + 5u] = bitcast<u32>(x & y);
    out[o + 6u] = bitcast<u32>(x | y);
    out[o + 7u] = bitcast<u32>(x ^ y);
    out[o + 8u] = bitcast<u32>(~x);
    out[o + 9u] = bitcast<u32>(-y);
    out[o + 10u] = bitcast<u32>(min(x, y));
    out[o + 11u] = bitcast<u32>(max(x, y));
    out[o + 12u] = bitcast<u32>(clamp(x, -1000, 1000));
    out[o + 13u] = bitcast<u32>(sign(x) + 10 * sign(y));
    out[o + 14u] = bitcast<u32>(i32(x < y) + 2 * i32(x <= y) + 4 * i32(x > y) + 8 * i32(x >= y) + 16 * i32(x == y) + 32 * i32(x != y));
    out[o + 15u] = bitcast<u32>(abs(x));
}

@compute @workgroup_size(64)
fn unsigned(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = a[i];
    let y = b[i];
    let o = i * 16u;
    out[o + 0u] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = x % y;
    out[o + 5u] = x & y;
    out[o + 6u] = x | y;
    out[o + 7u] = x ^ y;
    out[o + 8u] = ~x;
    out[o + 9u] = 0u - y;
    out[o + 10u] = min(x, y);
    out[o + 11u] = max(x, y);
    out[o + 12u] = clamp(x, 1000u, 3000000000u);
    out[o + 13u] = (x >> 16u) * (y & 0xffffu);
    out[o + 14u] = u32(x < y) + 2u * u32(x <= y) + 4u * u32(x > y) + 8u * u32(x >= y) + 16u * u32(x == y) + 32u * u32(x != y);
    out[o + 15u] = abs(x);
}
