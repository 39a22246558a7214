// fma, mix and smoothstep, whose accuracy WGSL inherits from an expression (x * y + z,
// x * (1 - t) + y * t, t * t * (3 - 2 * t)): on operands chosen so that every intermediate is
// exact (multiples of 1/8 and edges 4 apart), every valid implementation gives the same
// result. Plus step on a vector. 6 results per element.

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(32)
fn common_functions(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let v = a[i];
    let t = fract(v.w);
    let o = i * 6u;
    out[o + 0u] = fma(v.x, v.y, v.z);
    out[o + 1u] = mix(v.x, v.y, t);
    out[o + 2u] = smoothstep(-2.0, 2.0, v.x);
    out[o + 3u] = smoothstep(2.0, -2.0, v.y);
    out[o + 4u] = dot(step(vec4<f32>(0.0, 0.5, 1.0, -1.0), v), vec4<f32>(1.0, 2.0, 4.0, 8.0));
    out[o + 5u] = mix(vec2<f32>(v.x, v.z), vec2<f32>(v.y, v.w), vec2<f32>(t, 0.5)).y;
}
