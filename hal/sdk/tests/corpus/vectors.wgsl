// vec2, vec3 and vec4 of f32, i32 and u32: swizzles, component-wise operators, scalar
// broadcast, component assignment, constructors from smaller vectors, and indexing with a
// runtime index. Inputs are small multiples of 1/4, so every f32 result is exact.

@group(0) @binding(0) var<storage, read> input: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out_f: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out_i: array<vec4<i32>>;

@compute @workgroup_size(32)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    let o = i * 6u;
    out_f[o + 0u] = v.wzyx;
    out_f[o + 1u] = vec4<f32>(v.xy * v.zw, v.xx + v.yy);
    let t = v.xyz * 2.0 - vec3<f32>(1.0, 2.0, 3.0);
    out_f[o + 2u] = vec4<f32>(t, t.z);
    var m = v;
    m.y = 7.0;
    m.w += m.x;
    m[i % 4u] = -1.5;
    out_f[o + 3u] = m;
    out_f[o + 4u] = 1.0 + v / 4.0;
    out_f[o + 5u] = vec4<f32>(v.zx, v.yw).grab;

    let iv = vec3<i32>(v.xyz * 4.0);
    let jv = vec3<i32>(3, -2, 5);
    let o2 = i * 3u;
    out_i[o2 + 0u] = vec4<i32>(iv * jv - iv.zxy, iv[i % 3u]);
    out_i[o2 + 1u] = vec4<i32>(iv / vec3<i32>(2), (iv % 3).y);
    let uv = vec2<u32>(u32(i), 5u) << vec2<u32>(3u, 1u);
    out_i[o2 + 2u] = vec4<i32>(vec2<i32>(uv), min(iv.xy, jv.yz));
}
