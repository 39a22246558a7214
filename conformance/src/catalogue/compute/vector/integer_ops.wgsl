@group(0) @binding(0) var<storage, read> a: array<vec4<i32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<i32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<i32>>;

@compute @workgroup_size(64)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    let o = 6u * i;
    out[o] = x + y * 3;
    out[o + 1u] = x.wzyx - y.xxyy;
    out[o + 2u] = select(x, y, x < y);
    out[o + 3u] = vec4<i32>(dot(x, y), i32(any(x == y)), i32(all(x > vec4<i32>(-1000))), i32(x.x > y.x));
    out[o + 4u] = abs(x) + min(x, y) * 2 + max(x, y) - clamp(x, vec4<i32>(-10), vec4<i32>(10));
    let d = abs(y) + vec4<i32>(1);
    out[o + 5u] = x / d + (x % d) * 100;
}
