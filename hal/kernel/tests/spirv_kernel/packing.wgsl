// The pack and unpack built-ins, dot4I8Packed/dot4U8Packed and quantizeToF16 over edge cases:
// signed zeros, infinities, quiet and signalling NaNs, f32 and f16 subnormals, binary16
// ties and overflow, out-of-range and halfway values of the normalized packs, the extremes
// of i32 and u32. The inputs come from the tables below, by invocation id, so the output
// does not depend on the buffer's contents: tests/spirv_kernel/packing.expected holds what the
// CPU interpreter writes (checked by the cpu backend's tests), and the Kernel SPIR-V and the
// OpenCL C translation must write the same words on PoCL.
const EDGES = array<u32, 64>(
    0x00000000u, // +0
    0x80000000u, // -0
    0x7f800000u, // +inf
    0xff800000u, // -inf
    0x7fc00000u, // quiet NaN
    0xffc00001u, // negative quiet NaN, payload
    0x7f800001u, // signalling NaN
    0x7fa00000u, // signalling NaN, top payload
    0x7fbfe000u, // NaN, payload in the top ten bits
    0x00000001u, // smallest f32 subnormal
    0x807fffffu, // largest negative f32 subnormal
    0x00400000u, // f32 subnormal
    0x3f800000u, // 1
    0xbf800000u, // -1
    0x3f000000u, // 0.5
    0xbf000000u, // -0.5
    0x40000000u, // 2
    0xc0000000u, // -2
    0x7f7fffffu, // f32 max
    0xff7fffffu, // -f32 max
    0x3f801000u, // 1 + 2^-11: f16 tie, to even (down)
    0x3f803000u, // 1 + 3 * 2^-11: f16 tie, to even (up)
    0x3f800fffu, // just below a tie
    0x3f801001u, // just above a tie
    0x477fe000u, // 65504, the largest f16
    0x477fefffu, // just below 65520
    0x477ff000u, // 65520: f16 infinity
    0xc77ff000u, // -65520
    0x38800000u, // 2^-14, the smallest normal f16
    0x387fc000u, // the largest f16 subnormal
    0x387fe000u, // halfway to the smallest normal f16
    0x33800000u, // 2^-24, the smallest f16 subnormal
    0x33000000u, // 2^-25: a tie, to 0
    0x33000001u, // just above 2^-25
    0x33400000u, // 1.5 * 2^-24: a tie, to 2 * 2^-24
    0x32ffffffu, // just below 2^-25
    0xb3c00000u, // -3 * 2^-24
    0x35000000u, // 2^-21
    0x3f7fffffu, // just below 1
    0x3f800001u, // just above 1
    0xbf800001u, // just below -1
    0x501502f9u, // 1e10
    0xd01502f9u, // -1e10
    0x3e800000u, // 0.25
    0xbf400000u, // -0.75
    0x3e99999au, // 0.3
    0x3a83126fu, // 0.001
    0x8da24260u, // -1e-30
    0x3b810204u, // (0 + 0.5) / 127: a scaled tie
    0x3f000000u, // (63 + 0.5) / 127: a scaled tie
    0xbf000000u, // (-64 + 0.5) / 127: a scaled tie
    0x3f7efdfcu, // (126 + 0.5) / 127: a scaled tie
    0x3b008081u, // (0 + 0.5) / 255: a scaled tie
    0x3f000000u, // (127 + 0.5) / 255: a scaled tie
    0x3f7f7f7fu, // (254 + 0.5) / 255: a scaled tie
    0x37800100u, // (0 + 0.5) / 32767: a scaled tie
    0x3f000000u, // (16383 + 0.5) / 32767: a scaled tie
    0xbf000000u, // (-16384 + 0.5) / 32767: a scaled tie
    0x37000080u, // (0 + 0.5) / 65535: a scaled tie
    0x3f000000u, // (32767 + 0.5) / 65535: a scaled tie
    0x3f7fff80u, // (65534 + 0.5) / 65535: a scaled tie
    0xc10b6db7u, // -61/7
    0xc10db6dbu, // -62/7
    0xc1100000u, // -63/7
);
// binary16 bit patterns: zeros, subnormals, the normal range's ends, infinities, NaNs.
const HALVES = array<u32, 16>(0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x03ffu, 0x0400u, 0x3c00u, 0xbc00u, 0x7bffu, 0x7c00u, 0xfc00u, 0x7c01u, 0x7e00u, 0xfdffu, 0x3555u, 0x0200u);
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

const WORDS = 28u;

@compute @workgroup_size(64)
fn packing(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    var edges = EDGES;
    var halves = HALVES;
    let bits = vec4<u32>(edges[i % 64u], edges[(i * 5u + 1u) % 64u], edges[(i * 11u + 2u) % 64u], edges[(i * 13u + 3u) % 64u]);
    let v = bitcast<vec4<f32>>(bits);
    // Integers: the same bits (i32 and u32 extremes among them), and small values.
    let small = bitcast<vec4<i32>>(bits) >> vec4<u32>(24u, 23u, 25u, 20u);
    let w = bits.x ^ bits.w;
    let half_word = halves[i % 16u] | (halves[(i * 3u + 5u) % 16u] << 16u);
    let o = WORDS * i;
    out[o + 0u] = pack4x8snorm(v);
    out[o + 1u] = pack4x8unorm(v);
    out[o + 2u] = pack2x16snorm(v.xy);
    out[o + 3u] = pack2x16unorm(v.zw);
    out[o + 4u] = pack2x16float(v.xy);
    out[o + 5u] = pack2x16float(v.zw);
    out[o + 6u] = bitcast<u32>(quantizeToF16(v.x));
    let q = bitcast<vec3<u32>>(quantizeToF16(v.yzw));
    out[o + 7u] = q.x;
    out[o + 8u] = q.y;
    out[o + 9u] = q.z;
    let h = bitcast<vec2<u32>>(unpack2x16float(half_word));
    out[o + 10u] = h.x;
    out[o + 11u] = h.y;
    out[o + 12u] = pack4xI8(bitcast<vec4<i32>>(bits)) ^ (pack4xI8(small) << 1u);
    out[o + 13u] = pack4xU8(bits);
    out[o + 14u] = pack4xI8Clamp(bitcast<vec4<i32>>(bits));
    out[o + 15u] = pack4xI8Clamp(small * 3);
    out[o + 16u] = pack4xU8Clamp(bits);
    out[o + 17u] = pack4xU8Clamp(bitcast<vec4<u32>>(small));
    let si = bitcast<vec4<u32>>(unpack4xI8(w));
    out[o + 18u] = si.x;
    out[o + 19u] = si.y;
    out[o + 20u] = si.z;
    out[o + 21u] = si.w;
    let su = unpack4xU8(w);
    out[o + 22u] = su.x ^ (su.y << 8u);
    out[o + 23u] = su.z ^ (su.w << 16u);
    out[o + 24u] = bitcast<u32>(dot4I8Packed(w, bits.y));
    out[o + 25u] = bitcast<u32>(dot4I8Packed(bits.z, 0x80808080u));
    out[o + 26u] = dot4U8Packed(w, bits.y);
    out[o + 27u] = dot4U8Packed(bits.z, 0xffffffffu);
}
