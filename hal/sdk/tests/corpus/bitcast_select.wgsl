// bitcast between u32, i32 and f32 (scalars and vectors; the bits are kept exactly, NaN
// payloads included), select with scalar and vector conditions, and all/any.

@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read_write> floats: array<f32>;

@compute @workgroup_size(64)
fn bitcast_kernel(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if 2u * i + 1u >= arrayLength(&words) {
        return;
    }
    let w = words[2u * i];
    let w2 = words[2u * i + 1u];
    let f = bitcast<f32>(w);
    floats[2u * i] = f;
    let v = bitcast<vec2<f32>>(vec2<u32>(w2, w));
    floats[2u * i + 1u] = v.x;
    let o = 4u * i;
    out[o + 0u] = bitcast<u32>(f);
    out[o + 1u] = bitcast<u32>(bitcast<i32>(w) ^ -1);
    let back = bitcast<vec2<i32>>(v);
    out[o + 2u] = bitcast<u32>(back.y);
    out[o + 3u] = bitcast<u32>(vec4<f32>(bitcast<vec4<f32>>(vec4<u32>(w, w2, 0u, 0x3f800000u))).w);
}

@compute @workgroup_size(64)
fn select_all_any(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if 2u * i + 1u >= arrayLength(&words) {
        return;
    }
    let x = words[2u * i];
    let y = words[2u * i + 1u];
    let o = 4u * i;
    out[o + 0u] = select(x, y, x < y);
    let c = vec4<bool>(x > y, (x & 1u) == 1u, (y & 2u) == 2u, x == y);
    let s = select(vec4<u32>(1u, 2u, 3u, 4u), vec4<u32>(10u, 20u, 30u, 40u), c);
    out[o + 1u] = s.x + s.y + s.z + s.w;
    let bits = vec3<bool>((x & 1u) != 0u, (x & 2u) != 0u, (x & 4u) != 0u);
    out[o + 2u] = u32(all(bits)) + 2u * u32(any(bits)) + 4u * u32(all(c.xy)) + 8u * u32(any(c.zw));
    out[o + 3u] = bitcast<u32>(select(-1.5, 2.5, all(vec2<bool>(x > 10u, y > 10u))));
}
