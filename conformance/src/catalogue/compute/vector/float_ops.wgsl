@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 4u * i;
    out[o] = vec4<f32>(cross(x.xyz, y.xyz), dot(x, y));
    out[o + 1u] = vec4<f32>(normalize(x.xyz), length(x));
    out[o + 2u] = mix(x, y, vec4<f32>(0.25));
    out[o + 3u] = vec4<f32>(distance(x, y), x.y * y.z, max(x.z, y.w), min(x.w, y.x));
}
