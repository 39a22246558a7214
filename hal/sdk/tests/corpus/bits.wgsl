// Bit built-ins on u32 and i32: countOneBits, countLeadingZeros, countTrailingZeros,
// reverseBits, firstLeadingBit (unsigned, and signed: the first bit that differs from the
// sign), firstTrailingBit. 11 results per element, as u32 bit patterns.

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn counts(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let u = input[i];
    let s = bitcast<i32>(u);
    let o = i * 11u;
    out[o + 0u] = countOneBits(u);
    out[o + 1u] = bitcast<u32>(countOneBits(s));
    out[o + 2u] = countLeadingZeros(u);
    out[o + 3u] = bitcast<u32>(countLeadingZeros(s));
    out[o + 4u] = countTrailingZeros(u);
    out[o + 5u] = reverseBits(u);
    out[o + 6u] = bitcast<u32>(reverseBits(s));
    out[o + 7u] = firstLeadingBit(u);
    out[o + 8u] = bitcast<u32>(firstLeadingBit(s));
    out[o + 9u] = firstTrailingBit(u);
    out[o + 10u] = bitcast<u32>(firstTrailingBit(s));
}
