// Integer built-ins on vectors of i32 and u32, component-wise: abs, min, max, clamp, sign,
// dot (wrapping), and the vector comparisons. 4 vec4 results per element.

@group(0) @binding(0) var<storage, read> a: array<vec4<i32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<i32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<i32>>;

@compute @workgroup_size(32)
fn int_vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 4u * i;
    out[o + 0u] = abs(x) + min(x, y) * 2 - max(x, y);
    out[o + 1u] = clamp(x, vec4<i32>(-50), vec4<i32>(50)) + sign(y) * 1000;
    let ux = bitcast<vec4<u32>>(x);
    let uy = bitcast<vec4<u32>>(y);
    out[o + 2u] = bitcast<vec4<i32>>(min(ux, uy) ^ max(ux, uy) ^ clamp(ux, vec4<u32>(10u), vec4<u32>(1000000u)));
    out[o + 3u] = vec4<i32>(dot(x, y), bitcast<i32>(dot(ux, uy)), i32(dot(x.xy, y.zw)), i32(dot(vec4<u32>(x < y), vec4<u32>(1u, 2u, 4u, 8u))));
}
