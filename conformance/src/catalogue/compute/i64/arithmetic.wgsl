@group(0) @binding(0) var<storage, read> a: array<i64>;
@group(0) @binding(1) var<storage, read> b: array<i64>;
@group(0) @binding(2) var<storage, read_write> out: array<i64>;

@compute @workgroup_size(64)
fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let ux = bitcast<u64>(x);
    let uy = bitcast<u64>(y);
    let shift = u32(uy & 63lu);
    let o = 11u * i;
    out[o] = x + y;
    out[o + 1u] = x - y;
    out[o + 2u] = x * y;
    out[o + 3u] = x / y;
    out[o + 4u] = x % y;
    out[o + 5u] = bitcast<i64>(ux / uy);
    out[o + 6u] = bitcast<i64>(ux % uy);
    out[o + 7u] = x >> shift;
    out[o + 8u] = bitcast<i64>(ux >> shift);
    out[o + 9u] = bitcast<i64>(ux << shift);
    out[o + 10u] = (x & y) ^ (x | 7li);
}
