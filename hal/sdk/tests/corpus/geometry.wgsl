// dot and cross (exact: small integer components), length, normalize and distance
// (inherited from sqrt(dot(x, x)) and x / length(x): held to a few ULP).

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> exact: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> approx: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> int_dots: array<i32>;

@compute @workgroup_size(32)
fn geometry(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let u = a[i];
    let v = b[i];
    exact[2u * i] = vec4<f32>(cross(u.xyz, v.xyz), dot(u, v));
    exact[2u * i + 1u] = vec4<f32>(dot(u.xy, v.zw), dot(u.xyz, v.yzw), 0.0, 0.0);
    approx[2u * i] = vec4<f32>(normalize(u.xyz), length(u));
    approx[2u * i + 1u] = vec4<f32>(distance(u, v), length(v.x), distance(u.xy, v.xy), length(u.zw));
    int_dots[i] = dot(vec3<i32>(u.xyz), vec3<i32>(v.xyz)) + dot(vec2<i32>(i32(i), -3), vec2<i32>(7, 5));
}
