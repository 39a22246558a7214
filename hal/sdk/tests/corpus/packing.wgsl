// Packing and unpacking built-ins. pack4x8snorm/unorm and pack2x16snorm/unorm use
// floor(0.5 + scale * clamp(e)) (so -0.5 * 127 = -63.5 packs to -63, not -64); the unpack
// functions divide by the scale (3 ULP); pack4xI8/U8 keep the low 8 bits, the Clamp forms
// saturate; dot4I8Packed/dot4U8Packed multiply 8-bit lanes. The binary16 ones are in
// packing_f16.wgsl.

@group(0) @binding(0) var<storage, read> floats: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@group(0) @binding(3) var<storage, read_write> unpacked: array<vec4<f32>>;

@compute @workgroup_size(32)
fn pack(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&floats) {
        return;
    }
    let v = floats[i];
    let w = words[i];
    let o = 10u * i;
    packed[o + 0u] = pack4x8snorm(v);
    packed[o + 1u] = pack4x8unorm(v);
    packed[o + 2u] = pack2x16snorm(v.xy);
    packed[o + 3u] = pack2x16unorm(v.zw);
    packed[o + 4u] = pack2x16snorm(v.yz) ^ pack2x16unorm(v.xw);
    let iv = vec4<i32>(v * 100.0);
    packed[o + 5u] = pack4xI8(iv);
    packed[o + 6u] = pack4xU8(vec4<u32>(abs(iv)));
    packed[o + 7u] = pack4xI8Clamp(iv) ^ pack4xU8Clamp(vec4<u32>(abs(iv)));
    packed[o + 8u] = bitcast<u32>(dot4I8Packed(w, packed[o + 5u]));
    packed[o + 9u] = dot4U8Packed(w, packed[o + 6u]) ^ bitcast<u32>(dot(unpack4xI8(w), unpack4xI8(packed[o + 5u]))) ^ dot(unpack4xU8(w), vec4<u32>(1u));
    let u = 4u * i;
    unpacked[u + 0u] = unpack4x8snorm(w);
    unpacked[u + 1u] = unpack4x8unorm(w);
    unpacked[u + 2u] = vec4<f32>(unpack2x16snorm(w), unpack2x16unorm(w));
    unpacked[u + 3u] = vec4<f32>(unpack2x16snorm(~w), unpack2x16unorm(w >> 3u));
}
