@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn bits(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let offset = y % 32u;
    let count = (y >> 8u) % (33u - offset);
    let o = 10u * i;
    out[o] = countOneBits(x);
    out[o + 1u] = reverseBits(x);
    out[o + 2u] = firstLeadingBit(x);
    out[o + 3u] = bitcast<u32>(firstLeadingBit(bitcast<i32>(x)));
    out[o + 4u] = firstTrailingBit(x);
    out[o + 5u] = countLeadingZeros(x);
    out[o + 6u] = countTrailingZeros(x);
    out[o + 7u] = extractBits(x, offset, count);
    out[o + 8u] = bitcast<u32>(extractBits(bitcast<i32>(x), offset, count));
    out[o + 9u] = insertBits(x, y, offset, count);
}
