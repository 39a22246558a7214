// The bit built-ins on u64 and i64, scalars and vectors.
@group(0) @binding(0) var<storage, read> a: array<u64>;
@group(0) @binding(1) var<storage, read_write> out: array<u64>;

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&a);
    let i = id.x;
    if i >= n { return; }
    let u = a[i];
    let s = bitcast<i64>(u);
    let o = i * 24u;
    out[o] = countOneBits(u);
    out[o + 1u] = countLeadingZeros(u);
    out[o + 2u] = countTrailingZeros(u);
    out[o + 3u] = reverseBits(u);
    out[o + 4u] = bitcast<u64>(countOneBits(s));
    out[o + 5u] = bitcast<u64>(countLeadingZeros(s));
    out[o + 6u] = bitcast<u64>(countTrailingZeros(s));
    out[o + 7u] = bitcast<u64>(reverseBits(s));
    let v = vec2<u64>(u, ~u);
    out[o + 8u] = countOneBits(v).y;
    out[o + 9u] = countLeadingZeros(v).y;
    out[o + 10u] = countTrailingZeros(v).y;
    out[o + 11u] = reverseBits(v).y;
    out[o + 12u] = firstTrailingBit(u) ^ firstLeadingBit(v).y;
    out[o + 13u] = firstLeadingBit(u) ^ firstTrailingBit(v).y;
    out[o + 14u] = bitcast<u64>(firstTrailingBit(s));
    out[o + 15u] = bitcast<u64>(firstLeadingBit(s));
    let at = u32(u & 63lu);
    let count = u32((u >> 8u) & 127lu);
    out[o + 16u] = extractBits(u, at, count);
    out[o + 17u] = bitcast<u64>(extractBits(s, at, count));
    out[o + 18u] = insertBits(u, ~u, at, count);
    out[o + 19u] = bitcast<u64>(insertBits(s, -s, count, at));
    out[o + 20u] = extractBits(u, 70u, 3u) | extractBits(u, 3u, 70u);
    out[o + 21u] = extractBits(v, at, 5u).y ^ insertBits(v, v.yx, 60u, 8u).y;
}
